//! What the agent hosts share (A1–A5): binary resolution, the sealed environment, the
//! configuration templates, the stream reader's state, the host record and the seal check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::canary::names::Host;
pub use crate::canary::names::SERVER_NAME;
use crate::config::{Key, Settings};

/// A1: the default wall-clock limit of one host run (`timeout=` overrides it).
pub const DEFAULT_HOST_TIMEOUT: Duration = Duration::from_secs(1800);

/// A3: how long the host may take to report its tools (Claude Code's `system`/`init` line)
/// before the step fails; starting the CLI and its MCP server takes about 1–3 s here.
pub const SEAL_REPORT_WAIT: Duration = Duration::from_secs(60);

/// After SIGTERM to the host's process group, how long it gets before SIGKILL.
pub const TERMINATE_GRACE: Duration = Duration::from_secs(3);

/// Environment variables a host receives from the console's environment besides the provider
/// credentials: what a CLI needs to find itself and its locale, nothing of the checkout.
pub(super) const PASSED_ENV: &[&str] =
    &["PATH", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// The operator's network settings a sealed host receives from the console's environment when
/// they are set (A2 keeps everything else out): the standard proxy variables in both cases,
/// the CA bundles Node, OpenSSL and Python clients read, and Claude Code's per-call tool
/// timeout (ms), which bounds a call's wall clock and changes no result. They carry no tool;
/// the host record names them ([`HostRecord::network_variables`]), never their values (a
/// proxy URL can carry a password). The README's pass-through list is this list (tested).
pub const NETWORK_VARIABLES: [&str; 15] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "NODE_USE_ENV_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "MCP_TOOL_TIMEOUT",
];

/// Host variables our host table ([`crate::mcp::delivery::HOST_LIMITS`]) decides instead of the
/// operator: the host gets these values whatever the console's environment says, because every
/// result budget of the server was measured against them. Claude Code: `MAX_MCP_OUTPUT_TOKENS`
/// at its default of 25,000 tokens (2.1.328), under which results of 39,000 characters were
/// delivered whole; an operator's smaller value would make the host replace results that fit
/// our budget by a note the sealed agent cannot follow. Codex's limit is a setting of its
/// config.toml instead ([`super::codex::CODEX_TOOL_OUTPUT_TOKEN_LIMIT`]).
pub fn host_limit_env(host: Host) -> &'static [(&'static str, &'static str)] {
    match host {
        Host::Claude => &[("MAX_MCP_OUTPUT_TOKENS", "25000")],
        Host::Codex | Host::Cursor | Host::Gemini | Host::Opencode => &[],
    }
}

/// The operator's [`NETWORK_VARIABLES`] that are set (non-empty) in the console's
/// environment, in the list's order, as (name, value).
pub fn network_env() -> Vec<(String, String)> {
    NETWORK_VARIABLES
        .iter()
        .filter_map(|k| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| ((*k).to_owned(), v))
        })
        .collect()
}

/// Prefixes of provider variables (credentials, endpoints, model settings) passed through to
/// the host (A1); their values never reach evidence (A4).
const PROVIDER_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "OPENAI_",
    "CLAUDE_CODE_",
    "CODEX_",
    "GEMINI_",
    "GOOGLE_GEMINI_",
];

/// Resolves the host's executable once (A1): `PATCHDIFF_<HOST>_BINARY` (an absolute path, or a
/// name on `PATH`), else the host's usual name on `PATH`. The result is absolute and executable.
///
/// Errors name the variable, the value and what is accepted.
pub fn resolve_binary(host: Host, settings: &Settings) -> anyhow::Result<PathBuf> {
    let variable = host.binary_variable();
    let given = settings.get(host.binary_key()).and_then(|v| v.to_str());
    let (value, from_variable) = match given {
        Some(v) if !v.trim().is_empty() => (v.to_owned(), true),
        _ => (host.default_binary().to_owned(), false),
    };
    let found = find_executable(Path::new(&value), settings.get(Key::SearchPath));
    found.ok_or_else(|| {
        if from_variable {
            anyhow::anyhow!(
                "{variable}={value:?} is not an executable file (accepted: an absolute path to \
                 the {} CLI, or a name found on PATH)",
                host.as_str()
            )
        } else {
            anyhow::anyhow!(
                "the {} CLI `{value}` is not on PATH; install it ({}) or set {variable} to its \
                 executable",
                host.as_str(),
                host.install_hint()
            )
        }
    })
}

/// An absolute, executable regular file for `name` (a path, or a bare name looked up on PATH).
fn find_executable(name: &Path, search_path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.components().count() > 1 || name.is_absolute() {
        let p = std::path::absolute(name).ok()?;
        return is_exec(&p).then_some(p);
    }
    search_path.and_then(|paths| {
        std::env::split_paths(paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_absolute() && is_exec(p))
    })
}

/// The host CLI's own version line (`claude --version`), or why it could not be read.
pub async fn host_version(binary: &Path) -> String {
    let run = tokio::process::Command::new(binary)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(20), run).await {
        Ok(Ok(out)) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        Ok(Ok(out)) => format!("unknown (--version exited {})", out.status),
        Ok(Err(e)) => format!("unknown (--version: {e})"),
        Err(_) => "unknown (--version did not answer in 20 s)".to_owned(),
    }
}

/// Provider credentials and settings passed to the host: every variable of the console's
/// environment with a provider prefix.
pub fn provider_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| PROVIDER_PREFIXES.iter().any(|p| k.starts_with(p)))
        .collect()
}

/// Replaces every credential value in `text` with `[redacted:NAME]` (A4): the one redactor
/// of [`crate::redact`], built from the provider variables passed to the host.
pub use crate::redact::Redactor;

/// The agent-host configuration templates in `config/hosts/`, compiled in. The
/// printer and the host launcher fill in the server's `command` and `env`; everything else is
/// printed as written there. Each parses and names exactly the six observed tools (tested).
pub mod templates {
    /// Claude Code's `.mcp.json`.
    pub const CLAUDE_MCP: &str = include_str!("../../../config/hosts/claude.mcp.json");
    /// Claude Code's settings: allow the six observed tools, deny the native ones (A2).
    pub const CLAUDE_SETTINGS: &str = include_str!("../../../config/hosts/claude.settings.json");
    /// Cursor's `.cursor/mcp.json`.
    pub const CURSOR_MCP: &str = include_str!("../../../config/hosts/cursor.mcp.json");
    /// Codex's `~/.codex/config.toml`, up to its (empty) `[mcp_servers.patchdiff.env]` table.
    pub const CODEX_CONFIG: &str = include_str!("../../../config/hosts/codex.config.toml");
    /// Gemini CLI's `~/.gemini/settings.json`: the server, trusted, and `tools.core` naming
    /// exactly the six (A2).
    pub const GEMINI_SETTINGS: &str = include_str!("../../../config/hosts/gemini.settings.json");
    /// opencode's `opencode.json`: the server, and `permission` denying every tool but the six.
    pub const OPENCODE_CONFIG: &str = include_str!("../../../config/hosts/opencode.json");
}

/// Parses a compiled-in template; they are fixed at build time and parsed by the tests, so a
/// failure here is a build defect, not input.
pub(super) fn template_json(template: &str) -> Value {
    serde_json::from_str(template).expect("config/hosts templates are valid JSON (tested)")
}

/// An `mcpServers` template with the patchdiff server's `command` and `env` filled in.
pub(super) fn mcp_servers_json(template: &str, exe: &str, env: &[(String, String)]) -> Value {
    let mut config = template_json(template);
    let server = &mut config["mcpServers"][SERVER_NAME];
    server["command"] = Value::String(exe.to_owned());
    server["env"] = Value::Object(
        env.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    );
    config
}

/// What the step asks of the host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRun {
    pub host: Host,
    pub binary: PathBuf,
    pub model: String,
    pub max_turns: Option<u32>,
    pub timeout: Duration,
}

/// Files and directories of one host run, all inside the run directory except `home`.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// The sealed working directory: holds only `agent-brief.md` (A2).
    pub workdir: PathBuf,
    /// The evidence copy of the MCP configuration the host is given, in the run directory,
    /// with every credential redacted; the host reads [`HostPaths::host_mcp_config`].
    pub mcp_config: PathBuf,
    /// The host settings (tool permissions) the host is given.
    pub settings: PathBuf,
    /// `HOME` and the host's configuration directory: private, outside the evidence, removed
    /// after the run (the host may keep credential-derived state there).
    pub home: PathBuf,
}

impl HostPaths {
    /// The MCP configuration the host reads: in its private `home`, never in the evidence,
    /// because it carries the observed process's real environment (a database password).
    pub fn host_mcp_config(&self) -> PathBuf {
        self.home.join("patchdiff.mcp.json")
    }
}

/// Live progress of a host run, shared with the console while the step runs (U1).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostProgress {
    pub host: String,
    pub pid: Option<u32>,
    /// Unix ms when the host was started.
    pub started_ms: f64,
    /// Model turns so far (assistant messages).
    pub turns: u64,
    /// Tool calls so far, by tool name.
    pub tool_calls: BTreeMap<String, u64>,
    pub last_tool: Option<String>,
    /// `running`, `sealed`, or how it ended (`exited 0`, `timed out`, `seal broken`, …).
    pub state: String,
}

/// The shared progress cell: the step writes, the console reads.
pub type SharedProgress = Arc<Mutex<Option<HostProgress>>>;

/// What the host's stream said about its seal (A3).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SealReport {
    /// Tools the host offers the model, as it listed them.
    pub tools: Vec<String>,
    /// MCP servers the host connected, `name: status`.
    pub mcp_servers: Vec<String>,
    /// Why the seal does not hold; `None` when it does.
    pub problem: Option<String>,
}

/// A4: the record of one host run (`agent.<host>.json` in the evidence, and the report).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostRecord {
    pub host: String,
    pub binary: String,
    pub version: String,
    /// The host's pid, which is also its process group (A1).
    pub pid: Option<u32>,
    pub requested_model: String,
    /// Models the host reported using (its init line and usage by model).
    pub reported_models: Vec<String>,
    pub max_turns: Option<u32>,
    pub timeout_s: u64,
    pub session_id: Option<String>,
    pub seal: SealReport,
    /// The model's own answers as the host's stream
    /// shows them (Claude Code: assistant messages by id, not the `<synthetic>` ones it writes
    /// for an API error; Codex: each tool call and message item). Zero means the agent never
    /// acted (item 3).
    pub turns: u64,
    /// The host's own turn count (Claude Code `num_turns`, which counts a refused or cut-off
    /// request too; Codex's `turn.started` lines, one per prompt), raw beside `turns`.
    pub host_turns: Option<u64>,
    /// Tool calls the model made, by tool (the six's names without the host's prefix).
    pub tool_calls: BTreeMap<String, u64>,
    /// The sum of `tool_calls`.
    pub tool_calls_total: u64,
    /// Tool calls that failed, by tool and reason code, from the observed
    /// process's wire log (rejected receipts' `reason_codes`, `isError` results' `error.code`,
    /// JSON-RPC errors); see [`crate::canary::outcome::tool_errors_in_wire_log`].
    pub tool_errors: BTreeMap<String, BTreeMap<String, u64>>,
    /// Every input token the model was sent, cached
    /// or not (Claude Code: `input_tokens` + `cache_creation_input_tokens` +
    /// `cache_read_input_tokens`; Codex: `input_tokens`); `None` when the host reported none.
    pub input_tokens: Option<u64>,
    /// Output tokens (reasoning included, as both hosts count them).
    pub output_tokens: Option<u64>,
    /// Input tokens served from the provider's prompt cache (Claude Code
    /// `cache_read_input_tokens`; Codex `cached_input_tokens`).
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache (Claude Code `cache_creation_input_tokens`;
    /// Codex `cache_write_input_tokens`, 0 against the Responses API, which names none).
    pub cache_write_tokens: Option<u64>,
    /// Where the token figures come from: `result` (the host's final totals), `messages` (summed
    /// per model answer: the host ended without its result line) or `turns` (Codex's
    /// `turn.completed` lines summed); `none` when it reported nothing.
    pub usage_source: String,
    /// The host's usage figures exactly as it reported them (raw, beside the normalised ones):
    /// Claude Code's result `usage`, or the per-message figures summed by field; Codex's
    /// `turn.completed` usage summed by field.
    pub usage: Value,
    /// The cost the host reported (Claude Code `total_cost_usd`); Codex gives none.
    pub cost_usd: Option<f64>,
    /// The host's own duration figure, when it gave one.
    pub host_duration_ms: Option<u64>,
    /// Wall-clock duration of the step's host run.
    pub duration_ms: u64,
    /// `duration_ms` in minutes.
    pub minutes: f64,
    /// The provider's error the host reported (Claude Code: `api_error_status` and the
    /// message; Codex: a failed turn's message), if any.
    pub provider_error: Option<String>,
    /// The host's final result line: `success`, `error_max_turns`, …
    pub result: Option<String>,
    pub exit: String,
    pub timed_out: bool,
    /// Names (never values) of the provider variables the host received.
    pub provider_variables: Vec<String>,
    /// Names (never values: a proxy URL can carry a password) of the operator's network
    /// settings the host received ([`NETWORK_VARIABLES`] that were set).
    pub network_variables: Vec<String>,
    /// Names of the variables our host table set for the host whatever the operator's
    /// environment said ([`host_limit_env`]).
    pub host_limit_variables: Vec<String>,
}

/// Reads a host's JSON event stream line by line (A3, A4).
#[derive(Debug, Default)]
pub struct StreamState {
    pub host: Option<Host>,
    pub seal: Option<SealReport>,
    pub turns: u64,
    pub(super) message_ids: std::collections::BTreeSet<String>,
    pub tool_calls: BTreeMap<String, u64>,
    pub last_tool: Option<String>,
    pub session_id: Option<String>,
    pub reported_models: Vec<String>,
    pub usage: Value,
    pub cost_usd: Option<f64>,
    pub host_duration_ms: Option<u64>,
    pub result: Option<String>,
    pub result_is_error: bool,
    /// The host's own turn count (Claude Code's result `num_turns`; Codex's `turn.started`
    /// lines), kept beside [`StreamState::turns`].
    pub host_turns: Option<u64>,
    /// The provider's error, as the host reported it (HTTP status and message).
    pub provider_error: Option<String>,
    /// Claude Code: each model answer's usage by message id (a message's blocks repeat it).
    pub(super) message_usage: BTreeMap<String, Value>,
    /// Codex: the usage of each completed turn.
    pub(super) turn_usage: Vec<Value>,
    /// A tool call outside the six (A3 for hosts that do not list their tools up front).
    pub foreign_call: Option<String>,
    /// Codex: a configuration warning seen before the first turn.
    pub(super) codex_config_problem: Option<String>,
    /// Gemini CLI: the previous line was a chunk of the model's text (one answer, many lines).
    pub(super) in_text: bool,
}

impl StreamState {
    pub fn new(host: Host) -> Self {
        Self {
            host: Some(host),
            usage: Value::Null,
            ..Self::default()
        }
    }

    pub(super) fn note_model(&mut self, model: &str) {
        if !model.is_empty() && !self.reported_models.iter().any(|m| m == model) {
            self.reported_models.push(model.to_owned());
        }
    }

    /// Counts a call of `name` as the host names it, under the tool's own name.
    pub(super) fn note_tool(&mut self, name: &str) {
        let prefix = match self.host {
            Some(Host::Claude) => format!("mcp__{SERVER_NAME}__"),
            Some(Host::Gemini) => format!("mcp_{SERVER_NAME}_"),
            Some(Host::Opencode) => format!("{SERVER_NAME}_"),
            _ => String::new(),
        };
        let short = name.strip_prefix(&prefix).unwrap_or(name).to_owned();
        *self.tool_calls.entry(short.clone()).or_default() += 1;
        self.last_tool = Some(short);
    }
}

impl StreamState {
    /// The host's token figures normalised (see [`HostRecord::input_tokens`])
    /// with their source, and the raw figures they came from.
    pub fn normalized_usage(&self) -> NormalizedUsage {
        let (raw, source) = match self.host {
            Some(Host::Claude) if self.usage.is_object() => (self.usage.clone(), "result"),
            Some(Host::Claude) if !self.message_usage.is_empty() => (
                sum_fields(&self.message_usage.values().cloned().collect::<Vec<_>>()),
                "messages",
            ),
            Some(Host::Codex) | Some(Host::Cursor) | Some(Host::Opencode)
                if !self.turn_usage.is_empty() =>
            {
                (self.usage.clone(), "turns")
            }
            Some(Host::Gemini) if self.usage.is_object() => (self.usage.clone(), "result"),
            _ => {
                return NormalizedUsage {
                    source: "none",
                    raw: Value::Null,
                    ..NormalizedUsage::default()
                };
            }
        };
        let n = |k: &str| raw[k].as_u64();
        match self.host {
            Some(Host::Claude) => {
                let (input, write, read) = (
                    n("input_tokens"),
                    n("cache_creation_input_tokens"),
                    n("cache_read_input_tokens"),
                );
                NormalizedUsage {
                    input_tokens: input.map(|i| i + write.unwrap_or(0) + read.unwrap_or(0)),
                    output_tokens: n("output_tokens"),
                    cache_read_tokens: read,
                    cache_write_tokens: write,
                    source,
                    raw,
                }
            }
            // Gemini CLI's result `stats`: `input_tokens` counts the cached ones too.
            Some(Host::Gemini) => NormalizedUsage {
                input_tokens: n("input_tokens"),
                output_tokens: n("output_tokens"),
                cache_read_tokens: n("cached"),
                cache_write_tokens: None,
                source,
                raw,
            },
            // opencode's `step_finish` tokens: `input` leaves the cache out.
            Some(Host::Opencode) => {
                let (input, read, write) = (n("input"), n("cache_read"), n("cache_write"));
                NormalizedUsage {
                    input_tokens: input.map(|i| i + read.unwrap_or(0) + write.unwrap_or(0)),
                    output_tokens: n("output"),
                    cache_read_tokens: read,
                    cache_write_tokens: write,
                    source,
                    raw,
                }
            }
            _ => NormalizedUsage {
                input_tokens: n("input_tokens"),
                output_tokens: n("output_tokens"),
                cache_read_tokens: n("cached_input_tokens"),
                cache_write_tokens: n("cache_write_input_tokens"),
                source,
                raw,
            },
        }
    }
}

/// A host's token figures in the same terms for every host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NormalizedUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    /// `result`, `messages`, `turns` or `none` (see [`HostRecord::usage_source`]).
    pub source: &'static str,
    /// The figures as the host gave them.
    pub raw: Value,
}

/// The field-wise sum of the top-level integer fields of `objects` (nested objects are left
/// out: they are breakdowns of the top-level figures).
pub(super) fn sum_fields(objects: &[Value]) -> Value {
    let mut sum = serde_json::Map::new();
    for o in objects.iter().filter_map(Value::as_object) {
        for (k, v) in o {
            if let Some(n) = v.as_u64() {
                let total = sum.get(k).and_then(Value::as_u64).unwrap_or(0) + n;
                sum.insert(k.clone(), Value::from(total));
            }
        }
    }
    Value::Object(sum)
}

pub(super) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A3: the host's tools must be exactly the six observed tools of our one server, and that
/// server its only MCP server, connected.
pub fn check_seal(host: Host, tools: &[String], servers: &[(String, String)]) -> SealReport {
    let mut expected = host.sealed_tool_names();
    expected.sort();
    let mut seen = tools.to_vec();
    seen.sort();
    let extra: Vec<&String> = seen.iter().filter(|t| !expected.contains(t)).collect();
    let missing: Vec<&String> = expected.iter().filter(|t| !seen.contains(t)).collect();
    let mut problems = Vec::new();
    if !extra.is_empty() {
        problems.push(format!(
            "the host offers tools outside the six: {}",
            join(&extra)
        ));
    }
    if !missing.is_empty() {
        problems.push(format!(
            "the host does not offer observed tools: {}",
            join(&missing)
        ));
    }
    let others: Vec<&String> = servers
        .iter()
        .map(|(n, _)| n)
        .filter(|n| *n != SERVER_NAME)
        .collect();
    if !others.is_empty() {
        problems.push(format!(
            "other MCP servers are connected: {}",
            join(&others)
        ));
    }
    match servers.iter().find(|(n, _)| n == SERVER_NAME) {
        None => problems.push(format!("the `{SERVER_NAME}` MCP server is not listed")),
        Some((_, status)) if status != "connected" => problems.push(format!(
            "the `{SERVER_NAME}` MCP server is {status}, not connected"
        )),
        Some(_) => {}
    }
    SealReport {
        tools: tools.to_vec(),
        mcp_servers: servers.iter().map(|(n, s)| format!("{n}: {s}")).collect(),
        problem: (!problems.is_empty()).then(|| problems.join("; ")),
    }
}

fn join(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tools the newest `tools/list` result in an MCP wire log offered (C3 on the process the
/// host started), or `None` before there is one. With `pid`, only that process's messages
/// count (several processes may share the log the printed configuration names).
pub fn listed_tools_in_wire_log(log: &str, pid: Option<u32>) -> Option<Vec<String>> {
    crate::evidence::wire_messages(log)
        .iter()
        .rev()
        .filter(|m| pid.is_none_or(|p| m.pid == p))
        .find_map(|m| m.message["result"]["tools"].as_array().cloned())
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
}

/// The pid of the newest process that wrote perf events to `text` (the host-started observed
/// process writes its own file, so any pid there is one the host started).
pub fn newest_pid(perf_events: &str) -> Option<u32> {
    perf_events
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
}

/// What the run manifest records of the agent host a script will launch (A4), resolved before
/// `init`: `host`, `binary`, `version`, `requested_model`. A binary that does not resolve is
/// recorded as `binary: null` with `binary_error` (as [`resolve_binary`] words it): the
/// `agent` step then fails before the agent acted and the run is `infra_abort`.
pub async fn plan(host: Host, model: Option<&str>, settings: &Settings) -> Value {
    match resolve_binary(host, settings) {
        Ok(binary) => {
            let version = host_version(&binary).await;
            serde_json::json!({
                "host": host.as_str(), "binary": binary, "version": version,
                "requested_model": model,
            })
        }
        Err(e) => serde_json::json!({
            "host": host.as_str(), "binary": null, "binary_error": format!("{e:#}"),
            "version": null, "requested_model": model,
        }),
    }
}

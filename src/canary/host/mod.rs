//! Real agent hosts (SPEC A1–A5): the console launches an agent host CLI (Claude Code, Codex)
//! headless against an observed process the host itself starts from the run's MCP
//! configuration, seals it, checks the seal from the host's own event stream, and keeps the
//! stream as evidence.
//!
//! The pieces here are pure or process-local: binary resolution, the host's command line and
//! environment, the host's MCP configuration file, the stream reader ([`StreamState`]) that
//! turns the host's JSON lines into progress and a [`HostRecord`], the seal check, and
//! credential redaction. The agent host step (`steps/agent_host`) drives them in the `agent
//! claude|codex` step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub mod claude;
pub mod codex;
pub mod cursor;

pub use claude::{claude_mcp_config, claude_settings};
pub use codex::{codex_config, codex_server_config};
pub use cursor::cursor_mcp_config;

use super::names::Host;
pub use super::names::SERVER_NAME;
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
const PASSED_ENV: &[&str] = &["PATH", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// Prefixes of provider variables (credentials, endpoints, model settings) passed through to
/// the host (A1); their values never reach evidence (A4).
const PROVIDER_PREFIXES: &[&str] = &["ANTHROPIC_", "OPENAI_", "CLAUDE_CODE_", "CODEX_"];

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
}

/// Parses a compiled-in template; they are fixed at build time and parsed by the tests, so a
/// failure here is a build defect, not input.
fn template_json(template: &str) -> Value {
    serde_json::from_str(template).expect("config/hosts templates are valid JSON (tested)")
}

/// An `mcpServers` template with the patchdiff server's `command` and `env` filled in.
fn mcp_servers_json(template: &str, exe: &str, env: &[(String, String)]) -> Value {
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

/// The command line of a headless sealed host run (A1, A2): each host's own
/// ([`claude::args`], [`codex::args`]). `prompt` is the agent brief.
pub fn host_args(run: &HostRun, paths: &HostPaths, prompt: &str) -> Vec<String> {
    match run.host {
        Host::Claude => claude::args(run, paths, prompt),
        Host::Codex | Host::Cursor => codex::args(run, paths, prompt),
    }
}

/// The host's environment: a clean slate plus [`PASSED_ENV`], the provider variables and a
/// private `HOME` (A2: no user settings, hooks or memory files of the operator reach the host).
pub fn host_env(
    host: Host,
    paths: &HostPaths,
    provider: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = PASSED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect();
    env.extend(provider.iter().cloned());
    env.push(("HOME".into(), paths.home.display().to_string()));
    match host {
        Host::Claude => {
            env.push((
                "CLAUDE_CONFIG_DIR".into(),
                paths.home.join(".claude").display().to_string(),
            ));
            env.push((
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                "1".into(),
            ));
            env.push(("DISABLE_AUTOUPDATER".into(), "1".into()));
            env.push(("ENABLE_TOOL_SEARCH".into(), "false".into()));
        }
        Host::Codex | Host::Cursor => {
            env.push((
                "CODEX_HOME".into(),
                paths.home.join(".codex").display().to_string(),
            ));
        }
    }
    env
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
    /// JSON-RPC errors); see [`super::outcome::tool_errors_in_wire_log`].
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
}

/// Reads a host's JSON event stream line by line (A3, A4).
#[derive(Debug, Default)]
pub struct StreamState {
    pub host: Option<Host>,
    pub seal: Option<SealReport>,
    pub turns: u64,
    message_ids: std::collections::BTreeSet<String>,
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
    message_usage: BTreeMap<String, Value>,
    /// Codex: the usage of each completed turn.
    turn_usage: Vec<Value>,
    /// A tool call outside the six (A3 for hosts that do not list their tools up front).
    pub foreign_call: Option<String>,
    /// Codex: a configuration warning seen before the first turn.
    codex_config_problem: Option<String>,
}

impl StreamState {
    pub fn new(host: Host) -> Self {
        Self {
            host: Some(host),
            usage: Value::Null,
            ..Self::default()
        }
    }

    /// Takes one line of the host's stream. Lines that are not JSON objects are ignored (a host
    /// may print notices); they are still kept in the evidence by the caller.
    pub fn observe(&mut self, line: &str) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        match self.host {
            Some(Host::Claude) => self.observe_claude(&event),
            Some(Host::Codex) | Some(Host::Cursor) => self.observe_codex(&event),
            None => {}
        }
    }

    fn note_model(&mut self, model: &str) {
        if !model.is_empty() && !self.reported_models.iter().any(|m| m == model) {
            self.reported_models.push(model.to_owned());
        }
    }

    fn note_tool(&mut self, name: &str) {
        let short = name
            .strip_prefix(&format!("mcp__{SERVER_NAME}__"))
            .unwrap_or(name)
            .to_owned();
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
            Some(Host::Codex) | Some(Host::Cursor) if !self.turn_usage.is_empty() => {
                (self.usage.clone(), "turns")
            }
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
fn sum_fields(objects: &[Value]) -> Value {
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

fn strings(v: &Value) -> Vec<String> {
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

/// One-line summary of a host stream line for the evidence viewer, `None` when `event` is not
/// one (Claude Code: `system`, `assistant`, `user`, `result`; Codex: `thread.*`, `turn.*`,
/// `item.*`).
pub fn stream_line_summary(event: &Value) -> Option<String> {
    // `agent.<host>.jsonl` keeps each line as `{ts_ms, seq, raw, prev_sha256}`.
    if event.get("type").is_none()
        && let Some(raw) = event.get("raw").and_then(Value::as_str)
        && event.get("direction").is_none()
    {
        let inner: Value = serde_json::from_str(raw).ok()?;
        return stream_line_summary(&inner);
    }
    let kind = event.get("type")?.as_str()?;
    let text = match kind {
        "system" => claude::system_summary(event),
        "assistant" => format!("model {}", claude::blocks_summary(&event["message"])),
        "user" => format!("host {}", claude::blocks_summary(&event["message"])),
        "result" => format!(
            "result {} · {} turns · {} ms{}",
            event["subtype"].as_str().unwrap_or("?"),
            event["num_turns"],
            event["duration_ms"],
            event["total_cost_usd"]
                .as_f64()
                .map_or(String::new(), |c| format!(" · ${c:.4}"))
        ),
        k if k.starts_with("item.") => format!(
            "{k} {} {}",
            event["item"]["type"].as_str().unwrap_or("?"),
            event["item"]["tool"].as_str().unwrap_or("")
        ),
        k if k.starts_with("thread.") || k.starts_with("turn.") || k == "error" => k.to_owned(),
        _ => return None,
    };
    Some(text.trim_end().to_owned())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SPEC M2's six, written out.
    const SIX: [&str; 6] = [
        "patchdiff_read_target",
        "patchdiff_find_occurrences",
        "patchdiff_observe_scope",
        "patchdiff_submit_observed_operations",
        "patchdiff_save",
        "patchdiff_replay",
    ];

    #[test]
    fn the_claude_and_cursor_templates_are_filled_with_the_command_and_env_only() {
        let env = [(Key::McpProfile.variable().to_owned(), "observed".to_owned())];
        for (config, typed) in [
            (claude_mcp_config("/opt/pd", &env), true),
            (cursor_mcp_config("/opt/pd", &env), false),
        ] {
            let servers = config["mcpServers"].as_object().expect("mcpServers");
            assert_eq!(servers.keys().collect::<Vec<_>>(), ["patchdiff"]);
            let server = &servers["patchdiff"];
            assert_eq!(server["command"], "/opt/pd");
            assert_eq!(server["args"], json!(["mcp"]));
            assert_eq!(
                server["env"],
                json!({(Key::McpProfile.variable()): "observed"})
            );
            assert_eq!(server.get("type") == Some(&json!("stdio")), typed);
        }
    }

    #[test]
    fn the_claude_settings_template_allows_exactly_the_six_and_denies_the_native_tools() {
        let settings = claude_settings();
        let allow: Vec<String> = SIX.iter().map(|t| format!("mcp__patchdiff__{t}")).collect();
        assert_eq!(settings["permissions"]["allow"], json!(allow));
        let deny = settings["permissions"]["deny"].as_array().expect("deny");
        for native in ["Bash", "Edit", "Write", "Read", "WebFetch"] {
            assert!(deny.contains(&json!(native)), "{native} is denied");
        }
        assert_eq!(settings["enableAllProjectMcpServers"], false);
    }

    #[test]
    fn the_codex_template_is_sealed_to_the_six_and_takes_the_command_and_env() {
        let env = [(
            Key::DatabaseUrl.variable().to_owned(),
            "/tmp/a \"b\".sqlite".to_owned(),
        )];
        let text = codex_server_config("/opt/p d/patchdiff", &env);
        let table: toml::Table = text.parse().expect("valid TOML");
        let server = &table["mcp_servers"]["patchdiff"];
        assert_eq!(server["command"].as_str(), Some("/opt/p d/patchdiff"));
        assert_eq!(server["required"].as_bool(), Some(true));
        let tools: Vec<&str> = server["enabled_tools"]
            .as_array()
            .expect("enabled_tools")
            .iter()
            .filter_map(|t| t.as_str())
            .collect();
        assert_eq!(tools, SIX);
        assert_eq!(
            server["env"][Key::DatabaseUrl.variable()].as_str(),
            Some("/tmp/a \"b\".sqlite")
        );
    }

    fn init_line(tools: &[&str], servers: &[(&str, &str)]) -> String {
        json!({
            "type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-x",
            "tools": tools,
            "mcp_servers": servers.iter().map(|(n, s)| json!({"name": n, "status": s})).collect::<Vec<_>>(),
        })
        .to_string()
    }

    fn six() -> Vec<String> {
        Host::Claude.sealed_tool_names()
    }

    #[test]
    fn the_seal_holds_for_exactly_the_six_tools_of_one_connected_server() {
        let tools = six();
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        let mut state = StreamState::new(Host::Claude);
        state.observe(&init_line(&names, &[("patchdiff", "connected")]));
        let seal = state.seal.expect("init seen");
        assert_eq!(seal.problem, None);
        assert_eq!(seal.tools.len(), 6);
        assert_eq!(state.session_id.as_deref(), Some("s-1"));
    }

    #[test]
    fn a_native_tool_a_missing_tool_or_another_server_breaks_the_seal() {
        let mut tools: Vec<String> = six();
        tools.push("Bash".into());
        let seal = check_seal(
            Host::Claude,
            &tools,
            &[("patchdiff".into(), "connected".into())],
        );
        assert!(
            seal.problem.as_deref().unwrap().contains("Bash"),
            "{seal:?}"
        );

        let five = &six()[1..];
        let seal = check_seal(
            Host::Claude,
            five,
            &[("patchdiff".into(), "connected".into())],
        );
        let problem = seal.problem.unwrap();
        assert!(problem.contains(&six()[0]), "{problem}");

        let seal = check_seal(
            Host::Claude,
            &six(),
            &[
                ("patchdiff".into(), "connected".into()),
                ("github".into(), "connected".into()),
            ],
        );
        assert!(seal.problem.unwrap().contains("github"));

        let seal = check_seal(
            Host::Claude,
            &six(),
            &[("patchdiff".into(), "failed".into())],
        );
        assert!(seal.problem.unwrap().contains("failed, not connected"));
    }

    #[test]
    fn tool_calls_turns_and_the_result_are_counted_from_the_stream() {
        let mut state = StreamState::new(Host::Claude);
        let assistant = |id: &str, tool: &str| {
            json!({"type": "assistant", "message": {"id": id, "model": "claude-x", "content": [
                {"type": "tool_use", "id": "t", "name": format!("mcp__patchdiff__{tool}"), "input": {}}
            ]}})
            .to_string()
        };
        state.observe(&assistant("m1", "patchdiff_read_target"));
        // Claude Code may repeat a message id for a second content block of the same turn.
        state.observe(&assistant("m1", "patchdiff_observe_scope"));
        state.observe(&assistant("m2", "patchdiff_read_target"));
        state.observe("not json at all");
        assert_eq!(state.turns, 2);
        assert_eq!(state.tool_calls["patchdiff_read_target"], 2);
        assert_eq!(state.last_tool.as_deref(), Some("patchdiff_read_target"));
        state.observe(
            &json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 3,
                    "duration_ms": 2100, "total_cost_usd": 0.25,
                    "usage": {"input_tokens": 40, "output_tokens": 7},
                    "modelUsage": {"claude-y": {}}})
            .to_string(),
        );
        // The model answered twice; the host's own count stays beside it.
        assert_eq!(state.turns, 2);
        assert_eq!(state.host_turns, Some(3));
        assert_eq!(state.result.as_deref(), Some("success"));
        assert_eq!(state.cost_usd, Some(0.25));
        assert_eq!(state.host_duration_ms, Some(2100));
        assert_eq!(state.usage["output_tokens"], 7);
        assert_eq!(state.reported_models, ["claude-x", "claude-y"]);
    }

    #[test]
    fn a_provider_error_is_no_model_turn_and_is_recorded_with_its_status() {
        // Claude Code 2.1.328's lines for a 529 at the first request (trimmed).
        let mut state = StreamState::new(Host::Claude);
        state.observe(
            &json!({"type": "assistant", "is_api_error_message": true, "api_error_status": 529,
                    "api_error_type": "overloaded_error", "error": "server_error",
                    "message": {"id": "9aff", "model": "<synthetic>", "content": [
                        {"type": "text", "text": "API Error: 529 Overloaded"}]}})
            .to_string(),
        );
        state.observe(
            &json!({"type": "result", "subtype": "success", "is_error": true, "num_turns": 1,
                    "api_error_status": 529, "api_error_type": "overloaded_error",
                    "result": "API Error: 529 Overloaded", "total_cost_usd": 0,
                    "usage": {"input_tokens": 0, "output_tokens": 0}})
            .to_string(),
        );
        assert_eq!(state.turns, 0, "the host's own count is not a model turn");
        assert_eq!(state.host_turns, Some(1));
        assert_eq!(
            state.provider_error.as_deref(),
            Some("HTTP 529 overloaded_error: API Error: 529 Overloaded")
        );
        assert!(state.result_is_error);
    }

    #[test]
    fn claude_usage_is_normalised_from_the_result_or_else_summed_per_message() {
        let usage = |input: u64| {
            json!({"input_tokens": input, "cache_creation_input_tokens": 3,
                   "cache_read_input_tokens": 20, "output_tokens": 10,
                   "server_tool_use": {"web_search_requests": 0}})
        };
        let answer = |id: &str, input: u64| {
            json!({"type": "assistant", "message": {"id": id, "model": "m", "usage": usage(input),
                   "content": [{"type": "text", "text": "x"}]}})
            .to_string()
        };
        let mut state = StreamState::new(Host::Claude);
        state.observe(&answer("m1", 10));
        // A second block of the same answer repeats its usage: counted once.
        state.observe(&answer("m1", 10));
        state.observe(&answer("m2", 7));
        let u = state.normalized_usage();
        assert_eq!(u.source, "messages");
        assert_eq!(u.input_tokens, Some(17 + 6 + 40));
        assert_eq!(u.cache_read_tokens, Some(40));
        assert_eq!(u.cache_write_tokens, Some(6));
        assert_eq!(u.output_tokens, Some(20));
        assert_eq!(u.raw["input_tokens"], 17, "raw figures beside");
        assert!(
            u.raw.get("server_tool_use").is_none(),
            "breakdowns are not summed"
        );
        state.observe(
            &json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 2,
                    "usage": {"input_tokens": 100, "cache_creation_input_tokens": 1,
                              "cache_read_input_tokens": 2, "output_tokens": 5}})
            .to_string(),
        );
        let u = state.normalized_usage();
        assert_eq!(u.source, "result");
        assert_eq!(
            (
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.output_tokens
            ),
            (Some(103), Some(2), Some(1), Some(5))
        );
        assert_eq!(
            StreamState::new(Host::Claude).normalized_usage().source,
            "none"
        );
    }

    #[test]
    fn codex_usage_is_summed_over_turns_and_model_items_are_its_turns() {
        let mut state = StreamState::new(Host::Codex);
        state.observe(r#"{"type":"turn.started"}"#);
        state.observe(r#"{"type":"item.completed","item":{"type":"agent_message","text":"hi"}}"#);
        for _ in 0..2 {
            state.observe(
                r#"{"type":"turn.completed","usage":{"input_tokens":40,"cached_input_tokens":25,"output_tokens":10}}"#,
            );
        }
        assert_eq!(state.turns, 1);
        assert_eq!(state.host_turns, Some(1));
        let u = state.normalized_usage();
        assert_eq!(u.source, "turns");
        assert_eq!(
            (
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.output_tokens
            ),
            (Some(80), Some(50), None, Some(20))
        );
        state.observe(r#"{"type":"turn.failed","error":{"message":"unexpected status 500"}}"#);
        assert_eq!(
            state.provider_error.as_deref(),
            Some("unexpected status 500")
        );
    }

    #[test]
    fn codex_ignoring_a_sealing_setting_breaks_the_seal() {
        let mut state = StreamState::new(Host::Codex);
        state.observe(r#"{"type":"thread.started","thread_id":"th-1"}"#);
        state.observe(
            r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Codex is ignoring 1 unrecognized configuration setting."}}"#,
        );
        assert_eq!(state.seal, None, "the seal is judged at the first turn");
        state.observe(r#"{"type":"turn.started"}"#);
        let problem = state.seal.unwrap().problem.unwrap();
        assert!(problem.contains("unrecognized configuration"), "{problem}");
    }

    #[test]
    fn codex_items_outside_the_six_break_the_seal() {
        let mut state = StreamState::new(Host::Codex);
        state.observe(r#"{"type":"thread.started","thread_id":"th-1"}"#);
        state.observe(
            r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `m` not found."}}"#,
        );
        state.observe(r#"{"type":"turn.started"}"#);
        assert_eq!(state.seal.as_ref().unwrap().problem, None);
        state.observe(
            r#"{"type":"item.started","item":{"type":"mcp_tool_call","server":"patchdiff","tool":"patchdiff_read_target"}}"#,
        );
        assert_eq!(state.foreign_call, None);
        assert_eq!(state.tool_calls["patchdiff_read_target"], 1);
        state.observe(
            r#"{"type":"item.started","item":{"type":"command_execution","command":"cat x"}}"#,
        );
        assert_eq!(state.foreign_call.as_deref(), Some("command_execution"));
        assert_eq!(state.session_id.as_deref(), Some("th-1"));
        assert_eq!(state.turns, 1);
    }

    #[test]
    fn credentials_are_redacted_longest_first_and_short_values_kept() {
        let env = vec![
            (
                "ANTHROPIC_API_KEY".to_owned(),
                "sk-ant-SECRET-1234".to_owned(),
            ),
            ("ANTHROPIC_AUTH_TOKEN".to_owned(), "SECRET".to_owned()),
            (
                "ANTHROPIC_BASE_URL".to_owned(),
                "http://127.0.0.1:9".to_owned(),
            ),
            ("OPENAI_API_KEY".to_owned(), "abc".to_owned()),
        ];
        let r = Redactor::new(&env);
        let out = r.redact("key=sk-ant-SECRET-1234 token=SECRET url=http://127.0.0.1:9 abc");
        assert_eq!(
            out,
            "key=[redacted:ANTHROPIC_API_KEY] token=[redacted:ANTHROPIC_AUTH_TOKEN] url=http://127.0.0.1:9 abc"
        );
    }

    #[test]
    fn the_newest_tools_list_is_read_from_the_wire_log() {
        let record = |seq: u64, tools: &[&str]| {
            let names: Vec<Value> = tools.iter().map(|n| json!({"name": n})).collect();
            let result = json!({"jsonrpc": "2.0", "id": seq, "result": {"tools": names}});
            json!({"seq": seq, "pid": 1, "mono_ns": 0, "ts_ms": 0.0, "direction": "result",
                   "raw": result.to_string()})
            .to_string()
        };
        let log = format!(
            "{}\nnot json\n{}",
            record(1, &["a"]),
            record(2, &["a", "b"])
        );
        assert_eq!(listed_tools_in_wire_log(&log, None).unwrap(), ["a", "b"]);
        assert_eq!(listed_tools_in_wire_log("{}\nnot json", None), None);
        // Another process sharing the log: only the named process's answer counts.
        let other = record(3, &["x"]).replace("\"pid\":1", "\"pid\":2");
        let shared = format!("{log}\n{other}");
        assert_eq!(
            listed_tools_in_wire_log(&shared, Some(1)).unwrap(),
            ["a", "b"]
        );
        assert_eq!(listed_tools_in_wire_log(&shared, Some(2)).unwrap(), ["x"]);
    }

    #[test]
    fn stream_lines_are_summarized_for_the_evidence_viewer() {
        let init = init_line(
            &["mcp__patchdiff__patchdiff_save"],
            &[("patchdiff", "connected")],
        );
        let summary = stream_line_summary(&serde_json::from_str(&init).unwrap()).unwrap();
        assert_eq!(
            summary,
            "host init · model claude-x · 1 tools · servers patchdiff:connected"
        );
        let call = json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "mcp__patchdiff__patchdiff_save", "input": {"target": "chess"}}
        ]}});
        assert_eq!(
            stream_line_summary(&call).unwrap(),
            "model → mcp__patchdiff__patchdiff_save chess"
        );
        let item = json!({"type": "item.started", "item": {"type": "mcp_tool_call", "tool": "patchdiff_save"}});
        assert_eq!(
            stream_line_summary(&item).unwrap(),
            "item.started mcp_tool_call patchdiff_save"
        );
        // The evidence file's chained record of a line summarizes as the line.
        let record = json!({"ts_ms": 1.0, "seq": 0, "raw": call.to_string(), "prev_sha256": "x"});
        assert_eq!(
            stream_line_summary(&record).unwrap(),
            "model → mcp__patchdiff__patchdiff_save chess"
        );
        // Wire-log and perf-event lines are not host stream lines.
        assert_eq!(stream_line_summary(&json!({"direction": "request"})), None);
        assert_eq!(stream_line_summary(&json!({"type": 3})), None);
    }

    #[test]
    fn a_claude_run_is_sealed_on_its_command_line() {
        let run = HostRun {
            host: Host::Claude,
            binary: "/bin/claude".into(),
            model: "m".into(),
            max_turns: Some(7),
            timeout: DEFAULT_HOST_TIMEOUT,
        };
        let paths = HostPaths {
            workdir: "/r/agent-workdir".into(),
            mcp_config: "/r/agent.claude.mcp.json".into(),
            settings: "/r/agent.claude.settings.json".into(),
            home: "/tmp/h".into(),
        };
        let args = host_args(&run, &paths, "brief");
        let after = |flag: &str| {
            let i = args.iter().position(|a| a == flag).expect(flag);
            args[i + 1].clone()
        };
        assert!(args.contains(&"--strict-mcp-config".to_owned()));
        assert_eq!(after("--tools"), "");
        assert_eq!(after("--max-turns"), "7");
        assert_eq!(
            after("--mcp-config"),
            "/tmp/h/patchdiff.mcp.json",
            "the host reads its configuration from its private home, not the evidence copy"
        );
        assert_eq!(after("--allowedTools").split(',').count(), 6);
    }
}

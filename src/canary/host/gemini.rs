//! Gemini CLI (A1–A4): its `settings.json` (the patchdiff server, trusted, and a `tools.core`
//! allowlist of exactly the six), its headless command line, and how its `stream-json` events
//! are read.
//!
//! What Gemini CLI 0.61.0 shows of its seal: nothing in its stream lists tools. Its first line is
//! `{"type":"init","session_id":…,"model":…}`; then `message` (user and assistant text,
//! `delta: true` chunks), `tool_use` (`tool_name`, `tool_id`, `parameters`), `tool_result`
//! (`tool_id`, `status`), `error` and a final `result` (`status`, `error`, `stats`). The seal is
//! its settings: `tools.core` names the six (`mcp_patchdiff_<tool>`), which both leaves every
//! built-in tool unregistered (shell, file, web, memory, sub-agents, skills) and denies every
//! tool not named there by policy; measured, the model is offered exactly the six. The stream
//! reader checks every `tool_use` against the six and refuses the host at the first other one.
//!
//! Gemini CLI hands the model only the text blocks of an MCP result and drops its
//! `structuredContent` (measured: the model saw `revision 0, sha256 …; the result is the
//! structured content` and no content), so its server runs with `PATCHDIFF_MCP_RESULT_TEXT=json`:
//! a result's JSON is its text block.

use serde_json::Value;

use super::common::{HostPaths, HostRun, SealReport, StreamState, mcp_servers_json, templates};
use crate::canary::names::{Host, SERVER_NAME};
use crate::config::Key;

/// Gemini CLI's `settings.json` (`config/hosts/gemini.settings.json`) for the observed process
/// started as `exe mcp` with `env`; with `max_turns`, `model.maxSessionTurns` too.
pub fn gemini_settings(exe: &str, env: &[(String, String)], max_turns: Option<u32>) -> Value {
    // Gemini CLI hands the model only a result's text blocks, never its structured content.
    let mut env = env.to_vec();
    env.push((Key::McpResultText.variable().to_owned(), "json".to_owned()));
    let mut settings = mcp_servers_json(templates::GEMINI_SETTINGS, exe, &env);
    if let Some(n) = max_turns {
        settings["model"] = serde_json::json!({ "maxSessionTurns": n });
    }
    settings
}

/// Gemini CLI's command line for a headless sealed run (A1, A2): `--prompt` (headless),
/// stream-json, only the patchdiff server, the sealed working directory trusted for this
/// session only. The tool seal is in the settings ([`gemini_settings`]). `prompt` is the brief.
pub fn args(run: &HostRun, _paths: &HostPaths, prompt: &str) -> Vec<String> {
    vec![
        "--skip-trust".to_owned(),
        "--model".into(),
        run.model.clone(),
        "--output-format".into(),
        "stream-json".into(),
        "--allowed-mcp-server-names".into(),
        SERVER_NAME.into(),
        "--prompt".into(),
        prompt.to_owned(),
    ]
}

/// Gemini CLI's environment besides the common one: its home is the private one, and the
/// machine-wide settings files (which override a user's) are paths that do not exist there, so
/// no operator or system setting reaches the sealed host (A2).
pub fn env(paths: &HostPaths) -> Vec<(String, String)> {
    let home = |name: &str| paths.home.join(name).display().to_string();
    vec![
        ("GEMINI_CLI_HOME".into(), paths.home.display().to_string()),
        (
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH".into(),
            home("no-system-settings.json"),
        ),
        (
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH".into(),
            home("no-system-defaults.json"),
        ),
        (
            "GEMINI_CLI_TRUSTED_FOLDERS_PATH".into(),
            home("trusted-folders.json"),
        ),
        // The CLI otherwise re-executes itself in a child Node with a larger heap.
        ("GEMINI_CLI_NO_RELAUNCH".into(), "true".into()),
    ]
}

impl StreamState {
    /// Gemini CLI `--output-format stream-json` (see the module header for what it shows).
    pub(super) fn observe_gemini(&mut self, event: &Value) {
        let kind = event["type"].as_str();
        let assistant_text = kind == Some("message") && event["role"] == "assistant";
        match kind {
            Some("init") => {
                self.session_id = event["session_id"].as_str().map(str::to_owned);
                if let Some(m) = event["model"].as_str() {
                    self.note_model(m);
                }
                self.seal.get_or_insert_with(|| SealReport {
                    tools: Host::Gemini.sealed_tool_names(),
                    mcp_servers: vec![format!(
                        "{SERVER_NAME}: configured, trusted; tools.core allows only the six"
                    )],
                    problem: None,
                });
            }
            // One answer streams as several `delta` chunks: counted once.
            Some("message") if assistant_text && !self.in_text => {
                self.turns += 1;
            }
            Some("tool_use") => {
                self.turns += 1;
                let tool = event["tool_name"].as_str().unwrap_or_default();
                if !Host::Gemini.sealed_tool_names().iter().any(|t| t == tool) {
                    self.foreign_call = Some(tool.to_owned());
                }
                self.note_tool(tool);
            }
            Some("result") => {
                let stats = &event["stats"];
                self.usage = stats.clone();
                self.host_duration_ms = stats["duration_ms"].as_u64();
                self.result_is_error = event["status"] != "success";
                // The CLI's own ends (turn limit, cancellation, a fatal tool error) are not the
                // provider's; the turn limit reads as Claude Code's `error_max_turns`.
                let error_type = event["error"]["type"].as_str().unwrap_or_default();
                self.result = match error_type {
                    "FatalTurnLimitedError" => Some("error_max_turns".to_owned()),
                    _ => event["status"].as_str().map(str::to_owned),
                };
                if let Some(message) = event["error"]["message"].as_str()
                    && !error_type.starts_with("Fatal")
                {
                    self.provider_error = Some(message.to_owned());
                }
                if let Some(models) = stats["models"].as_object() {
                    for m in models.keys() {
                        self.note_model(m);
                    }
                }
            }
            _ => {}
        }
        self.in_text = assistant_text;
    }
}

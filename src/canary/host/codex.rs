//! Codex (A1–A4): its `config.toml` server tables and model provider, its headless command
//! line with every native tool feature off, and how its `--json` events are read.

use serde_json::Value;

use super::common::{HostPaths, HostRun, SealReport, StreamState, sum_fields, templates};
use crate::canary::names::{Host, SERVER_NAME};
use crate::mcp::OBSERVED_TOOLS;

/// Codex's server tables (`config/hosts/codex.config.toml`) with `command = exe` and one line
/// per variable of `env` in the server's env table; values are TOML strings.
pub fn codex_server_config(exe: &str, env: &[(String, String)]) -> String {
    let toml_string = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut text = String::new();
    for line in templates::CODEX_CONFIG.lines() {
        if line.starts_with("command = ") {
            text.push_str(&format!("command = {}", toml_string(exe)));
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    for (k, v) in env {
        text.push_str(&format!("{k} = {}\n", toml_string(v)));
    }
    text
}

/// Codex features that put native tools (shell, patch, web, images, sub-agents, plugins…) in
/// front of the model: all off for a sealed run (A2).
const CODEX_DISABLED_FEATURES: &[&str] = &[
    "shell_tool",
    "unified_exec",
    "shell_snapshot",
    "multi_agent",
    "goals",
    "image_generation",
    "computer_use",
    "browser_use",
    "apps",
    "plugins",
    "hooks",
    "sleep_tool",
    "tool_suggest",
    "skill_search",
    "view_image",
];

/// Codex `--disable`/`-c` arguments that seal it (A2): no native tool features, no web search,
/// no user-input tool. Codex warns about a setting it does not recognize, and the stream reader
/// treats that warning as a broken seal.
fn codex_overrides() -> Vec<String> {
    let mut args = Vec::new();
    for feature in CODEX_DISABLED_FEATURES {
        args.extend(["--disable".to_owned(), (*feature).to_owned()]);
    }
    for setting in [
        "web_search=\"disabled\"",
        "tools.experimental_request_user_input.enabled=false",
    ] {
        args.extend(["-c".to_owned(), setting.to_owned()]);
    }
    args
}

/// The `tool_output_token_limit` a sealed Codex gets (the host table,
/// [`crate::mcp::delivery::HOST_LIMITS`]): Codex 0.169.0 keeps 1.2 × 4 bytes per token of a tool
/// result and cuts the middle out of a longer one. Without it, a model outside Codex's own
/// catalog keeps 12,000 bytes, a third of a page; 10,000 tokens (its catalog's own figure)
/// keeps 48,000, above every result budget.
pub const CODEX_TOOL_OUTPUT_TOKEN_LIMIT: u32 = 10_000;

// Codex keeps 1.2 × 4 bytes per token of the limit: more than every result budget.
const _: () = assert!(
    CODEX_TOOL_OUTPUT_TOKEN_LIMIT as usize * 48 / 10 > crate::mcp::delivery::RESULT_BUDGET_BYTES
);

/// Codex's `config.toml` for a sealed run: the host table's [`CODEX_TOOL_OUTPUT_TOKEN_LIMIT`],
/// a model provider at `OPENAI_BASE_URL` when the console's environment names one (Codex
/// itself ignores that variable), then `server` (the printed `[mcp_servers.patchdiff]` tables).
pub fn codex_config(server: &str, provider: &[(String, String)]) -> String {
    let mut text = format!("tool_output_token_limit = {CODEX_TOOL_OUTPUT_TOKEN_LIMIT}\n\n");
    if let Some((_, url)) = provider.iter().find(|(k, _)| k == "OPENAI_BASE_URL") {
        text.push_str(&format!(
            "model_provider = \"patchdiff-openai\"\n\n[model_providers.patchdiff-openai]\nname = \"OpenAI-compatible endpoint from OPENAI_BASE_URL\"\nbase_url = {}\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n\n",
            toml::Value::String(url.clone())
        ));
    }
    text.push_str(server);
    text
}

/// Codex's command line for a headless sealed run (A1, A2): `exec --json` in the sealed
/// working directory, read-only sandbox, every native tool feature off. `prompt` is the brief.
pub fn args(run: &HostRun, paths: &HostPaths, prompt: &str) -> Vec<String> {
    let mut args = vec![
        "exec".to_owned(),
        "--json".into(),
        "--model".into(),
        run.model.clone(),
        "--skip-git-repo-check".into(),
        "--sandbox".into(),
        "read-only".into(),
        "--cd".into(),
        paths.workdir.display().to_string(),
    ];
    args.extend(codex_overrides());
    args.push(prompt.to_owned());
    args
}

impl StreamState {
    /// Codex `exec --json`: `thread.started`, `turn.started`, `item.started|completed` (items of
    /// type `mcp_tool_call`, `agent_message`, `command_execution`, `error`, …), `turn.completed`
    /// with usage, `turn.failed`, `error`. Codex lists no tools in its stream, so its seal is
    /// judged from what it does say: a configuration warning (a sealing setting it ignored)
    /// before the first turn breaks the seal, and any item that is not a message, reasoning or
    /// a call of one of our six tools breaks it when it appears.
    pub(super) fn observe_codex(&mut self, event: &Value) {
        match event["type"].as_str() {
            Some("thread.started") => {
                self.session_id = event["thread_id"].as_str().map(str::to_owned);
            }
            Some("turn.started") => {
                *self.host_turns.get_or_insert(0) += 1;
                let problem = self.codex_config_problem.take();
                self.seal.get_or_insert_with(|| SealReport {
                    tools: Host::Codex.sealed_tool_names(),
                    mcp_servers: vec![format!("{SERVER_NAME}: configured, required")],
                    problem,
                });
            }
            Some("item.started") | Some("item.completed") => {
                let item = &event["item"];
                let started = event["type"] == "item.started";
                match item["type"].as_str() {
                    Some("mcp_tool_call") if started => {
                        self.turns += 1;
                        let server = item["server"].as_str().unwrap_or_default();
                        let tool = item["tool"].as_str().unwrap_or_default();
                        if server != SERVER_NAME || !OBSERVED_TOOLS.contains(&tool) {
                            self.foreign_call = Some(format!("{server}/{tool}"));
                        }
                        self.note_tool(tool);
                    }
                    Some("error") => {
                        let message = item["message"].as_str().unwrap_or_default();
                        if message.contains("configuration") && self.seal.is_none() {
                            self.codex_config_problem =
                                Some(format!("Codex ignored a sealing setting: {message}"));
                        }
                    }
                    // A reasoning item comes with the answer it leads to: not counted on its own.
                    Some("agent_message") if !started => self.turns += 1,
                    Some("mcp_tool_call")
                    | Some("agent_message")
                    | Some("reasoning")
                    | Some("todo_list")
                    | None => {}
                    Some(other) => self.foreign_call = Some(other.to_owned()),
                }
            }
            Some("turn.completed") => {
                self.turn_usage.push(event["usage"].clone());
                self.usage = sum_fields(&self.turn_usage);
            }
            Some("turn.failed") | Some("error") => {
                let message = event["error"]["message"]
                    .as_str()
                    .or(event["message"].as_str())
                    .unwrap_or("error")
                    .to_owned();
                // Codex reports retries as `error` events and goes on; a failed turn ends it.
                if event["type"] == "turn.failed" {
                    self.result_is_error = true;
                    self.provider_error = Some(message.clone());
                }
                self.result = Some(message);
            }
            _ => {}
        }
    }
}

//! Claude Code (A1–A4): its MCP configuration and settings templates, its headless command
//! line, how its `stream-json` events are read, and their one-line summaries for the viewer.

use serde_json::Value;

use super::common::{
    HostPaths, HostRun, StreamState, check_seal, mcp_servers_json, strings, template_json,
    templates,
};
use crate::canary::names::Host;

/// Claude Code's MCP configuration (`config/hosts/claude.mcp.json`) for the observed process
/// started as `exe mcp` with `env`.
pub fn claude_mcp_config(exe: &str, env: &[(String, String)]) -> Value {
    mcp_servers_json(templates::CLAUDE_MCP, exe, env)
}

/// Claude Code settings that allow exactly the six observed tools and deny the native ones
/// (A2; `config/hosts/claude.settings.json`); printed next to the MCP configuration, passed with
/// `--settings` when launched.
pub fn claude_settings() -> Value {
    template_json(templates::CLAUDE_SETTINGS)
}

/// Claude Code's command line for a headless sealed run (A1, A2): print mode, stream-json,
/// only the patchdiff server and only the six observed tools. `prompt` is the agent brief.
pub fn args(run: &HostRun, paths: &HostPaths, prompt: &str) -> Vec<String> {
    let mut args = vec![
        "-p".to_owned(),
        prompt.to_owned(),
        "--model".into(),
        run.model.clone(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
        // A2: no other MCP server, no native tool, only the six allowed.
        "--strict-mcp-config".into(),
        "--mcp-config".into(),
        paths.host_mcp_config().display().to_string(),
        "--settings".into(),
        paths.settings.display().to_string(),
        "--setting-sources".into(),
        "".into(),
        "--tools".into(),
        "".into(),
        "--allowedTools".into(),
        Host::Claude.sealed_tool_names().join(","),
    ];
    if let Some(n) = run.max_turns {
        args.extend(["--max-turns".into(), n.to_string()]);
    }
    args
}

impl StreamState {
    pub(super) fn observe_claude(&mut self, event: &Value) {
        match event["type"].as_str() {
            Some("system") if event["subtype"] == "init" => {
                let tools = strings(&event["tools"]);
                let servers: Vec<(String, String)> = event["mcp_servers"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| {
                                (
                                    s["name"].as_str().unwrap_or("?").to_owned(),
                                    s["status"].as_str().unwrap_or("?").to_owned(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.session_id = event["session_id"].as_str().map(str::to_owned);
                if let Some(m) = event["model"].as_str() {
                    self.note_model(m);
                }
                self.seal = Some(check_seal(Host::Claude, &tools, &servers));
            }
            Some("assistant") => {
                let message = &event["message"];
                // Claude Code writes a provider error as a `<synthetic>` assistant message.
                if message["model"] == "<synthetic>" || event["is_api_error_message"] == true {
                    self.provider_error = Some(claude_api_error(event, message));
                    return;
                }
                let id = message["id"].as_str().unwrap_or_default().to_owned();
                if self.message_ids.insert(id.clone()) {
                    self.turns += 1;
                }
                if message["usage"].is_object() {
                    self.message_usage.insert(id, message["usage"].clone());
                }
                if let Some(m) = message["model"].as_str() {
                    self.note_model(m);
                }
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use"
                        && let Some(name) = block["name"].as_str()
                    {
                        self.note_tool(name);
                    }
                }
            }
            Some("result") => {
                self.result = event["subtype"].as_str().map(str::to_owned);
                self.result_is_error = event["is_error"].as_bool().unwrap_or(false);
                // Kept beside `turns`: the host counts a turn for a request the provider refused
                // or the turn limit stopped, so its figure is not the model's answers.
                self.host_turns = event["num_turns"].as_u64();
                if let Some(status) = event["api_error_status"].as_u64() {
                    self.provider_error = Some(format!(
                        "HTTP {status} {}: {}",
                        event["api_error_type"].as_str().unwrap_or("error"),
                        event["result"].as_str().unwrap_or("")
                    ));
                }
                self.usage = event["usage"].clone();
                self.cost_usd = event["total_cost_usd"].as_f64();
                self.host_duration_ms = event["duration_ms"].as_u64();
                if let Some(models) = event["modelUsage"].as_object() {
                    for m in models.keys() {
                        self.note_model(m);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Claude Code's synthetic API-error message as `HTTP <status> <type>: <text>`.
fn claude_api_error(event: &Value, message: &Value) -> String {
    let text = message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|b| b["text"].as_str())
        .unwrap_or("");
    match event["api_error_status"].as_u64() {
        Some(status) => format!(
            "HTTP {status} {}: {text}",
            event["api_error_type"].as_str().unwrap_or("error")
        ),
        None => text.to_owned(),
    }
}

/// A host's `system` line: subtype, model, how many tools, and each MCP server's status.
pub(super) fn system_summary(event: &Value) -> String {
    let servers = event["mcp_servers"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    format!(
                        "{}:{}",
                        s["name"].as_str().unwrap_or("?"),
                        s["status"].as_str().unwrap_or("?")
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    format!(
        "host {} · model {} · {} tools · servers {servers}",
        event["subtype"].as_str().unwrap_or("?"),
        event["model"].as_str().unwrap_or("?"),
        event["tools"].as_array().map_or(0, Vec::len),
    )
}

/// A message's content blocks, ` · `-joined: `→ tool target` for a tool call, `← ok|isError`
/// for its result, the first 80 characters of text in quotes.
pub(super) fn blocks_summary(message: &Value) -> String {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| match b["type"].as_str() {
            Some("tool_use") => Some(format!(
                "→ {} {}",
                b["name"].as_str().unwrap_or("?"),
                b["input"]["target"].as_str().unwrap_or("")
            )),
            Some("tool_result") => Some(format!(
                "← {}",
                if b["is_error"] == true {
                    "isError"
                } else {
                    "ok"
                }
            )),
            Some("text") => Some(format!(
                "“{}”",
                b["text"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect::<String>()
            )),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

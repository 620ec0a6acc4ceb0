//! opencode (A1–A4): its `opencode.json` (the patchdiff server and a `permission` table that
//! denies every tool but the six), its provider endpoint, its headless command line, and how its
//! `run --format json` events are read.
//!
//! What opencode 1.18.33 shows of its seal: nothing in its stream lists tools. It prints one JSON
//! object per line once the model answers — `step_start`, `text`, `reasoning`, `tool_use` (a
//! finished call: `part.tool`, `part.state.status`), `step_finish` (`part.reason`,
//! `part.tokens`, `part.cost`) and `error` — each with `sessionID`. The seal is its
//! configuration: `permission` `"*": "deny"` with the six (`patchdiff_<tool>`) allowed, which
//! removes every other tool (bash, edit, write, read, grep, glob, webfetch, task, skill,
//! todowrite) from what the model is offered; measured, the model is offered exactly the six.
//! The stream reader checks every `tool_use` against the six and refuses the host at the first
//! other one.
//!
//! opencode hands the model only the text blocks of an MCP result (measured: `part.state.output`
//! was our one-line summary, the structured content gone), so its server runs with
//! `PATCHDIFF_MCP_RESULT_TEXT=json`: a result's JSON is its text block.

use serde_json::Value;

use super::common::{
    HostPaths, HostRun, SealReport, StreamState, sum_fields, template_json, templates,
};
use crate::canary::names::{Host, SERVER_NAME};
use crate::config::Key;

/// opencode's `opencode.json` (`config/hosts/opencode.json`) for the observed process started
/// as `exe mcp` with `env`.
pub fn opencode_config(exe: &str, env: &[(String, String)]) -> Value {
    let mut config = template_json(templates::OPENCODE_CONFIG);
    let server = &mut config["mcp"][SERVER_NAME];
    server["command"] = serde_json::json!([exe, "mcp"]);
    let mut environment: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    // opencode hands the model only a result's text blocks, never its structured content.
    environment.insert(Key::McpResultText.variable().to_owned(), "json".into());
    server["environment"] = Value::Object(environment);
    config
}

/// The provider/model opencode is asked for: `model` when it names its provider
/// (`anthropic/claude-sonnet-4-5`), else `anthropic/<model>`.
pub fn provider_model(model: &str) -> String {
    if model.contains('/') {
        model.to_owned()
    } else {
        format!("anthropic/{model}")
    }
}

/// The configuration of a sealed run: [`opencode_config`]'s `server` document plus, when the
/// console's environment names an endpoint for the model's provider (`ANTHROPIC_BASE_URL`, which
/// opencode itself ignores, gets `/v1` appended as its SDK expects; `OPENAI_BASE_URL` as
/// given), that provider's `baseURL`, and with `max_turns` the build agent's `steps`.
pub fn run_config(
    server: Value,
    model: &str,
    max_turns: Option<u32>,
    provider: &[(String, String)],
) -> Value {
    let mut config = server;
    let model = provider_model(model);
    let provider_id = model.split('/').next().unwrap_or("anthropic");
    let url = |name: &str| {
        provider
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim_end_matches('/').to_owned())
    };
    let base_url = match provider_id {
        "anthropic" => url("ANTHROPIC_BASE_URL").map(|u| format!("{u}/v1")),
        "openai" => url("OPENAI_BASE_URL"),
        _ => None,
    };
    if let Some(base_url) = base_url {
        config["provider"][provider_id]["options"]["baseURL"] = Value::String(base_url);
    }
    config["model"] = Value::String(model);
    if let Some(n) = max_turns {
        config["agent"]["build"]["steps"] = Value::from(n);
    }
    config
}

/// opencode's command line for a headless sealed run (A1, A2): `run --format json`, no external
/// plugins, in the sealed working directory. The tool seal is in the configuration. `prompt` is
/// the agent brief.
pub fn args(run: &HostRun, paths: &HostPaths, prompt: &str) -> Vec<String> {
    vec![
        "run".to_owned(),
        "--format".into(),
        "json".into(),
        "--pure".into(),
        "--model".into(),
        provider_model(&run.model),
        "--dir".into(),
        paths.workdir.display().to_string(),
        prompt.to_owned(),
    ]
}

/// The configuration file opencode reads, in the private home (it names the observed process's
/// real environment).
pub fn config_path(paths: &HostPaths) -> std::path::PathBuf {
    paths.home.join("opencode.json")
}

/// opencode's environment besides the common one: its configuration file, and everything that
/// would reach the network or read configuration of the operator's off (A2).
pub fn env(paths: &HostPaths) -> Vec<(String, String)> {
    let mut env = vec![(
        "OPENCODE_CONFIG".to_owned(),
        config_path(paths).display().to_string(),
    )];
    for off in [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_PROJECT_CONFIG",
        "OPENCODE_DISABLE_CLAUDE_CODE",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS",
    ] {
        env.push((off.to_owned(), "1".to_owned()));
    }
    env
}

impl StreamState {
    /// opencode `run --format json` (see the module header for what it shows). Its first line
    /// reports the seal as configured; a model answer is a `step_finish`; usage is summed over
    /// them.
    pub(super) fn observe_opencode(&mut self, event: &Value) {
        let Some(kind) = event["type"].as_str() else {
            return;
        };
        if self.session_id.is_none() {
            self.session_id = event["sessionID"].as_str().map(str::to_owned);
        }
        self.seal.get_or_insert_with(|| SealReport {
            tools: Host::Opencode.sealed_tool_names(),
            mcp_servers: vec![format!(
                "{SERVER_NAME}: configured; permission denies every other tool"
            )],
            problem: None,
        });
        let part = &event["part"];
        match kind {
            "tool_use" => {
                let tool = part["tool"].as_str().unwrap_or_default();
                if !Host::Opencode.sealed_tool_names().iter().any(|t| t == tool) {
                    self.foreign_call = Some(tool.to_owned());
                }
                self.note_tool(tool);
            }
            "step_finish" => {
                self.turns += 1;
                let tokens = &part["tokens"];
                let mut figures = tokens.clone();
                figures["cache_read"] = tokens["cache"]["read"].clone();
                figures["cache_write"] = tokens["cache"]["write"].clone();
                self.turn_usage.push(figures);
                self.usage = sum_fields(&self.turn_usage);
                if let Some(cost) = part["cost"].as_f64() {
                    *self.cost_usd.get_or_insert(0.0) += cost;
                }
                self.result = part["reason"].as_str().map(str::to_owned);
            }
            "error" => {
                let error = &event["error"];
                let message = error["data"]["message"]
                    .as_str()
                    .or(error["message"].as_str())
                    .or(error["name"].as_str())
                    .unwrap_or("error")
                    .to_owned();
                self.result_is_error = true;
                self.provider_error = Some(message.clone());
                self.result = Some(message);
            }
            _ => {}
        }
    }
}

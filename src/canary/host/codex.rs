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

/// The fields of a Codex model-catalog entry that put native tools in front of the model
/// whatever the features say, with their sealed values: `apply_patch` (an editing tool of its
/// own), `tool_search` (which hides MCP tools behind a search of its own), `code_mode_only`
/// (a JavaScript exec tool through which the model calls every other tool), sub-agents
/// (`multi_agent_version` offers `spawn_agent` and its kin though the feature is off) and the
/// experimental tools (`clock`, `send_user_message_async`). (Web search is off by `web_search="disabled"`; its catalog field takes no null.) Codex 0.169.0's bundled catalog sets them for every model it lists
/// (`codex debug models --bundled`): a model such as `gpt-5.5` was offered `apply_patch` and
/// `tool_search` with our six deferred behind it, `gpt-6-astra` code mode too, while the
/// stream said nothing of it (A2).
const CATALOG_SEALED_FIELDS: [(&str, Value); 5] = [
    ("apply_patch_tool_type", Value::Null),
    ("supports_search_tool", Value::Bool(false)),
    ("tool_mode", Value::Null),
    ("multi_agent_version", Value::Null),
    ("experimental_supported_tools", Value::Array(Vec::new())),
];

/// `catalog` (Codex's `{"models": [...]}`) with every model's native-tool fields sealed
/// ([`CATALOG_SEALED_FIELDS`]); the rest of each entry (instructions, context window, reasoning
/// levels) is kept, so a catalog model behaves as Codex means it to with no tool but ours.
/// Errors when `catalog` has no `models` array.
pub fn sealed_model_catalog(mut catalog: Value) -> anyhow::Result<Value> {
    let models = catalog
        .get_mut("models")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| anyhow::anyhow!("Codex's model catalog has no `models` array"))?;
    for model in models.iter_mut().filter_map(Value::as_object_mut) {
        for (field, sealed) in &CATALOG_SEALED_FIELDS {
            model.insert((*field).to_owned(), sealed.clone());
        }
    }
    Ok(catalog)
}

/// Codex's bundled model catalog (`codex debug models --bundled`, no network), run with a
/// private empty `HOME` and only `PATH`; at most 20 s. Errors name what failed.
pub async fn bundled_catalog(binary: &std::path::Path) -> anyhow::Result<Value> {
    let home = tempfile::Builder::new()
        .prefix("patchdiff-codex-catalog-")
        .tempdir()?;
    let run = tokio::process::Command::new(binary)
        .args(["debug", "models", "--bundled"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), run)
        .await
        .map_err(|_| anyhow::anyhow!("`codex debug models --bundled` did not answer in 20 s"))??;
    if !out.status.success() {
        anyhow::bail!(
            "`codex debug models --bundled` exited {}: {}",
            out.status,
            crate::display::visible_inline(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("`codex debug models --bundled` printed no JSON: {e}"))
}

/// Codex's `config.toml` for a sealed run: the host table's [`CODEX_TOOL_OUTPUT_TOKEN_LIMIT`],
/// the sealed model catalog at `catalog` ([`sealed_model_catalog`]) when given, a model
/// provider at `OPENAI_BASE_URL` when the console's environment names one (Codex itself
/// ignores that variable), then `server` (the printed `[mcp_servers.patchdiff]` tables).
pub fn codex_config(
    server: &str,
    provider: &[(String, String)],
    catalog: Option<&std::path::Path>,
) -> String {
    let mut text = format!("tool_output_token_limit = {CODEX_TOOL_OUTPUT_TOKEN_LIMIT}\n");
    if let Some(path) = catalog {
        let path = toml::Value::String(path.display().to_string());
        text.push_str(&format!("model_catalog_json = {path}\n"));
    }
    text.push('\n');
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sealed_catalog_takes_every_models_native_tools_and_keeps_the_rest() {
        let bundled = json!({"models": [
            {"slug": "gpt-5.5", "apply_patch_tool_type": "freeform", "supports_search_tool": true,
             "tool_mode": "code_mode_only", "multi_agent_version": "v2",
             "experimental_supported_tools": ["clock"], "context_window": 272000},
            {"slug": "other", "shell_type": "unified_exec"},
        ]});
        let sealed = sealed_model_catalog(bundled).unwrap();
        for model in sealed["models"].as_array().unwrap() {
            assert_eq!(model["apply_patch_tool_type"], Value::Null, "{model}");
            assert_eq!(model["supports_search_tool"], false, "{model}");
            assert_eq!(model["experimental_supported_tools"], json!([]), "{model}");
            assert_eq!(model["tool_mode"], Value::Null, "{model}");
            assert_eq!(model["multi_agent_version"], Value::Null, "{model}");
        }
        assert_eq!(sealed["models"][0]["context_window"], 272000);
        assert_eq!(sealed["models"][1]["shell_type"], "unified_exec");
        let refused = sealed_model_catalog(json!({"entries": []})).unwrap_err();
        assert!(
            refused.to_string().contains("no `models` array"),
            "{refused}"
        );
    }

    #[test]
    fn the_config_names_the_sealed_catalog_as_a_toml_string() {
        let text = codex_config(
            "",
            &[],
            Some(std::path::Path::new("/h/.codex/model \"c\".json")),
        );
        let parsed: toml::Table = text.parse().expect("TOML");
        assert_eq!(
            parsed["model_catalog_json"].as_str(),
            Some("/h/.codex/model \"c\".json")
        );
        assert!(!codex_config("", &[], None).contains("model_catalog_json"));
    }
}

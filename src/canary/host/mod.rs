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

pub mod claude;
pub mod codex;
mod common;
pub mod cursor;
pub mod gemini;
pub mod opencode;

pub use claude::{claude_mcp_config, claude_settings};
pub use codex::{codex_config, codex_server_config};
pub use common::*;
pub use cursor::cursor_mcp_config;
pub use gemini::gemini_settings;
pub use opencode::opencode_config;

use serde_json::Value;

use crate::canary::names::Host;

/// The command line of a headless sealed host run (A1, A2): each host's own
/// ([`claude::args`], [`codex::args`], [`gemini::args`], [`opencode::args`]). `prompt` is the
/// agent brief.
pub fn host_args(run: &HostRun, paths: &HostPaths, prompt: &str) -> Vec<String> {
    match run.host {
        Host::Claude => claude::args(run, paths, prompt),
        Host::Codex | Host::Cursor => codex::args(run, paths, prompt),
        Host::Gemini => gemini::args(run, paths, prompt),
        Host::Opencode => opencode::args(run, paths, prompt),
    }
}

impl StreamState {
    /// Takes one line of the host's stream. Lines that are not JSON objects are ignored (a host
    /// may print notices); they are still kept in the evidence by the caller.
    pub fn observe(&mut self, line: &str) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        match self.host {
            Some(Host::Claude) => self.observe_claude(&event),
            Some(Host::Codex) | Some(Host::Cursor) => self.observe_codex(&event),
            Some(Host::Gemini) => self.observe_gemini(&event),
            Some(Host::Opencode) => self.observe_opencode(&event),
            None => {}
        }
    }
}

/// One-line summary of a host stream line for the evidence viewer, `None` when `event` is not
/// one (Claude Code: `system`, `assistant`, `user`, `result`; Codex: `thread.*`, `turn.*`,
/// `item.*`; Gemini CLI: `init`, `message`, `tool_use`, `tool_result`, `result`; opencode:
/// `step_start`, `step_finish`, `text`, `tool_use`).
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
        "init" => format!(
            "host init · model {}",
            event["model"].as_str().unwrap_or("?")
        ),
        "message" => format!(
            "{} text",
            if event["role"] == "assistant" {
                "model"
            } else {
                "host"
            }
        ),
        // Gemini CLI names the tool at the top level, opencode in its `part`.
        "tool_use" => format!(
            "model → {}",
            event["tool_name"]
                .as_str()
                .or(event["part"]["tool"].as_str())
                .unwrap_or("?")
        ),
        "tool_result" => format!("host ← {}", event["status"].as_str().unwrap_or("?")),
        "step_start" | "text" | "reasoning" => kind.to_owned(),
        "step_finish" => format!(
            "step_finish {}",
            event["part"]["reason"].as_str().unwrap_or("?")
        ),
        "result" if event.get("stats").is_some() => format!(
            "result {} · {} ms",
            event["status"].as_str().unwrap_or("?"),
            event["stats"]["duration_ms"]
        ),
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

/// The host's environment: a clean slate plus [`common::PASSED_ENV`], the provider variables, the
/// operator's network settings (`network`, from [`network_env`]), the host table's limits
/// ([`host_limit_env`]) and a private `HOME` (A2: no user settings, hooks or memory files of
/// the operator reach the host).
pub fn host_env(
    host: Host,
    paths: &HostPaths,
    provider: &[(String, String)],
    network: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = common::PASSED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect();
    env.extend(provider.iter().cloned());
    env.extend(network.iter().cloned());
    for (k, v) in host_limit_env(host) {
        env.retain(|(ek, _)| ek != k);
        env.push(((*k).to_owned(), (*v).to_owned()));
    }
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
        Host::Gemini => env.extend(gemini::env(paths)),
        Host::Opencode => env.extend(opencode::env(paths)),
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Key;
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

    #[test]
    fn the_sealed_codex_config_declares_the_host_tables_tool_output_limit() {
        let server = codex_server_config("/opt/pd", &[]);
        let text = codex_config(
            &server,
            &[("OPENAI_BASE_URL".into(), "http://x/v1".into())],
            None,
        );
        let table: toml::Table = text.parse().expect("valid TOML");
        assert_eq!(
            table["tool_output_token_limit"].as_integer(),
            Some(i64::from(codex::CODEX_TOOL_OUTPUT_TOKEN_LIMIT))
        );
        assert_eq!(table["model_provider"].as_str(), Some("patchdiff-openai"));
        assert!(table["mcp_servers"]["patchdiff"].is_table());
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

    /// A3: Gemini's init event reports the tools it will offer; one outside the six breaks the seal.
    #[test]
    fn gemini_reports_its_seal_at_init_and_a_tool_outside_the_six_breaks_it() {
        let mut state = StreamState::new(Host::Gemini);
        state.observe(
            r#"{"type":"init","timestamp":"t","session_id":"g-1","model":"gemini-2.5-pro"}"#,
        );
        let seal = state
            .seal
            .clone()
            .expect("init reports the configured seal");
        assert_eq!(seal.problem, None);
        assert_eq!(seal.tools, Host::Gemini.sealed_tool_names());
        assert_eq!(state.session_id.as_deref(), Some("g-1"));
        state.observe(
            r#"{"type":"tool_use","tool_name":"mcp_patchdiff_patchdiff_read_target","tool_id":"a","parameters":{}}"#,
        );
        for chunk in ["I have ", "read it."] {
            state.observe(
                &json!({"type": "message", "role": "assistant", "content": chunk, "delta": true})
                    .to_string(),
            );
        }
        assert_eq!(state.foreign_call, None);
        assert_eq!(state.tool_calls["patchdiff_read_target"], 1);
        assert_eq!(state.turns, 2, "a call and one streamed answer");
        state.observe(
            r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"b","parameters":{}}"#,
        );
        assert_eq!(state.foreign_call.as_deref(), Some("run_shell_command"));
        state.observe(
            r#"{"type":"result","status":"success","stats":{"total_tokens":208,"input_tokens":160,"output_tokens":40,"cached":100,"input":60,"duration_ms":3579,"tool_calls":3,"models":{"gemini-2.5-pro":{}}}}"#,
        );
        let u = state.normalized_usage();
        assert_eq!(u.source, "result");
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (Some(160), Some(100), Some(40))
        );
        assert_eq!(state.host_duration_ms, Some(3579));
        assert!(!state.result_is_error);
    }

    #[test]
    fn gemini_turn_limit_is_its_own_end_not_the_providers() {
        let mut state = StreamState::new(Host::Gemini);
        state.observe(
            r#"{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"Reached max session turns"},"stats":{}}"#,
        );
        assert_eq!(state.result.as_deref(), Some("error_max_turns"));
        assert_eq!(state.provider_error, None);
        let mut state = StreamState::new(Host::Gemini);
        state.observe(
            r#"{"type":"result","status":"error","error":{"type":"ApiError","message":"[API Error: 500]"},"stats":{}}"#,
        );
        assert_eq!(state.provider_error.as_deref(), Some("[API Error: 500]"));
    }

    /// A3: opencode's first line reports its tools; one outside the six breaks the seal.
    #[test]
    fn opencode_reports_its_seal_at_its_first_line_and_a_tool_outside_the_six_breaks_it() {
        let mut state = StreamState::new(Host::Opencode);
        state.observe(r#"{"type":"step_start","sessionID":"ses_1","part":{"type":"step-start"}}"#);
        assert_eq!(state.seal.as_ref().unwrap().problem, None);
        assert_eq!(state.session_id.as_deref(), Some("ses_1"));
        state.observe(
            r#"{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"patchdiff_patchdiff_save","state":{"status":"completed"}}}"#,
        );
        for _ in 0..2 {
            state.observe(
                r#"{"type":"step_finish","sessionID":"ses_1","part":{"reason":"tool-calls","tokens":{"total":43,"input":10,"output":10,"reasoning":0,"cache":{"write":3,"read":20}},"cost":0.25}}"#,
            );
        }
        assert_eq!(state.foreign_call, None);
        assert_eq!(state.tool_calls["patchdiff_save"], 1);
        assert_eq!(state.turns, 2);
        assert_eq!(state.cost_usd, Some(0.5));
        let u = state.normalized_usage();
        assert_eq!(
            (
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.output_tokens
            ),
            (Some(66), Some(40), Some(6), Some(20))
        );
        state.observe(
            r#"{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"bash","state":{"status":"completed"}}}"#,
        );
        assert_eq!(state.foreign_call.as_deref(), Some("bash"));
    }

    /// A2: each host's template offers only our server's six observed tools.
    #[test]
    fn gemini_and_opencode_templates_name_the_six_and_ask_for_json_results() {
        let env = [(Key::McpProfile.variable().to_owned(), "observed".to_owned())];
        let gemini = gemini_settings("/opt/pd", &env, Some(9));
        let server = &gemini["mcpServers"]["patchdiff"];
        assert_eq!(server["command"], "/opt/pd");
        assert_eq!(server["env"][Key::McpResultText.variable()], "json");
        assert_eq!(server["env"][Key::McpProfile.variable()], "observed");
        assert_eq!(
            gemini["tools"]["core"],
            json!(Host::Gemini.sealed_tool_names())
        );
        assert_eq!(
            server["includeTools"],
            json!(crate::mcp::OBSERVED_TOOLS.to_vec())
        );
        assert_eq!(gemini["model"]["maxSessionTurns"], 9);

        let config = opencode_config("/opt/pd", &env);
        let server = &config["mcp"]["patchdiff"];
        assert_eq!(server["command"], json!(["/opt/pd", "mcp"]));
        assert_eq!(server["environment"][Key::McpResultText.variable()], "json");
        let permission = config["permission"].as_object().unwrap();
        assert_eq!(permission["*"], "deny");
        let mut allowed: Vec<String> = permission
            .iter()
            .filter(|(_, v)| *v == "allow")
            .map(|(k, _)| k.clone())
            .collect();
        allowed.sort();
        let mut six = Host::Opencode.sealed_tool_names();
        six.sort();
        assert_eq!(allowed, six);
        let provider = [(
            "ANTHROPIC_BASE_URL".to_owned(),
            "http://127.0.0.1:9/".to_owned(),
        )];
        let run = opencode::run_config(config, "claude-x", Some(4), &provider);
        assert_eq!(run["model"], "anthropic/claude-x");
        assert_eq!(
            run["provider"]["anthropic"]["options"]["baseURL"],
            "http://127.0.0.1:9/v1"
        );
        assert_eq!(run["agent"]["build"]["steps"], 4);
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

    /// The README's pass-through list, between its `network-variables` markers.
    fn readme_network_variables() -> Vec<String> {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("<!-- network-variables -->")
            .expect("README marks its network pass-through list");
        let end = readme[start..]
            .find("<!-- /network-variables -->")
            .expect("the list's end marker")
            + start;
        readme[start..end]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    /// A2: the pass-through list the README documents is the one the code applies.
    #[test]
    fn the_readme_lists_exactly_the_network_variables_the_host_receives() {
        assert_eq!(readme_network_variables(), NETWORK_VARIABLES);
    }

    #[test]
    fn network_settings_reach_the_host_and_the_host_table_decides_its_output_limit() {
        let paths = HostPaths {
            workdir: "/w".into(),
            mcp_config: "/w/m.json".into(),
            settings: "/w/s.json".into(),
            home: "/h".into(),
        };
        let network = vec![
            (
                "HTTPS_PROXY".to_owned(),
                "http://u:pw-123456@proxy:3128".to_owned(),
            ),
            ("NO_PROXY".to_owned(), "127.0.0.1,localhost".to_owned()),
        ];
        for host in [Host::Claude, Host::Codex] {
            let env = host_env(host, &paths, &[], &network);
            for (k, v) in &network {
                assert!(env.contains(&(k.clone(), v.clone())), "{host:?} gets {k}");
            }
            let limit: Vec<_> = env
                .iter()
                .filter(|(k, _)| k == "MAX_MCP_OUTPUT_TOKENS")
                .collect();
            match host {
                Host::Claude => {
                    assert_eq!(limit, [&("MAX_MCP_OUTPUT_TOKENS".into(), "25000".into())])
                }
                _ => assert!(limit.is_empty()),
            }
        }
        // The proxy's password is a credential wherever it is written.
        let r = Redactor::new(&network);
        assert!(
            !r.redact("via http://u:pw-123456@proxy:3128")
                .contains("pw-123456")
        );
        // Only the listed variables pass; the limit is not one of them.
        assert!(!NETWORK_VARIABLES.contains(&"MAX_MCP_OUTPUT_TOKENS"));
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

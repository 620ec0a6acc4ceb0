//! SPEC C4, P1: `patchdiff mcp --print-host-config claude|codex|gemini|opencode|cursor` prints a
//! document each host parses (JSON for Claude Code, Gemini CLI, opencode and Cursor, TOML for Codex) that starts the observed
//! process in resident mode with strict observation, the perf events path and the database URL.

use crate::mcp::*;
use serde_json::Value;

fn print_host_config(env: &TestEnv, host: &str) -> (String, String) {
    let mut vars = env.vars("full"); // the printed config is always the observed profile
    vars.insert(
        "PATCHDIFF_PERF_EVENTS".into(),
        env.path().join("observed.perf.jsonl").display().to_string(),
    );
    let out = std::process::Command::new(exe())
        .args(["mcp", "--print-host-config", host])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(&vars)
        .output()
        .expect("run");
    assert!(out.status.success(), "{host}: {out:?}");
    (
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks the server entry's command, args and environment.
fn check_entry(env: &TestEnv, command: &str, args: &[String], vars: &Value) {
    assert!(std::path::Path::new(command).is_absolute(), "{command}");
    assert_eq!(args, ["mcp"]);
    let want = [
        ("PATCHDIFF_MCP_PROFILE", "observed".to_owned()),
        ("PATCHDIFF_WAYMARK_MODE", "resident".to_owned()),
        ("PATCHDIFF_STRICT_OBSERVATION_MODE", "1".to_owned()),
        (
            "PATCHDIFF_DATABASE_URL",
            format!("sqlite://{}", env.database().display()),
        ),
        (
            "PATCHDIFF_PERF_EVENTS",
            env.path().join("observed.perf.jsonl").display().to_string(),
        ),
    ];
    for (k, v) in want {
        assert_eq!(vars[k].as_str(), Some(v.as_str()), "{k}");
    }
    // E1/P1: a real host's process keeps its wire log and runs the resolved Node binary.
    let wire_log = vars["PATCHDIFF_EVIDENCE_WIRE_LOG"]
        .as_str()
        .expect("wire log");
    assert!(std::path::Path::new(wire_log).is_absolute(), "{wire_log}");
    let node = vars["PATCHDIFF_NODE_BINARY"].as_str().expect("node binary");
    assert!(std::path::Path::new(node).is_absolute(), "{node}");
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

#[test]
fn claude_config_is_a_valid_mcp_json() {
    let env = TestEnv::new();
    let (stdout, stderr) = print_host_config(&env, "claude");
    let doc: Value = serde_json::from_str(&stdout).expect("stdout is exactly one JSON document");
    let server = &doc["mcpServers"]["patchdiff"];
    assert_eq!(server["type"], "stdio");
    check_entry(
        &env,
        server["command"].as_str().unwrap_or_default(),
        &strings(&server["args"]),
        &server["env"],
    );
    assert!(
        stderr.contains(".mcp.json"),
        "the hint names the file: {stderr}"
    );
}

#[test]
fn cursor_config_is_a_valid_mcp_json() {
    let env = TestEnv::new();
    let (stdout, stderr) = print_host_config(&env, "cursor");
    let doc: Value = serde_json::from_str(&stdout).expect("stdout is exactly one JSON document");
    let server = &doc["mcpServers"]["patchdiff"];
    check_entry(
        &env,
        server["command"].as_str().unwrap_or_default(),
        &strings(&server["args"]),
        &server["env"],
    );
    assert!(stderr.contains(".cursor/mcp.json"), "{stderr}");
}

#[test]
fn codex_config_is_valid_toml() {
    let env = TestEnv::new();
    let (stdout, _) = print_host_config(&env, "codex");
    let doc: toml::Table = stdout.parse().expect("stdout is a TOML document");
    let doc = serde_json::to_value(doc).expect("as JSON");
    let server = &doc["mcp_servers"]["patchdiff"];
    check_entry(
        &env,
        server["command"].as_str().unwrap_or_default(),
        &strings(&server["args"]),
        &server["env"],
    );
}

#[test]
fn gemini_and_opencode_configs_are_valid_json_sealed_to_the_six() {
    let env = TestEnv::new();
    let six = [
        "patchdiff_read_target",
        "patchdiff_find_occurrences",
        "patchdiff_observe_scope",
        "patchdiff_submit_observed_operations",
        "patchdiff_save",
        "patchdiff_replay",
    ];
    let (stdout, stderr) = print_host_config(&env, "gemini");
    let doc: Value = serde_json::from_str(&stdout).expect("stdout is exactly one JSON document");
    let server = &doc["mcpServers"]["patchdiff"];
    check_entry(
        &env,
        server["command"].as_str().unwrap_or_default(),
        &strings(&server["args"]),
        &server["env"],
    );
    let core: Vec<String> = six.iter().map(|t| format!("mcp_patchdiff_{t}")).collect();
    assert_eq!(strings(&doc["tools"]["core"]), core);
    assert!(stderr.contains("settings.json"), "{stderr}");

    let (stdout, stderr) = print_host_config(&env, "opencode");
    let doc: Value = serde_json::from_str(&stdout).expect("stdout is exactly one JSON document");
    let server = &doc["mcp"]["patchdiff"];
    let command = strings(&server["command"]);
    check_entry(&env, &command[0], &command[1..], &server["environment"]);
    let permission = doc["permission"].as_object().expect("permission");
    assert_eq!(permission["*"], "deny");
    let allowed: Vec<&String> = permission.keys().filter(|k| *k != "*").collect();
    assert_eq!(allowed.len(), 6, "{permission:?}");
    for t in six {
        assert_eq!(permission[&format!("patchdiff_{t}")], "allow", "{t}");
    }
    assert!(stderr.contains("opencode.json"), "{stderr}");
}

#[test]
fn unknown_host_is_refused() {
    let env = TestEnv::new();
    let out = std::process::Command::new(exe())
        .args(["mcp", "--print-host-config", "vim"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("observed"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("claude, codex, gemini, opencode, cursor")
    );
}

#[test]
fn codex_config_offers_only_the_six_observed_tools() {
    let env = TestEnv::new();
    let (stdout, _) = print_host_config(&env, "codex");
    let doc: toml::Table = stdout.parse().expect("stdout is a TOML document");
    let server = &doc["mcp_servers"]["patchdiff"];
    let mut tools: Vec<&str> = server["enabled_tools"]
        .as_array()
        .expect("enabled_tools")
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    tools.sort();
    // The SPEC's six (M2), spelled out: a seventh tool must not pass unnoticed.
    assert_eq!(
        tools,
        [
            "patchdiff_find_occurrences",
            "patchdiff_observe_scope",
            "patchdiff_read_target",
            "patchdiff_replay",
            "patchdiff_save",
            "patchdiff_submit_observed_operations",
        ]
    );
    assert_eq!(server["required"].as_bool(), Some(true));
}

/// A5 on a fresh machine: with a HOME that has never seen patchdiff, the printed configuration
/// names directories that exist (created 0700), and the real Claude Code CLI (`tests/tools`)
/// health-checks the server it describes as connected, with no step by hand.
#[test]
fn the_printed_claude_config_connects_in_the_real_cli_on_a_fresh_home() {
    use std::os::unix::fs::PermissionsExt;
    let claude = std::env::var_os("PATCHDIFF_CLAUDE_BINARY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude")
        });
    assert!(
        claude.is_file(),
        "the Claude Code CLI is missing: run `npm ci --prefix tests/tools`"
    );
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let base = || {
        let mut c = std::process::Command::new(exe());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .current_dir(&project);
        c
    };
    let out = base()
        .args(["mcp", "--print-host-config", "claude"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let server = &doc["mcpServers"]["patchdiff"];
    for var in ["PATCHDIFF_PERF_EVENTS", "PATCHDIFF_EVIDENCE_WIRE_LOG"] {
        let dir = std::path::Path::new(server["env"][var].as_str().unwrap())
            .parent()
            .unwrap()
            .to_owned();
        let mode = std::fs::metadata(&dir)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
    }
    let url = server["env"]["PATCHDIFF_DATABASE_URL"].as_str().unwrap();
    let db_dir = std::path::Path::new(url.strip_prefix("sqlite://").unwrap())
        .parent()
        .unwrap()
        .to_owned();
    assert!(db_dir.is_dir(), "{}", db_dir.display());

    let cli = |args: &[&str]| {
        let out = std::process::Command::new(&claude)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(&project)
            .output()
            .expect("claude runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let added = cli(&[
        "mcp",
        "add-json",
        "-s",
        "user",
        "patchdiff",
        &server.to_string(),
    ]);
    assert!(added.contains("Added"), "{added}");
    let listed = cli(&["mcp", "list"]);
    assert!(
        listed.contains("patchdiff") && listed.contains("Connected"),
        "{listed}"
    );
}

//! SPEC C4, P1: `patchdiff mcp --print-host-config claude|codex|cursor` prints a document each
//! host parses (JSON for Claude Code and Cursor, TOML for Codex) that starts the observed
//! process in resident mode with strict observation, the perf events path and the database URL.

mod mcp_support;

use mcp_support::*;
use serde_json::Value;

fn print_host_config(env: &TestEnv, host: &str) -> (String, String) {
    let mut vars = env.vars("full"); // the printed config is always the observed profile
    vars.insert(
        "PATCHDIFF_PERF_EVENTS".into(),
        env.path().join("observed.perf.jsonl").display().to_string(),
    );
    let out = std::process::Command::new(EXE)
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
fn unknown_host_is_refused() {
    let env = TestEnv::new();
    let out = std::process::Command::new(EXE)
        .args(["mcp", "--print-host-config", "vim"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("observed"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("claude, codex, cursor"));
}

//! Independent client: the official MCP Python SDK (pinned in `tests/requirements.txt`) drives
//! the real binary over stdio and Streamable HTTP (`tests/python/sdk_client.py`). The SDK being
//! absent is a failure with instructions, never a skip: CI installs it.

use crate::mcp::*;
use serde_json::json;

/// The interpreter with the SDK: `PATCHDIFF_TEST_PYTHON`, else the project-local virtual
/// environment the README's test command creates (`target/venv`, so an externally managed
/// system Python (PEP 668) is never written to), else `python3` on `PATH`.
fn test_python() -> std::path::PathBuf {
    if let Some(python) = std::env::var_os("PATCHDIFF_TEST_PYTHON") {
        return python.into();
    }
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/bin/python");
    if venv.is_file() {
        venv
    } else {
        "python3".into()
    }
}

#[tokio::test]
async fn python_sdk_client_sees_the_contract() {
    let env = TestEnv::new();
    let (fixture, sha) = env.fixture("calendar.js", CALENDAR_JS);
    // The HTTP server shares the database; the script initializes and edits the target over
    // stdio first, then reads it over HTTP.
    let http = HttpServer::start(&env, "observed").await;
    let config = json!({
        "exe": exe(),
        "env": env.vars("observed"),
        "fixture": fixture,
        "sha256": sha,
        "http": {"url": http.url, "token": http.token},
    });
    let config_path = env.path().join("sdk.json");
    std::fs::write(&config_path, config.to_string()).expect("write config");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/sdk_client.py");
    let python = test_python();
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .arg(&config_path)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    match out.status.code() {
        Some(0) => {}
        Some(3) => panic!(
            "the official MCP Python SDK is not installed for {}: run \
             `python3 -m venv target/venv && target/venv/bin/pip install -r tests/requirements.txt` \
             (the README's test command and CI do).\n{stdout}",
            python.display()
        ),
        _ => panic!(
            "Python SDK client failed ({})\n{stdout}\n{stderr}",
            out.status
        ),
    }
    for check in [
        "ok: observed profile lists exactly six tools",
        "ok: full-profile tool refused at the profile boundary",
        "ok: ambiguous old_text is an isError receipt with advice",
        "ok: malformed arguments (unknown field) are an isError result",
        "ok: HTTP tools/list is the observed six",
    ] {
        assert!(stdout.contains(check), "missing `{check}`");
    }
    http.stop().await;
}

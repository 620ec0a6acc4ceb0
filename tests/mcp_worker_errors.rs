//! W8, W13, M4: worker errors are reported truthfully through the real `patchdiff mcp` binary —
//! a submission whose worker cannot be made ready names the real cause, never `NOT_READY` — and
//! the workspace profile needs no Node at all.

mod mcp_support;

use mcp_support::*;
use serde_json::json;

#[tokio::test]
async fn a_failed_prewarm_reports_its_real_code_not_not_ready() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    // A "Node" that exits at once: every launch dies before it is ready.
    let mut vars = env.vars("observed");
    vars.insert("PATCHDIFF_NODE_BINARY".into(), "/bin/false".into());
    let mcp = Mcp::launch(&vars).await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "lines": {"start": 3, "end": 6}}),
        )
        .await;
    let mut codes = Vec::new();
    for i in 0..4 {
        let r = mcp
            .call(
                "patchdiff_submit_observed_operations",
                json!({"target": "calendar", "request_key": format!("k{i}"), "base_revision": 0,
                       "operations": [{"observation_id": obs["observation_id"],
                                       "old_text": "addWindow(w) {", "new_text": "addWindow(win) {"}]}),
            )
            .await
            .expect("a tool result");
        assert_eq!(r.is_error, Some(true));
        let error = &r.structured_content.expect("structured")["error"];
        assert_eq!(error["code"], "VALIDATION_UNAVAILABLE", "{error}");
        let message = error["message"].as_str().unwrap_or_default().to_owned();
        assert!(
            !message.contains("NOT_READY"),
            "untruthful cause: {message}"
        );
        codes.push(message.split(':').next().unwrap_or_default().to_owned());
    }
    // Launches die (PROTOCOL: died before ready) until the rolling-minute limit refuses more.
    assert!(
        codes.iter().all(|c| c == "WAYMARK_WORKER_PROTOCOL"
            || c == "WAYMARK_WORKER_STARTUP_TIMEOUT"
            || c == "WAYMARK_WORKER_RESTART_LIMIT"),
        "{codes:?}"
    );
    assert_eq!(
        codes.last().map(String::as_str),
        Some("WAYMARK_WORKER_RESTART_LIMIT"),
        "{codes:?}"
    );
    mcp.stop().await;

    // W8: the audit records the same real codes, and no attempt was invented.
    let full = Mcp::launch(&env.vars("full")).await;
    let audit = full
        .ok("patchdiff_audit", json!({"target": "calendar"}))
        .await;
    let errors = audit["worker_errors"].as_object().expect("worker_errors");
    assert!(!errors.contains_key("WAYMARK_WORKER_NOT_READY"), "{audit}");
    assert!(
        errors.contains_key("WAYMARK_WORKER_RESTART_LIMIT"),
        "{audit}"
    );
    assert_eq!(audit["attempts"]["total"], 0, "{audit}");
    full.stop().await;
}

#[tokio::test]
async fn the_workspace_profile_starts_and_edits_without_node() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let mut vars = env.vars("workspace");
    vars.insert("PATH".into(), "/nonexistent".into());
    let mcp = Mcp::launch(&vars).await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "lines": {"start": 3, "end": 6}}),
        )
        .await;
    let receipt = mcp
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "k", "base_revision": 0,
                   "operations": [{"observation_id": obs["observation_id"],
                                   "old_text": "addWindow(w) {", "new_text": "addWindow(win) {"}]}),
        )
        .await;
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    mcp.stop().await;
}

#[test]
fn the_workspace_profile_still_refuses_invalid_worker_settings() {
    // P2 holds without Node too: a bad mode is refused naming the variable.
    let out = std::process::Command::new(EXE)
        .arg("mcp")
        .env_clear()
        .env("PATH", "/nonexistent")
        .env("PATCHDIFF_MCP_PROFILE", "workspace")
        .env("PATCHDIFF_WAYMARK_MODE", "sometimes")
        .env("HOME", std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run patchdiff mcp");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("PATCHDIFF_WAYMARK_MODE"), "{stderr}");
}

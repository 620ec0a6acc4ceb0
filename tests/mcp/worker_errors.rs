//! W8, W13, M4: worker errors are reported truthfully through the real `patchdiff mcp` binary —
//! a submission whose worker cannot be made ready names the real cause, never `NOT_READY` — and
//! the workspace profile needs no Node at all; a submission while the worker cannot start rolls
//! back with its worker error in the audit and no attempt, and its retry after recovery (same
//! process) is accepted exactly once.

use crate::mcp::*;
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
    let out = std::process::Command::new(exe())
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

/// A script directory whose `waymark_worker.mjs` runs the TEST-ONLY fault worker in
/// `stall_marker` mode: a validation of source containing `STALL_HERE` announces itself on one
/// FIFO and waits on another, so the test can kill the worker mid-validation without timing.
fn stalling_script_dir(dir: &std::path::Path) -> std::path::PathBuf {
    let scripts = dir.join("stalling-waymark");
    std::fs::create_dir_all(&scripts).unwrap();
    let fault = waymark_dir().join("test-fixtures/fault_worker.mjs");
    std::fs::write(
        scripts.join("waymark_worker.mjs"),
        format!(
            "process.argv.push(\"--fault\", \"stall_marker\");\nawait import({:?});\n",
            fault.display().to_string()
        ),
    )
    .unwrap();
    scripts
}

#[tokio::test]
async fn a_worker_lost_during_validation_rolls_back_and_the_retry_after_recovery_is_accepted() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let entered = env.path().join("stall-entered");
    let release = env.path().join("stall-release");
    for fifo in [&entered, &release] {
        nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    }
    let mut vars = env.vars("observed");
    vars.insert(
        "PATCHDIFF_WAYMARK_DIR".into(),
        stalling_script_dir(env.path()).display().to_string(),
    );
    vars.insert(
        "PATCHDIFF_TEST_STALL_ENTERED".into(),
        entered.display().to_string(),
    );
    vars.insert(
        "PATCHDIFF_TEST_STALL_RELEASE".into(),
        release.display().to_string(),
    );
    let mcp = std::sync::Arc::new(Mcp::launch(&vars).await);
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.count"}),
        )
        .await;
    let args = json!({"target": "calendar", "request_key": "k-stall", "base_revision": 0,
                      "operations": [{"observation_id": obs["observation_id"],
                                      "old_text": "return this.windows.length;",
                                      "new_text": "return this.windows.length; // STALL_HERE"}]});
    let submit = |args: serde_json::Value| {
        let mcp = mcp.clone();
        tokio::spawn(async move {
            mcp.call("patchdiff_submit_observed_operations", args)
                .await
                .expect("a tool result")
        })
    };
    let wait_entered = |entered: std::path::PathBuf| async move {
        tokio::task::spawn_blocking(move || std::fs::read_to_string(entered))
            .await
            .unwrap()
            .unwrap()
    };

    // 1. The worker dies while it validates: protocol loss, a worker error (W8).
    let first = submit(args.clone());
    assert_eq!(wait_entered(entered.clone()).await, "entered\n");
    let workers = children_of(mcp.pid);
    assert_eq!(workers.len(), 1, "one resident worker: {workers:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(workers[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the worker");
    let r = first.await.unwrap();
    assert_eq!(r.is_error, Some(true), "not accepted unvalidated: {r:?}");
    let error = &r.structured_content.expect("structured")["error"];
    assert_eq!(error["code"], "VALIDATION_UNAVAILABLE", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("WAYMARK_WORKER_PROTOCOL"),
        "{error}"
    );
    let t = mcp
        .ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    assert_eq!(t["revision"], 0, "rolled back: {t}");
    assert!(!t["content"].as_str().unwrap().contains("STALL_HERE"));

    // 2. The same request again: a new generation is made ready, validation runs (released
    // this time) and the edit is accepted at revision 1.
    let retry = submit(args);
    assert_eq!(wait_entered(entered.clone()).await, "entered\n");
    tokio::task::spawn_blocking(move || std::fs::write(release, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let r = retry.await.unwrap();
    let receipt = r.structured_content.expect("receipt");
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    assert_eq!(receipt["revision"], 1);
    if let Ok(mcp) = std::sync::Arc::try_unwrap(mcp) {
        mcp.stop().await;
    }

    // 3. The audit: the worker error is there, and only the accepted retry is an attempt.
    let full = Mcp::launch(&env.vars("full")).await;
    let audit = full
        .ok("patchdiff_audit", json!({"target": "calendar"}))
        .await;
    let errors = audit["worker_errors"].as_object().expect("worker_errors");
    assert!(errors.contains_key("WAYMARK_WORKER_PROTOCOL"), "{audit}");
    assert_eq!(audit["attempts"]["total"], 1, "{audit}");
    assert_eq!(audit["attempts"]["accepted"], 1, "{audit}");
    full.stop().await;
}

/// The real Node from PATH, as an absolute path.
fn real_node() -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file())
        .expect("node on PATH")
}

#[tokio::test]
async fn a_submission_while_the_worker_cannot_start_rolls_back_and_its_retry_after_recovery_is_accepted_once()
 {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    // The trusted Node executable is a wrapper that refuses to run until `node-up` exists:
    // the worker is unavailable, then recovers, within one MCP process.
    let up = env.path().join("node-up");
    let wrapper = env.path().join("node-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ -e {up} ] || {{ echo 'test: node is down' >&2; exit 70; }}\nexec {node} \"$@\"\n",
            up = up.display(),
            node = real_node().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut vars = env.vars("observed");
    vars.insert(
        "PATCHDIFF_NODE_BINARY".into(),
        wrapper.display().to_string(),
    );
    let mcp = Mcp::launch(&vars).await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "lines": {"start": 3, "end": 6}}),
        )
        .await;
    let args = json!({"target": "calendar", "request_key": "k-recover", "base_revision": 0,
                      "operations": [{"observation_id": obs["observation_id"],
                                      "old_text": "addWindow(w) {", "new_text": "addWindow(win) {"}]});

    // 1. Unavailable: a worker error (W8), nothing committed.
    let r = mcp
        .call("patchdiff_submit_observed_operations", args.clone())
        .await
        .expect("a tool result");
    assert_eq!(r.is_error, Some(true), "not accepted unvalidated: {r:?}");
    let error = &r.structured_content.expect("structured")["error"];
    assert_eq!(error["code"], "VALIDATION_UNAVAILABLE", "{error}");
    let cause = error["message"]
        .as_str()
        .unwrap_or_default()
        .split(':')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(cause.starts_with("WAYMARK_WORKER_"), "{error}");
    let t = mcp
        .ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    assert_eq!(t["revision"], 0, "rolled back: {t}");
    assert_eq!(t["content"], CALENDAR_JS, "rolled back: {t}");

    // 2. Recovered: the same request is accepted at revision 1 …
    std::fs::write(&up, "").unwrap();
    let accepted = mcp
        .call("patchdiff_submit_observed_operations", args.clone())
        .await
        .expect("a tool result");
    let receipt = accepted.structured_content.clone().expect("receipt");
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    assert_eq!(receipt["revision"], 1, "{receipt}");
    // … and once only: a third send returns the same receipt, byte for byte (K4).
    let again = mcp
        .call("patchdiff_submit_observed_operations", args)
        .await
        .expect("a tool result");
    assert_eq!(texts(&again), texts(&accepted));
    let t = mcp
        .ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    assert_eq!(t["revision"], 1, "{t}");
    assert_eq!(
        t["content"],
        CALENDAR_JS.replace("addWindow(w) {", "addWindow(win) {"),
        "{t}"
    );
    mcp.stop().await;

    // 3. The audit: the failed submission left its worker error and no attempt; the
    // recovered one is the only attempt.
    let full = Mcp::launch(&env.vars("full")).await;
    let audit = full
        .ok("patchdiff_audit", json!({"target": "calendar"}))
        .await;
    let errors = audit["worker_errors"].as_object().expect("worker_errors");
    assert_eq!(
        errors.get(&cause).and_then(|n| n.as_u64()),
        Some(1),
        "{audit}"
    );
    assert_eq!(
        errors.values().filter_map(|n| n.as_u64()).sum::<u64>(),
        1,
        "{audit}"
    );
    assert_eq!(audit["attempts"]["total"], 1, "{audit}");
    assert_eq!(audit["attempts"]["accepted"], 1, "{audit}");
    full.stop().await;
}

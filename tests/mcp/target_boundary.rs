//! K5/W7 end to end: a submission whose validation stalls in a real worker (the test-only fault
//! worker `stall_marker`, held on a FIFO) never delays work on another target — neither in another
//! `patchdiff mcp` process on the same database nor in the stalled process itself. Synchronized on
//! the FIFOs, not on timing.

use std::path::{Path, PathBuf};

use crate::backends::{Backend, Scratch};
use crate::mcp::*;
use serde_json::{Value, json};

/// A script directory whose `waymark_worker.mjs` runs the fault worker in `stall_marker` mode.
fn stalling_script_dir(dir: &Path) -> PathBuf {
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

fn fifo(path: &Path) -> PathBuf {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    path.to_owned()
}

async fn observe(mcp: &Mcp, target: &str, scope: &str) -> Value {
    mcp.ok(
        "patchdiff_observe_scope",
        json!({"target": target, "scope": scope}),
    )
    .await
}

fn submission(target: &str, key: &str, obs: &Value, new_text: &str) -> Value {
    json!({"target": target, "request_key": key, "base_revision": obs["revision"],
           "operations": [{"observation_id": obs["observation_id"],
                           "old_text": "return this.windows.length;", "new_text": new_text}]})
}

async fn a_stalled_validation_on_one_target_never_delays_another_target(b: Backend) {
    let (_scratch, env) = env_on(b);
    env.init_target("a", CALENDAR_JS).await;
    env.init_target("b", CALENDAR_JS).await;
    let entered = fifo(&env.path().join("stall-entered"));
    let release = fifo(&env.path().join("stall-release"));
    let mut stalled_vars = env.vars("observed");
    stalled_vars.insert(
        "PATCHDIFF_WAYMARK_DIR".into(),
        stalling_script_dir(env.path()).display().to_string(),
    );
    stalled_vars.insert(
        "PATCHDIFF_TEST_STALL_ENTERED".into(),
        entered.display().to_string(),
    );
    stalled_vars.insert(
        "PATCHDIFF_TEST_STALL_RELEASE".into(),
        release.display().to_string(),
    );
    let stalled = std::sync::Arc::new(Mcp::launch(&stalled_vars).await);
    let other = Mcp::launch(&env.vars("observed")).await;

    // Observations go through the fault worker normally (no marker in the source yet).
    let obs_a = observe(&stalled, "a", "Calendar.count").await;
    let submit_a = tokio::spawn({
        let stalled = stalled.clone();
        let args = submission(
            "a",
            "ka",
            &obs_a,
            "return this.windows.length; // STALL_HERE",
        );
        async move {
            stalled
                .call("patchdiff_submit_observed_operations", args)
                .await
                .expect("a tool result")
        }
    });
    // Wait until a's validation is inside the worker (it holds a's target lock now).
    let line = tokio::task::spawn_blocking(move || std::fs::read_to_string(entered))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(line, "entered\n");

    // Another process: save, observe, submit and read b; read a.
    let saved = other.ok("patchdiff_save", json!({"target": "b"})).await;
    assert_eq!(saved["version"], 1);
    let obs_b = observe(&other, "b", "Calendar.count").await;
    let r = other
        .ok(
            "patchdiff_submit_observed_operations",
            submission("b", "kb", &obs_b, "return this.windows.length + 0;"),
        )
        .await;
    assert_eq!(r["outcome"], "accepted", "{r}");
    let a = other
        .ok("patchdiff_read_target", json!({"target": "a"}))
        .await;
    assert_eq!(a["revision"], 0, "a's undecided submission is invisible");
    // The stalled process itself: read and save b (its worker is busy, so `parses_cleanly` is
    // unknown rather than waited for).
    let b = stalled
        .ok("patchdiff_read_target", json!({"target": "b"}))
        .await;
    assert_eq!(b["revision"], 1);
    assert_eq!(b["parses_cleanly"], Value::Null);
    let saved = stalled.ok("patchdiff_save", json!({"target": "b"})).await;
    assert_eq!(saved["version"], 2);
    assert!(
        !submit_a.is_finished(),
        "a's submission is still stalled while b was worked on"
    );

    tokio::task::spawn_blocking(move || std::fs::write(release, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let r = submit_a.await.unwrap();
    let receipt = r.structured_content.expect("receipt");
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    assert_eq!(receipt["revision"], 1);
    other.stop().await;
    if let Ok(stalled) = std::sync::Arc::try_unwrap(stalled) {
        stalled.stop().await;
    }
}

/// A test world whose `patchdiff mcp` processes use a fresh database of `b`.
fn env_on(b: Backend) -> (Scratch, TestEnv) {
    let scratch = Scratch::new(b);
    let env = TestEnv::with_database_url(scratch.postgres_url().map(str::to_owned));
    (scratch, env)
}

backend_tokio_tests!(a_stalled_validation_on_one_target_never_delays_another_target,);

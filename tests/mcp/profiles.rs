//! SPEC M2–M4, W13, P1/P2: the profile boundary of the real `patchdiff mcp` binary, driven by
//! an `rmcp` client over stdio.

use std::os::unix::fs::PermissionsExt;

use crate::mcp::*;
use serde_json::json;

/// M2, spelled out from SPEC (not `patchdiff::mcp::OBSERVED_TOOLS`, so a seventh tool or a
/// renamed one in the product's list fails here).
const SIX_OBSERVED_TOOLS: [&str; 6] = [
    "patchdiff_read_target",
    "patchdiff_find_occurrences",
    "patchdiff_observe_scope",
    "patchdiff_submit_observed_operations",
    "patchdiff_save",
    "patchdiff_replay",
];

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

// The observed and full tool lists are pinned by `tests/mcp/rmcp_client.rs`.

#[tokio::test]
async fn workspace_profile_lists_the_editing_tools() {
    let env = TestEnv::new();
    let mcp = Mcp::launch(&env.vars("workspace")).await;
    assert_eq!(mcp.tool_names().await, sorted(&SIX_OBSERVED_TOOLS));
    mcp.stop().await;
}

#[tokio::test]
async fn observed_profile_refuses_full_and_unknown_tools_before_any_work() {
    let env = TestEnv::new();
    let perf = env.path().join("observed.perf.jsonl");
    let mut vars = env.vars("observed");
    vars.insert("PATCHDIFF_PERF_EVENTS".into(), perf.display().to_string());
    let (fixture, sha) = env.fixture("f.js", CALENDAR_JS);
    let dest = env.path().join("export.js");
    let observed = Mcp::launch(&vars).await;

    for (tool, args) in [
        (
            "patchdiff_init_target",
            json!({"target": "sneaky", "fixture": fixture, "sha256": sha, "language": "javascript"}),
        ),
        (
            "patchdiff_export_target",
            json!({"target": "sneaky", "dest": dest}),
        ),
        ("patchdiff_audit", json!({"target": "sneaky"})),
        ("patchdiff_worker_status", json!({})),
        ("patchdiff_drop_database", json!({})),
    ] {
        let err = observed
            .call(tool, args)
            .await
            .expect_err("a tool outside the profile is a JSON-RPC error");
        assert!(
            err.message.contains(&format!(
                "`{tool}` is not available in the observed profile"
            )),
            "{tool}: {}",
            err.message
        );
        assert_eq!(
            err.data.as_ref().and_then(|d| d["code"].as_str()),
            Some("PROFILE_BOUNDARY")
        );
        // The refusal tells the caller what it may call instead: the six, in listing order.
        assert!(
            err.message.ends_with(
                "; available tools: patchdiff_read_target, patchdiff_find_occurrences, \
                 patchdiff_observe_scope, patchdiff_submit_observed_operations, \
                 patchdiff_save, patchdiff_replay"
            ),
            "{tool}: {}",
            err.message
        );
    }
    observed.stop().await;

    // No work was done: the target does not exist and nothing was exported.
    assert!(!dest.exists(), "export ran despite the boundary");
    let full = Mcp::launch(&env.vars("full")).await;
    let r = full
        .call("patchdiff_read_target", json!({"target": "sneaky"}))
        .await
        .expect("read_target answers");
    assert_eq!(r.is_error, Some(true), "init ran despite the boundary");
    full.stop().await;

    // Refusals are visible as perf events, and no tool call span started for them.
    let events = std::fs::read_to_string(&perf).expect("perf events");
    let names: Vec<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "profile_refusal").count(), 5);
    assert!(!names.iter().any(|n| n == "mcp_call"), "{names:?}");
}

/// A Node wrapper that records each launch in `marker` and then runs the real Node.
fn recording_node(env: &TestEnv, marker: &std::path::Path) -> std::path::PathBuf {
    let node = patchdiff::waymark::config::resolve_node_binary(
        std::env::var_os("PATCHDIFF_NODE_BINARY").as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
    .expect("node on PATH");
    let script = env.path().join("node-wrapper.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho launched >> '{}'\nexec '{}' \"$@\"\n",
            marker.display(),
            node.display()
        ),
    )
    .expect("write wrapper");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

#[tokio::test]
async fn workspace_profile_never_starts_the_worker() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let marker = env.path().join("node-launches");
    let mut vars = env.vars("workspace");
    vars.insert(
        "PATCHDIFF_NODE_BINARY".into(),
        recording_node(&env, &marker).display().to_string(),
    );
    vars.insert("PATCHDIFF_STRICT_OBSERVATION_MODE".into(), "0".into());
    let ws = Mcp::launch(&vars).await;
    ws.ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    let found = ws
        .ok(
            "patchdiff_find_occurrences",
            json!({"target": "calendar", "text": "windows"}),
        )
        .await;
    assert!(found["occurrences"][0]["scope"].is_null());
    let obs = ws
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "lines": {"start": 7, "end": 7}}),
        )
        .await;
    let receipt = ws
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "k1", "base_revision": 0, "operations": [
                {"observation_id": obs["observation_id"], "old_text": "return this.windows.length;", "new_text": "return this.windows.length | 0;"}
            ]}),
        )
        .await;
    assert_eq!(receipt["outcome"], "accepted");
    ws.ok("patchdiff_save", json!({"target": "calendar"})).await;
    // A scope by name needs discovery, which this profile refuses rather than starting a worker.
    let r = ws
        .call(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.addWindow"}),
        )
        .await
        .expect("domain result");
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        r.structured_content
            .as_ref()
            .map(|s| s["error"]["code"].clone()),
        Some(json!("WORKER_UNAVAILABLE"))
    );
    assert!(children_of(ws.pid).is_empty(), "workspace spawned a child");
    assert!(!marker.exists(), "workspace launched node");
    ws.stop().await;

    // The same wrapper does run for the observed profile (the check above is not vacuous).
    let mut vars = env.vars("observed");
    vars.insert(
        "PATCHDIFF_NODE_BINARY".into(),
        recording_node(&env, &marker).display().to_string(),
    );
    let observed = Mcp::launch(&vars).await;
    observed
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.addWindow"}),
        )
        .await;
    assert!(marker.exists(), "observed profile never launched node");
    assert!(!children_of(observed.pid).is_empty());
    observed.stop().await;
}

/// K2: with strict observation mode on, an operation in no observed scope is rejected.
#[tokio::test]
async fn strict_observation_mode_is_honoured() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let op = json!([{"old_text": "return this.windows.length;", "new_text": "return 0;"}]);

    let perf = env.path().join("strict.perf.jsonl");
    let mut strict_vars = env.vars("observed");
    strict_vars.insert("PATCHDIFF_PERF_EVENTS".into(), perf.display().to_string());
    let strict = Mcp::launch(&strict_vars).await;
    let r = strict
        .call(
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "s1", "base_revision": 0, "operations": op}),
        )
        .await
        .expect("domain result");
    assert_eq!(r.is_error, Some(true));
    let receipt = r.structured_content.expect("receipt");
    assert_eq!(receipt["outcome"], "rejected");
    assert!(
        receipt["reasons"][0]
            .as_str()
            .is_some_and(|m| m.contains("strict observation mode requires an observation_id")),
        "{receipt}"
    );
    strict.stop().await;

    let lax_perf = env.path().join("lax.perf.jsonl");
    let mut vars = env.vars("observed");
    vars.insert("PATCHDIFF_STRICT_OBSERVATION_MODE".into(), "0".into());
    vars.insert(
        "PATCHDIFF_PERF_EVENTS".into(),
        lax_perf.display().to_string(),
    );
    let lax = Mcp::launch(&vars).await;
    let receipt = lax
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "s2", "base_revision": 0, "operations": op}),
        )
        .await;
    assert_eq!(receipt["outcome"], "accepted");
    lax.stop().await;

    // T4: the tool call's span carries its outcome: `failed` for the rejected receipt (an
    // `isError` result), `ok` for the accepted one.
    let call_outcomes = |path: &std::path::Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .expect("perf events")
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| {
                e["name"] == "mcp_call"
                    && e["ids"]["tool"] == "patchdiff_submit_observed_operations"
            })
            .map(|e| e["outcome"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(call_outcomes(&perf), ["failed"]);
    assert_eq!(call_outcomes(&lax_perf), ["ok"]);
}

#[test]
fn invalid_profile_or_strict_value_refuses_to_start() {
    let env = TestEnv::new();
    for (var, value) in [
        ("PATCHDIFF_MCP_PROFILE", "admin"),
        ("PATCHDIFF_STRICT_OBSERVATION_MODE", "yes"),
        ("PATCHDIFF_MCP_HTTP", "0.0.0.0:8080"),
    ] {
        let mut vars = env.vars("observed");
        vars.insert(var.into(), value.into());
        let out = std::process::Command::new(exe())
            .arg("mcp")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(&vars)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run patchdiff mcp");
        assert!(!out.status.success(), "{var}={value} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(var) && stderr.contains(value),
            "{var}: {stderr}"
        );
    }
}

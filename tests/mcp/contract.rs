//! SPEC M5, M6: the tool contract of the real `patchdiff mcp` binary — input schemas an agent can
//! act on, structured content once with a one-line summary, domain failures as `isError` results with
//! recovery advice, protocol misuse as JSON-RPC errors. Every test runs on SQLite and PostgreSQL
//! (S1; `tests/backends`).

use crate::backends::{Backend, Scratch};
use crate::mcp::*;
use serde_json::{Value, json};

/// M6: required argument names per tool (the stable public contract).
const REQUIRED: &[(&str, &[&str])] = &[
    ("patchdiff_read_target", &["target"]),
    ("patchdiff_find_occurrences", &["target", "text"]),
    ("patchdiff_observe_scope", &["target"]),
    (
        "patchdiff_submit_observed_operations",
        &["target", "request_key", "base_revision", "operations"],
    ),
    ("patchdiff_save", &["target"]),
    ("patchdiff_replay", &["target"]),
    (
        "patchdiff_init_target",
        &["target", "fixture", "sha256", "language"],
    ),
    ("patchdiff_export_target", &["target", "dest"]),
    ("patchdiff_audit", &["target"]),
    ("patchdiff_worker_status", &[]),
    (
        "patchdiff_replica_acquire",
        &["integration", "targets", "ttl_ms"],
    ),
    ("patchdiff_replica_renew", &["lease_id", "ttl_ms"]),
    ("patchdiff_replica_release", &["lease_id"]),
    (
        "patchdiff_replica_submit",
        &[
            "lease_id",
            "target",
            "request_key",
            "cursor",
            "expected_sha256",
            "operations",
        ],
    ),
    ("patchdiff_replica_changes", &["lease_id", "target"]),
];

async fn every_tool_declares_a_described_input_schema(b: Backend) {
    let (_scratch, env) = env_on(b);
    let mcp = Mcp::launch(&env.vars("full")).await;
    let tools = mcp.peer().list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), REQUIRED.len());
    for tool in tools {
        let name = tool.name.to_string();
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.len() > 40, "{name}: description too thin");
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{name}");
        let (_, required) = REQUIRED
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("unexpected tool {name}"));
        let mut declared: Vec<&str> = schema["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        declared.sort();
        let mut want = required.to_vec();
        want.sort();
        assert_eq!(declared, want, "{name}: required arguments");
        // Every property tells the agent what to put there.
        if let Some(props) = schema["properties"].as_object() {
            for (prop, body) in props {
                assert!(
                    body["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{name}.{prop} has no description"
                );
            }
        }
        // Unknown fields are refused (see `unknown_fields_are_json_rpc_errors`).
        assert_eq!(
            schema["additionalProperties"],
            json!(false),
            "{name}: schema must say unknown fields are refused"
        );
    }
    mcp.stop().await;
}

async fn the_observed_profile_lists_exactly_the_six_contract_tools(b: Backend) {
    // M2: the first six rows of the contract table, and nothing else.
    let (_scratch, env) = env_on(b);
    let mcp = Mcp::launch(&env.vars("observed")).await;
    let mut six: Vec<String> = REQUIRED[..6].iter().map(|(n, _)| n.to_string()).collect();
    six.sort();
    assert_eq!(
        six,
        [
            "patchdiff_find_occurrences",
            "patchdiff_observe_scope",
            "patchdiff_read_target",
            "patchdiff_replay",
            "patchdiff_save",
            "patchdiff_submit_observed_operations",
        ]
    );
    assert_eq!(mcp.tool_names().await, six);
    mcp.stop().await;
}

async fn results_carry_structured_content_once_with_the_ids_first(b: Backend) {
    let (_scratch, env) = env_on(b);
    env.init_target("calendar", CALENDAR_JS).await;
    let mcp = Mcp::launch(&env.vars("observed")).await;

    let r = mcp
        .call("patchdiff_read_target", json!({"target": "calendar"}))
        .await
        .expect("read");
    let s = r.structured_content.clone().expect("structured");
    for field in [
        "target", "version", "revision", "sha256", "language", "content",
    ] {
        assert!(s.get(field).is_some(), "read_target lacks {field}");
    }
    assert_eq!(s["content"], CALENDAR_JS);
    assert_eq!(s["sha256"], sha256_hex(CALENDAR_JS.as_bytes()));
    // Content travels once (issue 23 item 8): the text block is a one-line summary of the ids,
    // not a second copy; the ids lead the structured content (issue 25 item 1).
    let text = texts(&r);
    assert_eq!(text.len(), 1, "{text:?}");
    assert!(
        text[0].len() <= 300 && !text[0].contains("addWindow"),
        "{text:?}"
    );
    assert!(
        text[0].contains(&format!("sha256 {}", sha256_hex(CALENDAR_JS.as_bytes()))),
        "{text:?}"
    );
    let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys[..2], ["revision", "sha256"], "{keys:?}");
    assert_eq!(s["has_more"], false);
    assert_eq!(s["total"], CALENDAR_JS.len());

    let found = mcp
        .ok(
            "patchdiff_find_occurrences",
            json!({"target": "calendar", "text": "this.windows.push(w);"}),
        )
        .await;
    let occ = found["occurrences"].as_array().expect("occurrences");
    assert_eq!(occ.len(), 2);
    for field in ["start_byte", "end_byte", "line", "column", "scope"] {
        assert!(occ[0].get(field).is_some(), "occurrence lacks {field}");
    }
    assert_eq!(occ[0]["line"], 4);
    assert_eq!(occ[0]["scope"]["name"], "Calendar.addWindow");

    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.addWindow"}),
        )
        .await;
    for field in ["observation_id", "revision", "scope", "sha256", "text"] {
        assert!(obs.get(field).is_some(), "observe_scope lacks {field}");
    }
    for field in [
        "kind",
        "name",
        "start_byte",
        "end_byte",
        "start_line",
        "end_line",
    ] {
        assert!(obs["scope"].get(field).is_some(), "scope lacks {field}");
    }

    let receipt = mcp
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "k1", "base_revision": 0, "operations": [
                {"observation_id": obs["observation_id"], "old_text": "this.windows.push(w);\n    this.windows.push(w);", "new_text": "this.windows.push(w);"}
            ]}),
        )
        .await;
    for field in [
        "request_key",
        "attempt_id",
        "outcome",
        "revision",
        "sha256",
        "corrections",
        "reasons",
    ] {
        assert!(receipt.get(field).is_some(), "receipt lacks {field}");
    }
    assert_eq!(receipt["outcome"], "accepted");
    assert_eq!(receipt["revision"], 1);

    let saved = mcp
        .ok("patchdiff_save", json!({"target": "calendar"}))
        .await;
    assert_eq!(saved["version"], 1);
    let replay = mcp
        .ok(
            "patchdiff_replay",
            json!({"target": "calendar", "limit": 1}),
        )
        .await;
    assert_eq!(replay["entries"].as_array().map(Vec::len), Some(1));
    assert_eq!(replay["has_more"], true);
    assert!(replay["next_cursor"].is_string());
    mcp.stop().await;
}

async fn domain_failures_are_is_error_results_with_recovery_advice(b: Backend) {
    let (_scratch, env) = env_on(b);
    env.init_target("calendar", CALENDAR_JS).await;
    let mcp = Mcp::launch(&env.vars("observed")).await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.addWindow"}),
        )
        .await;

    // Ambiguous old_text: a rejected receipt, isError, naming the count, scope and the fix.
    let r = mcp
        .call(
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "amb", "base_revision": 0, "operations": [
                {"observation_id": obs["observation_id"], "old_text": "this.windows.push(w);", "new_text": "x();"}
            ]}),
        )
        .await
        .expect("a domain failure is a result, not a JSON-RPC error");
    assert_eq!(r.is_error, Some(true));
    let receipt = r.structured_content.clone().expect("receipt");
    assert_eq!(receipt["outcome"], "rejected");
    let reason = receipt["reasons"][0].as_str().unwrap_or_default();
    assert!(
        reason.contains("old_text occurs 2 times in scope")
            && reason.contains("Calendar.addWindow; include more context"),
        "{reason}"
    );
    assert!(texts(&r).iter().any(|t| t.contains(reason)));

    // Unknown target and unknown scope: isError with a code and what to do next.
    let r = mcp
        .call("patchdiff_read_target", json!({"target": "nope"}))
        .await
        .expect("result");
    assert_eq!(r.is_error, Some(true));
    let err = &r.structured_content.clone().expect("structured")["error"];
    assert!(
        err["code"].is_string() && err["message"].is_string(),
        "{err}"
    );
    let r = mcp
        .call(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.removeWindow"}),
        )
        .await
        .expect("result");
    assert_eq!(r.is_error, Some(true));
    let msg = r.structured_content.expect("structured")["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains("Calendar.addWindow"),
        "the error lists the scopes that exist: {msg}"
    );
    // Nothing changed.
    let t = mcp
        .ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    assert_eq!(t["revision"], 0);
    mcp.stop().await;
}

async fn malformed_arguments_are_is_error_results_a_model_can_correct(b: Backend) {
    let (_scratch, env) = env_on(b);
    env.init_target("calendar", CALENDAR_JS).await;
    let mcp = Mcp::launch(&env.vars("observed")).await;
    for (tool, args) in [
        // wrong type
        ("patchdiff_read_target", json!({"target": 5})),
        // missing required field
        ("patchdiff_find_occurrences", json!({"target": "calendar"})),
        // unknown field
        (
            "patchdiff_read_target",
            json!({"target": "calendar", "profile": "full"}),
        ),
        // nested wrong shape
        (
            "patchdiff_submit_observed_operations",
            json!({"target": "calendar", "request_key": "m", "base_revision": -1, "operations": []}),
        ),
        (
            "patchdiff_observe_scope",
            json!({"target": "calendar", "lines": {"start": "one", "end": 2}}),
        ),
    ] {
        // MCP 2025-11-25 (SEP-1303): a tool result with isError, not a JSON-RPC error.
        let r = mcp
            .call(tool, args.clone())
            .await
            .unwrap_or_else(|e| panic!("{tool} {args}: JSON-RPC error {e:?}"));
        assert_eq!(r.is_error, Some(true), "{tool} {args}");
        let error = &r.structured_content.as_ref().expect("structured")["error"];
        assert_eq!(error["code"], "INVALID_ARGUMENTS", "{tool} {args}");
        assert!(
            error["message"].as_str().unwrap().contains("inputSchema"),
            "{error}"
        );
    }
    // The session is still usable and nothing changed.
    let t = mcp
        .ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    assert_eq!(t["revision"], 0);
    mcp.stop().await;
}

async fn export_reports_the_path_it_wrote(b: Backend) {
    // M6: `patchdiff_export_target` returns `target`, `version`, `sha256` and `path`.
    use std::os::unix::fs::PermissionsExt;
    let (_scratch, env) = env_on(b);
    env.init_target("calendar", CALENDAR_JS).await;
    let full = Mcp::launch(&env.vars("full")).await;
    let dest = env.path().join("out/calendar.js");
    let r = full
        .ok(
            "patchdiff_export_target",
            json!({"target": "calendar", "dest": dest}),
        )
        .await;
    assert_eq!(r["path"], json!(dest), "{r}");
    assert_eq!(r["version"], 0);
    assert_eq!(r["sha256"], sha256_hex(CALENDAR_JS.as_bytes()));
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), CALENDAR_JS);
    let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    full.stop().await;
}

/// A test world whose `patchdiff mcp` processes use a fresh database of `b`.
fn env_on(b: Backend) -> (Scratch, TestEnv) {
    let scratch = Scratch::new(b);
    let env = TestEnv::with_database_url(scratch.postgres_url().map(str::to_owned));
    (scratch, env)
}

backend_tokio_tests!(
    every_tool_declares_a_described_input_schema,
    the_observed_profile_lists_exactly_the_six_contract_tools,
    results_carry_structured_content_once_with_the_ids_first,
    domain_failures_are_is_error_results_with_recovery_advice,
    malformed_arguments_are_is_error_results_a_model_can_correct,
    export_reports_the_path_it_wrote,
);

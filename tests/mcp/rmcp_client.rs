//! The MCP server through a real `rmcp` client over a real `patchdiff mcp` child (SPEC M2, M3,
//! M5, K4): exact tool lists per profile, the profile boundary, and idempotent receipts.

use std::path::Path;

use patchdiff::canary::client::{LaunchSpec, McpProcess};
use patchdiff::canary::command::ProcessKind;
use patchdiff::fixtures::{FixtureManifest, bundled_manifest_path};
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
/// M3, spelled out from SPEC.
pub(crate) const FULL_ONLY: [&str; 9] = [
    "patchdiff_init_target",
    "patchdiff_export_target",
    "patchdiff_audit",
    "patchdiff_worker_status",
    // R1: replica leases are the trusted full profile's alone.
    "patchdiff_replica_acquire",
    "patchdiff_replica_renew",
    "patchdiff_replica_release",
    "patchdiff_replica_submit",
    "patchdiff_replica_changes",
];

async fn launch(dir: &Path, kind: ProcessKind, profile: &str) -> McpProcess {
    let spec = LaunchSpec {
        kind,
        exe: env!("CARGO_BIN_EXE_patchdiff").into(),
        env: vec![
            ("PATCHDIFF_MCP_PROFILE".into(), profile.into()),
            ("PATCHDIFF_STRICT_OBSERVATION_MODE".into(), "1".into()),
            (
                "PATCHDIFF_DATABASE_URL".into(),
                format!("sqlite://{}", dir.join("pd.sqlite").display()),
            ),
            (
                "PATCHDIFF_STATE_DIR".into(),
                dir.join("state").display().to_string(),
            ),
        ],
        stderr: dir.join(format!("{profile}.stderr.log")),
    };
    McpProcess::launch(&spec)
        .await
        .expect("patchdiff mcp starts")
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn observed_profile_lists_exactly_the_six_tools() {
    let dir = tempfile::tempdir().unwrap();
    let observed = launch(dir.path(), ProcessKind::Observed, "observed").await;
    let mut names = observed.tool_names().await.unwrap();
    names.sort();
    assert_eq!(names, sorted(&SIX_OBSERVED_TOOLS));
    observed.stop().await;
}

/// M3 and R1: the full profile adds the operator's tools and the replica tools (only it grants
/// leases).
#[tokio::test]
async fn full_profile_adds_init_export_audit_worker_status_and_replica_tools() {
    let dir = tempfile::tempdir().unwrap();
    let full = launch(dir.path(), ProcessKind::Full, "full").await;
    let mut names = full.tool_names().await.unwrap();
    names.sort();
    let all: Vec<&str> = SIX_OBSERVED_TOOLS
        .iter()
        .chain(FULL_ONLY.iter())
        .copied()
        .collect();
    assert_eq!(names, sorted(&all));
    full.stop().await;
}

#[tokio::test]
async fn observed_profile_refuses_full_profile_tools_at_the_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let observed = launch(dir.path(), ProcessKind::Observed, "observed").await;
    for tool in FULL_ONLY {
        let err = observed
            .call(tool, json!({"target": "x"}))
            .await
            .unwrap_err();
        assert!(
            err.message
                .contains("not available in the observed profile"),
            "{tool}: {}",
            err.message
        );
    }
    let err = observed.call("rm_rf", json!({})).await.unwrap_err();
    assert!(
        err.message.contains("unknown tool `rm_rf`"),
        "{}",
        err.message
    );
    // Refused before any work: nothing was created, so reading any target fails as unknown.
    let reply = observed
        .call("patchdiff_read_target", json!({"target": "x"}))
        .await
        .unwrap();
    assert!(reply.is_error);
    observed.stop().await;
}

/// Initializes the bundled `calendar` fixture through a full-profile process.
async fn init_calendar(full: &McpProcess) -> serde_json::Value {
    let manifest = FixtureManifest::load(&bundled_manifest_path().unwrap()).unwrap();
    let fixture = manifest.fixture("calendar").unwrap();
    full.call_ok(
        "patchdiff_init_target",
        json!({
            "target": "calendar",
            "fixture": manifest.resolve(&fixture.original),
            "sha256": fixture.sha256,
            "language": fixture.language,
        }),
    )
    .await
    .unwrap()
}

/// A full-profile process with the `calendar` fixture initialized.
async fn full_with_calendar(dir: &Path) -> McpProcess {
    let full = launch(dir, ProcessKind::Full, "full").await;
    init_calendar(&full).await;
    full
}

/// Observes `scope` of `calendar` and returns the observation.
async fn observe_calendar(full: &McpProcess, scope: &str) -> serde_json::Value {
    full.call_ok(
        "patchdiff_observe_scope",
        json!({"target": "calendar", "scope": scope}),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn request_key_retry_returns_the_identical_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let full = full_with_calendar(dir.path()).await;
    let obs = observe_calendar(&full, "Calendar.isInMaintenance").await;
    let text = obs["text"].as_str().unwrap();
    let line = text.lines().nth(1).unwrap().to_owned();
    let submit = json!({
        "target": "calendar",
        "request_key": "retry-1",
        "base_revision": obs["revision"],
        "operations": [{
            "observation_id": obs["observation_id"],
            "old_text": line,
            "new_text": format!("{line} // reviewed"),
        }],
    });
    let first = full
        .call_ok("patchdiff_submit_observed_operations", submit.clone())
        .await
        .unwrap();
    assert_eq!(first["outcome"], "accepted", "{first}");
    let second = full
        .call_ok("patchdiff_submit_observed_operations", submit.clone())
        .await
        .unwrap();
    assert_eq!(
        first, second,
        "a retry must return the stored receipt unchanged"
    );
    let target = full
        .call_ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await
        .unwrap();
    assert_eq!(
        target["revision"], 1,
        "the retry must not apply the edit twice"
    );

    let mut conflicting = submit;
    conflicting["operations"][0]["new_text"] = json!("// something else");
    let reply = full
        .call("patchdiff_submit_observed_operations", conflicting)
        .await
        .unwrap();
    assert!(reply.is_error);
    assert_eq!(reply.structured["error"]["code"], "REQUEST_KEY_CONFLICT");
    full.stop().await;
}

#[tokio::test]
async fn ambiguous_old_text_is_an_is_error_receipt_naming_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let full = full_with_calendar(dir.path()).await;
    let obs = observe_calendar(&full, "rangesOverlap").await;
    let reply = full
        .call(
            "patchdiff_submit_observed_operations",
            json!({
                "target": "calendar", "request_key": "amb-1", "base_revision": obs["revision"],
                "operations": [{"observation_id": obs["observation_id"], "old_text": "<=", "new_text": "<"}],
            }),
        )
        .await
        .unwrap();
    assert!(reply.is_error, "a rejected receipt is an isError result");
    assert_eq!(reply.structured["outcome"], "rejected");
    let reasons = reply.structured["reasons"].to_string();
    assert!(reasons.contains("occurs 2 times"), "{reasons}");
    full.stop().await;
}

#[tokio::test]
async fn an_edit_whose_scope_list_would_exceed_2_mib_is_validated_and_accepted() {
    // W3/W7: validation asks only whether the edited content parses, not for its scope list, so
    // an edit adding 60,000 functions (a scope list far over the 2 MiB output cap) is accepted;
    // before, it was rejected as VALIDATION_FAILED (output_too_large).
    let dir = tempfile::tempdir().unwrap();
    let full = full_with_calendar(dir.path()).await;
    let obs = observe_calendar(&full, "rangesOverlap").await;
    let flood: String = (0..60_000)
        .map(|i| format!("function f{i}() {{}}\n"))
        .collect();
    let first_line = obs["text"]
        .as_str()
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let reply = full
        .call(
            "patchdiff_submit_observed_operations",
            json!({
                "target": "calendar", "request_key": "flood-1", "base_revision": obs["revision"],
                "operations": [{"observation_id": obs["observation_id"], "old_text": first_line,
                                "new_text": format!("{flood}{first_line}")}],
            }),
        )
        .await
        .unwrap();
    assert!(!reply.is_error, "{}", reply.structured);
    assert_eq!(reply.structured["outcome"], "accepted");
    assert!(
        reply.structured.get("warnings").is_none(),
        "{}",
        reply.structured
    );
    // Observing one of the 60,000 by name answers with that scope alone.
    let f = full
        .call_ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "f59999"}),
        )
        .await
        .unwrap();
    assert_eq!(f["text"], "function f59999() {}");
    assert_eq!(f["parses_cleanly"], true);
    full.stop().await;
}

#[tokio::test]
async fn find_occurrences_is_bounded_and_says_how_many_there_are() {
    let dir = tempfile::tempdir().unwrap();
    let full = full_with_calendar(dir.path()).await;
    let all = full
        .call_ok(
            "patchdiff_find_occurrences",
            json!({"target": "calendar", "text": "const"}),
        )
        .await
        .unwrap();
    let total = all["total"].as_u64().unwrap();
    assert!(total > 2, "{all}");
    assert_eq!(all["truncated"], false);
    assert_eq!(all["occurrences"].as_array().unwrap().len() as u64, total);
    let some = full
        .call_ok(
            "patchdiff_find_occurrences",
            json!({"target": "calendar", "text": "const", "limit": 2}),
        )
        .await
        .unwrap();
    assert_eq!(some["occurrences"].as_array().unwrap().len(), 2);
    assert_eq!(some["total"], total);
    assert_eq!(some["truncated"], true);
    full.stop().await;
}

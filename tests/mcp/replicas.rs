//! R1, R2, R3 through the real `patchdiff mcp` binary: the full profile leases a target, submits as
//! a replica, retries by key, catches up and releases; a released lease is refused. (That the
//! observed profile neither lists nor runs the replica tools is pinned in `rmcp_client`.)

use crate::mcp::*;
use patchdiff::kernel::sha256_hex;
use serde_json::json;

const CONTENT: &str = "let a = 1;\nlet b = 2;\n";

#[tokio::test]
async fn full_profile_replica_leases_submits_catches_up_and_is_refused_once_released() {
    let env = TestEnv::new();
    env.init_target("t", CONTENT).await;
    let full = Mcp::launch(&env.vars("full")).await;
    let cp = full
        .ok(
            "patchdiff_replica_acquire",
            json!({"integration": "build-container", "targets": ["t"], "ttl_ms": 60000}),
        )
        .await;
    let lease_id = cp["lease"]["lease_id"].as_str().unwrap().to_owned();
    let checkpoint = &cp["targets"][0];
    assert_eq!(checkpoint["content"], CONTENT);
    assert_eq!(checkpoint["sha256"], sha256_hex(CONTENT));
    let cursor = checkpoint["cursor"].as_str().unwrap().to_owned();
    let submit = json!({
        "lease_id": lease_id, "target": "t", "request_key": "replica-1", "cursor": cursor,
        "expected_sha256": sha256_hex(CONTENT),
        "operations": [{"old_text": "let b = 2;", "new_text": "let b = 3;"}],
    });
    let receipt = full.ok("patchdiff_replica_submit", submit.clone()).await;
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    assert_eq!(receipt["request_key"], "replica-1");
    // An unknown outcome is learnt by retrying the key: the same receipt.
    let again = full.ok("patchdiff_replica_submit", submit.clone()).await;
    assert_eq!(again, receipt);
    let changes = full
        .ok(
            "patchdiff_replica_changes",
            json!({"lease_id": lease_id, "target": "t"}),
        )
        .await;
    let entries = changes["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{changes}");
    assert_eq!(entries[0]["request_key"], "replica-1");
    assert_eq!(entries[0]["sha256"], sha256_hex("let a = 1;\nlet b = 3;\n"));
    let renewed = full
        .ok(
            "patchdiff_replica_renew",
            json!({"lease_id": lease_id, "ttl_ms": 120000}),
        )
        .await;
    assert!(renewed["expires_at_ms"].as_u64() > cp["lease"]["expires_at_ms"].as_u64());
    full.ok("patchdiff_replica_release", json!({"lease_id": lease_id}))
        .await;
    let mut later = submit.clone();
    later["request_key"] = json!("replica-2");
    let refused = full.call("patchdiff_replica_submit", later).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    let body = refused.structured_content.unwrap();
    assert_eq!(body["error"]["code"], "LEASE_RELEASED", "{body}");
    let t = full
        .ok("patchdiff_read_target", json!({"target": "t"}))
        .await;
    assert_eq!(t["revision"], 1, "nothing applied after the release");
    full.stop().await;
}

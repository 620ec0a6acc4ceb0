//! Issue 23 item 5: a burst of submissions during the worker's start-up waits for its readiness
//! (W6, 7 s) instead of being refused `WAYMARK_WORKER_QUEUE_FULL`; the FIFO's eight waiting
//! places count requests for a ready worker (W5). Real `patchdiff mcp`, real Node worker.

use std::sync::Arc;

use crate::mcp::*;
use serde_json::json;

/// Submissions sent at once; the attack run saw 31–32 of 40 refused.
const BURST: usize = 40;

/// A JavaScript target with one line per submission of the burst.
fn lines_target() -> String {
    (0..BURST).map(|i| format!("const v{i} = {i};\n")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_submissions_at_once_to_a_fresh_process_are_all_accepted() {
    let env = TestEnv::new();
    env.init_target("burst", &lines_target()).await;
    // Observations by lines need no worker; take them in another process so the burst is the
    // first thing the fresh process is asked.
    let observer = Mcp::launch(&env.vars("observed")).await;
    let mut observations = Vec::new();
    for i in 0..BURST {
        let obs = observer
            .ok(
                "patchdiff_observe_scope",
                json!({"target": "burst", "lines": {"start": i + 1, "end": i + 1}}),
            )
            .await;
        observations.push(obs["observation_id"].clone());
    }
    observer.stop().await;

    let fresh = Arc::new(Mcp::launch(&env.vars("observed")).await);
    let submissions: Vec<_> = observations
        .into_iter()
        .enumerate()
        .map(|(i, observation)| {
            let fresh = fresh.clone();
            tokio::spawn(async move {
                let args = json!({"target": "burst", "request_key": format!("burst-{i}"),
                    "base_revision": 0,
                    "operations": [{"observation_id": observation,
                                    "old_text": format!("v{i} = {i};"),
                                    "new_text": format!("v{i} = {};", i + 1000)}]});
                fresh
                    .call("patchdiff_submit_observed_operations", args)
                    .await
                    .expect("a tool result")
            })
        })
        .collect();
    let mut refused = Vec::new();
    for (i, s) in submissions.into_iter().enumerate() {
        let r = s.await.expect("task");
        let s = r.structured_content.clone().unwrap_or_default();
        if r.is_error == Some(true) || s["outcome"] != "accepted" {
            refused.push(format!("burst-{i}: {s}"));
        }
    }
    assert!(
        refused.is_empty(),
        "{} of {BURST} not accepted:\n{}",
        refused.len(),
        refused.join("\n")
    );
    let t = fresh
        .ok("patchdiff_read_target", json!({"target": "burst"}))
        .await;
    assert_eq!(t["revision"], BURST as u64, "{t}");
    let content = t["content"].as_str().expect("content");
    for i in 0..BURST {
        assert!(
            content.contains(&format!("const v{i} = {};\n", i + 1000)),
            "{content}"
        );
    }
    if let Ok(fresh) = Arc::try_unwrap(fresh) {
        fresh.stop().await;
    }
}

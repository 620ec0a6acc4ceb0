//! Replicas (R1, R2, R3) on both backends: leases and checkpoints on an injected clock, replica
//! submissions transformed over the agent's edits, catch-up in pages, and the reviewers' races
//! — agent submissions and saves interleaved with a replica held at each point of its
//! submission — with every acknowledged edit present exactly once afterwards (K5: one boundary
//! per target for both writers and saves).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use patchdiff::kernel::sha256_hex;
use patchdiff::store::replica::*;
use patchdiff::store::*;

use crate::backends::Backend;
use crate::util::*;

backend_tests!(
    checkpoint_is_the_targets_content_and_cursor_of_one_moment,
    expired_or_released_lease_refuses_every_call_with_nothing_applied,
    reinit_of_a_leased_target_invalidates_the_lease,
    replica_submission_is_transformed_over_the_agents_edits_like_an_agents,
    changes_come_in_bounded_pages_after_the_cursor_and_never_before_the_checkpoint,
    replica_held_at_each_point_never_loses_either_sides_acknowledged_edit,
);

/// The clock tests move by hand (milliseconds since the epoch).
struct ManualClock(AtomicU64);

impl ManualClock {
    fn new() -> Self {
        Self(AtomicU64::new(1_000_000))
    }
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

fn lease(store: &dyn EditStore, clock: &ManualClock, targets: &[&str], ttl_ms: u64) -> Checkpoint {
    store
        .replica_acquire(
            &LeaseRequest {
                integration: "build-container".into(),
                targets: targets.iter().map(|t| t.to_string()).collect(),
                ttl_ms,
            },
            &|| clock.now(),
        )
        .unwrap()
}

fn rsub(
    target: &str,
    key: &str,
    cursor: &str,
    base: &str,
    ops: &[(&str, &str)],
) -> ReplicaSubmission {
    ReplicaSubmission {
        target: target.into(),
        request_key: key.into(),
        cursor: cursor.into(),
        expected_sha256: sha256_hex(base),
        operations: ops
            .iter()
            .map(|(o, n)| ReplicaOperation {
                old_text: (*o).into(),
                new_text: (*n).into(),
            })
            .collect(),
    }
}

fn submit(
    store: &dyn EditStore,
    clock: &ManualClock,
    lease_id: &str,
    s: &ReplicaSubmission,
) -> Result<Receipt, StoreError> {
    store.replica_submit(
        lease_id,
        s,
        &|| clock.now(),
        &|_, _| Validation::Passed,
        None,
    )
}

fn checkpoint_is_the_targets_content_and_cursor_of_one_moment(b: Backend) {
    let (_s, store) = fresh(b);
    let clock = ManualClock::new();
    init(&store, "a", "one\n");
    init(&store, "b", "two\n");
    store
        .submit("a", &sub("k1", 0, &[(None, "one", "ONE")]), false)
        .unwrap();
    store.save("a").unwrap();
    let cp = lease(store.as_ref(), &clock, &["a", "b"], 60_000);
    assert_eq!(cp.lease.integration, "build-container");
    assert_eq!(cp.lease.expires_at_ms, clock.now() + 60_000);
    assert_eq!(cp.lease.targets, vec!["a", "b"]);
    let a = &cp.targets[0];
    assert_eq!((a.name.as_str(), a.version, a.revision), ("a", 1, 1));
    assert_eq!(a.content, "ONE\n");
    assert_eq!(a.sha256, sha256_hex("ONE\n"));
    // The cursor is the journal's end at the checkpoint: nothing comes after it yet.
    let page = store.replay("a", Some(&a.cursor), None).unwrap();
    assert!(page.entries.is_empty(), "{page:?}");
    let changes = store
        .replica_changes(&cp.lease.lease_id, "a", None, None, &|| clock.now())
        .unwrap();
    assert!(changes.entries.is_empty());
    assert_eq!(cp.targets[1].content, "two\n");
    // Bad requests name what was wrong, and grant nothing.
    let err = store
        .replica_acquire(
            &LeaseRequest {
                integration: "ci".into(),
                targets: vec!["a".into(), "nope".into()],
                ttl_ms: 5_000,
            },
            &|| clock.now(),
        )
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownTarget, "{err}");
}

fn expired_or_released_lease_refuses_every_call_with_nothing_applied(b: Backend) {
    let (_s, store) = fresh(b);
    let clock = ManualClock::new();
    init(&store, "a", "x = 1;\n");
    let cp = lease(store.as_ref(), &clock, &["a"], 10_000);
    let id = cp.lease.lease_id.clone();
    let cursor = cp.targets[0].cursor.clone();
    let edit = rsub("a", "r1", &cursor, "x = 1;\n", &[("1", "2")]);
    // Renewal moves the expiry from now.
    clock.advance(9_000);
    let renewed = store.replica_renew(&id, 10_000, &|| clock.now()).unwrap();
    assert_eq!(renewed.expires_at_ms, clock.now() + 10_000);
    clock.advance(10_000);
    for err in [
        submit(store.as_ref(), &clock, &id, &edit).unwrap_err(),
        store
            .replica_changes(&id, "a", None, None, &|| clock.now())
            .unwrap_err(),
        store
            .replica_renew(&id, 5_000, &|| clock.now())
            .unwrap_err(),
        store.replica_release(&id, &|| clock.now()).unwrap_err(),
    ] {
        assert_eq!(err.code, ErrorCode::LeaseExpired, "{err}");
    }
    assert_eq!(store.read_target("a").unwrap().revision, 0);
    assert_eq!(store.audit("a").unwrap().attempts.total, 0);

    let cp = lease(store.as_ref(), &clock, &["a"], 10_000);
    let id = cp.lease.lease_id.clone();
    let released = store.replica_release(&id, &|| clock.now()).unwrap();
    assert_eq!(released.released_at_ms, Some(clock.now()));
    for err in [
        submit(store.as_ref(), &clock, &id, &edit).unwrap_err(),
        store
            .replica_changes(&id, "a", None, None, &|| clock.now())
            .unwrap_err(),
        store
            .replica_renew(&id, 5_000, &|| clock.now())
            .unwrap_err(),
        store.replica_release(&id, &|| clock.now()).unwrap_err(),
    ] {
        assert_eq!(err.code, ErrorCode::LeaseReleased, "{err}");
    }
    assert_eq!(store.read_target("a").unwrap().revision, 0);
    let unknown = submit(store.as_ref(), &clock, "lease-nope", &edit).unwrap_err();
    assert_eq!(unknown.code, ErrorCode::UnknownLease);

    // A release that lands while a submission is held before its commit: the commit refuses.
    let cp = lease(store.as_ref(), &clock, &["a"], 10_000);
    let id = cp.lease.lease_id.clone();
    let (reached_tx, reached_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    std::thread::scope(|scope| {
        let held = scope.spawn(|| {
            let seam = |p: ReplicaPoint| {
                if p == ReplicaPoint::BeforeCommit {
                    reached_tx.send(()).unwrap();
                    go_rx.lock().unwrap().recv().unwrap();
                }
            };
            store.replica_submit(
                &id,
                &edit,
                &|| clock.now(),
                &|_, _| Validation::Passed,
                Some(&seam),
            )
        });
        reached_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        // On PostgreSQL the release waits for nothing here (the lease row is locked only at
        // the commit), on SQLite it takes the writer: either way it lands first.
        store.replica_release(&id, &|| clock.now()).unwrap();
        go_tx.send(()).unwrap();
        let err = held.join().unwrap().unwrap_err();
        assert_eq!(err.code, ErrorCode::LeaseReleased, "{err}");
    });
    assert_eq!(store.read_target("a").unwrap().revision, 0);
    assert_eq!(store.audit("a").unwrap().attempts.total, 0);
}

fn reinit_of_a_leased_target_invalidates_the_lease(b: Backend) {
    let (_s, store) = fresh(b);
    let clock = ManualClock::new();
    init(&store, "a", "a\n");
    init(&store, "b", "b\n");
    let cp = lease(store.as_ref(), &clock, &["a", "b"], 60_000);
    let id = cp.lease.lease_id.clone();
    store
        .init_target("a", "javascript", b"a\n", &sha256_hex("a\n"), true)
        .unwrap();
    let edit = rsub("a", "r1", &cp.targets[0].cursor, "a\n", &[("a", "A")]);
    let err = submit(store.as_ref(), &clock, &id, &edit).unwrap_err();
    assert_eq!(err.code, ErrorCode::LeaseInvalidated, "{err}");
    let err = store
        .replica_renew(&id, 5_000, &|| clock.now())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::LeaseInvalidated, "{err}");
    let err = store
        .replica_changes(&id, "a", None, None, &|| clock.now())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::LeaseInvalidated, "{err}");
    // A target outside the lease is refused by name.
    init(&store, "c", "c\n");
    let outside = rsub("c", "r2", "1", "c\n", &[("c", "C")]);
    let err = submit(store.as_ref(), &clock, &id, &outside).unwrap_err();
    assert_eq!(err.code, ErrorCode::TargetNotLeased, "{err}");
    assert_eq!(store.read_target("a").unwrap().revision, 0);
    assert_eq!(store.read_target("c").unwrap().revision, 0);
}

fn replica_submission_is_transformed_over_the_agents_edits_like_an_agents(b: Backend) {
    let (_s, store) = fresh(b);
    let clock = ManualClock::new();
    let base = "let a = 1;\nlet b = 2;\n";
    init(&store, "t", base);
    let cp = lease(store.as_ref(), &clock, &["t"], 60_000);
    let id = cp.lease.lease_id.clone();
    let cursor = cp.targets[0].cursor.clone();
    // The agent edits the first line after the checkpoint.
    store
        .submit(
            "t",
            &sub("agent-1", 0, &[(None, "let a = 1;", "let a = 100;")]),
            false,
        )
        .unwrap();
    // The replica, still at its checkpoint, edits the second line: transformed, corrected.
    let edit = rsub(
        "t",
        "replica-1",
        &cursor,
        base,
        &[("let b = 2;", "let b = 3;")],
    );
    let r = submit(store.as_ref(), &clock, &id, &edit).unwrap();
    assert_eq!(r.outcome, Outcome::Accepted, "{r:?}");
    assert_eq!((r.base_revision, r.revision), (0, 2));
    assert_eq!(r.corrections.len(), 1, "{r:?}");
    assert_eq!(
        r.corrections[0].applied_start_byte,
        r.corrections[0].base_start_byte + 2
    );
    let now = store.read_target("t").unwrap();
    assert_eq!(now.content, "let a = 100;\nlet b = 3;\n");
    // K4: the same key and content returns the same receipt byte for byte.
    let again = submit(store.as_ref(), &clock, &id, &edit).unwrap();
    assert_eq!(
        serde_json::to_string(&again).unwrap(),
        serde_json::to_string(&r).unwrap()
    );
    assert_eq!(
        store.stored_receipt("t", "replica-1").unwrap().unwrap(),
        serde_json::to_string(&r).unwrap()
    );
    // The same key for different content, and an agent's key reused by the replica: conflicts.
    let other = rsub(
        "t",
        "replica-1",
        &cursor,
        base,
        &[("let b = 2;", "let b = 4;")],
    );
    assert_eq!(
        submit(store.as_ref(), &clock, &id, &other)
            .unwrap_err()
            .code,
        ErrorCode::RequestKeyConflict
    );
    let borrowed = rsub(
        "t",
        "agent-1",
        &cursor,
        base,
        &[("let b = 2;", "let b = 4;")],
    );
    assert_eq!(
        submit(store.as_ref(), &clock, &id, &borrowed)
            .unwrap_err()
            .code,
        ErrorCode::RequestKeyConflict
    );
    // An overlapping edit is rejected, never merged; a wrong digest is rejected too.
    let overlap = rsub(
        "t",
        "replica-2",
        &cursor,
        base,
        &[("let a = 1;", "let a = 7;")],
    );
    let r = submit(store.as_ref(), &clock, &id, &overlap).unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    assert!(
        r.reason_codes.iter().any(|c| c.as_str() == "EDIT_CONFLICT"),
        "{r:?}"
    );
    let mut wrong = rsub(
        "t",
        "replica-3",
        &cursor,
        base,
        &[("let b = 2;", "let b = 5;")],
    );
    wrong.expected_sha256 = sha256_hex("something else");
    let r = submit(store.as_ref(), &clock, &id, &wrong).unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    assert_eq!(
        store.read_target("t").unwrap().content,
        "let a = 100;\nlet b = 3;\n"
    );
    // A cursor not in this target's journal, or before the checkpoint, is refused.
    let stray = rsub("t", "replica-4", "999999", base, &[("let b", "let c")]);
    assert_eq!(
        submit(store.as_ref(), &clock, &id, &stray)
            .unwrap_err()
            .code,
        ErrorCode::InvalidCursor
    );
    let bad_sha = ReplicaSubmission {
        expected_sha256: "XYZ".into(),
        ..stray
    };
    assert_eq!(
        submit(store.as_ref(), &clock, &id, &bad_sha)
            .unwrap_err()
            .code,
        ErrorCode::InvalidInput
    );
}

fn changes_come_in_bounded_pages_after_the_cursor_and_never_before_the_checkpoint(b: Backend) {
    let (_s, store) = fresh(b);
    let clock = ManualClock::new();
    init(&store, "t", "n0\n");
    store
        .submit("t", &sub("pre", 0, &[(None, "n0", "n1")]), false)
        .unwrap();
    let cp = lease(store.as_ref(), &clock, &["t"], 60_000);
    let id = cp.lease.lease_id.clone();
    for k in 1..=5u64 {
        store
            .submit(
                "t",
                &sub(
                    &format!("k{k}"),
                    k,
                    &[(None, &format!("n{k}"), &format!("n{}", k + 1))],
                ),
                false,
            )
            .unwrap();
        store.save("t").unwrap();
    }
    let mut after: Option<String> = None;
    let mut kinds = Vec::new();
    let mut mirror = cp.targets[0].content.clone();
    loop {
        let page = store
            .replica_changes(&id, "t", after.as_deref(), Some(3), &|| clock.now())
            .unwrap();
        assert!(page.entries.len() <= 3);
        for e in &page.entries {
            kinds.push(e.kind);
            mirror = apply(&mirror, e);
            assert_eq!(sha256_hex(&mirror), e.sha256);
        }
        after = page.next_cursor.clone();
        if !page.has_more {
            break;
        }
    }
    assert_eq!(kinds.len(), 10, "{kinds:?}");
    assert_eq!(mirror, "n6\n");
    let before = cp.targets[0].cursor.parse::<i64>().unwrap() - 1;
    let err = store
        .replica_changes(&id, "t", Some(&before.to_string()), None, &|| clock.now())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidCursor, "{err}");
}

fn apply(content: &str, e: &JournalEntry) -> String {
    if e.kind != JournalKind::Edit {
        return content.to_owned();
    }
    apply_journal_operations(content, &e.operations).unwrap()
}

use crate::util::Rng;

/// The replica as an integration runs it: a mirror at its cursor, caught up from the changes.
struct Replica {
    lease_id: String,
    cursor: String,
    mirror: String,
}

impl Replica {
    fn catch_up(&mut self, store: &dyn EditStore, clock: &ManualClock) {
        loop {
            let page = store
                .replica_changes(&self.lease_id, "t", Some(&self.cursor), Some(3), &|| {
                    clock.now()
                })
                .unwrap();
            for e in &page.entries {
                self.mirror = apply(&self.mirror, e);
                assert_eq!(
                    sha256_hex(&self.mirror),
                    e.sha256,
                    "mirror at {}",
                    e.revision
                );
            }
            if let Some(c) = page.next_cursor {
                self.cursor = c;
            }
            if !page.has_more {
                return;
            }
        }
    }
}

enum Msg {
    Reached,
    Done(Box<Result<Receipt, StoreError>>),
}

/// Interleavings per run (each: one held replica submission, one to three agent steps).
const INTERLEAVINGS: u64 = 200;

fn replica_held_at_each_point_never_loses_either_sides_acknowledged_edit(b: Backend) {
    let seed = std::env::var("RACE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("replica races on {}: RACE_SEED={seed}", b.name());
    let mut rng = Rng(seed);
    let (_s, store) = fresh(b);
    let store: Arc<dyn EditStore> = store;
    let clock = ManualClock::new();
    init(&store, "t", "agent: [A]\nreplica: [R]\n");
    let cp = lease(store.as_ref(), &clock, &["t"], LEASE_MAX_TTL_MS);
    let mut replica = Replica {
        lease_id: cp.lease.lease_id.clone(),
        cursor: cp.targets[0].cursor.clone(),
        mirror: cp.targets[0].content.clone(),
    };
    let (mut accepted, mut rejected) = (Vec::<String>::new(), Vec::<String>::new());
    let mut tally = |r: &Receipt, marker: String| match r.outcome {
        Outcome::Accepted => accepted.push(marker),
        Outcome::Rejected => rejected.push(marker),
    };
    let mut agent_keys = 0u64;
    for n in 0..INTERLEAVINGS {
        let point = ReplicaPoint::ALL[rng.below(5) as usize];
        // One in five replica edits aims at the agent's region (a conflict when it moved).
        let (anchor, marker) = if rng.below(5) == 0 {
            ("[A]", format!("<x{n}>"))
        } else {
            ("[R]", format!("<r{n}>"))
        };
        let edit = rsub(
            "t",
            &format!("replica-{n}"),
            &replica.cursor,
            &replica.mirror,
            &[(anchor, &format!("{marker} {anchor}"))],
        );
        // The agent's view, read before the replica starts (often stale by its submission).
        let view = store.read_target("t").unwrap();
        let steps: Vec<bool> = (0..1 + rng.below(3)).map(|_| rng.below(3) != 0).collect();
        let (msg_tx, msg_rx) = mpsc::channel::<Msg>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let agent_results = std::thread::scope(|scope| {
            let replica_thread = {
                let (store, edit, clock, msg_tx) = (&store, &edit, &clock, msg_tx.clone());
                let (go_rx, lease_id) = (&go_rx, replica.lease_id.as_str());
                scope.spawn(move || {
                    let seam = |p: ReplicaPoint| {
                        if p == point {
                            msg_tx.send(Msg::Reached).unwrap();
                            go_rx.lock().unwrap().recv().unwrap();
                        }
                    };
                    let r = store.replica_submit(
                        lease_id,
                        edit,
                        &|| clock.now(),
                        &|_, _| Validation::Passed,
                        Some(&seam),
                    );
                    msg_tx.send(Msg::Done(Box::new(r))).unwrap();
                })
            };
            match msg_rx.recv_timeout(Duration::from_secs(60)).unwrap() {
                Msg::Reached => {}
                Msg::Done(r) => panic!("seed {seed}: replica never reached {point:?}: {r:?}"),
            }
            let mut results = Vec::new();
            let agent = |submit_step: bool, key: u64| {
                if submit_step {
                    let marker = format!("<a{key}>");
                    let s = sub(
                        &format!("agent-{key}"),
                        view.revision,
                        &[(None, "[A]", &format!("{marker} [A]"))],
                    );
                    (Some(marker), store.submit("t", &s, false).map(Some))
                } else {
                    (None, store.save("t").map(|_| None))
                }
            };
            if point.holds_boundary() {
                // Saves pass while the replica holds the boundary; submissions wait for it.
                let mut waiting = Vec::new();
                for &step in &steps {
                    agent_keys += 1;
                    if step {
                        let key = agent_keys;
                        waiting.push(scope.spawn(move || agent(true, key)));
                    } else {
                        results.push(agent(false, 0));
                    }
                }
                go_tx.send(()).unwrap();
                results.extend(waiting.into_iter().map(|h| h.join().unwrap()));
            } else {
                for &step in &steps {
                    agent_keys += 1;
                    results.push(agent(step, agent_keys));
                }
                go_tx.send(()).unwrap();
            }
            replica_thread.join().unwrap();
            results
        });
        let receipt = match msg_rx.recv().unwrap() {
            Msg::Done(r) => (*r).unwrap_or_else(|e| panic!("seed {seed}: replica {n}: {e}")),
            Msg::Reached => unreachable!(),
        };
        // One in four outcomes is "lost": the replica retries by key and learns the truth.
        if rng.below(4) == 0 {
            let again = submit(store.as_ref(), &clock, &replica.lease_id, &edit).unwrap();
            assert_eq!(
                serde_json::to_string(&again).unwrap(),
                serde_json::to_string(&receipt).unwrap(),
                "seed {seed}: a retry by key returns the same receipt"
            );
        }
        tally(&receipt, marker);
        for (marker, result) in agent_results {
            let r = result.unwrap_or_else(|e| panic!("seed {seed}: agent step: {e}"));
            if let (Some(m), Some(r)) = (marker, r) {
                tally(&r, m);
            }
        }
        replica.catch_up(store.as_ref(), &clock);
    }
    let content = store.read_target("t").unwrap().content;
    for m in &accepted {
        assert_eq!(
            content.matches(m.as_str()).count(),
            1,
            "seed {seed}: {m} once in {content}"
        );
    }
    for m in &rejected {
        assert_eq!(
            content.matches(m.as_str()).count(),
            0,
            "seed {seed}: {m} absent"
        );
    }
    assert!(
        accepted.len() as u64 >= INTERLEAVINGS / 2,
        "seed {seed}: {accepted:?}"
    );
    assert_eq!(
        replica.mirror, content,
        "seed {seed}: the replica's mirror is canonical"
    );
    // K6: every save replays byte for byte (replay_to_end checks each saved version).
    let (_, replayed) = replay_to_end(&store, "t");
    assert_eq!(replayed, content);
}

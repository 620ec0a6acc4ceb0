//! PostgreSQL submissions in as few round trips as the contract allows (S1, K3–K5): a
//! submission without a validator whose base is this process's last view of the target is one
//! round trip (recovery, a try of the boundary, row check and writes: one statement in its own
//! transaction); one whose view is stale, or that has a validator to run under the boundary, is
//! one round trip for its boundary and plan read and one for its writes and `COMMIT` — counted
//! by the store's own profile and,
//! independently, on the wire by the bench's delay proxy (used here with no delay). The
//! statement-per-read path this replaced made 16 round trips per submission.
//!
//! PostgreSQL only (SQLite has no round trips); says SKIPPED without a server.

use std::time::Duration;

use crate::backends::*;
use crate::delay_proxy;
use crate::util::*;
use patchdiff::store::*;

fn phase(p: &SubmissionProfile, phase: SubmissionPhase) -> u64 {
    p.phases
        .iter()
        .find(|f| f.phase == phase)
        .map_or(0, |f| f.round_trips)
}

/// `url` with its authority's host and port replaced by `addr`.
fn via(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (auth, path) = rest.split_once('/').unwrap();
    let user = auth
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{addr}/{path}")
}

fn upstream(url: &str) -> std::net::SocketAddr {
    let auth = url.split_once("://").unwrap().1.split('/').next().unwrap();
    let host_port = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .unwrap()
        .next()
        .unwrap()
}

#[test]
fn a_submission_is_one_round_trip_on_a_current_view_and_two_otherwise() {
    if !postgres_or_skip("a_submission_is_one_round_trip_on_a_current_view_and_two_otherwise") {
        return;
    }
    let db = fresh_database();
    let proxy = delay_proxy::DelayProxy::start(upstream(&db.url), Duration::ZERO).unwrap();
    let store = PostgresStore::connect(&via(&db.url, proxy.addr)).expect("connect");
    let other = PostgresStore::connect(&db.url).expect("connect");
    init(&store as &dyn EditStore, "t", "let a = 0;\nlet b = 0;\n");
    // Warm: the connection's prepared statements are made once, and the first submission
    // (no view of the target yet) takes the two-trip path.
    store
        .submit("t", &sub("warm", 0, &[(None, "a = 0", "a = 1")]), false)
        .unwrap();
    store.reset_submission_profile();
    let wire = proxy.client_bursts();

    // Current base, this process's view current: one trip.
    let r = store
        .submit("t", &sub("k1", 1, &[(None, "a = 1", "a = 2")]), false)
        .unwrap();
    assert_eq!(
        (r.outcome, r.revision),
        (Outcome::Accepted, 2),
        "{:?}",
        r.reasons
    );
    // Another client moves the target: this store's view is one revision behind and the
    // base is stale. The one trip finds the row moved and writes nothing; the two-trip path
    // transforms over the other edit.
    let o = other
        .submit("t", &sub("other", 2, &[(None, "b = 0", "b = 1")]), false)
        .unwrap();
    assert_eq!(o.outcome, Outcome::Accepted, "{:?}", o.reasons);
    let r = store
        .submit("t", &sub("k2", 2, &[(None, "a = 2", "a = 3")]), false)
        .unwrap();
    assert_eq!(
        (r.outcome, r.revision),
        (Outcome::Accepted, 4),
        "{:?}",
        r.reasons
    );
    // An identical retry: the stored receipt, byte for byte (its base is not the view: two
    // trips, the second a ROLLBACK).
    let again = store
        .submit("t", &sub("k2", 2, &[(None, "a = 2", "a = 3")]), false)
        .unwrap();
    assert_eq!(again, r);
    // The view is current again: one trip.
    let r = store
        .submit("t", &sub("k3", 4, &[(None, "a = 3", "a = 4")]), false)
        .unwrap();
    assert_eq!(
        (r.outcome, r.revision),
        (Outcome::Accepted, 5),
        "{:?}",
        r.reasons
    );
    // A validator runs under the boundary: two trips.
    let r = store
        .submit_validated(
            "t",
            &sub("k4", 5, &[(None, "a = 4", "a = 5")]),
            false,
            &|_, _| Validation::Passed,
        )
        .unwrap();
    assert_eq!(
        (r.outcome, r.revision),
        (Outcome::Accepted, 6),
        "{:?}",
        r.reasons
    );
    assert_eq!(
        store.read_target("t").unwrap().content,
        "let a = 5;\nlet b = 1;\n"
    );

    let p = store.submission_profile();
    assert_eq!(p.submissions, 5);
    assert_eq!(
        phase(&p, SubmissionPhase::OneTrip),
        3,
        "k1, k2 (stale), k3: {p:?}"
    );
    assert_eq!(
        phase(&p, SubmissionPhase::Lock),
        3,
        "k2, the retry, k4: {p:?}"
    );
    assert_eq!(phase(&p, SubmissionPhase::Commit), 2, "k2, k4: {p:?}");
    assert_eq!(phase(&p, SubmissionPhase::Rollback), 1, "the retry: {p:?}");
    assert_eq!(phase(&p, SubmissionPhase::PlanRead), 0, "{p:?}");
    assert_eq!(phase(&p, SubmissionPhase::Recovery), 0, "{p:?}");
    // The wire agrees within what it can tell (plus the one read_target: a read-only
    // transaction's BEGIN, reads and ROLLBACK, at most 4). On a quiet machine it counts 9–13;
    // under load a pipelined batch the client writes in two chunks, with the server's first
    // answer arriving between them, counts twice, so the wire gives an upper bound and the
    // profile above the exact count. Twenty would mean most statements travel alone.
    let bursts = proxy.client_bursts() - wire;
    assert!(
        (9..=19).contains(&bursts),
        "client request bursts on the wire: {bursts}"
    );
}

#[test]
fn a_one_trip_retry_from_another_process_returns_the_stored_receipt_or_a_key_conflict() {
    if !postgres_or_skip(
        "a_one_trip_retry_from_another_process_returns_the_stored_receipt_or_a_key_conflict",
    ) {
        return;
    }
    let db = fresh_database();
    let a = PostgresStore::connect(&db.url).expect("connect");
    let b = PostgresStore::connect(&db.url).expect("connect");
    init(&a as &dyn EditStore, "t", "let a = 0;\nlet b = 0;\n");
    // b commits revision 1, so its view is current; a has no view yet (two trips).
    b.submit("t", &sub("first", 0, &[(None, "b = 0", "b = 1")]), false)
        .unwrap();
    let r = a
        .submit("t", &sub("k", 1, &[(None, "a = 0", "a = 1")]), false)
        .unwrap();
    assert_eq!(
        (r.outcome, r.revision),
        (Outcome::Accepted, 2),
        "{:?}",
        r.reasons
    );
    b.reset_submission_profile();
    // The same request from b, planned on b's (now stale) view: the server recovers the
    // receipt before it looks at the row.
    let again = b
        .submit("t", &sub("k", 1, &[(None, "a = 0", "a = 1")]), false)
        .unwrap();
    assert_eq!(again, r);
    let conflict = b
        .submit("t", &sub("k", 1, &[(None, "a = 0", "a = 9")]), false)
        .unwrap_err();
    assert_eq!(
        conflict.code,
        ErrorCode::RequestKeyConflict,
        "{}",
        conflict.message
    );
    let p = b.submission_profile();
    assert_eq!(
        (
            p.submissions,
            phase(&p, SubmissionPhase::OneTrip),
            p.round_trips_per_submission()
        ),
        (2, 2, 1.0),
        "{p:?}"
    );
    // Nothing was written by either: revision 2, a's edit once.
    let t = a.read_target("t").unwrap();
    assert_eq!(
        (t.revision, t.content.as_str()),
        (2, "let a = 1;\nlet b = 1;\n")
    );
}

/// K5 with migration 6: the one-trip statement only *tries* the target's boundary, so a
/// submission whose view is current while another writer holds the boundary (here: b's
/// validator, which runs under it) is answered `stale` at once and waits on the two-trip path,
/// under that path's lock and statement limits. Observed on the server: the backend waiting for
/// the advisory lock runs the two-trip statement, never `patchdiff_submit_one`.
#[test]
fn a_one_trip_submission_never_waits_for_a_boundary_another_writer_holds() {
    if !postgres_or_skip("a_one_trip_submission_never_waits_for_a_boundary_another_writer_holds") {
        return;
    }
    let db = fresh_database();
    let a = PostgresStore::connect(&db.url).expect("connect");
    let b = PostgresStore::connect(&db.url).expect("connect");
    init(&a as &dyn EditStore, "t", "let a = 0;\nlet b = 0;\n");
    // a's view becomes current: its next submission on revision 2 is one trip.
    a.submit("t", &sub("warm", 0, &[(None, "a = 0", "a = 1")]), false)
        .unwrap();
    a.submit("t", &sub("k1", 1, &[(None, "a = 1", "a = 2")]), false)
        .unwrap();

    let (inside_tx, inside_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let waiting_query = "SELECT query FROM pg_stat_activity WHERE datname = current_database() \
                         AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()";
    let (held, queued, waiting) = std::thread::scope(|s| {
        let held = s.spawn(|| {
            // A validator is `Sync`; the receiver is not.
            let go_rx = std::sync::Mutex::new(go_rx);
            let validator = move |_: &str, _: &str| {
                inside_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
                Validation::Passed
            };
            b.submit_validated(
                "t",
                &sub("b", 2, &[(None, "b = 0", "b = 1")]),
                false,
                &validator,
            )
        });
        inside_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("b's validator runs under the boundary");
        a.reset_submission_profile();
        let queued = s.spawn(|| a.submit("t", &sub("k2", 2, &[(None, "a = 2", "a = 3")]), false));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let waiting = loop {
            let out = psql(&db.url, waiting_query).unwrap();
            if !out.trim().is_empty() {
                break out;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no backend ever waited for the boundary b holds"
            );
            std::thread::yield_now();
        };
        go_tx.send(()).unwrap();
        (held.join().unwrap(), queued.join().unwrap(), waiting)
    });
    assert!(
        !waiting.contains("patchdiff_submit_one"),
        "the one-trip statement waited for the boundary: {waiting}"
    );
    let held = held.unwrap();
    let queued = queued.unwrap();
    assert_eq!(
        (held.outcome, held.revision, queued.outcome, queued.revision),
        (Outcome::Accepted, 3, Outcome::Accepted, 4),
        "{:?} {:?}",
        held.reasons,
        queued.reasons
    );
    let p = a.submission_profile();
    assert_eq!(
        (
            p.submissions,
            phase(&p, SubmissionPhase::OneTrip),
            phase(&p, SubmissionPhase::Lock),
            phase(&p, SubmissionPhase::Commit)
        ),
        (1, 1, 1, 1),
        "stale at once, then the two-trip path: {p:?}"
    );
    assert_eq!(
        a.read_target("t").unwrap().content,
        "let a = 3;\nlet b = 1;\n"
    );
}

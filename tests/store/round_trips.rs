//! PostgreSQL submissions in as few round trips as the contract allows (S1, K3–K5): a
//! submission is one round trip for its boundary and plan read and one for its writes and
//! `COMMIT`, whether its base is current, stale behind another client's edit, or a retry of a
//! recorded key — counted by the store's own profile and, independently, on the wire by the
//! bench's delay proxy (used here with no delay). The statement-per-read path this replaced
//! made 16 round trips per submission.
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
fn a_submission_is_two_round_trips_current_stale_or_retried() {
    if !postgres_or_skip("a_submission_is_two_round_trips_current_stale_or_retried") {
        return;
    }
    let db = fresh_database();
    let proxy = delay_proxy::DelayProxy::start(upstream(&db.url), Duration::ZERO).unwrap();
    let store = PostgresStore::connect(&via(&db.url, proxy.addr)).expect("connect");
    let other = PostgresStore::connect(&db.url).expect("connect");
    init(&store as &dyn EditStore, "t", "let a = 0;\nlet b = 0;\n");
    // Warm: the connection's prepared statements are made once.
    store
        .submit("t", &sub("warm", 0, &[(None, "a = 0", "a = 1")]), false)
        .unwrap();
    store.reset_submission_profile();
    let wire = proxy.client_bursts();

    // Current base, cached content.
    let r = store
        .submit("t", &sub("k1", 1, &[(None, "a = 1", "a = 2")]), false)
        .unwrap();
    assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    // Another client moves the target: this store's cache is one revision behind and the
    // base is stale (operational transform over the other edit).
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
    // An identical retry: the stored receipt, byte for byte.
    let again = store
        .submit("t", &sub("k2", 2, &[(None, "a = 2", "a = 3")]), false)
        .unwrap();
    assert_eq!(again, r);
    assert_eq!(
        store.read_target("t").unwrap().content,
        "let a = 3;\nlet b = 1;\n"
    );

    let p = store.submission_profile();
    assert_eq!(p.submissions, 3);
    assert_eq!(
        p.round_trips_per_submission(),
        2.0,
        "two round trips each: {p:?}"
    );
    assert_eq!(phase(&p, SubmissionPhase::Lock), 3, "{p:?}");
    assert_eq!(phase(&p, SubmissionPhase::Commit), 2, "{p:?}");
    assert_eq!(phase(&p, SubmissionPhase::Rollback), 1, "the retry: {p:?}");
    assert_eq!(phase(&p, SubmissionPhase::PlanRead), 0, "{p:?}");
    assert_eq!(phase(&p, SubmissionPhase::Recovery), 0, "{p:?}");
    // The wire agrees (plus the one read_target: a read-only transaction's BEGIN, reads and
    // ROLLBACK, at most 4).
    let bursts = proxy.client_bursts() - wire;
    assert!(
        (6..=10).contains(&bursts),
        "client request bursts on the wire: {bursts}"
    );
}

//! Issue 23 item 6: every call to PostgreSQL has a deadline. With the backends serving a
//! store's connections stopped by SIGSTOP (a frozen server: its kernel still acknowledges TCP,
//! so only a client-side deadline sees it), a read and a submission each answer `STORAGE`
//! within their documented deadlines, and after SIGCONT nothing is half-applied: the edit is
//! either absent or committed whole with its receipt, and a retry with the same request key
//! settles it exactly once.
//!
//! Needs a PostgreSQL server whose backends this process may signal (the scratch cluster the
//! harness starts, as root or its owner); otherwise says SKIPPED.

use std::time::{Duration, Instant};

use crate::backends::*;
use crate::util::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use patchdiff::store::*;

/// SIGCONTs the stopped backends on drop, so a failing assertion never leaves them frozen.
struct Frozen(Vec<Pid>);

impl Frozen {
    fn stop(pids: Vec<Pid>) -> Result<Frozen, String> {
        for &pid in &pids {
            kill(pid, Signal::SIGSTOP).map_err(|e| format!("SIGSTOP {pid}: {e}"))?;
        }
        Ok(Frozen(pids))
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for &pid in &self.0 {
            let _ = kill(pid, Signal::SIGCONT);
        }
    }
}

/// Runs `call` on its own thread and waits for it at most `bound`: a build without deadlines
/// fails here instead of hanging (the frozen backends are resumed as the panic unwinds).
fn within<T: Send + 'static>(
    bound: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(call());
    });
    match rx.recv_timeout(bound) {
        Ok(v) => (v, started.elapsed()),
        Err(_) => panic!("no answer within {bound:?}: the call has no deadline"),
    }
}

/// The server processes serving connections to database `db`.
fn backends_of(db: &str) -> Vec<Pid> {
    let server = server().expect("checked");
    let out = psql(
        &server.admin_url(),
        &format!("SELECT pid FROM pg_stat_activity WHERE datname = '{db}'"),
    )
    .expect("pg_stat_activity");
    out.lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .map(Pid::from_raw)
        .collect()
}

#[test]
fn a_frozen_server_answers_storage_within_the_deadlines_and_nothing_is_half_applied() {
    if !postgres_or_skip("a_frozen_server_answers_storage_within_the_deadlines") {
        return;
    }
    if !matches!(server(), Ok(Server::Scratch(_))) {
        eprintln!("*** SKIPPED: the server is external; its backends are not ours to SIGSTOP");
        return;
    }
    let db = fresh_database();
    let name = db.url.rsplit('/').next().expect("database name").to_owned();
    let store = std::sync::Arc::new(PostgresStore::connect(&db.url).expect("connect"));
    let lock_wait = Duration::from_secs(1);
    store.set_busy_timeout(lock_wait);
    store
        .init_target(
            "t",
            "javascript",
            b"const a = 1;\n",
            &patchdiff::kernel::sha256_hex("const a = 1;\n"),
            false,
        )
        .expect("init");
    let read_deadline = CONNECT_TIMEOUT + STATEMENT_BUDGET;
    let write_deadline = CONNECT_TIMEOUT + 2 * lock_wait + STATEMENT_BUDGET;
    // A margin for a loaded 2-core machine: the deadline fires on the store's own runtime.
    let slack = Duration::from_secs(3);

    let frozen = Frozen::stop(backends_of(&name)).expect("stop the backends");
    assert!(!frozen.0.is_empty(), "the store holds a pooled connection");

    let reader = store.clone();
    let (read, took) = within(read_deadline + 2 * slack, move || reader.read_target("t"));
    let err = read.expect_err("a frozen server cannot answer");
    assert_eq!(err.code, ErrorCode::Storage, "{err:?}");
    assert!(
        err.message.contains("did not answer within"),
        "{}",
        err.message
    );
    assert!(
        took >= read_deadline && took < read_deadline + slack,
        "read answered after {took:?}; its deadline is {read_deadline:?}"
    );

    let edit = sub("k-frozen", 0, &[(None, "a = 1", "a = 2")]);
    let (writer, sent) = (store.clone(), edit.clone());
    let (submitted, took) = within(write_deadline + 2 * slack, move || {
        writer.submit("t", &sent, false)
    });
    let err = submitted.expect_err("a frozen server cannot acknowledge");
    assert_eq!(err.code, ErrorCode::Storage, "{err:?}");
    assert!(
        err.message.contains("retry the same request"),
        "{}",
        err.message
    );
    assert!(
        took < write_deadline + slack,
        "submit answered after {took:?}; its deadline is {write_deadline:?}"
    );

    drop(frozen);
    // Nothing half-applied: the edit is absent or whole; the retry settles it exactly once.
    let retry = store
        .submit("t", &edit, false)
        .expect("the retry after thaw");
    assert_eq!(retry.outcome, Outcome::Accepted, "{retry:?}");
    let t = store.read_target("t").expect("read after thaw");
    assert_eq!(t.revision, 1, "exactly one edit: {t:?}");
    assert_eq!(t.content, "const a = 2;\n");
    let again = store.submit("t", &edit, false).expect("an identical retry");
    assert_eq!(again.revision, retry.revision);
}

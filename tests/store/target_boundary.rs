//! K5/W7: one serialization boundary per target. A submission's validation holds its target's
//! lock — across processes — but neither the database's write lock nor the store's mutexes, so
//! saves, submissions and reads of *other* targets never wait for it, while a second submission
//! of the *same* target does. Stalls are validators blocked on a channel or a probe waiting for
//! `GO`; the tests synchronize on those, never on sleeps. Each runs on SQLite (a `flock` per
//! target) and PostgreSQL (a per-target lock in the database) (issue 15).

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use crate::backends::Backend;
use crate::util::*;
use patchdiff::store::*;

/// Generous bound for "did not wait": only a failure waits this long.
const NEVER: Duration = Duration::from_secs(30);

/// Runs `f` on a thread and fails the test if it does not finish within [`NEVER`] — i.e. if it
/// waited for the stalled validation (which is only released after `f` returns).
fn finishes_without_waiting<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(NEVER)
        .unwrap_or_else(|_| panic!("{what} waited for another target's stalled validation"))
}

/// Starts a submission on `target` whose validator stalls until the returned sender fires; the
/// first receiver reports when validation has started, the join handle yields the receipt.
fn stalled_submission(
    store: &Arc<dyn EditStore>,
    target: &str,
    key: &str,
) -> (
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
    std::thread::JoinHandle<Result<Receipt, StoreError>>,
) {
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let entered_tx = std::sync::Mutex::new(entered_tx);
    let (store, target, key) = (store.clone(), target.to_owned(), key.to_owned());
    let handle = std::thread::spawn(move || {
        let stall = move |_: &str, _: &str| {
            let _ = entered_tx.lock().unwrap().send(());
            let _ = release_rx.lock().unwrap().recv();
            Validation::Passed
        };
        store.submit_validated(
            &target,
            &sub(&key, 0, &[(None, "<<END>>", "[A]<<END>>")]),
            false,
            &stall,
        )
    });
    (entered_rx, release_tx, handle)
}

fn a_stalled_validation_on_one_target_never_delays_another_target_in_the_same_process(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "a", "<<END>>");
    init(&store, "b", "<<END>>");
    let (entered, release, a) = stalled_submission(&store, "a", "ka");
    entered
        .recv_timeout(NEVER)
        .expect("validation of a started");

    let s = store.clone();
    let (saved, receipt, read_b, read_a) = finishes_without_waiting("work on b", move || {
        let saved = s.save("b").unwrap();
        let receipt = s
            .submit(
                "b",
                &sub("kb", 0, &[(None, "<<END>>", "[B]<<END>>")]),
                false,
            )
            .unwrap();
        (
            saved,
            receipt,
            s.read_target("b").unwrap(),
            s.read_target("a").unwrap(),
        )
    });
    assert_eq!(saved.version, 1);
    assert_eq!(receipt.outcome, Outcome::Accepted, "{:?}", receipt.reasons);
    assert_eq!(read_b.content, "[B]<<END>>");
    // A reader of a sees the last acknowledged state, not the undecided submission.
    assert_eq!((read_a.revision, read_a.content.as_str()), (0, "<<END>>"));

    release.send(()).unwrap();
    let r = a.join().unwrap().unwrap();
    assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    assert_eq!(store.read_target("a").unwrap().content, "[A]<<END>>");
}

fn a_second_submission_of_the_same_target_waits_for_the_first_and_is_transformed_over_it(
    b: Backend,
) {
    let (scratch, store) = fresh(b);
    init(&store, "a", "x <<END>>");
    let (entered, release, first) = stalled_submission(&store, "a", "first");
    entered.recv_timeout(NEVER).expect("validation started");

    // While the first holds the boundary, a second store (as another process would) cannot
    // pass it within a short wait: nothing is recorded.
    let other = scratch.open_with_lock_wait(Duration::from_millis(50));
    let err = other
        .submit("a", &sub("second", 0, &[(None, "x", "y")]), false)
        .expect_err("the target's boundary is held");
    assert_eq!(err.code, ErrorCode::Storage);
    assert!(
        err.message.contains("target a stayed busy"),
        "{}",
        err.message
    );
    assert_eq!(other.stored_receipt("a", "second").unwrap(), None);

    // With an ordinary wait it passes after the first commits, on a stale base, transformed.
    let other = scratch.open_with_lock_wait(NEVER);
    let second = std::thread::spawn(move || {
        other.submit("a", &sub("second", 0, &[(None, "x", "y")]), false)
    });
    release.send(()).unwrap();
    assert_eq!(first.join().unwrap().unwrap().revision, 1);
    let second = second.join().unwrap().unwrap();
    assert_eq!(second.outcome, Outcome::Accepted, "{:?}", second.reasons);
    assert_eq!(second.revision, 2);
    assert_eq!(store.read_target("a").unwrap().content, "y [A]<<END>>");
}

fn a_stalled_validation_in_another_process_never_delays_another_target_here(b: Backend) {
    let (scratch, store) = fresh(b);
    init(&store, "a", "<<END>>");
    init(&store, "b", "<<END>>");
    let db = db_arg(&scratch);
    let mut probe = Probe::spawn(&["stall-submit", &db, "a"]);
    assert_eq!(probe.line().as_deref(), Some("VALIDATING"));

    let s = store.clone();
    let (saved, receipt) = finishes_without_waiting("work on b", move || {
        let saved = s.save("b").unwrap();
        let receipt = s
            .submit(
                "b",
                &sub("kb", 0, &[(None, "<<END>>", "[B]<<END>>")]),
                false,
            )
            .unwrap();
        (saved, receipt)
    });
    assert_eq!(saved.version, 1);
    assert_eq!(receipt.outcome, Outcome::Accepted, "{:?}", receipt.reasons);
    // The boundary holds across processes: a submission of a here cannot pass it meanwhile.
    let impatient = scratch.open_with_lock_wait(Duration::from_millis(50));
    let err = impatient
        .submit(
            "a",
            &sub("here", 0, &[(None, "<<END>>", "[here]<<END>>")]),
            false,
        )
        .expect_err("a's boundary is held by the probe");
    assert!(
        err.message.contains("target a stayed busy"),
        "{}",
        err.message
    );

    probe.go();
    let lines = probe.finish();
    let r: Receipt = serde_json::from_str(lines[0].strip_prefix("RECEIPT ").unwrap()).unwrap();
    assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    assert_eq!(store.read_target("a").unwrap().content, "[stalled]<<END>>");
}

fn a_writer_killed_during_validation_releases_its_target(b: Backend) {
    let (scratch, store) = fresh(b);
    init(&store, "a", "<<END>>");
    let db = db_arg(&scratch);
    let mut probe = Probe::spawn(&["stall-submit", &db, "a"]);
    assert_eq!(probe.line().as_deref(), Some("VALIDATING"));
    probe.child.kill().unwrap(); // SIGKILL while holding a's boundary
    probe.child.wait().unwrap();

    let impatient = scratch.open_with_lock_wait(Duration::from_millis(500));
    let r = impatient
        .submit(
            "a",
            &sub("after", 0, &[(None, "<<END>>", "[after]<<END>>")]),
            false,
        )
        .expect("the kernel released the killed writer's lock");
    assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    // The killed writer acknowledged nothing and recorded nothing.
    assert_eq!(store.stored_receipt("a", "stalled").unwrap(), None);
    assert_eq!(store.read_target("a").unwrap().content, "[after]<<END>>");
}

fn an_edit_is_not_blamed_for_a_validation_failure_its_base_already_had(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "a", "BROKEN\n<<END>>");
    // A validator that fails any content containing BROKEN (as discovery fails on a base whose
    // scope list is over the output cap), and anything containing WORSE.
    let validator = |_: &str, content: &str| {
        if content.contains("WORSE") {
            Validation::Failed {
                code: "PARSE_FAILED".into(),
                message: "worse".into(),
            }
        } else if content.contains("BROKEN") {
            Validation::Failed {
                code: "OUTPUT_TOO_LARGE".into(),
                message: "the scope list exceeds 2 MiB".into(),
            }
        } else {
            Validation::Passed
        }
    };
    let ok = store
        .submit_validated(
            "a",
            &sub("k1", 0, &[(None, "<<END>>", "fixed<<END>>")]),
            false,
            &validator,
        )
        .unwrap();
    assert_eq!(ok.outcome, Outcome::Accepted, "{:?}", ok.reasons);
    let bad = store
        .submit_validated(
            "a",
            &sub("k2", 1, &[(None, "<<END>>", "WORSE")]),
            false,
            &validator,
        )
        .unwrap();
    assert_eq!(bad.outcome, Outcome::Rejected);
    assert_eq!(bad.reason_codes, ["VALIDATION_FAILED"]);
}

backend_tests!(
    a_stalled_validation_on_one_target_never_delays_another_target_in_the_same_process,
    a_second_submission_of_the_same_target_waits_for_the_first_and_is_transformed_over_it,
    a_stalled_validation_in_another_process_never_delays_another_target_here,
    a_writer_killed_during_validation_releases_its_target,
    an_edit_is_not_blamed_for_a_validation_failure_its_base_already_had,
);

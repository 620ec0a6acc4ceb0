//! Store behaviour through the public `EditStore` API: init (C1), observe (K2), submit (K3, K4),
//! save and replay (K6), audit, and every K8 error code.

use crate::backends::{self, Backend};
use crate::util::*;
use patchdiff::kernel::sha256_hex;
use patchdiff::store::*;

/// K1: a new target is at version 0 with the fixture's bytes and their SHA-256.
fn init_installs_fixture_at_version_zero_revision_zero(b: Backend) {
    let (_s, store) = fresh(b);
    let t = init(&store, "cal", "abc\n");
    assert_eq!((t.version, t.revision, t.saved_revision), (0, 0, 0));
    assert_eq!(t.sha256, sha256_hex("abc\n"));
    assert_eq!(t.initial_sha256, t.sha256);
    let read = store.read_target("cal").unwrap();
    assert_eq!(read, t);
    let saved = store.saved("cal").unwrap();
    assert_eq!((saved.version, saved.content.as_str()), (0, "abc\n"));
}

fn accepted_submission_advances_revision_and_receipt_hash_matches_content(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "fn a() {}\nfn b() {}\n");
    let r = store
        .submit("t", &sub("k1", 0, &[(None, "fn b", "fn bee")]), false)
        .unwrap();
    assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    assert_eq!(r.revision, 1);
    let t = store.read_target("t").unwrap();
    assert_eq!(t.content, "fn a() {}\nfn bee() {}\n");
    assert_eq!(r.sha256, t.sha256);
    assert_eq!(r.sha256, sha256_hex(&t.content));
}

fn old_text_occurring_twice_in_scope_is_rejected_with_count_and_recorded(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "x = 1;\nx = 1;\n");
    let r = store
        .submit("t", &sub("k", 0, &[(None, "x = 1;", "x = 2;")]), false)
        .unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    assert_eq!(r.reason_codes, ["OLD_TEXT_AMBIGUOUS"]);
    assert!(r.reasons[0].contains("operation 1"), "{}", r.reasons[0]);
    assert!(r.reasons[0].contains("occurs 2 times"), "{}", r.reasons[0]);
    let audit = store.audit("t").unwrap();
    assert_eq!(audit.attempts.rejected, 1);
    assert_eq!(audit.rejections["OLD_TEXT_AMBIGUOUS"], 1);
    assert_eq!(store.read_target("t").unwrap().revision, 0);
}

fn old_text_absent_from_scope_is_rejected_as_not_found(b: Backend) {
    let (_s, store) = fresh(b);
    init(
        &store,
        "t",
        "class C {\n  m() { return 1; }\n}\nreturn 2;\n",
    );
    let obs = observe_text(&store, "t", "m() { return 1; }", "method", "C.m");
    let r = store
        .submit(
            "t",
            &sub(
                "k",
                0,
                &[(Some(&obs.observation_id), "return 2;", "return 3;")],
            ),
            true,
        )
        .unwrap();
    assert_eq!(r.reason_codes, ["OLD_TEXT_NOT_FOUND"]);
    assert!(r.reasons[0].contains("method C.m"), "{}", r.reasons[0]);
}

fn identical_retry_returns_byte_identical_receipt_and_changes_nothing(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let s = sub("key", 0, &[(None, "b", "B")]);
    let first = store.submit("t", &s, false).unwrap();
    let again = store.submit("t", &s, false).unwrap();
    let stored = store.stored_receipt("t", "key").unwrap().unwrap();
    assert_eq!(serde_json::to_string(&first).unwrap(), stored);
    assert_eq!(serde_json::to_string(&again).unwrap(), stored);
    let t = store.read_target("t").unwrap();
    assert_eq!((t.revision, t.content.as_str()), (1, "aBc"));
    assert_eq!(store.audit("t").unwrap().attempts.total, 1);
}

fn recovery_alone_returns_the_stored_receipt_or_conflict_without_submitting(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let s = sub("key", 0, &[(None, "b", "B")]);
    assert_eq!(store.recover_receipt("t", &s).unwrap(), None);
    let first = store.submit("t", &s, false).unwrap();
    assert_eq!(store.recover_receipt("t", &s).unwrap(), Some(first));
    let other = sub("key", 0, &[(None, "c", "C")]);
    assert_eq!(
        store.recover_receipt("t", &other).unwrap_err().code,
        ErrorCode::RequestKeyConflict
    );
    assert_eq!(store.audit("t").unwrap().attempts.total, 1);
}

fn stale_base_is_transformed_and_correction_reported(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "one two three");
    let a = store
        .submit("t", &sub("a", 0, &[(None, "one", "ONE-ONE")]), false)
        .unwrap();
    assert_eq!(a.outcome, Outcome::Accepted);
    let b = store
        .submit("t", &sub("b", 0, &[(None, "three", "3")]), false)
        .unwrap();
    assert_eq!(b.outcome, Outcome::Accepted, "{:?}", b.reasons);
    assert_eq!(store.read_target("t").unwrap().content, "ONE-ONE two 3");
    assert_eq!(b.corrections.len(), 1);
    let c = &b.corrections[0];
    assert_eq!(
        (c.base_start_byte, c.applied_start_byte, c.applied_revision),
        (8, 12, 1)
    );
}

fn stale_base_overlapping_an_intervening_edit_is_rejected_as_conflict(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "alpha beta gamma");
    store
        .submit("t", &sub("a", 0, &[(None, "beta", "BETA")]), false)
        .unwrap();
    let r = store
        .submit("t", &sub("b", 0, &[(None, "alpha beta", "x")]), false)
        .unwrap();
    assert_eq!(r.reason_codes, ["EDIT_CONFLICT"]);
    assert_eq!(store.read_target("t").unwrap().content, "alpha BETA gamma");
}

fn strict_mode_requires_an_observation_for_every_operation(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let r = store
        .submit("t", &sub("k", 0, &[(None, "b", "B")]), true)
        .unwrap();
    assert_eq!(r.reason_codes, ["OBSERVATION_REQUIRED"]);
    assert!(r.reasons[0].starts_with("operation 1 (index 0)"));
}

fn strict_mode_rejects_a_scope_changed_since_observation_until_reobserved(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "fn f() {\n  a();\n  b();\n}\nfn g() {}\n");
    let obs = observe_text(&store, "t", "fn f() {\n  a();\n  b();\n}", "function", "f");
    let r1 = store
        .submit(
            "t",
            &sub("k1", 0, &[(Some(&obs.observation_id), "a();", "A();")]),
            true,
        )
        .unwrap();
    assert_eq!(r1.outcome, Outcome::Accepted, "{:?}", r1.reasons);
    let r2 = store
        .submit(
            "t",
            &sub("k2", 1, &[(Some(&obs.observation_id), "b();", "B();")]),
            true,
        )
        .unwrap();
    assert_eq!(r2.reason_codes, ["OBSERVATION_STALE"]);
    let again = observe_text(&store, "t", "fn f() {\n  A();\n  b();\n}", "function", "f");
    let r3 = store
        .submit(
            "t",
            &sub("k3", 1, &[(Some(&again.observation_id), "b();", "B();")]),
            true,
        )
        .unwrap();
    assert_eq!(r3.outcome, Outcome::Accepted, "{:?}", r3.reasons);
}

fn strict_mode_accepts_an_observed_scope_that_only_moved(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "head\nfn g() { x(); }\n");
    let obs = observe_text(&store, "t", "fn g() { x(); }", "function", "g");
    store
        .submit(
            "t",
            &sub("other", 0, &[(None, "head", "header line")]),
            false,
        )
        .unwrap();
    let r = store
        .submit(
            "t",
            &sub("mine", 0, &[(Some(&obs.observation_id), "x();", "y();")]),
            true,
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    assert_eq!(r.corrections.len(), 1);
    assert_eq!(
        store.read_target("t").unwrap().content,
        "header line\nfn g() { y(); }\n"
    );
}

fn overlapping_operations_in_one_submission_are_rejected(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abcdef");
    let r = store
        .submit(
            "t",
            &sub("k", 0, &[(None, "abcd", "x"), (None, "cdef", "y")]),
            false,
        )
        .unwrap();
    assert_eq!(r.reason_codes, ["OVERLAPPING_OPERATIONS"]);
}

fn expected_sha256_must_match_base_revision(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let mut s = sub("k", 0, &[(None, "b", "B")]);
    s.expected_sha256 = Some(sha256_hex("not it"));
    let r = store.submit("t", &s, false).unwrap();
    assert_eq!(r.reason_codes, ["EXPECTED_SHA256_MISMATCH"]);
    let mut ok = sub("k2", 0, &[(None, "b", "B")]);
    ok.expected_sha256 = Some(sha256_hex("abc"));
    assert_eq!(
        store.submit("t", &ok, false).unwrap().outcome,
        Outcome::Accepted
    );
}

fn save_increments_version_and_saved_returns_those_bytes(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    store
        .submit("t", &sub("k", 0, &[(None, "a", "aX")]), false)
        .unwrap();
    let s1 = store.save("t").unwrap();
    assert_eq!((s1.version, s1.revision), (1, 1));
    let s2 = store.save("t").unwrap();
    assert_eq!((s2.version, s2.revision), (2, 1));
    let saved = store.saved("t").unwrap();
    assert_eq!((saved.version, saved.content.as_str()), (2, "aXbc"));
    assert_eq!(saved.sha256, sha256_hex("aXbc"));
    assert_eq!(store.saved_version("t", 0).unwrap().content, "abc");
}

fn replay_pages_follow_cursors_to_the_end(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "<>");
    for k in 0..7 {
        store
            .submit(
                "t",
                &sub(&format!("k{k}"), k, &[(None, ">", &format!("{k}>"))]),
                false,
            )
            .unwrap();
    }
    store.save("t").unwrap();
    let mut cursor = None;
    let mut all = Vec::new();
    loop {
        let page = store.replay("t", cursor.as_deref(), Some(3)).unwrap();
        assert!(page.entries.len() <= 3);
        all.extend(page.entries);
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    // init + 7 edits + 1 save
    assert_eq!(all.len(), 9);
    assert_eq!(all[0].kind, JournalKind::Init);
    assert_eq!(all[8].kind, JournalKind::Save);
    assert_eq!(replay_to_end(&store, "t").1, "<0123456>");
}

fn reinit_of_fresh_target_is_allowed_but_target_with_history_needs_reset(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    init(&store, "t", "abc");
    store
        .submit("t", &sub("k", 0, &[(None, "b", "B")]), false)
        .unwrap();
    let e = store
        .init_target("t", "js", b"abc", &sha256_hex("abc"), false)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TargetNotFresh);
    assert!(e.message.contains("target t"));
    let t = store
        .init_target("t", "js", b"abc", &sha256_hex("abc"), true)
        .unwrap();
    assert_eq!((t.revision, t.content.as_str()), (0, "abc"));
    let audit = store.audit("t").unwrap();
    assert_eq!(
        (audit.attempts.total, audit.saves, audit.observations),
        (0, 0, 0)
    );
    // A reset target forgets request keys too.
    let r = store
        .submit("t", &sub("k", 0, &[(None, "c", "C")]), false)
        .unwrap();
    assert_eq!(r.outcome, Outcome::Accepted);
}

fn list_targets_and_audit_count_attempts_and_worker_errors(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "b", "x");
    init(&store, "a", "y");
    store
        .submit("a", &sub("k1", 0, &[(None, "y", "z")]), false)
        .unwrap();
    store
        .submit("a", &sub("k2", 1, &[(None, "nope", "z")]), false)
        .unwrap();
    store
        .record_worker_error("a", "WAYMARK_WORKER_QUEUE_FULL", "nine waiting")
        .unwrap();
    let list = store.list_targets().unwrap();
    assert_eq!(
        list.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!((list[0].accepted, list[0].rejected), (1, 1));
    let audit = store.audit("a").unwrap();
    assert_eq!(audit.worker_errors["WAYMARK_WORKER_QUEUE_FULL"], 1);
    assert_eq!(audit.rejections["OLD_TEXT_NOT_FOUND"], 1);
    assert_eq!(audit.receipts, 2);
}

// ---- K8: each error, and nothing changed ----

fn unknown_target_is_an_error_for_every_operation(b: Backend) {
    let (_s, store) = fresh(b);
    assert_eq!(
        store.read_target("nope").unwrap_err().code,
        ErrorCode::UnknownTarget
    );
    assert_eq!(
        store.save("nope").unwrap_err().code,
        ErrorCode::UnknownTarget
    );
    assert_eq!(
        store
            .submit("nope", &sub("k", 0, &[(None, "a", "b")]), false)
            .unwrap_err()
            .code,
        ErrorCode::UnknownTarget
    );
    assert_eq!(
        store.replay("nope", None, None).unwrap_err().code,
        ErrorCode::UnknownTarget
    );
    assert_eq!(
        store.audit("nope").unwrap_err().code,
        ErrorCode::UnknownTarget
    );
}

fn invalid_utf8_fixture_is_refused_naming_target_and_offset(b: Backend) {
    let (_s, store) = fresh(b);
    let bytes = b"ok\xffno";
    let e = store
        .init_target("cal", "js", bytes, &sha256_hex(bytes), false)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidUtf8);
    assert!(
        e.message.contains("cal") && e.message.contains("offset 2"),
        "{}",
        e.message
    );
    assert!(store.list_targets().unwrap().is_empty());
}

fn fixture_hash_mismatch_is_refused_naming_target(b: Backend) {
    let (_s, store) = fresh(b);
    let e = store
        .init_target("cal", "js", b"abc", &sha256_hex("abd"), false)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::FixtureHashMismatch);
    assert!(e.message.contains("cal"));
    assert!(store.list_targets().unwrap().is_empty());
}

fn reused_request_key_with_other_content_is_a_conflict(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    store
        .submit("t", &sub("k", 0, &[(None, "a", "A")]), false)
        .unwrap();
    let e = store
        .submit("t", &sub("k", 0, &[(None, "b", "B")]), false)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestKeyConflict);
    assert_eq!(store.read_target("t").unwrap().content, "Abc");
}

fn observing_at_an_old_revision_is_revision_moved(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    store
        .submit("t", &sub("k", 0, &[(None, "a", "A")]), false)
        .unwrap();
    let e = store.observe("t", 0, lines(0, 1)).unwrap_err();
    assert_eq!(e.code, ErrorCode::RevisionMoved);
    assert_eq!(store.audit("t").unwrap().observations, 0);
}

fn observing_out_of_range_or_inside_a_character_is_out_of_range(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "界");
    assert_eq!(
        store.observe("t", 0, lines(0, 4)).unwrap_err().code,
        ErrorCode::OutOfRange
    );
    assert_eq!(
        store.observe("t", 0, lines(1, 3)).unwrap_err().code,
        ErrorCode::OutOfRange
    );
    assert_eq!(
        store.observe("t", 0, lines(3, 0)).unwrap_err().code,
        ErrorCode::OutOfRange
    );
}

fn unknown_observation_is_an_error_and_nothing_is_recorded(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let e = store
        .submit("t", &sub("k", 0, &[(Some("no-such"), "a", "A")]), true)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::UnknownObservation);
    assert_eq!(store.audit("t").unwrap().attempts.total, 0);
    assert!(store.stored_receipt("t", "k").unwrap().is_none());
}

fn observation_of_another_target_is_unknown_here(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    init(&store, "u", "abc");
    let obs = store.observe("u", 0, lines(0, 3)).unwrap();
    let e = store
        .submit(
            "t",
            &sub("k", 0, &[(Some(&obs.observation_id), "a", "A")]),
            true,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::UnknownObservation);
}

fn too_many_operations_is_an_error_and_nothing_is_recorded(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let ops: Vec<(Option<&str>, &str, &str)> = (0..65).map(|_| (None, "a", "A")).collect();
    let e = store.submit("t", &sub("k", 0, &ops), false).unwrap_err();
    assert_eq!(e.code, ErrorCode::TooManyOperations);
    assert!(e.message.contains("64"));
    assert_eq!(store.audit("t").unwrap().attempts.total, 0);
}

fn base_revision_ahead_of_current_is_out_of_range(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let e = store
        .submit("t", &sub("k", 5, &[(None, "a", "A")]), false)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::OutOfRange);
    assert_eq!(store.audit("t").unwrap().attempts.total, 0);
}

fn empty_request_key_operations_or_old_text_are_invalid_input(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    for s in [
        sub("", 0, &[(None, "a", "A")]),
        sub("k", 0, &[]),
        sub("k", 0, &[(None, "", "A")]),
    ] {
        assert_eq!(
            store.submit("t", &s, false).unwrap_err().code,
            ErrorCode::InvalidInput
        );
    }
    assert_eq!(store.audit("t").unwrap().attempts.total, 0);
}

#[test]
fn malformed_submission_json_is_reported() {
    let e = parse_submission("{\"request_key\": 1}").unwrap_err();
    assert_eq!(e.code, ErrorCode::MalformedJson);
    let ok = parse_submission(
        r#"{"request_key":"k","base_revision":0,"operations":[{"old_text":"a","new_text":"b"}]}"#,
    )
    .unwrap();
    assert_eq!(ok.operations[0].observation_id, None);
}

fn bad_replay_cursor_and_limits_are_errors(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    assert_eq!(
        store.replay("t", Some("zz"), None).unwrap_err().code,
        ErrorCode::InvalidCursor
    );
    assert_eq!(
        store.replay("t", None, Some(0)).unwrap_err().code,
        ErrorCode::OutOfRange
    );
    assert_eq!(
        store.replay("t", None, Some(1001)).unwrap_err().code,
        ErrorCode::OutOfRange
    );
    assert_eq!(
        store.saved_version("t", 3).unwrap_err().code,
        ErrorCode::OutOfRange
    );
}

/// SQLite keeps its schema version in `user_version`; the PostgreSQL counterpart is
/// `postgres_database_from_a_newer_schema_refuses_to_connect`.
#[test]
fn sqlite_database_from_a_newer_schema_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pd.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let e = SqliteStore::open(&path).err().unwrap();
    assert_eq!(e.code, ErrorCode::Storage);
    assert!(e.message.contains("newer"), "{}", e.message);
}

/// PostgreSQL keeps its schema version in `schema_migrations`: a version from a newer build
/// makes `connect` refuse, naming the problem.
#[test]
fn postgres_database_from_a_newer_schema_refuses_to_connect() {
    if !backends::postgres_or_skip("postgres_database_from_a_newer_schema_refuses_to_connect") {
        return;
    }
    let scratch = backends::Scratch::new(Backend::Postgres);
    let url = scratch.postgres_url().unwrap();
    drop(PostgresStore::connect(url).unwrap());
    backends::psql(url, "INSERT INTO schema_migrations (version) VALUES (99)").unwrap();
    let e = PostgresStore::connect(url).err().unwrap();
    assert_eq!(e.code, ErrorCode::Storage);
    assert!(e.message.contains("newer"), "{}", e.message);
}

fn reopening_keeps_targets_and_migrations_apply_once(b: Backend) {
    let (scratch, store) = fresh(b);
    init(&*store, "t", "abc");
    drop(store);
    let again = scratch.open();
    assert_eq!(again.read_target("t").unwrap().content, "abc");
    drop(again);
    // A third open (migrations already applied) still works and sees the same target.
    assert_eq!(scratch.open().list_targets().unwrap().len(), 1);
}

/// V2: a store's identity is drawn once, with its schema — the same across reopenings,
/// another for another database — and carries no secret; the journal digest moves with every
/// journal entry and with nothing else.
fn identity_is_one_per_database_and_the_journal_digest_follows_the_journal(b: Backend) {
    let (scratch, store) = fresh(b);
    let first = store.identity().unwrap();
    assert_eq!(
        first.store_id.as_deref().map(str::len),
        Some(32),
        "{first:?}"
    );
    assert_eq!(first.backend, b.name());
    if b == Backend::Postgres {
        assert!(first.database_oid.is_some(), "{first:?}");
    }
    let text = serde_json::to_string(&first).unwrap();
    assert!(
        !text.contains("://") && !text.contains("password"),
        "{text}"
    );
    init(&*store, "t", "fn a() {}\n");
    let at_init = journal_digest(&*store, "t").unwrap();
    assert_eq!(at_init.entries, 1);
    store.read_target("t").unwrap();
    store.audit("t").unwrap();
    assert_eq!(journal_digest(&*store, "t").unwrap(), at_init);
    store
        .submit("t", &sub("k1", 0, &[(None, "fn a", "fn b")]), false)
        .unwrap();
    let edited = journal_digest(&*store, "t").unwrap();
    assert_eq!(edited.entries, 2);
    assert_ne!(edited.sha256, at_init.sha256);
    drop(store);
    let again = scratch.open();
    assert_eq!(again.identity().unwrap(), first);
    assert_eq!(journal_digest(&*again, "t").unwrap(), edited);
    let (_other, other) = fresh(b);
    let differences = first.differences(&other.identity().unwrap());
    assert!(
        differences.iter().any(|d| d.starts_with("store id ")),
        "{differences:?}"
    );
}

fn store_is_send_and_sync_and_usable_as_a_trait_object(b: Backend) {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SqliteStore>();
    let (_s, store) = fresh(b);
    let dynamic: std::sync::Arc<dyn EditStore> = store;
    assert!(dynamic.list_targets().unwrap().is_empty());
}

fn oversize_submission_text_is_submission_too_large_and_nothing_is_recorded(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "abc");
    let big = "x".repeat(patchdiff::kernel::MAX_SUBMISSION_TEXT_BYTES);
    let e = store
        .submit("t", &sub("k", 0, &[(None, "a", &big)]), false)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::SubmissionTooLarge);
    assert_eq!(store.audit("t").unwrap().attempts.total, 0);
}

// ---- W7/W8: the validation decision (new content, then its base) ----

/// A validator keyed on markers in the content, first match wins: `FAIL_B` fails with
/// `OUTPUT_TOO_LARGE`, `FAIL_A` with `PARSE_FAILED`, `GONE` is a worker that cannot run,
/// `SYNTAX` parses with syntax errors; anything else passes.
fn marker_validator(_language: &str, content: &str) -> Validation {
    if content.contains("FAIL_B") {
        Validation::Failed {
            code: "OUTPUT_TOO_LARGE".into(),
            message: "the scope list exceeds 2 MiB".into(),
        }
    } else if content.contains("FAIL_A") {
        Validation::Failed {
            code: "PARSE_FAILED".into(),
            message: "no tree".into(),
        }
    } else if content.contains("GONE") {
        Validation::Unavailable {
            code: "RESTART_LIMIT".into(),
            message: "the worker retired 3 times in a minute".into(),
        }
    } else if content.contains("SYNTAX") {
        Validation::PassedWithSyntaxErrors
    } else {
        Validation::Passed
    }
}

fn syntax_errors_are_accepted_with_a_warning_only_when_the_edit_introduced_them(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "clean\n<<END>>");
    let first = store
        .submit_validated(
            "t",
            &sub("k1", 0, &[(None, "<<END>>", "SYNTAX<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap();
    assert_eq!(first.outcome, Outcome::Accepted, "{:?}", first.reasons);
    assert_eq!(first.revision, 1);
    assert_eq!(first.warnings.len(), 1, "{:?}", first.warnings);
    assert!(
        first.warnings[0].starts_with("SYNTAX_ERRORS_INTRODUCED: "),
        "{:?}",
        first.warnings
    );
    // The base already has them: accepted, no warning.
    let second = store
        .submit_validated(
            "t",
            &sub("k2", 1, &[(None, "<<END>>", "more<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap();
    assert_eq!(second.outcome, Outcome::Accepted, "{:?}", second.reasons);
    assert_eq!(second.revision, 2);
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
}

fn a_validation_failure_rejects_the_edit_unless_its_base_fails_with_the_same_code(b: Backend) {
    let (_s, store) = fresh(b);
    // A base that passes: the new failure is the edit's.
    init(&store, "ok", "clean\n<<END>>");
    let r = store
        .submit_validated(
            "ok",
            &sub("k1", 0, &[(None, "<<END>>", "FAIL_A<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    assert_eq!(r.reason_codes, ["VALIDATION_FAILED"]);
    assert!(
        r.reasons[0].contains("PARSE_FAILED: no tree"),
        "{:?}",
        r.reasons
    );
    assert_eq!(store.read_target("ok").unwrap().revision, 0);
    // A base that already fails with PARSE_FAILED: the same failure keeps the edit.
    init(&store, "bad", "FAIL_A\n<<END>>");
    let kept = store
        .submit_validated(
            "bad",
            &sub("k1", 0, &[(None, "<<END>>", "x<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap();
    assert_eq!(kept.outcome, Outcome::Accepted, "{:?}", kept.reasons);
    assert_eq!(
        store.read_target("bad").unwrap().content,
        "FAIL_A\nx<<END>>"
    );
    // Another code than the base's is the edit's failure.
    let other = store
        .submit_validated(
            "bad",
            &sub("k2", 1, &[(None, "<<END>>", "FAIL_B<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap();
    assert_eq!(other.outcome, Outcome::Rejected);
    assert_eq!(other.reason_codes, ["VALIDATION_FAILED"]);
    assert!(
        other.reasons[0].contains("OUTPUT_TOO_LARGE"),
        "{:?}",
        other.reasons
    );
    assert_eq!(store.read_target("bad").unwrap().revision, 1);
}

fn a_validator_that_cannot_run_on_the_edit_or_its_base_records_nothing(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "clean\n<<END>>");
    // On the new content.
    let e = store
        .submit_validated(
            "t",
            &sub("k1", 0, &[(None, "<<END>>", "GONE<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ValidationUnavailable);
    assert!(e.message.starts_with("RESTART_LIMIT: "), "{}", e.message);
    // On the base, asked after the new content failed: still nothing is blamed or recorded.
    init(&store, "u", "GONE\n<<END>>");
    let e = store
        .submit_validated(
            "u",
            &sub("k1", 0, &[(None, "<<END>>", "FAIL_A<<END>>")]),
            false,
            &marker_validator,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ValidationUnavailable);
    for target in ["t", "u"] {
        assert_eq!(
            store.stored_receipt(target, "k1").unwrap(),
            None,
            "{target}"
        );
        assert_eq!(store.audit(target).unwrap().receipts, 0, "{target}");
        assert_eq!(store.read_target(target).unwrap().revision, 0, "{target}");
    }
}

fn a_worker_error_code_is_one_to_128_bytes(b: Backend) {
    let (_s, store) = fresh(b);
    init(&store, "t", "x");
    store
        .record_worker_error("t", &"C".repeat(128), "at the bound")
        .unwrap();
    for code in [String::new(), "C".repeat(129)] {
        let e = store
            .record_worker_error("t", &code, "refused")
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{} bytes", code.len());
        assert!(e.message.contains("1..=128 bytes"), "{}", e.message);
    }
    let audit = store.audit("t").unwrap();
    assert_eq!(audit.worker_errors.len(), 1);
    assert_eq!(audit.worker_errors[&"C".repeat(128)], 1);
}

backend_tests!(
    init_installs_fixture_at_version_zero_revision_zero,
    accepted_submission_advances_revision_and_receipt_hash_matches_content,
    old_text_occurring_twice_in_scope_is_rejected_with_count_and_recorded,
    old_text_absent_from_scope_is_rejected_as_not_found,
    identical_retry_returns_byte_identical_receipt_and_changes_nothing,
    recovery_alone_returns_the_stored_receipt_or_conflict_without_submitting,
    stale_base_is_transformed_and_correction_reported,
    stale_base_overlapping_an_intervening_edit_is_rejected_as_conflict,
    strict_mode_requires_an_observation_for_every_operation,
    strict_mode_rejects_a_scope_changed_since_observation_until_reobserved,
    strict_mode_accepts_an_observed_scope_that_only_moved,
    overlapping_operations_in_one_submission_are_rejected,
    expected_sha256_must_match_base_revision,
    save_increments_version_and_saved_returns_those_bytes,
    replay_pages_follow_cursors_to_the_end,
    reinit_of_fresh_target_is_allowed_but_target_with_history_needs_reset,
    list_targets_and_audit_count_attempts_and_worker_errors,
    unknown_target_is_an_error_for_every_operation,
    invalid_utf8_fixture_is_refused_naming_target_and_offset,
    fixture_hash_mismatch_is_refused_naming_target,
    reused_request_key_with_other_content_is_a_conflict,
    observing_at_an_old_revision_is_revision_moved,
    observing_out_of_range_or_inside_a_character_is_out_of_range,
    unknown_observation_is_an_error_and_nothing_is_recorded,
    observation_of_another_target_is_unknown_here,
    too_many_operations_is_an_error_and_nothing_is_recorded,
    base_revision_ahead_of_current_is_out_of_range,
    empty_request_key_operations_or_old_text_are_invalid_input,
    bad_replay_cursor_and_limits_are_errors,
    reopening_keeps_targets_and_migrations_apply_once,
    identity_is_one_per_database_and_the_journal_digest_follows_the_journal,
    store_is_send_and_sync_and_usable_as_a_trait_object,
    oversize_submission_text_is_submission_too_large_and_nothing_is_recorded,
    syntax_errors_are_accepted_with_a_warning_only_when_the_edit_introduced_them,
    a_validation_failure_rejects_the_edit_unless_its_base_fails_with_the_same_code,
    a_validator_that_cannot_run_on_the_edit_or_its_base_records_nothing,
    a_worker_error_code_is_one_to_128_bytes,
);

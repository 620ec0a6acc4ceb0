//! Unit tests of the pure submission planner (K2, K3) and scope mapping, without a store.

use std::collections::HashMap;

use patchdiff_kernel::*;

fn submission(base: u64, ops: &[(Option<&str>, &str, &str)]) -> Submission {
    Submission {
        request_key: "k".into(),
        base_revision: base,
        expected_sha256: None,
        operations: ops
            .iter()
            .map(|(o, a, b)| OperationRequest {
                observation_id: o.map(str::to_owned),
                old_text: (*a).into(),
                new_text: (*b).into(),
            })
            .collect(),
    }
}

fn observation(id: &str, revision: u64, content: &str, text: &str) -> ObservationRecord {
    let start = content.find(text).unwrap();
    ObservationRecord {
        observation_id: id.into(),
        revision,
        scope: ObservedScope {
            kind: "function".into(),
            name: Some(id.to_uppercase()),
            start_byte: start,
            end_byte: start + text.len(),
            start_line: 1,
            end_line: 1,
        },
        sha256: sha256_hex(text),
    }
}

struct Case<'a> {
    sub: Submission,
    strict: bool,
    base: &'a str,
    current: &'a str,
    current_revision: u64,
    steps_from: u64,
    steps: Vec<Vec<EditShape>>,
    observations: HashMap<String, ObservationRecord>,
}

impl Case<'_> {
    fn plan(&self) -> Plan {
        plan_submission(&PlanInput {
            target: "t",
            submission: &self.sub,
            strict: self.strict,
            base_content: self.base,
            current_content: self.current,
            current_revision: self.current_revision,
            steps_from: self.steps_from,
            steps: &self.steps,
            observations: &self.observations,
        })
    }
}

fn codes(plan: &Plan) -> Vec<&'static str> {
    match plan {
        Plan::Reject { reasons } => reasons.iter().map(|r| r.code.as_str()).collect(),
        Plan::Accept { .. } => Vec::new(),
    }
}

#[test]
fn accepted_plan_applies_every_operation_at_once() {
    let case = Case {
        sub: submission(0, &[(None, "one", "1"), (None, "three", "3")]),
        strict: false,
        base: "one two three",
        current: "one two three",
        current_revision: 0,
        steps_from: 0,
        steps: vec![],
        observations: HashMap::new(),
    };
    match case.plan() {
        Plan::Accept {
            new_content,
            corrections,
            edits,
            ..
        } => {
            assert_eq!(new_content, "1 two 3");
            assert!(corrections.is_empty());
            assert_eq!(edits.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn observation_newer_than_base_is_rejected() {
    let content = "fn f() { a }";
    let mut observations = HashMap::new();
    observations.insert("f".into(), observation("f", 1, content, "fn f() { a }"));
    let case = Case {
        sub: submission(0, &[(Some("f"), "a", "b")]),
        strict: true,
        base: content,
        current: content,
        current_revision: 1,
        steps_from: 0,
        steps: vec![vec![EditShape {
            start: 100,
            end: 100,
            new_len: 0,
        }]],
        observations,
    };
    assert_eq!(codes(&case.plan()), ["OBSERVATION_NEWER_THAN_BASE"]);
}

#[test]
fn lenient_mode_searches_the_scope_as_carried_to_the_base() {
    // Observed `g` at revision 0; revision 1 inserted text before it; base is revision 1.
    let r0 = "fn f() { x }\nfn g() { x }\n";
    let r1 = "// header\nfn f() { x }\nfn g() { x }\n";
    let mut observations = HashMap::new();
    observations.insert("g".into(), observation("g", 0, r0, "fn g() { x }"));
    let case = Case {
        sub: submission(1, &[(Some("g"), "x", "y")]),
        strict: false,
        base: r1,
        current: r1,
        current_revision: 1,
        steps_from: 0,
        steps: vec![vec![EditShape {
            start: 0,
            end: 0,
            new_len: 10,
        }]],
        observations,
    };
    match case.plan() {
        Plan::Accept { new_content, .. } => {
            assert_eq!(new_content, "// header\nfn f() { x }\nfn g() { y }\n")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn strict_mode_rejects_observation_whose_scope_an_intervening_step_touched() {
    let r0 = "fn g() { x; z }";
    let r1 = "fn g() { x; Z }";
    let mut observations = HashMap::new();
    observations.insert("g".into(), observation("g", 0, r0, r0));
    let case = Case {
        sub: submission(0, &[(Some("g"), "x", "y")]),
        strict: true,
        base: r0,
        current: r1,
        current_revision: 1,
        steps_from: 0,
        steps: vec![vec![EditShape {
            start: 12,
            end: 13,
            new_len: 1,
        }]],
        observations,
    };
    let plan = case.plan();
    assert_eq!(codes(&plan), ["OBSERVATION_STALE"]);
    if let Plan::Reject { reasons } = plan {
        assert!(reasons[0].message.contains("function G"));
        assert!(reasons[0].message.contains("changed at revision 1"));
    }
}

#[test]
fn every_failing_operation_gets_its_own_reason() {
    let case = Case {
        sub: submission(0, &[(None, "zz", "1"), (None, "a", "b"), (None, "q", "r")]),
        strict: false,
        base: "a a q",
        current: "a a q",
        current_revision: 0,
        steps_from: 0,
        steps: vec![],
        observations: HashMap::new(),
    };
    let plan = case.plan();
    assert_eq!(codes(&plan), ["OLD_TEXT_NOT_FOUND", "OLD_TEXT_AMBIGUOUS"]);
    if let Plan::Reject { reasons } = plan {
        assert!(reasons[0].message.starts_with("operation 1 (index 0)"));
        assert!(reasons[1].message.starts_with("operation 2 (index 1)"));
    }
}

#[test]
fn scope_boundary_crossed_by_an_edit_is_pulled_to_the_edit_edges() {
    // Edit [2, 6) -> 1 byte crosses the start of scope [4, 10).
    let ((s, e), touched) = map_scope(
        4,
        10,
        &[EditShape {
            start: 2,
            end: 6,
            new_len: 1,
        }],
    );
    assert!(touched);
    assert_eq!((s, e), (2, 7));
    // Edit [8, 12) -> 0 bytes crosses the end of scope [4, 10).
    let ((s, e), touched) = map_scope(
        4,
        10,
        &[EditShape {
            start: 8,
            end: 12,
            new_len: 0,
        }],
    );
    assert!(touched);
    assert_eq!((s, e), (4, 8));
    // Insertions exactly at the boundaries stay outside the scope.
    let ((s, e), touched) = map_scope(
        4,
        10,
        &[
            EditShape {
                start: 4,
                end: 4,
                new_len: 3,
            },
            EditShape {
                start: 10,
                end: 10,
                new_len: 3,
            },
        ],
    );
    assert!(!touched);
    assert_eq!((s, e), (7, 13));
}

#[test]
fn oversize_text_and_too_many_operations_are_refused_before_planning() {
    let big = "x".repeat(MAX_SUBMISSION_TEXT_BYTES);
    let s = submission(0, &[(None, "a", &big)]);
    assert_eq!(
        validate_submission(&s).unwrap_err().code.as_str(),
        "SUBMISSION_TOO_LARGE"
    );
    let ops: Vec<(Option<&str>, &str, &str)> =
        (0..=MAX_OPERATIONS).map(|_| (None, "a", "b")).collect();
    assert_eq!(
        validate_submission(&submission(0, &ops))
            .unwrap_err()
            .code
            .as_str(),
        "TOO_MANY_OPERATIONS"
    );
    assert!(validate_submission(&submission(0, &ops[..MAX_OPERATIONS])).is_ok());
}

/// A submission against a content with no steps (base = current = revision `rev`).
fn plain(ops: &[(Option<&str>, &str, &str)], content: &'static str, rev: u64) -> Case<'static> {
    Case {
        sub: submission(rev, ops),
        strict: false,
        base: content,
        current: content,
        current_revision: rev,
        steps_from: rev,
        steps: vec![],
        observations: HashMap::new(),
    }
}

fn reasons(plan: Plan) -> Vec<Rejection> {
    match plan {
        Plan::Reject { reasons } => reasons,
        Plan::Accept { new_content, .. } => panic!("accepted: {new_content:?}"),
    }
}

fn accepted(plan: Plan) -> (String, Vec<Correction>) {
    match plan {
        Plan::Accept {
            new_content,
            corrections,
            ..
        } => (new_content, corrections),
        Plan::Reject { reasons } => panic!("rejected: {reasons:?}"),
    }
}

#[test]
fn rejection_codes_are_spelled_as_the_spec_writes_them() {
    assert_eq!(
        RejectionCode::OldTextNotFound.to_string(),
        "OLD_TEXT_NOT_FOUND"
    );
    assert_eq!(RejectionCode::EditConflict.to_string(), "EDIT_CONFLICT");
    assert!(RejectionCode::ObservationStale == "OBSERVATION_STALE");
    assert!(RejectionCode::ObservationStale != "OBSERVATION_REQUIRED");
}

#[test]
fn expected_sha256_must_match_the_base_content_in_any_letter_case() {
    let content = "fn f() {}";
    let digest = sha256_hex(content);
    let mut case = plain(&[(None, "f()", "g()")], content, 0);
    case.sub.expected_sha256 = Some(digest.to_uppercase());
    assert_eq!(accepted(case.plan()).0, "fn g() {}");
    case.sub.expected_sha256 = Some(sha256_hex("something else"));
    let r = reasons(case.plan());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].code, RejectionCode::ExpectedSha256Mismatch);
    assert!(r[0].message.contains(&digest), "{}", r[0].message);
}

#[test]
fn overlapping_operations_are_named_and_touching_ones_are_accepted() {
    let r = reasons(plain(&[(None, "cd", "X"), (None, "abc", "Y")], "abcdef", 0).plan());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].code, RejectionCode::OverlappingOperations);
    assert!(
        r[0].message
            .starts_with("operation 1 (index 0) and operation 2 (index 1) overlap"),
        "{}",
        r[0].message
    );
    let (content, _) = accepted(plain(&[(None, "cd", "X"), (None, "ab", "Y")], "abcdef", 0).plan());
    assert_eq!(content, "YXef");
}

#[test]
fn steps_are_indexed_from_the_first_revision_the_caller_loaded() {
    // The caller loaded only the steps after revision 5 (steps_from = 5): revision 6 inserted
    // "// " at 0. A submission at base 5 is carried over that one step.
    let case = Case {
        sub: submission(5, &[(None, "b", "B")]),
        strict: false,
        base: "a b",
        current: "// a b",
        current_revision: 6,
        steps_from: 5,
        steps: vec![vec![EditShape {
            start: 0,
            end: 0,
            new_len: 3,
        }]],
        observations: HashMap::new(),
    };
    let (content, corrections) = accepted(case.plan());
    assert_eq!(content, "// a B");
    assert_eq!(
        corrections,
        [Correction {
            operation: 0,
            base_revision: 5,
            base_start_byte: 2,
            base_end_byte: 3,
            applied_revision: 6,
            applied_start_byte: 5,
            applied_end_byte: 6,
        }]
    );
}

#[test]
fn an_edit_conflict_names_the_revision_that_changed_the_text() {
    // Base 2; revision 3 inserts at 0 (no conflict), revision 4 rewrites "b" (conflict).
    let case = Case {
        sub: submission(2, &[(None, "b", "B")]),
        strict: false,
        base: "a b c",
        current: "!a X c",
        current_revision: 4,
        steps_from: 2,
        steps: vec![
            vec![EditShape {
                start: 0,
                end: 0,
                new_len: 1,
            }],
            vec![EditShape {
                start: 3,
                end: 4,
                new_len: 1,
            }],
        ],
        observations: HashMap::new(),
    };
    let r = reasons(case.plan());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].code, RejectionCode::EditConflict);
    assert!(
        r[0].message
            .contains("was changed by revision 4 (bytes 3..4 of revision 3)"),
        "{}",
        r[0].message
    );
}

#[test]
fn strict_mode_accepts_an_untouched_observation_and_names_the_revision_that_touched_one() {
    // Observed `g` at revision 2. Revision 3 edits before it (untouched), revision 4 inside it.
    let r2 = "fn f() { a }\nfn g() { b }\n";
    let r3 = "fn f() { A }\nfn g() { b }\n";
    let r4 = "fn f() { A }\nfn g() { B }\n";
    let observe = || HashMap::from([("g".to_owned(), observation("g", 2, r2, "fn g() { b }"))]);
    let step3 = vec![EditShape {
        start: 9,
        end: 10,
        new_len: 1,
    }];
    let step4 = vec![EditShape {
        start: 22,
        end: 23,
        new_len: 1,
    }];
    let untouched = Case {
        sub: submission(3, &[(Some("g"), "{ b }", "{ c }")]),
        strict: true,
        base: r3,
        current: r3,
        current_revision: 3,
        steps_from: 2,
        steps: vec![step3.clone()],
        observations: observe(),
    };
    assert_eq!(accepted(untouched.plan()).0, "fn f() { A }\nfn g() { c }\n");
    let touched = Case {
        current: r4,
        current_revision: 4,
        steps: vec![step3, step4],
        observations: observe(),
        ..untouched
    };
    let r = reasons(touched.plan());
    assert_eq!(r[0].code, RejectionCode::ObservationStale);
    assert!(
        r[0].message.contains("changed at revision 4"),
        "{}",
        r[0].message
    );
}

#[test]
fn strict_mode_rejects_an_observation_whose_text_no_longer_matches() {
    // No step touched the scope, but its recorded digest is not the text now there (e.g. an
    // observation recorded against other bytes): stale, "no longer matches".
    let content = "fn g() { b }";
    let mut obs = observation("g", 0, content, content);
    obs.sha256 = sha256_hex("fn g() { different }");
    let mut case = plain(&[(Some("g"), "b", "c")], content, 0);
    case.strict = true;
    case.observations = HashMap::from([("g".to_owned(), obs)]);
    let r = reasons(case.plan());
    assert_eq!(r[0].code, RejectionCode::ObservationStale);
    assert!(
        r[0].message.contains("no longer matches"),
        "{}",
        r[0].message
    );
}

#[test]
fn content_may_grow_to_256_mib_and_not_one_byte_more() {
    const LIMIT: usize = 256 * 1024 * 1024;
    // "ab" becomes "vwxyz": the content grows by 3 bytes.
    let filler = |len: usize| format!("ab{}", ".".repeat(len - 2));
    let plan_on = |content: &str| {
        plan_submission(&PlanInput {
            target: "big",
            submission: &submission(0, &[(None, "ab", "vwxyz")]),
            strict: false,
            base_content: content,
            current_content: content,
            current_revision: 0,
            steps_from: 0,
            steps: &[],
            observations: &HashMap::new(),
        })
    };
    let at_limit = filler(LIMIT - 3);
    assert_eq!(accepted(plan_on(&at_limit)).0.len(), LIMIT);
    drop(at_limit);
    let over = filler(LIMIT - 2);
    let r = reasons(plan_on(&over));
    assert_eq!(r[0].code, RejectionCode::ContentTooLarge);
    assert!(
        r[0].message.contains(&format!("{} bytes", LIMIT + 1)),
        "{}",
        r[0].message
    );
}

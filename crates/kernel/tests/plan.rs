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

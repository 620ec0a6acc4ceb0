//! Near misses named for what they are (K2) and new texts written with the target's line
//! endings (K3). Each message the agent used to get — "does not occur … copy the exact text" for
//! text that was there — is a case here whose expected text names the real cause.

use std::collections::HashMap;

use patchdiff_kernel::near_miss::{LineEndings, explain_not_found, line_of, with_line_endings};
use patchdiff_kernel::*;

/// Plans one operation on `content` (revision 0, not strict) against the observed `scope`
/// text (the whole target when `None`).
fn plan_one(content: &str, scope: Option<&str>, old_text: &str, new_text: &str) -> Plan {
    let mut observations = HashMap::new();
    if let Some(text) = scope {
        let start = content.find(text).expect("scope text in content");
        observations.insert(
            "o1".to_owned(),
            ObservationRecord {
                observation_id: "o1".into(),
                revision: 0,
                scope: ObservedScope {
                    kind: "function".into(),
                    name: Some("f".into()),
                    start_byte: start,
                    end_byte: start + text.len(),
                    start_line: line_of(content, start),
                    end_line: line_of(content, start + text.len() - 1),
                },
                sha256: sha256_hex(text),
            },
        );
    }
    let submission = Submission {
        request_key: "k".into(),
        base_revision: 0,
        expected_sha256: None,
        operations: vec![OperationRequest {
            observation_id: scope.map(|_| "o1".to_owned()),
            old_text: old_text.into(),
            new_text: new_text.into(),
        }],
    };
    plan_submission(&PlanInput {
        target: "t",
        submission: &submission,
        strict: scope.is_some(),
        base_content: content,
        current_content: content,
        current_revision: 0,
        steps_from: 0,
        steps: &[],
        observations: &observations,
    })
}

fn rejection(plan: Plan) -> String {
    match plan {
        Plan::Reject { reasons } => {
            assert_eq!(reasons.len(), 1, "{reasons:?}");
            assert_eq!(reasons[0].code, "OLD_TEXT_NOT_FOUND");
            reasons[0].message.clone()
        }
        Plan::Accept { new_content, .. } => panic!("accepted: {new_content:?}"),
    }
}

const TS: &str =
    "@Component({selector: 'app-root'})\nexport class AppComponent {\n  title = 'app';\n}\n";

#[test]
fn text_outside_the_observed_scope_is_named_with_its_line_and_bytes_not_copy_the_exact_text() {
    // The decorator case of the issue: the text is there, just outside the observed scope.
    let msg = rejection(plan_one(
        TS,
        Some("class AppComponent {\n  title = 'app';\n}"),
        "@Component({selector: 'app-root'})",
        "@Component({selector: 'app-main'})",
    ));
    assert_eq!(
        msg,
        "operation 1 (index 0): old_text \"@Component({selector: 'app-root'})\" does not occur in scope function f at revision 0: it occurs elsewhere in the target: at line 1 (bytes 0–34), outside this scope (lines 2–4); observe the scope that contains it (find_occurrences names it) and use that observation"
    );
}

#[test]
fn several_places_elsewhere_are_counted() {
    let content = "x = 1\ndef f():\n    pass\nx = 1\n";
    let msg = rejection(plan_one(
        content,
        Some("def f():\n    pass"),
        "x = 1",
        "x = 2",
    ));
    assert!(
        msg.contains("at line 1 (bytes 0–5) (and 1 more places), outside this scope (lines 2–3)"),
        "{msg}"
    );
}

#[test]
fn an_lf_old_text_on_a_crlf_target_is_a_line_ending_mismatch() {
    let content = "def f():\r\n    return 1\r\n";
    let msg = rejection(plan_one(content, None, "def f():\n    return 1", "x"));
    assert!(
        msg.ends_with(
            ": its line endings differ: old_text uses LF but the scope uses CRLF — it matches at line 1 with CRLF line endings; send the text exactly as read_target returns it (\\r\\n included)"
        ),
        "{msg}"
    );
}

#[test]
fn a_crlf_old_text_on_an_lf_target_is_a_line_ending_mismatch_too() {
    let content = "a\nb\nc\n";
    let msg = rejection(plan_one(content, None, "b\r\nc", "x"));
    assert!(
        msg.contains("old_text uses CRLF but the scope uses LF — it matches at line 2 with LF"),
        "{msg}"
    );
}

#[test]
fn trailing_whitespace_and_indentation_are_whitespace_only_differences() {
    let content = "fn f() {\n    let x = 1;\n    g(x);\n}\n";
    let msg = rejection(plan_one(content, None, "let x = 1;  \n  g(x);", "x"));
    assert!(
        msg.ends_with(
            ": it differs only in whitespace (spaces, tabs, line breaks or trailing whitespace) from the text at line 2: \"let x = 1;\\n    g(x);\"; copy that text exactly"
        ),
        "{msg}"
    );
    // Multi-byte characters map back to whole characters.
    let content = "s = \"界 é\"\n";
    let msg = rejection(plan_one(content, None, "\"界é\"", "x"));
    assert!(msg.contains("line 1: \"\\\"界 é\\\"\""), "{msg}");
}

#[test]
fn one_escape_level_too_many_or_too_few_is_named() {
    // The agent wrote `\n` where the file has a line break.
    let content = "def f():\n    return \"a\"\n";
    let msg = rejection(plan_one(
        content,
        None,
        "def f():\\n    return \\\"a\\\"",
        "x",
    ));
    assert!(
        msg.ends_with(
            ": old_text has escape sequences (such as \\n or \\\") where the scope has the characters they stand for; send the characters themselves (one level of escaping less): it matches at line 1 that way"
        ),
        "{msg}"
    );
    // The file has `\t` written out in a string literal; the agent sent a tab.
    let content = "x = 1\ns = \"a\\tb\"\n";
    let msg = rejection(plan_one(content, None, "\"a\tb\"", "x"));
    assert!(
        msg.ends_with(
            ": old_text has characters where the scope has escape sequences for them (such as \\n or \\\" written out in a string literal); send the escape sequences as the source spells them: it matches at line 2 that way"
        ),
        "{msg}"
    );
}

#[test]
fn quotes_escaped_in_the_source_are_named_too() {
    // The source spells `\"b\"` inside a string literal; the agent sent the quotes bare.
    let content = "x = \"a \\\"b\\\"\"\n";
    let msg = rejection(plan_one(content, None, "a \"b\"", "x"));
    assert!(
        msg.contains("old_text has characters where the scope has escape sequences for them"),
        "{msg}"
    );
}

#[test]
fn a_mixed_old_text_matching_a_uniform_stretch_of_a_mixed_scope_is_a_line_ending_mismatch() {
    // The scope mixes CRLF and LF, and so does the agent's text; converted to CRLF it is there.
    let content = "x\r\ny\r\nz\nq";
    let msg = rejection(plan_one(content, None, "x\ny\r\nz", "n"));
    assert!(
        msg.contains("its line endings differ: old_text uses mixed but the scope uses mixed — it matches at line 1 with CRLF line endings"),
        "{msg}"
    );
}

#[test]
fn a_whitespace_only_difference_quotes_the_scopes_text_exactly() {
    let content = "fn a() {\n    let  x = 1;\n}\n";
    let msg = rejection(plan_one(content, None, "let x = 1;", "n"));
    assert!(
        msg.contains("from the text at line 2: \"let  x = 1;\"; copy that text exactly"),
        "{msg}"
    );
}

#[test]
fn a_whitespace_only_difference_ending_in_a_multibyte_character_is_quoted_whole() {
    // It used to slice the scope inside the last character (a panic on the agent's input).
    let content = "x = 1\nlet  y = \"π\"\nlet  z = π\n";
    let msg = rejection(plan_one(content, None, "let z = π", "n"));
    assert!(
        msg.contains("from the text at line 3: \"let  z = π\"; copy that text exactly"),
        "{msg}"
    );
}

#[test]
fn escaping_a_tab_leaves_a_backslash_of_the_source_as_it_is() {
    // The source has `\d` (a regex) and `\t` written out; the agent sent a real tab.
    let content = "s = \"\\d\\tx\"\n";
    let msg = rejection(plan_one(content, None, "\\d\tx", "n"));
    assert!(
        msg.contains("old_text has characters where the scope has escape sequences for them"),
        "{msg}"
    );
}

#[test]
fn escaping_quotes_escapes_the_backslashes_beside_them_too() {
    // The source spells `a\\b\"c` in a string literal; the agent sent `a\b"c`.
    let content = "s = \"a\\\\b\\\"c\"\n";
    let msg = rejection(plan_one(content, None, "a\\b\"c", "n"));
    assert!(
        msg.contains("old_text has characters where the scope has escape sequences for them"),
        "{msg}"
    );
}

#[test]
fn a_text_that_is_nowhere_says_so_plainly() {
    let msg = rejection(plan_one("a = 1\n", None, "zzz", "x"));
    assert!(
        msg.ends_with(
            "does not occur in scope target t at revision 0, nor anywhere else in the target, nor with other line endings, whitespace or escaping; read the scope again and copy the exact text"
        ),
        "{msg}"
    );
    assert_eq!(explain_not_found("a", 0, "a", ""), None, "empty old_text");
    assert_eq!(
        explain_not_found("a b", 0, "a b", " \n"),
        None,
        "whitespace-only old_text"
    );
    assert_eq!(
        explain_not_found("a\\qb", 0, "a\\qb", "a\\zb"),
        None,
        "unknown escape"
    );
}

#[test]
fn an_lf_new_text_into_a_crlf_target_is_written_with_crlf_and_the_receipt_says_so() {
    let content = "def f():\r\n    return 1\r\n";
    match plan_one(content, None, "    return 1", "    x = 1\n    return x") {
        Plan::Accept {
            new_content, notes, ..
        } => {
            assert_eq!(new_content, "def f():\r\n    x = 1\r\n    return x\r\n");
            assert_eq!(
                notes,
                [
                    "LINE_ENDINGS_NORMALISED: operation 1 (index 0): new_text used LF line endings; it was written with the target's CRLF"
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    // CRLF into an LF target; a break-less new text or a matching one is left alone.
    match plan_one("a\nb\n", None, "b", "c\r\nd") {
        Plan::Accept {
            new_content, notes, ..
        } => {
            assert_eq!(new_content, "a\nc\nd\n");
            assert_eq!(notes.len(), 1);
            assert!(
                notes[0].contains("used CRLF line endings; it was written with the target's LF")
            );
        }
        other => panic!("{other:?}"),
    }
    for (content, new_text) in [("a\nb\n", "c\nd"), ("a\nb\n", "c"), ("a\r\nb\nc", "x\ny")] {
        match plan_one(content, None, "b", new_text) {
            Plan::Accept {
                new_content, notes, ..
            } => {
                assert_eq!(new_content, content.replacen('b', new_text, 1));
                assert!(notes.is_empty(), "{notes:?}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn line_endings_are_classified_and_rewritten() {
    assert_eq!(LineEndings::of(""), LineEndings::None);
    assert_eq!(LineEndings::of("\r"), LineEndings::None);
    assert_eq!(LineEndings::of("\n"), LineEndings::Lf);
    assert_eq!(LineEndings::of("a\r\n"), LineEndings::Crlf);
    assert_eq!(LineEndings::of("\r\n\n"), LineEndings::Mixed);
    assert_eq!(LineEndings::of("\n\r\n"), LineEndings::Mixed);
    let names: Vec<_> = [
        LineEndings::None,
        LineEndings::Lf,
        LineEndings::Crlf,
        LineEndings::Mixed,
    ]
    .map(LineEndings::as_str)
    .into();
    assert_eq!(names, ["none", "LF", "CRLF", "mixed"]);
    assert_eq!(
        with_line_endings("a\nb\r\nc", LineEndings::Crlf),
        "a\r\nb\r\nc"
    );
    assert_eq!(with_line_endings("a\nb\r\nc", LineEndings::Lf), "a\nb\nc");
    assert_eq!(with_line_endings("a\nb", LineEndings::Mixed), "a\nb");
    assert_eq!(with_line_endings("a\r\nb", LineEndings::None), "a\r\nb");
    assert!(matches!(
        with_line_endings("a\r\nb", LineEndings::Crlf),
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(line_of("a\nb\nc", 0), 1);
    assert_eq!(line_of("a\nb\nc", 2), 2);
    assert_eq!(line_of("a\nb\nc", 4), 3);
    assert_eq!(line_of("a\nb\nc", 99), 3);
}

//! Named checks: a check's own output parsed into its sub-tests, one
//! [`NamedCheck`] each, by the report format its manifest entry declares (`check.report`):
//! TAP (Node's `--test`), JUnit XML (a file the check writes, read with `quick-xml`), Python
//! `unittest -v` and Rust libtest. Output that does not parse gives no named checks and a note;
//! the check's exit status still decides.
//!
//! Everything parsed here is the agent's code's output: it is kept as data (names and messages
//! verbatim, bounded), never interpreted further.

use serde::{Deserialize, Serialize};

use crate::fixtures::CheckReport;

/// Bytes of one named check's message kept (the head): 2 KiB.
pub const MESSAGE_MAX_BYTES: usize = 2048;
/// Named checks kept per run: 1,000 (more are counted in the note).
pub const MAX_NAMED_CHECKS: usize = 1000;

/// One named sub-test of a check run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NamedCheck {
    /// The sub-test's name as its runner prints it (`Castling.test_x` ids keep their module:
    /// `test_chess.Castling.test_x`; nested TAP subtests are joined with ` > `).
    pub name: String,
    /// Passed (a skipped sub-test counts as passed, with `message` saying so).
    pub passed: bool,
    /// Its duration in milliseconds when the runner reports one (TAP, JUnit), else null.
    pub duration_ms: Option<f64>,
    /// Why it failed (the runner's message or traceback, ≤ 2 KiB), or the skip reason; null
    /// for a plain pass.
    pub message: Option<String>,
}

/// What parsing a run's output gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub checks: Vec<NamedCheck>,
    /// Why no (or not every) named check could be read; the exit status decides then.
    pub note: Option<String>,
}

/// Parses `output` (stdout followed by stderr) — or, for JUnit, `junit_xml` (the file's text,
/// `None` when the check wrote none) — as `report`.
pub fn parse(report: CheckReport, output: &str, junit_xml: Option<&str>) -> Parsed {
    let (checks, what) = match report {
        CheckReport::Tap => (parse_tap(output), "TAP test lines (`ok N - name`)"),
        CheckReport::Unittest => (
            parse_unittest(output),
            "unittest -v lines (`test (id) ... ok`)",
        ),
        CheckReport::Libtest => (parse_libtest(output), "libtest lines (`test NAME ... ok`)"),
        CheckReport::Junit => match junit_xml {
            None => {
                return Parsed {
                    checks: Vec::new(),
                    note: Some(
                        "the check wrote no JUnit file; judged by its exit status".to_owned(),
                    ),
                };
            }
            Some(xml) => match parse_junit(xml) {
                Ok(checks) => (checks, "JUnit test cases"),
                Err(e) => {
                    return Parsed {
                        checks: Vec::new(),
                        note: Some(format!(
                            "the check's JUnit file does not parse ({e}); judged by its exit status"
                        )),
                    };
                }
            },
        },
    };
    let mut parsed = Parsed { checks, note: None };
    if parsed.checks.is_empty() {
        parsed.note = Some(format!(
            "no named checks in the output (expected {what} for report `{}`); judged by its \
             exit status",
            report.as_str()
        ));
    } else if parsed.checks.len() > MAX_NAMED_CHECKS {
        parsed.note = Some(format!(
            "{} named checks; the first {MAX_NAMED_CHECKS} are kept",
            parsed.checks.len()
        ));
        parsed.checks.truncate(MAX_NAMED_CHECKS);
    }
    parsed
}

/// The head of `text`, at most [`MESSAGE_MAX_BYTES`], cut back to a character boundary.
fn bounded(text: &str) -> String {
    let text = text.trim_end();
    if text.len() <= MESSAGE_MAX_BYTES {
        return text.to_owned();
    }
    let mut end = MESSAGE_MAX_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// TAP 13/14 as Node's test runner writes it: `ok N - name` / `not ok N - name`, an optional
/// `# SKIP`/`# TODO` directive, a YAML block (`duration_ms`, `error`) indented below, and
/// subtests indented four spaces before their parent's line. A parent with subtests is replaced
/// by its subtests, named `parent > child`.
fn parse_tap(output: &str) -> Vec<NamedCheck> {
    let lines: Vec<&str> = output.lines().collect();
    // Finished checks per nesting depth, waiting for their parent's line.
    let mut pending: Vec<Vec<NamedCheck>> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let (passed, rest) = if let Some(rest) = trimmed.strip_prefix("not ok") {
            (false, rest)
        } else if let Some(rest) = trimmed.strip_prefix("ok") {
            (true, rest)
        } else {
            i += 1;
            continue;
        };
        if !(rest.is_empty() || rest.starts_with(' ')) {
            i += 1;
            continue;
        }
        // `ok 3 - name # SKIP reason`: number, optional dash, name, directive.
        let rest = rest.trim_start();
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        let rest = rest.trim_start();
        let rest = rest.strip_prefix("- ").unwrap_or(rest);
        let (name, directive) = match rest.find(" # ") {
            Some(at) => (&rest[..at], Some(rest[at + 3..].trim())),
            None => (rest, None),
        };
        let mut check = NamedCheck {
            name: name.trim().to_owned(),
            passed,
            duration_ms: None,
            message: None,
        };
        if let Some(d) = directive {
            let upper = d.to_ascii_uppercase();
            if upper.starts_with("SKIP") || upper.starts_with("TODO") {
                check.passed = true;
                check.message = Some(bounded(d));
            }
        }
        i += 1;
        // The YAML diagnostic block, if one follows.
        if i < lines.len() && lines[i].trim() == "---" {
            let yaml_indent = lines[i].len() - lines[i].trim_start().len();
            i += 1;
            let mut error: Option<String> = None;
            while i < lines.len() && lines[i].trim() != "..." {
                let l = lines[i];
                let body = l.trim_start();
                let ind = l.len() - body.len();
                if ind == yaml_indent {
                    if let Some(v) = body.strip_prefix("duration_ms:") {
                        check.duration_ms = v.trim().parse().ok();
                    } else if let Some(v) = body.strip_prefix("error:") {
                        let v = v.trim();
                        if v == "|-" || v == "|" || v == ">-" || v == ">" {
                            let mut block = Vec::new();
                            while i + 1 < lines.len() {
                                let next = lines[i + 1];
                                let next_ind = next.len() - next.trim_start().len();
                                if next.trim().is_empty() || next_ind > yaml_indent {
                                    block
                                        .push(next.get(yaml_indent + 2..).unwrap_or("").trim_end());
                                    i += 1;
                                } else {
                                    break;
                                }
                            }
                            error = Some(block.join("\n"));
                        } else {
                            error = Some(unquote_yaml(v));
                        }
                    }
                }
                i += 1;
            }
            i += 1; // the `...`
            if !check.passed {
                check.message = error.map(|e| bounded(&e));
            }
        }
        let depth = indent / 4;
        if pending.len() <= depth + 1 {
            pending.resize_with(depth + 2, Vec::new);
        }
        let children = std::mem::take(&mut pending[depth + 1]);
        if children.is_empty() {
            pending[depth].push(check);
        } else {
            let parent = check.name;
            pending[depth].extend(children.into_iter().map(|mut c| {
                c.name = format!("{parent} > {}", c.name);
                c
            }));
        }
    }
    // Top level first; subtests whose parent line never came (cut output) after.
    pending.into_iter().flatten().collect()
}

/// A single-line YAML scalar: `'it''s'` → `it's`, `"a"` → `a`, bare text as is.
fn unquote_yaml(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].replace("''", "'")
    } else if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        serde_json::from_str::<String>(v).unwrap_or_else(|_| v[1..v.len() - 1].to_owned())
    } else {
        v.to_owned()
    }
}

/// Python `unittest -v`: `test_x (module.Class.test_x) ... ok|FAIL|ERROR|skipped 'why'|
/// expected failure|unexpected success` (a docstring moves the ` ... ` part to the next line),
/// then `FAIL: test_x (id)` / `ERROR: …` sections with each failure's traceback.
fn parse_unittest(output: &str) -> Vec<NamedCheck> {
    let lines: Vec<&str> = output.lines().collect();
    let mut checks: Vec<NamedCheck> = Vec::new();
    let mut previous_head: Option<String> = None;
    for line in &lines {
        let head_id = unittest_id(line);
        let Some(at) = line.rfind(" ... ") else {
            previous_head = head_id;
            continue;
        };
        let (head, outcome) = (&line[..at], line[at + 5..].trim());
        let Some(id) = unittest_id(head).or_else(|| previous_head.take()) else {
            continue;
        };
        let (passed, message) = match outcome {
            "ok" => (true, None),
            "FAIL" | "ERROR" | "unexpected success" => (false, None),
            "expected failure" => (true, Some("expected failure".to_owned())),
            o if o.starts_with("skipped") => (true, Some(o.to_owned())),
            _ => continue,
        };
        checks.push(NamedCheck {
            name: id,
            passed,
            duration_ms: None,
            message,
        });
        previous_head = None;
    }
    // `FAIL: test_x (id)` sections: the traceback until the next rule line.
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let id = line
            .strip_prefix("FAIL: ")
            .or_else(|| line.strip_prefix("ERROR: "))
            .and_then(unittest_id);
        i += 1;
        let Some(id) = id else { continue };
        // A docstring line may come before the rule line that starts the traceback.
        if let Some(rule) = lines[i..]
            .iter()
            .take(4)
            .position(|l| l.starts_with("-----"))
        {
            i += rule + 1;
        }
        let start = i;
        while i < lines.len() && !lines[i].starts_with("=====") && !lines[i].starts_with("-----") {
            i += 1;
        }
        let text = lines[start..i].join("\n");
        if let Some(check) = checks.iter_mut().find(|c| c.name == id && !c.passed) {
            check.message = Some(bounded(text.trim()));
        }
    }
    checks
}

/// `test_x (module.Class.test_x)` (Python ≥ 3.11) or `test_x (module.Class)` → the dotted id
/// `module.Class.test_x`.
fn unittest_id(head: &str) -> Option<String> {
    let head = head.trim_end();
    let open = head.find(" (")?;
    let (name, rest) = (&head[..open], &head[open + 2..]);
    let dotted = rest.strip_suffix(')')?;
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    };
    if !word(name) || !word(dotted) {
        return None;
    }
    Some(if dotted.ends_with(&format!(".{name}")) {
        dotted.to_owned()
    } else {
        format!("{dotted}.{name}")
    })
}

/// Rust libtest: `test NAME ... ok|FAILED|ignored`, then `---- NAME stdout ----` sections with
/// each failure's output.
fn parse_libtest(output: &str) -> Vec<NamedCheck> {
    let lines: Vec<&str> = output.lines().collect();
    let mut checks: Vec<NamedCheck> = Vec::new();
    for line in &lines {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some(at) = rest.rfind(" ... ") else {
            continue;
        };
        let (name, outcome) = (rest[..at].trim(), rest[at + 5..].trim());
        let (passed, message) = match outcome {
            "ok" => (true, None),
            "FAILED" => (false, None),
            o if o.starts_with("ignored") => (true, Some(o.to_owned())),
            _ => continue,
        };
        checks.push(NamedCheck {
            name: name.to_owned(),
            passed,
            duration_ms: None,
            message,
        });
    }
    let mut i = 0;
    while i < lines.len() {
        let name = lines[i]
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"));
        i += 1;
        let Some(name) = name else { continue };
        let start = i;
        while i < lines.len()
            && !lines[i].starts_with("---- ")
            && !(lines[i] == "failures:" || lines[i].starts_with("test result:"))
        {
            i += 1;
        }
        let text = lines[start..i].join("\n");
        if let Some(check) = checks.iter_mut().find(|c| c.name == name && !c.passed) {
            check.message = Some(bounded(text.trim()));
        }
    }
    checks
}

/// JUnit XML read with `quick-xml` (lenient about the attributes writers leave out: Node's
/// `--test-reporter=junit` puts `<testcase>`s straight under an unnamed `<testsuites>`): one
/// named check per `<testcase>` (`classname.name` when a class name is given), `<failure>` /
/// `<error>` making it fail with their `message` and text, `<skipped>` a pass saying so, its
/// `time` (seconds) as the duration.
fn parse_junit(xml: &str) -> Result<Vec<NamedCheck>, String> {
    use quick_xml::Reader;
    use quick_xml::escape::{resolve_xml_entity, unescape_with};
    use quick_xml::events::{BytesStart, Event};
    fn attr(e: &BytesStart<'_>, key: &[u8]) -> Option<String> {
        e.attributes()
            .flatten()
            .find(|a| a.key.as_ref() == key)
            .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
    }
    let mut reader = Reader::from_str(xml);
    let mut checks: Vec<NamedCheck> = Vec::new();
    // The open test case, and the text of its open <failure>/<error>, if any.
    let mut case: Option<NamedCheck> = None;
    let mut problem_text: Option<String> = None;
    let mut saw_root = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("at byte {}: {e}", reader.buffer_position()))?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                match e.local_name().as_ref() {
                    b"testsuites" | b"testsuite" => saw_root = true,
                    b"testcase" => {
                        let name = attr(e, b"name").unwrap_or_default();
                        let name = match attr(e, b"classname") {
                            Some(class) if !class.is_empty() => format!("{class}.{name}"),
                            _ => name,
                        };
                        let check = NamedCheck {
                            name,
                            passed: true,
                            duration_ms: attr(e, b"time")
                                .and_then(|t| t.parse::<f64>().ok())
                                .map(|s| s * 1000.0),
                            message: None,
                        };
                        if empty {
                            checks.push(check);
                        } else {
                            case = Some(check);
                        }
                    }
                    b"failure" | b"error" if case.is_some() => {
                        let c = case.as_mut().expect("checked");
                        c.passed = false;
                        c.message = attr(e, b"message");
                        if !empty {
                            problem_text = Some(String::new());
                        }
                    }
                    b"skipped" if case.is_some() => {
                        let c = case.as_mut().expect("checked");
                        c.message = Some(match attr(e, b"message") {
                            Some(m) if !m.is_empty() => format!("skipped: {m}"),
                            _ => "skipped".to_owned(),
                        });
                    }
                    _ => {}
                }
            }
            Event::Text(ref t) => {
                if let Some(text) = problem_text.as_mut() {
                    let raw = std::str::from_utf8(t.as_ref()).map_err(|e| e.to_string())?;
                    let unescaped =
                        unescape_with(raw, resolve_xml_entity).map_err(|e| e.to_string())?;
                    text.push_str(&unescaped);
                }
            }
            Event::CData(ref t) => {
                if let Some(text) = problem_text.as_mut() {
                    text.push_str(&String::from_utf8_lossy(t.as_ref()));
                }
            }
            Event::GeneralRef(ref r) => {
                if let Some(text) = problem_text.as_mut() {
                    let name = std::str::from_utf8(r.as_ref()).map_err(|e| e.to_string())?;
                    text.push_str(resolve_xml_entity(name).unwrap_or(""));
                }
            }
            Event::End(ref e) => match e.local_name().as_ref() {
                b"failure" | b"error" => {
                    if let (Some(c), Some(text)) = (case.as_mut(), problem_text.take()) {
                        let joined = [c.message.as_deref(), Some(text.as_str())]
                            .into_iter()
                            .flatten()
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .collect::<Vec<_>>()
                            .join("\n");
                        c.message = Some(bounded(&joined));
                    }
                }
                b"testcase" => checks.extend(case.take()),
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    if !saw_root {
        return Err("no <testsuites> or <testsuite> element".to_owned());
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(checks: &[NamedCheck]) -> Vec<(&str, bool)> {
        checks.iter().map(|c| (c.name.as_str(), c.passed)).collect()
    }

    /// Node 20's TAP: subtests of a `describe` come before its line and take its name; a
    /// multi-line `error: |-` and a quoted one are both the message; `# SKIP` passes.
    #[test]
    fn tap_names_nested_subtests_and_reads_errors_and_durations() {
        let tap = "TAP version 13\n# Subtest: group a\n    # Subtest: inner one\n    ok 1 - inner one\n      ---\n      duration_ms: 1.5\n      ...\n    # Subtest: inner two\n    not ok 2 - inner two\n      ---\n      duration_ms: 0.4\n      failureType: 'testCodeFailure'\n      error: |-\n        boom\n        line2\n      code: 'ERR_TEST_FAILURE'\n      ...\n    1..2\nnot ok 1 - group a\n  ---\n  duration_ms: 3.8\n  type: 'suite'\n  error: '1 subtest failed'\n  ...\n# Subtest: skipped\nok 2 - skipped # SKIP why\n  ---\n  duration_ms: 0.2\n  ...\nnot ok 3 - it's quoted\n  ---\n  error: 'it''s wrong'\n  ...\n1..3\n# tests 4\n";
        let checks = parse(CheckReport::Tap, tap, None);
        assert_eq!(checks.note, None);
        assert_eq!(
            names(&checks.checks),
            [
                ("group a > inner one", true),
                ("group a > inner two", false),
                ("skipped", true),
                ("it's quoted", false)
            ]
        );
        assert_eq!(checks.checks[0].duration_ms, Some(1.5));
        assert_eq!(checks.checks[1].message.as_deref(), Some("boom\nline2"));
        assert_eq!(checks.checks[2].message.as_deref(), Some("SKIP why"));
        assert_eq!(checks.checks[3].message.as_deref(), Some("it's wrong"));
    }

    #[test]
    fn unittest_reads_ids_outcomes_docstring_lines_and_tracebacks() {
        let out = "test_a (test_chess.Castling.test_a) ... ok\ntest_b (test_chess.Castling.test_b)\nA docstring line ... FAIL\ntest_c (test_chess.Perft) ... skipped 'slow'\ntest_d (test_chess.Perft.test_d) ... ERROR\n\n======================================================================\nFAIL: test_b (test_chess.Castling.test_b)\nA docstring line\n----------------------------------------------------------------------\nTraceback (most recent call last):\n  File \"x.py\", line 1\nAssertionError: True is not false\n\n======================================================================\nERROR: test_d (test_chess.Perft.test_d)\n----------------------------------------------------------------------\nNameError: x\n\n----------------------------------------------------------------------\nRan 4 tests in 0.01s\n\nFAILED (failures=1, errors=1, skipped=1)\n";
        let checks = parse(CheckReport::Unittest, out, None).checks;
        assert_eq!(
            names(&checks),
            [
                ("test_chess.Castling.test_a", true),
                ("test_chess.Castling.test_b", false),
                ("test_chess.Perft.test_c", true),
                ("test_chess.Perft.test_d", false)
            ]
        );
        let b = checks[1].message.as_deref().unwrap();
        assert!(b.ends_with("AssertionError: True is not false"), "{b}");
        assert_eq!(checks[3].message.as_deref(), Some("NameError: x"));
    }

    #[test]
    fn libtest_reads_outcomes_and_failure_output() {
        let out = "running 3 tests\ntest a ... ok\ntest m::b ... FAILED\ntest c ... ignored, slow\n\nfailures:\n\n---- m::b stdout ----\nthread 'm::b' panicked at x.rs:1:1:\nassertion failed\n\n\nfailures:\n    m::b\n\ntest result: FAILED. 1 passed; 1 failed; 1 ignored\n";
        let checks = parse(CheckReport::Libtest, out, None).checks;
        assert_eq!(names(&checks), [("a", true), ("m::b", false), ("c", true)]);
        assert_eq!(
            checks[1].message.as_deref(),
            Some("thread 'm::b' panicked at x.rs:1:1:\nassertion failed")
        );
    }

    #[test]
    fn junit_cases_become_named_checks_and_bad_xml_is_a_note() {
        let xml = r#"<?xml version="1.0"?><testsuites><testsuite name="s" tests="2"><testcase name="one" classname="k" time="0.25"/><testcase name="two"><failure message="boom">trace</failure></testcase></testsuite></testsuites>"#;
        let checks = parse(CheckReport::Junit, "", Some(xml)).checks;
        assert_eq!(names(&checks), [("k.one", true), ("two", false)]);
        assert_eq!(checks[0].duration_ms, Some(250.0));
        assert_eq!(checks[1].message.as_deref(), Some("boom\ntrace"));
        let bad = parse(CheckReport::Junit, "", Some("<testsuites><oops"));
        assert!(bad.checks.is_empty());
        assert!(bad.note.unwrap().contains("does not parse"));
        let missing = parse(CheckReport::Junit, "", None);
        assert!(missing.note.unwrap().contains("no JUnit file"));
    }

    #[test]
    fn output_without_named_checks_is_a_note_naming_the_format() {
        let parsed = parse(CheckReport::Tap, "Segmentation fault\n", None);
        assert!(parsed.checks.is_empty());
        let note = parsed.note.unwrap();
        assert!(
            note.contains("report `tap`") && note.contains("exit status"),
            "{note}"
        );
    }
}

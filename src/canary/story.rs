//! A target's story (U2): what an operator opens first after a FAIL. One text with the
//! target's counters and hashes, the evaluator's verdicts with the check's output, every
//! submission the agent made (from the wire logs: request key, outcome, revision, reasons), and
//! the diffs of the exported bytes against the expected and the original bytes.

use std::path::Path;

use serde_json::Value;
use similar::TextDiff;

use super::error::StepError;
use super::names::HOST_OBSERVED;
use super::state::TargetRow;
use crate::display::{visible, visible_inline};
use crate::evaluate::Evaluation;
use crate::evidence::RunDir;
use crate::fixtures::Fixture;
use crate::fixtures::FixtureManifest;

/// Lines of context around each change in the diffs.
pub const DIFF_CONTEXT: usize = 3;

/// The longest diff shown, in lines; the rest is summarized.
pub const DIFF_LINES: usize = 400;

/// The check output shown, at most this many trailing lines.
pub const CHECK_OUTPUT_LINES: usize = 40;

/// One submission of the agent, as the wire log recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub process: String,
    pub request_key: String,
    pub base_revision: Option<u64>,
    /// `accepted`, `rejected`, an error code, or `no reply`.
    pub outcome: String,
    pub revision: Option<u64>,
    pub reasons: Vec<String>,
    /// The receipt's warnings (`SYNTAX_ERRORS_INTRODUCED: …`, `LINE_ENDINGS_NORMALISED: …`).
    pub warnings: Vec<String>,
}

/// The tools whose calls are submissions: the agent's, and a replica's (R2), which the story
/// lists beside the agent's with their receipts.
pub const SUBMISSION_TOOLS: [&str; 2] = [
    "patchdiff_submit_observed_operations",
    "patchdiff_replica_submit",
];

/// The submissions to `target` in a wire log, each paired with its result by (process,
/// request id) through [`crate::evidence::pair_requests`] (processes sharing a log
/// reuse ids).
pub fn attempts_in(log: &str, process: &str, target: &str) -> Vec<Attempt> {
    attempts_in_log(log.as_bytes(), process, target)
}

/// [`attempts_in`] streamed from a reader (a wire log file), line by line: memory holds the
/// target's submissions, never the log.
pub fn attempts_in_log(log: impl std::io::BufRead, process: &str, target: &str) -> Vec<Attempt> {
    crate::evidence::pair_requests(
        crate::evidence::read_wire_messages(log),
        |m| {
            let m = &m.message;
            let tool = m["params"]["name"].as_str().unwrap_or_default();
            (m["method"] == "tools/call"
                && SUBMISSION_TOOLS.contains(&tool)
                && m["params"]["arguments"]["target"] == target)
                .then(|| m["params"]["arguments"].clone())
        },
        |_, reply| reply.message,
    )
    .into_iter()
    .map(|(args, reply)| {
        let (outcome, revision, reasons) = match reply.as_ref() {
            None => ("no reply".to_owned(), None, Vec::new()),
            Some(r) if r.get("error").is_some() => (
                format!(
                    "protocol error: {}",
                    r["error"]["message"].as_str().unwrap_or("?")
                ),
                None,
                Vec::new(),
            ),
            Some(r) => {
                let s = &r["result"]["structuredContent"];
                if let Some(code) = s["error"]["code"].as_str() {
                    (
                        code.to_owned(),
                        None,
                        vec![s["error"]["message"].as_str().unwrap_or("").to_owned()],
                    )
                } else {
                    let reasons = s["reasons"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .map(|r| match r {
                                    Value::String(s) => s.clone(),
                                    other => format!(
                                        "{} {}",
                                        other["code"].as_str().unwrap_or(""),
                                        other["message"].as_str().unwrap_or("")
                                    )
                                    .trim()
                                    .to_owned(),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    (
                        s["outcome"].as_str().unwrap_or("?").to_owned(),
                        s["revision"].as_u64(),
                        reasons,
                    )
                }
            }
        };
        let warnings = reply
            .as_ref()
            .and_then(|r| {
                r["result"]["structuredContent"]["warnings"]
                    .as_array()
                    .cloned()
            })
            .unwrap_or_default()
            .iter()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect();
        Attempt {
            process: process.to_owned(),
            request_key: args["request_key"].as_str().unwrap_or("?").to_owned(),
            base_revision: args["base_revision"].as_u64(),
            outcome,
            revision,
            reasons,
            warnings,
        }
    })
    .collect()
}

/// A unified diff of `new` against `old`, or a line saying they are equal. Each line is shown
/// through [`visible`]: the agent's text cannot move the cursor or erase a line.
pub fn unified(old: &[u8], new: &[u8], old_name: &str, new_name: &str) -> Vec<String> {
    if old == new {
        return vec![format!("  (identical: {new_name} = {old_name})")];
    }
    let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    let diff = TextDiff::from_lines(old.as_ref(), new.as_ref());
    let text = diff
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(old_name, new_name)
        .to_string();
    // Split on `\n` only, so a `\r` in the agent's text stays visible in its line.
    let mut lines: Vec<String> = text
        .split_terminator('\n')
        .map(|l| format!("  {}", visible(l)))
        .collect();
    if lines.len() > DIFF_LINES {
        let more = lines.len() - DIFF_LINES;
        lines.truncate(DIFF_LINES);
        lines.push(format!("  … {more} more diff lines"));
    }
    lines
}

/// What a target's story is told from: the run directory (wire logs, exports), the target
/// rows, the suite and the evaluation once there is one.
pub struct StoryInputs<'a> {
    pub run: &'a RunDir,
    pub targets: &'a [TargetRow],
    pub manifest: &'a FixtureManifest,
    pub evaluation: Option<&'a Evaluation>,
}

/// The story of target `name` as the run knows it now: its header, the verdict, the
/// submissions and the diffs, one section each. Errors: an unknown target (naming the known
/// ones), a fixture file or an existing export that cannot be read.
pub fn target_story(inputs: &StoryInputs<'_>, name: &str) -> Result<String, StepError> {
    inputs.story(name)
}

impl StoryInputs<'_> {
    fn story(&self, name: &str) -> Result<String, StepError> {
        let row = self
            .targets
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
                StepError::Refused(format!(
                    "no target `{name}`; targets are: {}",
                    names.join(", ")
                ))
            })?;
        let fixture = self.manifest.fixture(name).ok_or_else(|| {
            StepError::Refused(format!("target `{name}` is not in the fixture manifest"))
        })?;
        let mut out = story_header(row, fixture);
        out.push(String::new());
        out.extend(self.verdict_section(name));
        out.push(String::new());
        out.extend(self.submissions_section(name));
        out.push(String::new());
        out.extend(self.diffs_section(fixture)?);
        // The story is mostly what the agent wrote (its code in the diffs, its request
        // keys, what its code's check printed); a person sees it only through `visible`.
        Ok(visible(&out.join("\n")).into_owned())
    }

    /// The verdict with its notes and the tail of the check's output.
    fn verdict_section(&self, name: &str) -> Vec<String> {
        let Some(v) = self
            .evaluation
            .and_then(|e| e.targets.iter().find(|t| t.name == name))
        else {
            return vec!["verdict: not evaluated yet (run `evaluate`)".into()];
        };
        let mut out = vec![format!(
            "verdict: {} ({}) · identical to the reference: {} · behavioral {} · check {} ms",
            v.status.as_str(),
            v.require.as_str(),
            crate::evaluate::yes_no(v.full_byte),
            pass(v.behavioral),
            v.check_ms
        )];
        if let Some(d) = &v.first_difference {
            out.push(format!("  first difference: {d}"));
        }
        if let Some(source) = &v.controls_source {
            out.push(format!("  controls: {}", source.describe()));
        }
        // The named checks, the failing ones with their message's headline.
        if !v.checks.is_empty() {
            let failed: Vec<&crate::evaluate::NamedCheck> =
                v.checks.iter().filter(|c| !c.passed).collect();
            out.push(format!(
                "named checks: {} of {} failed",
                failed.len(),
                v.checks.len()
            ));
            for c in failed {
                out.push(format!(
                    "  ✖ {} — {}",
                    c.name,
                    crate::evaluate::headline(c.message.as_deref().unwrap_or(""))
                ));
            }
        }
        if let Some(note) = &v.checks_note {
            out.push(format!("  named checks: {note}"));
        }
        for note in &v.notes {
            out.push(format!("  note: {}", visible_inline(note)));
        }
        // Split on `\n` only: a `\r` the check printed stays in its line, shown as `␍`.
        let output: Vec<&str> = v.check_output.split_terminator('\n').collect();
        if !output.is_empty() {
            out.push(format!(
                "check output (last {} of {} lines):",
                output.len().min(CHECK_OUTPUT_LINES),
                output.len()
            ));
            let skip = output.len().saturating_sub(CHECK_OUTPUT_LINES);
            out.extend(output[skip..].iter().map(|l| format!("  │ {l}")));
        }
        out
    }

    /// The submissions on target `name` from the observed processes' wire logs and a
    /// replica's (R2), each with its receipt's outcome and reasons.
    fn submissions_section(&self, name: &str) -> Vec<String> {
        use crate::evidence::run_dir::process::{OBSERVED, REPLICA};
        let mut attempts = Vec::new();
        for process in [OBSERVED, HOST_OBSERVED, REPLICA] {
            // Streamed: a long log never sits in memory whole.
            if let Ok(file) = std::fs::File::open(self.run.wire_log(process)) {
                let log = std::io::BufReader::with_capacity(64 * 1024, file);
                attempts.extend(attempts_in_log(log, process, name));
            }
        }
        let mut out = vec![format!("submissions ({}):", attempts.len())];
        for (i, a) in attempts.iter().enumerate() {
            out.push(format!(
                "  #{:<3} {:<9} key {} · {} → {}{}",
                i + 1,
                visible_inline(&a.outcome),
                visible_inline(&a.request_key),
                match a.base_revision {
                    Some(r) => format!("base r{r}"),
                    None if a.process == REPLICA => "at its cursor".into(),
                    None => "base r?".into(),
                },
                a.revision.map_or("-".into(), |r| format!("r{r}")),
                if a.process == OBSERVED {
                    String::new()
                } else {
                    format!(" ({})", a.process)
                }
            ));
            for r in &a.reasons {
                out.push(format!("        reason: {}", visible_inline(r)));
            }
            for w in &a.warnings {
                out.push(format!("        warning: {}", visible_inline(w)));
            }
        }
        out
    }

    /// Diffs of the export against the expected and the original bytes. Errors when a fixture
    /// file or an existing export cannot be read.
    fn diffs_section(&self, fixture: &Fixture) -> Result<Vec<String>, StepError> {
        let original = std::fs::read(self.manifest.resolve(&fixture.original))?;
        let expected = std::fs::read(self.manifest.resolve(&fixture.expected))?;
        let export_path = self.run.export(&fixture.module_file);
        let Some(exported) = read_if_exists(&export_path)? else {
            return Ok(vec!["diffs: not exported yet (run `export`)".into()]);
        };
        let mut out = vec!["diff: expected → exported".into()];
        out.extend(unified(&expected, &exported, "expected", "exported"));
        out.push(String::new());
        out.push("diff: original → exported".into());
        out.extend(unified(&original, &exported, "original", "exported"));
        Ok(out)
    }
}

/// The target's identity and hashes: name, language, version, revision, counts; initial,
/// current, exported and expected SHA-256.
fn story_header(row: &TargetRow, fixture: &Fixture) -> Vec<String> {
    vec![
        format!(
            "{} ({}) · version {} · revision {} · accepted {} · rejected {}",
            row.name, row.language, row.version, row.revision, row.accepted, row.rejected
        ),
        format!("initial  {}", row.initial_sha256),
        format!("current  {}", or_dash(&row.current_sha256)),
        format!(
            "exported {}",
            row.exported_sha256.as_deref().unwrap_or("- (not exported)")
        ),
        format!("expected {}", fixture.expected_sha256),
    ]
}

fn read_if_exists(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn pass(ok: bool) -> &'static str {
    if ok { "pass" } else { "FAIL" }
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(message: Value) -> String {
        json!({"seq": 0, "pid": 1, "mono_ns": 0, "ts_ms": 0.0, "direction": "request",
               "raw": message.to_string()})
        .to_string()
    }

    #[test]
    fn submissions_pair_with_their_results_by_id() {
        let submit = |id: u64, key: &str, target: &str| {
            record(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "patchdiff_submit_observed_operations",
                "arguments": {"target": target, "request_key": key, "base_revision": 1}}}),
            )
        };
        let log = [
            submit(4, "k-1", "chess"),
            submit(5, "k-2", "calendar"),
            submit(6, "k-3", "chess"),
            record(json!({"jsonrpc": "2.0", "id": 6, "result": {"structuredContent": {
                "outcome": "rejected", "reasons": [{"code": "OLD_TEXT_NOT_FOUND", "message": "gone"}]}}})),
            record(json!({"jsonrpc": "2.0", "id": 4, "result": {"structuredContent": {
                "outcome": "accepted", "revision": 2,
                "warnings": ["SYNTAX_ERRORS_INTRODUCED: the accepted edit leaves the python with syntax errors"]}}})),
            "not a record".to_owned(),
        ]
        .join("\n");
        let attempts = attempts_in(&log, "observed", "chess");
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].request_key, "k-1");
        assert_eq!(attempts[0].outcome, "accepted");
        assert_eq!(attempts[0].revision, Some(2));
        assert_eq!(attempts[1].outcome, "rejected");
        assert_eq!(attempts[1].reasons, ["OLD_TEXT_NOT_FOUND gone"]);
        // A receipt's warnings reach the story (and, for syntax errors, the report's notes).
        assert_eq!(
            attempts[0].warnings,
            ["SYNTAX_ERRORS_INTRODUCED: the accepted edit leaves the python with syntax errors"]
        );
        assert!(attempts[1].warnings.is_empty());
        let unanswered = attempts_in(&submit(9, "k-9", "chess"), "observed", "chess");
        assert_eq!(unanswered[0].outcome, "no reply");
    }

    #[test]
    fn submissions_of_two_processes_sharing_a_log_pair_by_process_and_id() {
        let of = |pid: u32, message: Value| {
            json!({"seq": 0, "pid": pid, "mono_ns": 0, "ts_ms": 0.0, "direction": "request",
                   "raw": message.to_string()})
            .to_string()
        };
        let submit = |pid: u32, key: &str| {
            of(
                pid,
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
                "name": "patchdiff_submit_observed_operations",
                "arguments": {"target": "chess", "request_key": key, "base_revision": 1}}}),
            )
        };
        let reply = |pid: u32, outcome: &str| {
            of(
                pid,
                json!({"jsonrpc": "2.0", "id": 4, "result": {"structuredContent": {
                "outcome": outcome, "revision": 2}}}),
            )
        };
        let log = [
            submit(11, "k-a"),
            submit(22, "k-b"),
            reply(22, "rejected"),
            reply(11, "accepted"),
        ]
        .join("\n");
        let attempts = attempts_in(&log, "host-observed", "chess");
        let seen: Vec<(&str, &str)> = attempts
            .iter()
            .map(|a| (a.request_key.as_str(), a.outcome.as_str()))
            .collect();
        assert_eq!(seen, [("k-a", "accepted"), ("k-b", "rejected")]);
    }

    #[test]
    fn diffs_show_changed_lines_with_context_or_say_identical() {
        let old = b"a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = b"a\nb\nc\nD\ne\nf\ng\nh\n";
        let lines = unified(old, new, "expected", "exported");
        assert_eq!(lines[0], "  --- expected");
        assert_eq!(lines[1], "  +++ exported");
        assert!(lines.contains(&"  -d".to_owned()), "{lines:?}");
        assert!(lines.contains(&"  +D".to_owned()), "{lines:?}");
        assert!(
            lines.contains(&"   a".to_owned()),
            "3 lines of context: {lines:?}"
        );
        assert!(!lines.iter().any(|l| l.ends_with('h')), "{lines:?}");
        assert_eq!(unified(old, old, "a", "b"), ["  (identical: b = a)"]);
    }

    /// A key that changes the window title and erases the
    /// line is shown as pictures in the story's submissions, on its own line.
    #[test]
    fn a_hostile_request_key_is_listed_as_pictures() {
        let key = "k\x1b]0;owned\x07\r\x1b[2K\nPASSED";
        let log = record(
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "patchdiff_submit_observed_operations",
            "arguments": {"target": "chess", "request_key": key, "base_revision": 1}}}),
        );
        let attempts = attempts_in(&log, "observed", "chess");
        assert_eq!(attempts[0].request_key, key, "the data stays exact");
        let shown = visible_inline(&attempts[0].request_key);
        assert_eq!(shown, "k␛]0;owned␇␍␛[2K␊PASSED");
    }

    /// Target text holding a line erase, concealment and an OSC 52
    /// write shows as pictures in the diff, each `\r` kept in its line.
    #[test]
    fn diffs_show_the_agents_control_characters_as_pictures() {
        let old = b"a\nb\n";
        let new = b"a\n# \x1b[8m\x1b]52;c;eA==\x07\r\x1b[2KPASSED\r\nb\n";
        let lines = unified(old, new, "expected", "exported");
        let text = lines.join("\n");
        assert!(
            !text.chars().any(crate::display::needs_picture),
            "a control character reached the diff raw: {text:?}"
        );
        // `similar` ends a line at a lone `\r` too; either way each `\r` is shown as `␍`.
        assert!(
            text.contains("+# ␛[8m␛]52;c;eA==␇␍") && text.contains("␛[2KPASSED␍"),
            "{lines:?}"
        );
    }
}

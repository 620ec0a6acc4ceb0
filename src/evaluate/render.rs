//! The evaluation as text: the rule, one line per target, and the details (first difference,
//! failing named checks, a failing check's exit status and output tail) below.

use super::{CHECK_OUTPUT_TAIL_BYTES, ControlSource, Evaluation, Require};

/// One line of a check's output for one-line summaries: the first line mentioning an error
/// (rustup, rustc, node and python put the cause there), else the last non-empty line.
pub fn headline(output: &str) -> &str {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    lines
        .clone()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or_else(|| lines.next_back())
        .unwrap_or("")
}

/// `yes` or `no`, for `identical to the reference: …`.
pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Renders the evaluation as text: the rule that decided, one line per target (verdict,
/// `identical to the reference: yes/no`, behavioral, where the controls came from, notes), the
/// first difference and the failing named checks below it, then, for every target that did not
/// pass, its check's exit status and output tail (≤ 4 KiB) indented.
pub fn render_text(evaluation: &Evaluation) -> String {
    let mut out = format!("{}\n", evaluation.rule);
    for t in &evaluation.targets {
        out.push_str(&format!(
            "{:<14} {:<11} identical to the reference: {:<3} · behavioral {:<4} · controls {}{}{}\n",
            t.name,
            t.status.as_str(),
            yes_no(t.full_byte),
            if t.behavioral { "pass" } else { "FAIL" },
            t.controls_source
                .as_ref()
                .map_or("-".to_owned(), ControlSource::describe),
            if t.require == Require::FullByte && evaluation.require != Require::FullByte {
                " · full-byte required by the manifest"
            } else {
                ""
            },
            if t.notes.is_empty() {
                String::new()
            } else {
                format!(" · {}", t.notes.join("; "))
            }
        ));
        out.push_str(&target_details(
            t.first_difference.as_deref(),
            &t.failing_checks,
            t.checks_note.as_deref(),
        ));
    }
    for t in evaluation.targets.iter().filter(|t| !t.passed()) {
        out.push_str(&check_detail(
            &t.name,
            t.check_exit.as_deref(),
            &t.check_output,
        ));
    }
    out.push_str(&format!(
        "{}/{} targets pass",
        evaluation.passed, evaluation.total
    ));
    if evaluation.infra_errors > 0 {
        out.push_str(&format!(
            " · {} infra_error (the check environment, not the agent)",
            evaluation.infra_errors
        ));
    }
    if evaluation.flaky > 0 {
        out.push_str(&format!(" · {} flaky", evaluation.flaky));
    }
    out.push_str(&format!(
        " · controls {} run, {} reused\n",
        evaluation.controls_run, evaluation.controls_reused
    ));
    out
}

/// The indented lines under a target's row in text reports: where its bytes first differ from
/// the reference, its failing named checks, why it has no named checks.
pub fn target_details(
    first_difference: Option<&str>,
    failing_checks: &[String],
    checks_note: Option<&str>,
) -> String {
    let mut out = String::new();
    if let Some(d) = first_difference {
        out.push_str(&format!("    first difference: {d}\n"));
    }
    if !failing_checks.is_empty() {
        out.push_str(&format!(
            "    failing checks: {}\n",
            failing_checks.join(", ")
        ));
    }
    if let Some(n) = checks_note {
        out.push_str(&format!("    named checks: {n}\n"));
    }
    out
}

/// A non-passing check's exit status and output tail, indented, for text reports.
pub fn check_detail(name: &str, exit: Option<&str>, output: &str) -> String {
    let mut out = format!(
        "\n{name}: check {}; last {} KiB of its output:\n",
        exit.unwrap_or("did not run"),
        CHECK_OUTPUT_TAIL_BYTES / 1024
    );
    if output.trim().is_empty() {
        out.push_str("    (no output)\n");
    }
    for line in output.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

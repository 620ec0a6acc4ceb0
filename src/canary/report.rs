//! The canary's final report (text, JSON, JUnit XML) and the SAVE/replay consistency check
//! (SPEC C5, K6, U5).

use serde::Serialize;
use serde_json::Value;

use super::host::HostRecord;
use super::outcome::AgentStop;
use super::state::{StepOutcome, TargetRow};
use crate::display::{visible, visible_inline};
use crate::evaluate::Evaluation;
use crate::evaluate::Status;
use crate::evidence::AgentIdentity;
use crate::evidence::{RunDir, write_new_private};

/// The agent host's lines of the text report: host, version, models, turns, seal, tool calls.
fn host_text(h: &super::host::HostRecord) -> String {
    let calls: Vec<String> = h
        .tool_calls
        .iter()
        .map(|(tool, n)| format!("{tool} {n}"))
        .collect();
    let count = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
    let errors: Vec<String> = h
        .tool_errors
        .iter()
        .flat_map(|(tool, codes)| {
            codes
                .iter()
                .map(move |(code, n)| format!("{tool} {code} {n}"))
        })
        .collect();
    let usage = format!(
        "  usage ({}): input {} tokens (cache read {}, cache write {}) · output {} · {} tool calls · {:.2} min{}\n  tool errors: {}\n{}",
        h.usage_source,
        count(h.input_tokens),
        count(h.cache_read_tokens),
        count(h.cache_write_tokens),
        count(h.output_tokens),
        h.tool_calls_total,
        h.minutes,
        h.cost_usd.map_or(String::new(), |c| format!(" · ${c:.4}")),
        if errors.is_empty() {
            "none".to_owned()
        } else {
            errors.join(", ")
        },
        h.provider_error
            .as_ref()
            .map_or(String::new(), |e| format!("  provider error: {e}\n")),
    );
    format!(
        "\nagent host: {} {} ({}) · requested model {} · reported {} · {} turns · {} ms{}{}\n  seal: {}\n  tool calls: {}\n{usage}",
        h.host,
        h.version,
        h.binary,
        h.requested_model,
        if h.reported_models.is_empty() {
            "-".to_owned()
        } else {
            h.reported_models.join(", ")
        },
        h.turns,
        h.duration_ms,
        h.cost_usd.map_or(String::new(), |c| format!(" · ${c:.4}")),
        if h.timed_out { " · TIMED OUT" } else { "" },
        h.seal
            .problem
            .as_deref()
            .unwrap_or("6 observed tools, one MCP server"),
        if calls.is_empty() {
            "none".to_owned()
        } else {
            calls.join(", ")
        },
    )
}

/// The run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub run_id: String,
    pub run_dir: String,
    /// Every step succeeded and every target passed both checks.
    pub passed: bool,
    /// `passed`, `failed` (the agent's outcome, or a step after it), or
    /// `infra_abort` (the run stopped before the agent acted: nothing judged, nothing counts
    /// against the agent; `console --script` exits 3).
    pub outcome: super::outcome::RunOutcome,
    /// For `infra_abort`: why, naming the step that failed before the agent acted.
    pub infra_abort: Option<String>,
    /// How the agent step ended (`acted`, `reason`, `why` — "agent timed out", … — and
    /// `detail`), once one ran.
    pub agent_stop: Option<super::outcome::AgentStop>,
    pub steps: Vec<StepOutcome>,
    pub targets: Vec<ReportTarget>,
    pub agent: crate::evidence::AgentIdentity,
    /// A4: the agent host run (CLI, version, models, turns, tool calls, usage, seal), if any.
    pub agent_host: Option<super::host::HostRecord>,
    /// The rule the evaluation used: `behavioral` or `full-byte`; null
    /// before `evaluate`.
    pub require: Option<crate::evaluate::Require>,
    /// The header sentence saying which rule decided; empty before `evaluate`.
    pub rule: String,
    /// C7: comparative runs are a separate mode, closed here.
    pub gate2: &'static str,
    /// What the run's evidence logs lost (each names the log and how many records);
    /// a run with any cannot pass.
    pub evidence_incomplete: Vec<String>,
    /// The loopback provider endpoints the agent host was pointed at
    /// (`VARIABLE host`); non-empty marks the run a rehearsal, never a real model run.
    pub rehearsal: Vec<String>,
}

/// One target in the report; `full_byte`/`behavioral` are false until evaluated.
#[derive(Debug, Clone, Serialize)]
pub struct ReportTarget {
    pub name: String,
    /// Identical to the reference (the exported bytes equal the expected bytes).
    pub full_byte: bool,
    /// Where the export first differs from the reference; null when identical or unevaluated.
    pub first_difference: Option<String>,
    /// The rule that decided this target.
    pub require: Option<crate::evaluate::Require>,
    /// The named checks of the run that explains the verdict.
    pub checks: Vec<crate::evaluate::NamedCheck>,
    /// Names of the named checks that failed.
    pub failing_checks: Vec<String>,
    /// Why the check's output gave no named checks, if it did not.
    pub checks_note: Option<String>,
    /// Where the controls came from: `run (digest …)` or `reused (digest …)`.
    pub controls: Option<String>,
    pub behavioral: bool,
    pub evaluated: bool,
    pub version: u64,
    pub revision: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub initial_sha256: String,
    pub exported_sha256: Option<String>,
    pub replay_consistent: Option<bool>,
    /// `pass`, `fail`, `infra_error` (the check or its environment is broken — V3), `flaky`;
    /// null when not evaluated.
    pub status: Option<Status>,
    /// For any non-pass: the check's exit status and the last 4 KiB of its output.
    pub check_exit: Option<String>,
    pub check_output: Option<String>,
    pub notes: Vec<String>,
}

impl ReportTarget {
    /// The evaluator's verdict is `pass` (behaviour decided, or full-byte where required).
    pub fn passed(&self) -> bool {
        self.status == Some(Status::Pass)
    }

    /// `yes`, `no` or `-` (not evaluated), for `identical to the reference: …`.
    pub fn identical(&self) -> &'static str {
        match (self.evaluated, self.full_byte) {
            (false, _) => "-",
            (true, b) => crate::evaluate::yes_no(b),
        }
    }

    /// The verdict column: `pass`, `FAIL`, `infra_error`, `flaky` or `-`.
    pub fn verdict(&self) -> &'static str {
        self.status.map_or("-", Status::as_str)
    }

    /// The behavioral column: `-` when the check itself is broken (nothing was judged).
    fn behavioral_column(&self) -> &'static str {
        if self.status == Some(Status::InfraError) {
            "-"
        } else {
            verdict(self.evaluated, self.behavioral)
        }
    }
}

impl From<&TargetRow> for ReportTarget {
    fn from(r: &TargetRow) -> Self {
        Self {
            name: r.name.clone(),
            full_byte: r.full_byte.unwrap_or(false),
            first_difference: r.first_difference.clone(),
            require: r.require,
            checks: r.checks.clone(),
            failing_checks: r.failing_checks.clone(),
            checks_note: r.checks_note.clone(),
            controls: r.controls.clone(),
            behavioral: r.behavioral.unwrap_or(false),
            evaluated: r.full_byte.is_some(),
            version: r.version,
            revision: r.revision,
            accepted: r.accepted,
            rejected: r.rejected,
            initial_sha256: r.initial_sha256.clone(),
            exported_sha256: r.exported_sha256.clone(),
            replay_consistent: r.replay_consistent,
            status: r.status,
            check_exit: r.check_exit.clone(),
            check_output: r.check_output.clone(),
            notes: r.notes.clone(),
        }
    }
}

/// What the report is built from: the run's state as of now.
pub struct ReportInputs<'a> {
    pub run: &'a RunDir,
    pub steps: &'a [StepOutcome],
    pub targets: &'a [TargetRow],
    pub evaluation: Option<&'a Evaluation>,
    pub identity: &'a AgentIdentity,
    pub host_record: Option<&'a HostRecord>,
    pub agent_stop: Option<&'a AgentStop>,
    pub agent_planned: bool,
    /// [`super::record::provider_endpoints`]: a loopback one makes the run a rehearsal.
    pub provider_endpoints: &'a Value,
    /// What the run's chained evidence logs lost (one line per log and fault).
    pub evidence_incomplete: Vec<String>,
}

impl Report {
    /// The report of a run in the state `canary` gives.
    pub fn build(canary: ReportInputs<'_>) -> Self {
        let targets: Vec<ReportTarget> = canary.targets.iter().map(ReportTarget::from).collect();
        // The report step itself is judged by this report, so it is not counted here.
        let steps_ok = canary
            .steps
            .iter()
            .filter(|s| s.command != "report")
            .all(|s| s.ok);
        let evaluated = canary.evaluation.is_some();
        let evidence_incomplete = canary.evidence_incomplete;
        let rehearsal = canary
            .provider_endpoints
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["loopback"] == true)
            .map(|e| {
                format!(
                    "{} {}",
                    e["variable"].as_str().unwrap_or("?"),
                    e["host"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let passed = steps_ok
            && evaluated
            && targets.iter().all(ReportTarget::passed)
            && evidence_incomplete.is_empty();
        let failed_step = canary
            .steps
            .iter()
            .find(|s| !s.ok && s.command != "report")
            .map(|s| (s.command.as_str(), s.summary.as_str()));
        let (outcome, infra_abort) =
            super::outcome::decide(failed_step, passed, canary.agent_stop, canary.agent_planned);
        Self {
            run_id: canary.run.run_id.clone(),
            run_dir: canary.run.path.display().to_string(),
            passed,
            outcome,
            infra_abort,
            agent_stop: canary.agent_stop.cloned(),
            steps: canary.steps.to_vec(),
            targets,
            agent: canary.identity.clone(),
            agent_host: canary.host_record.cloned(),
            require: canary.evaluation.map(|e| e.require),
            rule: canary
                .evaluation
                .map(|e| e.rule.clone())
                .unwrap_or_default(),
            gate2: "closed",
            evidence_incomplete,
            rehearsal,
        }
    }

    /// One line naming failed steps and targets; for `infra_abort`, why the run stopped.
    pub fn failure_summary(&self) -> String {
        if let Some(why) = &self.infra_abort {
            return format!("infra_abort, nothing judged: {why}");
        }
        let mut parts: Vec<String> = self
            .steps
            .iter()
            .filter(|s| !s.ok && s.command != "report")
            .map(|s| format!("step {} failed", s.command))
            .collect();
        for t in self.targets.iter().filter(|t| !t.passed()) {
            let mut part = format!(
                "target {} {} · identical to the reference: {} · behavioral {}",
                t.name,
                t.verdict(),
                t.identical(),
                t.behavioral_column()
            );
            if !t.failing_checks.is_empty() {
                part.push_str(&format!(
                    " · failing checks: {}",
                    t.failing_checks.join(", ")
                ));
            }
            if matches!(t.status, Some(Status::InfraError | Status::Flaky)) {
                part.push_str(&format!(
                    " {} ({}: {})",
                    t.verdict(),
                    t.check_exit.as_deref().unwrap_or("-"),
                    crate::evaluate::headline(t.check_output.as_deref().unwrap_or(""))
                ));
            }
            parts.push(part);
        }
        if !self.evidence_incomplete.is_empty() {
            parts.push(format!(
                "evidence incomplete: {}",
                self.evidence_incomplete.join("; ")
            ));
        }
        if parts.is_empty() && !self.passed {
            parts.push("the evaluator has not run".into());
        }
        parts.join("; ")
    }

    /// Plain-text rendering: the header, the steps, the agent host (if one ran), the targets
    /// table, what failed with the check's output, and the totals line. What the agent
    /// wrote (summaries, notes, check output) is shown through [`crate::display`]: no control
    /// character reaches the text raw, and a one-line field cannot start a line of its own.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "patchdiff canary {} — {}{}\nrun directory: {}\ngate 2: {}\n{}",
            self.run_id,
            self.outcome.headline(),
            if self.rehearsal.is_empty() {
                ""
            } else {
                " (REHEARSAL: loopback model endpoint)"
            },
            self.run_dir,
            self.gate2,
            if self.rule.is_empty() {
                String::new()
            } else {
                format!("{}\n", self.rule)
            }
        );
        if !self.rehearsal.is_empty() {
            out.push_str(&format!(
                "rehearsal: the agent host was pointed at loopback ({}), not a real provider\n",
                self.rehearsal.join(", ")
            ));
        }
        out.push_str("\nsteps:\n");
        for s in &self.steps {
            out.push_str(&format!(
                "  {:<11} {:<4} {:>6} ms  {}\n",
                s.command,
                if s.ok { "ok" } else { "FAIL" },
                s.elapsed_ms,
                visible_inline(&s.summary)
            ));
        }
        out.push_str(&self.agent_stop_text());
        if let Some(h) = &self.agent_host {
            out.push_str(&host_text(h));
        }
        if !self.evidence_incomplete.is_empty() {
            out.push_str("\nevidence incomplete (the run cannot pass):\n");
            for e in &self.evidence_incomplete {
                out.push_str(&format!("  {e}\n"));
            }
        }
        out.push_str(&self.targets_text());
        out.push_str(&self.failures_text());
        match &self.infra_abort {
            // Nothing was judged, so there is no count of passing targets.
            Some(_) => out.push_str(
                "\nno target judged: the run stopped before the agent acted (infra_abort); \
                 nothing counts against the agent\n",
            ),
            None => out.push_str(&self.totals_text()),
        }
        visible(&out).into_owned()
    }

    /// Why the agent stopped (and whether it had acted), and for an
    /// `infra_abort` why the run stopped.
    fn agent_stop_text(&self) -> String {
        let mut out = String::new();
        if let Some(stop) = &self.agent_stop {
            out.push_str(&format!(
                "\nagent stopped: {}{} — {}\n",
                stop.why,
                if stop.acted {
                    " (after acting: its saved work is judged)"
                } else {
                    " (before acting)"
                },
                stop.detail
            ));
        }
        if let Some(why) = &self.infra_abort {
            out.push_str(&format!("INFRA_ABORT: {why}\n"));
        }
        out
    }

    /// The targets table, one row per target.
    fn targets_text(&self) -> String {
        let mut out =
            "\ntargets:                 verdict     identical behavioral ver rev acc/rej replay controls\n"
                .to_owned();
        for t in &self.targets {
            out.push_str(&format!(
                "  {:<22} {:<11} {:<9} {:<10} {:>3} {:>3} {:>3}/{:<3} {:<6} {}\n",
                t.name,
                t.verdict(),
                t.identical(),
                t.behavioral_column(),
                t.version,
                t.revision,
                t.accepted,
                t.rejected,
                match t.replay_consistent {
                    Some(true) => "ok",
                    Some(false) => "MISMATCH",
                    None => "-",
                },
                t.controls.as_deref().unwrap_or("-")
            ));
            out.push_str(&crate::evaluate::target_details(
                t.first_difference.as_deref(),
                &t.failing_checks,
                t.checks_note.as_deref(),
            ));
        }
        out
    }

    /// Each evaluated target that did not pass: its notes and the check's exit and output tail.
    fn failures_text(&self) -> String {
        let mut out = String::new();
        for t in self
            .targets
            .iter()
            .filter(|t| t.status.is_some() && !t.passed())
        {
            if !t.notes.is_empty() {
                out.push_str(&format!(
                    "\n{}: {}",
                    t.name,
                    visible_inline(&t.notes.join("; "))
                ));
            }
            out.push_str(&crate::evaluate::check_detail(
                &t.name,
                t.check_exit.as_deref(),
                t.check_output.as_deref().unwrap_or(""),
            ));
        }
        out
    }

    /// `N/M targets pass both checks`, and how many were `infra_error`.
    fn totals_text(&self) -> String {
        let passing = self.targets.iter().filter(|t| t.passed()).count();
        let infra = self
            .targets
            .iter()
            .filter(|t| t.status == Some(Status::InfraError))
            .count();
        let mut out = format!("\n{passing}/{} targets pass", self.targets.len());
        let identical = self
            .targets
            .iter()
            .filter(|t| t.evaluated && t.full_byte)
            .count();
        out.push_str(&format!(
            " · {identical}/{} identical to the reference",
            self.targets.len()
        ));
        if infra > 0 {
            out.push_str(&format!(
                " · {infra} infra_error (the check environment, not the agent)"
            ));
        }
        out.push('\n');
        out
    }

    /// JUnit XML (written by `quick-junit`): one test case per step and one per target check. A
    /// target whose check is broken (`infra_error`) is a JUnit `<error>`, not a `<failure>`;
    /// every non-pass carries the check's exit status and output tail in the element's text.
    /// Characters XML 1.0 cannot carry (a check's terminal escapes) are dropped.
    pub fn to_junit(&self) -> String {
        use quick_junit::{
            NonSuccessKind, Report as JunitReport, TestCase, TestCaseStatus, TestSuite,
        };
        let problem = |kind: NonSuccessKind, ty: &str, message: &str, text: Option<&str>| {
            let mut status = TestCaseStatus::non_success(kind);
            status.set_type(ty).set_message(message);
            if let Some(text) = text {
                status.set_description(text);
            }
            status
        };
        let case = |class: &str, name: &str, status: TestCaseStatus| {
            let mut case = TestCase::new(name, status);
            case.set_classname(class);
            case
        };
        let mut suite = TestSuite::new(format!("patchdiff-canary {}", self.run_id));
        for s in &self.steps {
            let status = if s.ok {
                TestCaseStatus::success()
            } else {
                problem(NonSuccessKind::Failure, "step_failed", &s.summary, None)
            };
            suite.add_test_case(case("canary.step", &s.command, status));
        }
        for t in &self.targets {
            // An aborted run judged nothing — its targets are skipped, except
            // one whose own control failed, which stays the infra_error it is.
            if let Some(why) = self
                .infra_abort
                .as_ref()
                .filter(|_| t.status != Some(Status::InfraError))
            {
                for class in ["canary.full_byte", "canary.behavioral"] {
                    let mut status = TestCaseStatus::skipped();
                    status.set_type("infra_abort").set_message(why.as_str());
                    suite.add_test_case(case(class, &t.name, status));
                }
                continue;
            }
            let notes = t.notes.join("; ");
            let detail = t
                .check_exit
                .as_ref()
                .map(|exit| format!("check {exit}\n{}", t.check_output.as_deref().unwrap_or("")));
            let infra = t.status == Some(Status::InfraError);
            let status = |ok: bool, kind: &str| {
                if infra {
                    problem(
                        NonSuccessKind::Error,
                        "infra_error",
                        &notes,
                        detail.as_deref(),
                    )
                } else if ok {
                    TestCaseStatus::success()
                } else {
                    let kind = if t.status == Some(Status::Flaky) {
                        "flaky"
                    } else {
                        kind
                    };
                    problem(NonSuccessKind::Failure, kind, &notes, detail.as_deref())
                }
            };
            // Identity with the reference fails the case only where it was required; otherwise
            // it is reported (a passing case whose output says how the bytes differ).
            let bytes_required = t.require == Some(crate::evaluate::Require::FullByte);
            let mut identical = case(
                "canary.full_byte",
                &t.name,
                status(t.full_byte || !bytes_required, "full_byte"),
            );
            if t.evaluated {
                identical.set_system_out(format!(
                    "identical to the reference: {}{}",
                    t.identical(),
                    t.first_difference
                        .as_deref()
                        .map(|d| format!(" (first difference {d})"))
                        .unwrap_or_default()
                ));
            }
            suite.add_test_case(identical);
            suite.add_test_case(case(
                "canary.behavioral",
                &t.name,
                status(t.behavioral, "behavioral"),
            ));
            // One test case per named check of the run that explains the
            // verdict, classname `check.<target>`.
            for c in &t.checks {
                let status = if c.passed {
                    TestCaseStatus::success()
                } else {
                    problem(
                        NonSuccessKind::Failure,
                        "named_check",
                        c.message
                            .as_deref()
                            .map_or("failed", crate::evaluate::headline),
                        c.message.as_deref(),
                    )
                };
                let mut named = case(&format!("check.{}", t.name), &c.name, status);
                if let Some(ms) = c.duration_ms.filter(|ms| ms.is_finite() && *ms >= 0.0) {
                    named.set_time(std::time::Duration::from_secs_f64(ms / 1000.0));
                }
                suite.add_test_case(named);
            }
        }
        let mut report = JunitReport::new("patchdiff");
        report.add_test_suite(suite);
        // Serializing an in-memory report to a String cannot fail on I/O; an error here is a bug.
        report.to_string().expect("JUnit XML serializes")
    }
}

fn verdict(evaluated: bool, ok: bool) -> &'static str {
    match (evaluated, ok) {
        (false, _) => "-",
        (true, true) => "pass",
        (true, false) => "FAIL",
    }
}

/// Writes `report.txt`, `report.json` and `report.junit.xml` into the run directory (once; E2).
/// Each passes this process's redactor ([`crate::redact::process`]: the console's
/// environment and the database URL its settings name) first, so a credential a check printed or an error echoed is not sealed into a report; the
/// replacement needs no escaping, so JSON and XML stay valid.
pub fn write_reports(run: &RunDir, report: &Report) -> std::io::Result<()> {
    let redactor = crate::redact::process();
    let redacted = |text: String| redactor.redact(&text).into_owned().into_bytes();
    write_new_private(&run.report("txt"), &redacted(report.to_text()))?;
    write_new_private(
        &run.report("json"),
        &redacted(serde_json::to_string_pretty(report)?),
    )?;
    write_new_private(&run.report("junit.xml"), &redacted(report.to_junit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed run's report with these steps and targets and nothing else set.
    fn report_of(steps: Vec<StepOutcome>, targets: Vec<ReportTarget>) -> Report {
        Report {
            run_id: "r-1".into(),
            run_dir: "/runs/r-1".into(),
            passed: false,
            steps,
            targets,
            agent: Default::default(),
            agent_host: None,
            require: None,
            rule: String::new(),
            outcome: crate::canary::outcome::RunOutcome::Failed,
            infra_abort: None,
            agent_stop: None,
            gate2: "closed",
            evidence_incomplete: Vec::new(),
            rehearsal: Vec::new(),
        }
    }

    /// A target whose check failed (exit 1) printing `output`, at version 1 with one accepted
    /// submission; nothing optional set.
    fn failed_target(name: &str, output: &str) -> ReportTarget {
        ReportTarget {
            name: name.into(),
            full_byte: false,
            first_difference: None,
            require: None,
            checks: Vec::new(),
            failing_checks: Vec::new(),
            checks_note: None,
            controls: None,
            behavioral: false,
            evaluated: true,
            version: 1,
            revision: 1,
            accepted: 1,
            rejected: 0,
            initial_sha256: String::new(),
            exported_sha256: None,
            replay_consistent: None,
            status: Some(Status::Fail),
            check_exit: Some("exit 1".into()),
            check_output: Some(output.into()),
            notes: Vec::new(),
        }
    }

    /// One JUnit test case per named check (classname `check.<target>`), the
    /// failing one a `<failure>` with its message; identity with the reference fails its case
    /// only where full-byte was required.
    #[test]
    fn junit_has_one_case_per_named_check_and_reports_bytes_beside_the_verdict() {
        let named = |name: &str, passed: bool| crate::evaluate::NamedCheck {
            name: name.into(),
            passed,
            duration_ms: Some(1.5),
            message: (!passed).then(|| "Traceback\nAssertionError: True is not false".into()),
        };
        let mut target = failed_target("chess", "FAILED");
        target.first_difference = Some("at byte 9 (line 254)".into());
        target.require = Some(crate::evaluate::Require::Behavioral);
        target.checks = vec![named("t.A.ok_one", true), named("t.B.broken", false)];
        target.failing_checks = vec!["t.B.broken".into()];
        target.controls = Some("reused (digest 0123456789ab)".into());
        target.replay_consistent = Some(true);
        target.notes = vec!["behavioral check failed".into()];
        let mut report = report_of(Vec::new(), vec![target]);
        report.require = Some(crate::evaluate::Require::Behavioral);
        report.rule = "decided by: behaviour".into();
        let parsed = quick_junit::Report::deserialize_from_str(&report.to_junit()).unwrap();
        let cases = &parsed.test_suites[0].test_cases;
        let of_class = |class: &str| -> Vec<&quick_junit::TestCase> {
            cases
                .iter()
                .filter(|c| c.classname.as_deref() == Some(class))
                .collect()
        };
        let named_cases = of_class("check.chess");
        assert_eq!(named_cases.len(), 2);
        assert!(matches!(
            named_cases[0].status,
            quick_junit::TestCaseStatus::Success { .. }
        ));
        match &named_cases[1].status {
            quick_junit::TestCaseStatus::NonSuccess { message, .. } => {
                assert_eq!(named_cases[1].name.as_str(), "t.B.broken");
                assert_eq!(
                    message.as_deref(),
                    Some("AssertionError: True is not false")
                );
            }
            other => panic!("{other:?}"),
        }
        // Behaviour decided: different bytes are reported, not failed.
        let bytes = of_class("canary.full_byte");
        assert!(matches!(
            bytes[0].status,
            quick_junit::TestCaseStatus::Success { .. }
        ));
        assert!(
            bytes[0]
                .system_out
                .as_deref()
                .is_some_and(|o| o.contains("identical to the reference: no")),
            "{:?}",
            bytes[0].system_out
        );
        let text = report.to_text();
        assert!(text.contains("decided by: behaviour"), "{text}");
        assert!(text.contains("failing checks: t.B.broken"), "{text}");
        assert!(
            text.contains("first difference: at byte 9 (line 254)"),
            "{text}"
        );
    }

    #[test]
    fn junit_keeps_markup_and_drops_terminal_escapes() {
        let summary = "a<b & \"c\"> \u{1b}[31mred\u{1b}[0m";
        let report = report_of(
            vec![StepOutcome {
                command: "preflight".into(),
                ok: false,
                summary: summary.into(),
                elapsed_ms: 1,
            }],
            Vec::new(),
        );
        let xml = report.to_junit();
        let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("valid XML");
        let case = &parsed.test_suites[0].test_cases[0];
        assert_eq!(case.name.as_str(), "preflight");
        match &case.status {
            quick_junit::TestCaseStatus::NonSuccess { message, ty, .. } => {
                assert_eq!(ty.as_deref(), Some("step_failed"));
                assert_eq!(
                    message.as_deref(),
                    Some("a<b & \"c\"> red"),
                    "escapes dropped"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// A check of the agent's code printed a line erase and
    /// a fake verdict, concealment, a title change and an OSC 52 clipboard write. `report.txt`
    /// shows them as pictures, the fake verdict cannot start a line, and the JSON keeps the
    /// exact text.
    #[test]
    fn report_text_shows_a_checks_escape_sequences_as_pictures_and_json_keeps_them() {
        let hostile = "\r\x1b[2KPASSED · 5/5 targets pass both checks\n\x1b[8mhidden\n\
                       \x1b]0;owned\x07\x1b]52;c;cm0gLXJm\x07";
        let mut target = failed_target("chess", hostile);
        target.initial_sha256 = "0".repeat(64);
        target.notes = vec!["note\x1b[8m".into()];
        let report = report_of(
            vec![StepOutcome {
                command: "evaluate".into(),
                ok: false,
                summary: "chess failed\nPASSED · 5/5 targets pass both checks".into(),
                elapsed_ms: 1,
            }],
            vec![target],
        );
        let text = report.to_text();
        for raw in ['\x1b', '\r', '\x07'] {
            assert!(
                !text.contains(raw),
                "{raw:?} reached report.txt raw:\n{text}"
            );
        }
        assert!(text.contains("␍␛[2KPASSED · 5/5"), "{text}");
        assert!(text.contains("␛]52;c;cm0gLXJm␇"), "{text}");
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("PASSED")),
            "a fake verdict starts a line:\n{text}"
        );
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["targets"][0]["check_output"], hostile);
    }
}

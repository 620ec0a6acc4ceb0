//! The comparison report's renderings (GATE2 §4.9–4.10): `report.txt` for a terminal (per-run
//! strips in time order), `report.md` (a pull-request comment in the seed's shape),
//! `report.junit.xml` (one testcase per target plus the run level), `runs.csv` (tidy rows) and
//! `report.json`. Pure functions of a [`CompareReport`].

use serde_json::Value;

use super::report::{CompareReport, Member};
use super::verdict::{self, Outcome, Side};

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn strip(report: &CompareReport, side: Side, target: usize) -> String {
    report
        .runs
        .iter()
        .filter(|m| m.arm == side)
        .map(|m| match m.outcomes.get(target) {
            Some(Outcome::Pass) => '█',
            Some(Outcome::Fail) => '▁',
            Some(Outcome::InfraError) => 'i',
            Some(Outcome::Flaky) => '~',
            None => ' ',
        })
        .collect()
}

fn flag_text(t: &verdict::TargetResult) -> String {
    if !t.testable {
        return "untestable".to_owned();
    }
    match t.flagged_at {
        Some(c) => format!("≤ {c}/{}", t.candidate.tally().runs),
        None => "never".to_owned(),
    }
}

impl CompareReport {
    /// Text for a terminal (GATE2 §4.9): header, verdict line, per-target table with per-run
    /// strips in time order (█ pass, ▁ FAIL, i infra_error, ~ flaky), the run level, failing
    /// checks, tool errors, metrics.
    pub fn to_text(&self) -> String {
        let v = &self.verdict;
        let mut out = format!(
            "COMPARE {} · plan {}… sealed before run 1 · {}\n",
            self.comparison,
            &self.plan_digest[..12.min(self.plan_digest.len())],
            self.name
        );
        for (arm, label) in [("baseline", "A  baseline "), ("candidate", "B  candidate")] {
            let c = &self.arms[arm];
            let get = |k: &str| c.get(k).map_or("-", String::as_str);
            out.push_str(&format!(
                "{label}  {} · {} · host {} · patchdiff {}\n",
                get("agent.model"),
                get("agent.kind"),
                get("host.version"),
                &get("build.source_sha")[..get("build.source_sha").len().min(10)]
            ));
        }
        if self.aa {
            out.push_str("A/A calibration: both arms identical\n");
        } else {
            out.push_str(&format!("declared: {}\n", self.declared.join(", ")));
        }
        let excluded: u32 = v
            .targets
            .iter()
            .map(|t| t.baseline.excluded() + t.candidate.excluded())
            .sum();
        let count = |side: Side| self.runs.iter().filter(|m| m.arm == side).count();
        out.push_str(&format!(
            "{} + {} of {} + {} runs · AB/BA blocks (seed {}) · {excluded} excluded target outcomes · retries A {} B {}\n",
            count(Side::Baseline),
            count(Side::Candidate),
            self.runs_per_arm,
            self.runs_per_arm,
            self.seed,
            self.retries["baseline"],
            self.retries["candidate"],
        ));
        out.push_str(&format!(
            "one-sided Fisher per target, Tarone K={} (level {:.4}) · run-level exact permutation · α {}\n\n",
            v.regression.k, v.regression.level, self.alpha
        ));
        out.push_str(&format!("VERDICT  {}\n", v.line));
        for r in &v.reasons {
            out.push_str(&format!("         · {r}\n"));
        }
        for m in &self.missing {
            out.push_str(&format!("         · missing {m}\n"));
        }
        out.push_str(&format!(
            "\n{:<12} {:>15} {:>6} {:>14} {:>8} {:>11}  A per run · B per run\n",
            "target", "pass A → B", "Δ pp", "95% CI (pp)", "p regr", "flag at"
        ));
        for (i, t) in v.targets.iter().enumerate() {
            let (a, b) = (t.baseline.tally(), t.candidate.tally());
            out.push_str(&format!(
                "{:<12} {:>6} → {:<6} {:>+6.0} {:>14} {:>8.4} {:>11}  {} {}{}\n",
                t.name,
                format!("{}/{}", a.passed, a.runs),
                format!("{}/{}", b.passed, b.runs),
                t.delta * 100.0,
                format!("[{:+.0}, {:+.0}]", t.ci.lower * 100.0, t.ci.upper * 100.0),
                t.p_regression.value,
                flag_text(t),
                strip(self, Side::Baseline, i),
                strip(self, Side::Candidate, i),
                if t.regressed {
                    "  REGRESSED"
                } else if t.improved {
                    "  IMPROVED"
                } else {
                    ""
                },
            ));
        }
        if let Some(r) = &v.run_level {
            out.push_str(&format!(
                "runs (targets passed)   A {:.1}/{n} → B {:.1}/{n} · permutation p(regr) = {:.4} · {} runs left out (excluded targets)\n",
                r.baseline_mean,
                r.candidate_mean,
                r.p_regression.value,
                r.left_out,
                n = v.targets.len()
            ));
        }
        if !self.checks.is_empty() {
            out.push_str("\nchecks failing                                   A → B\n");
            for c in &self.checks {
                out.push_str(&format!(
                    "{:<12} {:<50} {:>2} → {:<2}{}\n",
                    c.target,
                    c.check,
                    c.baseline,
                    c.candidate,
                    if c.new_in_candidate { "  NEW IN B" } else { "" }
                ));
            }
        }
        if !self.tool_errors.is_empty() {
            out.push_str("\ntool errors by reason (A → B)\n");
            for e in &self.tool_errors {
                out.push_str(&format!(
                    "{:<38} {:<22} {:>3} → {:<3}\n",
                    e.tool, e.reason, e.baseline, e.candidate
                ));
            }
        }
        if !self.signatures.is_empty() {
            out.push_str("\nfailure signatures (export diff vs the reference)\n");
            for g in &self.signatures {
                let slots: Vec<&str> = g
                    .baseline
                    .iter()
                    .chain(&g.candidate)
                    .map(String::as_str)
                    .collect();
                out.push_str(&format!(
                    "{:<12} {}  {:<50} {}  {}\n",
                    g.target,
                    g.id,
                    g.summary,
                    slots.join(" "),
                    if g.baseline.is_empty() {
                        "new in B"
                    } else {
                        "seen in A"
                    }
                ));
            }
        }
        if !self.metrics.is_empty() {
            out.push_str(&format!(
                "\n{:<24} {:>10} {:>10} {:>10} {:>8}\n",
                "per run (median)", "A", "B", "HL shift", "perm p"
            ));
            for m in &self.metrics {
                out.push_str(&format!(
                    "{:<24} {:>10.3} {:>10.3} {:>+10.3} {:>8}\n",
                    m.metric,
                    m.baseline_median,
                    m.candidate_median,
                    m.hodges_lehmann,
                    m.permutation_p
                        .map_or("-".to_owned(), |p| format!("{p:.3}"))
                ));
            }
        }
        out
    }

    /// A pull-request comment in the seed's shape: the verdict line, the task table
    /// (score A → B, Δ, Fisher p, flag threshold, minutes, steps), failed checks.
    pub fn to_markdown(&self) -> String {
        let v = &self.verdict;
        let icon = match v.kind {
            verdict::VerdictKind::Regressed => "🔴",
            verdict::VerdictKind::Improved => "🟢",
            verdict::VerdictKind::Invalid => "🟡",
            _ => "⚪",
        };
        let mut out = format!("### Eval results\n\n**Verdict: {icon} {}**\n\n", v.line);
        out.push_str(&format!(
            "{} runs per arm · one-sided Fisher exact per target (Tarone K = {}) · run-level exact permutation · α = {} · plan `{}`\n\n",
            self.runs_per_arm,
            v.regression.k,
            self.alpha,
            &self.plan_digest[..12.min(self.plan_digest.len())]
        ));
        out.push_str("| Task | Score | Δ score | Fisher test (one-sided) | flagged at | Avg min | Avg steps |\n|---|---|---|---|---|---|---|\n");
        let avg = |side: Side, f: &dyn Fn(&Member) -> Option<f64>| -> String {
            let xs: Vec<f64> = self
                .runs
                .iter()
                .filter(|m| m.arm == side)
                .filter_map(f)
                .collect();
            if xs.is_empty() {
                "-".to_owned()
            } else {
                format!("{:.1}", xs.iter().sum::<f64>() / xs.len() as f64)
            }
        };
        let minutes = format!(
            "{} → {}",
            avg(Side::Baseline, &|m| Some(m.minutes)),
            avg(Side::Candidate, &|m| Some(m.minutes))
        );
        let steps = format!(
            "{} → {}",
            avg(Side::Baseline, &|m| m.turns),
            avg(Side::Candidate, &|m| m.turns)
        );
        for t in &v.targets {
            let (a, b) = (t.baseline.tally(), t.candidate.tally());
            let score = if a.rate() == b.rate() {
                pct(a.rate())
            } else {
                format!("{} → {}", pct(a.rate()), pct(b.rate()))
            };
            out.push_str(&format!(
                "| {} | {score} | {:+.0} pp | p = {:.2}{} | {} | {minutes} | {steps} |\n",
                t.name,
                t.delta * 100.0,
                t.p_regression.value,
                if t.regressed { " **regressed**" } else { "" },
                flag_text(t),
            ));
        }
        if !self.checks.is_empty() {
            out.push_str("\n#### Failed checks\n\n| Task | Check | Failed |\n|---|---|---|\n");
            for c in &self.checks {
                let na = self.runs.iter().filter(|m| m.arm == Side::Baseline).count();
                let nb = self
                    .runs
                    .iter()
                    .filter(|m| m.arm == Side::Candidate)
                    .count();
                out.push_str(&format!(
                    "| {} | {} | {}/{na} → {}/{nb}{} |\n",
                    c.target,
                    c.check,
                    c.baseline,
                    c.candidate,
                    if c.new_in_candidate { " (new)" } else { "" }
                ));
            }
        }
        if !self.signatures.is_empty() {
            out.push_str(
                "\n#### Failure signatures\n\n| Task | Signature | First change | Runs | |\n|---|---|---|---|---|\n",
            );
            for g in &self.signatures {
                let slots: Vec<&str> = g
                    .baseline
                    .iter()
                    .chain(&g.candidate)
                    .map(String::as_str)
                    .collect();
                out.push_str(&format!(
                    "| {} | `{}` | {} | {} | {} |\n",
                    g.target,
                    g.id,
                    g.summary.replace('|', "\\|"),
                    slots.join(" "),
                    if g.baseline.is_empty() {
                        "new in B"
                    } else {
                        "seen in A"
                    }
                ));
            }
        }
        out
    }

    /// JUnit XML: one test case per target (failure when regressed, skipped when untestable)
    /// and one for the run level.
    pub fn to_junit(&self) -> String {
        use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
        let mut suite = TestSuite::new(format!("patchdiff compare {}", self.comparison));
        for t in &self.verdict.targets {
            let status = if t.regressed {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!(
                    "regressed: {}/{} → {}/{}, p = {:.4}",
                    t.baseline.passed,
                    t.baseline.tally().runs,
                    t.candidate.passed,
                    t.candidate.tally().runs,
                    t.p_regression.value
                ));
                s
            } else if !t.testable {
                let mut s = TestCaseStatus::skipped();
                s.set_message("untestable at this N (Tarone)");
                s
            } else {
                TestCaseStatus::success()
            };
            let mut case = TestCase::new(t.name.clone(), status);
            case.set_classname("target");
            suite.add_test_case(case);
        }
        let run_regressed = self
            .verdict
            .run_level
            .as_ref()
            .is_some_and(|r| r.p_regression.value <= self.alpha);
        let status = if run_regressed {
            TestCaseStatus::non_success(NonSuccessKind::Failure)
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new("targets passed per run", status);
        case.set_classname("run_level");
        suite.add_test_case(case);
        let mut report = Report::new("patchdiff compare");
        report.add_test_suite(suite);
        report.to_string().unwrap_or_default()
    }

    /// Tidy rows for a dataframe: one per (run, target).
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "arm,slot,run,attempts,target,class,failing_checks,minutes,turns,tool_calls,tool_errors,tokens_in,cache_read,cache_write,tokens_out,cost_usd\n",
        );
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
        for m in &self.runs {
            for (i, t) in self.verdict.targets.iter().enumerate() {
                let class = match m.outcomes.get(i) {
                    Some(Outcome::Pass) => "pass",
                    Some(Outcome::Fail) => "FAIL",
                    Some(Outcome::InfraError) => "infra_error",
                    Some(Outcome::Flaky) => "flaky",
                    None => "",
                };
                let checks = m
                    .failing_checks
                    .get(&t.name)
                    .map(|c| c.join(";"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{},{},{},{},{},{class},{},{},{},{},{},{},{},{},{},{}\n",
                    m.arm.name(),
                    m.slot,
                    m.run_id,
                    m.attempts,
                    csv_field(&t.name),
                    csv_field(&checks),
                    m.minutes,
                    opt(m.turns),
                    opt(m.tool_calls),
                    m.tool_errors,
                    opt(m.tokens_in),
                    opt(m.cache_read),
                    opt(m.cache_write),
                    opt(m.tokens_out),
                    opt(m.cost_usd),
                ));
            }
        }
        out
    }

    /// `report.json`'s content.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

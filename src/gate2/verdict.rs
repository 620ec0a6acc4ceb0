//! The gate-2 verdict (GATE2 §4.5, §4.8): a pure function from a typed
//! per-run / per-target outcome table to one of INVALID, INCOMPLETE, REGRESSED, IMPROVED,
//! UNCHANGED — ordered rules, first match wins — with the per-target and run-level statistics
//! behind it, and a verdict line that always states what the design could have detected. The
//! line never says "no regression": an unchanged verdict is a statement about sensitivity.
//!
//! Exit codes: 0 unchanged or improved, 1 regressed, 2 usage or gate closed
//! (not a verdict: the CLI's), 3 invalid or incomplete.

use serde::Serialize;

use super::plan::Plan;
use super::power::{PowerError, Sensitivity, flag_threshold};
use super::stats::{self, Interval, Probability, StatsError, Tally, TaroneInput, Z_95_TWO_SIDED};

/// Exit code: UNCHANGED or IMPROVED.
pub const EXIT_UNCHANGED: i32 = 0;
/// Exit code: REGRESSED.
pub const EXIT_REGRESSED: i32 = 1;
/// Exit code: usage error or gate 2 closed (the CLI's; no verdict is reached).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: INVALID or INCOMPLETE.
pub const EXIT_INVALID: i32 = 3;

/// Share of a target's runs (both arms) that may be `flaky` before the target is INVALID
/// ("fix the check", GATE2 §4.5): at or above this it is.
pub const MAX_FLAKY_SHARE: f64 = 0.2;

/// Two-sided level of the "exclusions differ by arm" Fisher test (GATE2 §4.5).
pub const EXCLUSION_BY_ARM_ALPHA: f64 = 0.05;

/// Which arm a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Arm A.
    Baseline,
    /// Arm B.
    Candidate,
}

impl Side {
    /// `baseline` or `candidate`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Candidate => "candidate",
        }
    }
}

/// One (run, target) outcome (GATE2 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The deciding checks passed on every repeat and the controls held.
    Pass,
    /// Export wrong, a check failed, or the agent's run ended after acting (timeout, max
    /// turns, host crash): a failure in the 2×2 table.
    Fail,
    /// A control did not hold or the check could not start: excluded, counted, capped.
    InfraError,
    /// Re-judgements of the same bytes disagreed: excluded, counted, capped.
    Flaky,
}

impl Outcome {
    fn excluded(self) -> bool {
        matches!(self, Self::InfraError | Self::Flaky)
    }
}

/// A critical behavioral invariant (expected count 0, so one occurrence decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invariant {
    /// The agent host's seal was broken.
    AgentSeal,
    /// The agent reached a full-profile tool.
    FullProfileTool,
    /// Journal replay did not reproduce the export.
    ReplayMismatch,
    /// An acknowledged edit was lost.
    AcknowledgedEditLost,
}

impl Invariant {
    fn describe(self) -> &'static str {
        match self {
            Self::AgentSeal => "agent seal broken",
            Self::FullProfileTool => "a full-profile tool reached by the agent",
            Self::ReplayMismatch => "journal replay ≠ export",
            Self::AcknowledgedEditLost => "an acknowledged edit lost",
        }
    }
}

/// One broken invariant in one run, with what showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Breach {
    /// Which invariant.
    pub invariant: Invariant,
    /// Where it showed (file, line, tool name, …), for the reason line.
    pub detail: String,
}

/// One member run of the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    /// Slot id (`A-01`, `B-07`, …).
    pub id: String,
    /// Its arm.
    pub side: Side,
    /// What `patchdiff verify` found wrong with it (empty: it verified).
    pub verify_problems: Vec<String>,
    /// Critical invariants it broke.
    pub breaches: Vec<Breach>,
    /// One outcome per target, in [`OutcomeTable::targets`] order.
    pub outcomes: Vec<Outcome>,
}

/// Everything the verdict is a function of: the targets, the member runs in time order, and
/// what the caller found about the comparison as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutcomeTable {
    /// Target names, in report order.
    pub targets: Vec<String>,
    /// Member runs, in time order.
    pub runs: Vec<RunRecord>,
    /// Comparison-level integrity problems: plan seal mismatch, an arm not homogeneous, an
    /// undeclared field differing between arms (the caller checks them from manifests).
    pub integrity_problems: Vec<String>,
    /// Why the matrix stopped before N runs per arm (budget or time), if it did.
    pub stopped: Option<String>,
}

/// The plan's decision parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rules {
    /// Runs per arm the comparison must have (the plan's `runs`, or `extend_to` once taken).
    pub runs: u32,
    /// Family-wise one-sided α.
    pub alpha: f64,
    /// Whether the run-level permutation test decides too.
    pub run_level: bool,
    /// Largest excluded share per arm and target.
    pub max_excluded: f64,
    /// Fewest valid runs per arm and target.
    pub min_valid: u32,
    /// The matrix stopped early because the decision was settled
    /// ([`super::curtail::settled`]): arms with fewer than `runs` runs are then complete.
    pub curtailed: bool,
}

impl Rules {
    /// The rules of `plan` before any extension.
    pub fn of(plan: &Plan) -> Self {
        Self {
            runs: plan.runs,
            alpha: plan.alpha,
            run_level: plan.run_level,
            max_excluded: plan.max_excluded,
            min_valid: plan.min_valid_runs(),
            curtailed: false,
        }
    }
}

/// The verdict's kind, in rule order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VerdictKind {
    /// Evidence integrity failed; nothing is concluded.
    Invalid,
    /// Budget or time ran out before N runs per arm.
    Incomplete,
    /// A critical invariant broke in a candidate run, or a target or the run level rejected.
    Regressed,
    /// An improvement test rejected and nothing regressed.
    Improved,
    /// Nothing moved beyond what the design can tell apart.
    Unchanged,
}

impl VerdictKind {
    /// The process exit code: 0 unchanged/improved, 1 regressed, 3 invalid/incomplete.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Unchanged | Self::Improved => EXIT_UNCHANGED,
            Self::Regressed => EXIT_REGRESSED,
            Self::Invalid | Self::Incomplete => EXIT_INVALID,
        }
    }

    /// The upper-case word the report prints.
    pub fn word(self) -> &'static str {
        match self {
            Self::Invalid => "INVALID",
            Self::Incomplete => "INCOMPLETE",
            Self::Regressed => "REGRESSED",
            Self::Improved => "IMPROVED",
            Self::Unchanged => "UNCHANGED",
        }
    }
}

/// One arm's counts for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ArmCounts {
    /// `pass` outcomes.
    pub passed: u32,
    /// `FAIL` outcomes.
    pub failed: u32,
    /// `infra_error` outcomes (excluded).
    pub infra_error: u32,
    /// `flaky` outcomes (excluded).
    pub flaky: u32,
}

impl ArmCounts {
    /// Runs counted (valid + excluded).
    pub fn runs(self) -> u32 {
        self.passed + self.failed + self.infra_error + self.flaky
    }
    /// Excluded runs.
    pub fn excluded(self) -> u32 {
        self.infra_error + self.flaky
    }
    /// The valid tally, k of n.
    pub fn tally(self) -> Tally {
        Tally::new(self.passed, self.passed + self.failed)
    }
}

/// The statistics of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetResult {
    /// Target name.
    pub name: String,
    /// Arm A counts.
    pub baseline: ArmCounts,
    /// Arm B counts.
    pub candidate: ArmCounts,
    /// Δ = p̂_B − p̂_A (proportion).
    pub delta: f64,
    /// Newcombe 95 % interval for Δ (descriptive).
    pub ci: Interval,
    /// One-sided Fisher p for regression.
    pub p_regression: Probability,
    /// One-sided Fisher p for improvement.
    pub p_improvement: Probability,
    /// Whether the regression test could reject at α/K (Tarone).
    pub testable: bool,
    /// Rejected for regression at α/K.
    pub regressed: bool,
    /// Rejected for improvement at the improvement family's α/K.
    pub improved: bool,
    /// The largest candidate count that would be flagged given the baseline, at α/K.
    pub flagged_at: Option<u32>,
}

/// The run-level permutation test's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunLevelResult {
    /// Runs per arm that entered (runs with an excluded target drop out).
    pub baseline_runs: u32,
    /// Candidate runs that entered.
    pub candidate_runs: u32,
    /// Runs left out because a target was excluded in them.
    pub left_out: u32,
    /// Mean targets passed per run, A.
    pub baseline_mean: f64,
    /// Mean targets passed per run, B.
    pub candidate_mean: f64,
    /// Exact permutation p, candidate lower.
    pub p_regression: Probability,
    /// Exact permutation p, candidate higher.
    pub p_improvement: Probability,
}

/// Tarone's K and level for one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Family {
    /// K.
    pub k: u32,
    /// α/K.
    pub level: f64,
}

/// The verdict with everything behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The verdict.
    pub kind: VerdictKind,
    /// Its exit code ([`VerdictKind::exit_code`]).
    pub exit_code: i32,
    /// The verdict line: the word, the deciding reason, and what the design could detect.
    pub line: String,
    /// Every reason for the verdict (all INVALID problems, all rejections, …).
    pub reasons: Vec<String>,
    /// What the design could have detected.
    pub sensitivity: Sensitivity,
    /// The regression family (Tarone over the targets).
    pub regression: Family,
    /// The improvement family.
    pub improvement: Family,
    /// Per target, in table order.
    pub targets: Vec<TargetResult>,
    /// The run-level test (`None` with a reason in `reasons` when it could not be computed).
    pub run_level: Option<RunLevelResult>,
}

/// A table the verdict cannot be computed from (a caller's bug, not a finding).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerdictError {
    /// No targets.
    #[error("the outcome table has no targets")]
    NoTargets,
    /// A run whose outcome count differs from the target count.
    #[error("run {run}: {got} outcomes for {expected} targets")]
    OutcomeCount {
        /// Run id.
        run: String,
        /// Outcomes given.
        got: usize,
        /// Targets.
        expected: usize,
    },
    /// Two runs with one id.
    #[error("run id {0} appears twice")]
    DuplicateRun(String),
    /// The rules cannot be tabulated.
    #[error(transparent)]
    Power(#[from] PowerError),
    /// A statistic failed.
    #[error(transparent)]
    Stats(#[from] StatsError),
}

fn fmt_p(p: f64) -> String {
    if p < 0.0001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

/// Decides the comparison in `table` under `rules` (GATE2 §4.8, first match wins):
/// 1. INVALID — integrity problems, a member run failing verify, a critical invariant broken
///    in a baseline run, more runs than planned, exclusions over the cap (> `max_excluded` of
///    an arm's runs, or fewer than `min_valid` valid in a complete arm) or differing by arm
///    (two-sided Fisher p < 0.05), a target flaky in ≥ 20 % of its runs;
/// 2. INCOMPLETE — the matrix stopped, or an arm has fewer than `rules.runs` runs;
/// 3. REGRESSED — a critical invariant broken in a candidate run, a target whose one-sided
///    Fisher p ≤ α/K (Tarone over the targets), or the run-level p ≤ α;
/// 4. IMPROVED — the mirrors of (3b) or (3c) reject;
/// 5. UNCHANGED.
///
/// Statistics are computed for every verdict (partial tables for INVALID and INCOMPLETE).
/// Errors: a malformed table ([`VerdictError`]); rules outside what [`Sensitivity::of`]
/// accepts.
pub fn decide(table: &OutcomeTable, rules: &Rules) -> Result<Verdict, VerdictError> {
    check_shape(table)?;
    let counts = count(table);
    let targets_stats = target_statistics(table, &counts, rules)?;
    let (targets, regression, improvement) = targets_stats;
    let mut notes = Vec::new();
    let run_level = match run_level_statistics(table) {
        Ok(r) => Some(r),
        Err(e) => {
            notes.push(format!("run-level test not computed: {e}"));
            None
        }
    };
    let sensitivity = Sensitivity::of(rules.runs, regression.level)?;

    let invalid = invalid_reasons(table, &counts, &targets, rules)?;
    let (kind, mut reasons) = if !invalid.is_empty() {
        (VerdictKind::Invalid, invalid)
    } else if let Some(incomplete) = incomplete_reasons(table, rules) {
        (VerdictKind::Incomplete, incomplete)
    } else {
        let regressed = regression_reasons(table, &targets, run_level.as_ref(), rules, regression);
        if !regressed.is_empty() {
            (VerdictKind::Regressed, regressed)
        } else {
            let improved = improvement_reasons(&targets, run_level.as_ref(), rules, improvement);
            if improved.is_empty() {
                (VerdictKind::Unchanged, Vec::new())
            } else {
                (VerdictKind::Improved, improved)
            }
        }
    };
    let mut line = verdict_line(kind, &reasons, &sensitivity);
    if rules.curtailed && kind == VerdictKind::Unchanged {
        let per_arm = |side: Side| table.runs.iter().filter(|r| r.side == side).count();
        line.push_str(&format!(
            " Curtailed after {} + {} runs: no way the remaining runs of {} per arm could \
             turn out would change any decision (GATE2 §3.7).",
            per_arm(Side::Baseline),
            per_arm(Side::Candidate),
            rules.runs
        ));
    }
    reasons.extend(notes);
    Ok(Verdict {
        kind,
        exit_code: kind.exit_code(),
        line,
        reasons,
        sensitivity,
        regression,
        improvement,
        targets,
        run_level,
    })
}

fn check_shape(table: &OutcomeTable) -> Result<(), VerdictError> {
    if table.targets.is_empty() {
        return Err(VerdictError::NoTargets);
    }
    let mut ids: Vec<&str> = Vec::with_capacity(table.runs.len());
    for run in &table.runs {
        if run.outcomes.len() != table.targets.len() {
            return Err(VerdictError::OutcomeCount {
                run: run.id.clone(),
                got: run.outcomes.len(),
                expected: table.targets.len(),
            });
        }
        if ids.contains(&run.id.as_str()) {
            return Err(VerdictError::DuplicateRun(run.id.clone()));
        }
        ids.push(&run.id);
    }
    Ok(())
}

/// Per target: (baseline, candidate) counts.
fn count(table: &OutcomeTable) -> Vec<(ArmCounts, ArmCounts)> {
    let mut counts = vec![(ArmCounts::default(), ArmCounts::default()); table.targets.len()];
    for run in &table.runs {
        for (t, outcome) in run.outcomes.iter().enumerate() {
            let arm = match run.side {
                Side::Baseline => &mut counts[t].0,
                Side::Candidate => &mut counts[t].1,
            };
            match outcome {
                Outcome::Pass => arm.passed += 1,
                Outcome::Fail => arm.failed += 1,
                Outcome::InfraError => arm.infra_error += 1,
                Outcome::Flaky => arm.flaky += 1,
            }
        }
    }
    counts
}

fn target_statistics(
    table: &OutcomeTable,
    counts: &[(ArmCounts, ArmCounts)],
    rules: &Rules,
) -> Result<(Vec<TargetResult>, Family, Family), VerdictError> {
    let mut regr_inputs = Vec::new();
    let mut impr_inputs = Vec::new();
    let mut partial = Vec::new();
    for (name, &(a, b)) in table.targets.iter().zip(counts) {
        let (ta, tb) = (a.tally(), b.tally());
        let p_regression = stats::fisher_regression(ta, tb)?;
        let p_improvement = stats::fisher_improvement(ta, tb)?;
        regr_inputs.push(TaroneInput {
            p: p_regression.value,
            floor: stats::fisher_regression_floor(ta, tb)?.value,
        });
        impr_inputs.push(TaroneInput {
            p: p_improvement.value,
            floor: stats::fisher_improvement_floor(ta, tb)?.value,
        });
        partial.push((name, a, b, ta, tb, p_regression, p_improvement));
    }
    let regr = stats::tarone(&regr_inputs, rules.alpha);
    let impr = stats::tarone(&impr_inputs, rules.alpha);
    let targets = partial
        .into_iter()
        .enumerate()
        .map(|(i, (name, a, b, ta, tb, p_regression, p_improvement))| {
            Ok(TargetResult {
                name: name.clone(),
                baseline: a,
                candidate: b,
                delta: tb.rate() - ta.rate(),
                ci: stats::newcombe_difference(ta, tb, Z_95_TWO_SIDED)?,
                p_regression,
                p_improvement,
                testable: regr.testable[i],
                regressed: regr.rejected[i],
                improved: impr.rejected[i],
                flagged_at: flag_threshold(ta, tb.runs, regr.level)?,
            })
        })
        .collect::<Result<Vec<_>, StatsError>>()?;
    Ok((
        targets,
        Family {
            k: regr.k,
            level: regr.level,
        },
        Family {
            k: impr.k,
            level: impr.level,
        },
    ))
}

fn run_level_statistics(table: &OutcomeTable) -> Result<RunLevelResult, StatsError> {
    let (mut a, mut b, mut left_out) = (Vec::new(), Vec::new(), 0);
    for run in &table.runs {
        if run.outcomes.iter().any(|o| o.excluded()) {
            left_out += 1;
            continue;
        }
        let score = run.outcomes.iter().filter(|&&o| o == Outcome::Pass).count() as u32;
        match run.side {
            Side::Baseline => a.push(score),
            Side::Candidate => b.push(score),
        }
    }
    let r = stats::run_level_permutation(&a, &b)?;
    Ok(RunLevelResult {
        baseline_runs: a.len() as u32,
        candidate_runs: b.len() as u32,
        left_out,
        baseline_mean: r.baseline_mean,
        candidate_mean: r.candidate_mean,
        p_regression: r.p_regression,
        p_improvement: r.p_improvement,
    })
}

fn invalid_reasons(
    table: &OutcomeTable,
    counts: &[(ArmCounts, ArmCounts)],
    targets: &[TargetResult],
    rules: &Rules,
) -> Result<Vec<String>, VerdictError> {
    let mut out: Vec<String> = table.integrity_problems.clone();
    for run in &table.runs {
        for problem in &run.verify_problems {
            out.push(format!("run {} fails verify: {problem}", run.id));
        }
        if run.side == Side::Baseline {
            for breach in &run.breaches {
                out.push(format!(
                    "baseline run {}: {} ({}) — the baseline itself is broken",
                    run.id,
                    breach.invariant.describe(),
                    breach.detail
                ));
            }
        }
    }
    for side in [Side::Baseline, Side::Candidate] {
        let runs = table.runs.iter().filter(|r| r.side == side).count() as u32;
        if runs > rules.runs {
            out.push(format!(
                "the {} arm has {runs} runs; the plan has {}",
                side.name(),
                rules.runs
            ));
        }
    }
    for (target, &(a, b)) in targets.iter().zip(counts) {
        for (side, arm) in [(Side::Baseline, a), (Side::Candidate, b)] {
            let runs = arm.runs();
            if runs > 0 && f64::from(arm.excluded()) > rules.max_excluded * f64::from(runs) {
                out.push(format!(
                    "{}: {} of {runs} {} runs excluded (infra_error {}, flaky {}); the plan allows \
                     at most {:.0} %",
                    target.name,
                    arm.excluded(),
                    side.name(),
                    arm.infra_error,
                    arm.flaky,
                    rules.max_excluded * 100.0
                ));
            }
            if runs >= rules.runs && arm.tally().runs < rules.min_valid {
                out.push(format!(
                    "{}: {} valid {} runs; the plan needs at least {}",
                    target.name,
                    arm.tally().runs,
                    side.name(),
                    rules.min_valid
                ));
            }
        }
        if a.excluded() + b.excluded() > 0 {
            let p = stats::fisher_two_sided(
                Tally::new(a.excluded(), a.runs()),
                Tally::new(b.excluded(), b.runs()),
            )?
            .value;
            if p < EXCLUSION_BY_ARM_ALPHA {
                out.push(format!(
                    "{}: exclusions differ by arm (baseline {} of {}, candidate {} of {}; \
                     two-sided Fisher p = {})",
                    target.name,
                    a.excluded(),
                    a.runs(),
                    b.excluded(),
                    b.runs(),
                    fmt_p(p)
                ));
            }
        }
        let all = a.runs() + b.runs();
        let flaky = a.flaky + b.flaky;
        if all > 0 && f64::from(flaky) >= MAX_FLAKY_SHARE * f64::from(all) {
            out.push(format!(
                "{}: flaky in {flaky} of {all} runs (≥ {:.0} %): fix the check",
                target.name,
                MAX_FLAKY_SHARE * 100.0
            ));
        }
    }
    Ok(out)
}

fn incomplete_reasons(table: &OutcomeTable, rules: &Rules) -> Option<Vec<String>> {
    let mut out = Vec::new();
    if let Some(why) = &table.stopped {
        out.push(format!("stopped before {} runs per arm: {why}", rules.runs));
    }
    for side in [Side::Baseline, Side::Candidate] {
        let runs = table.runs.iter().filter(|r| r.side == side).count() as u32;
        if runs < rules.runs && !rules.curtailed {
            out.push(format!(
                "the {} arm has {runs} of {} runs",
                side.name(),
                rules.runs
            ));
        }
    }
    (!out.is_empty()).then_some(out)
}

fn tally_text(t: Tally) -> String {
    format!("{}/{}", t.passed, t.runs)
}

fn regression_reasons(
    table: &OutcomeTable,
    targets: &[TargetResult],
    run_level: Option<&RunLevelResult>,
    rules: &Rules,
    family: Family,
) -> Vec<String> {
    let mut out = Vec::new();
    for run in table.runs.iter().filter(|r| r.side == Side::Candidate) {
        for breach in &run.breaches {
            out.push(format!(
                "candidate run {}: {} ({})",
                run.id,
                breach.invariant.describe(),
                breach.detail
            ));
        }
    }
    for t in targets.iter().filter(|t| t.regressed) {
        out.push(format!(
            "{} {} → {}, one-sided Fisher p = {} ≤ α/K = {} (K = {})",
            t.name,
            tally_text(t.baseline.tally()),
            tally_text(t.candidate.tally()),
            fmt_p(t.p_regression.value),
            fmt_p(family.level),
            family.k
        ));
    }
    if rules.run_level
        && let Some(r) = run_level
        && r.p_regression.value <= rules.alpha
    {
        out.push(format!(
            "run level: targets passed per run {:.2} → {:.2}, exact permutation p = {} ≤ α = {}",
            r.baseline_mean,
            r.candidate_mean,
            fmt_p(r.p_regression.value),
            rules.alpha
        ));
    }
    out
}

fn improvement_reasons(
    targets: &[TargetResult],
    run_level: Option<&RunLevelResult>,
    rules: &Rules,
    family: Family,
) -> Vec<String> {
    let mut out: Vec<String> = targets
        .iter()
        .filter(|t| t.improved)
        .map(|t| {
            format!(
                "{} {} → {}, one-sided Fisher p = {} ≤ α/K = {} (K = {})",
                t.name,
                tally_text(t.baseline.tally()),
                tally_text(t.candidate.tally()),
                fmt_p(t.p_improvement.value),
                fmt_p(family.level),
                family.k
            )
        })
        .collect();
    if rules.run_level
        && let Some(r) = run_level
        && r.p_improvement.value <= rules.alpha
    {
        out.push(format!(
            "run level: targets passed per run {:.2} → {:.2}, exact permutation p = {} ≤ α = {}",
            r.baseline_mean,
            r.candidate_mean,
            fmt_p(r.p_improvement.value),
            rules.alpha
        ));
    }
    out
}

fn verdict_line(kind: VerdictKind, reasons: &[String], sensitivity: &Sensitivity) -> String {
    let first = |reasons: &[String]| match reasons.len() {
        0 => String::new(),
        1 => reasons[0].clone(),
        n => format!("{} (and {} more)", reasons[0], n - 1),
    };
    let seen = sensitivity.sentence();
    let n = sensitivity.runs;
    match kind {
        VerdictKind::Invalid => format!(
            "INVALID — {}; nothing is concluded. Had the evidence held, {seen}",
            first(reasons)
        ),
        VerdictKind::Incomplete => format!(
            "INCOMPLETE — {}; nothing is concluded. Once complete, {seen}",
            first(reasons)
        ),
        VerdictKind::Regressed => format!("REGRESSED — {}; {seen}", first(reasons)),
        VerdictKind::Improved => format!("IMPROVED — {}; {seen}", first(reasons)),
        VerdictKind::Unchanged => format!(
            "UNCHANGED — no target moved beyond what {n} runs per arm can tell apart; {seen}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGETS: [&str; 5] = ["calendar", "chess", "incidents", "limiter", "worker-logs"];

    /// A run from a compact row: `'p'` pass, `'F'` fail, `'i'` infra_error, `'f'` flaky, one
    /// letter per target.
    fn run(side: Side, index: usize, row: &str) -> RunRecord {
        let prefix = if side == Side::Baseline { "A" } else { "B" };
        RunRecord {
            id: format!("{prefix}-{:02}", index + 1),
            side,
            verify_problems: vec![],
            breaches: vec![],
            outcomes: row
                .chars()
                .map(|c| match c {
                    'p' => Outcome::Pass,
                    'F' => Outcome::Fail,
                    'i' => Outcome::InfraError,
                    'f' => Outcome::Flaky,
                    other => panic!("unknown outcome letter {other:?}"),
                })
                .collect(),
        }
    }

    fn table(baseline: &[&str], candidate: &[&str]) -> OutcomeTable {
        let mut runs = Vec::new();
        // Interleaved as AB blocks.
        for i in 0..baseline.len().max(candidate.len()) {
            if let Some(row) = baseline.get(i) {
                runs.push(run(Side::Baseline, i, row));
            }
            if let Some(row) = candidate.get(i) {
                runs.push(run(Side::Candidate, i, row));
            }
        }
        OutcomeTable {
            targets: TARGETS.iter().map(|t| (*t).to_owned()).collect(),
            runs,
            integrity_problems: vec![],
            stopped: None,
        }
    }

    fn rules(runs: u32) -> Rules {
        Rules {
            runs,
            alpha: 0.05,
            run_level: true,
            max_excluded: 0.2,
            min_valid: (runs * 4).div_ceil(5),
            curtailed: false,
        }
    }

    /// `n` rows: `bad` of them `bad_row`, the rest all-pass.
    fn rows(n: usize, bad: usize, bad_row: &'static str) -> Vec<&'static str> {
        (0..n)
            .map(|i| if i < bad { bad_row } else { "ppppp" })
            .collect()
    }

    /// `runs` per arm where target t passes in the first `passed[t]` runs of its arm.
    fn from_counts(runs: usize, baseline: [usize; 5], candidate: [usize; 5]) -> OutcomeTable {
        let row = |passed: [usize; 5], i: usize| -> String {
            passed
                .iter()
                .map(|&k| if i < k { 'p' } else { 'F' })
                .collect()
        };
        let a: Vec<String> = (0..runs).map(|i| row(baseline, i)).collect();
        let b: Vec<String> = (0..runs).map(|i| row(candidate, i)).collect();
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        table(&a, &b)
    }

    struct Case {
        name: &'static str,
        table: OutcomeTable,
        rules: Rules,
        kind: VerdictKind,
        /// Substrings the verdict line must contain.
        line_has: &'static [&'static str],
    }

    fn cases() -> Vec<Case> {
        let all = rows(10, 0, "");
        let mut cases = vec![
            Case {
                name: "A/A, every run perfect",
                table: table(&all, &all),
                rules: rules(10),
                kind: VerdictKind::Unchanged,
                line_has: &[
                    "UNCHANGED — no target moved beyond what 10 runs per arm can tell apart",
                    "a target at 10/10 is flagged only at ≤ 6/10",
                    "≈ 52 %",
                ],
            },
            Case {
                name: "chess wrong in 4 of 10 candidate runs",
                table: table(&all, &rows(10, 4, "pFppp")),
                rules: rules(10),
                kind: VerdictKind::Regressed,
                line_has: &[
                    "REGRESSED — chess 10/10 → 6/10, one-sided Fisher p = 0.0433 ≤ α/K = 0.0500 (K = 1)",
                ],
            },
            Case {
                name: "one crashed candidate session is one run, not five failures",
                table: table(&all, &rows(10, 1, "FFFFF")),
                rules: rules(10),
                kind: VerdictKind::Unchanged,
                line_has: &["UNCHANGED"],
            },
            Case {
                name: "every candidate run loses a different target: only the run level sees it",
                table: table(
                    &all,
                    &[
                        "Fpppp", "pFppp", "ppFpp", "pppFp", "ppppF", "Fpppp", "pFppp", "ppFpp",
                        "pppFp", "ppppF",
                    ],
                ),
                rules: rules(10),
                kind: VerdictKind::Regressed,
                line_has: &["REGRESSED — run level: targets passed per run 5.00 → 4.00"],
            },
            Case {
                name: "the improvement mirror",
                table: table(&rows(10, 4, "pFppp"), &all),
                rules: rules(10),
                kind: VerdictKind::Improved,
                line_has: &["IMPROVED — chess 6/10 → 10/10, one-sided Fisher p = 0.0433"],
            },
            Case {
                name: "Tarone spends α on two testable targets: 10/10 → 6/10 is not enough",
                // GATE2 §3.5: [(10,6), (9,8), (8,7), (10,9), (9,9)] → K = 2.
                table: from_counts(10, [10, 9, 8, 10, 9], [6, 8, 7, 9, 9]),
                rules: Rules {
                    run_level: false,
                    ..rules(10)
                },
                kind: VerdictKind::Unchanged,
                line_has: &["a target at 10/10 is flagged only at ≤ 5/10"],
            },
            Case {
                name: "budget ran out",
                table: OutcomeTable {
                    stopped: Some("max_cost_usd 40 reached".to_owned()),
                    ..table(&rows(7, 0, ""), &rows(6, 0, ""))
                },
                rules: rules(10),
                kind: VerdictKind::Incomplete,
                line_has: &[
                    "INCOMPLETE — stopped before 10 runs per arm: max_cost_usd 40 reached (and 2 more)",
                    "Once complete, at 10 runs per arm",
                ],
            },
            Case {
                name: "an arm short of runs without a stop reason",
                table: table(&all, &rows(9, 0, "")),
                rules: rules(10),
                kind: VerdictKind::Incomplete,
                line_has: &["INCOMPLETE — the candidate arm has 9 of 10 runs"],
            },
            Case {
                name: "infra errors over the cap",
                table: table(&all, &rows(10, 3, "ppipp")),
                rules: rules(10),
                kind: VerdictKind::Invalid,
                line_has: &[
                    "INVALID — incidents: 3 of 10 candidate runs excluded (infra_error 3, flaky 0); \
                     the plan allows at most 20 % (and 1 more)",
                    "Had the evidence held, at 10 runs per arm",
                ],
            },
            Case {
                name: "exclusions within the cap but arm-dependent",
                table: table(&rows(50, 0, ""), &rows(50, 8, "ppppi")),
                rules: rules(50),
                kind: VerdictKind::Invalid,
                line_has: &[
                    "INVALID — worker-logs: exclusions differ by arm (baseline 0 of 50, candidate 8 of 50",
                ],
            },
            Case {
                name: "a flaky check",
                table: table(&rows(10, 2, "pfppp"), &rows(10, 2, "pfppp")),
                rules: rules(10),
                kind: VerdictKind::Invalid,
                line_has: &["INVALID — chess: flaky in 4 of 20 runs (≥ 20 %): fix the check"],
            },
        ];
        // Evidence integrity outranks a regression.
        let mut tampered = table(&all, &rows(10, 4, "pFppp"));
        tampered.runs[3].verify_problems =
            vec!["SHA256SUMS: export/chess.js digest differs".to_owned()];
        cases.push(Case {
            name: "a tampered member run",
            table: tampered,
            rules: rules(10),
            kind: VerdictKind::Invalid,
            line_has: &[
                "INVALID — run B-02 fails verify: SHA256SUMS: export/chess.js digest differs",
            ],
        });
        let mut undeclared = table(&all, &all);
        undeclared.integrity_problems =
            vec!["undeclared difference in agent.host_version: 2.0.14 vs 2.0.15".to_owned()];
        cases.push(Case {
            name: "arms not homogeneous",
            table: undeclared,
            rules: rules(10),
            kind: VerdictKind::Invalid,
            line_has: &["INVALID — undeclared difference in agent.host_version"],
        });
        let mut breach_b = table(&all, &all);
        breach_b.runs[5].breaches = vec![Breach {
            invariant: Invariant::FullProfileTool,
            detail: "patchdiff_export_target at observed.mcp.jsonl line 40".to_owned(),
        }];
        cases.push(Case {
            name: "a critical invariant broken in a candidate run",
            table: breach_b,
            rules: rules(10),
            kind: VerdictKind::Regressed,
            line_has: &["REGRESSED — candidate run B-03: a full-profile tool reached by the agent"],
        });
        let mut breach_a = table(&all, &all);
        breach_a.runs[4].breaches = vec![Breach {
            invariant: Invariant::ReplayMismatch,
            detail: "chess.js byte 120".to_owned(),
        }];
        cases.push(Case {
            name: "a critical invariant broken in a baseline run",
            table: breach_a,
            rules: rules(10),
            kind: VerdictKind::Invalid,
            line_has: &["INVALID — baseline run A-03: journal replay ≠ export (chess.js byte 120) — the baseline itself is broken"],
        });
        cases
    }

    #[test]
    fn verdict_rules_table() {
        for case in cases() {
            let v = decide(&case.table, &case.rules).unwrap();
            assert_eq!(v.kind, case.kind, "{}: {:#?}", case.name, v.reasons);
            for needle in case.line_has {
                assert!(
                    v.line.contains(needle),
                    "{}: {needle:?} not in {:?}",
                    case.name,
                    v.line
                );
            }
        }
    }

    #[test]
    fn every_verdict_line_states_its_sensitivity_and_never_says_no_regression() {
        for case in cases() {
            let v = decide(&case.table, &case.rules).unwrap();
            let line = v.line.to_lowercase();
            assert!(!line.contains("no regression"), "{}: {}", case.name, v.line);
            assert!(
                line.contains("runs per arm") && line.contains("is flagged only at ≤"),
                "{}: {}",
                case.name,
                v.line
            );
            assert!(
                v.reasons
                    .iter()
                    .all(|r| !r.to_lowercase().contains("no regression")),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn exit_codes_follow_the_issue() {
        assert_eq!(VerdictKind::Unchanged.exit_code(), 0);
        assert_eq!(VerdictKind::Improved.exit_code(), 0);
        assert_eq!(VerdictKind::Regressed.exit_code(), 1);
        assert_eq!(VerdictKind::Invalid.exit_code(), 3);
        assert_eq!(VerdictKind::Incomplete.exit_code(), 3);
        assert_eq!(EXIT_USAGE, 2);
        for case in cases() {
            let v = decide(&case.table, &case.rules).unwrap();
            assert_eq!(v.exit_code, case.kind.exit_code(), "{}", case.name);
        }
    }

    #[test]
    fn statistics_behind_the_regressed_verdict() {
        let all = rows(10, 0, "");
        let v = decide(&table(&all, &rows(10, 4, "pFppp")), &rules(10)).unwrap();
        let chess = &v.targets[1];
        assert_eq!(chess.name, "chess");
        assert_eq!(chess.p_regression.exact.unwrap().to_string(), "14/323");
        assert!(chess.testable && chess.regressed && !chess.improved);
        assert_eq!(chess.flagged_at, Some(6));
        assert!((chess.delta + 0.4).abs() < 1e-12);
        assert!((chess.ci.lower + 0.687_326_2).abs() < 1e-7);
        assert_eq!(v.regression, Family { k: 1, level: 0.05 });
        // Untestable targets are shown as such and never flagged.
        for t in v.targets.iter().filter(|t| t.name != "chess") {
            assert!(!t.testable && !t.regressed, "{}", t.name);
        }
        let run_level = v.run_level.unwrap();
        assert_eq!(
            (run_level.baseline_runs, run_level.candidate_runs),
            (10, 10)
        );
        assert!((run_level.candidate_mean - 4.6).abs() < 1e-12);
    }

    #[test]
    fn runs_with_an_excluded_target_leave_the_run_level_test() {
        let all = rows(10, 0, "");
        let v = decide(&table(&all, &rows(10, 1, "ppppi")), &rules(10)).unwrap();
        let r = v.run_level.unwrap();
        assert_eq!((r.baseline_runs, r.candidate_runs, r.left_out), (10, 9, 1));
        assert_eq!(v.targets[4].candidate.infra_error, 1);
        assert_eq!(v.targets[4].candidate.tally(), Tally::new(9, 9));
        assert_eq!(v.kind, VerdictKind::Unchanged);
    }

    #[test]
    fn run_level_off_in_the_plan_does_not_decide() {
        let all = rows(10, 0, "");
        let spread = [
            "Fpppp", "pFppp", "ppFpp", "pppFp", "ppppF", "Fpppp", "pFppp", "ppFpp", "pppFp",
            "ppppF",
        ];
        let off = Rules {
            run_level: false,
            ..rules(10)
        };
        let v = decide(&table(&all, &spread), &off).unwrap();
        assert_eq!(v.kind, VerdictKind::Unchanged);
        assert!(
            v.run_level.unwrap().p_regression.value < 0.05,
            "still reported"
        );
    }

    #[test]
    fn malformed_tables_are_errors_not_verdicts() {
        let mut t = table(&["ppppp"], &["ppppp"]);
        t.runs[1].outcomes.pop();
        assert_eq!(
            decide(&t, &rules(10)).unwrap_err().to_string(),
            "run B-01: 4 outcomes for 5 targets"
        );
        let mut t = table(&["ppppp"], &["ppppp"]);
        t.runs[1].id = "A-01".to_owned();
        assert_eq!(
            decide(&t, &rules(10)).unwrap_err(),
            VerdictError::DuplicateRun("A-01".to_owned())
        );
        let mut t = table(&[], &[]);
        t.targets.clear();
        assert_eq!(decide(&t, &rules(10)).unwrap_err(), VerdictError::NoTargets);
    }

    #[test]
    fn an_empty_arm_is_incomplete_with_the_run_level_test_noted() {
        let v = decide(&table(&rows(10, 0, ""), &[]), &rules(10)).unwrap();
        assert_eq!(v.kind, VerdictKind::Incomplete);
        assert!(v.run_level.is_none());
        assert!(
            v.reasons
                .iter()
                .any(|r| r.starts_with("run-level test not computed: candidate: no runs")),
            "{:?}",
            v.reasons
        );
    }
}

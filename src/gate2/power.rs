//! What a gate-2 design can detect (GATE2 §3.3, §4.7.5): for N runs
//! per arm and a level α, the exact rejection region of the one-sided Fisher regression test
//! (the flag threshold per baseline count: "a target at 10/10 is flagged only at ≤ 6/10"), its
//! exact power for true pass rates, the minimum detectable drop at 80 % power, the runs per arm
//! a drop needs, the failures a target needs before it is testable at all, and the "not worse
//! than" bound when both arms are perfect. `patchdiff compare power` prints [`PowerTable`].
//!
//! Power is an exact sum over the binomial laws of both arms' pass counts (no simulation);
//! the rejection region comes from the same [`stats::fisher_regression`] the verdict uses.

use serde::Serialize;

use super::stats::{
    self, StatsError, Tally, Z_95_ONE_SIDED, fisher_regression, fisher_regression_floor, ln_choose,
};

/// Fewest runs per arm a power table is computed for.
pub const MIN_RUNS: u32 = 2;
/// Most runs per arm a power table is computed for (a plan allows at most 100).
pub const MAX_RUNS: u32 = 200;

/// The target power the minimum detectable drop and the runs-needed figures use (80 %).
pub const TARGET_POWER: f64 = 0.8;

/// Baseline pass rates the table's power rows start from.
pub const BASELINE_RATES: [f64; 3] = [1.0, 0.9, 0.8];

/// True drops (in percentage points) the table's power rows show.
pub const DROPS_PP: [u32; 4] = [10, 20, 30, 40];

/// (baseline rate, candidate rate) pairs for the "runs per arm for 80 % power" row.
pub const RUNS_NEEDED_FOR: [(f64, f64); 4] = [(1.0, 0.9), (1.0, 0.8), (0.9, 0.7), (0.8, 0.6)];

/// A design that cannot be tabulated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PowerError {
    /// Runs per arm outside [`MIN_RUNS`]..=[`MAX_RUNS`].
    #[error("runs per arm {0}: accepted are {MIN_RUNS} to {MAX_RUNS}")]
    Runs(u32),
    /// α outside (0, 0.5].
    #[error("alpha {0}: accepted is a level above 0 and at most 0.5 (e.g. 0.05)")]
    Alpha(f64),
    /// A statistic failed (cannot happen for a validated design).
    #[error(transparent)]
    Stats(#[from] StatsError),
}

/// N runs per arm (both arms equal, as a plan has them) tested at one-sided level α per
/// testable target (α/K after Tarone's correction).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Design {
    /// Runs per arm.
    pub runs: u32,
    /// One-sided level per target.
    pub alpha: f64,
}

impl Design {
    /// A design of `runs` per arm at level `alpha`. Errors: runs outside
    /// [`MIN_RUNS`]..=[`MAX_RUNS`], alpha outside (0, 0.5] or not a number.
    pub fn new(runs: u32, alpha: f64) -> Result<Self, PowerError> {
        if !(MIN_RUNS..=MAX_RUNS).contains(&runs) {
            return Err(PowerError::Runs(runs));
        }
        if !(alpha > 0.0 && alpha <= 0.5) {
            return Err(PowerError::Alpha(alpha));
        }
        Ok(Self { runs, alpha })
    }
}

/// The largest candidate pass count c of `candidate_runs` with P_R(baseline, c) ≤ `level`
/// (the flag threshold, GATE2 §4.7.5), or `None` when even c = 0 is not flagged. P_R grows
/// with c, so this is a binary search. Errors: an invalid tally or too many runs.
pub fn flag_threshold(
    baseline: Tally,
    candidate_runs: u32,
    level: f64,
) -> Result<Option<u32>, StatsError> {
    let flagged = |c: u32| -> Result<bool, StatsError> {
        Ok(fisher_regression(baseline, Tally::new(c, candidate_runs))?.value <= level)
    };
    if !flagged(0)? {
        return Ok(None);
    }
    // Invariant: flagged(lo), !flagged(hi) or hi = n + 1.
    let (mut lo, mut hi) = (0u32, candidate_runs + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if flagged(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(lo))
}

/// The exact rejection region of a design: entry a (0..=N) is the flag threshold for a
/// baseline of a/N ([`flag_threshold`]), `None` where no candidate count is flagged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RejectionRegion {
    /// The design.
    pub design: Design,
    /// Per baseline pass count a = 0..=N: the largest flagged candidate count.
    pub flagged_at: Vec<Option<u32>>,
}

impl RejectionRegion {
    /// The region of `design` (N + 1 binary searches of Fisher tails).
    pub fn of(design: Design) -> Result<Self, StatsError> {
        let flagged_at = (0..=design.runs)
            .map(|a| flag_threshold(Tally::new(a, design.runs), design.runs, design.alpha))
            .collect::<Result<_, _>>()?;
        Ok(Self { design, flagged_at })
    }

    /// Exact power: P(flag) = Σ_a Bin(a; N, π_A) · P(Bin(N, π_B) ≤ t_a), for true pass rates
    /// `baseline_rate` and `candidate_rate` in [0, 1] (clamped).
    pub fn power(&self, baseline_rate: f64, candidate_rate: f64) -> f64 {
        let n = self.design.runs;
        let (pa, pb) = (
            baseline_rate.clamp(0.0, 1.0),
            candidate_rate.clamp(0.0, 1.0),
        );
        let cdf_b = binomial_cdf(n, pb);
        self.flagged_at
            .iter()
            .enumerate()
            .filter_map(|(a, t)| t.map(|t| binomial_pmf(n, a as u32, pa) * cdf_b[t as usize]))
            .sum::<f64>()
            .clamp(0.0, 1.0)
    }

    /// The minimum detectable drop from `baseline_rate` at `target_power`: the smallest d
    /// (a proportion, 0.48 = 48 pp) with power(π_A, π_A − d) ≥ target, found by bisection to
    /// 1e-9 (power falls monotonically as π_B rises); `None` when even π_B = 0 falls short.
    pub fn minimum_detectable_drop(&self, baseline_rate: f64, target_power: f64) -> Option<f64> {
        let pa = baseline_rate.clamp(0.0, 1.0);
        if self.power(pa, 0.0) < target_power {
            return None;
        }
        let (mut detected, mut missed) = (0.0_f64, pa);
        if self.power(pa, missed) >= target_power {
            return Some(0.0);
        }
        while missed - detected > 1e-9 {
            let mid = (detected + missed) / 2.0;
            if self.power(pa, mid) >= target_power {
                detected = mid;
            } else {
                missed = mid;
            }
        }
        Some(pa - detected)
    }

    /// The largest total number of failures over both arms with which a target cannot be
    /// flagged whatever the split (its Fisher floor exceeds α): "a target with ≤ 3 failures
    /// across both arms cannot be flagged at N = 10" (GATE2 §3.3).
    pub fn untestable_failures(&self) -> Result<u32, StatsError> {
        let n = self.design.runs;
        let mut f = 0;
        while f < n
            && fisher_regression_floor(Tally::new(n, n), Tally::new(n - f - 1, n))?.value
                > self.design.alpha
        {
            f += 1;
        }
        Ok(f)
    }
}

fn binomial_pmf(n: u32, k: u32, p: f64) -> f64 {
    if p <= 0.0 {
        return if k == 0 { 1.0 } else { 0.0 };
    }
    if p >= 1.0 {
        return if k == n { 1.0 } else { 0.0 };
    }
    (ln_choose(n, k) + f64::from(k) * p.ln() + f64::from(n - k) * (1.0 - p).ln()).exp()
}

/// P(Bin(n, p) ≤ c) for c = 0..=n.
fn binomial_cdf(n: u32, p: f64) -> Vec<f64> {
    let mut acc = 0.0;
    (0..=n)
        .map(|k| {
            acc += binomial_pmf(n, k, p);
            acc.min(1.0)
        })
        .collect()
}

/// The smallest runs per arm (within [`MIN_RUNS`]..=`max_runs`) at which one-sided Fisher at
/// `alpha` flags a true drop from `baseline_rate` to `candidate_rate` with at least
/// `target_power`. Power is not monotone in N (the test is discrete), so a larger N can dip
/// just below; this is the first N that reaches it. `None` if none up to `max_runs` does.
pub fn runs_needed(
    baseline_rate: f64,
    candidate_rate: f64,
    alpha: f64,
    target_power: f64,
    max_runs: u32,
) -> Result<Option<u32>, PowerError> {
    for runs in MIN_RUNS..=max_runs.min(MAX_RUNS) {
        let region = RejectionRegion::of(Design::new(runs, alpha)?)?;
        if region.power(baseline_rate, candidate_rate) >= target_power {
            return Ok(Some(runs));
        }
    }
    Ok(None)
}

/// The worst-case false-alarm rate of a design with one extension (GATE2 §3.7, §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ExtensionSize {
    /// sup over the common true pass rate of P(flag at the first look, or not then and at the
    /// second): the exact type-I error of one target, the extension always taken.
    pub sup: f64,
    /// The pass rate where the supremum is reached.
    pub at_rate: f64,
}

/// Grid points over (0, 1) for [`extension_size`]'s supremum, before local refinement.
const EXTENSION_GRID: u32 = 200;

/// The exact type-I error of testing one target with one-sided Fisher at level `alpha` after
/// `runs` per arm and, if not flagged then, again after `extend_to` (GATE2 §3.7 "peeking"),
/// maximised over the common true pass rate (a 200-point grid, then golden-section
/// refinement around the best point). 10 → 20 at 0.05 gives 0.0385 at ≈ 0.67. Errors: a
/// design out of range, or `extend_to` ≤ `runs`.
pub fn extension_size(runs: u32, extend_to: u32, alpha: f64) -> Result<ExtensionSize, PowerError> {
    if extend_to <= runs {
        return Err(PowerError::Runs(extend_to));
    }
    let first = RejectionRegion::of(Design::new(runs, alpha)?)?;
    let second = RejectionRegion::of(Design::new(extend_to, alpha)?)?;
    let added = extend_to - runs;
    let size = |rate: f64| -> f64 {
        let f: Vec<f64> = (0..=runs).map(|k| binomial_pmf(runs, k, rate)).collect();
        let g: Vec<f64> = (0..=added).map(|k| binomial_pmf(added, k, rate)).collect();
        let g_cdf = binomial_cdf(added, rate);
        let mut total = 0.0;
        for (a1, &fa) in f.iter().enumerate() {
            let t1 = first.flagged_at[a1];
            for (b1, &fb) in f.iter().enumerate() {
                let w = fa * fb;
                if t1.is_some_and(|t| b1 as u32 <= t) {
                    total += w;
                    continue;
                }
                let later: f64 = g
                    .iter()
                    .enumerate()
                    .filter_map(|(a2, &ga)| {
                        let t2 = second.flagged_at[a1 + a2]?;
                        let room = (t2 as usize).checked_sub(b1)?;
                        Some(ga * g_cdf[room.min(added as usize)])
                    })
                    .sum();
                total += w * later;
            }
        }
        total
    };
    let mut best = ExtensionSize {
        sup: 0.0,
        at_rate: 0.5,
    };
    for i in 1..EXTENSION_GRID {
        let rate = f64::from(i) / f64::from(EXTENSION_GRID);
        let s = size(rate);
        if s > best.sup {
            best = ExtensionSize {
                sup: s,
                at_rate: rate,
            };
        }
    }
    let step = 1.0 / f64::from(EXTENSION_GRID);
    let (mut lo, mut hi) = (
        (best.at_rate - step).max(1e-6),
        (best.at_rate + step).min(1.0 - 1e-6),
    );
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..40 {
        let (x1, x2) = (hi - phi * (hi - lo), lo + phi * (hi - lo));
        if size(x1) >= size(x2) {
            hi = x2;
        } else {
            lo = x1;
        }
    }
    let rate = (lo + hi) / 2.0;
    let s = size(rate);
    if s > best.sup {
        best = ExtensionSize {
            sup: s,
            at_rate: rate,
        };
    }
    Ok(best)
}

/// The one-sided 95 % "not worse than" bound when every run of both arms passed: the Newcombe
/// lower limit of B − A at N/N vs N/N, as a positive proportion (0.213 at N = 10, GATE2 §3.4).
pub fn not_worse_than(runs: u32) -> Result<f64, StatsError> {
    let all = Tally::new(runs, runs);
    Ok(-stats::newcombe_difference(all, all, Z_95_ONE_SIDED)?.lower)
}

/// The exact one-sided (1 − α) upper bound on the failure rate after zero failures in `runs`
/// runs: 1 − α^(1/N) (25.9 % at N = 10, α = 0.05; GATE2 §3.4).
pub fn zero_failure_bound(runs: u32, alpha: f64) -> f64 {
    1.0 - alpha.powf(1.0 / f64::from(runs.max(1)))
}

/// One row of flag thresholds: baseline a/N is flagged at candidate ≤ c/N.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlagThreshold {
    /// Baseline passes a.
    pub baseline_passed: u32,
    /// Runs per arm N.
    pub runs: u32,
    /// The largest flagged candidate count, `None` when none is.
    pub flagged_at: Option<u32>,
}

/// Power for one true drop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DropPower {
    /// The drop in percentage points.
    pub drop_pp: u32,
    /// The candidate's true pass rate (baseline − drop).
    pub candidate_rate: f64,
    /// P(flag), exact.
    pub power: f64,
}

/// The power row for one baseline rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerRow {
    /// The baseline's true pass rate.
    pub baseline_rate: f64,
    /// Power for each of [`DROPS_PP`] that stays ≥ 0.
    pub drops: Vec<DropPower>,
    /// Minimum detectable drop at 80 % power, in percentage points (`None`: not even a drop to
    /// 0 % is detected that often).
    pub mdd80_pp: Option<f64>,
}

/// Runs per arm needed for 80 % power for one true drop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsNeeded {
    /// Baseline true rate.
    pub baseline_rate: f64,
    /// Candidate true rate.
    pub candidate_rate: f64,
    /// Smallest runs per arm reaching 80 % ([`runs_needed`]); `None` above [`MAX_RUNS`].
    pub runs: Option<u32>,
}

/// Everything `patchdiff compare power` prints for one design (text and `--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerTable {
    /// Runs per arm.
    pub runs: u32,
    /// One-sided level per target (α with one testable target, Tarone K = 1).
    pub alpha: f64,
    /// The test the figures are for.
    pub test: &'static str,
    /// Flag thresholds for baselines at 100 %, 90 %, …, 50 % of N (distinct counts).
    pub flag_thresholds: Vec<FlagThreshold>,
    /// Exact power and MDD per baseline rate of [`BASELINE_RATES`].
    pub power: Vec<PowerRow>,
    /// A target with at most this many failures over both arms cannot be flagged.
    pub untestable_failures: u32,
    /// "Not worse than" bound in percentage points when both arms are perfect (one-sided 95 %).
    pub not_worse_than_pp: f64,
    /// Upper bound on the failure rate after zero failures in N runs, in percent (1 − α).
    pub zero_failure_bound_pct: f64,
    /// Runs per arm for 80 % power, for the drops of [`RUNS_NEEDED_FOR`].
    pub runs_for_80: Vec<RunsNeeded>,
}

impl PowerTable {
    /// The table for `design` (exact; a few hundred milliseconds at most, most of it the
    /// runs-needed search).
    pub fn of(design: Design) -> Result<Self, PowerError> {
        let region = RejectionRegion::of(design)?;
        let n = design.runs;
        let mut counts: Vec<u32> = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
            .iter()
            .map(|r| (r * f64::from(n)).round() as u32)
            .collect();
        counts.dedup();
        let flag_thresholds = counts
            .into_iter()
            .map(|a| FlagThreshold {
                baseline_passed: a,
                runs: n,
                flagged_at: region.flagged_at[a as usize],
            })
            .collect();
        let power = BASELINE_RATES
            .iter()
            .map(|&pa| PowerRow {
                baseline_rate: pa,
                drops: DROPS_PP
                    .iter()
                    .map(|&d| (d, pa - f64::from(d) / 100.0))
                    .filter(|&(_, pb)| pb >= -1e-9)
                    .map(|(drop_pp, pb)| DropPower {
                        drop_pp,
                        // 0.9 − 0.3 is 0.6000000000000001 in f64; the table means 0.6.
                        candidate_rate: (pb.max(0.0) * 1e6).round() / 1e6,
                        power: region.power(pa, pb),
                    })
                    .collect(),
                mdd80_pp: region
                    .minimum_detectable_drop(pa, TARGET_POWER)
                    .map(|d| d * 100.0),
            })
            .collect();
        let runs_for_80 = RUNS_NEEDED_FOR
            .iter()
            .map(|&(pa, pb)| {
                Ok(RunsNeeded {
                    baseline_rate: pa,
                    candidate_rate: pb,
                    runs: runs_needed(pa, pb, design.alpha, TARGET_POWER, MAX_RUNS)?,
                })
            })
            .collect::<Result<_, PowerError>>()?;
        Ok(Self {
            runs: n,
            alpha: design.alpha,
            test: "one-sided Fisher exact",
            flag_thresholds,
            power,
            untestable_failures: region.untestable_failures()?,
            not_worse_than_pp: not_worse_than(n)? * 100.0,
            zero_failure_bound_pct: zero_failure_bound(n, design.alpha) * 100.0,
            runs_for_80,
        })
    }

    /// The table as the terminal text `patchdiff compare power` prints.
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let n = self.runs;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "What {n} runs per arm can detect — {}, α {} per target (one testable target; \
             with K testable targets Tarone tests each at α/K)",
            self.test, self.alpha
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "flag thresholds (candidate counts that get a target flagged)"
        );
        for t in &self.flag_thresholds {
            let at = match t.flagged_at {
                Some(c) => format!("≤ {c}/{n}"),
                None => "never".to_owned(),
            };
            let _ = writeln!(
                out,
                "  baseline {:>3}/{n}  flagged at {at}",
                t.baseline_passed
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "power (probability of flagging a true drop), exact");
        let mut header = format!("  {:<9}", "baseline");
        for d in DROPS_PP {
            let _ = write!(header, "{:>9}", format!("−{d} pp"));
        }
        let _ = write!(header, "   MDD at 80 % power");
        let _ = writeln!(out, "{header}");
        for row in &self.power {
            let mut line = format!("  {:<9}", format!("{:.0} %", row.baseline_rate * 100.0));
            for d in DROPS_PP {
                match row.drops.iter().find(|x| x.drop_pp == d) {
                    Some(x) => {
                        let _ = write!(line, "{:>9.3}", x.power);
                    }
                    None => {
                        let _ = write!(line, "{:>9}", "—");
                    }
                }
            }
            match row.mdd80_pp {
                Some(mdd) => {
                    let _ = write!(
                        line,
                        "   {mdd:.0} pp (true rate ≈ {:.0} %)",
                        row.baseline_rate * 100.0 - mdd
                    );
                }
                None => {
                    let _ = write!(line, "   not detectable");
                }
            }
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out);
        let needed: Vec<String> = self
            .runs_for_80
            .iter()
            .map(|r| {
                let runs = r
                    .runs
                    .map_or_else(|| format!("> {MAX_RUNS}"), |x| x.to_string());
                format!(
                    "{:.0} → {:.0} %: {runs}",
                    r.baseline_rate * 100.0,
                    r.candidate_rate * 100.0
                )
            })
            .collect();
        let _ = writeln!(out, "runs per arm for 80 % power: {}", needed.join(" · "));
        let _ = writeln!(
            out,
            "a target with ≤ {} failures over both arms cannot be flagged, whatever the split",
            self.untestable_failures
        );
        let _ = writeln!(
            out,
            "both arms at {n}/{n}: the candidate is not worse by more than {:.1} pp (one-sided 95 %)",
            self.not_worse_than_pp
        );
        let _ = writeln!(
            out,
            "zero failures in {n} runs: true failure rate ≤ {:.1} % (one-sided {} %)",
            self.zero_failure_bound_pct,
            ((1.0 - self.alpha) * 1000.0).round() / 10.0
        );
        out
    }
}

/// What a design could have detected, for the verdict line: the flag
/// threshold of a perfect baseline and the true rate 80 % power needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// Runs per arm.
    pub runs: u32,
    /// The per-target level used (α/K).
    pub level: f64,
    /// A baseline at N/N is flagged at candidate ≤ this (`None`: never).
    pub flagged_at: Option<u32>,
    /// The true candidate rate (from 100 %) flagged with 80 % power, in percent.
    pub power80_rate_pct: Option<f64>,
    /// The "not worse than" bound in percentage points.
    pub not_worse_than_pp: f64,
}

impl Sensitivity {
    /// The sensitivity of `runs` per arm at per-target level `level`. Errors: as
    /// [`Design::new`].
    pub fn of(runs: u32, level: f64) -> Result<Self, PowerError> {
        let design = Design::new(runs, level)?;
        let region = RejectionRegion::of(design)?;
        Ok(Self {
            runs,
            level,
            flagged_at: region.flagged_at[runs as usize],
            power80_rate_pct: region
                .minimum_detectable_drop(1.0, TARGET_POWER)
                .map(|d| (1.0 - d) * 100.0),
            not_worse_than_pp: not_worse_than(runs)? * 100.0,
        })
    }

    /// "at 10 runs per arm a target at 10/10 is flagged only at ≤ 6/10 (80 % power needs a
    /// true drop to ≈ 52 %)".
    pub fn sentence(&self) -> String {
        let n = self.runs;
        let flag = match self.flagged_at {
            Some(c) => format!("a target at {n}/{n} is flagged only at ≤ {c}/{n}"),
            None => format!("no target at {n}/{n} can be flagged at all"),
        };
        match self.power80_rate_pct {
            Some(rate) => format!(
                "at {n} runs per arm {flag} (80 % power needs a true drop to ≈ {rate:.0} %)"
            ),
            None => format!("at {n} runs per arm {flag}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(runs: u32) -> RejectionRegion {
        RejectionRegion::of(Design::new(runs, 0.05).unwrap()).unwrap()
    }

    fn close(actual: f64, expected: f64, tolerance: f64) {
        assert!(
            (actual - expected).abs() <= tolerance,
            "{actual} is not within {tolerance} of {expected}"
        );
    }

    #[test]
    fn ten_runs_flag_thresholds_match_gate2() {
        // GATE2 §3.3, one-sided Fisher row: 10/10 … 5/10 → ≤ 6, 4, 3, 2, 1, 0.
        let r = region(10);
        let expected = [6, 4, 3, 2, 1, 0].map(Some);
        assert_eq!(
            r.flagged_at[5..=10]
                .iter()
                .rev()
                .copied()
                .collect::<Vec<_>>(),
            expected
        );
        // Below GATE2's columns: 4/10 → 0/10 still is (p = 210/4845), 3/10 → 0/10 is not.
        assert_eq!(r.flagged_at[4], Some(0));
        assert_eq!(r.flagged_at[3], None);
        // README's "Decide between two agents" table: a perfect baseline at N = 20, 30, 50.
        for (runs, at) in [(20, 15), (30, 25), (50, 45)] {
            assert_eq!(
                region(runs).flagged_at[runs as usize],
                Some(at),
                "N = {runs}"
            );
        }
        // Each threshold is the boundary: c is flagged, c + 1 is not.
        for a in 5..=10u32 {
            let c = r.flagged_at[a as usize].unwrap();
            let p = |c| {
                fisher_regression(Tally::new(a, 10), Tally::new(c, 10))
                    .unwrap()
                    .value
            };
            assert!(p(c) <= 0.05 && p(c + 1) > 0.05, "a = {a}");
        }
    }

    #[test]
    fn exact_power_matches_gate2_table() {
        // GATE2 §3.3: N = 10, 20, 50 one-sided Fisher columns.
        let rows = [
            (1.0, 0.9),
            (1.0, 0.8),
            (1.0, 0.7),
            (1.0, 0.6),
            (0.9, 0.7),
            (0.9, 0.6),
        ];
        let n10 = [0.013, 0.121, 0.350, 0.618, 0.143, 0.291];
        let n20 = [0.043, 0.370, 0.762, 0.949, 0.341, 0.619];
        for (runs, figures) in [(10, n10), (20, n20)] {
            let r = region(runs);
            for (&(pa, pb), expected) in rows.iter().zip(figures) {
                close(r.power(pa, pb), expected, 0.0005);
            }
        }
        let r = region(50);
        close(r.power(1.0, 0.9), 0.57, 0.005);
        close(r.power(1.0, 0.8), 0.98, 0.005);
        close(r.power(0.9, 0.7), 0.75, 0.005);
        // §4.12 vector: N = 10, 1.0 → 0.5.
        close(region(10).power(1.0, 0.5), 0.828, 0.0005);
        // No drop, no more than α false alarms (the test is conservative).
        for pa in [1.0, 0.9, 0.8, 0.5] {
            assert!(region(10).power(pa, pa) <= 0.05, "{pa}");
        }
    }

    #[test]
    fn minimum_detectable_drop_matches_gate2() {
        // GATE2 §3.3 "MDD @ 80 %" rows and the N = 30 note, in whole pp.
        let cases = [
            (10, 1.0, 48.0),
            (10, 0.9, 58.0),
            (10, 0.8, 60.0),
            (20, 1.0, 31.0),
            (20, 0.9, 38.0),
            (20, 0.8, 43.0),
            (30, 1.0, 21.0),
            (30, 0.9, 30.0),
            (50, 1.0, 13.0),
            (50, 0.9, 22.0),
        ];
        for (runs, pa, pp) in cases {
            let mdd = region(runs).minimum_detectable_drop(pa, 0.8).unwrap() * 100.0;
            assert_eq!(mdd.round(), pp, "N = {runs} from {pa}: {mdd}");
            // At the MDD the power is 80 %.
            close(region(runs).power(pa, pa - mdd / 100.0), 0.8, 1e-6);
        }
        // At N = 2 not even a drop to 0 % is flagged with 80 % power.
        assert_eq!(region(2).minimum_detectable_drop(1.0, 0.8), None);
    }

    #[test]
    fn runs_needed_for_80_percent_power() {
        // GATE2 §3.3 gives ≈ 68, ≈ 33, ≈ 56, ≈ 74; the exact first N reaching 80 % is 66, 33,
        // 56, 73 (at 66 power is 0.8019 from 100 % → 90 %, checked independently).
        let expected = [66, 33, 56, 73];
        for (&(pa, pb), runs) in RUNS_NEEDED_FOR.iter().zip(expected) {
            assert_eq!(runs_needed(pa, pb, 0.05, 0.8, 100).unwrap(), Some(runs));
        }
        assert_eq!(runs_needed(1.0, 0.99, 0.05, 0.8, 20).unwrap(), None);
    }

    #[test]
    fn one_extension_stays_within_alpha_as_gate2_computes() {
        // GATE2 §3.7: test at 10, if not flagged add 10 and test at 20: sup 0.0385 at p ≈ 0.66,
        // below α though 1.8× the single look's 0.021.
        let e = extension_size(10, 20, 0.05).unwrap();
        close(e.sup, 0.0385, 0.0002);
        assert!((0.6..0.72).contains(&e.at_rate), "{}", e.at_rate);
        // 10 → 30 at α 0.1 exceeds α (0.113, checked independently); a plan refuses it.
        let e = extension_size(10, 30, 0.1).unwrap();
        assert!(e.sup > 0.1 && e.sup < 0.12, "{}", e.sup);
        assert!(extension_size(10, 10, 0.05).is_err());
    }

    #[test]
    fn untestable_failures_and_bounds_match_gate2() {
        // "A target with three or fewer failures across both arms cannot be flagged at N = 10."
        assert_eq!(region(10).untestable_failures().unwrap(), 3);
        close(not_worse_than(10).unwrap(), 0.213, 0.0005);
        close(zero_failure_bound(10, 0.05), 0.259, 0.0005);
        close(zero_failure_bound(30, 0.05), 0.095, 0.0005);
    }

    #[test]
    fn design_rejects_out_of_range_runs_and_alpha() {
        assert_eq!(
            Design::new(1, 0.05).unwrap_err().to_string(),
            "runs per arm 1: accepted are 2 to 200"
        );
        assert_eq!(Design::new(201, 0.05), Err(PowerError::Runs(201)));
        for alpha in [0.0, -0.1, 0.51, f64::NAN] {
            assert!(
                matches!(Design::new(10, alpha), Err(PowerError::Alpha(_))),
                "{alpha}"
            );
        }
    }

    #[test]
    fn power_table_for_ten_runs_prints_the_gate2_figures() {
        let table = PowerTable::of(Design::new(10, 0.05).unwrap()).unwrap();
        assert_eq!(
            table
                .flag_thresholds
                .iter()
                .map(|t| (t.baseline_passed, t.flagged_at))
                .collect::<Vec<_>>(),
            [10, 9, 8, 7, 6, 5]
                .into_iter()
                .zip([6, 4, 3, 2, 1, 0].map(Some))
                .collect::<Vec<_>>()
        );
        assert_eq!(table.untestable_failures, 3);
        let text = table.render_text();
        for needle in [
            "baseline  10/10  flagged at ≤ 6/10",
            "baseline   5/10  flagged at ≤ 0/10",
            "48 pp (true rate ≈ 52 %)",
            "≤ 3 failures over both arms cannot be flagged",
            "not worse by more than 21.3 pp",
            "true failure rate ≤ 25.9 %",
            "100 → 90 %: 66",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        let strict = PowerTable::of(Design::new(10, 0.001).unwrap()).unwrap();
        assert!(strict.render_text().contains("(one-sided 99.9 %)"));
        let json = serde_json::to_value(&table).unwrap();
        assert_eq!(json["power"][1]["drops"][2]["candidate_rate"], 0.6);
        assert_eq!(json["runs"], 10);
        assert_eq!(json["flag_thresholds"][0]["flagged_at"], 6);
        assert_eq!(json["power"][0]["drops"][3]["drop_pp"], 40);
        close(
            json["power"][0]["drops"][3]["power"].as_f64().unwrap(),
            0.618,
            0.0005,
        );
    }

    #[test]
    fn sensitivity_sentence_states_what_ten_runs_can_see() {
        let s = Sensitivity::of(10, 0.05).unwrap();
        assert_eq!(
            s.sentence(),
            "at 10 runs per arm a target at 10/10 is flagged only at ≤ 6/10 \
             (80 % power needs a true drop to ≈ 52 %)"
        );
        // Tarone K = 2 halves the level: 10/10 then needs ≤ 5/10.
        assert_eq!(Sensitivity::of(10, 0.025).unwrap().flagged_at, Some(5));
        assert_eq!(
            Sensitivity::of(2, 0.05).unwrap().sentence(),
            "at 2 runs per arm no target at 2/2 can be flagged at all"
        );
    }
}

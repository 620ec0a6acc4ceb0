//! Exact small-sample statistics for gate 2 (SPEC C7): one-sided Fisher exact
//! tests per target (regression and its improvement mirror, plus the two-sided test for
//! exclusion rates), Tarone's correction over targets, Wilson intervals per arm, Newcombe's
//! hybrid score interval for the difference, the exact run-level permutation test on targets
//! passed per run, pass^k, and the descriptive statistics for continuous per-run metrics
//! (median, Hodges–Lehmann shift, exact permutation p).
//!
//! Everything is exact where an exact answer is cheap: hypergeometric tails and run-level
//! permutation counts are computed in `u128` integers and kept as reduced fractions
//! ([`Ratio`]) whenever they fit (always up to 130 runs over both arms, for Fisher up to 256 when
//! the margins allow, and for the permutation test whenever C(n_A + n_B, n_B) fits); beyond that the same sums are taken in
//! `f64` through a log-factorial table (relative error below 1e-12). No function samples.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Largest number of runs over both arms any function here accepts (the log-factorial
/// table's size). A plan allows at most 100 per arm (`plan::MAX_RUNS`).
pub const MAX_TOTAL_RUNS: u32 = 4000;

/// Largest number of relabelings [`mean_permutation`] enumerates (C(26, 13) = 10 400 600 fits,
/// so 13 + 13 runs are exact; C(28, 14) does not).
pub const MAX_ENUMERATED_RELABELINGS: u128 = 12_000_000;

/// Largest DP table (cells = (n_B + 1) × (Σ scores + 1)) [`run_level_permutation`] builds.
pub const MAX_PERMUTATION_CELLS: usize = 50_000_000;

/// z for a two-sided 95 % interval (the 0.975 standard-normal quantile).
pub const Z_95_TWO_SIDED: f64 = 1.959_963_984_540_054;

/// z for a one-sided 95 % bound (the 0.95 standard-normal quantile).
pub const Z_95_ONE_SIDED: f64 = 1.644_853_626_951_472_2;

/// What a statistic refused to compute, naming the input and what is accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// A tally with more passes than runs.
    #[error("{arm}: {passed} passed of {runs} runs is not a tally (passed must be ≤ runs)")]
    InvalidTally {
        /// `baseline` or `candidate`.
        arm: &'static str,
        /// Passes given.
        passed: u32,
        /// Runs given.
        runs: u32,
    },
    /// More runs than the tables here are built for.
    #[error("{total} runs over both arms; at most {MAX_TOTAL_RUNS} are accepted")]
    TooManyRuns {
        /// Runs over both arms.
        total: u64,
    },
    /// An arm with no observations where the statistic needs at least one.
    #[error("{arm}: no runs; the statistic needs at least one run per arm")]
    EmptyArm {
        /// `baseline` or `candidate`.
        arm: &'static str,
    },
    /// A metric value that is NaN or infinite.
    #[error("{arm} run {index}: value {value} is not a finite number")]
    NotFinite {
        /// `baseline` or `candidate`.
        arm: &'static str,
        /// 0-based index of the run in its arm.
        index: usize,
        /// The value.
        value: f64,
    },
    /// Too many relabelings to enumerate exactly.
    #[error(
        "{relabelings:.3e} relabelings ({n_a} + {n_b} runs) exceed the exact-enumeration limit of \
         {MAX_ENUMERATED_RELABELINGS}; at most 13 + 13 runs are enumerated"
    )]
    TooManyRelabelings {
        /// C(n_A + n_B, n_B).
        relabelings: f64,
        /// Baseline runs.
        n_a: usize,
        /// Candidate runs.
        n_b: usize,
    },
    /// The run-level DP table would be too large.
    #[error(
        "run-level test over {n_b} candidate runs with total score {total_score} needs \
         {cells} table cells; at most {MAX_PERMUTATION_CELLS} are built"
    )]
    PermutationTooLarge {
        /// Candidate runs.
        n_b: usize,
        /// Σ of all scores.
        total_score: u64,
        /// Cells needed.
        cells: u128,
    },
}

/// Passes among valid runs of one arm for one target (k of n).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Runs whose verdict for this target was `pass` (k).
    pub passed: u32,
    /// Valid runs (n): passes plus failures; excluded runs are not counted.
    pub runs: u32,
}

impl Tally {
    /// `passed` of `runs`. Not checked here; every function taking a tally checks it.
    pub const fn new(passed: u32, runs: u32) -> Self {
        Self { passed, runs }
    }

    /// Failures (n − k); saturates at 0 for an invalid tally.
    pub const fn failed(self) -> u32 {
        self.runs.saturating_sub(self.passed)
    }

    /// Pass rate k/n in [0, 1]; 0 for n = 0.
    pub fn rate(self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            f64::from(self.passed) / f64::from(self.runs)
        }
    }

    fn check(self, arm: &'static str) -> Result<Self, StatsError> {
        if self.passed > self.runs {
            return Err(StatsError::InvalidTally {
                arm,
                passed: self.passed,
                runs: self.runs,
            });
        }
        Ok(self)
    }
}

/// A fraction in lowest terms, 0 ≤ numerator ≤ denominator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ratio {
    /// Numerator.
    pub numerator: u128,
    /// Denominator (> 0).
    pub denominator: u128,
}

impl Ratio {
    /// `numerator / denominator` reduced by their gcd. `denominator` must be > 0.
    pub fn reduced(numerator: u128, denominator: u128) -> Self {
        let g = gcd(numerator, denominator).max(1);
        Self {
            numerator: numerator / g,
            denominator: denominator / g,
        }
    }

    /// The value as the nearest `f64`.
    pub fn to_f64(self) -> f64 {
        self.numerator as f64 / self.denominator as f64
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.numerator, self.denominator)
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A probability: its value, and the exact fraction when the integers fit in `u128`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probability {
    /// The value in [0, 1] (from `exact` when present).
    pub value: f64,
    /// The exact value as a reduced fraction, when every count fitted in `u128`.
    pub exact: Option<Ratio>,
}

impl Probability {
    fn from_counts(numerator: Option<u128>, denominator: Option<u128>, approx: f64) -> Self {
        match (numerator, denominator) {
            (Some(n), Some(d)) if d > 0 => {
                let exact = Ratio::reduced(n, d);
                Self {
                    value: exact.to_f64(),
                    exact: Some(exact),
                }
            }
            _ => Self {
                value: approx.clamp(0.0, 1.0),
                exact: None,
            },
        }
    }
}

fn ln_factorials() -> &'static [f64] {
    static TABLE: OnceLock<Vec<f64>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Vec::with_capacity(MAX_TOTAL_RUNS as usize + 1);
        let mut acc = 0.0_f64;
        table.push(0.0);
        for i in 1..=MAX_TOTAL_RUNS {
            acc += f64::from(i).ln();
            table.push(acc);
        }
        table
    })
}

/// ln C(n, k) for k ≤ n ≤ [`MAX_TOTAL_RUNS`].
pub(crate) fn ln_choose(n: u32, k: u32) -> f64 {
    let t = ln_factorials();
    t[n as usize] - t[k as usize] - t[(n - k) as usize]
}

/// Rows of Pascal's triangle cached for [`choose_exact`] (C(n, ·) for n below this).
const PASCAL_ROWS: u32 = 257;

fn pascal() -> &'static [Vec<Option<u128>>] {
    static TABLE: OnceLock<Vec<Vec<Option<u128>>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut rows: Vec<Vec<Option<u128>>> = Vec::with_capacity(PASCAL_ROWS as usize);
        rows.push(vec![Some(1)]);
        for n in 1..PASCAL_ROWS as usize {
            let prev = &rows[n - 1];
            let row = (0..=n)
                .map(|k| match (k.checked_sub(1).map(|i| prev[i]), prev.get(k)) {
                    (None, _) | (_, None) => Some(1),
                    (Some(a), Some(b)) => a?.checked_add((*b)?),
                })
                .collect();
            rows.push(row);
        }
        rows
    })
}

/// C(n, k) exactly, or `None` when it does not fit in `u128` (or k > n). Table lookup for
/// n ≤ 256, a multiplicative loop above.
pub fn choose_exact(n: u32, k: u32) -> Option<u128> {
    if k > n {
        return None;
    }
    if n < PASCAL_ROWS {
        return pascal()[n as usize][k as usize];
    }
    let k = k.min(n - k);
    let mut acc: u128 = 1;
    for i in 0..k {
        // acc · (n − i) / (i + 1) is an integer at every step; divide out common factors first
        // so the product overflows only when the result itself is near the limit.
        let num = u128::from(n - i);
        let den = u128::from(i + 1);
        let g = gcd(acc, den);
        let (a, d) = (acc / g, den / g);
        let h = gcd(num, d);
        acc = a.checked_mul(num / h)? / (d / h);
    }
    Some(acc)
}

/// The 2×2 table's margins under Fisher's conditioning: n_A, n_B runs and m passes in total.
#[derive(Debug, Clone, Copy)]
struct Margins {
    n_a: u32,
    n_b: u32,
    m: u32,
}

impl Margins {
    fn of(baseline: Tally, candidate: Tally) -> Result<Self, StatsError> {
        let a = baseline.check("baseline")?;
        let b = candidate.check("candidate")?;
        let total = u64::from(a.runs) + u64::from(b.runs);
        if total > u64::from(MAX_TOTAL_RUNS) {
            return Err(StatsError::TooManyRuns { total });
        }
        Ok(Self {
            n_a: a.runs,
            n_b: b.runs,
            m: a.passed + b.passed,
        })
    }

    /// Smallest and largest possible baseline passes given the margins.
    fn support(self) -> (u32, u32) {
        (self.m.saturating_sub(self.n_b), self.n_a.min(self.m))
    }

    /// Whether exact integers are tried: every C(·, ·) needed is then a table lookup. Past 256
    /// runs in all, only extreme margins would fit in `u128` anyway.
    fn exact_tried(self) -> bool {
        self.n_a + self.n_b < PASCAL_ROWS
    }

    /// C(n_A, j)·C(n_B, m − j) exactly.
    fn term_exact(self, j: u32) -> Option<u128> {
        if !self.exact_tried() {
            return None;
        }
        choose_exact(self.n_a, j)?.checked_mul(choose_exact(self.n_b, self.m - j)?)
    }

    fn ln_pmf(self, j: u32) -> f64 {
        ln_choose(self.n_a, j) + ln_choose(self.n_b, self.m - j)
            - ln_choose(self.n_a + self.n_b, self.m)
    }

    /// P(X_A ∈ js) under the hypergeometric law of the baseline's passes.
    fn probability(self, js: impl Iterator<Item = u32> + Clone) -> Probability {
        let denominator = if self.exact_tried() {
            choose_exact(self.n_a + self.n_b, self.m)
        } else {
            None
        };
        let numerator = js
            .clone()
            .try_fold(0u128, |acc, j| acc.checked_add(self.term_exact(j)?));
        let approx = if numerator.is_some() && denominator.is_some() {
            0.0
        } else {
            js.map(|j| self.ln_pmf(j).exp()).sum()
        };
        Probability::from_counts(numerator, denominator, approx)
    }
}

/// One-sided Fisher exact p for **regression** (the candidate passes less often):
/// P_R = Σ_{j = k_A}^{min(n_A, m)} C(n_A, j)·C(n_B, m − j) / C(n_A + n_B, m), m = k_A + k_B
/// (GATE2 §4.7.2). 10/10 vs 6/10 gives exactly 14/323.
///
/// Errors: a tally with passed > runs, or more than [`MAX_TOTAL_RUNS`] runs in all. An arm with
/// no runs gives p = 1 (nothing can be told apart).
pub fn fisher_regression(baseline: Tally, candidate: Tally) -> Result<Probability, StatsError> {
    let g = Margins::of(baseline, candidate)?;
    let (_, hi) = g.support();
    Ok(g.probability(baseline.passed..=hi))
}

/// One-sided Fisher exact p for **improvement** (the candidate passes more often), the mirror
/// of [`fisher_regression`]: P_I = Σ_{j = max(0, m − n_B)}^{k_A} (same terms). Same errors.
pub fn fisher_improvement(baseline: Tally, candidate: Tally) -> Result<Probability, StatsError> {
    let g = Margins::of(baseline, candidate)?;
    let (lo, _) = g.support();
    Ok(g.probability(lo..=baseline.passed))
}

/// Two-sided Fisher exact p: the probability of every table with the same margins that is no
/// more likely than the observed one (R's `fisher.test` rule; ties decided on exact integers
/// when they fit, else with R's relative tolerance 1e-7). Used for "exclusions differ by arm"
/// (GATE2 §4.5), never for the regression decision. Same errors as [`fisher_regression`].
pub fn fisher_two_sided(baseline: Tally, candidate: Tally) -> Result<Probability, StatsError> {
    let g = Margins::of(baseline, candidate)?;
    let (lo, hi) = g.support();
    let observed = baseline.passed;
    let exact_terms: Option<Vec<u128>> = (lo..=hi).map(|j| g.term_exact(j)).collect();
    let chosen: Vec<u32> = match &exact_terms {
        Some(terms) => {
            let at = terms[(observed - lo) as usize];
            (lo..=hi)
                .filter(|j| terms[(j - lo) as usize] <= at)
                .collect()
        }
        None => {
            let at = g.ln_pmf(observed);
            (lo..=hi)
                .filter(|&j| g.ln_pmf(j) <= at + (1e-7f64).ln_1p())
                .collect()
        }
    };
    Ok(g.probability(chosen.into_iter()))
}

/// The smallest regression p any split of these margins could give (all passes in the
/// baseline as far as possible): the tail at j = min(n_A, m) (GATE2 §4.7.3). A target is
/// testable at level L only if this is ≤ L. Same errors as [`fisher_regression`].
pub fn fisher_regression_floor(
    baseline: Tally,
    candidate: Tally,
) -> Result<Probability, StatsError> {
    let g = Margins::of(baseline, candidate)?;
    let (_, hi) = g.support();
    Ok(g.probability(hi..=hi))
}

/// The smallest improvement p these margins could give: the tail at j = max(0, m − n_B).
/// Same errors as [`fisher_regression`].
pub fn fisher_improvement_floor(
    baseline: Tally,
    candidate: Tally,
) -> Result<Probability, StatsError> {
    let g = Margins::of(baseline, candidate)?;
    let (lo, _) = g.support();
    Ok(g.probability(lo..=lo))
}

/// One target's one-sided test for Tarone's procedure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaroneInput {
    /// The observed p.
    pub p: f64,
    /// The smallest p the target's margins could give ([`fisher_regression_floor`]).
    pub floor: f64,
}

/// Tarone's (1990) Bonferroni correction over discrete tests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tarone {
    /// K = smallest integer ≥ 1 with #{t: floor_t ≤ α/K} ≤ K.
    pub k: u32,
    /// The per-target level α/K.
    pub level: f64,
    /// Per input: floor ≤ α/K. An untestable target (false) spends no α and can never be
    /// rejected.
    pub testable: Vec<bool>,
    /// Per input: p ≤ α/K (always false for an untestable target).
    pub rejected: Vec<bool>,
}

/// Tarone–Bonferroni over `tests` at family-wise level `alpha` (GATE2 §3.5, §4.7.3):
/// K = smallest integer with #{t: floor_t ≤ α/K} ≤ K, reject t iff p_t ≤ α/K. Exact FWER
/// control for conditional tests; targets whose floor exceeds α/K do not dilute α. With no
/// tests K = 1. `alpha` in (0, 1) is the caller's (the plan validates it).
pub fn tarone(tests: &[TaroneInput], alpha: f64) -> Tarone {
    let count = tests.len() as u32;
    let k = (1..=count.max(1))
        .find(|&k| {
            let level = alpha / f64::from(k);
            tests.iter().filter(|t| t.floor <= level).count() as u32 <= k
        })
        .unwrap_or(count.max(1));
    let level = alpha / f64::from(k);
    let testable: Vec<bool> = tests.iter().map(|t| t.floor <= level).collect();
    let rejected = tests
        .iter()
        .zip(&testable)
        .map(|(t, &ok)| ok && t.p <= level)
        .collect();
    Tarone {
        k,
        level,
        testable,
        rejected,
    }
}

/// A closed interval [lower, upper].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower limit.
    pub lower: f64,
    /// Upper limit.
    pub upper: f64,
}

/// Wilson score interval for a pass rate (GATE2 §3.4): (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) /
/// (1 + z²/n), as proportions in [0, 1]; exactly 1 (0) as the upper (lower) limit at k = n
/// (k = 0). z = [`Z_95_TWO_SIDED`] for 95 % two-sided, [`Z_95_ONE_SIDED`] for a one-sided 95 %
/// bound. n = 0 gives [0, 1] (no information). Error: passed > runs.
pub fn wilson(tally: Tally, z: f64) -> Result<Interval, StatsError> {
    let t = tally.check("arm")?;
    if t.runs == 0 {
        return Ok(Interval {
            lower: 0.0,
            upper: 1.0,
        });
    }
    let n = f64::from(t.runs);
    let p = t.rate();
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let spread = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let scale = 1.0 + z2 / n;
    let lower = if t.passed == 0 {
        0.0
    } else {
        ((centre - spread) / scale).clamp(0.0, 1.0)
    };
    let upper = if t.passed == t.runs {
        1.0
    } else {
        ((centre + spread) / scale).clamp(0.0, 1.0)
    };
    Ok(Interval { lower, upper })
}

/// Clopper–Pearson ("exact") interval for a pass rate at two-sided level `alpha` (0.05 → 95 %),
/// as proportions: the rates p where P(X ≥ k; n, p) = α/2 (lower) and P(X ≤ k; n, p) = α/2
/// (upper), found by bisection to 1e-12; 0 (1) at k = 0 (k = n). Coverage ≥ 1 − α by
/// construction, wider than Wilson (GATE2 §3.4) — shown where a guarantee matters, never
/// used by the verdict. n = 0 gives [0, 1]. Errors: passed > runs, more than
/// [`MAX_TOTAL_RUNS`] runs.
pub fn clopper_pearson(tally: Tally, alpha: f64) -> Result<Interval, StatsError> {
    let t = tally.check("arm")?;
    if t.runs > MAX_TOTAL_RUNS {
        return Err(StatsError::TooManyRuns {
            total: u64::from(t.runs),
        });
    }
    let (n, k) = (t.runs, t.passed);
    if n == 0 {
        return Ok(Interval {
            lower: 0.0,
            upper: 1.0,
        });
    }
    // P(X ≤ c; n, p), decreasing in p.
    let cdf = |c: u32, p: f64| -> f64 {
        (0..=c)
            .map(|j| {
                (ln_choose(n, j) + f64::from(j) * p.ln() + f64::from(n - j) * (1.0 - p).ln()).exp()
            })
            .sum::<f64>()
    };
    // The p in (0, 1) where the decreasing `f` crosses `target`.
    let solve = |f: &dyn Fn(f64) -> f64, target: f64| -> f64 {
        let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
        while hi - lo > 1e-12 {
            let mid = (lo + hi) / 2.0;
            if f(mid) > target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo + hi) / 2.0
    };
    let half = alpha / 2.0;
    // Lower: P(X ≥ k) = 1 − P(X ≤ k − 1) rises with p; solve P(X ≤ k − 1) = 1 − α/2.
    let lower = if k == 0 {
        0.0
    } else {
        solve(&|p| cdf(k - 1, p), 1.0 - half)
    };
    let upper = if k == n {
        1.0
    } else {
        solve(&|p| cdf(k, p), half)
    };
    Ok(Interval { lower, upper })
}

/// Newcombe's hybrid score interval (method 10) for Δ = p̂_B − p̂_A, candidate minus baseline,
/// as a difference of proportions in [−1, 1] (GATE2 §3.4): with Wilson limits (l, u) per arm,
/// L = Δ − √((p̂_B − l_B)² + (u_A − p̂_A)²), U = Δ + √((u_B − p̂_B)² + (p̂_A − l_A)²).
/// Descriptive only: the Fisher test decides. Errors: as [`wilson`].
pub fn newcombe_difference(
    baseline: Tally,
    candidate: Tally,
    z: f64,
) -> Result<Interval, StatsError> {
    let a = baseline.check("baseline")?;
    let b = candidate.check("candidate")?;
    let (wa, wb) = (wilson(a, z)?, wilson(b, z)?);
    let (pa, pb) = (a.rate(), b.rate());
    let delta = pb - pa;
    let lower = delta - ((pb - wb.lower).powi(2) + (wa.upper - pa).powi(2)).sqrt();
    let upper = delta + ((wb.upper - pb).powi(2) + (pa - wa.lower).powi(2)).sqrt();
    Ok(Interval {
        lower: lower.max(-1.0),
        upper: upper.min(1.0),
    })
}

/// pass^k (τ-bench): the chance that k runs drawn without replacement from these n all pass,
/// C(c, k) / C(n, k), exact when the integers fit. k = 0 gives 1; k > n gives 0.
/// Error: passed > runs.
pub fn pass_hat_k(tally: Tally, k: u32) -> Result<Probability, StatsError> {
    let t = tally.check("arm")?;
    if k > t.runs {
        return Ok(Probability {
            value: 0.0,
            exact: Some(Ratio::reduced(0, 1)),
        });
    }
    if t.runs > MAX_TOTAL_RUNS {
        return Err(StatsError::TooManyRuns {
            total: u64::from(t.runs),
        });
    }
    let approx = if k > t.passed {
        0.0
    } else {
        (ln_choose(t.passed, k) - ln_choose(t.runs, k)).exp()
    };
    let numerator = if k > t.passed {
        Some(0)
    } else {
        choose_exact(t.passed, k)
    };
    Ok(Probability::from_counts(
        numerator,
        choose_exact(t.runs, k),
        approx,
    ))
}

/// The exact run-level permutation test (GATE2 §3.6, §4.7.4) on per-run scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunLevelTest {
    /// Mean score per baseline run.
    pub baseline_mean: f64,
    /// Mean score per candidate run.
    pub candidate_mean: f64,
    /// P(Σ_B ≤ observed) over all relabelings: small when the candidate scores lower.
    pub p_regression: Probability,
    /// P(Σ_B ≥ observed) over all relabelings: small when the candidate scores higher.
    pub p_improvement: Probability,
    /// C(n_A + n_B, n_B), the number of relabelings counted (as `f64` when it exceeds `u128`).
    pub relabelings: f64,
}

trait Tallying: Copy {
    const ZERO: Self;
    const ONE: Self;
    fn plus(self, other: Self) -> Option<Self>;
}

impl Tallying for u128 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    fn plus(self, other: Self) -> Option<Self> {
        self.checked_add(other)
    }
}

impl Tallying for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn plus(self, other: Self) -> Option<Self> {
        Some(self + other)
    }
}

/// Counts of size-`pick` subsets of `scores` by their sum (index = sum), or `None` on overflow.
fn subset_sum_counts<T: Tallying>(scores: &[u32], pick: usize, total: usize) -> Option<Vec<T>> {
    let width = total + 1;
    let mut dp = vec![T::ZERO; (pick + 1) * width];
    dp[0] = T::ONE;
    for (i, &v) in scores.iter().enumerate() {
        let v = v as usize;
        for j in (1..=pick.min(i + 1)).rev() {
            for s in (v..width).rev() {
                let from = dp[(j - 1) * width + s - v];
                let cell = &mut dp[j * width + s];
                *cell = cell.plus(from)?;
            }
        }
    }
    Some(dp.split_off(pick * width))
}

/// Exact two-sample permutation test on integer per-run scores — for gate 2, s_i = targets
/// passed in run i — so one crashed session counts once, not once per target (GATE2 §3.6):
/// statistic Σ_{i∈B} s_i; p_regression = #{relabelings with Σ_B ≤ observed} / C(n_A+n_B, n_B),
/// p_improvement with ≥, computed by a DP over the integer scores (exact fractions when the
/// counts fit in `u128`, i.e. C(n_A + n_B, n_B) < 2^128).
///
/// Errors: an empty arm; more than [`MAX_TOTAL_RUNS`] runs; a DP table over
/// [`MAX_PERMUTATION_CELLS`] cells.
pub fn run_level_permutation(
    baseline: &[u32],
    candidate: &[u32],
) -> Result<RunLevelTest, StatsError> {
    if baseline.is_empty() {
        return Err(StatsError::EmptyArm { arm: "baseline" });
    }
    if candidate.is_empty() {
        return Err(StatsError::EmptyArm { arm: "candidate" });
    }
    let total_runs = baseline.len() as u64 + candidate.len() as u64;
    if total_runs > u64::from(MAX_TOTAL_RUNS) {
        return Err(StatsError::TooManyRuns { total: total_runs });
    }
    let pooled: Vec<u32> = baseline.iter().chain(candidate).copied().collect();
    let total_score: u64 = pooled.iter().map(|&s| u64::from(s)).sum();
    let n_b = candidate.len();
    let cells = (n_b as u128 + 1) * (u128::from(total_score) + 1);
    if cells > MAX_PERMUTATION_CELLS as u128 {
        return Err(StatsError::PermutationTooLarge {
            n_b,
            total_score,
            cells,
        });
    }
    let total = total_score as usize;
    let observed = candidate.iter().map(|&s| s as usize).sum::<usize>();
    let (p_regression, p_improvement, relabelings) =
        match subset_sum_counts::<u128>(&pooled, n_b, total) {
            Some(counts) => {
                let all: u128 = counts.iter().sum();
                let low: u128 = counts[..=observed].iter().sum();
                let high: u128 = counts[observed..].iter().sum();
                (
                    Probability::from_counts(Some(low), Some(all), 0.0),
                    Probability::from_counts(Some(high), Some(all), 0.0),
                    all as f64,
                )
            }
            None => {
                let counts = subset_sum_counts::<f64>(&pooled, n_b, total)
                    .expect("f64 counts do not overflow");
                let all: f64 = counts.iter().sum();
                let low: f64 = counts[..=observed].iter().sum();
                let high: f64 = counts[observed..].iter().sum();
                (
                    Probability::from_counts(None, None, low / all),
                    Probability::from_counts(None, None, high / all),
                    all,
                )
            }
        };
    let mean = |xs: &[u32]| xs.iter().map(|&x| f64::from(x)).sum::<f64>() / xs.len() as f64;
    Ok(RunLevelTest {
        baseline_mean: mean(baseline),
        candidate_mean: mean(candidate),
        p_regression,
        p_improvement,
        relabelings,
    })
}

pub(super) fn check_finite(arm: &'static str, xs: &[f64]) -> Result<(), StatsError> {
    if xs.is_empty() {
        return Err(StatsError::EmptyArm { arm });
    }
    match xs.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NotFinite {
            arm,
            index,
            value: xs[index],
        }),
        None => Ok(()),
    }
}

// The continuous per-run metrics live in `metrics`; re-exported so `stats::median` etc. stay.
pub use super::metrics::{
    MeanPermutation, MetricComparison, compare_metric, hodges_lehmann, mean_permutation, median,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn t(passed: u32, runs: u32) -> Tally {
        Tally::new(passed, runs)
    }

    fn close(actual: f64, expected: f64, tolerance: f64) {
        assert!(
            (actual - expected).abs() <= tolerance,
            "{actual} is not within {tolerance} of {expected}"
        );
    }

    #[test]
    fn fisher_regression_ten_of_ten_against_six_is_exactly_14_over_323() {
        let p = fisher_regression(t(10, 10), t(6, 10)).unwrap();
        assert_eq!(p.exact, Some(Ratio::reduced(14, 323)));
        assert_eq!(p.exact.unwrap().to_string(), "14/323");
        close(p.value, 0.043_343_653_2, 1e-10);
    }

    #[test]
    fn fisher_pins_every_gate2_vector() {
        // (baseline, candidate, one-sided regression, two-sided) from GATE2 §3.2 and §4.12.
        let cases = [
            (t(10, 10), t(6, 10), 0.043_343_653_2, 0.086_687_306_5),
            (t(10, 10), t(5, 10), 0.016_253_870_0, 0.032_507_739_9),
            (t(10, 10), t(7, 10), 0.105_263_157_9, 0.210_526_315_8),
            (t(10, 10), t(8, 10), 0.236_842_105_3, 0.473_684_210_5),
            (t(9, 10), t(5, 10), 0.070_433_436_5, 0.140_866_873_1),
        ];
        for (a, b, one, two) in cases {
            close(fisher_regression(a, b).unwrap().value, one, 1e-9);
            close(fisher_two_sided(a, b).unwrap().value, two, 1e-9);
        }
        // The seed's "p = 1.00" rows and their one-sided values 1.00 / 0.50 / 0.76.
        close(
            fisher_regression(t(9, 10), t(10, 10)).unwrap().value,
            1.0,
            1e-12,
        );
        close(
            fisher_regression(t(8, 10), t(7, 10)).unwrap().value,
            0.5,
            1e-12,
        );
        close(
            fisher_regression(t(9, 10), t(9, 10)).unwrap().value,
            0.763_157_894_7,
            1e-9,
        );
        for (a, b) in [
            (t(9, 10), t(10, 10)),
            (t(8, 10), t(7, 10)),
            (t(9, 10), t(9, 10)),
        ] {
            close(fisher_two_sided(a, b).unwrap().value, 1.0, 1e-12);
        }
        // scipy's boschloo_exact doc table, "greater": Fisher's statistic 0.0483122101.
        let p = fisher_regression(t(74, 105), t(43, 75)).unwrap();
        close(p.value, 0.048_312_210_1, 1e-9);
    }

    #[test]
    fn fisher_improvement_mirrors_regression_with_the_arms_swapped() {
        for (a, b) in [
            (t(6, 10), t(10, 10)),
            (t(3, 9), t(7, 12)),
            (t(0, 5), t(5, 5)),
        ] {
            let improvement = fisher_improvement(a, b).unwrap();
            let swapped = fisher_regression(b, a).unwrap();
            assert_eq!(improvement.exact, swapped.exact);
        }
        assert_eq!(
            fisher_improvement(t(6, 10), t(10, 10)).unwrap().exact,
            Some(Ratio::reduced(14, 323))
        );
    }

    #[test]
    fn fisher_beyond_u128_falls_back_to_log_factorials() {
        // Where both paths exist (60 + 60) the log-factorial sum agrees with the exact one.
        let exact = fisher_regression(t(60, 60), t(50, 60)).unwrap();
        assert!(exact.exact.is_some());
        let g = Margins::of(t(60, 60), t(50, 60)).unwrap();
        let approx: f64 = (60..=60).map(|j| g.ln_pmf(j).exp()).sum();
        close(approx, exact.value, 1e-12 * exact.value.max(1e-300));
        // 1000/2000 vs 950/2000: C(4000, 1950) is far past u128; Python's exact integers give
        // 0.06056525471540545.
        let big = fisher_regression(t(1000, 2000), t(950, 2000)).unwrap();
        assert!(big.exact.is_none());
        close(big.value, 0.060_565_254_715_405_45, 1e-11);
    }

    #[test]
    fn fisher_rejects_a_tally_with_more_passes_than_runs() {
        let e = fisher_regression(t(11, 10), t(6, 10)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "baseline: 11 passed of 10 runs is not a tally (passed must be ≤ runs)"
        );
        assert!(matches!(
            fisher_improvement(t(1, 1), t(3, 2)),
            Err(StatsError::InvalidTally {
                arm: "candidate",
                ..
            })
        ));
        assert!(matches!(
            fisher_regression(t(0, 3000), t(0, 3000)),
            Err(StatsError::TooManyRuns { total: 6000 })
        ));
    }

    #[test]
    fn regression_floor_by_total_failures_matches_gate2() {
        // Total failures F over 20 runs, all in the candidate: F ≤ 3 → ≥ 0.105, F = 4 → 0.0433,
        // F = 5 → 0.0163, F = 6 → 0.0054 (GATE2 §3.3).
        let floor = |f: u32| {
            fisher_regression_floor(t(10, 10), t(10 - f, 10))
                .unwrap()
                .value
        };
        close(floor(3), 0.105_263_157_9, 1e-9);
        close(floor(4), 0.043_343_653_2, 1e-9);
        close(floor(5), 0.016_253_870_0, 1e-9);
        close(floor(6), 0.005_417_956_7, 1e-9);
        // The floor depends on the margins only, not on the split.
        assert_eq!(
            fisher_regression_floor(t(8, 10), t(8, 10)).unwrap(),
            fisher_regression_floor(t(10, 10), t(6, 10)).unwrap()
        );
    }

    fn tarone_over(tables: &[(Tally, Tally)], alpha: f64) -> Tarone {
        let inputs: Vec<TaroneInput> = tables
            .iter()
            .map(|&(a, b)| TaroneInput {
                p: fisher_regression(a, b).unwrap().value,
                floor: fisher_regression_floor(a, b).unwrap().value,
            })
            .collect();
        tarone(&inputs, alpha)
    }

    #[test]
    fn tarone_ignores_untestable_targets_so_one_real_drop_is_flagged() {
        // GATE2 §3.5: [(10,6), (10,10)×4] → K = 1, 10/10 → 6/10 flagged at p = 0.043.
        let mut tables = vec![(t(10, 10), t(6, 10))];
        tables.extend([(t(10, 10), t(10, 10)); 4]);
        let r = tarone_over(&tables, 0.05);
        assert_eq!(r.k, 1);
        assert_eq!(r.testable, [true, false, false, false, false]);
        assert_eq!(r.rejected, [true, false, false, false, false]);
    }

    #[test]
    fn tarone_spends_alpha_on_every_testable_target() {
        // GATE2 §3.5: [(10,6), (9,8), (8,7), (10,9), (9,9)] → K = 2, 10/10 → 6/10 not flagged
        // (0.043 > 0.025), and it becomes untestable at α/2.
        let tables = [
            (t(10, 10), t(6, 10)),
            (t(9, 10), t(8, 10)),
            (t(8, 10), t(7, 10)),
            (t(10, 10), t(9, 10)),
            (t(9, 10), t(9, 10)),
        ];
        let r = tarone_over(&tables, 0.05);
        assert_eq!(r.k, 2);
        close(r.level, 0.025, 1e-15);
        assert_eq!(r.testable, [false, false, true, false, false]);
        assert_eq!(r.rejected, [false; 5]);
        // Bonferroni over all five would test at 0.01; Tarone's K never exceeds the count.
        assert_eq!(tarone(&[], 0.05).k, 1);
    }

    #[test]
    fn wilson_intervals_match_gate2() {
        let cases = [
            (t(10, 10), 0.722_467_2, 1.0),
            (t(6, 10), 0.312_673_8, 0.831_819_7),
            (t(9, 10), 0.595_850_0, 0.982_123_8),
            (t(8, 10), 0.490_16, 0.943_32),
            (t(5, 10), 0.236_59, 0.763_41),
        ];
        for (tally, lower, upper) in cases {
            let w = wilson(tally, Z_95_TWO_SIDED).unwrap();
            close(w.lower, lower, 1e-5);
            close(w.upper, upper, 1e-5);
        }
        let perfect = wilson(t(10, 10), Z_95_TWO_SIDED).unwrap();
        assert_eq!(perfect.upper, 1.0);
        let none = wilson(t(0, 10), Z_95_TWO_SIDED).unwrap();
        assert_eq!(none.lower, 0.0);
        close(none.upper, 1.0 - 0.722_467_2, 1e-7);
        assert_eq!(
            wilson(t(0, 0), Z_95_TWO_SIDED).unwrap(),
            Interval {
                lower: 0.0,
                upper: 1.0
            }
        );
    }

    #[test]
    fn clopper_pearson_matches_gate2() {
        // GATE2 §4.12: 10/10, 9/10, 0/10; §3.4: 8/10, 6/10, 5/10 to three places.
        let cases = [
            (t(10, 10), 0.691_502_9, 1.0),
            (t(9, 10), 0.554_983_9, 0.997_471_4),
            (t(0, 10), 0.0, 0.308_497_1),
        ];
        for (tally, lower, upper) in cases {
            let ci = clopper_pearson(tally, 0.05).unwrap();
            close(ci.lower, lower, 1e-7);
            close(ci.upper, upper, 1e-7);
        }
        for (tally, lower, upper) in [
            (t(8, 10), 0.444, 0.975),
            (t(6, 10), 0.262, 0.878),
            (t(5, 10), 0.187, 0.813),
        ] {
            let ci = clopper_pearson(tally, 0.05).unwrap();
            close(ci.lower, lower, 0.0005);
            close(ci.upper, upper, 0.0005);
        }
        // Zero failures: the one-sided bound 1 − 0.05^(1/N) is the two-sided 90 % limit.
        let ci = clopper_pearson(t(10, 10), 0.10).unwrap();
        close(1.0 - ci.lower, 1.0 - 0.05_f64.powf(0.1), 1e-9);
    }

    #[test]
    fn newcombe_difference_matches_gate2() {
        let ci = newcombe_difference(t(10, 10), t(6, 10), Z_95_TWO_SIDED).unwrap();
        close(ci.lower, -0.687_326_2, 1e-7);
        close(ci.upper, -0.038_385_8, 1e-7);
        // 10/10 → 8/10: [−51, +11] pp; 9/10 → 10/10: [−19, +40] pp (rounded in GATE2).
        let ci = newcombe_difference(t(10, 10), t(8, 10), Z_95_TWO_SIDED).unwrap();
        assert_eq!(
            ((ci.lower * 100.0).round(), (ci.upper * 100.0).round()),
            (-51.0, 11.0)
        );
        let ci = newcombe_difference(t(9, 10), t(10, 10), Z_95_TWO_SIDED).unwrap();
        assert_eq!(
            ((ci.lower * 100.0).round(), (ci.upper * 100.0).round()),
            (-19.0, 40.0)
        );
        // The "not worse than" bound: both arms perfect, one-sided 95 % lower limit.
        for (n, bound) in [
            (10, 0.213),
            (20, 0.119),
            (30, 0.083),
            (50, 0.051),
            (100, 0.026),
        ] {
            let ci = newcombe_difference(t(n, n), t(n, n), Z_95_ONE_SIDED).unwrap();
            close(-ci.lower, bound, 0.0006);
        }
    }

    #[test]
    fn pass_hat_k_matches_gate2() {
        let cases = [
            (t(9, 10), 3, 0.70),
            (t(9, 10), 5, 0.50),
            (t(8, 10), 3, 0.467),
            (t(8, 10), 5, 0.222),
            (t(7, 10), 3, 0.292),
            (t(7, 10), 5, 0.083),
        ];
        for (tally, k, expected) in cases {
            close(pass_hat_k(tally, k).unwrap().value, expected, 0.0005);
        }
        assert_eq!(
            pass_hat_k(t(9, 10), 5).unwrap().exact,
            Some(Ratio::reduced(1, 2))
        );
        assert_eq!(pass_hat_k(t(9, 10), 11).unwrap().value, 0.0);
    }

    #[test]
    fn run_level_test_counts_a_crashed_session_once() {
        // GATE2 §3.6: A = 10 × 5/5, B = 9 × 5/5 + one crash (0/5): p = 1/2 exactly, where the
        // pooled per-target Fisher (50/50 vs 45/50) would say 0.028.
        let a = [5; 10];
        let mut b = vec![5; 9];
        b.push(0);
        let r = run_level_permutation(&a, &b).unwrap();
        assert_eq!(r.p_regression.exact, Some(Ratio::reduced(1, 2)));
        assert_eq!(r.relabelings, 184_756.0);
        let pooled = fisher_regression(t(50, 50), t(45, 50)).unwrap();
        close(pooled.value, 0.028, 0.0005);
    }

    #[test]
    fn run_level_test_matches_gate2_spread_failures_vector() {
        let a = [5, 5, 4, 5, 4, 5, 5, 4, 5, 5];
        let b = [5, 3, 5, 3, 5, 4, 3, 5, 3, 5];
        let r = run_level_permutation(&a, &b).unwrap();
        close(r.p_regression.value, 0.085_972_9, 5e-8);
        assert!(r.p_regression.exact.is_some());
        close(r.baseline_mean, 4.7, 1e-12);
        close(r.candidate_mean, 4.1, 1e-12);
        // The improvement mirror is the regression test with the arms swapped.
        let swapped = run_level_permutation(&b, &a).unwrap();
        assert_eq!(swapped.p_improvement, r.p_regression);
        assert_eq!(r.p_regression.exact, Some(Ratio::reduced(19, 221)));
        // GATE2 §3.6's "spread-out failures" (49/50 vs 45/50, every failure in its own run):
        // GATE2 prints 0.125; exact enumeration (checked independently over all 184 756
        // relabelings) gives 91/1292 = 0.0704 — the same as Fisher on "all five passed" 9/10 vs
        // 5/10, as it must be when every score is 4 or 5. docs/gate2.md records the correction.
        let mut a = vec![5; 9];
        a.push(4);
        let mut b = vec![5; 5];
        b.extend([4; 5]);
        let r = run_level_permutation(&a, &b).unwrap();
        assert_eq!(r.p_regression.exact, Some(Ratio::reduced(91, 1292)));
        assert_eq!(
            r.p_regression.exact,
            fisher_regression(t(9, 10), t(5, 10)).unwrap().exact
        );
    }

    #[test]
    fn run_level_test_past_u128_uses_floating_counts() {
        // 70 + 70 runs: C(140, 70) ≈ 9.4e40 > 2^128.
        let a = vec![5; 70];
        let mut b = vec![5; 69];
        b.push(0);
        let r = run_level_permutation(&a, &b).unwrap();
        assert!(r.p_regression.exact.is_none());
        close(r.p_regression.value, 0.5, 1e-12);
        assert!(matches!(
            run_level_permutation(&[], &[1]),
            Err(StatsError::EmptyArm { arm: "baseline" })
        ));
    }

    #[test]
    fn median_and_hodges_lehmann_shift() {
        assert_eq!(median(&[3.0, 1.0, 2.0]).unwrap(), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]).unwrap(), 2.5);
        let a = [10.0, 11.0, 12.0];
        let b = [12.0, 13.0, 15.0];
        // Differences b − a: 2,1,0, 3,2,1, 5,4,3 → median 2.
        assert_eq!(hodges_lehmann(&a, &b).unwrap(), 2.0);
        assert_eq!(
            median(&[1.0, f64::NAN]).unwrap_err().to_string(),
            "arm run 1: value NaN is not a finite number"
        );
        assert!(matches!(
            hodges_lehmann(&[], &b),
            Err(StatsError::EmptyArm { arm: "baseline" })
        ));
    }

    #[test]
    fn mean_permutation_is_exact_on_small_arms() {
        // A = [1, 2], B = [3, 4]: of the C(4, 2) = 6 relabelings only B = {3, 4} has a sum ≥ 7.
        let r = mean_permutation(&[1.0, 2.0], &[3.0, 4.0]).unwrap();
        assert_eq!(r.relabelings, 6);
        close(r.difference, 2.0, 1e-12);
        close(r.p_increase, 1.0 / 6.0, 1e-15);
        close(r.p_decrease, 1.0, 1e-15);
        close(r.p_two_sided, 2.0 / 6.0, 1e-15);
        // Floating sums equal up to rounding tie with the observed one (0.1 + 0.2 ≠ 0.3).
        let r = mean_permutation(&[0.1, 0.2], &[0.3, 0.0]).unwrap();
        close(r.p_increase, 4.0 / 6.0, 1e-15);
        // 10 + 10: all 184 756 relabelings; identical arms give p = 1 both ways.
        let xs: Vec<f64> = (0..10).map(f64::from).collect();
        let r = mean_permutation(&xs, &xs).unwrap();
        assert_eq!(r.relabelings, 184_756);
        assert!(r.p_increase > 0.5 && r.p_decrease > 0.5);
        close(r.p_two_sided, 1.0, 1e-15);
    }

    #[test]
    fn mean_permutation_refuses_what_it_cannot_enumerate() {
        let xs = vec![1.0; 14];
        let e = mean_permutation(&xs, &xs).unwrap_err();
        assert!(matches!(
            e,
            StatsError::TooManyRelabelings {
                n_a: 14,
                n_b: 14,
                ..
            }
        ));
        assert!(e.to_string().contains("at most 13 + 13 runs"), "{e}");
        assert!(mean_permutation(&[1.0; 13], &[2.0; 13]).is_ok());
    }

    #[test]
    fn compare_metric_summarises_one_metric_per_arm() {
        let minutes_a = [10.0, 11.0, 12.0, 30.0];
        let minutes_b = [12.0, 13.0, 15.0, 14.0];
        let m = compare_metric(&minutes_a, &minutes_b).unwrap();
        assert_eq!((m.baseline_median, m.candidate_median), (11.5, 13.5));
        assert_eq!(m.median_difference, 2.0);
        close(m.baseline_mean, 15.75, 1e-12);
        // Differences b − a: 2,1,0,−18, 3,2,1,−17, 5,4,3,−15, 4,3,2,−16 → median 2.
        assert_eq!(m.hodges_lehmann, 2.0);
        assert_eq!(m.permutation.unwrap().relabelings, 70);
        let long = vec![1.0; 14];
        assert!(compare_metric(&long, &long).unwrap().permutation.is_none());
        assert!(compare_metric(&[], &long).is_err());
    }

    #[test]
    fn choose_exact_is_exact_up_to_the_u128_limit() {
        assert_eq!(choose_exact(20, 10), Some(184_756));
        assert_eq!(
            choose_exact(130, 65),
            Some(95_067_625_827_960_698_145_584_333_020_095_113_100)
        );
        assert_eq!(choose_exact(140, 70), None);
        assert_eq!(choose_exact(3, 4), None);
        assert_eq!(choose_exact(200, 1), Some(200));
        assert_eq!(choose_exact(300, 2), Some(44_850));
        assert_eq!(choose_exact(300, 150), None);
        assert_eq!(choose_exact(256, 128), None);
        assert_eq!(
            choose_exact(256, 20),
            Some(280_437_550_101_996_454_288_136_030_400)
        );
    }
}

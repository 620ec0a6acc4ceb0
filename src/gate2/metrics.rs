//! Descriptive statistics for continuous per-run metrics (GATE2 §3.8, §4.7.6): minutes, turns,
//! tool calls, tool errors, tokens, cache-read share, cost — median per arm, the Hodges–Lehmann
//! shift and an exact two-sample permutation p on the difference of means (enumerated up to
//! [`MAX_ENUMERATED_RELABELINGS`] relabelings). Descriptive unless a plan makes a guardrail
//! gating. Split from [`super::stats`], which re-exports everything here.

use serde::Serialize;

use super::stats::{
    MAX_ENUMERATED_RELABELINGS, MAX_TOTAL_RUNS, StatsError, check_finite, choose_exact, ln_choose,
};

/// The median of finite values (the mean of the two middle values for an even count), in the
/// values' unit. Errors: empty input, a NaN or infinite value.
pub fn median(values: &[f64]) -> Result<f64, StatsError> {
    check_finite("arm", values)?;
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Ok(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// Hodges–Lehmann shift: the median of all n_A·n_B differences B_j − A_i, in the metric's unit
/// (GATE2 §4.7.6); positive when the candidate's values are larger. Errors: an empty arm, a NaN
/// or infinite value.
pub fn hodges_lehmann(baseline: &[f64], candidate: &[f64]) -> Result<f64, StatsError> {
    check_finite("baseline", baseline)?;
    check_finite("candidate", candidate)?;
    let differences: Vec<f64> = candidate
        .iter()
        .flat_map(|b| baseline.iter().map(move |a| b - a))
        .collect();
    median(&differences)
}

/// The exact permutation test on the difference of means of a continuous per-run metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeanPermutation {
    /// mean(B) − mean(A), in the metric's unit.
    pub difference: f64,
    /// P(mean(B) − mean(A) ≥ observed) over all relabelings: small when B is larger.
    pub p_increase: f64,
    /// P(mean(B) − mean(A) ≤ observed): small when B is smaller.
    pub p_decrease: f64,
    /// P(|mean(B) − mean(A)| ≥ |observed|).
    pub p_two_sided: f64,
    /// C(n_A + n_B, n_B), every one enumerated.
    pub relabelings: u64,
}

/// Exact two-sample permutation test on the mean of a continuous metric (minutes, tokens,
/// cost, …; GATE2 §3.8, §4.7.6), by enumerating every relabeling of the pooled runs into
/// arms of the observed sizes (10 + 10: 184 756). Sums are compared with a relative tolerance
/// of 1e-9 of the data's magnitude so relabelings equal to the observed one up to float
/// rounding count as "as extreme". Descriptive unless a plan makes the metric a gating
/// guardrail.
///
/// Errors: an empty arm, a NaN or infinite value, more than [`MAX_ENUMERATED_RELABELINGS`]
/// relabelings (there is no sampling fallback).
pub fn mean_permutation(
    baseline: &[f64],
    candidate: &[f64],
) -> Result<MeanPermutation, StatsError> {
    check_finite("baseline", baseline)?;
    check_finite("candidate", candidate)?;
    let (n_a, n_b) = (baseline.len(), candidate.len());
    let n = n_a + n_b;
    let relabelings = u32::try_from(n)
        .ok()
        .zip(u32::try_from(n_b).ok())
        .and_then(|(n, k)| choose_exact(n, k))
        .filter(|&r| r <= MAX_ENUMERATED_RELABELINGS)
        .ok_or_else(|| StatsError::TooManyRelabelings {
            relabelings: (ln_choose(
                (n as u32).min(MAX_TOTAL_RUNS),
                (n_b as u32).min((n as u32).min(MAX_TOTAL_RUNS)),
            ))
            .exp(),
            n_a,
            n_b,
        })?;
    let pooled: Vec<f64> = baseline.iter().chain(candidate).copied().collect();
    let total: f64 = pooled.iter().sum();
    let observed_b: f64 = candidate.iter().sum();
    let scale = pooled
        .iter()
        .map(|x| x.abs())
        .sum::<f64>()
        .max(f64::MIN_POSITIVE);
    let tol = 1e-9 * scale;
    // mean(B) − mean(A) = S_B/n_B − (T − S_B)/n_A is increasing in S_B, so compare sums.
    let diff_of = |s_b: f64| s_b / n_b as f64 - (total - s_b) / n_a as f64;
    let observed = diff_of(observed_b);
    let (mut ge, mut le, mut two) = (0u64, 0u64, 0u64);
    let mut visit = |s_b: f64| {
        if s_b >= observed_b - tol {
            ge += 1;
        }
        if s_b <= observed_b + tol {
            le += 1;
        }
        // |d(S)| ≥ |d(obs)|, with the tolerance carried through d's slope.
        let slope = 1.0 / n_b as f64 + 1.0 / n_a as f64;
        if diff_of(s_b).abs() >= observed.abs() - tol * slope {
            two += 1;
        }
    };
    enumerate_subset_sums(&pooled, n_b, &mut visit);
    let r = relabelings as f64;
    Ok(MeanPermutation {
        difference: observed,
        p_increase: ge as f64 / r,
        p_decrease: le as f64 / r,
        p_two_sided: two as f64 / r,
        relabelings: relabelings as u64,
    })
}

/// A continuous per-run metric (minutes, turns, tool calls, tokens, cache-read share, cost)
/// compared between arms, all in the metric's unit (GATE2 §4.7.6). Descriptive.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    /// Median over baseline runs.
    pub baseline_median: f64,
    /// Median over candidate runs.
    pub candidate_median: f64,
    /// Mean over baseline runs.
    pub baseline_mean: f64,
    /// Mean over candidate runs.
    pub candidate_mean: f64,
    /// candidate_median − baseline_median.
    pub median_difference: f64,
    /// Hodges–Lehmann shift (median of all B − A).
    pub hodges_lehmann: f64,
    /// The exact permutation test on the mean; `None` past [`MAX_ENUMERATED_RELABELINGS`].
    pub permutation: Option<MeanPermutation>,
}

/// Medians, means, Δ median, Hodges–Lehmann shift and the exact permutation p of one metric.
/// Errors: an empty arm, a NaN or infinite value (the permutation test past its enumeration
/// limit is `None`, not an error).
pub fn compare_metric(baseline: &[f64], candidate: &[f64]) -> Result<MetricComparison, StatsError> {
    let permutation = match mean_permutation(baseline, candidate) {
        Ok(p) => Some(p),
        Err(StatsError::TooManyRelabelings { .. }) => None,
        Err(e) => return Err(e),
    };
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let (baseline_median, candidate_median) = (median(baseline)?, median(candidate)?);
    Ok(MetricComparison {
        baseline_median,
        candidate_median,
        baseline_mean: mean(baseline),
        candidate_mean: mean(candidate),
        median_difference: candidate_median - baseline_median,
        hodges_lehmann: hodges_lehmann(baseline, candidate)?,
        permutation,
    })
}

/// Calls `visit` with the sum of every size-`pick` subset of `values`.
fn enumerate_subset_sums(values: &[f64], pick: usize, visit: &mut impl FnMut(f64)) {
    fn go(values: &[f64], start: usize, left: usize, sum: f64, visit: &mut impl FnMut(f64)) {
        if left == 0 {
            visit(sum);
            return;
        }
        for (i, &v) in values
            .iter()
            .enumerate()
            .take(values.len() + 1 - left)
            .skip(start)
        {
            go(values, i + 1, left - 1, sum + v, visit);
        }
    }
    go(values, 0, pick, 0.0, visit);
}

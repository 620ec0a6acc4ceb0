//! Deterministic curtailment (GATE2 §3.7): the matrix may stop before N runs per arm once no
//! way the remaining runs could turn out changes the verdict, so the decision is the one the
//! full N would give and no α is spent. Pure: a function of the outcome table and the rules.
//!
//! The rule curtails towards UNCHANGED only: the comparison is *settled* when, completing the
//! missing runs in the most extreme way for each direction — every missing baseline run passing
//! every target and every missing candidate run failing all (regression), and the mirror
//! (improvement) —, no target's one-sided Fisher p and no run-level permutation p reaches α.
//! Both tests' p-values are monotone in the counts, so the extreme completion bounds every
//! completion, and α bounds α/K for any Tarone K ≥ 1. A table with a broken invariant, a
//! verification problem, an excluded outcome or an integrity problem is never settled (those
//! decide INVALID or REGRESSED, which the remaining runs cannot undo, but the report must see
//! the full matrix).
//!
//! Example (pinned below): both arms 7/7 on every target of 5 with N = 10: the best case for
//! a regression is 10/10 vs 7/10, p = 0.105 > 0.05, so the matrix stops after 7 runs per arm.

use serde::Serialize;

use super::stats::{self, Tally};
use super::verdict::{Outcome, OutcomeTable, Rules, Side};

/// Where a comparison was curtailed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Curtailment {
    /// Runs per arm the comparison has (the point it stopped at).
    pub baseline_runs: u32,
    /// Runs of the candidate arm.
    pub candidate_runs: u32,
    /// The smallest p any completion could reach (per target or run level, either direction).
    pub best_p: f64,
}

/// Whether `table` is settled under `rules` (see the module docs): `Some` with the point when
/// no completion of the missing runs (up to `rules.runs` per arm) can make any test reject at
/// `rules.alpha`; `None` when one could, when the table is already complete, or when it holds
/// anything but passes and failures of verified runs.
pub fn settled(table: &OutcomeTable, rules: &Rules) -> Option<Curtailment> {
    if !table.integrity_problems.is_empty()
        || table.stopped.is_some()
        || table.targets.is_empty()
        || table.runs.is_empty()
    {
        return None;
    }
    let mut scores = (Vec::new(), Vec::new());
    for run in &table.runs {
        if !run.verify_problems.is_empty()
            || !run.breaches.is_empty()
            || run
                .outcomes
                .iter()
                .any(|o| !matches!(o, Outcome::Pass | Outcome::Fail))
        {
            return None;
        }
        let score = run.outcomes.iter().filter(|&&o| o == Outcome::Pass).count() as u32;
        match run.side {
            Side::Baseline => scores.0.push(score),
            Side::Candidate => scores.1.push(score),
        }
    }
    let (na, nb) = (scores.0.len() as u32, scores.1.len() as u32);
    if na > rules.runs || nb > rules.runs || (na == rules.runs && nb == rules.runs) {
        return None;
    }
    let (ma, mb) = (rules.runs - na, rules.runs - nb);
    let targets = table.targets.len() as u32;
    let mut best = 1.0f64;
    for t in 0..table.targets.len() {
        let passed = |side: Side| {
            table
                .runs
                .iter()
                .filter(|r| r.side == side && r.outcomes[t] == Outcome::Pass)
                .count() as u32
        };
        let (ka, kb) = (passed(Side::Baseline), passed(Side::Candidate));
        let n = rules.runs;
        // Regression's extreme: missing A runs pass, missing B runs fail; improvement's mirror.
        let regression =
            stats::fisher_regression(Tally::new(ka + ma, n), Tally::new(kb, n)).ok()?;
        let improvement =
            stats::fisher_improvement(Tally::new(ka, n), Tally::new(kb + mb, n)).ok()?;
        best = best.min(regression.value).min(improvement.value);
    }
    let extend = |mut s: Vec<u32>, missing: u32, score: u32| {
        s.extend(std::iter::repeat_n(score, missing as usize));
        s
    };
    if rules.run_level {
        let worst = stats::run_level_permutation(
            &extend(scores.0.clone(), ma, targets),
            &extend(scores.1.clone(), mb, 0),
        )
        .ok()?;
        let bestcase = stats::run_level_permutation(
            &extend(scores.0.clone(), ma, 0),
            &extend(scores.1.clone(), mb, targets),
        )
        .ok()?;
        best = best
            .min(worst.p_regression.value)
            .min(bestcase.p_improvement.value);
    }
    (best > rules.alpha).then_some(Curtailment {
        baseline_runs: na,
        candidate_runs: nb,
        best_p: best,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate2::verdict::RunRecord;

    fn table(a: &[&[Outcome]], b: &[&[Outcome]]) -> OutcomeTable {
        let targets = a.first().or(b.first()).map_or(0, |r| r.len());
        let mut runs = Vec::new();
        for (side, arm) in [(Side::Baseline, a), (Side::Candidate, b)] {
            for (i, outcomes) in arm.iter().enumerate() {
                runs.push(RunRecord {
                    id: format!(
                        "{}-{:02}",
                        if side == Side::Baseline { 'A' } else { 'B' },
                        i + 1
                    ),
                    side,
                    verify_problems: Vec::new(),
                    breaches: Vec::new(),
                    outcomes: outcomes.to_vec(),
                });
            }
        }
        OutcomeTable {
            targets: (0..targets).map(|t| format!("t{t}")).collect(),
            runs,
            integrity_problems: Vec::new(),
            stopped: None,
        }
    }

    fn rules(runs: u32) -> Rules {
        Rules {
            runs,
            alpha: 0.05,
            run_level: false,
            max_excluded: 0.2,
            min_valid: runs,
            curtailed: false,
        }
    }

    const PASS5: &[Outcome] = &[Outcome::Pass; 5];

    #[test]
    fn both_arms_perfect_after_seven_of_ten_runs_is_settled_and_after_six_is_not() {
        // Best case for a regression after 7 + 7 perfect runs: 10/10 vs 7/10, p = 0.1053.
        let seven = table(&[PASS5; 7], &[PASS5; 7]);
        let c = settled(&seven, &rules(10)).expect("settled after 7 runs per arm");
        assert_eq!((c.baseline_runs, c.candidate_runs), (7, 7));
        assert!((c.best_p - 0.105_263_157_9).abs() < 1e-9, "{}", c.best_p);
        // After 6: 10/10 vs 6/10 gives p = 14/323 = 0.0433 ≤ 0.05, so it could still reject.
        let six = table(&[PASS5; 6], &[PASS5; 6]);
        assert_eq!(settled(&six, &rules(10)), None);
    }

    #[test]
    fn with_the_run_level_test_seven_perfect_runs_per_arm_still_settle_and_six_do_not() {
        // Run-level extreme after 7 + 7: three missing B runs at 0 of 5 — the candidate holds
        // all three zeros in C(17,7) of C(20,10) relabelings, p = 0.1053; after 6 + 6, four
        // zeros: C(16,6)/C(20,10) = 0.0433.
        let mut r = rules(10);
        r.run_level = true;
        let c = settled(&table(&[PASS5; 7], &[PASS5; 7]), &r).expect("settled");
        assert!(
            (c.best_p - 19_448.0 / 184_756.0).abs() < 1e-9,
            "{}",
            c.best_p
        );
        assert_eq!(settled(&table(&[PASS5; 6], &[PASS5; 6]), &r), None);
    }

    #[test]
    fn a_complete_table_or_one_with_an_excluded_outcome_is_never_curtailed() {
        assert_eq!(
            settled(&table(&[PASS5; 10], &[PASS5; 10]), &rules(10)),
            None
        );
        let mut odd = PASS5.to_vec();
        odd[2] = Outcome::InfraError;
        let with_excluded = table(
            &[PASS5; 7],
            &[PASS5, PASS5, PASS5, PASS5, PASS5, PASS5, &odd],
        );
        assert_eq!(settled(&with_excluded, &rules(10)), None);
    }
}

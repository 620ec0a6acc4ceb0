//! Runs over time (U2): past run directories and gate-2 comparison
//! directories read back from their own files — the manifest (date, agent identity, agent
//! host, suite), the JSON report (verdict per target), the seal and the perf events (phase
//! percentiles) — indexed, filtered and sorted ([`index`]), opened one at a time ([`detail`]),
//! and two runs compared side by side ([`pair`]). `patchdiff runs` ([`cli`]) and the console's
//! `runs` views show them. Nothing here writes: a past run is evidence.
//!
//! For a console pane: [`index::query`] gives the `Vec<RunSummary>` to list (sorted,
//! filtered), [`detail::open`] an entry's [`detail::RunDetail`] (verdicts, stories, evidence
//! files, processes as they ended; a comparison's per-target strips), [`detail::story`] a past
//! run's target story, [`pair::pair`] two runs side by side.

pub mod cli;
pub mod comparison;
pub mod detail;
pub mod index;
pub mod pair;
pub mod run;
pub mod summary;

use std::path::Path;

pub use index::{
    EntryKind, RunFilter, RunSummary, RunVerdict, SealState, SortKey, index, query, read_run,
    resolve,
};
pub use pair::{change, compare, phase_durations};
pub use summary::date;
pub(crate) use summary::verdict_word;

/// The most runs the console's `runs` view lists.
pub const RUNS_LISTED: usize = 50;

/// The entries under `root` (runs and comparisons, unreadable ones included), newest first,
/// at most [`RUNS_LISTED`].
pub fn list_runs(root: &Path) -> Vec<RunSummary> {
    let mut runs = index(root);
    runs.truncate(RUNS_LISTED);
    runs
}

/// The list as text, one entry per line: id, date, model, host, verdict, per-target verdicts
/// (an unreadable entry: why). Every field passes [`crate::display::visible_inline`].
pub fn render_list(root: &Path, runs: &[RunSummary]) -> String {
    use crate::display::visible_inline;
    if runs.is_empty() {
        return format!("no runs under {}", root.display());
    }
    let mut out = vec![format!(
        "{} runs under {} (newest first)",
        runs.len(),
        root.display()
    )];
    for r in runs {
        if r.verdict == RunVerdict::Unreadable {
            out.push(format!(
                "{:<28} UNREADABLE · {}",
                visible_inline(&r.id),
                visible_inline(r.problem.as_deref().unwrap_or("-"))
            ));
            continue;
        }
        let targets: Vec<String> = r
            .verdicts
            .iter()
            .map(|(name, v)| format!("{} {v}", visible_inline(name)))
            .collect();
        out.push(format!(
            "{:<28} {} · {} · {} · {} · {}",
            visible_inline(&r.id),
            date(r.started_ms),
            visible_inline(r.model.as_deref().unwrap_or("-")),
            visible_inline(r.host_label()),
            verdict_word(r),
            if targets.is_empty() {
                "-".to_owned()
            } else {
                targets.join(", ")
            }
        ));
    }
    out.join("\n")
}

/// What a console `runs` view showed, as data (`console --script … --json`): `List` the
/// entries, `Compare` the [`pair::RunPair`], `Open` the [`detail::RunDetail`]. Errors: an id
/// that names no entry or several, or a run that cannot be read.
pub fn view_json(
    root: &Path,
    action: &crate::canary::command::RunsAction,
) -> Result<serde_json::Value, String> {
    use crate::canary::command::RunsAction;
    let value = match action {
        RunsAction::List => serde_json::to_value(list_runs(root)),
        RunsAction::Compare(a, b) => {
            serde_json::to_value(pair::pair(&resolve(root, a)?, &resolve(root, b)?)?)
        }
        RunsAction::Open(id) => serde_json::to_value(detail::open(root, id)?),
    };
    value.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::PerfEvent;
    use serde_json::{Value, json};

    fn run(root: &Path, id: &str, started: f64, verdicts: &[(&str, &str)], phases: &[f64]) {
        let dir = root.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            json!({"run_id": id, "started_ms": started, "agent": {"model": "m-1"}}).to_string(),
        )
        .unwrap();
        let targets: Vec<Value> = verdicts
            .iter()
            .map(|(n, s)| json!({"name": n, "status": s, "evaluated": true}))
            .collect();
        let passed = verdicts.iter().all(|(_, s)| *s == "pass");
        std::fs::write(
            dir.join("report.json"),
            json!({"passed": passed, "targets": targets}).to_string(),
        )
        .unwrap();
        let events: Vec<String> = phases
            .iter()
            .map(|d| {
                let mut ev = PerfEvent::point("phase_active");
                ev.duration_ms = *d;
                serde_json::to_string(&ev).unwrap()
            })
            .collect();
        std::fs::write(dir.join("observed.perf.jsonl"), events.join("\n")).unwrap();
    }

    #[test]
    fn runs_are_listed_newest_first_with_their_verdicts() {
        let root = tempfile::tempdir().unwrap();
        run(root.path(), "r-1", 1_000.0, &[("chess", "fail")], &[]);
        run(
            root.path(),
            "r-2",
            1_796_000_000_000.0,
            &[("chess", "pass")],
            &[],
        );
        std::fs::create_dir(root.path().join("r-empty")).unwrap();
        std::fs::create_dir(root.path().join("not-a-run")).unwrap();
        let runs = list_runs(root.path());
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        // An empty run directory is listed, as unreadable, never skipped.
        assert_eq!(ids, ["r-2", "r-1", "r-empty"]);
        let text = render_list(root.path(), &runs);
        assert!(
            text.lines()
                .any(|l| l.starts_with("r-empty") && l.contains("UNREADABLE")),
            "{text}"
        );
        assert!(text.contains("r-2") && text.contains("PASSED") && text.contains("chess pass"));
        assert!(text.contains("2026-11-30 00:53"), "{text}");
        assert!(text.contains("chess FAIL"), "{text}");
    }

    #[test]
    fn a_run_against_a_loopback_endpoint_is_listed_and_compared_as_a_rehearsal() {
        let root = tempfile::tempdir().unwrap();
        run(root.path(), "r-real", 1.0, &[("chess", "pass")], &[]);
        run(root.path(), "r-rehearsal", 2.0, &[("chess", "pass")], &[]);
        std::fs::write(
            root.path().join("r-rehearsal/manifest.json"),
            json!({"run_id": "r-rehearsal", "started_ms": 2.0,
                   "agent": {"model": "claude-sonnet-4-5"},
                   "configuration": {"provider_endpoints": [
                       {"variable": "ANTHROPIC_BASE_URL", "host": "127.0.0.1", "loopback": true}]}})
            .to_string(),
        )
        .unwrap();
        let text = render_list(root.path(), &list_runs(root.path()));
        let line = |id: &str| text.lines().find(|l| l.starts_with(id)).unwrap().to_owned();
        assert!(line("r-rehearsal").contains("PASSED (rehearsal)"), "{text}");
        assert!(!line("r-real").contains("rehearsal"), "{text}");
        let compared = compare(
            &root.path().join("r-real"),
            &root.path().join("r-rehearsal"),
        )
        .unwrap();
        assert!(
            compared.lines().nth(1).unwrap().ends_with("· rehearsal"),
            "{compared}"
        );
        assert!(
            !compared.lines().next().unwrap().contains("rehearsal"),
            "{compared}"
        );
    }

    #[test]
    fn a_change_into_a_verdict_that_judged_nothing_is_named_never_regressed() {
        let one_run_each = "changed (1 run each — run a comparison to decide)";
        for (a, b, expected) in [
            ("pass", "pass", ""),
            ("pass", "FAIL", one_run_each),
            ("FAIL", "pass", one_run_each),
            (
                "pass",
                "infra_error",
                "infra_error (the check environment, not the agent)",
            ),
            ("pass", "flaky", "flaky (the check disagreed with itself)"),
            ("pass", "-", "not evaluated"),
            (
                "pass",
                "infra_abort",
                "infra_error (infra_abort: the run stopped before the agent acted)",
            ),
            (
                "infra_error",
                "FAIL",
                "A was infra_error (the check environment, not the agent): nothing to compare",
            ),
            ("-", "pass", "A was not evaluated: nothing to compare"),
        ] {
            assert_eq!(change(a, b), expected, "{a} → {b}");
        }
    }

    #[test]
    fn an_aborted_run_reads_back_as_infra_abort_for_every_target() {
        let root = tempfile::tempdir().unwrap();
        run(
            root.path(),
            "r-x",
            1.0,
            &[("chess", "infra_error"), ("limiter", "fail")],
            &[],
        );
        let dir = root.path().join("r-x");
        let mut report: Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        report["outcome"] = json!("infra_abort");
        std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
        let summary = read_run(&dir).unwrap();
        assert!(
            summary.verdicts.values().all(|v| v == "infra_abort"),
            "{summary:?}"
        );
        assert!(render_list(root.path(), &[summary]).contains("INFRA_ABORT"));
    }

    #[test]
    fn a_comparison_names_changes_without_calling_one_run_a_regression_and_phase_deltas() {
        let root = tempfile::tempdir().unwrap();
        run(
            root.path(),
            "r-a",
            1.0,
            &[("chess", "fail"), ("limiter", "pass")],
            &[10.0, 20.0, 30.0],
        );
        run(
            root.path(),
            "r-b",
            2.0,
            &[("chess", "pass"), ("limiter", "infra_error")],
            &[15.0, 25.0, 90.0],
        );
        let text = compare(&root.path().join("r-a"), &root.path().join("r-b")).unwrap();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .unwrap()
                .to_owned()
        };
        // One run each is not evidence: no "fixed" nor "REGRESSED", and a change into a broken
        // check is the check environment's.
        assert!(
            line("chess").ends_with("changed (1 run each — run a comparison to decide)"),
            "{text}"
        );
        assert!(
            line("limiter").ends_with("infra_error (the check environment, not the agent)"),
            "{text}"
        );
        assert!(
            !text.contains("REGRESSED") && !text.contains("fixed"),
            "{text}"
        );
        let phase = line("phase_active");
        assert!(phase.contains("20.00") && phase.contains("25.00") && phase.contains("+5.00"));
        assert!(phase.contains("+60.00"), "p95 30 → 90: {phase}");
        assert!(compare(&root.path().join("nothing"), &root.path().join("r-b")).is_err());
    }
}

//! Runs over time (U2): past run directories read back from their own files — the
//! manifest (date, agent identity, agent host), the JSON report (verdict per target) and the
//! perf events (phase percentiles) — listed newest first, and two runs compared side by side.
//! Nothing here writes: a past run is evidence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::telemetry::PerfEvent;

/// The most runs `runs` lists.
pub const RUNS_LISTED: usize = 50;

/// What a run directory says about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: String,
    pub path: PathBuf,
    /// Unix ms the run started (from its manifest), 0 when unknown.
    pub started_ms: f64,
    /// The recorded model and the agent host, when known.
    pub model: Option<String>,
    pub host: Option<String>,
    /// `Some(true)` passed, `Some(false)` failed, `None` no report.
    pub passed: Option<bool>,
    /// Target name → verdict (`pass`, `FAIL`, `infra_error`, `flaky`, `infra_abort` — the run
    /// stopped before the agent acted, nothing judged — or `-`, not evaluated).
    pub verdicts: BTreeMap<String, String>,
    /// `report.json`'s `outcome` (`passed`, `failed`, `infra_abort`), when it has one.
    pub outcome: Option<String>,
    /// The manifest records a loopback provider endpoint — a rehearsal.
    pub rehearsal: bool,
}

/// Reads one run directory. Errors when it holds neither a manifest nor a report.
pub fn read_run(path: &Path) -> Result<RunSummary, String> {
    let json = |name: &str| -> Option<Value> {
        std::fs::read(path.join(name))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    };
    let manifest = json("manifest.json");
    let report = json("report.json");
    if manifest.is_none() && report.is_none() {
        return Err(format!(
            "{} has neither manifest.json nor report.json",
            path.display()
        ));
    }
    let manifest = manifest.unwrap_or(Value::Null);
    let report = report.unwrap_or(Value::Null);
    let id = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut verdicts = BTreeMap::new();
    let aborted = report["outcome"] == "infra_abort";
    for t in report["targets"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or("?").to_owned();
        let verdict = match t["status"].as_str() {
            // An aborted run judged no target, whatever a control said.
            _ if aborted => "infra_abort",
            Some("pass") => "pass",
            Some("fail") => "FAIL",
            Some("infra_error") => "infra_error",
            Some("flaky") => "flaky",
            _ if t["evaluated"] == true && t["full_byte"] == true && t["behavioral"] == true => {
                "pass"
            }
            _ if t["evaluated"] == true => "FAIL",
            _ => "-",
        };
        verdicts.insert(name, verdict.to_owned());
    }
    Ok(RunSummary {
        id,
        path: path.to_owned(),
        started_ms: manifest["started_ms"].as_f64().unwrap_or(0.0),
        model: manifest["agent"]["model"]
            .as_str()
            .or(report["agent"]["model"].as_str())
            .map(str::to_owned),
        host: report["agent_host"]["host"]
            .as_str()
            .or(manifest["configuration"]["agent_host"]["host"].as_str())
            .map(str::to_owned),
        passed: report["passed"].as_bool(),
        verdicts,
        outcome: report["outcome"].as_str().map(str::to_owned),
        rehearsal: crate::canary::record::is_rehearsal(&manifest),
    })
}

/// The run directories under `root` (names starting `r-`), newest first, at most
/// [`RUNS_LISTED`]. Unreadable directories are skipped.
pub fn list_runs(root: &Path) -> Vec<RunSummary> {
    let mut runs: Vec<RunSummary> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("r-"))
        .filter_map(|e| read_run(&e.path()).ok())
        .collect();
    runs.sort_by(|a, b| {
        b.started_ms
            .total_cmp(&a.started_ms)
            .then_with(|| b.id.cmp(&a.id))
    });
    runs.truncate(RUNS_LISTED);
    runs
}

/// The list as text, one run per line: id, date, model, host, verdict, per-target verdicts.
pub fn render_list(root: &Path, runs: &[RunSummary]) -> String {
    if runs.is_empty() {
        return format!("no runs under {}", root.display());
    }
    let mut out = vec![format!(
        "{} runs under {} (newest first)",
        runs.len(),
        root.display()
    )];
    for r in runs {
        let targets: Vec<String> = r
            .verdicts
            .iter()
            .map(|(name, v)| format!("{name} {v}"))
            .collect();
        out.push(format!(
            "{:<28} {} · {} · {} · {} · {}",
            r.id,
            date(r.started_ms),
            r.model.as_deref().unwrap_or("-"),
            r.host.as_deref().unwrap_or("scripted"),
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

/// `PASSED`, `FAILED` or `no report`, with ` (rehearsal)` for a loopback-endpoint run.
fn verdict_word(r: &RunSummary) -> String {
    let word = match (r.passed, r.outcome.as_deref()) {
        (_, Some("infra_abort")) => "INFRA_ABORT",
        (Some(true), _) => "PASSED",
        (Some(false), _) => "FAILED",
        (None, _) => "no report",
    };
    if r.rehearsal {
        format!("{word} (rehearsal)")
    } else {
        word.to_owned()
    }
}

/// `YYYY-MM-DD HH:MM` (UTC) of a Unix ms time, `-` for 0.
fn date(ms: f64) -> String {
    if ms <= 0.0 {
        return "-".into();
    }
    let secs = (ms / 1000.0) as i64;
    let (y, m, d) = crate::canary::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Durations (ms) of each `phase_*` event over every perf-events file of a run.
pub fn phase_durations(run: &Path) -> BTreeMap<String, Vec<f64>> {
    let mut phases: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let files = std::fs::read_dir(run)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".perf.jsonl"))
        });
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for ev in text
            .lines()
            .filter_map(|l| serde_json::from_str::<PerfEvent>(l).ok())
        {
            if ev.name.starts_with("phase_") && ev.duration_ms.is_finite() {
                phases.entry(ev.name).or_default().push(ev.duration_ms);
            }
        }
    }
    for v in phases.values_mut() {
        v.sort_by(f64::total_cmp);
    }
    phases
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// What one run each says about a target's change from verdict `a` to `b`.
/// A change into (or out of) a verdict that judged nothing of the agent — `infra_error` (the
/// check environment), `flaky` (the check disagreed with itself), `infra_abort` (the run
/// stopped before the agent acted), `-` (not evaluated) — is named as such; a change between
/// `pass` and `FAIL` is one run each, which is not evidence: never `REGRESSED` or `fixed`.
pub fn change(a: &str, b: &str) -> String {
    let unjudged = |v: &str| match v {
        "infra_error" => Some("infra_error (the check environment, not the agent)"),
        "flaky" => Some("flaky (the check disagreed with itself)"),
        "infra_abort" => Some("infra_error (infra_abort: the run stopped before the agent acted)"),
        "-" => Some("not evaluated"),
        _ => None,
    };
    if a == b {
        return String::new();
    }
    match (unjudged(a), unjudged(b)) {
        (_, Some(into)) => into.to_owned(),
        (Some(from), None) => format!("A was {from}: nothing to compare"),
        (None, None) => "changed (1 run each — run a comparison to decide)".to_owned(),
    }
}

/// Two runs side by side: per-target verdict changes ([`change`]), then phase p50/p95 with
/// deltas.
pub fn compare(a: &Path, b: &Path) -> Result<String, String> {
    let (ra, rb) = (read_run(a)?, read_run(b)?);
    let mut out = vec![
        format!(
            "A {} · {} · {}{}",
            ra.id,
            date(ra.started_ms),
            ra.model.as_deref().unwrap_or("-"),
            if ra.rehearsal { " · rehearsal" } else { "" }
        ),
        format!(
            "B {} · {} · {}{}",
            rb.id,
            date(rb.started_ms),
            rb.model.as_deref().unwrap_or("-"),
            if rb.rehearsal { " · rehearsal" } else { "" }
        ),
        String::new(),
        format!("{:<16} {:<12} {:<12} change", "target", "A", "B"),
    ];
    let names: std::collections::BTreeSet<&String> =
        ra.verdicts.keys().chain(rb.verdicts.keys()).collect();
    for name in names {
        let va = ra.verdicts.get(name).map_or("-", String::as_str);
        let vb = rb.verdicts.get(name).map_or("-", String::as_str);
        out.push(format!("{name:<16} {va:<12} {vb:<12} {}", change(va, vb)));
    }
    out.push(String::new());
    out.push(format!(
        "{:<18} {:>10} {:>10} {:>10}   {:>10} {:>10} {:>10}",
        "phase", "A p50", "B p50", "Δ p50", "A p95", "B p95", "Δ p95"
    ));
    let (pa, pb) = (phase_durations(a), phase_durations(b));
    let phases: std::collections::BTreeSet<&String> = pa.keys().chain(pb.keys()).collect();
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    let delta = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => format!("{:+.2}", y - x),
        _ => "-".to_owned(),
    };
    for phase in phases {
        let empty = Vec::new();
        let (sa, sb) = (
            pa.get(phase).unwrap_or(&empty),
            pb.get(phase).unwrap_or(&empty),
        );
        let (a50, b50) = (percentile(sa, 0.50), percentile(sb, 0.50));
        let (a95, b95) = (percentile(sa, 0.95), percentile(sb, 0.95));
        out.push(format!(
            "{phase:<18} {:>10} {:>10} {:>10}   {:>10} {:>10} {:>10}",
            ms(a50),
            ms(b50),
            delta(a50, b50),
            ms(a95),
            ms(b95),
            delta(a95, b95)
        ));
    }
    out.push("(phase durations in ms, over every process of each run)".into());
    Ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert_eq!(ids, ["r-2", "r-1"]);
        let text = render_list(root.path(), &runs);
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

//! Comparison directories (`cmp-*`, gate 2) in the run index: the verdict, member runs counted
//! out of planned and per-target regressed/improved, read from the comparison's own plan
//! seal, manifest, report and `compare.seal` — never written.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::run::read_run;
use super::summary::*;

#[derive(Deserialize, Default)]
#[serde(default)]
struct CmpManifestHead {
    runs_per_arm: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CmpReportHead {
    runs_per_arm: Option<u64>,
    verdict: CmpVerdictHead,
    runs: Vec<MemberHead>,
    arms: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CmpVerdictHead {
    kind: Option<String>,
    targets: Vec<CmpTargetHead>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CmpTargetHead {
    name: Option<String>,
    regressed: bool,
    improved: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct MemberHead {
    slot: Option<String>,
    run_id: Option<String>,
    started_ms: Option<f64>,
}

/// `A → B` when the arms differ, else the one value.
fn arms_value(arms: &BTreeMap<String, BTreeMap<String, String>>, key: &str) -> Option<String> {
    let a = arms.get("baseline").and_then(|m| m.get(key));
    let b = arms.get("candidate").and_then(|m| m.get(key));
    match (a, b) {
        (Some(a), Some(b)) if a != b => Some(format!("{a} → {b}")),
        (Some(v), _) | (None, Some(v)) => Some(v.clone()),
        (None, None) => None,
    }
}

/// Reads one comparison directory (`cmp-*`, gate 2): its plan seal, manifest, report (when
/// written) and `compare.seal`. Errors when it holds no `plan.seal`, or a file is not what a
/// comparison writes.
pub fn read_comparison(path: &Path) -> Result<RunSummary, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let plan_seal = read_file(path, crate::gate2::matrix::PLAN_SEAL_FILE).map_err(at)?;
    if plan_seal.is_none() {
        return Err(format!(
            "{} has no {} (not a comparison directory)",
            path.display(),
            crate::gate2::matrix::PLAN_SEAL_FILE
        ));
    }
    let manifest: CmpManifestHead = match read_file(path, "manifest.json").map_err(at)? {
        Some(b) => parse("manifest.json", &b).map_err(at)?,
        None => CmpManifestHead::default(),
    };
    let report: Option<CmpReportHead> = match read_file(path, "report.json").map_err(at)? {
        Some(b) => Some(parse("report.json", &b).map_err(at)?),
        None => None,
    };
    let seal = read_file(path, crate::gate2::report::COMPARE_SEAL_FILE).map_err(at)?;
    let sums = read_file(path, crate::evidence::SUMS_FILE).map_err(at)?;
    let (seal, problem) = seal_state(
        seal.as_deref(),
        &[(crate::evidence::SUMS_FILE, sums.as_deref())],
    );
    let planned = report
        .as_ref()
        .and_then(|r| r.runs_per_arm)
        .or(manifest.runs_per_arm)
        .unwrap_or(0) as usize
        * 2;
    let verdict = match report.as_ref().and_then(|r| r.verdict.kind.as_deref()) {
        Some("UNCHANGED") => RunVerdict::Unchanged,
        Some("IMPROVED") => RunVerdict::Improved,
        Some("REGRESSED") => RunVerdict::Regressed,
        Some("INVALID") => RunVerdict::Invalid,
        Some("INCOMPLETE") => RunVerdict::Incomplete,
        _ => RunVerdict::NoReport,
    };
    let (mut verdicts, mut members, mut started, mut rehearsal) = (BTreeMap::new(), 0, 0.0, false);
    let (mut model, mut host, mut suite_sha256) = (None, None, None);
    if let Some(r) = &report {
        for t in &r.verdict.targets {
            let v = if t.regressed {
                "REGRESSED"
            } else if t.improved {
                "IMPROVED"
            } else {
                "unchanged"
            };
            verdicts.insert(t.name.clone().unwrap_or_else(|| "?".into()), v.to_owned());
        }
        members = r.runs.len();
        started = r
            .runs
            .iter()
            .filter_map(|m| m.started_ms)
            .fold(f64::INFINITY, f64::min);
        model = arms_value(&r.arms, "agent.model");
        host = arms_value(&r.arms, "agent.kind");
        suite_sha256 = arms_value(&r.arms, "suite.fixture_manifest_sha256");
        // A comparison of rehearsals is a rehearsal: its first member says so.
        rehearsal = r.runs.first().is_some_and(|m| {
            let (Some(slot), Some(id)) = (&m.slot, &m.run_id) else {
                return false;
            };
            read_run(&path.join("runs").join(slot).join(id)).is_ok_and(|s| s.rehearsal)
        });
    }
    if !started.is_finite() || started == 0.0 {
        started = std::fs::metadata(path.join(crate::gate2::matrix::PLAN_SEAL_FILE))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    }
    Ok(RunSummary {
        id: dir_name(path),
        kind: EntryKind::Comparison,
        path: path.to_owned(),
        started_ms: started,
        model,
        host,
        suite: None,
        suite_sha256,
        verdict,
        passed: None,
        targets_total: verdicts.len(),
        targets_passed: verdicts.values().filter(|v| *v != "REGRESSED").count(),
        verdicts,
        outcome: None,
        members: Some((members, planned)),
        rehearsal,
        seal,
        signed: false,
        problem,
    })
}

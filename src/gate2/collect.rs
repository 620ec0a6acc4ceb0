//! Collecting a comparison's member runs (GATE2 §4.10): the counted run of every slot under
//! `cmp-<id>/runs/` and in directories copied in from elsewhere, and what each run's sealed
//! `report.json` says — outcomes per target, broken invariants. [`super::report::compute`]
//! verifies each before counting it; [`quick_table`] reads them unverified for the matrix's
//! stop checks (cost spent, curtailment).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::matrix::{self, Comparison, Slot};
use super::verdict::{Breach, Invariant, Outcome};

/// The six tools of the observed profile (M2); a run whose agent called any other reached a
/// full-profile tool.
const OBSERVED_TOOLS: [&str; 6] = [
    "patchdiff_read_target",
    "patchdiff_find_occurrences",
    "patchdiff_observe_scope",
    "patchdiff_submit_observed_operations",
    "patchdiff_save",
    "patchdiff_replay",
];

/// A run found, before verification.
pub(super) struct Found {
    pub(super) slot: Slot,
    pub(super) dir: PathBuf,
    pub(super) attempts: u32,
}

pub(super) fn read_json(path: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// Finds the counted run of every slot under `dir/runs/` and in `extra` paths (a run
/// directory `…/<slot>/r-…`, a slot directory, or a directory of slots or comparisons).
pub(super) fn find_runs(
    cmp: &Comparison,
    extra: &[PathBuf],
    problems: &mut Vec<String>,
) -> BTreeMap<Slot, Found> {
    let mut slot_dirs: Vec<PathBuf> = Vec::new();
    let scan = |dir: &Path, slot_dirs: &mut Vec<PathBuf>| {
        for candidate in [dir.to_path_buf(), dir.join("runs")] {
            for entry in std::fs::read_dir(&candidate)
                .into_iter()
                .flatten()
                .flatten()
            {
                let p = entry.path();
                if p.is_dir() && parse_slot_name(&p, cmp.runs_per_arm()).is_some() {
                    slot_dirs.push(p);
                }
            }
        }
    };
    scan(&cmp.dir, &mut slot_dirs);
    for path in extra {
        if path.join(crate::evidence::SEAL_FILE).is_file() {
            // A run directory: its parent names the slot.
            if let Some(parent) = path.parent() {
                slot_dirs.push(parent.to_path_buf());
            }
        } else if parse_slot_name(path, cmp.runs_per_arm()).is_some() {
            slot_dirs.push(path.clone());
        } else if path.is_dir() {
            scan(path, &mut slot_dirs);
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                if entry.path().join(matrix::PLAN_SEAL_FILE).is_file() {
                    scan(&entry.path(), &mut slot_dirs);
                }
            }
        } else {
            problems.push(format!(
                "{}: not a run, slot or comparison directory",
                path.display()
            ));
        }
    }
    let mut found: BTreeMap<Slot, Found> = BTreeMap::new();
    let mut seen_dirs = BTreeSet::new();
    for dir in slot_dirs {
        let Ok(canonical) = dir.canonicalize() else {
            continue;
        };
        if !seen_dirs.insert(canonical) {
            continue;
        }
        let Some(slot) = parse_slot_name(&dir, cmp.runs_per_arm()) else {
            continue;
        };
        let attempts = matrix::sealed_attempts(&dir);
        let counted = attempts
            .iter()
            .rev()
            .find(|r| !matrix::is_infra_abort(r))
            .cloned();
        let n = attempts.len() as u32;
        match (counted, found.get(&slot)) {
            (Some(run), Some(existing)) => {
                let same = run.file_name() == existing.dir.file_name();
                if !same {
                    problems.push(format!(
                        "slot {} has two counted runs: {} and {}",
                        slot.id(),
                        existing.dir.display(),
                        run.display()
                    ));
                }
            }
            (Some(run), None) => {
                found.insert(
                    slot,
                    Found {
                        slot,
                        dir: run,
                        attempts: n,
                    },
                );
            }
            (None, _) => {}
        }
    }
    found
}

pub(super) fn parse_slot_name(dir: &Path, runs: u32) -> Option<Slot> {
    let name = dir.file_name()?.to_str()?;
    Slot::parse(name, runs).ok().filter(|s| s.id() == name)
}

pub(super) fn outcome_of(target: &Value) -> Outcome {
    match target["status"].as_str() {
        Some("pass") => Outcome::Pass,
        Some("infra_error") => Outcome::InfraError,
        Some("flaky") => Outcome::Flaky,
        // `fail`, or not judged after the agent acted: a failure (GATE2 §4.5).
        _ => Outcome::Fail,
    }
}

pub(super) fn breaches_of(report: &Value) -> Vec<Breach> {
    let mut out = Vec::new();
    // The seal itself: what the host reported it offered (A3) did not hold, or the agent
    // called a tool outside the six (below). A preflight failure is not the agent's seal.
    if let Some(problem) = report["agent_host"]["seal"]["problem"].as_str() {
        out.push(Breach {
            invariant: Invariant::AgentSeal,
            detail: problem.to_owned(),
        });
    }
    for t in report["targets"].as_array().into_iter().flatten() {
        if t["replay_consistent"] == false {
            out.push(Breach {
                invariant: Invariant::ReplayMismatch,
                detail: format!("target {}", t["name"].as_str().unwrap_or("?")),
            });
        }
    }
    for tool in report["agent_host"]["tool_calls"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if !OBSERVED_TOOLS.contains(&tool.as_str()) {
            out.push(Breach {
                invariant: Invariant::FullProfileTool,
                detail: format!("the agent called {tool}"),
            });
        }
    }
    out
}

pub(super) fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// The outcome table of the counted runs found so far, read from their sealed `report.json`
/// without verifying them (the final report verifies each), and the cost they reported (USD):
/// what the matrix's stop checks read between runs. Targets are in the first run's order.
pub fn quick_table(cmp: &Comparison) -> (super::verdict::OutcomeTable, f64) {
    let mut ignored = Vec::new();
    let found = find_runs(cmp, &[], &mut ignored);
    let mut targets: Vec<String> = Vec::new();
    let mut runs = Vec::new();
    let mut cost = 0.0;
    for f in found.values() {
        let report = read_json(&f.dir.join("report.json")).unwrap_or(Value::Null);
        let by_name: BTreeMap<&str, &Value> = report["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(|n| (n, t)))
            .collect();
        if targets.is_empty() {
            targets = by_name.keys().map(|n| (*n).to_owned()).collect();
        }
        cost += number(&report["agent_host"]["cost_usd"]).unwrap_or(0.0);
        runs.push(super::verdict::RunRecord {
            id: f.slot.id(),
            side: f.slot.side,
            verify_problems: Vec::new(),
            breaches: breaches_of(&report),
            outcomes: targets
                .iter()
                .map(|t| {
                    by_name
                        .get(t.as_str())
                        .map_or(Outcome::Fail, |v| outcome_of(v))
                })
                .collect(),
        });
    }
    let table = super::verdict::OutcomeTable {
        targets,
        runs,
        integrity_problems: Vec::new(),
        stopped: None,
    };
    (table, cost)
}

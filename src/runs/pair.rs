//! Two runs side by side (U2): per-target verdict changes named without calling one run a
//! regression ([`change`]), phase p50/p95 from the perf events, step durations from the
//! reports and tool errors from the observed processes' wire logs. One run each is not
//! evidence; a comparison (`patchdiff compare`, gate 2) decides.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::index::read_run;
use super::summary::RunSummary;
use super::summary::date;
use crate::display::visible_inline;
use crate::telemetry::PerfEvent;

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

/// One target's verdicts in A and B, and what the change means ([`change`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetChange {
    pub target: String,
    pub a: String,
    pub b: String,
    /// Empty when unchanged.
    pub change: String,
}

/// One phase's p50/p95 (ms) in A and B (nearest rank over every process of each run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseDelta {
    pub phase: String,
    pub a_p50: Option<f64>,
    pub b_p50: Option<f64>,
    pub a_p95: Option<f64>,
    pub b_p95: Option<f64>,
}

/// One step's elapsed time (ms) in A and B, from each report's `steps` (a repeated step is
/// `launch #2`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepDuration {
    pub step: String,
    pub a_ms: Option<u64>,
    pub b_ms: Option<u64>,
}

/// Tool errors of one tool and reason code: occurrences in A and B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolErrorChange {
    pub tool: String,
    pub reason: String,
    pub a: u64,
    pub b: u64,
}

/// Two runs side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPair {
    pub a: RunSummary,
    pub b: RunSummary,
    pub targets: Vec<TargetChange>,
    pub phases: Vec<PhaseDelta>,
    pub steps: Vec<StepDuration>,
    /// Sum of each run's step times (ms).
    pub a_total_ms: u64,
    pub b_total_ms: u64,
    pub tool_errors: Vec<ToolErrorChange>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StepsHead {
    steps: Vec<StepHead>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StepHead {
    command: String,
    elapsed_ms: u64,
}

/// Each step's elapsed ms from `report.json`, in order, repeated names numbered.
fn step_times(run: &Path) -> Vec<(String, u64)> {
    let head: StepsHead = std::fs::read(run.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    head.steps
        .into_iter()
        .map(|s| {
            let n = seen.entry(s.command.clone()).or_default();
            *n += 1;
            let name = if *n == 1 {
                s.command
            } else {
                format!("{} #{n}", s.command)
            };
            (name, s.elapsed_ms)
        })
        .collect()
}

/// Tool errors of a run's observed processes (`observed`, `host-observed`), by tool and
/// reason, from their wire logs (streamed): a `tools/call` whose result is `isError` counts
/// under its `code` (or first `reason_codes` entry), a JSON-RPC error under `jsonrpc <code>`.
pub fn tool_errors(run: &Path) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for process in [
        crate::evidence::run_dir::process::OBSERVED,
        crate::evidence::run_dir::process::HOST_OBSERVED,
    ] {
        let Ok(file) = std::fs::File::open(run.join(format!("{process}.mcp.jsonl"))) else {
            continue;
        };
        let messages =
            crate::evidence::read_wire_messages(std::io::BufReader::with_capacity(64 * 1024, file));
        let paired = crate::evidence::pair_requests(
            messages,
            |m| {
                (m.message["method"] == "tools/call").then(|| {
                    m.message["params"]["name"]
                        .as_str()
                        .unwrap_or("?")
                        .to_owned()
                })
            },
            |_, reply| {
                let m = &reply.message;
                if let Some(code) = m["error"]["code"].as_i64() {
                    return Some(format!("jsonrpc {code}"));
                }
                if m["result"]["isError"] != true {
                    return None;
                }
                let s = &m["result"]["structuredContent"];
                Some(
                    s["code"]
                        .as_str()
                        .or(s["error"]["code"].as_str())
                        .or(s["reason_codes"][0].as_str())
                        .unwrap_or("error")
                        .to_owned(),
                )
            },
        );
        for (tool, reason) in paired {
            if let Some(Some(reason)) = reason {
                *out.entry((tool, reason)).or_default() += 1;
            }
        }
    }
    out
}

/// Reads both runs and sets them side by side. Errors name a run that cannot be read.
pub fn pair(a: &Path, b: &Path) -> Result<RunPair, String> {
    let (ra, rb) = (read_run(a)?, read_run(b)?);
    let names: BTreeSet<&String> = ra.verdicts.keys().chain(rb.verdicts.keys()).collect();
    let targets = names
        .into_iter()
        .map(|name| {
            let va = ra.verdicts.get(name).map_or("-", String::as_str);
            let vb = rb.verdicts.get(name).map_or("-", String::as_str);
            TargetChange {
                target: name.clone(),
                a: va.to_owned(),
                b: vb.to_owned(),
                change: change(va, vb),
            }
        })
        .collect();
    let (pa, pb) = (phase_durations(a), phase_durations(b));
    let empty = Vec::new();
    let phases = pa
        .keys()
        .chain(pb.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|phase| {
            let (sa, sb) = (
                pa.get(phase).unwrap_or(&empty),
                pb.get(phase).unwrap_or(&empty),
            );
            PhaseDelta {
                phase: phase.clone(),
                a_p50: percentile(sa, 0.50),
                b_p50: percentile(sb, 0.50),
                a_p95: percentile(sa, 0.95),
                b_p95: percentile(sb, 0.95),
            }
        })
        .collect();
    let (step_a, step_b) = (step_times(a), step_times(b));
    let mut steps: Vec<StepDuration> = step_a
        .iter()
        .map(|(name, ms)| StepDuration {
            step: name.clone(),
            a_ms: Some(*ms),
            b_ms: step_b.iter().find(|(n, _)| n == name).map(|(_, ms)| *ms),
        })
        .collect();
    for (name, ms) in &step_b {
        if !step_a.iter().any(|(n, _)| n == name) {
            steps.push(StepDuration {
                step: name.clone(),
                a_ms: None,
                b_ms: Some(*ms),
            });
        }
    }
    let (ea, eb) = (tool_errors(a), tool_errors(b));
    let tool_errors = ea
        .keys()
        .chain(eb.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|key| ToolErrorChange {
            tool: key.0.clone(),
            reason: key.1.clone(),
            a: ea.get(key).copied().unwrap_or(0),
            b: eb.get(key).copied().unwrap_or(0),
        })
        .collect();
    Ok(RunPair {
        a_total_ms: step_a.iter().map(|(_, ms)| ms).sum(),
        b_total_ms: step_b.iter().map(|(_, ms)| ms).sum(),
        a: ra,
        b: rb,
        targets,
        phases,
        steps,
        tool_errors,
    })
}

impl RunPair {
    /// The runs' header lines, per-target verdict changes and phase p50/p95 deltas (the
    /// console's `runs compare` view).
    pub fn verdicts_and_phases_text(&self) -> String {
        let head = |label: &str, r: &RunSummary| {
            format!(
                "{label} {} · {} · {}{}",
                visible_inline(&r.id),
                date(r.started_ms),
                visible_inline(r.model.as_deref().unwrap_or("-")),
                if r.rehearsal { " · rehearsal" } else { "" }
            )
        };
        let mut out = vec![
            head("A", &self.a),
            head("B", &self.b),
            String::new(),
            format!("{:<16} {:<12} {:<12} change", "target", "A", "B"),
        ];
        for t in &self.targets {
            out.push(format!(
                "{:<16} {:<12} {:<12} {}",
                visible_inline(&t.target),
                t.a,
                t.b,
                t.change
            ));
        }
        out.push(String::new());
        out.push(format!(
            "{:<18} {:>10} {:>10} {:>10}   {:>10} {:>10} {:>10}",
            "phase", "A p50", "B p50", "Δ p50", "A p95", "B p95", "Δ p95"
        ));
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
        let delta = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => format!("{:+.2}", y - x),
            _ => "-".to_owned(),
        };
        for p in &self.phases {
            out.push(format!(
                "{:<18} {:>10} {:>10} {:>10}   {:>10} {:>10} {:>10}",
                visible_inline(&p.phase),
                ms(p.a_p50),
                ms(p.b_p50),
                delta(p.a_p50, p.b_p50),
                ms(p.a_p95),
                ms(p.b_p95),
                delta(p.a_p95, p.b_p95)
            ));
        }
        out.push("(phase durations in ms, over every process of each run)".into());
        out.join("\n")
    }

    /// [`verdicts_and_phases_text`](Self::verdicts_and_phases_text), then step durations and
    /// tool errors A → B (`patchdiff runs compare`).
    pub fn to_text(&self) -> String {
        let mut out = vec![self.verdicts_and_phases_text(), String::new()];
        out.push(format!(
            "{:<18} {:>10} {:>10} {:>10}",
            "step", "A ms", "B ms", "Δ ms"
        ));
        let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        for s in &self.steps {
            out.push(format!(
                "{:<18} {:>10} {:>10} {:>10}",
                visible_inline(&s.step),
                ms(s.a_ms),
                ms(s.b_ms),
                match (s.a_ms, s.b_ms) {
                    (Some(a), Some(b)) => format!("{:+}", b as i64 - a as i64),
                    _ => "-".to_owned(),
                }
            ));
        }
        out.push(format!(
            "{:<18} {:>10} {:>10} {:>10}",
            "total",
            self.a_total_ms,
            self.b_total_ms,
            format!("{:+}", self.b_total_ms as i64 - self.a_total_ms as i64)
        ));
        out.push(String::new());
        if self.tool_errors.is_empty() {
            out.push("tool errors: none in either run".to_owned());
        } else {
            out.push(format!(
                "{:<38} {:<24} {:>4}   {:<4}",
                "tool errors", "reason", "A", "B"
            ));
            for e in &self.tool_errors {
                out.push(format!(
                    "{:<38} {:<24} {:>4} → {:<4}",
                    visible_inline(&e.tool),
                    visible_inline(&e.reason),
                    e.a,
                    e.b
                ));
            }
        }
        out.push(
            "(tool errors from the observed processes' wire logs; preflight's refused \
             full-profile probe counts in both runs)"
                .into(),
        );
        out.join("\n")
    }
}

/// Two runs side by side as the console's `runs compare` view shows them: per-target verdict
/// changes ([`change`]), then phase p50/p95 with deltas. Errors name a run that cannot be read.
pub fn compare(a: &Path, b: &Path) -> Result<String, String> {
    pair(a, b).map(|p| p.verdicts_and_phases_text())
}

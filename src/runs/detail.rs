//! One past run or comparison opened (U2): a run's verdict per target, the
//! stories it can show, its evidence files, its steps and its processes as they ended — all
//! from its own files; a comparison's verdict and per-target strips with the member run behind
//! every cell. [`story`] is a past run's target story, built from its report, its copy of the
//! suite, its wire logs and its exports (no live canary needed). Nothing here writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::index::{read_entry, resolve};
use super::summary::{EntryKind, RunSummary, date, kind_of, verdict_word};
use crate::display::{visible, visible_inline};

/// One target of a past run, from its report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetDetail {
    pub name: String,
    /// `pass`, `FAIL`, `infra_error`, `flaky`, `infra_abort` or `-` (not evaluated).
    pub verdict: String,
    /// Identical to the reference; `None` when not evaluated.
    pub identical: Option<bool>,
    pub accepted: u64,
    pub rejected: u64,
    /// The named checks that failed.
    pub failing_checks: Vec<String>,
    /// Its export is in the run (`export/<module file>`), so a story can show its diffs.
    pub exported: bool,
}

/// An evidence file of the run: its path relative to the run and its size in bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceFile {
    pub name: String,
    pub bytes: u64,
}

/// One step as the report recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
    pub command: String,
    pub ok: bool,
    pub summary: String,
    pub elapsed_ms: u64,
}

/// A worker generation as the perf events recorded its life.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerationEnd {
    pub generation: u64,
    /// The worker's pid (`worker_launch`).
    pub pid: Option<u64>,
    /// `ready`, `retired: <reason>`, or `launched` when nothing later was recorded.
    pub ended: String,
}

/// A process of the run as it ended, from its perf events (`<process>.perf.jsonl`) or, for
/// the agent host, the report's host record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessEnd {
    /// `observed`, `full`, `host-observed`, or the host's name (`claude`, `codex`).
    pub process: String,
    pub pid: Option<u64>,
    /// Unix ms of its first and last recorded event; the difference is its recorded uptime.
    pub first_ms: Option<f64>,
    pub last_ms: Option<f64>,
    /// Perf events recorded.
    pub events: u64,
    /// How it ended, as far as its records say: the last event's name, or the host's exit.
    pub ended: String,
    pub generations: Vec<GenerationEnd>,
}

/// A comparison member behind a strip cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberRef {
    /// `A-01`, `B-03`, …
    pub slot: String,
    /// `baseline` or `candidate`.
    pub arm: String,
    pub run_id: String,
    /// The member run's directory (`cmp-…/runs/<slot>/<run id>`): open it, or its stories.
    pub path: PathBuf,
    /// One outcome per target, in strip order (`pass`, `fail`, `infra_error`, `flaky`).
    pub outcomes: Vec<String>,
}

/// One target's row of a comparison: its strips per arm (members in time order; cell `i` is
/// `members_a[i]` / `members_b[i]`) and its flag.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StripRow {
    pub target: String,
    /// █ pass, ▁ FAIL, i infra_error, ~ flaky.
    pub a: String,
    pub b: String,
    /// `REGRESSED`, `IMPROVED` or empty.
    pub flag: String,
}

/// A comparison's verdict and strips.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonDetail {
    /// The verdict line (what the design could detect included).
    pub line: String,
    pub reasons: Vec<String>,
    pub strips: Vec<StripRow>,
    /// Baseline members in time order.
    pub members_a: Vec<MemberRef>,
    /// Candidate members in time order.
    pub members_b: Vec<MemberRef>,
}

/// What `runs show ID` and a console's opened run show.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDetail {
    pub summary: RunSummary,
    /// A run's targets in report order (empty for a comparison).
    pub targets: Vec<TargetDetail>,
    /// The targets whose story [`story`] can build (the run holds its suite copy).
    pub stories: Vec<String>,
    pub steps: Vec<StepRecord>,
    pub evidence: Vec<EvidenceFile>,
    pub processes: Vec<ProcessEnd>,
    pub comparison: Option<ComparisonDetail>,
}

fn read_json(path: &Path) -> Option<Value> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// Every regular file under `dir` (relative paths, sorted), not following symlinks; at most
/// `limit` entries.
fn files_under(dir: &Path, limit: usize) -> Vec<EvidenceFile> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let name = rel.join(e.file_name());
            if t.is_dir() {
                stack.push(name);
            } else if t.is_file() && out.len() < limit {
                out.push(EvidenceFile {
                    name: name.to_string_lossy().into_owned(),
                    bytes: e.metadata().map_or(0, |m| m.len()),
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The most evidence files `open` lists.
pub const EVIDENCE_LISTED: usize = 500;

/// Each process's end from its perf-events file, streamed line by line.
fn process_ends(run: &Path) -> Vec<ProcessEnd> {
    use std::io::BufRead;
    let mut files: Vec<PathBuf> = std::fs::read_dir(run)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".perf.jsonl"))
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let Ok(f) = std::fs::File::open(&file) else {
            continue;
        };
        let name = file
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_end_matches(".perf.jsonl")
                    .to_owned()
            })
            .unwrap_or_default();
        let mut end = ProcessEnd {
            process: name,
            pid: None,
            first_ms: None,
            last_ms: None,
            events: 0,
            ended: "no events".to_owned(),
            generations: Vec::new(),
        };
        let mut generations: BTreeMap<u64, GenerationEnd> = BTreeMap::new();
        for line in std::io::BufReader::new(f)
            .split(b'\n')
            .map_while(Result::ok)
        {
            let Ok(ev) = serde_json::from_slice::<crate::telemetry::PerfEvent>(&line) else {
                continue;
            };
            end.events += 1;
            end.pid.get_or_insert(u64::from(ev.pid));
            end.first_ms.get_or_insert(ev.start_ms);
            end.last_ms = Some(ev.start_ms);
            end.ended = ev.name.clone();
            let generation = ev.ids.get("generation").and_then(Value::as_u64);
            if let Some(g) = generation {
                let entry = generations.entry(g).or_insert(GenerationEnd {
                    generation: g,
                    pid: None,
                    ended: "launched".to_owned(),
                });
                match ev.name.as_str() {
                    "worker_launch" => entry.pid = ev.attrs.get("pid").and_then(Value::as_u64),
                    "worker_ready" => entry.ended = "ready".to_owned(),
                    "worker_retired" => {
                        entry.ended = format!(
                            "retired: {}",
                            ev.attrs
                                .get("reason")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                        );
                    }
                    _ => {}
                }
            }
        }
        end.generations = generations.into_values().collect();
        out.push(end);
    }
    out
}

/// The agent host as its record in the report says it ended.
fn host_end(report: &Value) -> Option<ProcessEnd> {
    let h = report.get("agent_host").filter(|h| h.is_object())?;
    Some(ProcessEnd {
        process: h["host"].as_str().unwrap_or("agent host").to_owned(),
        pid: h["pid"].as_u64(),
        first_ms: None,
        last_ms: None,
        events: 0,
        ended: format!(
            "{}{}{}",
            h["exit"].as_str().unwrap_or("?"),
            h["result"]
                .as_str()
                .map_or(String::new(), |r| format!(" · result {r}")),
            if h["timed_out"] == true {
                " · timed out"
            } else {
                ""
            }
        ),
        generations: Vec::new(),
    })
}

fn outcome_word(v: &Value) -> String {
    v.as_str().unwrap_or("?").to_owned()
}

fn cell(outcome: &str) -> char {
    match outcome {
        "pass" => '█',
        "fail" => '▁',
        "infra_error" => 'i',
        "flaky" => '~',
        _ => ' ',
    }
}

/// A comparison's verdict and strips from its `report.json` (`None` before it is written).
fn comparison_detail(dir: &Path) -> Option<ComparisonDetail> {
    let report = read_json(&dir.join("report.json"))?;
    let v = &report["verdict"];
    let mut members: Vec<(f64, MemberRef)> = report["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let slot = outcome_word(&m["slot"]);
            let run_id = outcome_word(&m["run_id"]);
            (
                m["started_ms"].as_f64().unwrap_or(0.0),
                MemberRef {
                    path: dir.join("runs").join(&slot).join(&run_id),
                    slot,
                    arm: outcome_word(&m["arm"]),
                    run_id,
                    outcomes: m["outcomes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(outcome_word)
                        .collect(),
                },
            )
        })
        .collect();
    members.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.slot.cmp(&b.1.slot)));
    let (members_a, members_b): (Vec<MemberRef>, Vec<MemberRef>) = members
        .into_iter()
        .map(|(_, m)| m)
        .partition(|m| m.arm == "baseline");
    let strip = |ms: &[MemberRef], i: usize| -> String {
        ms.iter()
            .map(|m| cell(m.outcomes.get(i).map_or("", String::as_str)))
            .collect()
    };
    let strips = v["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| StripRow {
            target: outcome_word(&t["name"]),
            a: strip(&members_a, i),
            b: strip(&members_b, i),
            flag: if t["regressed"] == true {
                "REGRESSED".to_owned()
            } else if t["improved"] == true {
                "IMPROVED".to_owned()
            } else {
                String::new()
            },
        })
        .collect();
    Some(ComparisonDetail {
        line: outcome_word(&v["line"]),
        reasons: v["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .map(outcome_word)
            .collect(),
        strips,
        members_a,
        members_b,
    })
}

/// The targets of a run's suite copy (`suite/manifest.json`), when it loads.
fn suite_copy(run: &Path) -> Option<crate::fixtures::FixtureManifest> {
    crate::fixtures::FixtureManifest::load(
        &run.join(crate::fixtures::RUN_SUITE_DIR)
            .join("manifest.json"),
    )
    .ok()
}

/// Opens the entry at `path` (a run or comparison directory). Never fails: what cannot be
/// read is left out, and an unreadable entry says why in its summary.
pub fn open_dir(path: &Path) -> RunDetail {
    let kind = kind_of(
        &path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    )
    .unwrap_or(
        if path.join(crate::gate2::matrix::PLAN_SEAL_FILE).is_file() {
            EntryKind::Comparison
        } else {
            EntryKind::Run
        },
    );
    let summary = read_entry(path, kind);
    let evidence = files_under(path, EVIDENCE_LISTED);
    if kind == EntryKind::Comparison {
        return RunDetail {
            comparison: comparison_detail(path),
            summary,
            targets: Vec::new(),
            stories: Vec::new(),
            steps: Vec::new(),
            evidence,
            processes: Vec::new(),
        };
    }
    let report = read_json(&path.join("report.json")).unwrap_or(Value::Null);
    let aborted = report["outcome"] == "infra_abort";
    let suite = suite_copy(path);
    let targets: Vec<TargetDetail> = report["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let name = outcome_word(&t["name"]);
            let module = suite
                .as_ref()
                .and_then(|s| s.fixture(&name))
                .map(|f| f.module_file.clone());
            TargetDetail {
                verdict: summary
                    .verdicts
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| if aborted { "infra_abort" } else { "-" }.to_owned()),
                identical: (t["evaluated"] == true).then(|| t["full_byte"] == true),
                accepted: t["accepted"].as_u64().unwrap_or(0),
                rejected: t["rejected"].as_u64().unwrap_or(0),
                failing_checks: t["failing_checks"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(outcome_word)
                    .collect(),
                exported: module.is_some_and(|m| path.join("export").join(m).is_file()),
                name,
            }
        })
        .collect();
    let stories = match &suite {
        Some(s) => s.fixtures.iter().map(|f| f.target.clone()).collect(),
        None => Vec::new(),
    };
    let steps = report["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| StepRecord {
            command: outcome_word(&s["command"]),
            ok: s["ok"] == true,
            summary: s["summary"].as_str().unwrap_or("").to_owned(),
            elapsed_ms: s["elapsed_ms"].as_u64().unwrap_or(0),
        })
        .collect();
    let mut processes = process_ends(path);
    processes.extend(host_end(&report));
    RunDetail {
        summary,
        targets,
        stories,
        steps,
        evidence,
        processes,
        comparison: None,
    }
}

/// `open(id)` for a console pane or `runs show`: resolves `id` under `root`
/// ([`resolve`]: a unique prefix, `CMP/SLOT`, or a path) and opens it ([`open_dir`]). Errors:
/// the id matches nothing, or several entries (the message lists candidates).
pub fn open(root: &Path, id: &str) -> Result<RunDetail, String> {
    resolve(root, id).map(|path| open_dir(&path))
}

impl RunDetail {
    /// The detail as text for a terminal; every agent-written string is shown through
    /// [`visible_inline`] / [`visible`].
    pub fn to_text(&self) -> String {
        let s = &self.summary;
        let mut out = Vec::new();
        let kind = match s.kind {
            EntryKind::Run => "run",
            EntryKind::Comparison => "comparison",
        };
        out.push(format!(
            "{kind} {} · {} · {}{}",
            visible_inline(&s.id),
            date(s.started_ms),
            verdict_word(s),
            s.members.map_or(String::new(), |(n, of)| format!(
                " · {n} of {of} member runs"
            ))
        ));
        out.push(format!(
            "path     {}",
            visible_inline(&s.path.display().to_string())
        ));
        out.push(format!(
            "model    {} · host {}",
            visible_inline(s.model.as_deref().unwrap_or("-")),
            visible_inline(s.host_label())
        ));
        out.push(format!(
            "suite    {} · {}",
            visible_inline(s.suite.as_deref().unwrap_or("-")),
            visible_inline(s.suite_sha256.as_deref().unwrap_or("-"))
        ));
        out.push(format!(
            "seal     {}{}{}",
            s.seal.label(),
            if s.signed { " · signed" } else { "" },
            match s.kind {
                EntryKind::Run => " (all files: patchdiff verify DIR)",
                EntryKind::Comparison => " (member runs and report: patchdiff verify DIR)",
            }
        ));
        if let Some(p) = &s.problem {
            out.push(format!("problem  {}", visible_inline(p)));
        }
        if let Some(c) = &self.comparison {
            out.push(String::new());
            out.push(format!("VERDICT  {}", visible_inline(&c.line)));
            for r in &c.reasons {
                out.push(format!("         · {}", visible_inline(r)));
            }
            out.push(String::new());
            out.push(format!(
                "{:<16} {:<24} {:<24} (█ pass ▁ FAIL i infra_error ~ flaky; time order)",
                "target", "A baseline", "B candidate"
            ));
            for row in &c.strips {
                out.push(format!(
                    "{:<16} {:<24} {:<24} {}",
                    visible_inline(&row.target),
                    row.a,
                    row.b,
                    row.flag
                ));
            }
            let ids = |ms: &[MemberRef]| {
                ms.iter()
                    .map(|m| visible_inline(&m.slot).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.push(format!("A members  {}", ids(&c.members_a)));
            out.push(format!("B members  {}", ids(&c.members_b)));
            out.push(format!(
                "(open a member: patchdiff runs show {}/SLOT)",
                visible_inline(&s.id)
            ));
        } else if s.kind == EntryKind::Comparison {
            out.push(String::new());
            out.push("no report yet (the comparison is running or was interrupted)".to_owned());
        }
        if s.kind == EntryKind::Run {
            out.push(String::new());
            out.push(format!(
                "targets  {}/{} pass",
                s.targets_passed, s.targets_total
            ));
            for t in &self.targets {
                out.push(format!(
                    "  {:<16} {:<12} identical {} · accepted {} · rejected {}{}{}",
                    visible_inline(&t.name),
                    t.verdict,
                    t.identical.map_or("-", crate::evaluate::yes_no),
                    t.accepted,
                    t.rejected,
                    if t.exported { " · exported" } else { "" },
                    if t.failing_checks.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " · failing: {}",
                            visible_inline(&t.failing_checks.join(", "))
                        )
                    }
                ));
            }
            out.push(format!(
                "stories  {}",
                if self.stories.is_empty() {
                    "none (the run holds no suite copy)".to_owned()
                } else {
                    format!(
                        "{} (patchdiff runs story {} TARGET)",
                        visible_inline(&self.stories.join(", ")),
                        visible_inline(&s.id)
                    )
                }
            ));
            out.push(String::new());
            out.push("steps".to_owned());
            for st in &self.steps {
                out.push(format!(
                    "  {:<11} {:<4} {:>7} ms  {}",
                    visible_inline(&st.command),
                    if st.ok { "ok" } else { "FAIL" },
                    st.elapsed_ms,
                    visible_inline(&st.summary)
                ));
            }
            out.push(String::new());
            out.push("processes as they ended".to_owned());
            for p in &self.processes {
                let up = match (p.first_ms, p.last_ms) {
                    (Some(a), Some(b)) => format!(" · recorded for {:.1} s", (b - a) / 1000.0),
                    _ => String::new(),
                };
                out.push(format!(
                    "  {:<14} pid {}{up} · {} events · last: {}",
                    visible_inline(&p.process),
                    p.pid.map_or("-".to_owned(), |p| p.to_string()),
                    p.events,
                    visible_inline(&p.ended)
                ));
                for g in &p.generations {
                    out.push(format!(
                        "    worker gen {} · pid {} · {}",
                        g.generation,
                        g.pid.map_or("-".to_owned(), |p| p.to_string()),
                        visible_inline(&g.ended)
                    ));
                }
            }
        }
        out.push(String::new());
        out.push(format!("evidence files ({})", self.evidence.len()));
        for f in &self.evidence {
            out.push(format!(
                "  {:<44} {:>10} B",
                visible_inline(&f.name),
                f.bytes
            ));
        }
        visible(&out.join("\n")).into_owned()
    }
}

/// The story of target `name` in the past run at `run` (U2): its counters and hashes, the
/// evaluator's verdict with the check's output, every submission from the observed processes'
/// wire logs, and the diffs of its export against the expected and original bytes of the
/// run's own suite copy. Errors: the run holds no report or suite copy, or no such target (the
/// message names the known ones).
pub fn story(run: &Path, name: &str) -> Result<String, String> {
    use crate::canary::story::{CHECK_OUTPUT_LINES, attempts_in_log, unified};
    let report = read_json(&run.join("report.json"))
        .ok_or_else(|| format!("{} has no readable report.json", run.display()))?;
    let suite = suite_copy(run).ok_or_else(|| {
        format!(
            "{} holds no suite copy ({}/manifest.json)",
            run.display(),
            crate::fixtures::RUN_SUITE_DIR
        )
    })?;
    let shown = visible_inline(name);
    let fixture = suite.fixture(name).ok_or_else(|| {
        let names: Vec<&str> = suite.fixtures.iter().map(|f| f.target.as_str()).collect();
        format!("no target `{shown}`; targets are: {}", names.join(", "))
    })?;
    let t = report["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or(Value::Null);
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut out = vec![
        format!(
            "{} ({}) · version {} · revision {} · accepted {} · rejected {}",
            name,
            fixture.language,
            t["version"].as_u64().unwrap_or(0),
            t["revision"].as_u64().unwrap_or(0),
            t["accepted"].as_u64().unwrap_or(0),
            t["rejected"].as_u64().unwrap_or(0)
        ),
        format!("initial  {}", text(&t["initial_sha256"])),
        format!(
            "exported {}",
            t["exported_sha256"].as_str().unwrap_or("- (not exported)")
        ),
        format!("expected {}", fixture.expected_sha256),
        String::new(),
    ];
    if t["evaluated"] == true {
        out.push(format!(
            "verdict: {} ({}) · identical to the reference: {} · behavioral {}",
            text(&t["status"]),
            text(&t["require"]),
            crate::evaluate::yes_no(t["full_byte"] == true),
            if t["behavioral"] == true {
                "pass"
            } else {
                "FAIL"
            }
        ));
        if let Some(d) = t["first_difference"].as_str() {
            out.push(format!("  first difference: {}", visible_inline(d)));
        }
        if let Some(c) = t["controls"].as_str() {
            out.push(format!("  controls: {}", visible_inline(c)));
        }
        let checks = t["checks"].as_array().cloned().unwrap_or_default();
        if !checks.is_empty() {
            let failed: Vec<&Value> = checks.iter().filter(|c| c["passed"] != true).collect();
            out.push(format!(
                "named checks: {} of {} failed",
                failed.len(),
                checks.len()
            ));
            for c in failed {
                out.push(format!(
                    "  ✖ {} — {}",
                    visible_inline(c["name"].as_str().unwrap_or("?")),
                    crate::evaluate::headline(c["message"].as_str().unwrap_or(""))
                ));
            }
        }
        if let Some(n) = t["checks_note"].as_str() {
            out.push(format!("  named checks: {}", visible_inline(n)));
        }
        for n in t["notes"].as_array().into_iter().flatten() {
            out.push(format!(
                "  note: {}",
                visible_inline(n.as_str().unwrap_or(""))
            ));
        }
        let output: Vec<&str> = t["check_output"]
            .as_str()
            .unwrap_or("")
            .split_terminator('\n')
            .collect();
        if !output.is_empty() {
            out.push(format!(
                "check output (last {} of {} lines):",
                output.len().min(CHECK_OUTPUT_LINES),
                output.len()
            ));
            let skip = output.len().saturating_sub(CHECK_OUTPUT_LINES);
            out.extend(output[skip..].iter().map(|l| format!("  │ {l}")));
        }
    } else {
        out.push(format!(
            "verdict: not evaluated ({})",
            report["outcome"]
                .as_str()
                .unwrap_or("the run has no evaluation")
        ));
    }
    out.push(String::new());
    let mut attempts = Vec::new();
    for process in [
        crate::evidence::run_dir::process::OBSERVED,
        crate::evidence::run_dir::process::HOST_OBSERVED,
    ] {
        if let Ok(file) = std::fs::File::open(run.join(format!("{process}.mcp.jsonl"))) {
            let log = std::io::BufReader::with_capacity(64 * 1024, file);
            attempts.extend(attempts_in_log(log, process, name));
        }
    }
    out.push(format!("submissions ({}):", attempts.len()));
    for (i, a) in attempts.iter().enumerate() {
        out.push(format!(
            "  #{:<3} {:<9} key {} · base r{} → {}{}",
            i + 1,
            visible_inline(&a.outcome),
            visible_inline(&a.request_key),
            a.base_revision.map_or("?".into(), |r| r.to_string()),
            a.revision.map_or("-".into(), |r| format!("r{r}")),
            if a.process == "observed" {
                String::new()
            } else {
                format!(" ({})", a.process)
            }
        ));
        for r in &a.reasons {
            out.push(format!("        reason: {}", visible_inline(r)));
        }
    }
    out.push(String::new());
    let read = |p: PathBuf| std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()));
    let original = read(suite.resolve(&fixture.original))?;
    let expected = read(suite.resolve(&fixture.expected))?;
    match std::fs::read(run.join("export").join(&fixture.module_file)) {
        Ok(exported) => {
            out.push("diff: expected → exported".into());
            out.extend(unified(&expected, &exported, "expected", "exported"));
            out.push(String::new());
            out.push("diff: original → exported".into());
            out.extend(unified(&original, &exported, "original", "exported"));
        }
        Err(_) => out.push("diffs: not exported (the run has no export of it)".into()),
    }
    Ok(visible(&out.join("\n")).into_owned())
}

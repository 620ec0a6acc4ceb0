//! The comparison report (GATE2 §4.9–4.10): collects the sealed member runs
//! of a comparison (from its `runs/` and from any run directories copied in from elsewhere),
//! verifies each with [`crate::verify::verify`] before counting it, builds the
//! [`OutcomeTable`], decides with [`verdict::decide`], and writes `report.txt`, `report.json`,
//! `report.md` (a pull-request comment in the seed's shape), `report.junit.xml`, `runs.csv`,
//! `SHA256SUMS` and `compare.seal` into the comparison directory.
//!
//! `report.json` is a pure function of the sealed plan and the member runs' sealed files (no
//! clock, no absolute path), so `patchdiff verify CMP_DIR` recomputes it and compares
//! ([`verify_comparison`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::collect::{breaches_of, find_runs, number, outcome_of, read_json};
use super::matrix::{self, Comparison, MAX_RETRIES};
use super::plan::Plan;
use super::power::Design;
use super::resolve::run_fields;
use super::signature::DiffSignature;
use super::stats;
use super::verdict::{self, Outcome, OutcomeTable, Rules, RunRecord, Side, Verdict};

/// The report's files, in the order `SHA256SUMS` lists them after the plan.
pub const REPORT_FILES: [&str; 5] = [
    "report.txt",
    "report.json",
    "report.md",
    "report.junit.xml",
    "runs.csv",
];
/// The comparison's seal: SHA-256 of `SHA256SUMS`.
pub const COMPARE_SEAL_FILE: &str = "compare.seal";

/// One counted member run and what the report shows of it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Member {
    /// Slot id.
    pub slot: String,
    /// Its arm.
    pub arm: Side,
    /// The run's id (`r-…`).
    pub run_id: String,
    /// Attempts in the slot (1 + retries).
    pub attempts: u32,
    /// The run's outcome as its report says (`passed`, `failed`).
    pub outcome: String,
    /// SHA-256 of the run's `manifest.seal`.
    pub seal_sha256: String,
    /// Start time (ms since the epoch, from its manifest): the time order.
    pub started_ms: f64,
    /// Per target, in report order.
    pub outcomes: Vec<Outcome>,
    /// Whether `patchdiff verify` found nothing.
    pub verified: bool,
    /// Minutes the run's steps took (sum of their elapsed times).
    pub minutes: f64,
    /// Model turns (hosted agents).
    pub turns: Option<f64>,
    /// Tool calls.
    pub tool_calls: Option<f64>,
    /// Tool errors (total).
    pub tool_errors: f64,
    /// Input tokens.
    pub tokens_in: Option<f64>,
    /// Cache-read tokens.
    pub cache_read: Option<f64>,
    /// Cache-write tokens.
    pub cache_write: Option<f64>,
    /// Output tokens.
    pub tokens_out: Option<f64>,
    /// Cost in US dollars, as the host reported it.
    pub cost_usd: Option<f64>,
    /// Tool errors by tool and reason code.
    pub tool_errors_by_reason: BTreeMap<String, BTreeMap<String, u64>>,
    /// Failing named checks per target.
    pub failing_checks: BTreeMap<String, Vec<String>>,
    /// Per failing target, its export's difference from the reference.
    pub signatures: BTreeMap<String, DiffSignature>,
}

/// Everything the report is computed from, and its result.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    /// `cmp-<id>`.
    pub comparison: String,
    /// The plan's digest.
    pub plan_digest: String,
    /// The plan's name.
    pub name: String,
    /// Runs per arm planned.
    pub runs_per_arm: u32,
    /// α.
    pub alpha: f64,
    /// The block order's seed.
    pub seed: u32,
    /// Declared differences.
    pub declared: Vec<String>,
    /// A/A calibration.
    pub aa: bool,
    /// Both arms' resolved configuration.
    pub arms: BTreeMap<String, BTreeMap<String, String>>,
    /// The verdict with every statistic behind it.
    pub verdict: Verdict,
    /// Counted member runs, in time order.
    pub runs: Vec<Member>,
    /// Retries taken (attempts beyond the first), per arm.
    pub retries: BTreeMap<String, u32>,
    /// Slots with no counted run, and why.
    pub missing: Vec<String>,
    /// Per-run metrics per arm (descriptive).
    pub metrics: Vec<MetricRow>,
    /// Named checks failing, per target: baseline and candidate counts.
    pub checks: Vec<CheckRow>,
    /// Tool errors by tool and reason: occurrences per arm.
    pub tool_errors: Vec<ToolErrorRow>,
    /// Failing exports clustered by their diff from the reference.
    pub signatures: Vec<SignatureRow>,
}

/// One failure signature: the runs whose export of a target differs from the reference the
/// same way ([`super::signature`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SignatureRow {
    /// Target.
    pub target: String,
    /// 6 hex digits.
    pub id: String,
    /// The first change.
    pub summary: String,
    /// Baseline slots showing it, in time order.
    pub baseline: Vec<String>,
    /// Candidate slots showing it, in time order.
    pub candidate: Vec<String>,
}

/// One metric's per-arm summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricRow {
    /// What it measures.
    pub metric: String,
    /// Median, baseline.
    pub baseline_median: f64,
    /// Median, candidate.
    pub candidate_median: f64,
    /// Hodges–Lehmann shift (candidate − baseline).
    pub hodges_lehmann: f64,
    /// Exact permutation p on the difference of means (two-sided), when enumerable.
    pub permutation_p: Option<f64>,
}

/// A named check failing in some runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CheckRow {
    /// Target.
    pub target: String,
    /// Check name.
    pub check: String,
    /// Baseline runs it failed in.
    pub baseline: u32,
    /// Candidate runs it failed in.
    pub candidate: u32,
    /// Failing only in the candidate.
    pub new_in_candidate: bool,
}

/// Tool errors of one tool and reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolErrorRow {
    /// Tool.
    pub tool: String,
    /// Reason code.
    pub reason: String,
    /// Occurrences in the baseline.
    pub baseline: u64,
    /// Occurrences in the candidate.
    pub candidate: u64,
}

/// Verifies every member run (`patchdiff verify` each, V1), side by side on the available
/// cores (at most 8); the answers in `dirs`' order. Each verification reads only its own run,
/// so running them at once changes no answer, only the report's recomputation time.
async fn verify_members(
    dirs: Vec<PathBuf>,
    options: &crate::verify::VerifyOptions,
) -> Vec<Result<crate::verify::VerifyReport, String>> {
    use futures::StreamExt;
    let width = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8));
    futures::stream::iter(dirs)
        .map(|dir| {
            let options = options.clone();
            // Verification reads files synchronously: each runs on a blocking thread, driven
            // there by this runtime's handle.
            let runtime = tokio::runtime::Handle::current();
            async move {
                tokio::task::spawn_blocking(move || {
                    runtime.block_on(crate::verify::verify(&dir, &options))
                })
                .await
                .unwrap_or_else(|e| Err(format!("the verification failed: {e}")))
            }
        })
        .buffered(width)
        .collect()
        .await
}

/// Collects, verifies and decides: the report of the comparison in `dir`, with member runs
/// also taken from `extra` paths. `verify_options` is what each member's verification uses.
/// Errors: `dir` is not a comparison directory or its plan does not match its seal.
pub async fn compute(
    dir: &Path,
    extra: &[PathBuf],
    verify_options: &crate::verify::VerifyOptions,
) -> Result<CompareReport, String> {
    let cmp = Comparison::open(dir)?;
    let plan = &cmp.plan;
    let mut integrity = Vec::new();
    let found = find_runs(&cmp, extra, &mut integrity);
    let mut members = Vec::new();
    let mut records = Vec::new();
    let mut targets: Vec<String> = Vec::new();
    let mut retries: BTreeMap<String, u32> =
        [("baseline".to_owned(), 0), ("candidate".to_owned(), 0)].into();
    let mut verifications = verify_members(
        found.values().map(|f| f.dir.clone()).collect(),
        verify_options,
    )
    .await
    .into_iter();
    for found in found.values() {
        let run = &found.dir;
        let verified = verifications
            .next()
            .unwrap_or_else(|| Err(format!("{} was not verified", run.display())));
        let verify_problems: Vec<String> = match &verified {
            Ok(v) => v
                .problems
                .iter()
                .map(|p| format!("{} {}: {}", p.check, p.file, p.message))
                .collect(),
            Err(e) => vec![e.clone()],
        };
        let report = read_json(&run.join("report.json")).unwrap_or(Value::Null);
        let manifest = read_json(&run.join("manifest.json")).unwrap_or(Value::Null);
        let names: Vec<String> = report["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        if targets.is_empty() {
            targets = names.clone();
        }
        let arm = match found.slot.side {
            Side::Baseline => &plan.baseline,
            Side::Candidate => &plan.candidate,
        };
        for (field, value) in run_fields(&manifest, &report) {
            if let Some(planned) = arm.configuration.get(&field)
                && *planned != value
            {
                integrity.push(format!(
                    "run {} recorded {field} = {value:?}; its arm's plan says {planned:?} (it did \
                     not run the planned {} arm)",
                    found.slot.id(),
                    found.slot.side.name()
                ));
            }
        }
        let by_name: BTreeMap<&str, &Value> = report["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(|n| (n, t)))
            .collect();
        let outcomes: Vec<Outcome> = targets
            .iter()
            .map(|t| {
                by_name
                    .get(t.as_str())
                    .map_or(Outcome::Fail, |v| outcome_of(v))
            })
            .collect();
        let failing_checks: BTreeMap<String, Vec<String>> = by_name
            .iter()
            .map(|(n, t)| {
                let checks = t["failing_checks"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect();
                ((*n).to_owned(), checks)
            })
            .collect();
        let failing: Vec<&str> = targets
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| **o == Outcome::Fail)
            .map(|(t, _)| t.as_str())
            .collect();
        let signatures = super::signature::run_signatures(run, &failing);
        let host = &report["agent_host"];
        let tool_errors_by_reason: BTreeMap<String, BTreeMap<String, u64>> =
            serde_json::from_value(host["tool_errors"].clone()).unwrap_or_default();
        let minutes = report["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["elapsed_ms"].as_f64())
            .sum::<f64>()
            / 60_000.0;
        let seal_sha256 =
            crate::evidence::file_digest(&run.join(crate::evidence::SEAL_FILE)).unwrap_or_default();
        *retries
            .entry(found.slot.side.name().to_owned())
            .or_default() += found.attempts.saturating_sub(1).min(MAX_RETRIES);
        records.push(RunRecord {
            id: found.slot.id(),
            side: found.slot.side,
            verify_problems,
            breaches: breaches_of(&report),
            outcomes: outcomes.clone(),
        });
        members.push(Member {
            slot: found.slot.id(),
            arm: found.slot.side,
            run_id: report["run_id"].as_str().unwrap_or("?").to_owned(),
            attempts: found.attempts,
            outcome: report["outcome"].as_str().unwrap_or("?").to_owned(),
            seal_sha256,
            started_ms: manifest["started_ms"].as_f64().unwrap_or(0.0),
            outcomes,
            verified: records.last().is_some_and(|r| r.verify_problems.is_empty()),
            minutes,
            turns: number(&host["turns"]),
            tool_calls: number(&host["tool_calls_total"]),
            tool_errors: tool_errors_by_reason
                .values()
                .flat_map(|m| m.values())
                .sum::<u64>() as f64,
            tokens_in: number(&host["input_tokens"]),
            cache_read: number(&host["cache_read_tokens"]),
            cache_write: number(&host["cache_write_tokens"]),
            tokens_out: number(&host["output_tokens"]),
            cost_usd: number(&host["cost_usd"]),
            tool_errors_by_reason,
            failing_checks,
            signatures,
        });
    }
    // Time order (ties by slot), as the strips show them.
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&i, &j| {
        members[i]
            .started_ms
            .total_cmp(&members[j].started_ms)
            .then(members[i].slot.cmp(&members[j].slot))
    });
    let members: Vec<Member> = order.iter().map(|&i| members[i].clone()).collect();
    let records: Vec<RunRecord> = order.iter().map(|&i| records[i].clone()).collect();
    let runs_per_arm = cmp.runs_per_arm();
    let missing: Vec<String> = matrix::block_order(plan.seed, runs_per_arm)
        .into_iter()
        .filter(|s| !found.contains_key(s))
        .map(|s| {
            let attempts = matrix::sealed_attempts(&cmp.slot_dir(s)).len();
            if attempts > 0 {
                format!("{}: {attempts} attempts, every one infra_abort", s.id())
            } else {
                format!("{}: not run", s.id())
            }
        })
        .collect();
    if targets.is_empty() {
        targets = vec!["(no runs)".to_owned()];
    }
    let table = OutcomeTable {
        targets: targets.clone(),
        runs: records,
        integrity_problems: integrity,
        // A budget stop counts only while slots are missing (a `--resume` may have finished).
        stopped: if missing.is_empty() {
            None
        } else {
            cmp.last_stop()
        },
    };
    let mut rules = Rules {
        runs: runs_per_arm,
        ..Rules::of(plan)
    };
    // Deterministic curtailment is recomputed from the sealed runs, never taken on trust.
    rules.curtailed =
        plan.curtail && !missing.is_empty() && super::curtail::settled(&table, &rules).is_some();
    let verdict = verdict::decide(&table, &rules).map_err(|e| e.to_string())?;
    let metrics = metric_rows(&members);
    let checks = check_rows(&members);
    let tool_errors = tool_error_rows(&members);
    let signatures = signature_rows(&members);
    Ok(CompareReport {
        comparison: cmp.id.clone(),
        plan_digest: cmp.digest.clone(),
        name: plan.name.clone(),
        runs_per_arm,
        alpha: plan.alpha,
        seed: plan.seed,
        declared: plan.declared.clone(),
        aa: plan.aa,
        arms: [
            ("baseline".to_owned(), plan.baseline.configuration.clone()),
            ("candidate".to_owned(), plan.candidate.configuration.clone()),
        ]
        .into(),
        verdict,
        runs: members,
        retries,
        missing,
        metrics,
        checks,
        tool_errors,
        signatures,
    })
}

/// Clusters the members' failing exports by signature (target, id), slots in time order;
/// rows by target, then by how many runs show them (most first).
fn signature_rows(members: &[Member]) -> Vec<SignatureRow> {
    let mut rows: BTreeMap<(String, String), SignatureRow> = BTreeMap::new();
    for m in members {
        for (target, sig) in &m.signatures {
            let row = rows
                .entry((target.clone(), sig.id.clone()))
                .or_insert_with(|| SignatureRow {
                    target: target.clone(),
                    id: sig.id.clone(),
                    summary: sig.summary.clone(),
                    baseline: Vec::new(),
                    candidate: Vec::new(),
                });
            match m.arm {
                Side::Baseline => row.baseline.push(m.slot.clone()),
                Side::Candidate => row.candidate.push(m.slot.clone()),
            }
        }
    }
    let mut out: Vec<SignatureRow> = rows.into_values().collect();
    out.sort_by(|a, b| {
        a.target.cmp(&b.target).then(
            (b.baseline.len() + b.candidate.len()).cmp(&(a.baseline.len() + a.candidate.len())),
        )
    });
    out
}

/// How a metric is read from a member run (`None`: the run does not have it).
type MetricOf = dyn Fn(&Member) -> Option<f64>;

fn metric_rows(members: &[Member]) -> Vec<MetricRow> {
    let mut out = Vec::new();
    let metric = |name: &str, get: &MetricOf, only_passing: bool| {
        let values = |side: Side| -> Option<Vec<f64>> {
            members
                .iter()
                .filter(|m| m.arm == side)
                .filter(|m| !only_passing || m.outcome == "passed")
                .map(get)
                .collect()
        };
        let (a, b) = (values(Side::Baseline)?, values(Side::Candidate)?);
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let c = stats::compare_metric(&a, &b).ok()?;
        Some(MetricRow {
            metric: name.to_owned(),
            baseline_median: c.baseline_median,
            candidate_median: c.candidate_median,
            hodges_lehmann: c.hodges_lehmann,
            permutation_p: c.permutation.map(|p| p.p_two_sided),
        })
    };
    let rows: [(&str, &MetricOf, bool); 8] = [
        ("minutes, all runs", &|m| Some(m.minutes), false),
        ("minutes, passing runs", &|m| Some(m.minutes), true),
        ("turns", &|m| m.turns, false),
        ("tool calls", &|m| m.tool_calls, false),
        ("tool errors", &|m| Some(m.tool_errors), false),
        (
            "cache-read share",
            &|m| {
                let (r, w, i) = (m.cache_read?, m.cache_write?, m.tokens_in?);
                (r + w + i > 0.0).then(|| r / (r + w + i))
            },
            false,
        ),
        ("tokens out", &|m| m.tokens_out, false),
        ("cost per run (USD)", &|m| m.cost_usd, false),
    ];
    for (name, get, passing) in rows {
        if let Some(row) = metric(name, get, passing) {
            out.push(row);
        }
    }
    out
}

fn check_rows(members: &[Member]) -> Vec<CheckRow> {
    let mut counts: BTreeMap<(String, String), (u32, u32)> = BTreeMap::new();
    for m in members {
        for (target, checks) in &m.failing_checks {
            for check in checks {
                let e = counts.entry((target.clone(), check.clone())).or_default();
                match m.arm {
                    Side::Baseline => e.0 += 1,
                    Side::Candidate => e.1 += 1,
                }
            }
        }
    }
    counts
        .into_iter()
        .map(|((target, check), (a, b))| CheckRow {
            target,
            check,
            baseline: a,
            candidate: b,
            new_in_candidate: a == 0 && b > 0,
        })
        .collect()
}

fn tool_error_rows(members: &[Member]) -> Vec<ToolErrorRow> {
    let mut counts: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for m in members {
        for (tool, reasons) in &m.tool_errors_by_reason {
            for (reason, n) in reasons {
                let e = counts.entry((tool.clone(), reason.clone())).or_default();
                match m.arm {
                    Side::Baseline => e.0 += n,
                    Side::Candidate => e.1 += n,
                }
            }
        }
    }
    counts
        .into_iter()
        .map(|((tool, reason), (a, b))| ToolErrorRow {
            tool,
            reason,
            baseline: a,
            candidate: b,
        })
        .collect()
}

fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp-write");
    let _ = std::fs::remove_file(&tmp);
    crate::evidence::write_new_private(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes the report's files, `SHA256SUMS` (plan, manifest, openings, report files and every
/// counted member run's `manifest.seal`; `sha256sum -c` works from the comparison directory)
/// and `compare.seal` (the SHA-256 of `SHA256SUMS`) into the comparison directory.
pub fn write(dir: &Path, report: &CompareReport) -> Result<(), String> {
    let json = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
    let text = crate::display::visible(&report.to_text()).into_owned();
    let files: [(&str, String); 5] = [
        ("report.txt", text),
        ("report.json", json + "\n"),
        ("report.md", report.to_markdown()),
        ("report.junit.xml", report.to_junit()),
        ("runs.csv", report.to_csv()),
    ];
    for (name, body) in &files {
        replace_file(&dir.join(name), body.as_bytes())?;
    }
    let mut listed: Vec<String> = [
        "plan.toml",
        "plan.seal",
        "manifest.json",
        "openings.jsonl",
        matrix::STOPS_FILE,
        matrix::EXTENSION_FILE,
    ]
    .into_iter()
    .filter(|f| dir.join(f).is_file())
    .map(str::to_owned)
    .collect();
    listed.extend(REPORT_FILES.iter().map(|s| (*s).to_owned()));
    for m in &report.runs {
        let seal = format!(
            "runs/{}/{}/{}",
            m.slot,
            m.run_id,
            crate::evidence::SEAL_FILE
        );
        if dir.join(&seal).is_file() {
            listed.push(seal);
        }
    }
    let mut sums = String::new();
    for rel in &listed {
        let digest = crate::evidence::file_digest(&dir.join(rel))
            .map_err(|e| format!("cannot read {rel}: {e}"))?;
        sums.push_str(&format!("{digest}  {rel}\n"));
    }
    replace_file(&dir.join(crate::evidence::SUMS_FILE), sums.as_bytes())?;
    let seal = format!(
        "patchdiff-compare-seal 1\ncomparison {}\nplan {}\nSHA256 ({}) = {}\n",
        report.comparison,
        report.plan_digest,
        crate::evidence::SUMS_FILE,
        stats_sha256(sums.as_bytes())
    );
    replace_file(&dir.join(COMPARE_SEAL_FILE), seal.as_bytes())
}

fn stats_sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Whether `dir` is a comparison directory (it holds `plan.seal`).
pub fn is_comparison_dir(dir: &Path) -> bool {
    dir.join(matrix::PLAN_SEAL_FILE).is_file()
}

/// `patchdiff verify CMP_DIR`: every member run verified (inside [`compute`]), the plan seal,
/// `SHA256SUMS` and `compare.seal`, and `report.json` equal to a fresh recomputation. Returns
/// the problems found (empty: verified) and the recomputed report.
pub async fn verify_comparison(
    dir: &Path,
    verify_options: &crate::verify::VerifyOptions,
) -> Result<(Vec<String>, CompareReport), String> {
    let fresh = compute(dir, &[], verify_options).await?;
    let mut problems: Vec<String> = Vec::new();
    for m in &fresh.runs {
        if !m.verified {
            problems.push(format!(
                "member run {} ({}) fails `patchdiff verify`",
                m.slot, m.run_id
            ));
        }
    }
    // Through text, as report.json was written, so number representations compare alike.
    let recomputed: Value = serde_json::to_string(&fresh.to_json())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    match read_json(&dir.join("report.json")) {
        Ok(stored) if stored == recomputed => {}
        Ok(_) => problems
            .push("report.json differs from a fresh recomputation from the sealed runs".to_owned()),
        Err(e) => problems.push(format!("report.json: {e}")),
    }
    match std::fs::read_to_string(dir.join(crate::evidence::SUMS_FILE)) {
        Ok(sums) => {
            for line in sums.lines() {
                let Some((digest, rel)) = line.split_once("  ") else {
                    problems.push(format!("SHA256SUMS: malformed line {line:?}"));
                    continue;
                };
                match crate::evidence::file_digest(&dir.join(rel)) {
                    Ok(d) if d == digest => {}
                    Ok(_) => problems.push(format!("{rel}: digest differs from SHA256SUMS")),
                    Err(e) => problems.push(format!("{rel}: {e}")),
                }
            }
            let seal = std::fs::read_to_string(dir.join(COMPARE_SEAL_FILE)).unwrap_or_default();
            let want = format!(
                "SHA256 ({}) = {}",
                crate::evidence::SUMS_FILE,
                stats_sha256(sums.as_bytes())
            );
            if !seal.lines().any(|l| l == want) {
                problems.push(format!(
                    "{COMPARE_SEAL_FILE} does not seal SHA256SUMS (want `{want}`)"
                ));
            }
        }
        Err(e) => problems.push(format!("SHA256SUMS: {e}")),
    }
    Ok((problems, fresh))
}

/// The plan's sensitivity table for printing at plan time: flag thresholds and power.
pub fn plan_sensitivity(plan: &Plan) -> Result<String, String> {
    let design = Design::new(plan.runs, plan.alpha).map_err(|e| e.to_string())?;
    let table = super::power::PowerTable::of(design).map_err(|e| e.to_string())?;
    Ok(table.render_text())
}

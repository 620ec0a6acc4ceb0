//! `runs-bench`: the time to list past runs (issue 27 item 5; target ≤ 100 ms for 1,000). N run
//! directories are written under `target/runs-bench/` — copies of a real run's
//! `manifest.json`, `report.json`, `SHA256SUMS` and `manifest.seal` when RUN_DIR is given (e.g.
//! the demo canary's: `patchdiff console --script demo`), else files of the demo run's shape
//! and size (a 9 KB manifest, a 12 KB report with five targets and their named checks) — plus
//! one comparison directory and one corrupt run, then, side by side (median of 7, the files
//! in the page cache):
//!
//! - `index`: `runs::index` — what `patchdiff runs` and the console's runs pane call: typed
//!   reads of the fields a summary needs, each seal checked against its files' digests;
//! - `whole`: both JSON files parsed whole into `serde_json::Value` (what `runs` did before),
//!   no seal check;
//! - `query+table`: a filtered `runs::query` (model, verdict) and the `runs list` table.
//!
//! Run: `cargo run --release --example runs-bench -- [RUN_DIR] [N]` (N defaults to 1000). The
//! directory is removed afterwards.

use std::path::{Path, PathBuf};
use std::time::Instant;

use patchdiff::runs::{self, RunFilter, SortKey};
use serde_json::{Value, json};

fn synthetic_manifest(i: usize) -> Vec<u8> {
    let env: serde_json::Map<String, Value> = (0..8)
        .map(|k| {
            (
                format!("PATCHDIFF_SETTING_{k}"),
                json!(format!("/tmp/runs/r-{i}/value-{k}")),
            )
        })
        .collect();
    let process = json!({"environment": env, "profile": "observed", "store_backend": "sqlite",
        "waymark": {"mode": "resident", "limits": {"admission": {"secs": 2, "nanos": 0},
        "readiness": {"secs": 7, "nanos": 0}, "max_waiting": 8, "rss_limit_bytes": 1073741824u64}}});
    let targets: Vec<Value> = ["calendar", "chess", "incidents", "worker-logs", "limiter"]
        .iter()
        .map(|t| json!({"target": t, "language": "python", "sha256": "a".repeat(64), "version": 0}))
        .collect();
    serde_json::to_vec_pretty(&json!({
        "run_id": format!("r-{i}"),
        "started_ms": 1_796_000_000_000.0 + i as f64 * 60_000.0,
        "source_sha": "b".repeat(40),
        "agent": {"model": if i.is_multiple_of(3) { "claude-sonnet-4-5" } else { "scripted-demo" },
                  "provider": "patchdiff", "reasoning": "none"},
        "initial_targets": targets,
        "configuration": {
            "observed_process": env,
            "processes": {"observed": process, "full": process},
            "node": {"path": "/usr/bin/node", "version": "v20.19.0"},
            "fixture_manifest": "suite/manifest.json",
            "fixture_manifest_source": "/root/.cache/patchdiff/bundle-0.1.0-x/fixtures/manifest.json",
            "fixture_manifest_sha256": "c".repeat(64),
            "agent_host": null,
            "provider_endpoints": [],
        },
        "gate2": "closed",
    }))
    .unwrap()
}

fn synthetic_report(i: usize) -> Vec<u8> {
    let targets: Vec<Value> = ["calendar", "chess", "incidents", "worker-logs", "limiter"]
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let checks: Vec<Value> = (0..7)
                .map(|c| {
                    json!({"name": format!("check number {c} of the target holds"),
                                "passed": true, "duration_ms": 1.5, "message": null})
                })
                .collect();
            let pass = !(i + k).is_multiple_of(7);
            json!({"name": t, "full_byte": pass, "first_difference": null, "require": "full-byte",
                   "checks": checks, "failing_checks": [], "checks_note": null,
                   "controls": "reused (digest 863bc51e95b5)", "behavioral": pass,
                   "evaluated": true, "version": 1, "revision": 2, "accepted": 2, "rejected": 1,
                   "initial_sha256": "d".repeat(64), "exported_sha256": "e".repeat(64),
                   "replay_consistent": true, "status": if pass { "pass" } else { "fail" },
                   "check_exit": null, "check_output": "x".repeat(300), "notes": []})
        })
        .collect();
    let passed = !i.is_multiple_of(7) && !(i + 1).is_multiple_of(7);
    serde_json::to_vec_pretty(&json!({
        "run_id": format!("r-{i}"), "run_dir": "/tmp", "passed": passed,
        "outcome": if passed { "passed" } else { "failed" }, "infra_abort": null,
        "steps": (0..9).map(|s| json!({"command": format!("step{s}"), "ok": true,
            "summary": "a summary of what the step did".repeat(3), "elapsed_ms": 100})).collect::<Vec<_>>(),
        "targets": targets, "agent": {"model": "scripted-demo"}, "agent_host": null,
        "require": "full-byte", "rule": "behaviour decides", "gate2": "closed",
        "evidence_incomplete": [], "rehearsal": [],
    }))
    .unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Writes `n` runs (copies of `source`'s files, or synthetic ones) under `root`.
fn populate(root: &Path, source: Option<&Path>, n: usize) -> u64 {
    let mut bytes = 0;
    for i in 0..n {
        let dir = root.join(format!("r-20261201-{:06}-{i}", i % 240_000));
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<(&str, Vec<u8>)> = match source {
            Some(src) => [
                "manifest.json",
                "report.json",
                "SHA256SUMS",
                "manifest.seal",
            ]
            .into_iter()
            .filter_map(|f| std::fs::read(src.join(f)).ok().map(|b| (f, b)))
            .collect(),
            None => {
                let (m, sums) = (synthetic_manifest(i), b"sums\n".to_vec());
                let seal = format!(
                    "patchdiff-seal 1\nrun r-{i}\nSHA256 (manifest.json) = {}\nSHA256 (SHA256SUMS) = {}\n",
                    sha256(&m),
                    sha256(&sums)
                );
                vec![
                    ("manifest.json", m),
                    ("report.json", synthetic_report(i)),
                    ("SHA256SUMS", sums),
                    ("manifest.seal", seal.into_bytes()),
                ]
            }
        };
        for (name, b) in files {
            bytes += b.len() as u64;
            std::fs::write(dir.join(name), b).unwrap();
        }
    }
    // One corrupt run and one comparison, as a real runs directory holds.
    std::fs::create_dir_all(root.join("r-corrupt")).unwrap();
    std::fs::write(root.join("r-corrupt/manifest.json"), b"{\"torn").unwrap();
    let cmp = root.join("cmp-0123456789ab");
    std::fs::create_dir_all(&cmp).unwrap();
    std::fs::write(cmp.join("plan.seal"), b"f00d\n").unwrap();
    std::fs::write(cmp.join("manifest.json"), br#"{"runs_per_arm": 10}"#).unwrap();
    bytes
}

/// What `runs` did before: both files parsed whole into `Value`.
fn whole(root: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let read = |f: &str| -> Value {
            std::fs::read(e.path().join(f))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null)
        };
        let (m, r) = (read("manifest.json"), read("report.json"));
        n += usize::from(m["agent"]["model"].is_string() || r["passed"].is_boolean());
    }
    n
}

fn median_ms(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut times = Vec::new();
    let mut count = 0;
    for _ in 0..7 {
        let t = Instant::now();
        count = f();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], count)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let source = args
        .first()
        .filter(|a| Path::new(a).is_dir())
        .map(PathBuf::from);
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1000);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/runs-bench");
    let _ = std::fs::remove_dir_all(&root);
    let bytes = populate(&root, source.as_deref(), n);
    let (index_ms, entries) = median_ms(|| runs::index(&root).len());
    let (whole_ms, _) = median_ms(|| whole(&root));
    let filter = RunFilter {
        model: Some("claude".into()),
        verdict: Some(runs::RunVerdict::Failed),
        ..Default::default()
    };
    let (table_ms, _) = median_ms(|| {
        let found = runs::query(&root, &filter, SortKey::Model);
        runs::cli::render_table(&root, &found, true).len()
    });
    println!(
        "runs-bench · {n} runs ({}) + 1 corrupt + 1 comparison · {:.1} MiB of manifests and reports · {} build",
        if source.is_some() {
            "copies of RUN_DIR"
        } else {
            "synthetic, demo-shaped"
        },
        bytes as f64 / (1024.0 * 1024.0),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!("{:<34} {:>10}", "median of 7 (ms)", "");
    println!(
        "{:<34} {:>10.1}   ({entries} entries)",
        "index (typed, seals checked)", index_ms
    );
    println!("{:<34} {:>10.1}", "whole (Value, no seal check)", whole_ms);
    println!(
        "{:<34} {:>10.1}",
        "query (model, verdict) + table", table_ms
    );
    println!(
        "target ≤ 100 ms for 1,000 runs: {}",
        if index_ms <= 100.0 * n as f64 / 1000.0 {
            "met"
        } else {
            "NOT met"
        }
    );
    let _ = std::fs::remove_dir_all(&root);
}

//! Canary bench (not a test; issue 21 item 6): a canary's own work outside the agent step (init,
//! launch, preflight, export, inspect, evaluate, report — every step but `agent`), p50 over N
//! runs of the bundled demo canary, side by side:
//! - **without the control cache**: each run gets a fresh data directory and its `evaluate`
//!   step runs with `fresh_controls`, so every control runs (preflight and evaluate);
//! - **with the control cache**: every run shares one data directory whose cache a warm-up run
//!   filled, so preflight and evaluate reuse the controls and run only the checks on the
//!   exports (targets side by side).
//!
//! Run: `cargo run --release --example canary-bench -- [--runs N]` (default 5). Uses the
//! `patchdiff` binary next to this one (or one directory up); needs the Waymark `node_modules`,
//! `node`, `python3` and `rustc`, as the demo canary does. Prints each step's p50 in ms.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

fn patchdiff_exe() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    for exe in [
        me.with_file_name("patchdiff"),
        me.parent()
            .and_then(Path::parent)
            .map(|d| d.join("patchdiff"))
            .unwrap_or_default(),
    ] {
        if exe.is_file() {
            return Ok(exe);
        }
    }
    bail!(
        "the patchdiff binary was not found next to {}: build it first",
        me.display()
    )
}

/// Runs the demo canary once with `data` as its data directory; returns each step's ms.
fn run_demo(exe: &Path, data: &Path, fresh_controls: bool) -> anyhow::Result<Vec<(String, u64)>> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let demo = std::fs::read_to_string(repo.join("assets/canary/demo.canary"))?;
    let plan = repo.join("assets/canary/demo.plan.jsonl");
    let mut script = demo.replace("demo.plan.jsonl", &plan.display().to_string());
    if fresh_controls {
        script = script.replace(
            "evaluate require=full-byte",
            "evaluate require=full-byte fresh_controls",
        );
    }
    let dir = tempfile::tempdir()?;
    let script_path = dir.path().join("bench.canary");
    std::fs::write(&script_path, script)?;
    let output = Command::new(exe)
        .args(["console", "--script"])
        .arg(&script_path)
        .arg("--runs-dir")
        .arg(dir.path().join("runs"))
        .arg("--json")
        .env("PATCHDIFF_DATA_DIR", data)
        .output()?;
    let report: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "the canary printed no report: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    if report["passed"] != true {
        bail!(
            "the demo canary did not pass: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(report["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["command"].as_str().unwrap_or("?").to_owned(),
                s["elapsed_ms"].as_u64().unwrap_or(0),
            )
        })
        .collect())
}

fn p50(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// p50 per step over the runs, and p50 of the per-run sum outside `agent` (and `record`).
fn summarize(runs: &[Vec<(String, u64)>]) -> (BTreeMap<String, u64>, u64) {
    let mut per_step: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut outside = Vec::new();
    for run in runs {
        let mut sum = 0;
        for (step, ms) in run {
            per_step.entry(step.clone()).or_default().push(*ms);
            if step != "agent" {
                sum += ms;
            }
        }
        outside.push(sum);
    }
    (
        per_step.into_iter().map(|(k, v)| (k, p50(v))).collect(),
        p50(outside),
    )
}

fn main() -> anyhow::Result<()> {
    let mut runs = 5;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().context("--runs N")?.parse()?,
            other => bail!("unknown argument `{other}`; usage: canary-bench [--runs N]"),
        }
    }
    let exe = patchdiff_exe()?;
    let mut cold = Vec::new();
    for _ in 0..runs {
        let data = tempfile::tempdir()?;
        cold.push(run_demo(&exe, data.path(), true)?);
    }
    let shared = tempfile::tempdir()?;
    run_demo(&exe, shared.path(), false)?; // warm-up: fills the control cache
    let mut warm = Vec::new();
    for _ in 0..runs {
        warm.push(run_demo(&exe, shared.path(), false)?);
    }
    let (cold_steps, cold_total) = summarize(&cold);
    let (warm_steps, warm_total) = summarize(&warm);
    println!("demo canary, p50 over {runs} runs (ms)");
    println!(
        "{:<12} {:>14} {:>14}",
        "step", "no cache", "cached controls"
    );
    for (step, ms) in &cold_steps {
        println!(
            "{step:<12} {ms:>14} {:>14}",
            warm_steps.get(step).copied().unwrap_or(0)
        );
    }
    println!(
        "{:<12} {cold_total:>14} {warm_total:>14}   (goal with cached controls: ≤ 3000)",
        "outside agent"
    );
    Ok(())
}

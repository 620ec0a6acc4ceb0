//! Comparison bench (not a test; issue 24): a 10 + 10 comparison of the demo fixtures through
//! the real Claude Code CLI and `scripted-model` playing a mixture (the baseline's model the
//! demo plan; the candidate's the wrong-chess plan in 40 % of sessions), at concurrency 1 and 2,
//! side by side:
//! - wall time of `patchdiff compare run` (plan sealed → report written);
//! - per member run, median: the whole run (its steps' elapsed times) and our own time outside
//!   the agent step (every step but `agent`);
//! - the report's recomputation: `patchdiff compare report CMP_DIR` (verifies every member run,
//!   decides, writes the files).
//!
//! Run: `cargo run --release --example compare-bench -- [--runs N] [--concurrency 1,2] [--keep]`
//! (defaults 10 and 1,2). Uses the `patchdiff` and `scripted-model` binaries next to this one
//! (or one directory up) and the pinned CLI in `tests/tools` (or `PATCHDIFF_CLAUDE_BINARY`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    for exe in [
        me.with_file_name(name),
        me.parent()
            .and_then(Path::parent)
            .map(|d| d.join(name))
            .unwrap_or_default(),
    ] {
        if exe.is_file() {
            return Ok(exe);
        }
    }
    bail!(
        "{name} was not found next to {}: build it first",
        me.display()
    )
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

struct Row {
    concurrency: u32,
    wall_s: f64,
    verdict: String,
    run_s: f64,
    outside_agent_s: f64,
    report_s: f64,
    retries: u64,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let runs: u32 = value("--runs").map_or(Ok(10), |v| v.parse())?;
    let levels: Vec<u32> = value("--concurrency")
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let patchdiff = sibling("patchdiff")?;
    let model_bin = sibling("scripted-model")?;
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let claude = std::env::var_os("PATCHDIFF_CLAUDE_BINARY").map_or_else(
        || repo.join("tests/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude"),
        PathBuf::from,
    );
    if !claude.is_file() {
        bail!("the Claude Code CLI is missing: npm ci --prefix tests/tools");
    }
    let scratch = tempfile::tempdir()?;
    // `--keep`: leave the comparison directories for inspection (the path is printed).
    let keep = args.iter().any(|a| a == "--keep");
    let plans = repo.join("assets/canary");
    let mut model = Command::new(&model_bin)
        .arg("--plan")
        .arg(plans.join("demo.plan.jsonl"))
        .arg("--mixture")
        .arg(format!(
            "scripted-candidate={}:0.4,{}:0.6",
            plans.join("wrong.plan.jsonl").display(),
            plans.join("demo.plan.jsonl").display()
        ))
        .args(["--seed", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .context("start scripted-model")?;
    let mut url = String::new();
    BufReader::new(model.stdout.take().context("stdout")?).read_line(&mut url)?;
    let url = url.trim().to_owned();
    for (name, m) in [
        ("a.canary", "scripted-baseline"),
        ("b.canary", "scripted-candidate"),
    ] {
        std::fs::write(
            scratch.path().join(name),
            format!(
                "record model={m} provider=anthropic reasoning=default\ninit\n\
                 agent claude max_turns=200 timeout=600\nexport\ninspect\nevaluate\nreport\n"
            ),
        )?;
    }
    let base = |cmd: &mut Command| {
        cmd.env("PATCHDIFF_STATE_DIR", scratch.path().join("state"))
            .env("PATCHDIFF_DATA_DIR", scratch.path().join("data"))
            .env_remove("PATCHDIFF_DATABASE_URL")
            .env("PATCHDIFF_CLAUDE_BINARY", &claude)
            .env("ANTHROPIC_BASE_URL", &url)
            .env("ANTHROPIC_API_KEY", "sk-ant-bench")
            .env("PATCHDIFF_GATE2", "open")
            .stdin(Stdio::null());
    };
    let mut rows = Vec::new();
    for &c in &levels {
        let plan = scratch.path().join(format!("plan-{c}.toml"));
        let mut cmd = Command::new(&patchdiff);
        base(&mut cmd);
        let out = cmd
            .args(["compare", "plan", "--declare", "agent", "--seed", "7"])
            .args(["--runs", &runs.to_string(), "--concurrency", &c.to_string()])
            .arg("--baseline")
            .arg(scratch.path().join("a.canary"))
            .arg("--candidate")
            .arg(scratch.path().join("b.canary"))
            .arg("-o")
            .arg(&plan)
            .output()?;
        if !out.status.success() {
            bail!("compare plan: {}", String::from_utf8_lossy(&out.stderr));
        }
        let runs_dir = scratch.path().join(format!("runs-{c}"));
        let started = Instant::now();
        let mut cmd = Command::new(&patchdiff);
        base(&mut cmd);
        let out = cmd
            .args(["compare", "run", "--json"])
            .arg(&plan)
            .arg("--runs-dir")
            .arg(&runs_dir)
            .stderr(Stdio::inherit())
            .output()?;
        let wall_s = started.elapsed().as_secs_f64();
        let report: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("compare run printed no report (exit {:?})", out.status))?;
        let cmp = std::fs::read_dir(&runs_dir)?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("cmp-"))
            })
            .context("no comparison directory")?;
        let (mut whole, mut outside) = (Vec::new(), Vec::new());
        for m in report["runs"].as_array().into_iter().flatten() {
            let run = cmp
                .join("runs")
                .join(m["slot"].as_str().unwrap_or_default())
                .join(m["run_id"].as_str().unwrap_or_default());
            let r: Value = serde_json::from_slice(&std::fs::read(run.join("report.json"))?)?;
            let steps = r["steps"].as_array().cloned().unwrap_or_default();
            let ms = |s: &Value| s["elapsed_ms"].as_f64().unwrap_or(0.0);
            whole.push(steps.iter().map(ms).sum::<f64>() / 1000.0);
            outside.push(
                steps
                    .iter()
                    .filter(|s| s["command"] != "agent")
                    .map(ms)
                    .sum::<f64>()
                    / 1000.0,
            );
        }
        let started = Instant::now();
        let mut cmd = Command::new(&patchdiff);
        base(&mut cmd);
        let recomputed = cmd
            .args(["compare", "report"])
            .arg(&cmp)
            .stdout(Stdio::null())
            .status()?;
        let report_s = started.elapsed().as_secs_f64();
        if recomputed.code() != out.status.code() {
            bail!(
                "the recomputed report's exit {recomputed} differs from the run's {}",
                out.status
            );
        }
        eprintln!(
            "concurrency {c}: {}",
            report["verdict"]["line"].as_str().unwrap_or("?")
        );
        for reason in report["verdict"]["reasons"]
            .as_array()
            .into_iter()
            .flatten()
        {
            eprintln!("  · {}", reason.as_str().unwrap_or("?"));
        }
        let retries = report["retries"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        rows.push(Row {
            concurrency: c,
            wall_s,
            verdict: report["verdict"]["kind"].as_str().unwrap_or("?").to_owned(),
            run_s: median(whole),
            outside_agent_s: median(outside),
            report_s,
            retries,
        });
    }
    let _ = model.kill();
    let _ = model.wait();
    if keep {
        eprintln!("kept {}", scratch.keep().display());
    }
    println!(
        "compare-bench: {runs} + {runs} runs of the demo fixtures, real Claude Code CLI, scripted mixture model"
    );
    println!(
        "{:>11} {:>10} {:>10} {:>14} {:>20} {:>16} {:>8}",
        "concurrency",
        "wall s",
        "verdict",
        "run s (p50)",
        "outside agent s (p50)",
        "report s (recompute)",
        "retries"
    );
    for r in &rows {
        println!(
            "{:>11} {:>10.1} {:>10} {:>14.2} {:>20.2} {:>16.2} {:>8}",
            r.concurrency, r.wall_s, r.verdict, r.run_s, r.outside_agent_s, r.report_s, r.retries
        );
    }
    Ok(())
}

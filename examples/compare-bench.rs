//! Comparison bench (not a test; issue 24): a 10 + 10 comparison of the demo fixtures through
//! the real Claude Code CLI and `scripted-model` playing a mixture (the baseline's model the
//! demo plan; the candidate's the wrong-chess plan in 40 % of sessions), at concurrency 1 and 2,
//! side by side in one run:
//! - wall time of `patchdiff compare run` (plan sealed → report written), with the load average
//!   before and after (the machine may be shared: read the figures beside it);
//! - per member run, median: the whole run (console spawned → console gone), our own time
//!   outside the agent (the whole run less the host's model turns: admitted → its result line),
//!   and each phase: console start, `init`, host start (the `agent` step's start → the host's
//!   first stream line), preflight (that line → the admission gate opens: seal checked, the
//!   host-started observed process's tools and worker ready), agent (admitted → result line),
//!   host end (result line → step end), `export`, `inspect`, `evaluate`, seal (the `report`
//!   step: reports, journal binding, `SHA256SUMS`, seal) and exit;
//! - the report's recomputation: `patchdiff compare report CMP_DIR` (verifies every member run,
//!   decides, writes the files), whole and per member.
//!
//! Phase boundaries come from the evidence each run keeps (the manifest's start, the steps'
//! elapsed times, the host stream's and the admission file's timestamps, file times of the
//! report and seal and of the slot's console log), so the bench measures the product as it
//! runs, with nothing added to it.
//!
//! Run: `cargo run --release --example compare-bench -- [--runs N] [--concurrency 1,2] [--keep]`
//! (defaults 10 and 1,2). Uses the `patchdiff` and `scripted-model` binaries next to this one
//! (or one directory up) and the pinned CLI in `tests/tools` (or `PATCHDIFF_CLAUDE_BINARY`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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

/// The 1-, 5- and 15-minute load averages (`/proc/loadavg`).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// A file's modification time in ms since the epoch.
fn mtime_ms(path: &Path) -> Option<f64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64() * 1000.0)
}

/// A file's creation (birth) time in ms since the epoch, where the filesystem keeps one.
fn birth_ms(path: &Path) -> Option<f64> {
    let t = std::fs::metadata(path).ok()?.created().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64() * 1000.0)
}

/// The phases of one member run, in order, with their seconds.
const PHASES: [&str; 12] = [
    "console start",
    "init",
    "host start",
    "preflight",
    "agent",
    "host end",
    "export",
    "inspect",
    "evaluate",
    "seal",
    "exit",
    "other steps",
];

/// One member run's figures: the whole run, our own time outside the agent, and its phases (s).
struct RunTimes {
    whole_s: f64,
    outside_agent_s: f64,
    phases: BTreeMap<&'static str, f64>,
}

/// Reads one member run's phases from its evidence (see the module's documentation). `log` is
/// the console's stderr log of the counted attempt: created just before the console was spawned,
/// last written as it exited.
fn run_times(run: &Path, log: &Path) -> anyhow::Result<RunTimes> {
    let read = |name: &str| -> anyhow::Result<Value> {
        Ok(serde_json::from_slice(
            &std::fs::read(run.join(name)).with_context(|| format!("{}", run.display()))?,
        )?)
    };
    let report = read("report.json")?;
    let manifest = read("manifest.json")?;
    let started = manifest["started_ms"].as_f64().context("started_ms")?;
    let spawned = birth_ms(log).unwrap_or(started);
    let exited = mtime_ms(log).unwrap_or(f64::NAN);
    let sealed = mtime_ms(&run.join("manifest.seal")).unwrap_or(f64::NAN);
    let mut phases: BTreeMap<&'static str, f64> = BTreeMap::new();
    phases.insert("console start", (started - spawned) / 1000.0);
    // Steps run one after another from the run's start: each step's start is the sum before it.
    let mut at = started;
    let mut other = 0.0;
    for step in report["steps"].as_array().into_iter().flatten() {
        let ms = step["elapsed_ms"].as_f64().unwrap_or(0.0);
        let name = step["command"].as_str().unwrap_or("");
        match name {
            "init" | "export" | "inspect" | "evaluate" => {
                *phases
                    .entry(PHASES[PHASES.iter().position(|p| *p == name).unwrap_or(0)])
                    .or_default() += ms / 1000.0;
            }
            "agent" => {
                let stream = std::fs::read_to_string(run.join("agent.claude.jsonl"))?;
                let ts: Vec<f64> = stream
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter_map(|v| v["ts_ms"].as_f64())
                    .collect();
                let first = ts.first().copied().unwrap_or(at);
                let last = ts.last().copied().unwrap_or(at + ms);
                let admitted = std::fs::read_to_string(run.join("agent.admitted"))
                    .ok()
                    .and_then(|t| t.split_whitespace().find_map(|w| w.parse::<f64>().ok()))
                    .unwrap_or(first);
                phases.insert("host start", (first - at) / 1000.0);
                phases.insert("preflight", (admitted - first) / 1000.0);
                phases.insert("agent", (last - admitted) / 1000.0);
                phases.insert("host end", (at + ms - last) / 1000.0);
            }
            _ => other += ms / 1000.0,
        }
        at += ms;
    }
    phases.insert("other steps", other);
    phases.insert("seal", (sealed - at) / 1000.0);
    phases.insert("exit", (exited - sealed) / 1000.0);
    let whole_s = (exited - spawned) / 1000.0;
    let agent = phases.get("agent").copied().unwrap_or(0.0);
    Ok(RunTimes {
        whole_s,
        outside_agent_s: whole_s - agent,
        phases,
    })
}

struct Row {
    concurrency: u32,
    wall_s: f64,
    verdict: String,
    run_s: f64,
    outside_agent_s: f64,
    report_s: f64,
    members: usize,
    retries: u64,
    load_before: String,
    load_after: String,
    phases: BTreeMap<&'static str, f64>,
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
        // Every planned run (no curtailment): the bench measures 10 + 10 runs.
        let out = cmd
            .args([
                "compare",
                "plan",
                "--declare",
                "agent",
                "--seed",
                "7",
                "--no-curtail",
            ])
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
        let load_before = load_average();
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
        let load_after = load_average();
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
        let mut by_phase: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        let members = report["runs"].as_array().cloned().unwrap_or_default();
        for m in &members {
            let slot = m["slot"].as_str().unwrap_or_default();
            let run = cmp
                .join("runs")
                .join(slot)
                .join(m["run_id"].as_str().unwrap_or_default());
            let attempt = m["attempts"].as_u64().unwrap_or(1);
            let log = cmp
                .join("logs")
                .join(format!("{slot}.{attempt}.stderr.log"));
            let t = run_times(&run, &log)?;
            whole.push(t.whole_s);
            outside.push(t.outside_agent_s);
            for (k, v) in t.phases {
                by_phase.entry(k).or_default().push(v);
            }
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
            members: members.len(),
            retries,
            load_before,
            load_after,
            phases: by_phase.into_iter().map(|(k, v)| (k, median(v))).collect(),
        });
    }
    let _ = model.kill();
    let _ = model.wait();
    if keep {
        eprintln!("kept {}", scratch.keep().display());
    }
    let when = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!(
        "compare-bench: {runs} + {runs} runs of the demo fixtures, real Claude Code CLI, scripted mixture model \
         (unix time {when}, {} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>11} {:>8} {:>10} {:>8} {:>12} {:>15} {:>13} {:>12} {:>8} {:>16} {:>16}",
        "concurrency",
        "wall s",
        "verdict",
        "members",
        "run s (p50)",
        "ours s (p50)",
        "report s",
        "per member",
        "retries",
        "load before",
        "load after"
    );
    for r in &rows {
        println!(
            "{:>11} {:>8.1} {:>10} {:>8} {:>12.2} {:>15.2} {:>13.2} {:>12.3} {:>8} {:>16} {:>16}",
            r.concurrency,
            r.wall_s,
            r.verdict,
            r.members,
            r.run_s,
            r.outside_agent_s,
            r.report_s,
            r.report_s / r.members.max(1) as f64,
            r.retries,
            r.load_before,
            r.load_after
        );
    }
    println!(
        "per member run, p50 s (ours = the whole run less `agent`; `agent` is the host's model turns):"
    );
    print!("{:>14}", "phase");
    for r in &rows {
        print!(" {:>14}", format!("concurrency {}", r.concurrency));
    }
    println!();
    for phase in PHASES {
        print!("{phase:>14}");
        for r in &rows {
            print!(
                " {:>14.3}",
                r.phases.get(phase).copied().unwrap_or(f64::NAN)
            );
        }
        println!();
    }
    Ok(())
}

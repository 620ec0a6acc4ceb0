//! Per-target boundary bench (not a test; K5, W7), through real `patchdiff mcp` processes on one
//! database, printed side by side in one run:
//!
//! 1. throughput of validated submissions: one client through one observed process, then five
//!    clients each submitting to its own target through its own process, concurrently;
//! 2. `patchdiff_save` of target B, p50/p99: idle, then while a submission's validation on
//!    target A stalls inside another process's worker (the test-only fault worker in
//!    `stall_marker` mode, held on a FIFO until every save of B is done). Goal: stalled p99
//!    within 2x of idle.
//!
//! Run: `cargo run --release --example boundary-bench -- [--submissions N] [--saves M]` (defaults
//! 100 and 200). Needs the Waymark `node_modules`; uses the `patchdiff` binary next to this one
//! and a temporary database.

#[path = "shared/patchdiff_exe.rs"]
mod patchdiff_exe;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

type Client = RunningService<RoleClient, ()>;

const CLIENTS: usize = 5;
const SOURCE: &str = "class Calendar {\n  count() { return this.windows.length; }\n}\n// <<M:0>>\n";

fn flag(name: &str, default: usize) -> anyhow::Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|v| *v > 0)
            .with_context(|| format!("{name} needs a positive number")),
        None => Ok(default),
    }
}

async fn launch(exe: &Path, vars: &BTreeMap<String, String>) -> anyhow::Result<Client> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("mcp").env_clear();
    for k in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.envs(vars).stdin(Stdio::piped()).stdout(Stdio::piped());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    Ok(().serve(transport).await?)
}

async fn call(client: &Client, tool: &str, args: Value) -> anyhow::Result<Value> {
    let mut p = CallToolRequestParams::new(tool.to_owned());
    p.arguments = Some(match args {
        Value::Object(m) => m,
        _ => Map::new(),
    });
    let r = client.call_tool(p).await?;
    if r.is_error == Some(true) {
        bail!("{tool} returned isError: {:?}", r.content);
    }
    r.structured_content
        .with_context(|| format!("{tool}: no structured content"))
}

/// Submission `i` to `target`: `<<M:i>>` -> `<<M:i+1>>` at base revision `i` (validated).
async fn submit(client: &Client, target: &str, i: usize) -> anyhow::Result<()> {
    let r = call(
        client,
        "patchdiff_submit_observed_operations",
        json!({"target": target, "request_key": format!("k{i}"), "base_revision": i,
               "operations": [{"old_text": format!("<<M:{i}>>"), "new_text": format!("<<M:{}>>", i + 1)}]}),
    )
    .await?;
    if r["outcome"] != "accepted" {
        bail!("submission {i} to {target} was not accepted: {r}");
    }
    Ok(())
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn save_times(client: &Client, target: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        call(client, "patchdiff_save", json!({"target": target})).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let submissions = flag("--submissions", 100)?;
    let saves = flag("--saves", 200)?;
    let exe = patchdiff_exe::patchdiff_exe()?;
    // The checkout's worker directory: the stalling worker below needs its test-only
    // `test-fixtures/`, which the bundle an installed binary unpacks does not carry.
    let waymark = std::env::var_os("PATCHDIFF_WAYMARK_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/integrations/waymark"))
        });
    let dir = tempfile::tempdir()?;
    let p = dir.path();
    let mut vars = BTreeMap::new();
    for (k, v) in [
        (
            "PATCHDIFF_DATABASE_URL",
            format!("sqlite://{}", p.join("pd.sqlite").display()),
        ),
        (
            "PATCHDIFF_CONFIG_DIR",
            p.join("config").display().to_string(),
        ),
        ("PATCHDIFF_DATA_DIR", p.join("data").display().to_string()),
        ("PATCHDIFF_STATE_DIR", p.join("state").display().to_string()),
        ("PATCHDIFF_WAYMARK_DIR", waymark.display().to_string()),
        (
            "PATCHDIFF_WAYMARK_WORK_ROOT",
            p.join("waymark").display().to_string(),
        ),
        ("PATCHDIFF_MCP_PROFILE", "full".to_owned()),
        ("PATCHDIFF_STRICT_OBSERVATION_MODE", "0".to_owned()),
    ] {
        vars.insert(k.to_owned(), v);
    }
    let fixture = p.join("fixture.js");
    std::fs::write(&fixture, SOURCE)?;
    let sha = hex::encode(Sha256::digest(SOURCE.as_bytes()));
    let full = launch(&exe, &vars).await?;
    let targets: Vec<String> = (0..CLIENTS)
        .map(|i| format!("t{i}"))
        .chain(["a".into(), "b".into(), "solo".into()])
        .collect();
    for t in &targets {
        call(
            &full,
            "patchdiff_init_target",
            json!({"target": t, "fixture": fixture, "sha256": sha, "language": "javascript"}),
        )
        .await?;
    }
    full.cancel().await?;
    vars.insert("PATCHDIFF_MCP_PROFILE".into(), "observed".into());

    // 1. Throughput: one client, then five clients through five processes.
    let solo = launch(&exe, &vars).await?;
    call(&solo, "patchdiff_read_target", json!({"target": "solo"})).await?;
    submit(&solo, "solo", 0).await?; // the worker is ready after this one
    let t = Instant::now();
    for i in 1..=submissions {
        submit(&solo, "solo", i).await?;
    }
    let one = submissions as f64 / t.elapsed().as_secs_f64();
    solo.cancel().await?;
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let c = launch(&exe, &vars).await?;
        submit(&c, &format!("t{i}"), 0).await?;
        clients.push(c);
    }
    let t = Instant::now();
    let runs = clients.iter().enumerate().map(|(c, client)| async move {
        for i in 1..=submissions {
            submit(client, &format!("t{c}"), i).await?;
        }
        anyhow::Ok(())
    });
    for r in futures::future::join_all(runs).await {
        r?;
    }
    let five = (CLIENTS * submissions) as f64 / t.elapsed().as_secs_f64();
    for c in clients {
        c.cancel().await?;
    }
    println!(
        "K5 throughput of validated submissions ({submissions} per client, each client its own target and process)"
    );
    println!("{:>24} {:>14}", "", "submissions/s");
    println!("{:>24} {:>14.1}", "1 client", one);
    println!("{:>24} {:>14.1}", format!("{CLIENTS} clients"), five);
    println!("{:>24} {:>13.2}x", "ratio", five / one);
    println!();

    // 2. Saves of b, idle vs while a's validation stalls in another process.
    let entered = p.join("stall-entered");
    let release = p.join("stall-release");
    for f in [&entered, &release] {
        nix::unistd::mkfifo(f.as_path(), nix::sys::stat::Mode::S_IRWXU)?;
    }
    let scripts = p.join("stalling-waymark");
    std::fs::create_dir_all(&scripts)?;
    std::fs::write(
        scripts.join("waymark_worker.mjs"),
        format!(
            "process.argv.push(\"--fault\", \"stall_marker\");\nawait import({:?});\n",
            waymark
                .join("test-fixtures/fault_worker.mjs")
                .display()
                .to_string()
        ),
    )?;
    let mut stalled_vars = vars.clone();
    for (k, v) in [
        ("PATCHDIFF_WAYMARK_DIR", &scripts),
        ("PATCHDIFF_TEST_STALL_ENTERED", &entered),
        ("PATCHDIFF_TEST_STALL_RELEASE", &release),
    ] {
        stalled_vars.insert(k.to_owned(), v.display().to_string());
    }
    let saver = launch(&exe, &vars).await?;
    let stalled = launch(&exe, &stalled_vars).await?;
    call(&stalled, "patchdiff_read_target", json!({"target": "a"})).await?;
    let idle = save_times(&saver, "b", saves).await?;
    let stall_a = async {
        call(
            &stalled,
            "patchdiff_submit_observed_operations",
            json!({"target": "a", "request_key": "stall", "base_revision": 0,
                   "operations": [{"old_text": "<<M:0>>", "new_text": "<<M:0>> STALL_HERE"}]}),
        )
        .await
    };
    let measure_b = async {
        let entered = entered.clone();
        tokio::task::spawn_blocking(move || std::fs::read_to_string(entered)).await??;
        let times = save_times(&saver, "b", saves).await;
        let release = release.clone();
        tokio::task::spawn_blocking(move || std::fs::write(release, "go\n")).await??;
        times
    };
    let (a, stalled_times) = tokio::join!(stall_a, measure_b);
    let stalled_times = stalled_times?;
    if a?["outcome"] != "accepted" {
        bail!("the stalled submission was not accepted");
    }
    saver.cancel().await?;
    stalled.cancel().await?;
    println!(
        "K5 patchdiff_save of target B through another process, ms ({saves} saves per case; A's validation stalls until all are done)"
    );
    println!(
        "{:>10} {:>10} {:>14} {:>14} {:>17}",
        "idle p50", "idle p99", "A-stalled p50", "A-stalled p99", "stalled/idle p99"
    );
    println!(
        "{:>10.3} {:>10.3} {:>14.3} {:>14.3} {:>16.2}x",
        pct(&idle, 50.0),
        pct(&idle, 99.0),
        pct(&stalled_times, 50.0),
        pct(&stalled_times, 99.0),
        pct(&stalled_times, 99.0) / pct(&idle, 99.0)
    );
    Ok(())
}

//! Waymark benchmark (not a test): resident vs one-shot discovery on generated JavaScript of
//! ~2 KB, ~100 KB and ~1 MB, plus generation restart-to-ready time (SPEC W1, W10), and a split
//! of the resident overhead over parse (p50s): the Node side's request-file read + SHA-256 +
//! decode (`read_ms`), the scope list's JSON and pipe transfer (an all-scopes discovery minus a
//! summary one, which returns no scopes), and the rest (Rust side: request file write + hash,
//! admission, frames, and the pipe round trip). Of the rest, the request directory's own file
//! system cost is measured beside it in the same run: the supervisor's create/write/unlink/rmdir
//! of a per-request directory (W3), timed alone under the same work root. On a file system
//! mounted with `discard` (the ext4 of the machine these figures were first taken on), freeing the directory's block makes
//! `rmdir` alone cost about 0.2 ms; on tmpfs it is microseconds.
//!
//! Usage: `cargo run --release --example waymark-bench [-- --iterations-scale F] [--work-root DIR]`
//! (`--work-root`: where generation roots go, default a fresh directory under the system temp
//! dir; e.g. `/dev/shm` to see the cost without the disk). Node and the script dir come from
//! `PATCHDIFF_NODE_BINARY` / `PATCHDIFF_WAYMARK_DIR` as in the product. Prints one table.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use patchdiff::telemetry::{PerfEvent, Recorder};
use patchdiff::waymark::{Language, ScopeQuery, Waymark, WaymarkConfig, WaymarkMode, stale};

/// Generates realistic JavaScript: classes with methods, free functions and arrow functions.
fn generate_js(target_bytes: usize) -> String {
    let mut out = String::from("'use strict';\n// generated for waymark-bench\n\n");
    let mut i = 0usize;
    while out.len() < target_bytes {
        out.push_str(&format!(
            "class Calendar{i} {{\n  constructor(owner) {{\n    this.owner = owner;\n    this.windows = [];\n  }}\n\n  addWindow(start, end) {{\n    if (end <= start) {{\n      throw new RangeError(`empty window ${{start}}..${{end}}`);\n    }}\n    this.windows.push({{ start, end }});\n    return this.windows.length;\n  }}\n\n  overlaps(t) {{\n    return this.windows.some((w) => w.start <= t && t < w.end);\n  }}\n}}\n\nfunction parseLine{i}(line) {{\n  const [name, start, end] = line.split(',');\n  return {{ name: name.trim(), start: Number(start), end: Number(end) }};\n}}\n\nconst total{i} = (xs) => xs.reduce((a, b) => a + b, 0);\n\n"
        ));
        i += 1;
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

struct Run {
    wall_ms: Vec<f64>,
    parse_ms: Vec<f64>,
    read_ms: Vec<f64>,
}

async fn run(waymark: &Waymark, source: &str, n: usize) -> Result<Run, String> {
    run_query(waymark, source, n, None).await
}

async fn run_query(
    waymark: &Waymark,
    source: &str,
    n: usize,
    query: Option<&ScopeQuery>,
) -> Result<Run, String> {
    let mut wall = Vec::with_capacity(n);
    let mut parse = Vec::with_capacity(n);
    let mut read = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let d = match query {
            None => waymark.discover(Language::JavaScript, source).await,
            Some(q) => {
                waymark
                    .discover_query(Language::JavaScript, source, q)
                    .await
            }
        }
        .map_err(|e| e.to_string())?;
        wall.push(started.elapsed().as_secs_f64() * 1000.0);
        parse.push(d.parse_ms);
        read.push(d.read_ms);
    }
    Ok(Run {
        wall_ms: sorted(wall),
        parse_ms: sorted(parse),
        read_ms: sorted(read),
    })
}

/// The file-system part of one resident request (W3), timed alone: the supervisor's create of a
/// 0700 request directory and of its `source` through [`stale::write_private_new`] (the call the
/// supervisor makes), then the unlink and rmdir it does after the answer. Milliseconds.
fn request_dir_ms(dir: &std::path::Path, source: &str) -> Result<f64, String> {
    use std::os::unix::fs::DirBuilderExt;
    let started = Instant::now();
    let file = dir.join("source");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .and_then(|()| stale::write_private_new(&file, source.as_bytes()))
        .and_then(|()| std::fs::remove_file(&file))
        .and_then(|()| std::fs::remove_dir(dir))
        .map_err(|e| format!("request directory {}: {e}", dir.display()))?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

fn config(mode: WaymarkMode, work_root: &std::path::Path) -> Result<WaymarkConfig, String> {
    let settings = patchdiff::config::Settings::from_env();
    let mut c = WaymarkConfig::from_settings(
        &settings,
        WaymarkConfig::default_script_dir(&settings).map_err(|e| e.to_string())?,
        work_root.to_path_buf(),
    )
    .map_err(|e| e.to_string())?;
    c.mode = mode;
    c.active_timeout = Duration::from_secs(60);
    Ok(c)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match bench().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("waymark-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn bench() -> Result<(), String> {
    let scale: f64 = std::env::args()
        .skip_while(|a| a != "--iterations-scale")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let n = |base: usize| ((base as f64 * scale).round() as usize).max(3);
    let parent = match std::env::args().skip_while(|a| a != "--work-root").nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None if std::env::args().any(|a| a == "--work-root") => {
            return Err("--work-root needs a directory (e.g. --work-root /dev/shm)".to_owned());
        }
        None => std::env::temp_dir(),
    };
    let work = parent.join(format!("waymark-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;

    let sizes = [
        ("2 KB", generate_js(2 * 1024), n(300), n(30)),
        ("100 KB", generate_js(100 * 1024), n(60), n(15)),
        ("1 MB", generate_js(1024 * 1024), n(15), n(6)),
    ];

    let resident = Waymark::new(
        config(WaymarkMode::Resident, &work)?,
        Recorder::from_settings(&patchdiff::config::Settings::from_env()).0,
    );
    resident.prewarm().await.map_err(|e| e.to_string())?;
    let oneshot = Waymark::new(
        config(WaymarkMode::Oneshot, &work)?,
        Recorder::from_settings(&patchdiff::config::Settings::from_env()).0,
    );

    println!(
        "waymark-bench: node {}, JavaScript sources, debug-or-release = {}",
        resident.status().node_binary.display(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!(
        "{:>7} {:>7} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>11} | {:>6} {:>6}",
        "size",
        "bytes",
        "res p50",
        "res p99",
        "1shot p50",
        "1shot p99",
        "parse p50",
        "parse p99",
        "res/1shot",
        "res-parse",
        "n res",
        "n 1sh"
    );
    for (label, source, n_res, n_one) in &sizes {
        // one warm-up discovery per size in resident mode (not counted)
        run(&resident, source, 1).await?;
        let r = run(&resident, source, *n_res).await?;
        let o = run(&oneshot, source, *n_one).await?;
        let r50 = percentile(&r.wall_ms, 50.0);
        let o50 = percentile(&o.wall_ms, 50.0);
        let p50 = percentile(&r.parse_ms, 50.0);
        println!(
            "{:>7} {:>7} | {:>7.2}ms {:>7.2}ms | {:>7.2}ms {:>7.2}ms | {:>7.2}ms {:>7.2}ms | {:>9.4} {:>9.2}ms | {:>6} {:>6}",
            label,
            source.len(),
            r50,
            percentile(&r.wall_ms, 99.0),
            o50,
            percentile(&o.wall_ms, 99.0),
            p50,
            percentile(&r.parse_ms, 99.0),
            r50 / o50,
            r50 - p50,
            n_res,
            n_one,
        );
    }
    oneshot.shutdown().await;

    println!();
    println!(
        "resident overhead over parse, p50 ms (work root {}):",
        work.display()
    );
    println!(
        "{:>7} | {:>8} {:>8} | {:>9} | {:>10} {:>12} {:>10} | {:>11} {:>13}",
        "size",
        "total",
        "parse",
        "overhead",
        "node read",
        "scopes JSON",
        "rest",
        "request dir",
        "rest - dir"
    );
    for (label, source, n_res, _) in &sizes {
        // Interleaved, so both see the same machine load.
        let (mut all, mut summary, mut dir) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..*n_res {
            all.push(run(&resident, source, 1).await?);
            summary.push(run_query(&resident, source, 1, Some(&ScopeQuery::Summary)).await?);
            dir.push(request_dir_ms(&work.join(format!("dir-{i}")), source)?);
        }
        let dir = percentile(&sorted(dir), 50.0);
        let merge = |runs: Vec<Run>| Run {
            wall_ms: sorted(runs.iter().flat_map(|r| r.wall_ms.clone()).collect()),
            parse_ms: sorted(runs.iter().flat_map(|r| r.parse_ms.clone()).collect()),
            read_ms: sorted(runs.iter().flat_map(|r| r.read_ms.clone()).collect()),
        };
        let (all, summary) = (merge(all), merge(summary));
        let wall = percentile(&all.wall_ms, 50.0);
        let parse = percentile(&all.parse_ms, 50.0);
        let read = percentile(&all.read_ms, 50.0);
        let summary_wall = percentile(&summary.wall_ms, 50.0);
        let summary_parse = percentile(&summary.parse_ms, 50.0);
        let rest = summary_wall - summary_parse - read;
        println!(
            "{:>7} | {:>8.3} {:>8.3} | {:>9.3} | {:>10.3} {:>12.3} {:>10.3} | {:>11.3} {:>13.3}",
            label,
            wall,
            parse,
            wall - parse,
            read,
            (wall - parse) - (summary_wall - summary_parse),
            rest,
            dir,
            rest - dir,
        );
    }
    resident.shutdown().await;

    // Generation restart-to-ready: launch to ready frame (worker_ready duration), fresh owners so
    // the rolling-minute launch limit (3) is not what is measured.
    let mut ready_ms = Vec::new();
    let mut prewarm_ms = Vec::new();
    for _ in 0..n(8) {
        let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
        let s2 = seen.clone();
        let recorder = Recorder::disabled().with_listener(Arc::new(move |e: &PerfEvent| {
            if e.name == "worker_ready" {
                s2.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(e.duration_ms);
            }
        }));
        let w = Waymark::new(config(WaymarkMode::Resident, &work)?, recorder);
        let started = Instant::now();
        w.prewarm().await.map_err(|e| e.to_string())?;
        prewarm_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        ready_ms.extend(seen.lock().unwrap_or_else(|p| p.into_inner()).iter());
        w.shutdown().await;
    }
    let ready_ms = sorted(ready_ms);
    let prewarm_ms = sorted(prewarm_ms);
    println!(
        "generation restart-to-ready (spawn -> ready frame: the first seven languages loaded and warmed up): p50 {:.1} ms, max {:.1} ms; prewarm call p50 {:.1} ms (n={})",
        percentile(&ready_ms, 50.0),
        percentile(&ready_ms, 100.0),
        percentile(&prewarm_ms, 50.0),
        prewarm_ms.len()
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

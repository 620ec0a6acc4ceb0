//! TEST HELPER (SPEC W11): a parent process that owns a resident Waymark worker, prints
//! `child <pid>` once it is ready, and then waits forever. The orphan test kills it with SIGKILL
//! and checks that the Node child exits on its own (stdin-reader guard).
//!
//! Usage: `waymark-probe <work root> [--fault NAME]`; the script dir and Node binary come from
//! `PATCHDIFF_WAYMARK_DIR` / `PATCHDIFF_NODE_BINARY` as in the product. `--fault NAME` runs the
//! test-only `test-fixtures/fault_worker.mjs` with that fault (e.g. `spin`: a worker whose main
//! thread is busy forever) instead of the real worker.
//!
//! `waymark-probe --lazy` (W13 lazy singleton): uses `owner::shared()` with no guard (work root
//! from `PATCHDIFF_WAYMARK_WORK_ROOT`), prewarms, prints `child <pid>`, waits for one line on
//! stdin and exits normally, leaving the worker to the singleton's exit-time cleanup.

use std::io::Write;
use std::path::PathBuf;

use patchdiff::telemetry::Recorder;
use patchdiff::waymark::{Waymark, WaymarkConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "--lazy") {
        return lazy().await;
    }
    let Some(work_root) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: waymark-probe <work root>");
        return std::process::ExitCode::from(2);
    };
    let fault = match std::env::args().nth(2).as_deref() {
        None => None,
        Some("--fault") => std::env::args().nth(3),
        Some(other) => {
            eprintln!("waymark-probe: unknown argument {other:?}");
            return std::process::ExitCode::from(2);
        }
    };
    let settings = patchdiff::config::Settings::from_env();
    let mut config = match WaymarkConfig::default_script_dir(&settings)
        .and_then(|dir| WaymarkConfig::from_settings(&settings, dir, work_root))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("waymark-probe: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Some(fault) = fault {
        config.worker_script = Some(
            config
                .script_dir
                .join("test-fixtures")
                .join("fault_worker.mjs"),
        );
        config.worker_args = vec!["--fault".into(), fault];
    }
    let waymark = Waymark::new(config, Recorder::disabled());
    if let Err(e) = waymark.prewarm().await {
        eprintln!("waymark-probe: prewarm failed: {e}");
        return std::process::ExitCode::from(1);
    }
    let pid = waymark.status().pid.unwrap_or(0);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "child {pid}");
    let _ = out.flush();
    drop(out);
    std::future::pending::<()>().await;
    std::process::ExitCode::SUCCESS
}

async fn lazy() -> std::process::ExitCode {
    let waymark = match patchdiff::waymark::owner::shared() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("waymark-probe: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Err(e) = waymark.prewarm().await {
        eprintln!("waymark-probe: prewarm failed: {e}");
        return std::process::ExitCode::from(1);
    }
    println!("child {}", waymark.status().pid.unwrap_or(0));
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    std::process::ExitCode::SUCCESS
}

//! TEST HELPER (SPEC W11): a parent process that owns a resident Waymark worker, prints
//! `child <pid>` once it is ready, and then waits forever. The orphan test kills it with SIGKILL
//! and checks that the Node child exits on its own (stdin-reader guard).
//!
//! Usage: `waymark-probe <work root>`; the script dir and Node binary come from
//! `PATCHDIFF_WAYMARK_DIR` / `PATCHDIFF_NODE_BINARY` as in the product.

use std::io::Write;
use std::path::PathBuf;

use patchdiff::telemetry::Recorder;
use patchdiff::waymark::{Waymark, WaymarkConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let Some(work_root) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: waymark-probe <work root>");
        return std::process::ExitCode::from(2);
    };
    let config = match WaymarkConfig::from_env(WaymarkConfig::default_script_dir(), work_root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("waymark-probe: {e}");
            return std::process::ExitCode::from(2);
        }
    };
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

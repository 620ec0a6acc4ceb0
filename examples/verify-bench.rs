//! `verify-bench`: peak memory of reading a large wire log (issue 22 item 6). A sealed run's
//! `observed.mcp.jsonl` is grown by `MIB` MiB of chained `patchdiff_read_target` exchanges
//! (64 KiB of content per result, a process of its own), the run re-sealed, and then, each in a
//! child process of its own so each peak is its own (`wait4`'s `ru_maxrss`), side by side:
//!
//! - `whole`: what `verify` and the target story did before — the log read whole
//!   (`std::fs::read`) and audited from the bytes, then read again as a string, every message
//!   parsed into memory and paired;
//! - `stream`: what they do now — `evidence::audit_file` and the story's `attempts_in_log`
//!   over a `BufReader`, one line at a time;
//! - `verify`: the real `patchdiff verify RUN --json` binary over the grown run.
//!
//! Run: `cargo run --release --example verify-bench -- RUN_DIR [MIB] [PATCHDIFF]`, where RUN_DIR
//! is a sealed run (e.g. the demo canary's: `patchdiff console --script demo`), MIB defaults to
//! 300 and PATCHDIFF to the `patchdiff` binary beside this example's build directory. The
//! grown copy is written under `target/verify-bench/` and removed afterwards.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use patchdiff::chain::{chain_tail_of, chained, line_digest};

const RESULT_CONTENT_BYTES: usize = 64 * 1024;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// Appends about `mib` MiB of chained request/result pairs to the wire log at `path`.
fn grow(path: &Path, mib: usize) -> u64 {
    let mut prev = chain_tail_of(path).expect("tail");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open");
    let content = "x".repeat(RESULT_CONTENT_BYTES);
    let pid = 4_000_000u32;
    let mut seq = 0u64;
    let target_bytes = (mib as u64) << 20;
    let mut written = 0u64;
    let mut id = 1u64;
    while written < target_bytes {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "patchdiff_read_target", "arguments": {"target": "calendar"}}});
        let result = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
            "structuredContent": {"target": "calendar", "content": content}, "isError": false}});
        for (direction, message) in [("request", request), ("result", result)] {
            let record = serde_json::json!({"direction": direction, "mono_ns": seq, "pid": pid,
                "raw": message.to_string(), "seq": seq, "ts_ms": 1.0});
            let line = chained(&prev, &record.to_string());
            prev = line_digest(line.trim_end().as_bytes());
            file.write_all(line.as_bytes()).expect("write");
            written += line.len() as u64;
            seq += 1;
        }
        id += 1;
    }
    file.sync_all().expect("sync");
    written
}

fn reseal(run: &Path) {
    std::fs::remove_file(run.join("SHA256SUMS")).expect("sums");
    std::fs::remove_file(run.join("manifest.seal")).expect("seal");
    let _ = std::fs::remove_file(run.join(patchdiff::evidence::SIGNATURE_FILE));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("manifest json");
    patchdiff::evidence::seal_run(&patchdiff::evidence::RunDir {
        run_id: manifest["run_id"].as_str().expect("run_id").to_owned(),
        path: run.to_path_buf(),
    })
    .expect("seal");
}

/// Runs `command`, returns (exit code, peak RSS in MiB, seconds) from `wait4`.
fn measured(mut command: Command) -> (i32, f64, f64) {
    let started = Instant::now();
    let child = command
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped; `status` and `usage` outlive the call.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4");
    std::mem::forget(child);
    (
        libc::WEXITSTATUS(status),
        usage.ru_maxrss as f64 / 1024.0,
        started.elapsed().as_secs_f64(),
    )
}

/// The child side: reads `log` the way `mode` says.
fn measure(mode: &str, log: &Path) {
    match mode {
        "whole" => {
            let bytes = std::fs::read(log).expect("read");
            let audit = patchdiff::evidence::audit_log(&bytes);
            assert!(audit.complete());
            let text = std::fs::read_to_string(log).expect("read");
            let messages = patchdiff::evidence::wire_messages(&text);
            let exchanges = patchdiff::evidence::wire_exchanges(&messages);
            assert!(!exchanges.is_empty());
        }
        "stream" => {
            let audit = patchdiff::evidence::audit_file(log).expect("audit");
            assert!(audit.complete());
            let file = std::fs::File::open(log).expect("open");
            let attempts = patchdiff::canary::story::attempts_in_log(
                std::io::BufReader::new(file),
                "observed",
                "calendar",
            );
            assert!(!attempts.is_empty());
        }
        other => panic!("unknown mode {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--measure") {
        measure(&args[2], Path::new(&args[3]));
        return;
    }
    let Some(run) = args.get(1).map(PathBuf::from) else {
        eprintln!("usage: verify-bench RUN_DIR [MIB] [PATCHDIFF]");
        std::process::exit(2);
    };
    let mib: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(300);
    let me = std::env::current_exe().expect("current_exe");
    let build_dir = me.parent().and_then(Path::parent).expect("build dir");
    let patchdiff = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| build_dir.join("patchdiff"));
    let scratch = build_dir.parent().expect("target dir").join("verify-bench");
    let _ = std::fs::remove_dir_all(&scratch);
    let copy = scratch.join(run.file_name().expect("run name"));
    copy_tree(&run, &copy);
    let log = copy.join("observed.mcp.jsonl");
    let grown = grow(&log, mib);
    reseal(&copy);
    let size = std::fs::metadata(&log).expect("log").len() as f64 / (1 << 20) as f64;
    println!(
        "observed.mcp.jsonl: {size:.1} MiB ({:.1} MiB added)",
        grown as f64 / (1 << 20) as f64
    );
    println!(
        "{:<8} {:>14} {:>10} {:>6}",
        "reader", "peak RSS MiB", "seconds", "exit"
    );
    for mode in ["whole", "stream"] {
        let mut command = Command::new(&me);
        command.args(["--measure", mode]).arg(&log);
        let (code, rss, secs) = measured(command);
        println!("{mode:<8} {rss:>14.1} {secs:>10.2} {code:>6}");
    }
    let mut command = Command::new(&patchdiff);
    command.arg("verify").arg(&copy).arg("--json");
    let (code, rss, secs) = measured(command);
    println!("{:<8} {rss:>14.1} {secs:>10.2} {code:>6}", "verify");
    let _ = std::fs::remove_dir_all(&scratch);
}

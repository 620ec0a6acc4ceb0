//! `evidence-bench`: what the chained-log writer's cross-process lock costs (issue 22). Side by
//! side, per append of a wire-record-sized line (about 400 bytes): a plain `O_APPEND` write of
//! a chained line whose tail is kept in memory (the writer before issue 22), and
//! `chain::ChainWriter::append` (exclusive `flock` around read-tail-and-append), alone and with
//! a second process's writer appending to the same file between this writer's appends (so the
//! tail is read back from the file every time).
//!
//! Run: `cargo run --release --example evidence-bench [APPENDS]` (default 20,000).

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Instant;

use patchdiff::chain::{CHAIN_GENESIS, ChainWriter, chained, line_digest};

fn body(i: usize) -> String {
    format!(
        "{{\"direction\":\"request\",\"mono_ns\":{i},\"pid\":4242,\"raw\":\"{}\",\"seq\":{i},\"ts_ms\":1.0}}",
        "x".repeat(300)
    )
}

fn open(path: &std::path::Path) -> std::fs::File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open")
}

fn per_append_us(started: Instant, n: usize) -> f64 {
    started.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let dir = tempfile::tempdir().expect("tempdir");

    let plain_path = dir.path().join("plain.jsonl");
    let mut plain = open(&plain_path);
    let mut prev = CHAIN_GENESIS.to_owned();
    let started = Instant::now();
    for i in 0..n {
        let line = chained(&prev, &body(i));
        plain.write_all(line.as_bytes()).expect("write");
        prev = line_digest(&line.as_bytes()[..line.len() - 1]);
    }
    let plain_us = per_append_us(started, n);

    let locked_path = dir.path().join("locked.jsonl");
    let mut locked = ChainWriter::new(&locked_path, open(&locked_path));
    let started = Instant::now();
    for i in 0..n {
        locked.append(&body(i), Some(i as u64)).expect("append");
    }
    let locked_us = per_append_us(started, n);

    let shared_path = dir.path().join("shared.jsonl");
    let mut a = ChainWriter::new(&shared_path, open(&shared_path));
    let mut b = ChainWriter::new(&shared_path, open(&shared_path));
    let started = Instant::now();
    for i in 0..n {
        let w = if i % 2 == 0 { &mut a } else { &mut b };
        w.append(&body(i), Some(i as u64)).expect("append");
    }
    let shared_us = per_append_us(started, n);
    let audit = patchdiff::evidence::audit_log(&std::fs::read(&shared_path).expect("read"));
    assert!(
        audit.changed.is_none() && audit.torn.is_empty(),
        "{audit:?}"
    );

    println!(
        "evidence-bench: {n} appends of a {}-byte line",
        chained(CHAIN_GENESIS, &body(0)).len()
    );
    println!("{:<52} {:>10}", "writer", "µs/append");
    println!(
        "{:<52} {:>10.2}",
        "plain O_APPEND, tail in memory (before issue 22)", plain_us
    );
    println!(
        "{:<52} {:>10.2}",
        "ChainWriter, one writer (flock, cached tail)", locked_us
    );
    println!(
        "{:<52} {:>10.2}",
        "ChainWriter, two writers alternating (tail re-read)", shared_us
    );
}

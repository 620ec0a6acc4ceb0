//! Backend comparison (issue 15, not a test): `cargo bench --bench backends`.
//!
//! Prints SQLite and PostgreSQL side by side, in one run, through the same `EditStore` calls:
//! - durable submission commit latency p50/p99 (ms, whole `submit` call, one client) on 1 KB and
//!   100 KB targets;
//! - replay throughput (journal entries/s: page through the journal with `replay`, limit 1000,
//!   and apply every entry to the fixture bytes) over a journal of a 1 KB target;
//! - submission throughput (accepted submissions/s, all clients together) with 1, 4 and 16
//!   concurrent clients, each a thread with its own store handle (its own connections, as its
//!   own MCP process would have), on distinct targets (one per client) and on one shared target
//!   (each client edits its own marker on a base that is usually stale: OT with corrections).
//!
//! Durability is production's on both: SQLite WAL with `synchronous = FULL`; PostgreSQL with its
//! defaults (`fsync = on`, `synchronous_commit = on`, `wal_sync_method = fdatasync`) — the
//! scratch cluster from `tests/util/backends.rs` (or `PATCHDIFF_TEST_POSTGRES`); nothing is turned off
//! for the comparison. SQLite's file lives under `STORE_BENCH_DIR` (default: the target dir),
//! on the same disk as the scratch cluster's temp dir unless you say otherwise.
//!
//! Environment: `BACKEND_BENCH_COMMITS` (default 200 per size), `BACKEND_BENCH_JOURNAL` (default
//! 3000 entries), `BACKEND_BENCH_PER_CLIENT` (default 60 submissions per client per case).
//! Without `--bench` (as `cargo test --all-targets` runs it) it does a tiny smoke run.

use patchdiff_test_util::backends;

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use backends::{Backend, Scratch};
use patchdiff::kernel::{TextEdit, apply_edits, sha256_hex};
use patchdiff::store::{EditStore, JournalKind, OperationRequest, Outcome, Submission};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A JavaScript target of about `size` bytes with markers `<<M{c}:0>>` for `clients` clients.
fn fixture(size: usize, clients: usize) -> String {
    let line = "  const value = compute(alpha, beta); // 界\n";
    let half = line.repeat(size / 2 / line.len());
    let markers: String = (0..clients).map(|c| format!("  // <<M{c}:0>>\n")).collect();
    format!("function f() {{\n{half}{markers}{half}}}\n")
}

/// Client `c`'s `i`-th submission: `<<M{c}:{i}>>` → `<<M{c}:{i+1}>>` on `base`.
fn submission(c: usize, i: usize, base: u64) -> Submission {
    Submission {
        request_key: format!("bench-{c}-{i}"),
        base_revision: base,
        expected_sha256: None,
        operations: vec![OperationRequest {
            observation_id: None,
            old_text: format!("<<M{c}:{i}>>"),
            new_text: format!("<<M{c}:{}>>", i + 1),
        }],
    }
}

fn init(store: &dyn EditStore, name: &str, content: &str) {
    store
        .init_target(
            name,
            "javascript",
            content.as_bytes(),
            &sha256_hex(content),
            true,
        )
        .unwrap();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Sequential durable submissions on one target of `size` bytes; sorted latencies.
fn commit_latencies(scratch: &Scratch, size: usize, count: usize) -> Vec<Duration> {
    let store = scratch.open();
    let name = format!("commit-{size}");
    init(&*store, &name, &fixture(size, 1));
    let mut out: Vec<Duration> = (0..count)
        .map(|i| {
            let t0 = Instant::now();
            let r = store
                .submit(&name, &submission(0, i, i as u64), false)
                .unwrap();
            let took = t0.elapsed();
            assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
            took
        })
        .collect();
    out.sort();
    out
}

/// Builds a `journal`-entry history on a 1 KB target, then pages through and applies it.
fn replay_rate(scratch: &Scratch, journal: usize) -> f64 {
    let store = scratch.open();
    init(&*store, "replay", &fixture(1024, 1));
    for i in 0..journal {
        store
            .submit("replay", &submission(0, i, i as u64), false)
            .unwrap();
    }
    let t0 = Instant::now();
    let mut content = store.saved_version("replay", 0).unwrap().content;
    let mut cursor: Option<String> = None;
    let mut entries = 0usize;
    loop {
        let page = store
            .replay("replay", cursor.as_deref(), Some(1000))
            .unwrap();
        for e in &page.entries {
            if e.kind == JournalKind::Edit {
                let edits: Vec<TextEdit> = e
                    .operations
                    .iter()
                    .map(|o| TextEdit {
                        start: o.start_byte,
                        end: o.end_byte,
                        new_text: o.new_text.clone(),
                    })
                    .collect();
                content = apply_edits(&content, &edits).unwrap();
                entries += 1;
            }
        }
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    let took = t0.elapsed();
    assert_eq!(entries, journal);
    assert_eq!(content, store.read_target("replay").unwrap().content);
    entries as f64 / took.as_secs_f64()
}

/// `clients` threads, each with its own store handle, each submitting `per_client` durable
/// edits; on distinct targets or one shared target. Returns accepted submissions per second.
fn throughput(scratch: &Scratch, clients: usize, per_client: usize, shared: bool) -> f64 {
    let case = format!("{}-{clients}", if shared { "shared" } else { "distinct" });
    {
        let store = scratch.open();
        if shared {
            init(&*store, &case, &fixture(1024, clients));
        } else {
            for c in 0..clients {
                init(&*store, &format!("{case}-{c}"), &fixture(1024, clients));
            }
        }
    }
    let stores: Vec<Arc<dyn EditStore>> = (0..clients).map(|_| scratch.open()).collect();
    let barrier = Arc::new(Barrier::new(clients + 1));
    let handles: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(c, store)| {
            let barrier = barrier.clone();
            let target = if shared {
                case.clone()
            } else {
                format!("{case}-{c}")
            };
            std::thread::spawn(move || {
                barrier.wait();
                let mut base = 0u64;
                for i in 0..per_client {
                    let r = store
                        .submit(&target, &submission(c, i, base), false)
                        .unwrap();
                    assert_eq!(
                        r.outcome,
                        Outcome::Accepted,
                        "{target} client {c}: {:?}",
                        r.reasons
                    );
                    base = r.revision;
                }
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    (clients * per_client) as f64 / t0.elapsed().as_secs_f64()
}

struct Figures {
    commit: Vec<(usize, Duration, Duration)>,
    replay: f64,
    /// (clients, distinct targets/s, shared target/s)
    throughput: Vec<(usize, f64, f64)>,
}

fn measure(scratch: &Scratch, commits: usize, journal: usize, per_client: usize) -> Figures {
    let commit = [1024usize, 100 * 1024]
        .into_iter()
        .map(|size| {
            let l = commit_latencies(scratch, size, commits);
            (size, percentile(&l, 0.5), percentile(&l, 0.99))
        })
        .collect();
    let replay = replay_rate(scratch, journal);
    let throughput = [1usize, 4, 16]
        .into_iter()
        .map(|n| {
            (
                n,
                throughput(scratch, n, per_client, false),
                throughput(scratch, n, per_client, true),
            )
        })
        .collect();
    Figures {
        commit,
        replay,
        throughput,
    }
}

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let scale = |full: usize, smoke: usize| if bench_mode { full } else { smoke };
    let commits = env_usize("BACKEND_BENCH_COMMITS", scale(200, 3));
    let journal = env_usize("BACKEND_BENCH_JOURNAL", scale(3000, 5));
    let per_client = env_usize("BACKEND_BENCH_PER_CLIENT", scale(60, 2));
    if !bench_mode {
        println!(
            "backend bench: smoke run (no --bench argument); run `cargo bench --bench backends` for figures"
        );
    }
    let base =
        std::env::var("STORE_BENCH_DIR").unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").to_owned());
    let mut results: Vec<(Backend, Figures)> = Vec::new();
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && !backends::postgres_or_skip("bench backends") {
            continue;
        }
        let mut scratch = Scratch::new(backend);
        scratch.dir = tempfile::tempdir_in(Path::new(&base)).unwrap();
        results.push((backend, measure(&scratch, commits, journal, per_client)));
    }
    print(&results, commits, journal, per_client);
}

fn print(results: &[(Backend, Figures)], commits: usize, journal: usize, per_client: usize) {
    let col = |f: &dyn Fn(&Figures) -> String| -> String {
        results
            .iter()
            .map(|(_, r)| format!("{:>14}", f(r)))
            .collect::<String>()
    };
    let heads: String = results
        .iter()
        .map(|(b, _)| format!("{:>14}", b.name()))
        .collect();
    println!();
    println!(
        "backends side by side (durable: SQLite WAL synchronous=FULL; PostgreSQL fsync=on, synchronous_commit=on)"
    );
    println!("{:<46}{heads}", "");
    for (k, size) in [1024usize, 100 * 1024].iter().enumerate() {
        println!(
            "{:<46}{}",
            format!("commit p50, {} KB target, ms ({commits})", size / 1024),
            col(&|r| format!("{:.3}", ms(r.commit[k].1)))
        );
        println!(
            "{:<46}{}",
            format!("commit p99, {} KB target, ms", size / 1024),
            col(&|r| format!("{:.3}", ms(r.commit[k].2)))
        );
    }
    println!(
        "{:<46}{}",
        format!("replay, entries/s ({journal}-entry journal)"),
        col(&|r| format!("{:.0}", r.replay))
    );
    for (k, n) in [1usize, 4, 16].iter().enumerate() {
        println!(
            "{:<46}{}",
            format!("{n:>2} clients, distinct targets, submissions/s"),
            col(&|r| format!("{:.1}", r.throughput[k].1))
        );
        println!(
            "{:<46}{}",
            format!("{n:>2} clients, one shared target, submissions/s"),
            col(&|r| format!("{:.1}", r.throughput[k].2))
        );
    }
    println!("({per_client} submissions per client per throughput case)");
    if let [(_, sqlite), (_, pg)] = results {
        let (s16, p16) = (sqlite.throughput[2].1, pg.throughput[2].1);
        println!(
            "16 clients on distinct targets: PostgreSQL / SQLite = {:.2}x ({})",
            p16 / s16,
            if p16 > s16 {
                "PostgreSQL ahead"
            } else {
                "SQLite ahead"
            }
        );
    }
}

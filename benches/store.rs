//! Store benchmark (not a test): `cargo bench --bench store`.
//!
//! Prints, in one run:
//! - durable submission commit latency p50/p99 (WAL, `synchronous = FULL`, one fsync'd
//!   transaction per submission, measured around the whole `submit` call) for 1 KB and 100 KB
//!   targets;
//! - replay throughput (journal entries/s, paging with `replay` and applying each entry to the
//!   content) over a 100,000-entry journal of a 1 KB target, and over a 5,000-entry journal of a
//!   100 KB target (the baseline journals whole contents: 100,000 × 100 KB would be 10 GB);
//! - the same figures for a baseline that rewrites the whole content per submission (and
//!   journals whole contents), and our ratio against it;
//! - K5: save latency p50/p99 on target B, idle vs while a submission's validation on target A
//!   stalls, through the stalled store itself and through a second store on the same file (as
//!   another MCP process would), side by side (goal: stalled p99 within 2x of idle).
//!
//! Environment: `STORE_BENCH_SUBMISSIONS` (default 300 per size), `STORE_BENCH_JOURNAL`
//! (default 100000), `STORE_BENCH_JOURNAL_100KB` (default 5000), `STORE_BENCH_SAVES` (default
//! 300 saves per case), `STORE_BENCH_DIR` (default: a temporary directory on the target disk).

use std::path::Path;
use std::time::{Duration, Instant};

use patchdiff::kernel::sha256_hex;
use patchdiff::store::{
    Durability, EditStore, JournalKind, OperationRequest, SqliteStore, Submission,
    apply_journal_operations,
};
use rusqlite::{Connection, TransactionBehavior, params};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A target of about `size` bytes with one counter marker `<<M:0>>` in the middle.
fn fixture(size: usize) -> String {
    let line = "  const value = compute(alpha, beta); // 界\n";
    let half = line.repeat(size / 2 / line.len());
    format!("function f() {{\n{half}  <<M:0>>\n{half}}}\n")
}

fn submission(i: usize, base: u64) -> Submission {
    Submission {
        request_key: format!("bench-{i}"),
        base_revision: base,
        expected_sha256: None,
        operations: vec![OperationRequest {
            observation_id: None,
            old_text: format!("<<M:{i}>>"),
            new_text: format!("<<M:{}>>", i + 1),
        }],
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The baseline: one row holds the whole content; every submission reads it, applies the
/// edit, rewrites it and journals the whole new content, in one durable transaction.
struct Baseline {
    conn: Connection,
}

impl Baseline {
    fn open(path: &Path, durable: bool) -> Baseline {
        let conn = Connection::open(path).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let _: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "OFF" })
            .unwrap();
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS content (name TEXT PRIMARY KEY, revision INTEGER, data BLOB, sha256 TEXT);
             CREATE TABLE IF NOT EXISTS journal (id INTEGER PRIMARY KEY, name TEXT, revision INTEGER, data BLOB);",
        )
        .unwrap();
        Baseline { conn }
    }

    fn init(&self, name: &str, content: &str) {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO content VALUES (?1, 0, ?2, ?3)",
                params![name, content.as_bytes(), sha256_hex(content)],
            )
            .unwrap();
    }

    fn submit(&mut self, name: &str, old: &str, new: &str) -> (u64, String) {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let (rev, data): (i64, Vec<u8>) = tx
            .query_row(
                "SELECT revision, data FROM content WHERE name = ?1",
                params![name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let content = String::from_utf8(data).unwrap();
        let at = content.find(old).unwrap();
        let mut next = String::with_capacity(content.len() + new.len());
        next.push_str(&content[..at]);
        next.push_str(new);
        next.push_str(&content[at + old.len()..]);
        let sha = sha256_hex(&next);
        tx.execute(
            "UPDATE content SET revision = ?2, data = ?3, sha256 = ?4 WHERE name = ?1",
            params![name, rev + 1, next.as_bytes(), sha],
        )
        .unwrap();
        tx.execute(
            "INSERT INTO journal (name, revision, data) VALUES (?1, ?2, ?3)",
            params![name, rev + 1, next.as_bytes()],
        )
        .unwrap();
        tx.commit().unwrap();
        (rev as u64 + 1, sha)
    }

    /// Replays the journal in pages of 1000; returns (entries, last content).
    fn replay(&self, name: &str) -> (usize, String) {
        let mut after = 0i64;
        let mut n = 0;
        let mut content = String::new();
        loop {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT id, data FROM journal WHERE name = ?1 AND id > ?2 ORDER BY id LIMIT 1000",
                )
                .unwrap();
            let rows: Vec<(i64, Vec<u8>)> = stmt
                .query_map(params![name, after], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            if rows.is_empty() {
                break;
            }
            for (id, data) in rows {
                content = String::from_utf8(data).unwrap();
                after = id;
                n += 1;
            }
        }
        (n, content)
    }
}

fn commit_latencies_ours(dir: &Path, size: usize, count: usize, durable: bool) -> Vec<Duration> {
    let durability = if durable {
        Durability::Full
    } else {
        Durability::NoSync
    };
    let store = SqliteStore::open_with(
        &dir.join(format!("ours-{size}-{durable}.sqlite")),
        durability,
    )
    .unwrap();
    let content = fixture(size);
    store
        .init_target(
            "t",
            "javascript",
            content.as_bytes(),
            &sha256_hex(&content),
            true,
        )
        .unwrap();
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let s = submission(i, i as u64);
        let t0 = Instant::now();
        let r = store.submit("t", &s, false).unwrap();
        out.push(t0.elapsed());
        assert_eq!(r.revision, i as u64 + 1, "{:?}", r.reasons);
    }
    out.sort();
    out
}

fn commit_latencies_baseline(
    dir: &Path,
    size: usize,
    count: usize,
    durable: bool,
) -> Vec<Duration> {
    let mut b = Baseline::open(
        &dir.join(format!("baseline-{size}-{durable}.sqlite")),
        durable,
    );
    b.init("t", &fixture(size));
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let t0 = Instant::now();
        b.submit("t", &format!("<<M:{i}>>"), &format!("<<M:{}>>", i + 1));
        out.push(t0.elapsed());
    }
    out.sort();
    out
}

fn main() {
    // `cargo bench` passes `--bench`. Without it (`cargo test --all-targets` runs this binary
    // too) do a quick smoke run with tiny counts so the test suite stays fast.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let scale = |full: usize, smoke: usize| if bench_mode { full } else { smoke };
    let count = env_usize("STORE_BENCH_SUBMISSIONS", scale(300, 5));
    let journal = env_usize("STORE_BENCH_JOURNAL", scale(100_000, 200));
    let large_journal = env_usize("STORE_BENCH_JOURNAL_100KB", scale(5_000, 20));
    if !bench_mode {
        println!(
            "store bench: smoke run (no --bench argument); run `cargo bench --bench store` for figures"
        );
    }
    let tmp = match std::env::var("STORE_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
    };
    let dir = tmp.path();
    println!("store bench: {count} durable submissions per size; replay over {journal} entries");
    println!("database dir: {}", dir.display());
    println!();
    for durable in [true, false] {
        if durable {
            println!("submission commit latency, durable (WAL, synchronous=FULL), ms");
        } else {
            println!(
                "submission commit latency without fsync (synchronous=OFF: CPU + SQLite cost), ms"
            );
        }
        println!(
            "{:>8} {:>12} {:>12} {:>14} {:>14} {:>14}",
            "target", "ours p50", "ours p99", "baseline p50", "baseline p99", "base/ours p50"
        );
        for size in [1024usize, 100 * 1024] {
            let ours = commit_latencies_ours(dir, size, count, durable);
            let base = commit_latencies_baseline(dir, size, count, durable);
            let (o50, o99) = (percentile(&ours, 0.5), percentile(&ours, 0.99));
            let (b50, b99) = (percentile(&base, 0.5), percentile(&base, 0.99));
            println!(
                "{:>8} {:>12.3} {:>12.3} {:>14.3} {:>14.3} {:>13.2}x",
                format!("{} KB", size / 1024),
                ms(o50),
                ms(o99),
                ms(b50),
                ms(b99),
                ms(b50) / ms(o50)
            );
        }
        println!();
    }
    boundary_case(dir, env_usize("STORE_BENCH_SAVES", scale(300, 5)));
    println!();
    println!("replay (page through the whole journal with limit 1000 and apply every entry)");
    replay_case(dir, 1024, journal);
    replay_case(dir, 100 * 1024, large_journal);
}

/// Durable saves of target `b`, `count` times, through `store`; sorted latencies.
fn save_latencies(store: &SqliteStore, count: usize) -> Vec<Duration> {
    let mut out: Vec<Duration> = (0..count)
        .map(|_| {
            let t0 = Instant::now();
            store.save("b").unwrap();
            t0.elapsed()
        })
        .collect();
    out.sort();
    out
}

/// K5: save latency on target B idle vs while a validation on target A stalls (a validator
/// blocked on a channel stands in for a worker that stalls), through the same store and through
/// a second store on the same database file.
fn boundary_case(dir: &Path, count: usize) {
    let path = dir.join("ours-boundary.sqlite");
    let same = std::sync::Arc::new(SqliteStore::open(&path).unwrap());
    let other = SqliteStore::open(&path).unwrap();
    for name in ["a", "b"] {
        let content = fixture(1024);
        same.init_target(
            name,
            "javascript",
            content.as_bytes(),
            &sha256_hex(&content),
            true,
        )
        .unwrap();
    }
    let idle_same = save_latencies(&same, count);
    let idle_other = save_latencies(&other, count);
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let stalled = {
        let store = same.clone();
        let (entered_tx, release_rx) = (
            std::sync::Mutex::new(entered_tx),
            std::sync::Mutex::new(release_rx),
        );
        std::thread::spawn(move || {
            let stall = move |_: &str, _: &str| {
                let _ = entered_tx.lock().unwrap().send(());
                let _ = release_rx.lock().unwrap().recv();
                patchdiff::store::Validation::Passed
            };
            store
                .submit_validated("a", &submission(0, 0), false, &stall)
                .unwrap()
        })
    };
    entered_rx.recv().unwrap();
    let stalled_same = save_latencies(&same, count);
    let stalled_other = save_latencies(&other, count);
    release_tx.send(()).unwrap();
    stalled.join().unwrap();
    println!(
        "K5 per-target boundary: durable save of target B, ms ({count} saves per case; A's validation stalls until all are done)"
    );
    println!(
        "{:>16} {:>10} {:>10} {:>13} {:>13} {:>14}",
        "save of B via",
        "idle p50",
        "idle p99",
        "A-stalled p50",
        "A-stalled p99",
        "stalled/idle p99"
    );
    for (via, idle, stalled) in [
        ("same store", &idle_same, &stalled_same),
        ("second store", &idle_other, &stalled_other),
    ] {
        let (i50, i99) = (percentile(idle, 0.5), percentile(idle, 0.99));
        let (s50, s99) = (percentile(stalled, 0.5), percentile(stalled, 0.99));
        println!(
            "{:>16} {:>10.3} {:>10.3} {:>13.3} {:>13.3} {:>15.2}x",
            via,
            ms(i50),
            ms(i99),
            ms(s50),
            ms(s99),
            ms(s99) / ms(i99)
        );
    }
}

/// Bytes of a database file plus its WAL, after a truncating checkpoint.
fn db_bytes(path: &Path) -> u64 {
    if let Ok(c) = Connection::open(path) {
        let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
    let wal = path.with_extension("sqlite-wal");
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
}

/// Builds a `journal`-entry history on a target of `size` bytes in both stores (bulk-loaded
/// without fsync: the replay read path is what is measured), then pages through it.
fn replay_case(dir: &Path, size: usize, journal: usize) {
    let content = fixture(size);
    let ours_path = dir.join(format!("ours-replay-{size}.sqlite"));
    let base_path = dir.join(format!("baseline-replay-{size}.sqlite"));
    let store = SqliteStore::open_with(&ours_path, Durability::NoSync).unwrap();
    store
        .init_target(
            "t",
            "javascript",
            content.as_bytes(),
            &sha256_hex(&content),
            true,
        )
        .unwrap();
    for i in 0..journal {
        store.submit("t", &submission(i, i as u64), false).unwrap();
    }
    let mut base = Baseline::open(&base_path, false);
    base.init("t", &content);
    for i in 0..journal {
        base.submit("t", &format!("<<M:{i}>>"), &format!("<<M:{}>>", i + 1));
    }

    let t0 = Instant::now();
    let mut replayed = store.saved_version("t", 0).unwrap().content;
    let mut cursor: Option<String> = None;
    let mut entries = 0usize;
    loop {
        let page = store.replay("t", cursor.as_deref(), Some(1000)).unwrap();
        for e in &page.entries {
            if e.kind == JournalKind::Edit {
                replayed = apply_journal_operations(&replayed, &e.operations).unwrap();
                entries += 1;
            }
        }
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    let replay_ours = t0.elapsed();
    assert_eq!(replayed, store.read_target("t").unwrap().content);
    drop(store);
    let t0 = Instant::now();
    let (base_entries, base_content) = base.replay("t");
    let replay_base = t0.elapsed();
    drop(base);
    assert_eq!(base_content, replayed);
    let ours_rate = entries as f64 / replay_ours.as_secs_f64();
    let base_rate = base_entries as f64 / replay_base.as_secs_f64();
    println!("  {journal}-entry journal, {} KB target:", size / 1024);
    println!(
        "    ours:     {:>9.0} entries/s ({:.3} s; database {:.1} MB)",
        ours_rate,
        replay_ours.as_secs_f64(),
        db_bytes(&ours_path) as f64 / 1e6
    );
    println!(
        "    baseline: {:>9.0} entries/s ({:.3} s; database {:.1} MB)",
        base_rate,
        replay_base.as_secs_f64(),
        db_bytes(&base_path) as f64 / 1e6
    );
    println!("    ratio (ours / baseline): {:.2}x", ours_rate / base_rate);
}

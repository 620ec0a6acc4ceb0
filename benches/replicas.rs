//! Replica bench (R2, not a test): `cargo bench --bench replicas`.
//!
//! Prints, for SQLite and PostgreSQL side by side in one run, accepted submissions per second
//! of an agent thread and a replica thread working at the same time, each with its own store
//! handle (its own connections, as two MCP processes would have):
//! - `agent alone`: the agent thread only (the baseline);
//! - `same target`: agent and replica edit two regions of one target (every replica submission
//!   is usually stale: transformed over the agent's edits, with corrections);
//! - `distinct targets`: agent on one target, replica on another.
//!
//! The agent reads the target and submits at that revision; the replica submits at its cursor
//! and then catches up with `replica_changes` (so a replica submission's figure includes its
//! catch-up, as a real integration's loop does). Durability is production's on both backends
//! (SQLite `synchronous = FULL`; PostgreSQL's defaults). Each figure is the median of
//! `REPLICA_BENCH_REPEATS` runs (default 3) of `REPLICA_BENCH_COUNT` submissions per thread
//! (default 100), printed with the 1-minute load average. Without `--bench` (as `cargo test
//! --all-targets` runs it) it does a tiny smoke run.

use patchdiff_test_util::backends;

use std::sync::{Arc, Barrier};
use std::time::Instant;

use backends::{Backend, Scratch};
use patchdiff::kernel::sha256_hex;
use patchdiff::store::replica::{LeaseRequest, ReplicaOperation, ReplicaSubmission};
use patchdiff::store::{
    EditStore, JournalKind, OperationRequest, Outcome, Submission, Validation,
    apply_journal_operations,
};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

const FIXTURE: &str = "function f() {\n  // agent: [A]\n  const x = 1;\n  // replica: [R]\n}\n";

fn init(store: &dyn EditStore, name: &str) {
    store
        .init_target(
            name,
            "javascript",
            FIXTURE.as_bytes(),
            &sha256_hex(FIXTURE),
            true,
        )
        .unwrap();
}

fn agent(store: &dyn EditStore, target: &str, count: usize, run: usize) -> f64 {
    let t0 = Instant::now();
    for i in 0..count {
        let t = store.read_target(target).unwrap();
        let s = Submission {
            request_key: format!("agent-{run}-{i}"),
            base_revision: t.revision,
            expected_sha256: None,
            operations: vec![OperationRequest {
                observation_id: None,
                old_text: "[A]".into(),
                new_text: format!("<a{i}> [A]"),
            }],
        };
        let r = store.submit(target, &s, false).unwrap();
        assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
    }
    count as f64 / t0.elapsed().as_secs_f64()
}

fn replica(store: &dyn EditStore, target: &str, count: usize, run: usize) -> f64 {
    let cp = store
        .replica_acquire(
            &LeaseRequest {
                integration: "bench".into(),
                targets: vec![target.into()],
                ttl_ms: 3_600_000,
            },
            &wall_ms,
        )
        .unwrap();
    let lease = cp.lease.lease_id.clone();
    let (mut cursor, mut mirror) = (cp.targets[0].cursor.clone(), cp.targets[0].content.clone());
    let t0 = Instant::now();
    for i in 0..count {
        let s = ReplicaSubmission {
            target: target.into(),
            request_key: format!("replica-{run}-{i}"),
            cursor: cursor.clone(),
            expected_sha256: sha256_hex(&mirror),
            operations: vec![ReplicaOperation {
                old_text: "[R]".into(),
                new_text: format!("<r{i}> [R]"),
            }],
        };
        let r = store
            .replica_submit(&lease, &s, &wall_ms, &|_, _| Validation::Passed, None)
            .unwrap();
        assert_eq!(r.outcome, Outcome::Accepted, "{:?}", r.reasons);
        loop {
            let page = store
                .replica_changes(&lease, target, Some(&cursor), None, &wall_ms)
                .unwrap();
            for e in page.entries.iter().filter(|e| e.kind == JournalKind::Edit) {
                mirror = apply_journal_operations(&mirror, &e.operations).unwrap();
            }
            if let Some(c) = page.next_cursor {
                cursor = c;
            }
            if !page.has_more {
                break;
            }
        }
    }
    let rate = count as f64 / t0.elapsed().as_secs_f64();
    assert_eq!(mirror, store.read_target(target).unwrap().content);
    store.replica_release(&lease, &wall_ms).unwrap();
    rate
}

#[derive(Clone, Copy, PartialEq)]
enum Case {
    AgentAlone,
    SameTarget,
    DistinctTargets,
}

/// One run of `case`: (agent submissions/s, replica submissions/s or 0).
fn run_case(scratch: &Scratch, case: Case, count: usize, run: usize) -> (f64, f64) {
    let (a, b) = (scratch.open(), scratch.open());
    let (ta, tb) = (format!("a-{run}"), format!("b-{run}"));
    init(&*a, &ta);
    init(&*a, &tb);
    let replica_target = if case == Case::SameTarget { &ta } else { &tb };
    let start = Arc::new(Barrier::new(2));
    std::thread::scope(|scope| {
        let (s, ta) = (start.clone(), ta.as_str());
        let agent_thread = scope.spawn(move || {
            s.wait();
            agent(&*a, ta, count, run)
        });
        let r = if case == Case::AgentAlone {
            start.wait();
            0.0
        } else {
            start.wait();
            replica(&*b, replica_target, count, run)
        };
        (agent_thread.join().unwrap(), r)
    })
}

/// (agent submissions/s, replica submissions/s) of one case.
type Rates = (f64, f64);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let repeats = env_usize("REPLICA_BENCH_REPEATS", if bench_mode { 3 } else { 1 }).max(1);
    let count = env_usize("REPLICA_BENCH_COUNT", if bench_mode { 100 } else { 3 }).max(1);
    if !bench_mode {
        println!("replica bench: smoke run; `cargo bench --bench replicas` for figures");
    }
    let mut rows: Vec<(Backend, [Rates; 3], String)> = Vec::new();
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && !backends::postgres_or_skip("bench replicas") {
            continue;
        }
        let scratch = Scratch::new(backend);
        let mut figures = [(0.0, 0.0); 3];
        for (n, case) in [Case::AgentAlone, Case::SameTarget, Case::DistinctTargets]
            .into_iter()
            .enumerate()
        {
            let runs: Vec<(f64, f64)> = (0..repeats)
                .map(|r| run_case(&scratch, case, count, n * 100 + r))
                .collect();
            figures[n] = (
                median(runs.iter().map(|r| r.0).collect()),
                median(runs.iter().map(|r| r.1).collect()),
            );
        }
        rows.push((backend, figures, load()));
    }
    println!(
        "accepted submissions/s, {count} per thread, median of {repeats} (agent | replica incl. catch-up)"
    );
    println!(
        "{:<10} {:>22} {:>22} {:>22}  load",
        "backend", "agent alone", "same target", "distinct targets"
    );
    for (backend, f, load) in rows {
        let cell = |(a, r): (f64, f64)| {
            if r == 0.0 {
                format!("{a:.0} | -")
            } else {
                format!("{a:.0} | {r:.0}")
            }
        };
        println!(
            "{:<10} {:>22} {:>22} {:>22}  {load}",
            backend.name(),
            cell(f[0]),
            cell(f[1]),
            cell(f[2])
        );
    }
}

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
//! Every figure is measured `BACKEND_BENCH_REPEATS` times (default 3) and its median printed
//! with the machine's 1-minute load average during those runs (from `/proc/loadavg`): figures
//! from a loaded machine are not a quiet machine's.
//!
//! PostgreSQL is measured twice more: through a loopback TCP proxy of the bench's own
//! (`support/delay_proxy.rs`) that delays each direction by `BACKEND_BENCH_DELAY_US` (default
//! 500 µs, so 1 ms of added round-trip time: a LAN between clients and server), printing the
//! round trips per submission counted on the wire (the client's request bursts) and 1- and
//! 16-client throughput; and with the store's own per-phase profile
//! (`PostgresStore::submission_profile`: round trips and time in lock + plan read,
//! validation, commit + fsync) on loopback and through the proxy, with the server's WAL fsync
//! time per submission beside it (`pg_stat_wal`, `track_wal_io_timing` on for the store's
//! sessions through the URL's `options`).
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
#[path = "support/delay_proxy.rs"]
mod delay_proxy;

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use backends::{Backend, Scratch};
use delay_proxy::DelayProxy;
use patchdiff::kernel::{TextEdit, apply_edits, sha256_hex};
use patchdiff::store::{
    EditStore, JournalKind, OperationRequest, Outcome, PostgresStore, Submission, SubmissionProfile,
};

/// Opens a new store handle (its own connections, as another MCP process would have).
type Opener<'a> = &'a (dyn Fn() -> Arc<dyn EditStore> + Sync);

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
fn commit_latencies(open: Opener, size: usize, count: usize, run: usize) -> Vec<Duration> {
    let store = open();
    let name = format!("commit-{size}-{run}");
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
fn replay_rate(open: Opener, journal: usize) -> f64 {
    let store = open();
    // One journal per store world, built once and replayed by every repeat.
    if store.read_target("replay").is_err() {
        init(&*store, "replay", &fixture(1024, 1));
        for i in 0..journal {
            store
                .submit("replay", &submission(0, i, i as u64), false)
                .unwrap();
        }
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
fn throughput(open: Opener, clients: usize, per_client: usize, shared: bool, run: usize) -> f64 {
    let case = format!(
        "{}-{clients}-{run}",
        if shared { "shared" } else { "distinct" }
    );
    {
        let store = open();
        if shared {
            init(&*store, &case, &fixture(1024, clients));
        } else {
            for c in 0..clients {
                init(&*store, &format!("{case}-{c}"), &fixture(1024, clients));
            }
        }
    }
    let stores: Vec<Arc<dyn EditStore>> = (0..clients).map(|_| open()).collect();
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

/// The machine's 1-minute load average now (`/proc/loadavg`; NaN where there is none).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A figure measured several times: its median and the load averages seen while measuring.
#[derive(Clone, Default)]
struct Repeated {
    values: Vec<f64>,
    loads: Vec<f64>,
}

impl Repeated {
    fn measure(&mut self, f: impl FnOnce() -> f64) {
        let before = load_average();
        self.values.push(f());
        self.loads.push(before.max(load_average()));
    }

    fn median(&self) -> f64 {
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// `median (load a–b)`.
    fn show(&self, decimals: usize) -> String {
        let lo = self.loads.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{:.decimals$} (load {lo:.1}–{hi:.1})", self.median())
    }
}

/// One backend's figures, each repeated.
#[derive(Default)]
struct Figures {
    /// Per size (1 KB, 100 KB): p50 and p99 in ms.
    commit: [(Repeated, Repeated); 2],
    replay: Repeated,
    /// Per client count (1, 4, 16): distinct targets/s, shared target/s.
    throughput: [(Repeated, Repeated); 3],
}

const SIZES: [usize; 2] = [1024, 100 * 1024];
const CLIENTS: [usize; 3] = [1, 4, 16];

fn measure(open: Opener, figures: &mut Figures, run: usize, scale: &Scale) {
    for (k, size) in SIZES.into_iter().enumerate() {
        let l = commit_latencies(open, size, scale.commits, run);
        figures.commit[k].0.measure(|| ms(percentile(&l, 0.5)));
        figures.commit[k].1.values.push(ms(percentile(&l, 0.99)));
        figures.commit[k].1.loads.push(load_average());
    }
    figures.replay.measure(|| replay_rate(open, scale.journal));
    for (k, n) in CLIENTS.into_iter().enumerate() {
        figures.throughput[k]
            .0
            .measure(|| throughput(open, n, scale.per_client, false, run));
        figures.throughput[k]
            .1
            .measure(|| throughput(open, n, scale.per_client, true, run));
    }
}

struct Scale {
    repeats: usize,
    commits: usize,
    journal: usize,
    per_client: usize,
    delay: Duration,
}

/// PostgreSQL through the delay proxy (a LAN): commit p50, round trips per submission counted
/// on the wire, and 1- and 16-client throughput on distinct targets.
#[derive(Default)]
struct LanFigures {
    commit_p50: Repeated,
    round_trips: Repeated,
    one_client: Repeated,
    sixteen_clients: Repeated,
}

/// `url` with its host and port replaced by `addr`.
fn via(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (auth, path) = rest.split_once('/').unwrap();
    let user = auth
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{addr}/{path}")
}

fn upstream(url: &str) -> std::net::SocketAddr {
    let rest = url.split_once("://").unwrap().1;
    let auth = rest.split('/').next().unwrap();
    let host_port = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .unwrap()
        .next()
        .unwrap()
}

fn measure_lan(url: &str, lan: &mut LanFigures, run: usize, scale: &Scale) {
    let proxy = DelayProxy::start(upstream(url), scale.delay).expect("delay proxy");
    let proxied = via(url, proxy.addr);
    let open = || backends::open(Path::new("/nonexistent"), Some(&proxied));
    let count = scale.per_client.max(2);
    {
        let store = open();
        let name = format!("lan-rt-{run}");
        init(&*store, &name, &fixture(1024, 1));
        // Warm the connection's prepared statements, then count.
        store.submit(&name, &submission(0, 0, 0), false).unwrap();
        let before = proxy.client_bursts();
        let t0 = Instant::now();
        for i in 1..count {
            store
                .submit(&name, &submission(0, i, i as u64), false)
                .unwrap();
        }
        let took = t0.elapsed();
        let bursts = proxy.client_bursts() - before;
        lan.round_trips
            .measure(|| bursts as f64 / (count - 1) as f64);
        lan.commit_p50.measure(|| ms(took) / (count - 1) as f64);
    }
    lan.one_client
        .measure(|| throughput(&open, 1, scale.per_client, false, 1000 + run));
    lan.sixteen_clients
        .measure(|| throughput(&open, 16, scale.per_client, false, 1000 + run));
}

/// The store's own per-phase profile of `count` sequential submissions on one target, and the
/// server's WAL flushes during them (`pg_stat_wal`, with `track_wal_io_timing` on for the
/// store's sessions: count and ms per submission; `None` where the role may not set it).
fn profile(
    url: &str,
    admin: &str,
    count: usize,
    tag: &str,
) -> (SubmissionProfile, Option<(f64, f64)>) {
    let sep = if url.contains('?') { '&' } else { '?' };
    let timed = format!("{url}{sep}options=-c%20track_wal_io_timing%3Don");
    let (store, timed) = match PostgresStore::connect(&timed) {
        Ok(s) => (s, true),
        Err(_) => (PostgresStore::connect(url).expect("connect"), false),
    };
    let name = format!("profile-{tag}");
    init(&store, &name, &fixture(1024, 1));
    store.submit(&name, &submission(0, 0, 0), false).unwrap();
    let wal = || -> Option<(f64, f64)> {
        let out = backends::psql(admin, "SELECT wal_sync, wal_sync_time FROM pg_stat_wal").ok()?;
        let (n, t) = out.split_once('|')?;
        Some((n.parse().ok()?, t.parse().ok()?))
    };
    // Backends report their statistics when idle or at exit: wait for the store's sessions
    // to end before reading the totals.
    let db = url
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned();
    let sessions_gone = || {
        for _ in 0..100 {
            let q = format!(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()"
            );
            if backends::psql(admin, &q).as_deref() == Ok("0") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    store.reset_submission_profile();
    let before = wal();
    for i in 1..count {
        store
            .submit(&name, &submission(0, i, i as u64), false)
            .unwrap();
    }
    let p = store.submission_profile();
    drop(store);
    sessions_gone();
    let flushes = match (timed, before, wal()) {
        (true, Some((n0, t0)), Some((n1, t1))) => {
            let subs = (count - 1) as f64;
            Some(((n1 - n0) / subs, (t1 - t0) / subs))
        }
        _ => None,
    };
    (p, flushes)
}

/// A profiled link: its name, the store's profile, and the server's WAL fsyncs (count, ms) per
/// submission.
type Profiled = (String, SubmissionProfile, Option<(f64, f64)>);

fn main() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let pick = |full: usize, smoke: usize| if bench_mode { full } else { smoke };
    let scale = Scale {
        repeats: env_usize("BACKEND_BENCH_REPEATS", pick(3, 1)).max(1),
        commits: env_usize("BACKEND_BENCH_COMMITS", pick(200, 3)),
        journal: env_usize("BACKEND_BENCH_JOURNAL", pick(3000, 5)),
        per_client: env_usize("BACKEND_BENCH_PER_CLIENT", pick(60, 2)),
        delay: Duration::from_micros(env_usize("BACKEND_BENCH_DELAY_US", 500) as u64),
    };
    if !bench_mode {
        println!(
            "backend bench: smoke run (no --bench argument); run `cargo bench --bench backends` for figures"
        );
    }
    let base =
        std::env::var("STORE_BENCH_DIR").unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").to_owned());
    let mut results: Vec<(Backend, Figures)> = Vec::new();
    let mut lan: Option<LanFigures> = None;
    let mut profiles: Vec<Profiled> = Vec::new();
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && !backends::postgres_or_skip("bench backends") {
            continue;
        }
        let mut scratch = Scratch::new(backend);
        scratch.dir = tempfile::tempdir_in(Path::new(&base)).unwrap();
        let open = || scratch.open();
        let mut figures = Figures::default();
        for run in 0..scale.repeats {
            measure(&open, &mut figures, run, &scale);
        }
        if let Some(url) = scratch.postgres_url() {
            let mut l = LanFigures::default();
            for run in 0..scale.repeats {
                measure_lan(url, &mut l, run, &scale);
            }
            lan = Some(l);
            let count = scale.per_client.max(2) * 2;
            let (p, f) = profile(url, url, count, "loopback");
            profiles.push(("loopback".into(), p, f));
            let proxy = DelayProxy::start(upstream(url), scale.delay).expect("delay proxy");
            let (p, f) = profile(&via(url, proxy.addr), url, count, "lan");
            profiles.push((format!("+{} µs each way", scale.delay.as_micros()), p, f));
        }
        results.push((backend, figures));
    }
    print(&results, lan.as_ref(), &profiles, &scale);
}

fn print(
    results: &[(Backend, Figures)],
    lan: Option<&LanFigures>,
    profiles: &[Profiled],
    scale: &Scale,
) {
    const W: usize = 28;
    let col = |f: &dyn Fn(&Figures) -> String| -> String {
        results
            .iter()
            .map(|(_, r)| format!("{:>W$}", f(r)))
            .collect::<String>()
    };
    let heads: String = results
        .iter()
        .map(|(b, _)| format!("{:>W$}", b.name()))
        .collect();
    println!();
    println!(
        "backends side by side (durable: SQLite WAL synchronous=FULL; PostgreSQL fsync=on, synchronous_commit=on)"
    );
    println!(
        "each figure: median of {} runs, with the 1-minute load average seen during them",
        scale.repeats
    );
    println!("{:<46}{heads}", "");
    for (k, size) in SIZES.iter().enumerate() {
        println!(
            "{:<46}{}",
            format!(
                "commit p50, {} KB target, ms ({})",
                size / 1024,
                scale.commits
            ),
            col(&|r| r.commit[k].0.show(3))
        );
        println!(
            "{:<46}{}",
            format!("commit p99, {} KB target, ms", size / 1024),
            col(&|r| r.commit[k].1.show(3))
        );
    }
    println!(
        "{:<46}{}",
        format!("replay, entries/s ({}-entry journal)", scale.journal),
        col(&|r| r.replay.show(0))
    );
    for (k, n) in CLIENTS.iter().enumerate() {
        println!(
            "{:<46}{}",
            format!("{n:>2} clients, distinct targets, submissions/s"),
            col(&|r| r.throughput[k].0.show(1))
        );
        println!(
            "{:<46}{}",
            format!("{n:>2} clients, one shared target, submissions/s"),
            col(&|r| r.throughput[k].1.show(1))
        );
    }
    println!(
        "({} submissions per client per throughput case)",
        scale.per_client
    );
    if let [(_, sqlite), (_, pg)] = results {
        let (s16, p16) = (sqlite.throughput[2].0.median(), pg.throughput[2].0.median());
        println!(
            "16 clients on distinct targets: PostgreSQL / SQLite = {:.2}x; PostgreSQL 16 / 1 client = {:.2}x",
            p16 / s16,
            p16 / pg.throughput[0].0.median()
        );
    }
    if let Some(l) = lan {
        println!();
        println!(
            "PostgreSQL through the delay proxy (+{} µs each way = +{:.1} ms round trip: a LAN)",
            scale.delay.as_micros(),
            2.0 * ms(scale.delay)
        );
        let row = |what: &str, r: &Repeated, d: usize| println!("{what:<46}{:>W$}", r.show(d));
        row(
            "round trips per submission (on the wire)",
            &l.round_trips,
            1,
        );
        row("1 client, ms per submission", &l.commit_p50, 2);
        row(
            "1 client, distinct targets, submissions/s",
            &l.one_client,
            1,
        );
        row(
            "16 clients, distinct targets, submissions/s",
            &l.sixteen_clients,
            1,
        );
    }
    for (link, p, flushes) in profiles {
        println!();
        println!(
            "PostgreSQL submission profile, {link} ({} sequential submissions, 1 client): {:.2} round trips per submission",
            p.submissions,
            p.round_trips_per_submission()
        );
        println!(
            "{:<32}{:>22}{:>22}",
            "phase", "round trips / sub", "ms / sub"
        );
        let n = p.submissions.max(1) as f64;
        for f in &p.phases {
            println!(
                "{:<32}{:>22.2}{:>22.3}",
                f.phase.as_str(),
                f.round_trips as f64 / n,
                ms(f.time) / n
            );
        }
        match flushes {
            Some((syncs, sync_ms)) => println!(
                "{:<32}{:>22}{:>22.3}   (server: {syncs:.2} WAL fsyncs per submission, pg_stat_wal)",
                "  of which WAL fsync", "", sync_ms
            ),
            None => println!(
                "  (WAL fsync time not available: pg_stat_wal or track_wal_io_timing refused)"
            ),
        }
    }
}

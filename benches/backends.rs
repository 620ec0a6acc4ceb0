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
//! PostgreSQL is measured again per link and path: on loopback and through a loopback TCP
//! proxy of the bench's own (`support/delay_proxy.rs`) that delays each direction by
//! `BACKEND_BENCH_DELAY_US` (default 500 µs, so 1 ms of added round-trip time: a LAN between
//! clients and server); through `submit` (one round trip when the client's view of the target
//! is current) and through `submit_validated` with a validator that passes (two round trips:
//! the validator runs under the boundary — what every MCP submission takes, and what every
//! submission took before the one-trip path). Each prints the round trips per submission (the
//! store's profile on loopback, the client's request bursts on the wire through the proxy), ms
//! per sequential submission, and 1- and 16-client throughput. Then the store's own per-phase
//! profile (`PostgresStore::submission_profile`: round trips and time in lock + plan read,
//! validation, commit + fsync, or the one trip) for each link and path, with the server's side
//! beside it: WAL fsync time (`pg_stat_wal`, `track_wal_io_timing`) and time inside the
//! store's PL/pgSQL functions (`pg_stat_user_functions`, `track_functions = pl`), both on for
//! the store's sessions through the URL's `options`.
//!
//! Durability is production's on both: SQLite WAL with `synchronous = FULL`; PostgreSQL with its
//! defaults (`fsync = on`, `synchronous_commit = on`, `wal_sync_method = fdatasync`, `commit_delay = 0`; the
//! output's first lines print what the server reports) — the
//! scratch cluster from `tests/util/backends.rs` (or `PATCHDIFF_TEST_POSTGRES`); nothing is turned off
//! for the comparison. SQLite's file lives under `STORE_BENCH_DIR` (default: the target dir),
//! on the same disk as the scratch cluster's temp dir unless you say otherwise.
//!
//! Environment: `BACKEND_BENCH_COMMITS` (default 200 per size), `BACKEND_BENCH_JOURNAL` (default
//! 3000 entries), `BACKEND_BENCH_PER_CLIENT` (default 60 submissions per client per case).
//! Without `--bench` (as `cargo test --all-targets` runs it) it does a tiny smoke run.

use patchdiff_test_util::backends;
#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/delay_proxy.rs"]
mod delay_proxy;

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use backends::{Backend, Scratch};
use cpu::{CpuMeter, CpuPerSubmission};
use delay_proxy::DelayProxy;
use patchdiff::kernel::sha256_hex;
use patchdiff::store::{
    EditStore, JournalKind, OperationRequest, Outcome, PostgresStore, Submission,
    SubmissionProfile, Validation, apply_journal_operations,
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

/// Which submission path a case drives: `submit` (on PostgreSQL one round trip when the
/// client's view of the target is current) or `submit_validated` with a validator that
/// always passes (the two-trip path every validated submission takes: the validator runs
/// under the boundary, between the plan read and the commit).
#[derive(Clone, Copy, PartialEq, Eq)]
enum SubmitPath {
    Submit,
    Validated,
}

fn submit_via(
    store: &dyn EditStore,
    path: SubmitPath,
    name: &str,
    submission: &Submission,
) -> patchdiff::store::Receipt {
    match path {
        SubmitPath::Submit => store.submit(name, submission, false),
        SubmitPath::Validated => {
            store.submit_validated(name, submission, false, &|_, _| Validation::Passed)
        }
    }
    .unwrap()
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
                content = apply_journal_operations(&content, &e.operations).unwrap();
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
/// edits; on distinct targets or one shared target. Returns accepted submissions per second
/// (with [`throughput_cpu`], the CPU they cost too).
fn throughput(
    open: Opener,
    clients: usize,
    per_client: usize,
    shared: bool,
    run: usize,
    path: SubmitPath,
) -> f64 {
    throughput_cpu(
        open,
        clients,
        per_client,
        shared,
        run,
        path,
        &CpuMeter::new(None),
    )
    .0
}

/// [`throughput`], and the CPU per submission on both sides (`meter`) from the moment every
/// client is connected and its target initialized until the last one is done.
fn throughput_cpu(
    open: Opener,
    clients: usize,
    per_client: usize,
    shared: bool,
    run: usize,
    path: SubmitPath,
    meter: &CpuMeter,
) -> (f64, CpuPerSubmission) {
    let case = format!(
        "{}-{clients}-{run}-{}",
        if shared { "shared" } else { "distinct" },
        path as u8
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
                    let r = submit_via(&*store, path, &target, &submission(c, i, base));
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
    let cpu = meter.sample();
    barrier.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    let took = t0.elapsed();
    let submissions = clients * per_client;
    (
        submissions as f64 / took.as_secs_f64(),
        meter.since(cpu, submissions),
    )
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
            .measure(|| throughput(open, n, scale.per_client, false, run, SubmitPath::Submit));
        figures.throughput[k]
            .1
            .measure(|| throughput(open, n, scale.per_client, true, run, SubmitPath::Submit));
    }
}

struct Scale {
    repeats: usize,
    commits: usize,
    journal: usize,
    per_client: usize,
    delay: Duration,
}

/// PostgreSQL on one link (loopback, or through the delay proxy: a LAN) and one
/// [`SubmitPath`]: round trips per submission, ms per sequential submission, and 1- and
/// 16-client throughput on distinct targets.
#[derive(Default)]
struct LinkFigures {
    round_trips: Repeated,
    ms_per_submission: Repeated,
    one_client: Repeated,
    sixteen_clients: Repeated,
    /// CPU ms per submission, this process (the clients) and the cluster, 1 and 16 clients.
    cpu_one: (Repeated, Repeated),
    cpu_sixteen: (Repeated, Repeated),
}

/// The links × paths the PostgreSQL table shows, in column order.
const LINKS: [(bool, SubmitPath); 4] = [
    (false, SubmitPath::Submit),
    (false, SubmitPath::Validated),
    (true, SubmitPath::Submit),
    (true, SubmitPath::Validated),
];

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

/// One [`LinkFigures`] run. Round trips: counted on the wire (the proxy's client request
/// bursts) through the proxy, by the store's own profile on loopback.
fn measure_link(
    url: &str,
    delayed: bool,
    path: SubmitPath,
    fig: &mut LinkFigures,
    run: usize,
    scale: &Scale,
) {
    let proxy =
        delayed.then(|| DelayProxy::start(upstream(url), scale.delay).expect("delay proxy"));
    let link = proxy.as_ref().map_or(url.to_owned(), |p| via(url, p.addr));
    let open = || backends::open(Path::new("/nonexistent"), Some(&link));
    let count = scale.per_client.max(2);
    let tag = format!("{}{}-{run}", delayed as u8, path as u8);
    {
        let store = PostgresStore::connect(&link).expect("connect");
        let name = format!("link-rt-{tag}");
        init(&store, &name, &fixture(1024, 1));
        // Warm the connection's prepared statements (and the store's view), then count.
        submit_via(&store, path, &name, &submission(0, 0, 0));
        store.reset_submission_profile();
        let before = proxy.as_ref().map_or(0, |p| p.client_bursts());
        let t0 = Instant::now();
        for i in 1..count {
            submit_via(&store, path, &name, &submission(0, i, i as u64));
        }
        let took = t0.elapsed();
        let trips = match &proxy {
            Some(p) => (p.client_bursts() - before) as f64 / (count - 1) as f64,
            None => store.submission_profile().round_trips_per_submission(),
        };
        fig.round_trips.measure(|| trips);
        fig.ms_per_submission
            .measure(|| ms(took) / (count - 1) as f64);
    }
    let run = 1000 + 10 * run + 2 * delayed as usize + path as usize;
    let meter = CpuMeter::new(data_directory(url).as_deref().and_then(cpu::postmaster_of));
    let case = |clients: usize,
                rate: &mut Repeated,
                (client, server): &mut (Repeated, Repeated)| {
        let mut used = None;
        rate.measure(|| {
            let (r, c) = throughput_cpu(&open, clients, scale.per_client, false, run, path, &meter);
            used = Some(c);
            r
        });
        let used = used.expect("measured");
        client.measure(|| used.client_ms);
        server.measure(|| used.server_ms.unwrap_or(f64::NAN));
    };
    case(1, &mut fig.one_client, &mut fig.cpu_one);
    case(16, &mut fig.sixteen_clients, &mut fig.cpu_sixteen);
}

/// The cluster's data directory as it reports it (`SHOW data_directory`; superuser or
/// `pg_read_all_settings` only), for [`cpu::postmaster_of`].
fn data_directory(url: &str) -> Option<String> {
    backends::psql(url, "SHOW data_directory")
        .ok()
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty())
}

/// What the server spent per submission, from its own statistics (per submission): WAL
/// fsyncs and their ms (`pg_stat_wal`, `track_wal_io_timing` on for the store's sessions),
/// and ms inside the store's PL/pgSQL functions (`pg_stat_user_functions`,
/// `track_functions = pl`).
#[derive(Clone, Copy)]
struct ServerSide {
    wal_syncs: f64,
    wal_sync_ms: f64,
    function_ms: f64,
}

/// The store's own per-phase profile of `count` sequential submissions on one target through
/// `path`, and the server's side of them (`None` where the role may not turn the timing on).
/// `pg_stat_wal` is the cluster's: figures are only the store's on a cluster nothing else
/// writes to (the bench's own scratch cluster).
fn profile(
    url: &str,
    admin: &str,
    count: usize,
    tag: &str,
    path: SubmitPath,
) -> (SubmissionProfile, Option<ServerSide>) {
    let sep = if url.contains('?') { '&' } else { '?' };
    let timed =
        format!("{url}{sep}options=-c%20track_wal_io_timing%3Don%20-c%20track_functions%3Dpl");
    let (store, timed) = match PostgresStore::connect(&timed) {
        Ok(s) => (s, true),
        Err(_) => (PostgresStore::connect(url).expect("connect"), false),
    };
    let name = format!("profile-{tag}");
    init(&store, &name, &fixture(1024, 1));
    submit_via(&store, path, &name, &submission(0, 0, 0));
    let server = || -> Option<[f64; 3]> {
        let out = backends::psql(
            admin,
            "SELECT wal_sync, wal_sync_time, (SELECT coalesce(sum(self_time), 0) \
             FROM pg_stat_user_functions WHERE funcname LIKE 'patchdiff%') FROM pg_stat_wal",
        )
        .ok()?;
        let mut it = out.split('|').map(|v| v.trim().parse::<f64>());
        Some([it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?])
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
    let before = server();
    for i in 1..count {
        submit_via(&store, path, &name, &submission(0, i, i as u64));
    }
    let p = store.submission_profile();
    drop(store);
    sessions_gone();
    let side = match (timed, before, server()) {
        (true, Some(b), Some(a)) => {
            let subs = (count - 1) as f64;
            Some(ServerSide {
                wal_syncs: (a[0] - b[0]) / subs,
                wal_sync_ms: (a[1] - b[1]) / subs,
                function_ms: (a[2] - b[2]) / subs,
            })
        }
        _ => None,
    };
    (p, side)
}

/// A profiled link and path: its name, the store's profile, and the server's side.
type Profiled = (String, SubmissionProfile, Option<ServerSide>);

/// The server's durability settings as it reports them (`SHOW`), for the output's first line.
fn durability(url: &str) -> String {
    [
        "fsync",
        "synchronous_commit",
        "wal_sync_method",
        "commit_delay",
        "full_page_writes",
    ]
    .iter()
    .map(|k| {
        let v = backends::psql(url, &format!("SHOW {k}")).unwrap_or_else(|e| e);
        format!("{k}={}", v.trim())
    })
    .collect::<Vec<_>>()
    .join(", ")
}

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
    let mut links: Option<[LinkFigures; 4]> = None;
    let mut settings: Option<String> = None;
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
            settings = Some(durability(url));
            let mut l: [LinkFigures; 4] = Default::default();
            for run in 0..scale.repeats {
                for (k, (delayed, path)) in LINKS.into_iter().enumerate() {
                    measure_link(url, delayed, path, &mut l[k], run, &scale);
                }
            }
            links = Some(l);
            let count = scale.per_client.max(2) * 2;
            let proxy = DelayProxy::start(upstream(url), scale.delay).expect("delay proxy");
            let lan = via(url, proxy.addr);
            for (k, (delayed, path)) in LINKS.into_iter().enumerate() {
                let link = if delayed { lan.as_str() } else { url };
                let (p, f) = profile(link, url, count, &format!("{k}"), path);
                profiles.push((link_name(delayed, path, &scale), p, f));
            }
        }
        results.push((backend, figures));
    }
    print(&results, settings, links.as_ref(), &profiles, &scale);
}

/// A link × path column's name.
fn link_name(delayed: bool, path: SubmitPath, scale: &Scale) -> String {
    format!(
        "{}, {}",
        if delayed {
            format!("+{:.1} ms RTT", 2.0 * ms(scale.delay))
        } else {
            "loopback".to_owned()
        },
        match path {
            SubmitPath::Submit => "submit",
            SubmitPath::Validated => "validated",
        }
    )
}

fn print(
    results: &[(Backend, Figures)],
    settings: Option<String>,
    links: Option<&[LinkFigures; 4]>,
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
    println!("backends side by side (durable: SQLite WAL synchronous=FULL)");
    if let Some(settings) = &settings {
        println!("PostgreSQL server settings (SHOW): {settings}");
    }
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
    if let Some(l) = links {
        const C: usize = 26;
        println!();
        println!(
            "PostgreSQL by link and path (submit: one trip when the view is current; validated: \
             submit_validated, the validator under the boundary, two trips); distinct targets"
        );
        let heads: String = LINKS
            .iter()
            .map(|&(d, p)| format!("{:>C$}", link_name(d, p, scale)))
            .collect();
        println!("{:<40}{heads}", "");
        let row = |what: &str, f: &dyn Fn(&LinkFigures) -> &Repeated, d: usize| {
            let cells: String = l.iter().map(|x| format!("{:>C$}", f(x).show(d))).collect();
            println!("{what:<40}{cells}");
        };
        row("round trips per submission", &|x| &x.round_trips, 2);
        row("1 client, ms per submission", &|x| &x.ms_per_submission, 3);
        row("1 client, submissions/s", &|x| &x.one_client, 1);
        row("16 clients, submissions/s", &|x| &x.sixteen_clients, 1);
        let ratios: String = l
            .iter()
            .map(|x| {
                format!(
                    "{:>C$}",
                    format!("{:.2}x", x.sixteen_clients.median() / x.one_client.median())
                )
            })
            .collect();
        println!("{:<40}{ratios}", "16 / 1 client");
        let cpu_row = |what: &str, f: &dyn Fn(&LinkFigures) -> f64| {
            let cells: String = l.iter().map(|x| format!("{:>C$.3}", f(x))).collect();
            println!("{what:<40}{cells}");
        };
        let total = |c: &(Repeated, Repeated)| c.0.median() + c.1.median();
        cpu_row("1 client, CPU ms/sub: clients", &|x| x.cpu_one.0.median());
        cpu_row("1 client, CPU ms/sub: server", &|x| x.cpu_one.1.median());
        cpu_row("16 clients, CPU ms/sub: clients", &|x| {
            x.cpu_sixteen.0.median()
        });
        cpu_row("16 clients, CPU ms/sub: server", &|x| {
            x.cpu_sixteen.1.median()
        });
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ceilings: String = l
            .iter()
            .map(|x| {
                let ceiling = cores as f64 * 1000.0 / total(&x.cpu_sixteen);
                format!(
                    "{:>C$}",
                    format!("{ceiling:.0} = {:.2}x", ceiling / x.one_client.median())
                )
            })
            .collect();
        println!(
            "{:<40}{ceilings}",
            format!("CPU ceiling on {cores} cores, subs/s = x 1")
        );
        println!(
            "(CPU from /proc: this process's threads and the cluster's postmaster and backends; \
             the ceiling is cores / the 16-client CPU per submission, the most any number of \
             clients reaches on this machine; through the proxy the clients' CPU includes it)"
        );
        println!(
            "(round trips: the store's profile on loopback, client request bursts on the wire through the proxy)"
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
            Some(side) => {
                println!(
                    "{:<32}{:>22}{:>22.3}   (server: in the store's PL/pgSQL functions, pg_stat_user_functions)",
                    "  of which server functions", "", side.function_ms
                );
                println!(
                    "{:<32}{:>22}{:>22.3}   (server: {:.2} WAL fsyncs per submission, pg_stat_wal)",
                    "  of which WAL fsync", "", side.wal_sync_ms, side.wal_syncs
                );
            }
            None => println!(
                "  (server-side times not available: track_wal_io_timing or track_functions refused)"
            ),
        }
    }
}

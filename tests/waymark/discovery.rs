//! Waymark discovery with real Node children (SPEC W1–W3, W5–W7, W10, W11): each language in
//! both modes, owned files, generation retirement by count and age, the launch limit, and lock
//! holders that never spawn.

use std::time::Duration;

use crate::util::{self, EventLog, JS, PY, RS, TS};
use patchdiff::waymark::{
    Clock, DiscoveryError, DomainFailure, Language, Scope, Waymark, WaymarkMode, WorkerErrorCode,
};

fn find<'a>(scopes: &'a [Scope], name: &str) -> &'a Scope {
    scopes
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scope {name} in {scopes:#?}"))
}

fn text<'a>(source: &'a str, s: &Scope) -> &'a str {
    &source[s.start_byte..s.end_byte]
}

async fn check_all_languages(waymark: &Waymark) {
    let js = waymark
        .discover(Language::JavaScript, JS)
        .await
        .expect("js");
    let cal = find(&js.scopes, "Calendar");
    assert_eq!(cal.kind, "class");
    assert!(
        text(JS, cal).starts_with("class Calendar {"),
        "UTF-8 offsets"
    );
    assert_eq!((cal.start_line, cal.end_line), (2, 5));
    let add = find(&js.scopes, "Calendar.addWindow");
    assert_eq!(add.kind, "method");
    assert!(text(JS, add).starts_with("addWindow(w)"));
    assert_eq!(find(&js.scopes, "parseLine").kind, "function");
    let total = find(&js.scopes, "total");
    assert_eq!(total.kind, "function");
    assert!(text(JS, total).starts_with("const total"));
    let starts: Vec<_> = js.scopes.iter().map(|s| s.start_byte).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "sorted by start");
    assert!(js.parse_ms >= 0.0);

    let ts = waymark
        .discover(Language::TypeScript, TS)
        .await
        .expect("ts");
    assert_eq!(find(&ts.scopes, "Window").kind, "interface");
    assert_eq!(find(&ts.scopes, "Color").kind, "enum");
    assert_eq!(find(&ts.scopes, "Calendar.addWindow").kind, "method");
    assert_eq!(find(&ts.scopes, "parseLine").kind, "function");

    let py = waymark
        .discover(Language::Python, PY)
        .await
        .expect("python");
    let allow = find(&py.scopes, "RateLimiter.allow");
    assert_eq!(allow.kind, "method");
    assert!(
        text(PY, allow).starts_with("@property"),
        "decorators covered"
    );
    assert_eq!((allow.start_line, allow.end_line), (6, 8));
    assert_eq!(find(&py.scopes, "RateLimiter").kind, "class");
    assert_eq!(find(&py.scopes, "parse_line").kind, "function");

    let rs = waymark.discover(Language::Rust, RS).await.expect("rust");
    assert_eq!(find(&rs.scopes, "RateLimiter").kind, "struct");
    let imp = rs
        .scopes
        .iter()
        .find(|s| s.kind == "impl")
        .expect("impl scope");
    assert_eq!(imp.name, "RateLimiter");
    assert!(text(RS, imp).starts_with("impl RateLimiter {"));
    assert_eq!(find(&rs.scopes, "RateLimiter.allow").kind, "method");
    assert_eq!(find(&rs.scopes, "Limit").kind, "trait");
    assert_eq!(find(&rs.scopes, "Limit.limit").kind, "method");
    assert_eq!(find(&rs.scopes, "parse_line").kind, "function");
}

#[tokio::test]
async fn resident_worker_discovers_each_language_in_one_generation() {
    let work = tempfile::tempdir().expect("tempdir");
    let log = EventLog::default();
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        log.recorder(),
    );
    waymark.prewarm().await.expect("prewarm");
    let status = waymark.status();
    assert!(status.ready);
    assert_eq!(status.generation, Some(1));
    let pid = status.pid.expect("pid");
    check_all_languages(&waymark).await;
    let status = waymark.status();
    assert_eq!(status.requests_served, 4);
    assert_eq!(status.launches_total, 1, "one child served every request");
    assert_eq!(status.engine.as_deref(), Some("web-tree-sitter@0.25.10"));

    // W2/W3: request files are removed after each discovery; only the manifest remains.
    let roots = util::roots(work.path());
    assert_eq!(roots.len(), 1);
    let left: Vec<_> = std::fs::read_dir(&roots[0])
        .expect("root")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("manifest.json")]);

    for name in [
        "worker_launch",
        "worker_ready",
        "worker_queue_depth",
        "phase_admission",
        "phase_readiness",
        "phase_active",
        "phase_outer",
        "ipc_read",
        "discovery_total",
    ] {
        assert!(!log.named(name).is_empty(), "no {name} event");
    }
    // Every span of a successful discovery is finished with an ok outcome (none cancelled).
    for e in log.all() {
        assert_eq!(
            e.outcome,
            patchdiff::telemetry::Outcome::Ok,
            "{} {:?} {:?}",
            e.name,
            e.ids,
            e.attrs
        );
        assert!(!e.attrs.contains_key("cancelled"), "{}", e.name);
    }
    let ipc = log.named("ipc_read");
    assert!(
        ipc.iter()
            .all(|e| e.ids.contains_key("generation") && e.ids.contains_key("request"))
    );

    // W11: shutdown reaps the child and removes every owned file.
    waymark.shutdown().await;
    util::wait_gone(pid, Duration::from_secs(5)).await;
    assert!(util::roots(work.path()).is_empty());
    let err = waymark
        .discover(Language::Python, PY)
        .await
        .expect_err("shut down");
    assert_eq!(
        err.worker().map(|e| e.code),
        Some(WorkerErrorCode::Cancelled)
    );
}

#[tokio::test]
async fn oneshot_mode_starts_a_child_per_discovery_with_the_same_results() {
    let work = tempfile::tempdir().expect("tempdir");
    let log = EventLog::default();
    let waymark = Waymark::new(
        util::config(WaymarkMode::Oneshot, work.path()),
        log.recorder(),
    );
    waymark
        .prewarm()
        .await
        .expect("prewarm is a no-op in oneshot");
    assert_eq!(waymark.status().launches_total, 0);
    check_all_languages(&waymark).await;
    let status = waymark.status();
    assert_eq!(status.launches_total, 4);
    assert!(!status.ready, "nothing stays resident");
    waymark.shutdown().await;
    assert!(util::roots(work.path()).is_empty());
    let launches = log.named("worker_launch");
    assert_eq!(launches.len(), 4);
    assert!(launches.iter().all(|e| e.attrs["mode"] == "oneshot"));
}

#[tokio::test]
async fn lock_holder_never_spawns_a_child() {
    let work = tempfile::tempdir().expect("tempdir");
    let log = EventLog::default();
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        log.recorder(),
    );
    let err = waymark
        .discover_holding_lock(Language::Python, PY)
        .await
        .expect_err("no ready worker");
    assert_eq!(
        err.worker().map(|e| e.code),
        Some(WorkerErrorCode::NotReady)
    );
    assert_eq!(waymark.status().launches_total, 0);
    assert!(log.named("worker_launch").is_empty());
    assert!(util::roots(work.path()).is_empty());

    // With an already-ready worker, the lock holder is served by it.
    waymark.prewarm().await.expect("prewarm");
    let d = waymark
        .discover_holding_lock(Language::Python, PY)
        .await
        .expect("served by the ready worker");
    assert!(!d.scopes.is_empty());
    assert_eq!(waymark.status().launches_total, 1);
    waymark.shutdown().await;

    // Oneshot mode never has an already-ready worker.
    let oneshot = Waymark::new(
        util::config(WaymarkMode::Oneshot, work.path()),
        log.recorder(),
    );
    let err = oneshot
        .discover_holding_lock(Language::Python, PY)
        .await
        .expect_err("oneshot");
    assert_eq!(
        err.worker().map(|e| e.code),
        Some(WorkerErrorCode::NotReady)
    );
    assert_eq!(oneshot.status().launches_total, 0);
}

#[tokio::test]
async fn output_over_2_mib_is_a_domain_result_not_a_worker_error() {
    let work = tempfile::tempdir().expect("tempdir");
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        EventLog::default().recorder(),
    );
    // ~26,000 functions: the scopes JSON is well over 2 MiB.
    let mut source = String::new();
    for i in 0..26_000 {
        source.push_str(&format!("function f{i:06}(){{}}\n"));
    }
    let err = waymark
        .discover(Language::JavaScript, &source)
        .await
        .expect_err("too large");
    assert!(
        matches!(
            err,
            DiscoveryError::Domain(DomainFailure::OutputTooLarge { .. })
        ),
        "{err:?}"
    );
    // The generation is healthy and keeps serving.
    let status = waymark.status();
    assert!(status.ready);
    assert!(status.retirements.is_empty());
    waymark
        .discover(Language::JavaScript, JS)
        .await
        .expect("next");
    waymark.shutdown().await;
}

#[tokio::test]
async fn generation_retires_gracefully_at_the_request_count() {
    let work = tempfile::tempdir().expect("tempdir");
    let log = EventLog::default();
    let mut config = util::config(WaymarkMode::Resident, work.path());
    config.limits.max_requests = 2; // product default 10,000 (asserted in config tests)
    let waymark = Waymark::new(config, log.recorder());
    waymark.discover(Language::Python, PY).await.expect("1");
    let pid1 = waymark.status().pid.expect("pid");
    waymark.discover(Language::Python, PY).await.expect("2");
    let status = waymark.status();
    assert_eq!(status.retirements.len(), 1);
    assert_eq!(status.retirements[0].reason, "request_limit");
    assert_eq!(status.retirements[0].requests, 2);
    assert_eq!(
        status.generation,
        Some(1),
        "latest generation until the next launch"
    );
    assert!(status.pid.is_none());
    util::wait_gone(pid1, Duration::from_secs(5)).await;
    waymark.discover(Language::Python, PY).await.expect("3");
    assert_eq!(waymark.status().generation, Some(2));
    waymark.shutdown().await;
}

#[tokio::test]
async fn generation_retires_at_sixty_minutes_on_the_policy_clock() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::config(WaymarkMode::Resident, work.path());
    let clock = Clock::manual();
    config.clock = clock.clone();
    let waymark = Waymark::new(config, EventLog::default().recorder());
    waymark.prewarm().await.expect("prewarm");
    clock.advance(Duration::from_secs(59 * 60));
    waymark
        .discover(Language::Rust, RS)
        .await
        .expect("young enough");
    assert!(waymark.status().retirements.is_empty());
    clock.advance(Duration::from_secs(60));
    // At 60 minutes the idle generation retires before taking the next request (gracefully: it
    // has no active request), and a new generation answers.
    waymark
        .discover(Language::Rust, RS)
        .await
        .expect("answered");
    let status = waymark.status();
    assert_eq!(status.retirements.len(), 1);
    assert_eq!(status.retirements[0].generation, 1);
    assert_eq!(status.retirements[0].reason, "age_limit");
    assert_eq!(status.retirements[0].requests, 1);
    assert_eq!(status.generation, Some(2));
    assert!(
        status.age_ms.is_some_and(|a| a < 60_000),
        "fresh generation"
    );
    waymark.shutdown().await;
}

#[tokio::test]
async fn an_idle_generation_retires_at_sixty_minutes_without_a_request() {
    // W10: the age is enforced on the clock, not only when the next request arrives.
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::config(WaymarkMode::Resident, work.path());
    let clock = Clock::manual();
    config.clock = clock.clone();
    let events = EventLog::default();
    let waymark = Waymark::new(config, events.recorder());
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("running");
    clock.advance(Duration::from_secs(59 * 60));
    tokio::task::yield_now().await;
    assert!(
        waymark.status().retirements.is_empty(),
        "59 minutes is young"
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(events.retirement(Duration::from_secs(5)).await, "age_limit");
    let status = waymark.status();
    assert_eq!(status.retirements[0].generation, 1);
    assert_eq!(status.retirements[0].requests, 0);
    assert!(status.pid.is_none(), "no current generation: {status:?}");
    util::wait_gone(pid, Duration::from_secs(5)).await;
    // The next request launches a fresh generation.
    waymark
        .discover(Language::Rust, RS)
        .await
        .expect("answered");
    assert_eq!(waymark.status().generation, Some(2));
    waymark.shutdown().await;
}

#[tokio::test]
async fn fourth_launch_in_a_rolling_minute_is_refused() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::config(WaymarkMode::Resident, work.path());
    let clock = Clock::manual();
    config.clock = clock.clone();
    config.limits.max_requests = 1; // every request retires its generation
    let waymark = Waymark::new(config, EventLog::default().recorder());
    for _ in 0..3 {
        waymark
            .discover(Language::Python, PY)
            .await
            .expect("launch ok");
        clock.advance(Duration::from_secs(10));
    }
    assert_eq!(waymark.status().launches_in_last_minute, 3);
    let err = waymark
        .discover(Language::Python, PY)
        .await
        .expect_err("fourth launch");
    assert_eq!(
        err.worker().map(|e| e.code),
        Some(WorkerErrorCode::RestartLimit)
    );
    assert_eq!(waymark.status().launches_total, 3, "nothing was started");
    // 60 s after the first launch, one more is allowed.
    clock.advance(Duration::from_secs(30));
    waymark
        .discover(Language::Python, PY)
        .await
        .expect("window moved on");
    assert_eq!(waymark.status().launches_total, 4);
    waymark.shutdown().await;
}

#[tokio::test]
async fn rss_is_sampled_every_100_ms_into_the_memory_file() {
    // W9/T2: the child's RSS is sampled every 100 ms; each sample goes to the memory file and
    // every tenth also becomes a `worker_rss` event.
    let work = tempfile::tempdir().expect("tempdir");
    let events_path = work.path().join("perf.jsonl");
    let (files, status) = patchdiff::telemetry::Recorder::configure(Some(&events_path), None);
    assert!(status.memory_sampling_enabled);
    let events = EventLog::default();
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        events.listening(files),
    );
    assert_eq!(
        waymark.config().limits.rss_interval,
        Duration::from_millis(100)
    );
    waymark.prewarm().await.expect("prewarm");
    // Three `worker_rss` events: at least 20 samples between the first and the third.
    events
        .wait_for(Duration::from_secs(20), |_| {
            events.named("worker_rss").len() >= 3
        })
        .await;
    waymark.shutdown().await;
    let memory = std::fs::read_to_string(patchdiff::telemetry::memory_path_for(&events_path))
        .expect("memory file");
    let ts: Vec<f64> = memory
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("sample")["ts_ms"]
                .as_f64()
                .expect("ts_ms")
        })
        .collect();
    assert!(ts.len() >= 21, "{} samples", ts.len());
    let mut gaps: Vec<f64> = ts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    // Timing on a shared machine: the median gap is the interval, give or take scheduling.
    assert!(
        (90.0..=250.0).contains(&median),
        "median gap {median} ms: {gaps:?}"
    );
}

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

/// The files under `tests/fixtures/waymark/`, written for these tests (not real files: those are
/// in `real_files`, read at test time), for the constructs the real files lack: Java records and
/// enums with methods, C `struct S {…};` and unions, C++ namespaces (nested, `a::b`) and
/// out-of-line template methods, a C# block namespace and records, Ruby `class << self` and
/// `module A::B`, PHP enums, traits and functions, TypeScript decorators, Rust `impl` and `mod`;
/// with every scope each must yield: `kind name start-end`, lines 1-based inclusive; a
/// trailing ` ;` marks a scope that ends just before its line's `;`, a leading `export ` one that
/// starts after its line's `export` (an undecorated exported JS/TS declaration).
const HAND_WRITTEN_FIXTURES: &[(Language, &str, &[&str])] = &[
    (
        Language::Java,
        "RangeSet.java",
        &[
            "class RangeSet 10-80",
            "constructor RangeSet.RangeSet 14-14",
            "method RangeSet.iterator 16-19",
            "method RangeSet.add 22-28",
            "method RangeSet.encloses 30-39",
            "class RangeSet.Range 42-63",
            "constructor RangeSet.Range.Range 46-49",
            "method RangeSet.Range.contains 51-53",
            "enum RangeSet.Range.BoundType 55-62",
            "method RangeSet.Range.BoundType.flip 59-61",
            "interface RangeSet.Visitor 65-69",
            "method RangeSet.Visitor.visit 66-66",
            "method RangeSet.Visitor.done 68-68",
            "record RangeSet.Span 71-79",
            "constructor RangeSet.Span.Span 72-74",
            "method RangeSet.Span.length 76-78",
            "interface Merger 82-85",
            "method Merger.merge 84-84",
        ],
    ),
    (
        Language::C,
        "sds.c",
        &[
            "struct sdshdr 11-15 ;",
            "struct sdsRange 17-20",
            "enum sdsType 22-25 ;",
            "struct sdsValue 27-30 ;",
            "function sdsHeader 34-36",
            "function sdslen 38-40",
            "function sdsnewlen 42-50",
            "function sdsfree 52-55",
            "function sdsIsRange 57-61",
        ],
    ),
    (
        Language::Cpp,
        "interval_map.cc",
        &[
            "namespace llvm 5-63",
            "namespace llvm::detail 6-13",
            "struct llvm::detail::IntervalTraits 8-11",
            "method llvm::detail::IntervalTraits::less 10-10",
            "enum llvm::Overlap 15-15 ;",
            "class llvm::IntervalMap 18-44",
            "class llvm::IntervalMap::iterator 21-29 ;",
            "method llvm::IntervalMap::iterator::valid 23-23",
            "method llvm::IntervalMap::empty 31-31",
            "method llvm::IntervalMap::insert 35-39",
            "method llvm::IntervalMap::size 46-49",
            "method llvm::IntervalMap::iterator::advance 51-54",
            "struct llvm::Coalescer 56-59 ;",
            "method llvm::Coalescer::run 61-61",
            "function countOverlaps 65-70",
        ],
    ),
    (
        Language::CSharp,
        "RetryPolicy.cs",
        &[
            "namespace Example.Extensions.Resilience 5-65",
            "class Example.Extensions.Resilience.RetryPolicy 8-42",
            "constructor Example.Extensions.Resilience.RetryPolicy.RetryPolicy 13-17",
            "method Example.Extensions.Resilience.RetryPolicy.ShouldRetry 19-20",
            "method Example.Extensions.Resilience.RetryPolicy.ShouldRetry 22-25",
            "struct Example.Extensions.Resilience.RetryPolicy.Backoff 27-35",
            "method Example.Extensions.Resilience.RetryPolicy.Backoff.Next 31-34",
            "enum Example.Extensions.Resilience.RetryPolicy.State 37-41",
            "interface Example.Extensions.Resilience.IRetryListener 44-47",
            "method Example.Extensions.Resilience.IRetryListener.OnRetry 46-46",
            "record Example.Extensions.Resilience.RetryEvent 49-52",
            "method Example.Extensions.Resilience.RetryEvent.ToString 51-51",
            "class Example.Extensions.Resilience.RetryPolicyExtensions 54-64",
            "method Example.Extensions.Resilience.RetryPolicyExtensions.Delays 56-63",
        ],
    ),
    (
        Language::Ruby,
        "cache_store.rb",
        &[
            "module ActiveSupport 4-47",
            "module ActiveSupport::Cache 5-46",
            "class ActiveSupport::Cache::Entry 6-17",
            "method ActiveSupport::Cache::Entry#initialize 9-12",
            "method ActiveSupport::Cache::Entry#expired? 14-16",
            "class ActiveSupport::Cache::MemoryStore 19-45",
            "method ActiveSupport::Cache::MemoryStore.supports_cache_versioning? 20-22",
            "method ActiveSupport::Cache::MemoryStore.build 25-27",
            "method ActiveSupport::Cache::MemoryStore#read 30-33",
            "method ActiveSupport::Cache::MemoryStore#write 35-38",
            "method ActiveSupport::Cache::MemoryStore#prune 42-44",
            "module Cache::Strategy 49-53",
            "method Cache::Strategy#with_local_cache 50-52",
            "function instrument 55-57",
        ],
    ),
    (
        Language::Php,
        "Collection.php",
        &[
            "interface Enumerable 10-13",
            "method Enumerable::all 12-12",
            "trait Conditionable 15-21",
            "method Conditionable::when 17-20",
            "enum SortDirection 23-32",
            "method SortDirection::flip 28-31",
            "class Collection 34-60",
            "method Collection::__construct 40-43",
            "method Collection::all 45-48",
            "method Collection::offsetExists 50-54",
            "method Collection::times 56-59",
            "function collect 62-65",
        ],
    ),
    (
        Language::TypeScript,
        "app.component.ts",
        &[
            "class TitleService 4-11",
            "method TitleService.get 8-10",
            "class AppComponent 13-31",
            "method AppComponent.constructor 20-20",
            "method AppComponent.onResize 22-25",
            "method AppComponent.label 27-30",
            "class FooterComponent 33-34",
            "export function bootstrap 36-38",
        ],
    ),
    (
        Language::Rust,
        "ring.rs",
        &[
            "struct Ring 6-11",
            "impl Ring 13-28",
            "method Ring.with_capacity 14-17",
            "method Ring.push 20-27",
            "enum Pressure 30-34",
            "module tests 36-47",
            "function tests.push_drops_the_oldest_sample 40-46",
        ],
    ),
];

/// The byte range lines `start..=end` (1-based) span without the first line's indentation and
/// the last line's trailing comment (`} // namespace detail`) and whitespace (and its final `;`
/// when `before_semicolon`).
pub(crate) fn line_span(
    source: &str,
    start: usize,
    end: usize,
    before_semicolon: bool,
) -> (usize, usize) {
    let mut offsets = vec![0];
    offsets.extend(source.match_indices('\n').map(|(i, _)| i + 1));
    let first = offsets[start - 1];
    let first_line_end = offsets.get(start).copied().unwrap_or(source.len());
    let indent =
        source[first..first_line_end].len() - source[first..first_line_end].trim_start().len();
    let last = offsets[end - 1];
    let last_end = offsets.get(end).copied().unwrap_or(source.len());
    let line = &source[last..last_end];
    let mut trimmed = line.split(" //").next().unwrap_or(line).trim_end();
    if before_semicolon {
        trimmed = trimmed.strip_suffix(';').expect("the line ends with `;`");
    }
    (first + indent, last + trimmed.len())
}

#[tokio::test]
async fn discovery_on_hand_written_fixtures_finds_every_scope_byte_exact() {
    let work = tempfile::tempdir().expect("tempdir");
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        EventLog::default().recorder(),
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/waymark");
    for (language, file, expected) in HAND_WRITTEN_FIXTURES {
        let source = std::fs::read_to_string(dir.join(file)).expect("fixture");
        let found = waymark.discover(*language, &source).await.expect(file);
        assert!(!found.has_error, "{file} parses cleanly");
        let got: Vec<String> = found
            .scopes
            .iter()
            .map(|s| format!("{} {} {}-{}", s.kind, s.name, s.start_line, s.end_line))
            .collect();
        let want: Vec<&str> = expected
            .iter()
            .map(|e| e.trim_end_matches(" ;").trim_start_matches("export "))
            .collect();
        assert_eq!(got, want, "{file}: every scope, in order");
        for (scope, line) in found.scopes.iter().zip(expected.iter()) {
            let mut span = line_span(
                &source,
                scope.start_line,
                scope.end_line,
                line.ends_with(" ;"),
            );
            if line.starts_with("export ") {
                span.0 += "export ".len();
            }
            assert_eq!(
                (scope.start_byte, scope.end_byte),
                span,
                "{file}: {line} covers its lines exactly: {:?}",
                &source[scope.start_byte..scope.end_byte]
            );
        }
    }
    waymark.shutdown().await;
}

/// Decorators, attributes and annotations are inside the scope they decorate, whether the
/// grammar makes them children (Java, C#, PHP, Python, JavaScript) or preceding siblings (Rust
/// items, TypeScript methods and exported classes): the scope starts at the first of them.
#[tokio::test]
async fn a_scope_covers_its_decorators_attributes_and_annotations_in_every_language() {
    let work = tempfile::tempdir().expect("tempdir");
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        EventLog::default().recorder(),
    );
    // tree-sitter-javascript 0.25.0 parses decorators (the TC39 proposal) on classes, before or
    // after `export`, and on methods and fields.
    let js_class = "@dec\nclass C {\n  @log\n  m() {}\n}\n";
    let js_members = "class F {\n  @bound\n  @log('x')\n  static g() {}\n  @f h = () => {};\n}\n";
    let cases: &[(Language, &str, &str, &str)] = &[
        (Language::JavaScript, js_class, "C", "@dec\nclass C {"),
        (Language::JavaScript, js_class, "C.m", "@log\n  m() {}"),
        (
            Language::JavaScript,
            "export @dec class D {}\n",
            "D",
            "@dec class D {}",
        ),
        (
            Language::JavaScript,
            "@dec export class E {}\n",
            "E",
            "@dec export class E {}",
        ),
        (
            Language::JavaScript,
            js_members,
            "F.g",
            "@bound\n  @log('x')\n  static g() {}",
        ),
        (Language::JavaScript, js_members, "F.h", "@f h = () => {}"),
        (
            Language::TypeScript,
            "@Component({selector: 'app-root'})\nexport class AppComponent {\n  @HostListener('click')\n  onClick() {}\n}\n",
            "AppComponent",
            "@Component({selector: 'app-root'})\nexport class AppComponent {",
        ),
        (
            Language::TypeScript,
            "@Component({selector: 'app-root'})\nexport class AppComponent {\n  @HostListener('click')\n  onClick() {}\n}\n",
            "AppComponent.onClick",
            "@HostListener('click')\n  onClick() {}",
        ),
        (
            Language::Rust,
            "#[derive(Debug)]\n#[cfg_attr(test, derive(Clone))]\npub struct S;\n",
            "S",
            "#[derive(Debug)]\n#[cfg_attr(test, derive(Clone))]\npub struct S;",
        ),
        (
            Language::Rust,
            "/// Doc.\n#[test]\nfn t() {}\n",
            "t",
            "#[test]\nfn t() {}",
        ),
        (
            Language::Python,
            "class C:\n    @staticmethod\n    def m():\n        pass\n",
            "C.m",
            "@staticmethod\n    def m():\n        pass",
        ),
        (
            Language::Java,
            "class A {\n  @Override\n  public String toString() { return \"\"; }\n}\n",
            "A.toString",
            "@Override\n  public String toString() { return \"\"; }",
        ),
        (
            Language::CSharp,
            "class A\n{\n    [Obsolete]\n    void M() {}\n}\n",
            "A.M",
            "[Obsolete]\n    void M() {}",
        ),
        (
            Language::Php,
            "<?php\nclass A\n{\n    #[Pure]\n    function m() {}\n}\n",
            "A::m",
            "#[Pure]\n    function m() {}",
        ),
        (
            Language::Cpp,
            "class A {\n  [[nodiscard]] int m() { return 1; }\n};\n",
            "A::m",
            "[[nodiscard]] int m() { return 1; }",
        ),
    ];
    for (language, source, name, text) in cases {
        let found = waymark.discover(*language, source).await.expect("discover");
        let scope = find(&found.scopes, name);
        let covered = &source[scope.start_byte..scope.end_byte];
        assert!(
            covered.starts_with(text),
            "{language} {name}: {covered:?} starts with {text:?}"
        );
    }
    waymark.shutdown().await;
}

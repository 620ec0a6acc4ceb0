//! Supervisor policy on paused time: the handle's futures, the launch window, retirement
//! reasons and their codes, and — through the scripted child — retirements, the restart limit,
//! phase ceilings, pauses, caller kinds and the quarantine, each in milliseconds.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::launch::admit_in_window;
use super::*;
use crate::waymark::WaymarkLimits;

fn assert_send_sync<T: Send + Sync>(_: &T) {}
fn assert_send<T: Send>(_: T) {}

/// The MCP server spawns discoveries on a multi-thread runtime: the handle must be
/// `Send + Sync` and every public future `Send`.
#[test]
fn waymark_handle_and_futures_are_send() {
    let config = WaymarkConfig::new(
        WaymarkMode::Resident,
        PathBuf::from("/nonexistent/node"),
        PathBuf::from("/nonexistent"),
        PathBuf::from("/nonexistent"),
    );
    let w = Waymark::new(config, Recorder::disabled());
    assert_send_sync(&w);
    assert_send(w.discover(Language::Rust, ""));
    assert_send(w.discover_holding_lock(Language::Rust, ""));
    assert_send(w.prewarm());
    assert_send(w.shutdown());
    let status = w.status();
    assert_eq!(status.generation, None, "status starts nothing (W13)");
    assert_eq!(status.launches_total, 0);
}

#[test]
fn launch_window_admits_three_per_rolling_minute() {
    // W10: at most 3 launches in any rolling 60 s window (spec figures as literals).
    let limits = WaymarkLimits::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut launches = VecDeque::new();
    for s in [0, 10, 20] {
        admit_in_window(&mut launches, at(s), &limits).expect("within the limit");
    }
    let refused = admit_in_window(&mut launches, at(30), &limits).unwrap_err();
    assert_eq!(refused.code, WorkerErrorCode::RestartLimit);
    assert!(
        refused.message.contains("next launch allowed in 30000 ms"),
        "{}",
        refused.message
    );
    assert_eq!(launches.len(), 3, "a refused launch is not counted");
    // At 60 s the first launch leaves the window.
    admit_in_window(&mut launches, at(60), &limits).expect("the window rolled");
    assert_eq!(launches.len(), 3);
}

#[test]
fn retirement_reasons_map_to_stable_worker_codes() {
    let code = |r| error_for_reason(r, 1, "x").code;
    assert_eq!(code(RetirementReason::RssLimit), WorkerErrorCode::RssLimit);
    assert_eq!(code(RetirementReason::Shutdown), WorkerErrorCode::Cancelled);
    assert_eq!(
        code(RetirementReason::Cancelled),
        WorkerErrorCode::Cancelled
    );
    assert_eq!(
        code(RetirementReason::StartupTimeout),
        WorkerErrorCode::StartupTimeout
    );
    for r in [
        RetirementReason::WorkerExited,
        RetirementReason::InvalidFraming,
        RetirementReason::UnsolicitedData,
        RetirementReason::WrongGeneration,
        RetirementReason::WrongRequestId,
        RetirementReason::PipeFailed,
    ] {
        assert_eq!(code(r), WorkerErrorCode::Protocol, "{r}");
    }
}

// ---- through the scripted child (spawn seam), on paused time --------------------------------

use super::scripted::{Reply, Script, ScriptedSpawner};
use crate::telemetry::PerfEvent;
use crate::waymark::{DomainFailure, WorkerErrorCode as Code};

/// A supervisor over scripted workers, its event log and its work directory.
struct Rig {
    waymark: Waymark,
    spawner: Arc<ScriptedSpawner>,
    events: Arc<Mutex<Vec<PerfEvent>>>,
    _work: tempfile::TempDir,
}

impl Rig {
    fn new(script: impl Fn(u64) -> Script + Send + Sync + 'static) -> Self {
        Self::with(script, |_| {})
    }

    fn with(
        script: impl Fn(u64) -> Script + Send + Sync + 'static,
        tune: impl FnOnce(&mut WaymarkConfig),
    ) -> Self {
        let work = tempfile::tempdir().expect("tempdir");
        let mut config = WaymarkConfig::new(
            WaymarkMode::Resident,
            PathBuf::from("/scripted/node"),
            work.path().to_path_buf(),
            work.path().join("roots"),
        );
        tune(&mut config);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let recorder = Recorder::disabled().with_listener(Arc::new(move |e: &PerfEvent| {
            lock(&sink).push(e.clone());
        }));
        let spawner = ScriptedSpawner::new(script);
        let waymark = Waymark::with_spawner(config, recorder, spawner.clone());
        Rig {
            waymark,
            spawner,
            events,
            _work: work,
        }
    }

    fn named(&self, name: &str) -> Vec<PerfEvent> {
        lock(&self.events)
            .iter()
            .filter(|e| e.name == name)
            .cloned()
            .collect()
    }

    fn reasons(&self) -> Vec<String> {
        self.waymark
            .status()
            .retirements
            .iter()
            .map(|r| r.reason.to_string())
            .collect()
    }

    /// Waits (on paused time, so instantly) until the generation's cleanup has finished.
    async fn settle(&self) {
        for _ in 0..200 {
            if lock(&self.waymark.inner.state).live.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn answering(_: u64) -> Script {
    Script::replying(|_, _| Reply::Answer)
}

fn worker_code(r: &Result<Discovery, DiscoveryError>) -> Option<Code> {
    r.as_ref().err().and_then(|e| e.worker()).map(|e| e.code)
}

/// W7: `discovery_total`'s `lock_holder` is true only for a caller holding its target's lock —
/// a read's parse check (`discover_if_idle`) holds none.
#[tokio::test(start_paused = true)]
async fn lock_holder_is_recorded_only_for_callers_holding_a_lock() {
    let rig = Rig::new(answering);
    rig.waymark.prewarm().await.expect("prewarm");
    let w = &rig.waymark;
    w.discover(Language::JavaScript, "a")
        .await
        .expect("ordinary");
    w.discover_holding_lock(Language::JavaScript, "b")
        .await
        .expect("lock holder");
    w.discover_if_idle(Language::JavaScript, "c", &ScopeQuery::Summary)
        .await
        .expect("a read's parse check");
    let seen: Vec<(String, bool)> = rig
        .named("discovery_total")
        .iter()
        .map(|e| {
            (
                e.attrs["caller"].as_str().unwrap_or_default().to_owned(),
                e.attrs["lock_holder"].as_bool().expect("lock_holder"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("ordinary".to_owned(), false),
            ("lock_holder".to_owned(), true),
            ("if_idle".to_owned(), false),
        ],
        "a read's parse check holds no lock"
    );
}

/// W4: each scripted fault retires the generation with its reason and fails the request with the
/// reason's code; the failed discovery is not retried (one launch).
#[tokio::test(start_paused = true)]
async fn each_fault_retires_with_its_reason_and_is_never_retried() {
    let cases = [
        (Reply::Die, "worker_exited", Some(Code::Protocol)),
        (Reply::Garbage, "invalid_framing", Some(Code::Protocol)),
        (
            Reply::WrongRequest,
            "wrong_request_id",
            Some(Code::Protocol),
        ),
        (
            Reply::WrongGeneration,
            "wrong_generation",
            Some(Code::Protocol),
        ),
        (Reply::Balloon(2 << 30), "rss_limit", Some(Code::RssLimit)),
        (Reply::Hang, "active_timeout", None),
    ];
    for (reply, reason, code) in cases {
        let r = reply.clone();
        let rig = Rig::new(move |_| {
            let r = r.clone();
            Script::replying(move |_, _| r.clone())
        });
        let result = rig.waymark.discover(Language::JavaScript, "x").await;
        assert_eq!(worker_code(&result), code, "{reply:?}: {result:?}");
        if code.is_none() {
            assert!(
                matches!(
                    result,
                    Err(DiscoveryError::Domain(DomainFailure::ActiveTimeout { .. }))
                ),
                "{result:?}"
            );
        }
        rig.settle().await;
        assert_eq!(rig.reasons(), [reason], "{reply:?}");
        assert_eq!(
            rig.spawner
                .spawned
                .load(std::sync::atomic::Ordering::SeqCst),
            1
        );
        let retired = rig.named("worker_retired");
        assert_eq!(retired.len(), 1);
        assert_eq!(retired[0].attrs["reason"], reason, "the event's spelling");
    }
}

/// W10: three launches in any rolling minute; the fourth is refused at once.
#[tokio::test(start_paused = true)]
async fn a_fourth_launch_in_a_rolling_minute_is_the_restart_limit() {
    // Every generation dies on its first request; distinct contents, so none is quarantined.
    let rig = Rig::new(|_| Script::replying(|_, _| Reply::Die));
    for n in 0..3 {
        let r = rig
            .waymark
            .discover(Language::JavaScript, &format!("c{n}"))
            .await;
        assert_eq!(worker_code(&r), Some(Code::Protocol), "{n}: {r:?}");
    }
    let start = Instant::now();
    let r = rig.waymark.discover(Language::JavaScript, "c3").await;
    assert_eq!(worker_code(&r), Some(Code::RestartLimit), "{r:?}");
    assert!(
        start.elapsed() < Duration::from_millis(10),
        "refused at once"
    );
    assert_eq!(
        rig.spawner
            .spawned
            .load(std::sync::atomic::Ordering::SeqCst),
        3
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    let r = rig.waymark.discover(Language::JavaScript, "c4").await;
    assert_eq!(
        worker_code(&r),
        Some(Code::Protocol),
        "the window rolled: {r:?}"
    );
}

/// W6: readiness 7 s, active 15 s (default), each on its own.
#[tokio::test(start_paused = true)]
async fn readiness_and_active_ceilings_fire_at_their_limits() {
    let rig = Rig::new(|_| Script {
        ready_after: None,
        reply: Arc::new(|_, _| Reply::Answer),
    });
    let start = Instant::now();
    let e = rig.waymark.prewarm().await.expect_err("never ready");
    assert_eq!(e.code, Code::StartupTimeout);
    assert_eq!(start.elapsed(), WaymarkLimits::SPEC.readiness);
    rig.settle().await;
    assert_eq!(rig.reasons(), ["startup_timeout"]);

    let rig = Rig::new(|_| Script::replying(|_, _| Reply::Hang));
    rig.waymark.prewarm().await.expect("ready");
    let start = Instant::now();
    let r = rig.waymark.discover(Language::JavaScript, "x").await;
    assert!(matches!(
        r,
        Err(DiscoveryError::Domain(DomainFailure::ActiveTimeout { .. }))
    ));
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_secs(15) && elapsed < Duration::from_millis(15_050),
        "{elapsed:?}"
    );
}

/// W6: a paused process is not a slow worker: a 20 s pause during a request whose answer takes
/// 1 s of running time retires nothing, and the active phase says it was paused.
#[tokio::test(start_paused = true)]
async fn a_paused_process_does_not_retire_a_healthy_generation() {
    let rig = Rig::new(|_| Script::replying(|_, _| Reply::AnswerAfter(Duration::from_secs(1))));
    rig.waymark.prewarm().await.expect("ready");
    let w = rig.waymark.clone();
    let request = tokio::spawn(async move { w.discover(Language::JavaScript, "x").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The whole process stops for 20 s: every timer is late at once when it resumes.
    tokio::time::advance(Duration::from_secs(20)).await;
    let result = request.await.expect("join");
    assert!(result.is_ok(), "{result:?}");
    assert!(rig.reasons().is_empty(), "{:?}", rig.reasons());
    let active = rig.named("phase_active");
    let paused = active[0].attrs.get("paused_ms").and_then(|v| v.as_u64());
    assert!(
        paused.is_some_and(|p| p >= 19_000),
        "the active phase reports the pause: {:?}",
        active[0].attrs
    );
    assert!(rig.waymark.status().ready, "the generation still serves");
}

/// W4, W10: a pathological content costs only itself: it kills its generation once, is then answered
/// `quarantined` at once without a launch, and other content keeps being discovered.
#[tokio::test(start_paused = true)]
async fn content_that_killed_a_generation_is_not_sent_again() {
    let rig = Rig::new(|_| {
        Script::replying(|_, source| {
            if source.starts_with("HUGE") {
                Reply::Balloon(2 << 30)
            } else {
                Reply::Answer
            }
        })
    });
    let first = rig
        .waymark
        .discover(Language::JavaScript, "HUGE file")
        .await;
    assert_eq!(worker_code(&first), Some(Code::RssLimit), "{first:?}");
    rig.settle().await;
    for _ in 0..5 {
        let start = Instant::now();
        let again = rig
            .waymark
            .discover(Language::JavaScript, "HUGE file")
            .await;
        match &again {
            Err(DiscoveryError::Domain(d @ DomainFailure::Quarantined { .. })) => {
                let text = d.to_string();
                assert!(
                    text.contains("retired worker generation 1 (rss_limit"),
                    "{text}"
                );
            }
            other => panic!("expected quarantined, got {other:?}"),
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "answered at once");
    }
    assert_eq!(
        rig.spawner
            .spawned
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no launch spent on it"
    );
    rig.waymark
        .discover(Language::JavaScript, "small")
        .await
        .expect("other content keeps its worker");
    let status = rig.waymark.status();
    assert_eq!(status.quarantined, 1);
    assert_eq!(status.launches_in_last_minute, 2);
    // The same bytes in another language are another question.
    let other = rig
        .waymark
        .discover(Language::TypeScript, "HUGE file")
        .await;
    assert_eq!(worker_code(&other), Some(Code::RssLimit), "{other:?}");
}

#[tokio::test(start_paused = true)]
async fn retirement_reasons_serialize_as_their_wire_spelling() {
    for r in RetirementReason::ALL {
        assert_eq!(
            serde_json::to_value(r).expect("json"),
            serde_json::Value::from(r.as_str())
        );
        assert_eq!(r, r.as_str());
    }
}

/// W4, W10: a death with the same content in flight twice quarantines it (one death may come
/// from outside the content: a SIGKILL, the OOM killer), so it costs at most two launches.
#[tokio::test(start_paused = true)]
async fn content_the_worker_dies_on_twice_is_not_sent_a_third_time() {
    let rig = Rig::new(|_| {
        Script::replying(|_, source| {
            if source == "crash" {
                Reply::Die
            } else {
                Reply::Answer
            }
        })
    });
    for _ in 0..2 {
        let r = rig.waymark.discover(Language::JavaScript, "crash").await;
        assert_eq!(worker_code(&r), Some(Code::Protocol), "{r:?}");
        rig.settle().await;
    }
    let third = rig.waymark.discover(Language::JavaScript, "crash").await;
    assert!(
        matches!(
            third,
            Err(DiscoveryError::Domain(DomainFailure::Quarantined { .. }))
        ),
        "{third:?}"
    );
    assert_eq!(
        rig.spawner
            .spawned
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
    rig.waymark
        .discover(Language::JavaScript, "fine")
        .await
        .expect("the third launch is still in the budget");
}

/// W6: the outer allowance (active + 13 s) bounds the phases together: with it lowered to
/// active + 1 s, a slow start (2.5 s) plus a slow answer (1 s) exceeds it though neither phase
/// exceeds its own ceiling.
#[tokio::test(start_paused = true)]
async fn the_outer_allowance_bounds_the_phases_together() {
    let rig = Rig::with(
        |_| Script {
            ready_after: Some(Duration::from_millis(2500)),
            reply: Arc::new(|_, _| Reply::AnswerAfter(Duration::from_secs(1))),
        },
        |c| {
            c.active_timeout = Duration::from_secs(2);
            c.limits.outer_extra = Duration::from_secs(1);
        },
    );
    let start = Instant::now();
    let r = rig.waymark.discover(Language::JavaScript, "x").await;
    assert_eq!(worker_code(&r), Some(Code::OuterTimeout), "{r:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

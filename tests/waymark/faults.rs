//! Waymark protocol and limit faults with real Node processes (SPEC W4–W6, W8, W9). Faults the
//! real worker cannot produce (garbage frames, unsolicited or mislabelled frames, stderr floods,
//! hangs, missing readiness, memory balloons) come from the TEST-ONLY fault worker
//! `integrations/waymark/test-fixtures/fault_worker.mjs`, selected through the config's
//! `worker_script`/`worker_args` (see `util::fault_config`). Ceilings are lowered in the
//! config where a test would otherwise wait for the product default; the defaults themselves are
//! asserted in `waymark::config` unit tests.

use std::time::Duration;

use crate::util::{self, EventLog, JS, PY};
use patchdiff::waymark::{
    DiscoveryError, DomainFailure, Language, Waymark, WaymarkConfig, WaymarkMode, WorkerErrorCode,
};

fn start(config: WaymarkConfig) -> (Waymark, EventLog) {
    let log = EventLog::default();
    (Waymark::new(config, log.recorder()), log)
}

fn worker_code(
    r: &Result<patchdiff::waymark::Discovery, DiscoveryError>,
) -> Option<WorkerErrorCode> {
    match r {
        Err(DiscoveryError::Worker(e)) => Some(e.code),
        _ => None,
    }
}

/// After a protocol fault: one retirement with `reason`, the child gone, its root removed, and
/// no automatic retry (a single launch).
async fn assert_retired(waymark: &Waymark, log: &EventLog, reason: &str, pid: u32) {
    assert_eq!(log.retirement(Duration::from_secs(5)).await, reason);
    let status = waymark.status();
    assert_eq!(status.retirements.len(), 1, "{:?}", status.retirements);
    assert_eq!(status.retirements[0].reason, reason);
    assert_eq!(
        status.launches_total, 1,
        "a failed discovery is never retried (W4)"
    );
    util::wait_gone(pid, Duration::from_secs(5)).await;
    waymark.shutdown().await;
}

#[tokio::test]
async fn child_sigkill_mid_request_is_protocol_loss_and_retires_the_generation() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("hang", work.path()));
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("pid");
    let w = waymark.clone();
    let request = tokio::spawn(async move { w.discover(Language::JavaScript, JS).await });
    // The request is active once its readiness phase has ended; then kill the child.
    log.wait_for(Duration::from_secs(5), |e| {
        e.name == "phase_readiness" && e.ids.contains_key("request")
    })
    .await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill child");
    let result = request.await.expect("join");
    assert_eq!(
        worker_code(&result),
        Some(WorkerErrorCode::Protocol),
        "{result:?}"
    );
    let reason = log.retirement(Duration::from_secs(5)).await;
    assert!(
        reason == "worker_exited" || reason == "pipe_failed",
        "death retires the generation: {reason}"
    );
    let ipc = log.named("ipc_read");
    assert!(
        ipc.iter()
            .all(|e| e.outcome == patchdiff::telemetry::Outcome::Failed),
        "T4: a pipe failure is a failed ipc_read"
    );
    assert_eq!(waymark.status().launches_total, 1, "never retried (W4)");
    waymark.shutdown().await;
    assert!(util::roots(work.path()).is_empty());
}

/// Starts a fault worker (`fault`), asks for one discovery, and checks the protocol fault comes
/// back as `WAYMARK_WORKER_PROTOCOL` and retires the generation with `reason` (W4).
async fn protocol_fault_retires_the_generation(fault: &str, reason: &str) {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config(fault, work.path()));
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("pid");
    let result = waymark.discover(Language::JavaScript, JS).await;
    assert_eq!(
        worker_code(&result),
        Some(WorkerErrorCode::Protocol),
        "{result:?}"
    );
    assert_retired(&waymark, &log, reason, pid).await;
}

#[tokio::test]
async fn garbage_frame_retires_the_generation() {
    protocol_fault_retires_the_generation("garbage", "invalid_framing").await;
}

#[tokio::test]
async fn unsolicited_frame_retires_the_generation() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("unsolicited", work.path()));
    // The fault worker sends a result right after ready, with no request outstanding.
    let _ = waymark.prewarm().await;
    let pid = log
        .wait_for(Duration::from_secs(5), |e| e.name == "worker_launch")
        .await
        .attrs["pid"]
        .as_u64()
        .expect("pid") as u32;
    assert_retired(&waymark, &log, "unsolicited_data", pid).await;
    assert!(util::roots(work.path()).is_empty());
}

#[tokio::test]
async fn wrong_generation_id_retires_the_generation() {
    protocol_fault_retires_the_generation("wrong_generation", "wrong_generation").await;
}

#[tokio::test]
async fn wrong_request_id_retires_the_generation() {
    protocol_fault_retires_the_generation("wrong_request", "wrong_request_id").await;
}

#[tokio::test]
async fn stderr_flood_is_captured_up_to_64_kib_per_generation() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, _log) = start(util::fault_config("stderr_flood", work.path()));
    let d = waymark
        .discover(Language::JavaScript, JS)
        .await
        .expect("the flood does not block the worker");
    assert!(d.scopes.iter().any(|s| s.name == "Calendar.addWindow"));
    waymark.shutdown().await; // reaps; stderr is read to its end
    let captures = waymark.stderr_captures();
    let c = captures
        .iter()
        .find(|c| c.generation == 1)
        .expect("capture");
    assert_eq!(c.bytes.len(), 64 * 1024);
    assert!(c.truncated);
    assert_eq!(c.total_bytes, 1024 * 1024);
}

#[tokio::test]
async fn a_killed_generation_leaves_its_stderr_and_signal_in_the_evidence_log() {
    use std::os::unix::fs::PermissionsExt;
    let work = tempfile::tempdir().expect("tempdir");
    let log_path = work.path().join("worker.observed.stderr.log");
    let mut config = util::fault_config("stderr_flood", work.path());
    config.stderr_log = Some(log_path.clone());
    let (waymark, log) = start(config);
    waymark
        .discover(Language::JavaScript, JS)
        .await
        .expect("the flood does not block the worker");
    let pid = waymark.status().pid.expect("pid");
    // A crash (as a V8 out-of-memory abort would be): the generation dies on its own.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill child");
    log.retirement(Duration::from_secs(5)).await;
    waymark.shutdown().await; // cleanup of the retired generation has finished
    let text = std::fs::read(&log_path).expect("the evidence log exists");
    // A launch line, the capture as it arrived (first 64 KiB), then the exit line.
    let mut expected = format!("=== generation 1 pid {pid} launched ===\n").into_bytes();
    expected.extend(std::iter::repeat_n(b'x', 64 * 1024));
    expected.extend_from_slice(
        format!(
            "\n=== generation 1 pid {pid} signal 9 · 1048576 bytes of stderr, first 65536 kept ===\n"
        )
        .as_bytes(),
    );
    assert!(
        text == expected,
        "{}",
        String::from_utf8_lossy(&text[..200.min(text.len())])
    );
    let mode = std::fs::metadata(&log_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn hang_past_the_active_timeout_is_a_domain_result_and_retires() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::fault_config("hang", work.path());
    config.active_timeout = Duration::from_millis(300); // product default 15 s
    let (waymark, log) = start(config);
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("pid");
    let started = std::time::Instant::now();
    let result = waymark.discover(Language::JavaScript, JS).await;
    assert!(
        matches!(result, Err(DiscoveryError::Domain(DomainFailure::ActiveTimeout { timeout }))
            if timeout == Duration::from_millis(300)),
        "{result:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    let ipc = log.named("ipc_read");
    assert_eq!(ipc.len(), 1);
    assert_eq!(ipc[0].outcome, patchdiff::telemetry::Outcome::Failed);
    assert_retired(&waymark, &log, "active_timeout", pid).await;
}

#[tokio::test]
async fn startup_past_the_readiness_ceiling_fails_with_startup_timeout() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::fault_config("no_ready", work.path());
    config.limits.readiness = Duration::from_millis(400); // product default 7 s
    let (waymark, log) = start(config);
    let err = waymark.prewarm().await.expect_err("never ready");
    assert_eq!(err.code, WorkerErrorCode::StartupTimeout, "{err}");
    let pid = log.named("worker_launch")[0].attrs["pid"]
        .as_u64()
        .expect("pid") as u32;
    assert_retired(&waymark, &log, "startup_timeout", pid).await;
}

#[tokio::test]
async fn rss_over_the_limit_kills_the_generation() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::fault_config("balloon", work.path());
    config.limits.rss_limit_bytes = 160 * 1024 * 1024; // product default 1 GiB
    let (waymark, log) = start(config);
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("pid");
    let result = waymark.discover(Language::JavaScript, JS).await;
    assert_eq!(
        worker_code(&result),
        Some(WorkerErrorCode::RssLimit),
        "{result:?}"
    );
    let breach = log
        .wait_for(Duration::from_secs(5), |e| {
            e.name == "worker_rss" && e.outcome == patchdiff::telemetry::Outcome::Failed
        })
        .await;
    assert!(breach.attrs["rss_bytes"].as_u64() > breach.attrs["limit_bytes"].as_u64());
    assert_retired(&waymark, &log, "rss_limit", pid).await;
}

#[tokio::test]
async fn ninth_waiting_request_is_refused_with_queue_full() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::fault_config("hang", work.path());
    config.limits.admission = Duration::from_secs(60); // keep the eight waiting
    let (waymark, log) = start(config);
    waymark.prewarm().await.expect("prewarm");
    let mut tasks = Vec::new();
    for _ in 0..9 {
        let w = waymark.clone();
        tasks.push(tokio::spawn(async move {
            w.discover(Language::Python, PY).await
        }));
    }
    log.wait_for(Duration::from_secs(5), |e| {
        e.name == "worker_queue_depth" && e.attrs["active"] == 1 && e.attrs["waiting"] == 8
    })
    .await;
    let status = waymark.status();
    assert_eq!((status.active, status.waiting), (1, 8));
    let tenth = waymark.discover(Language::Python, PY).await;
    assert_eq!(
        worker_code(&tenth),
        Some(WorkerErrorCode::QueueFull),
        "{tenth:?}"
    );
    waymark.shutdown().await;
    let mut cancelled = 0;
    for t in tasks {
        if worker_code(&t.await.expect("join")) == Some(WorkerErrorCode::Cancelled) {
            cancelled += 1;
        }
    }
    assert_eq!(
        cancelled, 9,
        "shutdown fails the active and the eight waiting requests"
    );
}

#[tokio::test]
async fn waiting_request_expires_at_the_admission_ceiling() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::fault_config("hang", work.path());
    config.limits.admission = Duration::from_millis(300); // product default 2 s
    let (waymark, log) = start(config);
    waymark.prewarm().await.expect("prewarm");
    let w = waymark.clone();
    let active = tokio::spawn(async move { w.discover(Language::Python, PY).await });
    log.wait_for(Duration::from_secs(5), |e| {
        e.name == "phase_active" || (e.name == "phase_readiness" && e.ids.contains_key("request"))
    })
    .await;
    let started = std::time::Instant::now();
    let second = waymark.discover(Language::Python, PY).await;
    assert_eq!(
        worker_code(&second),
        Some(WorkerErrorCode::QueueExpired),
        "{second:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    let admission = log.named("phase_admission");
    assert!(
        admission
            .iter()
            .any(|e| e.outcome == patchdiff::telemetry::Outcome::Failed)
    );
    waymark.shutdown().await;
    assert_eq!(
        worker_code(&active.await.expect("join")),
        Some(WorkerErrorCode::Cancelled)
    );
}

#[tokio::test]
async fn lock_holder_waits_at_most_250_ms_behind_a_busy_worker() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("hang", work.path()));
    waymark.prewarm().await.expect("prewarm");
    let w = waymark.clone();
    let _active = tokio::spawn(async move { w.discover(Language::Python, PY).await });
    log.wait_for(Duration::from_secs(5), |e| {
        e.name == "phase_readiness" && e.ids.contains_key("request")
    })
    .await;
    // Paused time: the wait is measured where it acts, to the timer wheel's millisecond, with
    // the spec figure written here (not `WaymarkLimits::default()`).
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let r = waymark.discover_holding_lock(Language::Python, PY).await;
    let waited = started.elapsed();
    assert_eq!(
        worker_code(&r),
        Some(WorkerErrorCode::QueueExpired),
        "{r:?}"
    );
    assert_ceiling(waited, Duration::from_millis(250));
    tokio::time::resume();
    assert_eq!(waymark.status().launches_total, 1);
    waymark.shutdown().await;
}

#[tokio::test]
async fn missing_worker_script_fails_to_spawn_without_retry() {
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::config(WaymarkMode::Resident, work.path());
    config.worker_script = Some(work.path().join("no-such-script.mjs"));
    let (waymark, _log) = start(config);
    let err = waymark.prewarm().await.expect_err("node exits");
    assert_eq!(err.code, WorkerErrorCode::Protocol, "{err}");
    assert!(
        err.message.contains("stderr"),
        "the child's own words are kept: {err}"
    );
    assert_eq!(waymark.status().launches_total, 1);
    waymark.shutdown().await;
}

/// Paused time lands on the ceiling, give or take the timer wheel's 1 ms granularity.
fn assert_ceiling(elapsed: Duration, ceiling: Duration) {
    assert!(
        elapsed >= ceiling && elapsed <= ceiling + Duration::from_millis(5),
        "elapsed {elapsed:?}, ceiling {ceiling:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Product-default ceilings on paused tokio time (W6). The child is started in real time; then
// time is paused and tokio auto-advances to the next timer whenever the runtime is idle, so the
// default ceilings are reached without waiting for them.

#[tokio::test]
async fn startup_readiness_ceiling_is_seven_seconds_on_paused_time() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("no_ready", work.path()));
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let err = waymark.prewarm().await.expect_err("never ready");
    assert_eq!(err.code, WorkerErrorCode::StartupTimeout, "{err}");
    assert_ceiling(started.elapsed(), Duration::from_secs(7));
    let readiness = log.named("phase_readiness");
    assert_eq!(readiness[0].attrs["ceiling_ms"], 7000);
    tokio::time::resume();
    waymark.shutdown().await;
}

#[tokio::test]
async fn active_timeout_default_is_fifteen_seconds_on_paused_time() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("hang", work.path()));
    waymark.prewarm().await.expect("prewarm in real time");
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let result = waymark.discover(Language::JavaScript, JS).await;
    assert!(
        matches!(result, Err(DiscoveryError::Domain(DomainFailure::ActiveTimeout { timeout }))
            if timeout == Duration::from_secs(15)),
        "{result:?}"
    );
    assert_ceiling(started.elapsed(), Duration::from_secs(15));
    let outer = log.named("phase_outer");
    assert_eq!(
        outer[0].attrs["ceiling_ms"], 28_000,
        "outer = active + 13 s"
    );
    tokio::time::resume();
    waymark.shutdown().await;
}

#[tokio::test]
async fn admission_ceiling_is_two_seconds_on_paused_time() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("hang", work.path()));
    waymark.prewarm().await.expect("prewarm in real time");
    let w = waymark.clone();
    let _active = tokio::spawn(async move { w.discover(Language::Python, PY).await });
    log.wait_for(Duration::from_secs(5), |e| {
        e.name == "phase_readiness" && e.ids.contains_key("request")
    })
    .await;
    tokio::time::pause();
    let started = tokio::time::Instant::now();
    let second = waymark.discover(Language::Python, PY).await;
    assert_eq!(
        worker_code(&second),
        Some(WorkerErrorCode::QueueExpired),
        "{second:?}"
    );
    assert_ceiling(started.elapsed(), Duration::from_secs(2));
    tokio::time::resume();
    waymark.shutdown().await;
}

#[tokio::test]
async fn dropped_discovery_retires_the_generation_as_cancelled() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, log) = start(util::fault_config("hang", work.path()));
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("pid");
    let w = waymark.clone();
    let request = tokio::spawn(async move { w.discover(Language::JavaScript, JS).await });
    log.wait_for(Duration::from_secs(5), |e| {
        e.name == "phase_readiness" && e.ids.contains_key("request")
    })
    .await;
    request.abort();
    let _ = request.await;
    assert_eq!(log.retirement(Duration::from_secs(5)).await, "cancelled");
    let total = log.named("discovery_total");
    assert_eq!(total.len(), 1);
    assert_eq!(total[0].outcome, patchdiff::telemetry::Outcome::Failed);
    assert_eq!(
        total[0].attrs["cancelled"], true,
        "T4: cancellation is a failed outcome"
    );
    assert_eq!(waymark.status().active, 0, "the active slot was released");
    util::wait_gone(pid, Duration::from_secs(5)).await;
    waymark.shutdown().await;
    assert!(util::roots(work.path()).is_empty());
}

#[tokio::test]
async fn an_unremovable_request_directory_is_the_cleanup_worker_error() {
    // W8: cleanup failures raise WAYMARK_WORKER_CLEANUP (the fault worker leaves a regular file
    // where the request directory was, so removing it fails).
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, _log) = start(util::fault_config("pin_request", work.path()));
    let r = waymark.discover(Language::JavaScript, JS).await;
    assert_eq!(worker_code(&r), Some(WorkerErrorCode::Cleanup), "{r:?}");
    let message = match &r {
        Err(DiscoveryError::Worker(e)) => e.message.clone(),
        _ => String::new(),
    };
    assert!(
        message.contains("cannot remove request directory"),
        "{message}"
    );
    assert_eq!(WorkerErrorCode::Cleanup.as_str(), "WAYMARK_WORKER_CLEANUP");
    waymark.shutdown().await;
    assert!(
        util::roots(work.path()).is_empty(),
        "shutdown still removes the generation root"
    );
}

#[tokio::test(start_paused = true)]
async fn the_outer_allowance_fires_when_the_phases_together_exceed_it() {
    // W6: the outer allowance (active + 13 s) bounds the whole discovery even when a phase's own
    // ceiling is longer (here readiness is lifted to 60 s and the worker never becomes ready).
    // Paused tokio time: the 14 s pass without waiting for them.
    let work = tempfile::tempdir().expect("tempdir");
    let mut config = util::fault_config("no_ready", work.path());
    config.limits.readiness = Duration::from_secs(60);
    config.active_timeout = Duration::from_secs(1);
    assert_eq!(config.outer_allowance(), Duration::from_secs(14));
    let (waymark, _log) = start(config);
    let started = tokio::time::Instant::now();
    let r = waymark.discover(Language::JavaScript, JS).await;
    assert_eq!(
        worker_code(&r),
        Some(WorkerErrorCode::OuterTimeout),
        "{r:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(14) && waited < Duration::from_secs(60),
        "{waited:?}"
    );
    waymark.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// W9 figures where they act: on the real spawned child and on the sampler's observed cadence.

#[tokio::test]
async fn the_spawned_worker_runs_with_old_space_capped_at_768_mib() {
    let work = tempfile::tempdir().expect("tempdir");
    let (waymark, _log) = start(util::config(WaymarkMode::Resident, work.path()));
    waymark.prewarm().await.expect("prewarm");
    let pid = waymark.status().pid.expect("pid");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("the child's argv");
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(
        argv.iter()
            .filter(|a| a.starts_with("--max-old-space-size"))
            .collect::<Vec<_>>(),
        vec!["--max-old-space-size=768"],
        "the real child's argv: {argv:?}"
    );
    waymark.shutdown().await;
}

#[tokio::test]
async fn rss_is_sampled_every_100_ms_on_paused_time() {
    let work = tempfile::tempdir().expect("tempdir");
    let events = work.path().join("perf.jsonl");
    let memory = work.path().join("perf.jsonl.memory.jsonl");
    let (recorder, status) = patchdiff::telemetry::Recorder::configure(Some(&events), Some("1"));
    assert_eq!(status.memory_path.as_deref(), Some(memory.as_path()));
    let waymark = Waymark::new(util::config(WaymarkMode::Resident, work.path()), recorder);
    waymark.prewarm().await.expect("prewarm in real time");
    let samples = || {
        std::fs::read_to_string(&memory)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    // On paused time the sampler's ticks are the only timers due within the next second, and
    // tokio advances to each of them in turn: one second of paused time holds ten samples at
    // the spec's 100 ms (give or take one at the window's edges), and none at 3 s.
    tokio::time::pause();
    let before = samples();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let taken = samples() - before;
    tokio::time::resume();
    assert!(
        (9..=11).contains(&taken),
        "{taken} RSS samples in one second of paused time; W9 says every 100 ms"
    );
    waymark.shutdown().await;
}

//! The Waymark supervisor (SPEC W1–W11): owns the Node child(ren), admits requests through the
//! FIFO queue, enforces the phase ceilings, matches generation and request ids, writes and
//! removes owned request files, samples RSS, retires generations and reports status and
//! lifecycle events (T5).
//!
//! Invariants:
//! - at most one request is active (W5), so at most one frame is outstanding per generation;
//! - any protocol fault, death, RSS breach or active timeout retires the generation (kill, reap,
//!   remove its root) and the failed discovery is never retried or switched to the other mode
//!   (W4);
//! - a generation root is removed only after its child has been killed or has exited (W11).
//!
//! Lifecycle events (T4, T5), recorded through [`Recorder`]; `ids` carry `generation` and/or
//! `request` where known:
//!
//! | event | kind | ids | attrs |
//! |---|---|---|---|
//! | `worker_launch` | point | generation | pid, mode, launches_in_window, script |
//! | `worker_launch_failed` | point, failed, the moment a launch fails | generation | code, error, script |
//! | `worker_ready` | spawn → ready frame | generation | pid, warmup_ms, mode, engine |
//! | `worker_queue_depth` | point, on every change | – | active (0/1), waiting (0..8) |
//! | `phase_admission` | span | request | ceiling_ms, code (on failure) |
//! | `phase_readiness` | span | request, generation | ceiling_ms (prewarm: prewarm=true) |
//! | `phase_active` | span | request, generation | ceiling_ms |
//! | `phase_outer` | span | request | ceiling_ms |
//! | `ipc_read` | one complete response wait | request, generation | code / timeout_ms / cancelled on failure |
//! | `discovery_total` | span | request | language, bytes, mode, lock_holder, scopes, parse_ms, code |
//! | `worker_retired` | point | generation | reason, requests, pid, mode, detail |
//! | `worker_rss` | point, every 10th 100 ms sample and on breach (failed) | generation | rss_bytes, limit_bytes |
//! | `worker_stale_roots` | point, when the sweep found roots | – | removed, kept, kept_roots |
//! | `worker_cleanup` | point, failed root removal | generation | code, error |
//!
//! Every RSS sample also goes to the memory file via `Recorder::record_memory` (T2). A span
//! dropped unfinished (cancellation) is recorded as failed with `cancelled: true`.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use super::codec::{FrameCodec, FrameError, MAX_REQUEST_FRAME, MAX_RESPONSE_FRAME};
use super::config::{WaymarkConfig, WaymarkLimits, WaymarkMode};
use super::error::{DiscoveryError, DomainFailure, WorkerError, WorkerErrorCode};
use super::process::{ProcessIdentity, RssSampler, StderrBuffer, capture_stderr, kill_group};
use super::protocol::{DiscoverFrame, ReadyFrame, ResultFrame, SupervisorMessage, WorkerMessage};
use super::queue::{AdmissionError, AdmissionQueue, QueueDepth};
use super::stale::{self, Manifest, StaleReport};
use super::{Discovery, Language, ScopeQuery};
use crate::telemetry::{EventKind, Outcome, PerfEvent, Recorder, Span, attr};

type WorkerCodec = FrameCodec<WorkerMessage, SupervisorMessage>;

/// Why a generation was retired (W4, W9, W10, W11), as status and `worker_retired` events
/// spell it ([`RetirementReason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetirementReason {
    WorkerExited,
    InvalidFraming,
    UnsolicitedData,
    WrongGeneration,
    WrongRequestId,
    PipeFailed,
    RssLimit,
    ActiveTimeout,
    StartupTimeout,
    RequestLimit,
    AgeLimit,
    Cancelled,
    Shutdown,
    OneshotComplete,
}

impl RetirementReason {
    /// The wire spelling, e.g. `rss_limit`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::WorkerExited => "worker_exited",
            Self::InvalidFraming => "invalid_framing",
            Self::UnsolicitedData => "unsolicited_data",
            Self::WrongGeneration => "wrong_generation",
            Self::WrongRequestId => "wrong_request_id",
            Self::PipeFailed => "pipe_failed",
            Self::RssLimit => "rss_limit",
            Self::ActiveTimeout => "active_timeout",
            Self::StartupTimeout => "startup_timeout",
            Self::RequestLimit => "request_limit",
            Self::AgeLimit => "age_limit",
            Self::Cancelled => "cancelled",
            Self::Shutdown => "shutdown",
            Self::OneshotComplete => "oneshot_complete",
        }
    }

    /// W8: the worker error a request caught by this retirement fails with.
    pub const fn error_code(self) -> WorkerErrorCode {
        match self {
            Self::RssLimit => WorkerErrorCode::RssLimit,
            Self::Shutdown | Self::Cancelled => WorkerErrorCode::Cancelled,
            Self::StartupTimeout => WorkerErrorCode::StartupTimeout,
            // A generation that died, spoke out of turn or was retired by policy under a
            // request: the request's answer is lost, a protocol failure for the caller.
            Self::WorkerExited => WorkerErrorCode::Protocol,
            Self::InvalidFraming => WorkerErrorCode::Protocol,
            Self::UnsolicitedData => WorkerErrorCode::Protocol,
            Self::WrongGeneration => WorkerErrorCode::Protocol,
            Self::WrongRequestId => WorkerErrorCode::Protocol,
            Self::PipeFailed => WorkerErrorCode::Protocol,
            Self::ActiveTimeout => WorkerErrorCode::Protocol,
            Self::RequestLimit => WorkerErrorCode::Protocol,
            Self::AgeLimit => WorkerErrorCode::Protocol,
            Self::OneshotComplete => WorkerErrorCode::Protocol,
        }
    }
}

impl std::fmt::Display for RetirementReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The retirement reasons by their historical constant names.
pub mod reason {
    use super::RetirementReason;
    pub const WORKER_EXITED: RetirementReason = RetirementReason::WorkerExited;
    pub const INVALID_FRAMING: RetirementReason = RetirementReason::InvalidFraming;
    pub const UNSOLICITED_DATA: RetirementReason = RetirementReason::UnsolicitedData;
    pub const WRONG_GENERATION: RetirementReason = RetirementReason::WrongGeneration;
    pub const WRONG_REQUEST_ID: RetirementReason = RetirementReason::WrongRequestId;
    pub const PIPE_FAILED: RetirementReason = RetirementReason::PipeFailed;
    pub const RSS_LIMIT: RetirementReason = RetirementReason::RssLimit;
    pub const ACTIVE_TIMEOUT: RetirementReason = RetirementReason::ActiveTimeout;
    pub const STARTUP_TIMEOUT: RetirementReason = RetirementReason::StartupTimeout;
    pub const REQUEST_LIMIT: RetirementReason = RetirementReason::RequestLimit;
    pub const AGE_LIMIT: RetirementReason = RetirementReason::AgeLimit;
    pub const CANCELLED: RetirementReason = RetirementReason::Cancelled;
    pub const SHUTDOWN: RetirementReason = RetirementReason::Shutdown;
    pub const ONESHOT_COMPLETE: RetirementReason = RetirementReason::OneshotComplete;
}

/// How many retirements and stderr captures status keeps (most recent).
const HISTORY: usize = 32;
const STDERR_HISTORY: usize = 8;
/// Every Nth RSS sample (N × 100 ms) becomes a `worker_rss` event; all go to the memory file.
const RSS_EVENT_EVERY: u64 = 10;
/// Bound on reaping a killed child (W11; part of the outer allowance's cleanup).
const REAP_BOUND: Duration = Duration::from_secs(3);

/// One generation retirement (W4, W10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retirement {
    pub generation: u64,
    pub reason: String,
    /// Requests the generation answered.
    pub requests: u64,
}

/// W3: the captured stderr of one generation (first 64 KiB).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StderrCapture {
    pub generation: u64,
    pub bytes: Vec<u8>,
    /// Everything the child wrote, in bytes (may exceed `bytes.len()`).
    pub total_bytes: u64,
    pub truncated: bool,
}

/// A snapshot of the worker for status endpoints and the console (T5, U2).
#[derive(Debug, Clone, Serialize)]
pub struct WorkerStatus {
    pub mode: WaymarkMode,
    /// The current generation id (resident), or the latest one started (oneshot).
    pub generation: Option<u64>,
    pub pid: Option<u32>,
    /// True when a resident generation is ready to take a request.
    pub ready: bool,
    /// Age of the current generation in milliseconds (policy clock).
    pub age_ms: Option<u64>,
    /// Requests answered by the current generation (W10 limit: `max_requests`).
    pub requests_served: u64,
    /// Requests answered since startup, all generations.
    pub requests_served_total: u64,
    /// W5: 0 or 1.
    pub active: usize,
    /// W5: 0..=8.
    pub waiting: usize,
    pub max_waiting: usize,
    /// W10: resident launches within the rolling window (limit `max_launches`).
    pub launches_in_last_minute: usize,
    pub max_launches: usize,
    /// Child processes started since startup (both modes).
    pub launches_total: u64,
    /// The most recent launch failed before a child ran (`worker_launch_failed`); cleared by
    /// the next successful launch.
    pub last_launch_failed: bool,
    /// Most recent retirements, oldest first (at most 32).
    pub retirements: Vec<Retirement>,
    /// P1: the resolved Node executable.
    pub node_binary: PathBuf,
    /// W9: latest RSS sample of the current child, bytes.
    pub rss_bytes: Option<u64>,
    pub rss_limit_bytes: u64,
    pub active_timeout_ms: u64,
    /// W12: the startup sweep's report, once it ran.
    pub stale_roots: Option<StaleReport>,
    /// The ready generation's engine (`web-tree-sitter@0.25.10`).
    pub engine: Option<String>,
    pub shut_down: bool,
}

#[derive(Debug, Clone)]
enum ReadyState {
    Starting,
    Ready(ReadyFrame),
    Failed(WorkerError),
}

struct Pending {
    request: u64,
    tx: oneshot::Sender<Result<ResultFrame, WorkerError>>,
}

struct Generation {
    id: u64,
    mode: WaymarkMode,
    pid: u32,
    root: PathBuf,
    /// Policy-clock start (W10 age).
    started: Instant,
    spawned_wall: std::time::Instant,
    ready: watch::Sender<ReadyState>,
    writer: tokio::sync::Mutex<Option<FramedWrite<ChildStdin, WorkerCodec>>>,
    pending: Mutex<Option<Pending>>,
    served: AtomicU64,
    retired: Mutex<Option<RetirementReason>>,
    child: Mutex<Option<Child>>,
    stderr: Arc<Mutex<StderrBuffer>>,
    stderr_done: watch::Sender<bool>,
    cancel: CancellationToken,
    cleaned: watch::Sender<bool>,
    last_rss: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Generation {
    fn is_retired(&self) -> bool {
        lock(&self.retired).is_some()
    }

    fn is_ready(&self) -> bool {
        !self.is_retired() && matches!(*self.ready.borrow(), ReadyState::Ready(_))
    }

    fn stderr_capture(&self) -> StderrCapture {
        let b = lock(&self.stderr);
        StderrCapture {
            generation: self.id,
            bytes: b.bytes.clone(),
            total_bytes: b.total_bytes,
            truncated: b.truncated,
        }
    }

    fn stderr_tail(&self, max: usize) -> String {
        let b = lock(&self.stderr);
        let start = b.bytes.len().saturating_sub(max);
        String::from_utf8_lossy(&b.bytes[start..]).trim().to_owned()
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // Last-resort cleanup when the owner vanished without shutdown (W11).
        self.cancel.cancel();
        if let Some(child) = self.child.get_mut().map(Option::take).unwrap_or(None) {
            let _ = kill_group(self.pid);
            drop(child); // kill_on_drop; tokio reaps orphans
        }
        if !*self.cleaned.borrow() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

struct State {
    shut_down: bool,
    current: Option<Arc<Generation>>,
    live: HashMap<u64, Arc<Generation>>,
    latest: Option<(u64, u32)>,
    next_generation: u64,
    launches: VecDeque<Instant>,
    launches_total: u64,
    last_launch_failed: bool,
    retirements: VecDeque<Retirement>,
    requests_served_total: u64,
    stderr_history: VecDeque<StderrCapture>,
    stale: Option<StaleReport>,
}

struct Inner {
    config: WaymarkConfig,
    recorder: Recorder,
    queue: AdmissionQueue,
    state: Mutex<State>,
    next_request: AtomicU64,
    own: Option<ProcessIdentity>,
    this: Weak<Inner>,
    /// Held only while deciding which resident generation to wait for (and launching it when
    /// there is none), never across the readiness wait: concurrent callers share one launch
    ///.
    launching: tokio::sync::Mutex<()>,
}

/// The Waymark worker handle (W1–W13). Cheap to clone (an `Arc` inside); `Send + Sync`.
#[derive(Clone)]
pub struct Waymark {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Waymark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waymark")
            .field("mode", &self.inner.config.mode)
            .finish_non_exhaustive()
    }
}

impl Waymark {
    /// Builds the supervisor. Starts nothing: resident mode launches on [`Waymark::prewarm`] or
    /// the first discovery (W13: a health-only owner never starts a child).
    pub fn new(config: WaymarkConfig, recorder: crate::telemetry::Recorder) -> Self {
        let depth_recorder = recorder.clone();
        let queue = AdmissionQueue::new(
            config.limits.max_waiting,
            Arc::new(move |d: QueueDepth| {
                depth_recorder.record(
                    PerfEvent::point(EventKind::WorkerQueueDepth.as_str())
                        .attr(attr::ACTIVE, d.active)
                        .attr(attr::WAITING, d.waiting),
                );
            }),
        );
        let inner = Arc::new_cyclic(|this| Inner {
            config,
            recorder,
            queue,
            state: Mutex::new(State {
                shut_down: false,
                current: None,
                live: HashMap::new(),
                latest: None,
                next_generation: 1,
                launches: VecDeque::new(),
                launches_total: 0,
                last_launch_failed: false,
                retirements: VecDeque::new(),
                requests_served_total: 0,
                stderr_history: VecDeque::new(),
                stale: None,
            }),
            next_request: AtomicU64::new(1),
            own: ProcessIdentity::current(),
            this: this.clone(),
            launching: tokio::sync::Mutex::new(()),
        });
        Self { inner }
    }

    /// The configuration in force.
    pub fn config(&self) -> &WaymarkConfig {
        &self.inner.config
    }

    /// W13: resident mode starts the child and waits until it is ready (readiness 7 s, W6).
    /// The wait holds no queue descriptor, so any number of callers (a burst of
    /// submissions making sure a worker is ready before taking their locks) wait on the same
    /// starting generation and none is refused `QUEUE_FULL`. Oneshot mode only runs the
    /// stale-root sweep. Errors: `RESTART_LIMIT`, `SPAWN`, `STARTUP_TIMEOUT`, `PROTOCOL` (died
    /// before ready), `CANCELLED` (shut down).
    pub async fn prewarm(&self) -> Result<(), WorkerError> {
        let inner = &self.inner;
        inner.check_open()?;
        inner.sweep_once();
        if inner.config.mode == WaymarkMode::Oneshot {
            return Ok(());
        }
        let mut span = inner.span(EventKind::PhaseReadiness.as_str(), None);
        span.attr(attr::CEILING_MS, ms(inner.config.limits.readiness))
            .attr(attr::PREWARM, true);
        let result = inner.ensure_resident().await;
        span.finish(outcome(result.is_ok()));
        result.map(|_| ())
    }

    /// Discovers the structural scopes of `source` (W1–W6): admission (FIFO, 2 s), readiness
    /// (launch if needed, 7 s), active (configured, default 15 s), all within the outer allowance
    /// (active + 13 s). Worker errors carry `WAYMARK_WORKER_*` codes; a parse failure, output
    /// over 2 MiB or active timeout is a [`DomainFailure`]. Never retried, never switched to the
    /// other mode (W4).
    pub async fn discover(
        &self,
        language: Language,
        source: &str,
    ) -> Result<Discovery, DiscoveryError> {
        self.inner
            .discover(RequestParts::new(language, source, None, None))
            .await
    }

    /// [`Waymark::discover`] answering one question (a named scope, the scopes covering byte
    /// ranges, or only whether it parses), so the result stays small whatever the file: the
    /// 2 MiB output cap (W3) applies to the answer, not to the file's whole scope list.
    pub async fn discover_query(
        &self,
        language: Language,
        source: &str,
        query: &ScopeQuery,
    ) -> Result<Discovery, DiscoveryError> {
        self.inner
            .discover(RequestParts::new(language, source, Some(query), None))
            .await
    }

    /// W7: for a caller holding its target's lock. Waits at most 250 ms, in the same FIFO, for an
    /// already-ready resident worker and never starts a child: with none ready (always, in
    /// oneshot mode) it fails with `WAYMARK_WORKER_NOT_READY`; not admitted in time:
    /// `WAYMARK_WORKER_QUEUE_EXPIRED`.
    pub async fn discover_holding_lock(
        &self,
        language: Language,
        source: &str,
    ) -> Result<Discovery, DiscoveryError> {
        let lock_wait = Some(self.inner.config.limits.lock_wait);
        self.inner
            .discover(RequestParts::new(language, source, None, lock_wait))
            .await
    }

    /// [`Waymark::discover_holding_lock`] answering one question (see
    /// [`Waymark::discover_query`]); submission validation asks only [`ScopeQuery::Summary`].
    pub async fn discover_holding_lock_query(
        &self,
        language: Language,
        source: &str,
        query: &ScopeQuery,
    ) -> Result<Discovery, DiscoveryError> {
        let lock_wait = Some(self.inner.config.limits.lock_wait);
        self.inner
            .discover(RequestParts::new(language, source, Some(query), lock_wait))
            .await
    }

    /// Best-effort discovery for a caller that must not wait (a read reporting whether content
    /// parses): like [`Waymark::discover_holding_lock_query`] it never starts a child, but it
    /// does not wait at all — with the worker busy, not ready or absent it fails at once
    /// (`WAYMARK_WORKER_QUEUE_EXPIRED` / `WAYMARK_WORKER_NOT_READY`).
    pub async fn discover_if_idle(
        &self,
        language: Language,
        source: &str,
        query: &ScopeQuery,
    ) -> Result<Discovery, DiscoveryError> {
        // Busy or not ready: answer at once, without recording a failed admission or discovery
        // (this is not a failure of anything, only a question not worth waiting for).
        let depth = self.inner.queue.depth();
        if depth.active > 0 || depth.waiting > 0 || !self.inner.current_ready() {
            return Err(WorkerError::new(
                WorkerErrorCode::QueueExpired,
                "the Waymark worker is busy or not ready; not waiting for it",
            )
            .into());
        }
        self.inner
            .discover(RequestParts::new(
                language,
                source,
                Some(query),
                Some(Duration::ZERO),
            ))
            .await
    }

    /// A snapshot for status endpoints and the console (starts nothing).
    pub fn status(&self) -> WorkerStatus {
        self.inner.status()
    }

    /// W3: stderr captured from live and recent generations (each capped at 64 KiB), oldest
    /// first.
    pub fn stderr_captures(&self) -> Vec<StderrCapture> {
        let st = lock(&self.inner.state);
        let mut out: Vec<StderrCapture> = st.stderr_history.iter().cloned().collect();
        let mut live: Vec<_> = st.live.values().map(|g| g.stderr_capture()).collect();
        live.sort_by_key(|c| c.generation);
        for c in live {
            if !out.iter().any(|o| o.generation == c.generation) {
                out.push(c);
            }
        }
        out
    }

    /// W12: runs the stale-root sweep now (it also runs once before the first launch).
    pub fn sweep_stale_roots(&self) -> StaleReport {
        self.inner.sweep()
    }

    /// W11: stops admitting, fails waiting requests (`CANCELLED`), retires every generation
    /// (stdin closed, up to 2 s to exit, then its process group is killed), reaps the children
    /// and removes their roots. Idempotent.
    pub async fn shutdown(&self) {
        let gens = self.inner.begin_shutdown();
        for g in &gens {
            self.inner
                .retire(g, reason::SHUTDOWN, "the supervisor is shutting down", true);
        }
        let bound = self.inner.config.limits.graceful_exit + REAP_BOUND;
        for g in gens {
            let mut cleaned = g.cleaned.subscribe();
            let _ = tokio::time::timeout(bound, cleaned.wait_for(|c| *c)).await;
        }
    }

    /// W11: synchronous best-effort shutdown for exit paths (atexit, guard drop): kills every
    /// child's process group and removes owned roots without waiting to reap.
    pub fn shutdown_now(&self) {
        let gens = self.inner.begin_shutdown();
        for g in gens {
            self.inner.retire(
                &g,
                reason::SHUTDOWN,
                "the supervisor is shutting down",
                false,
            );
            // Only a child not yet reaped keeps its pid (and group id) from being reused.
            if let Some(child) = lock(&g.child).take() {
                let _ = kill_group(g.pid);
                drop(child);
            }
            let _ = std::fs::remove_dir_all(&g.root);
            g.cleaned.send_replace(true);
            lock(&self.inner.state).live.remove(&g.id);
        }
    }
}

/// The frame codec on the worker's pipes (W3 frame bounds).
fn worker_codec() -> WorkerCodec {
    WorkerCodec::new(MAX_RESPONSE_FRAME, MAX_REQUEST_FRAME)
}

/// W10: admits a resident launch at `now` if fewer than `limits.max_launches` launches
/// happened in the rolling `limits.launch_window` before it (older entries are pruned from
/// `launches`; an admitted launch is appended). Refused: `RESTART_LIMIT`, saying how many
/// launches, the window and when the next launch is allowed (ms).
fn admit_in_window(
    launches: &mut VecDeque<Instant>,
    now: Instant,
    limits: &WaymarkLimits,
) -> Result<(), WorkerError> {
    while launches
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= limits.launch_window)
    {
        launches.pop_front();
    }
    if launches.len() >= limits.max_launches {
        let oldest = launches.front().copied().unwrap_or(now);
        let wait = limits
            .launch_window
            .saturating_sub(now.saturating_duration_since(oldest));
        return Err(WorkerError::new(
            WorkerErrorCode::RestartLimit,
            format!(
                "{} launches in the last {} s (W10 limit {}); next launch allowed in {} ms",
                launches.len(),
                limits.launch_window.as_secs(),
                limits.max_launches,
                wait.as_millis()
            ),
        ));
    }
    launches.push_back(now);
    Ok(())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn outcome(ok: bool) -> Outcome {
    if ok { Outcome::Ok } else { Outcome::Failed }
}

fn error_for_reason(reason: RetirementReason, generation: u64, detail: &str) -> WorkerError {
    WorkerError::new(
        reason.error_code(),
        format!("worker generation {generation} retired ({reason}): {detail}"),
    )
}

/// What one discovery asks, as it passes from the public entry points down to the frame:
/// the language, the source (UTF-8), the question (`None`: every scope) and, for a caller
/// holding its target's lock, how long admission may wait (W7; it then never starts a child).
#[derive(Clone, Copy)]
struct RequestParts<'a> {
    language: Language,
    source: &'a str,
    query: Option<&'a ScopeQuery>,
    lock_wait: Option<Duration>,
}

impl<'a> RequestParts<'a> {
    fn new(
        language: Language,
        source: &'a str,
        query: Option<&'a ScopeQuery>,
        lock_wait: Option<Duration>,
    ) -> Self {
        RequestParts {
            language,
            source,
            query,
            lock_wait,
        }
    }
}

/// Retires a generation if a request future is dropped mid-flight (cancellation, W4/T4).
struct RequestGuard {
    inner: Arc<Inner>,
    worker: Arc<Generation>,
    armed: bool,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        if self.armed {
            self.inner.retire(
                &self.worker,
                reason::CANCELLED,
                "the discovery was cancelled mid-request",
                false,
            );
        }
    }
}

/// W3: one request's directory under its generation root. Removed on drop (errors ignored:
/// the generation root's cleanup catches what is left) or by [`RequestDir::remove`], which
/// reports a failure.
struct RequestDir(Option<PathBuf>);

impl RequestDir {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    /// Removes the directory now; a failure names it.
    fn remove(mut self) -> Result<(), (PathBuf, std::io::Error)> {
        match self.0.take() {
            Some(path) => std::fs::remove_dir_all(&path).map_err(|e| (path, e)),
            None => Ok(()),
        }
    }
}

impl Drop for RequestDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// W3: after admission, the source goes into an owned request file. The directory is created
/// non-recursively: a root removed by a concurrent retirement is not recreated. The worker
/// reads the file only after the frame is sent, so a plain exclusive create suffices (no
/// rename). Small sources are written inline: a thread hop costs more than the write (the
/// resident overhead over parse time is the bench's target figure). Returns the byte count and
/// SHA-256 the frame carries.
async fn write_request_file(
    worker: &Generation,
    dir: &Path,
    source: &str,
) -> Result<(u64, String), DiscoveryError> {
    fn write_request(file_dir: &Path, source: &[u8]) -> std::io::Result<(u64, String)> {
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(file_dir)?;
        stale::write_private_new(&file_dir.join("source"), source)?;
        Ok((source.len() as u64, hex::encode(Sha256::digest(source))))
    }
    const INLINE_WRITE_BYTES: usize = 64 * 1024;
    let written = if source.len() <= INLINE_WRITE_BYTES {
        Ok(write_request(dir, source.as_bytes()))
    } else {
        let owned = source.as_bytes().to_vec();
        let file_dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || write_request(&file_dir, &owned)).await
    };
    match written {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            if let Some(why) = *lock(&worker.retired) {
                return Err(error_for_reason(why, worker.id, "retired during the request").into());
            }
            Err(WorkerError::new(
                WorkerErrorCode::Cleanup,
                format!("cannot write the request file in {}: {e}", dir.display()),
            )
            .into())
        }
        Err(e) => Err(WorkerError::new(
            WorkerErrorCode::Cancelled,
            format!("request file writer stopped: {e}"),
        )
        .into()),
    }
}

impl Inner {
    fn arc(&self) -> Option<Arc<Inner>> {
        self.this.upgrade()
    }

    fn span(&self, name: &str, request: Option<u64>) -> Span {
        let mut s = self.recorder.span(name);
        if let Some(r) = request {
            s.id(attr::REQUEST, r);
        }
        s
    }

    fn check_open(&self) -> Result<(), WorkerError> {
        if lock(&self.state).shut_down {
            return Err(WorkerError::new(
                WorkerErrorCode::Cancelled,
                "the Waymark worker has been shut down",
            ));
        }
        Ok(())
    }

    fn begin_shutdown(&self) -> Vec<Arc<Generation>> {
        let gens: Vec<_> = {
            let mut st = lock(&self.state);
            st.shut_down = true;
            st.live.values().cloned().collect()
        };
        self.queue.close();
        gens
    }

    fn sweep(&self) -> StaleReport {
        let report = stale::sweep(&self.config.work_root, self.own);
        if !report.removed.is_empty() || !report.kept.is_empty() {
            self.recorder.record(
                PerfEvent::point(EventKind::WorkerStaleRoots.as_str())
                    .outcome(outcome(report.kept.is_empty()))
                    .attr(attr::REMOVED, report.removed.len())
                    .attr(attr::KEPT, report.kept.len())
                    .attr(
                        "kept_roots",
                        serde_json::to_value(&report.kept).unwrap_or(Value::Null),
                    ),
            );
        }
        lock(&self.state).stale = Some(report.clone());
        report
    }

    fn sweep_once(&self) {
        if lock(&self.state).stale.is_none() {
            self.sweep();
        }
    }

    /// Admission (W5–W7), recorded as `phase_admission` for `request`; `after_startup`: the
    /// caller waited for a starting worker and enters through the queue's start-up backlog
    /// ([`AdmissionQueue::admit_after_startup`], never `QUEUE_FULL`).
    async fn admit(
        &self,
        ceiling: Duration,
        request: Option<u64>,
        after_startup: bool,
    ) -> Result<super::queue::Permit, WorkerError> {
        let mut span = self.span(EventKind::PhaseAdmission.as_str(), request);
        span.attr(attr::CEILING_MS, ms(ceiling));
        let result = if after_startup {
            self.queue.admit_after_startup(ceiling).await
        } else {
            self.queue.admit(ceiling).await
        };
        let mapped = result.map_err(|e| match e {
            AdmissionError::Full { waiting } => WorkerError::new(
                WorkerErrorCode::QueueFull,
                format!("{waiting} requests are already waiting (W5 limit); retry later"),
            ),
            AdmissionError::Expired { ceiling } => WorkerError::new(
                WorkerErrorCode::QueueExpired,
                format!(
                    "not admitted within {} ms (W6/W7); the worker is busy",
                    ceiling.as_millis()
                ),
            ),
            AdmissionError::Closed => WorkerError::new(
                WorkerErrorCode::Cancelled,
                "the Waymark worker is shutting down",
            ),
        });
        if let Err(e) = &mapped {
            span.attr(attr::CODE, e.code.as_str());
        }
        span.finish(outcome(mapped.is_ok()));
        mapped
    }

    fn status(&self) -> WorkerStatus {
        let now = self.config.clock.now();
        let depth = self.queue.depth();
        let st = lock(&self.state);
        let window = self.config.limits.launch_window;
        let launches = st
            .launches
            .iter()
            .filter(|t| now.saturating_duration_since(**t) < window)
            .count();
        let engine = st.current.as_ref().and_then(|g| match &*g.ready.borrow() {
            ReadyState::Ready(r) => Some(r.engine.clone()),
            _ => None,
        });
        let (generation, pid, ready, age_ms, served, rss) = match &st.current {
            Some(g) => (
                Some(g.id),
                Some(g.pid),
                g.is_ready(),
                Some(ms(now.saturating_duration_since(g.started))),
                g.served.load(Ordering::SeqCst),
                Some(g.last_rss.load(Ordering::SeqCst)).filter(|r| *r > 0),
            ),
            None => (st.latest.map(|(g, _)| g), None, false, None, 0, None),
        };
        WorkerStatus {
            mode: self.config.mode,
            generation,
            pid,
            ready,
            age_ms,
            requests_served: served,
            requests_served_total: st.requests_served_total,
            active: depth.active,
            waiting: depth.waiting,
            max_waiting: self.config.limits.max_waiting,
            launches_in_last_minute: launches,
            max_launches: self.config.limits.max_launches,
            launches_total: st.launches_total,
            last_launch_failed: st.last_launch_failed,
            retirements: st.retirements.iter().cloned().collect(),
            node_binary: self.config.node_binary.clone(),
            rss_bytes: rss,
            rss_limit_bytes: self.config.limits.rss_limit_bytes,
            active_timeout_ms: ms(self.config.active_timeout),
            stale_roots: st.stale.clone(),
            engine,
            shut_down: st.shut_down,
        }
    }

    // -----------------------------------------------------------------------------------------
    // Discovery

    async fn discover(&self, parts: RequestParts<'_>) -> Result<Discovery, DiscoveryError> {
        let request = self.next_request.fetch_add(1, Ordering::SeqCst);
        let mut total = self.span(EventKind::DiscoveryTotal.as_str(), Some(request));
        total
            .attr(attr::LANGUAGE, parts.language.as_str())
            .attr(attr::BYTES, parts.source.len())
            .attr(attr::MODE, self.config.mode.as_str())
            .attr(attr::LOCK_HOLDER, parts.lock_wait.is_some());
        let outer = self.config.outer_allowance();
        let mut outer_span = self.span(EventKind::PhaseOuter.as_str(), Some(request));
        outer_span.attr(attr::CEILING_MS, ms(outer));
        let result = match tokio::time::timeout(outer, self.discover_phases(request, parts)).await {
            Ok(r) => r,
            Err(_) => Err(DiscoveryError::Worker(WorkerError::new(
                WorkerErrorCode::OuterTimeout,
                format!(
                    "discovery exceeded the outer allowance of {} ms (W6)",
                    outer.as_millis()
                ),
            ))),
        };
        outer_span.finish(outcome(result.is_ok()));
        match &result {
            Ok(d) => {
                total
                    .attr(attr::SCOPES, d.scopes.len())
                    .attr(attr::PARSE_MS, d.parse_ms);
            }
            Err(DiscoveryError::Worker(e)) => {
                total.attr(attr::CODE, e.code.as_str());
            }
            Err(DiscoveryError::Domain(d)) => {
                total.attr(attr::CODE, d.code());
            }
        }
        total.finish(outcome(result.is_ok()));
        result
    }

    async fn discover_phases(
        &self,
        request: u64,
        parts: RequestParts<'_>,
    ) -> Result<Discovery, DiscoveryError> {
        let lock_holder = parts.lock_wait.is_some();
        self.check_open()?;
        let not_ready = || {
            WorkerError::new(
                WorkerErrorCode::NotReady,
                "no ready Waymark worker; a caller holding a target lock never starts one (W7): \
                 discover before taking the lock, or prewarm the worker",
            )
        };
        if lock_holder && !self.current_ready() {
            return Err(not_ready().into());
        }
        let ceiling = parts.lock_wait.unwrap_or(self.config.limits.admission);
        let mut readiness = self.span(EventKind::PhaseReadiness.as_str(), Some(request));
        readiness.attr(attr::CEILING_MS, ms(self.config.limits.readiness));
        // A caller arriving while the resident worker starts waits on its
        // readiness (W6, 7 s) holding no queue descriptor, then enters the FIFO through the
        // start-up backlog, so a burst during start-up waits instead of being refused.
        let startup =
            !lock_holder && self.config.mode == WaymarkMode::Resident && !self.current_ready();
        if startup && let Err(e) = self.ensure_resident().await {
            readiness.finish(Outcome::Failed);
            return Err(e.into());
        }
        let permit = self.admit(ceiling, Some(request), startup).await;
        let permit = match permit {
            Ok(p) => p,
            Err(e) => {
                readiness.finish(Outcome::Failed);
                return Err(e.into());
            }
        };
        let ready = if lock_holder {
            lock(&self.state)
                .current
                .clone()
                .filter(|g| g.is_ready())
                .ok_or_else(not_ready)
        } else {
            match self.config.mode {
                WaymarkMode::Resident => self.ensure_resident().await,
                WaymarkMode::Oneshot => self.start_oneshot(parts.language).await,
            }
        };
        if let Ok(g) = &ready {
            readiness.id(attr::GENERATION, g.id);
        }
        readiness.finish(outcome(ready.is_ok()));
        let worker = ready?;

        let mut active = self.span(EventKind::PhaseActive.as_str(), Some(request));
        active
            .id(attr::GENERATION, worker.id)
            .attr(attr::CEILING_MS, ms(self.config.active_timeout));
        let result = self.run_request(&worker, request, parts).await;
        active.finish(outcome(result.is_ok()));
        if worker.mode == WaymarkMode::Oneshot {
            self.retire(
                &worker,
                reason::ONESHOT_COMPLETE,
                "one-shot discovery done",
                true,
            );
        }
        drop(permit);
        result
    }

    fn current_ready(&self) -> bool {
        lock(&self.state)
            .current
            .as_ref()
            .is_some_and(|g| g.is_ready())
    }

    /// How long ago `worker` started, on the policy clock (W10's age limit).
    fn age(&self, worker: &Generation) -> Duration {
        self.config
            .clock
            .now()
            .saturating_duration_since(worker.started)
    }

    /// Resident: the current generation, ready; launches one when there is none (W10 limits).
    /// The launch decision is serialized by `launching`, so concurrent callers share one
    /// generation; the readiness wait (W6, 7 s) holds neither that lock nor a queue descriptor.
    async fn ensure_resident(&self) -> Result<Arc<Generation>, WorkerError> {
        let worker = {
            let _launching = self.launching.lock().await;
            match self.usable_resident() {
                Some(worker) => worker,
                None => self.launch(None).await?,
            }
        };
        self.wait_ready(&worker).await?;
        Ok(worker)
    }

    /// The current resident generation when it may take requests (retiring it at its W10 age).
    fn usable_resident(&self) -> Option<Arc<Generation>> {
        let worker = lock(&self.state).current.clone()?;
        if self.age(&worker) >= self.config.limits.max_age {
            self.retire(
                &worker,
                reason::AGE_LIMIT,
                "generation reached its maximum age",
                true,
            );
            return None;
        }
        (!worker.is_retired()).then_some(worker)
    }

    async fn start_oneshot(&self, language: Language) -> Result<Arc<Generation>, WorkerError> {
        let worker = self.launch(Some(language)).await?;
        if let Err(e) = self.wait_ready(&worker).await {
            self.retire(&worker, reason::STARTUP_TIMEOUT, &e.message, false);
            return Err(e);
        }
        Ok(worker)
    }

    async fn wait_ready(&self, worker: &Arc<Generation>) -> Result<(), WorkerError> {
        let ceiling = self.config.limits.readiness;
        let mut rx = worker.ready.subscribe();
        let waited =
            tokio::time::timeout(ceiling, rx.wait_for(|s| !matches!(s, ReadyState::Starting)))
                .await
                .map(|r| r.map(|s| s.clone()));
        match waited {
            Err(_) => {
                let detail = format!(
                    "not ready within {} ms (W6 readiness ceiling)",
                    ceiling.as_millis()
                );
                self.retire(worker, reason::STARTUP_TIMEOUT, &detail, false);
                Err(WorkerError::new(
                    WorkerErrorCode::StartupTimeout,
                    format!("worker generation {}: {detail}", worker.id),
                ))
            }
            Ok(Err(_)) => Err(WorkerError::new(
                WorkerErrorCode::Protocol,
                format!("worker generation {} vanished during startup", worker.id),
            )),
            Ok(Ok(ReadyState::Ready(_))) => Ok(()),
            Ok(Ok(ReadyState::Failed(mut e))) => {
                // A child that died during startup usually said why on stderr.
                let mut done = worker.stderr_done.subscribe();
                let _ =
                    tokio::time::timeout(Duration::from_millis(500), done.wait_for(|d| *d)).await;
                let tail = worker.stderr_tail(600);
                if !tail.is_empty() {
                    e.message = format!("{}; stderr: {tail}", e.message);
                }
                Err(e)
            }
            Ok(Ok(ReadyState::Starting)) => Err(WorkerError::new(
                WorkerErrorCode::Protocol,
                "readiness wait ended while starting",
            )),
        }
    }

    /// Starts a child (resident generation or one-shot runner) after the W10 launch checks.
    /// Starts a generation (W1, W10, W11): a resident one (`language` `None`, counted against
    /// the launch window) or a one-shot process for `language`. Its owned root holds the
    /// ownership manifest; its reader, stderr capture, RSS sampler and (resident) age timer run
    /// as tasks. Errors: `RESTART_LIMIT` (window full), `SPAWN`, `CANCELLED` (shut down).
    async fn launch(&self, language: Option<Language>) -> Result<Arc<Generation>, WorkerError> {
        self.sweep_once();
        let now = self.config.clock.now();
        let id = self.reserve_generation(language.is_none(), now)?;
        let script = self.config.entry_script();
        self.spawn_generation(id, now, language, &script)
            .await
            .inspect(|_| lock(&self.state).last_launch_failed = false)
            .inspect_err(|e| {
                // Say why at once (a preflight reads this), not only in a log.
                if e.code != WorkerErrorCode::Cancelled {
                    lock(&self.state).last_launch_failed = true;
                    self.recorder.record(
                        PerfEvent::point(EventKind::WorkerLaunchFailed.as_str())
                            .id(attr::GENERATION, id)
                            .outcome(Outcome::Failed)
                            .attr(attr::CODE, e.code.as_str())
                            .attr(attr::ERROR, e.message.as_str())
                            .attr(attr::SCRIPT, script.display().to_string()),
                    );
                }
            })
    }

    /// [`Self::launch`] after the generation id is reserved.
    async fn spawn_generation(
        &self,
        id: u64,
        now: Instant,
        language: Option<Language>,
        script: &Path,
    ) -> Result<Arc<Generation>, WorkerError> {
        let (root, mut manifest) = self.create_root(id)?;
        let mut cmd = self.worker_command(id, &root, language, script);
        let spawned_wall = std::time::Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&root);
                return Err(WorkerError::new(
                    WorkerErrorCode::Spawn,
                    format!(
                        "cannot start {} {}: {e}",
                        self.config.node_binary.display(),
                        script.display()
                    ),
                ));
            }
        };
        let pid = child.id().unwrap_or(0);
        manifest.child = ProcessIdentity::of(pid);
        let _ = stale::write_manifest(&root, &manifest);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = kill_group(pid);
            let _ = std::fs::remove_dir_all(&root);
            return Err(WorkerError::new(
                WorkerErrorCode::Spawn,
                "child pipes were not created",
            ));
        };
        let worker = Arc::new(Generation {
            id,
            mode: if language.is_some() {
                WaymarkMode::Oneshot
            } else {
                WaymarkMode::Resident
            },
            pid,
            root,
            started: now,
            spawned_wall,
            ready: watch::Sender::new(ReadyState::Starting),
            writer: tokio::sync::Mutex::new(Some(FramedWrite::new(stdin, worker_codec()))),
            pending: Mutex::new(None),
            served: AtomicU64::new(0),
            retired: Mutex::new(None),
            child: Mutex::new(Some(child)),
            stderr: Arc::new(Mutex::new(StderrBuffer::default())),
            stderr_done: watch::Sender::new(false),
            cancel: CancellationToken::new(),
            cleaned: watch::Sender::new(false),
            last_rss: AtomicU64::new(0),
        });
        let shut_down = self.register(&worker, script);
        self.start_tasks(&worker, stdout, stderr);
        if shut_down {
            // Shutdown raced this launch: it saw no such generation, so retire it here.
            self.retire(&worker, reason::SHUTDOWN, "launched during shutdown", false);
            return Err(WorkerError::new(
                WorkerErrorCode::Cancelled,
                "the Waymark worker has been shut down",
            ));
        }
        Ok(worker)
    }

    /// Takes the next generation id; a resident launch must fit the launch window (W10).
    fn reserve_generation(&self, resident: bool, now: Instant) -> Result<u64, WorkerError> {
        let mut st = lock(&self.state);
        if st.shut_down {
            return Err(WorkerError::new(
                WorkerErrorCode::Cancelled,
                "the Waymark worker has been shut down",
            ));
        }
        if resident {
            admit_in_window(&mut st.launches, now, &self.config.limits)?;
        }
        st.launches_total += 1;
        let id = st.next_generation;
        st.next_generation += 1;
        Ok(id)
    }

    /// Creates the generation's owned root (0700) under the work root and writes its
    /// ownership manifest (W11, W12); on failure nothing is left behind.
    fn create_root(&self, id: u64) -> Result<(PathBuf, Manifest), WorkerError> {
        let spawn_err = |what: String, e: &dyn std::fmt::Display| {
            WorkerError::new(WorkerErrorCode::Spawn, format!("{what}: {e}"))
        };
        let work_root = &self.config.work_root;
        stale::create_private_dir(work_root)
            .map_err(|e| spawn_err(format!("cannot create {}", work_root.display()), &e))?;
        let random = uuid::Uuid::new_v4().simple().to_string();
        let root = work_root.join(format!(
            "{}{}-g{}-{}",
            stale::ROOT_PREFIX,
            std::process::id(),
            id,
            &random[..8]
        ));
        stale::create_private_dir(&root)
            .map_err(|e| spawn_err(format!("cannot create {}", root.display()), &e))?;
        let manifest = Manifest {
            format: stale::MANIFEST_FORMAT,
            generation: id,
            owner: self.own.unwrap_or(ProcessIdentity {
                pid: std::process::id(),
                start_time: 0,
            }),
            child: None,
            created_unix_ms: crate::telemetry::unix_ms_now() as u64,
        };
        if let Err(e) = stale::write_manifest(&root, &manifest) {
            let _ = std::fs::remove_dir_all(&root);
            return Err(spawn_err("cannot write the ownership manifest".into(), &e));
        }
        Ok((root, manifest))
    }

    /// The Node command for generation `id` (W9 old-space cap, W11 own process group and
    /// parent-death signal); `NODE_OPTIONS` is not inherited.
    fn worker_command(
        &self,
        id: u64,
        root: &Path,
        language: Option<Language>,
        script: &Path,
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.config.node_binary);
        cmd.arg(format!(
            "--max-old-space-size={}",
            self.config.limits.max_old_space_mib
        ))
        .arg(script)
        .arg("--generation")
        .arg(id.to_string())
        .arg("--root")
        .arg(root);
        if let Some(l) = language {
            cmd.arg("--language").arg(l.as_str());
        }
        cmd.args(&self.config.worker_args)
            .current_dir(&self.config.script_dir)
            .env_remove("NODE_OPTIONS")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0); // W11: own process group
        // W11: and it dies with us even when its main thread is busy or it is stopped.
        super::process::die_with_parent(&mut cmd);
        cmd
    }

    /// Makes `worker` live (and current, if resident) and records `worker_launch`. Returns
    /// whether a shutdown raced the launch.
    fn register(&self, worker: &Arc<Generation>, script: &Path) -> bool {
        let (launches_in_window, shut_down) = {
            let mut st = lock(&self.state);
            st.live.insert(worker.id, worker.clone());
            st.latest = Some((worker.id, worker.pid));
            if worker.mode == WaymarkMode::Resident && !st.shut_down {
                st.current = Some(worker.clone());
            }
            (st.launches.len(), st.shut_down)
        };
        self.recorder.record(
            PerfEvent::point(EventKind::WorkerLaunch.as_str())
                .id(attr::GENERATION, worker.id)
                .attr(attr::PID, worker.pid)
                .attr(attr::MODE, worker.mode.as_str())
                .attr(attr::LAUNCHES_IN_WINDOW, launches_in_window)
                .attr(attr::SCRIPT, script.display().to_string()),
        );
        shut_down
    }

    /// The generation's tasks: frame reader, stderr capture (teed to the E1 log when
    /// configured), RSS sampler (W9) and, for a resident generation, the age timer (W10).
    fn start_tasks(
        &self,
        worker: &Arc<Generation>,
        stdout: ChildStdout,
        stderr: tokio::process::ChildStderr,
    ) {
        let weak = self.this.clone();
        tokio::spawn(read_loop(
            weak,
            worker.clone(),
            FramedRead::new(stdout, worker_codec()),
        ));
        let g = worker.clone();
        let cap = self.config.limits.stderr_cap_bytes;
        let (id, pid) = (worker.id, worker.pid);
        let tee = self.config.stderr_log.as_deref().and_then(|path| {
            let mut f = open_stderr_log(path)?;
            use std::io::Write;
            f.write_all(format!("=== generation {id} pid {pid} launched ===\n").as_bytes())
                .ok()?;
            Some(f)
        });
        tokio::spawn(async move {
            capture_stderr(stderr, g.stderr.clone(), cap, tee).await;
            g.stderr_done.send_replace(true);
        });
        tokio::spawn(sample_rss(self.this.clone(), worker.clone()));
        if worker.mode == WaymarkMode::Resident {
            tokio::spawn(retire_at_age(self.this.clone(), worker.clone()));
        }
    }

    /// One discovery on `worker` (W3, W4, W6): the source goes into an owned request
    /// directory (removed when this returns, or when the future is dropped), the frame is sent
    /// and the answer awaited for the active timeout. A dropped future retires the generation
    /// (the worker may still be reading the request).
    async fn run_request(
        &self,
        worker: &Arc<Generation>,
        request: u64,
        parts: RequestParts<'_>,
    ) -> Result<Discovery, DiscoveryError> {
        let Some(this) = self.arc() else {
            return Err(WorkerError::new(WorkerErrorCode::Cancelled, "supervisor dropped").into());
        };
        let token = uuid::Uuid::new_v4().simple().to_string();
        // Declared before the guard, so a cancellation retires first, then removes the files.
        let dir = RequestDir(Some(worker.root.join(&token)));
        let mut guard = RequestGuard {
            inner: this,
            worker: worker.clone(),
            armed: true,
        };
        let exchanged = self.exchange(worker, request, parts, &dir, token).await;
        // Every return above is an answer, not a cancellation.
        guard.armed = false;
        let frame = exchanged?;
        let removed = dir.remove();
        self.count_served(worker);
        if let Err((path, e)) = removed {
            return Err(WorkerError::new(
                WorkerErrorCode::Cleanup,
                format!("cannot remove request directory {}: {e}", path.display()),
            )
            .into());
        }
        map_result(frame)
    }

    /// Writes the request file, sends the frame and waits for its answer (W3, W6).
    async fn exchange(
        &self,
        worker: &Arc<Generation>,
        request: u64,
        parts: RequestParts<'_>,
        dir: &RequestDir,
        token: String,
    ) -> Result<ResultFrame, DiscoveryError> {
        if let Some(why) = *lock(&worker.retired) {
            return Err(error_for_reason(why, worker.id, "retired before the request").into());
        }
        let (bytes, sha256) = write_request_file(worker, dir.path(), parts.source).await?;
        let (tx, rx) = oneshot::channel();
        *lock(&worker.pending) = Some(Pending { request, tx });
        if let Some(why) = *lock(&worker.retired) {
            lock(&worker.pending).take();
            return Err(
                error_for_reason(why, worker.id, "retired before the request was sent").into(),
            );
        }
        let frame = SupervisorMessage::Discover(DiscoverFrame {
            generation: worker.id,
            request,
            language: parts.language,
            token,
            bytes,
            sha256,
            query: parts.query.cloned(),
        });
        let sent = {
            let mut writer = worker.writer.lock().await;
            match writer.as_mut() {
                Some(w) => w.send(frame).await.map_err(|e| e.to_string()),
                None => Err("the worker's stdin is closed".to_owned()),
            }
        };
        let mut ipc = self.span(EventKind::IpcRead.as_str(), Some(request));
        ipc.id(attr::GENERATION, worker.id);
        if let Err(e) = sent {
            ipc.attr(attr::ERROR, e.clone());
            ipc.finish(Outcome::Failed);
            self.retire(worker, reason::PIPE_FAILED, &e, false);
            return Err(error_for_reason(reason::PIPE_FAILED, worker.id, &e).into());
        }
        self.await_answer(worker, request, rx, ipc).await
    }

    /// Waits up to the active timeout (W6) for the answer to `request`; a timeout retires the
    /// generation and is a domain result.
    async fn await_answer(
        &self,
        worker: &Arc<Generation>,
        request: u64,
        rx: oneshot::Receiver<Result<ResultFrame, WorkerError>>,
        mut ipc: Span,
    ) -> Result<ResultFrame, DiscoveryError> {
        let active = self.config.active_timeout;
        match tokio::time::timeout(active, rx).await {
            Ok(Ok(Ok(frame))) => {
                ipc.finish(Outcome::Ok);
                Ok(frame)
            }
            Ok(Ok(Err(e))) => {
                ipc.attr(attr::CODE, e.code.as_str());
                ipc.finish(Outcome::Failed);
                Err(e.into())
            }
            Ok(Err(_)) => {
                ipc.finish(Outcome::Failed);
                Err(WorkerError::new(
                    WorkerErrorCode::Protocol,
                    format!("worker generation {} dropped request {request}", worker.id),
                )
                .into())
            }
            Err(_) => {
                ipc.attr(attr::TIMEOUT_MS, ms(active));
                ipc.finish(Outcome::Failed);
                self.retire(
                    worker,
                    reason::ACTIVE_TIMEOUT,
                    &format!("request {request} exceeded {} ms", active.as_millis()),
                    false,
                );
                Err(DomainFailure::ActiveTimeout { timeout: active }.into())
            }
        }
    }

    /// Counts an answered request and retires a resident generation gracefully at its request
    /// or age limit (W10).
    fn count_served(&self, worker: &Arc<Generation>) {
        let served = worker.served.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.state).requests_served_total += 1;
        if worker.mode != WaymarkMode::Resident {
            return;
        }
        let age = self.age(worker);
        if served >= self.config.limits.max_requests {
            self.retire(
                worker,
                reason::REQUEST_LIMIT,
                &format!("served {served} requests"),
                true,
            );
        } else if age >= self.config.limits.max_age {
            self.retire(worker, reason::AGE_LIMIT, "reached its maximum age", true);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Retirement (W4, W9, W10, W11)

    /// Retires `worker` once: fails its pending request, records the retirement, stops its tasks and
    /// starts cleanup (graceful: close stdin, wait up to `graceful_exit`, then kill; otherwise
    /// kill the process group now), then reaps and removes the generation root.
    fn retire(
        &self,
        worker: &Arc<Generation>,
        why: RetirementReason,
        detail: &str,
        graceful: bool,
    ) -> bool {
        {
            let mut r = lock(&worker.retired);
            if r.is_some() {
                return false;
            }
            *r = Some(why);
        }
        self.fail_waiters(worker, &error_for_reason(why, worker.id, detail));
        self.record_retirement(worker, why, detail);
        worker.cancel.cancel();
        self.start_cleanup(worker, graceful);
        true
    }

    /// Retirement, first step: the pending request and anyone waiting for readiness get `error`.
    fn fail_waiters(&self, worker: &Generation, error: &WorkerError) {
        if let Some(p) = lock(&worker.pending).take() {
            let _ = p.tx.send(Err(error.clone()));
        }
        worker.ready.send_if_modified(|s| {
            if matches!(s, ReadyState::Starting) {
                *s = ReadyState::Failed(error.clone());
                true
            } else {
                false
            }
        });
    }

    /// Retirement, second step: the generation leaves the current slot and joins the retirement
    /// history (one-shot completions excepted), with a `worker_retired` event (T5) and a warning
    /// when the reason is not an expected one.
    fn record_retirement(&self, worker: &Generation, why: RetirementReason, detail: &str) {
        let requests = worker.served.load(Ordering::SeqCst);
        {
            let mut st = lock(&self.state);
            if st.current.as_ref().is_some_and(|c| c.id == worker.id) {
                st.current = None;
            }
            if why != reason::ONESHOT_COMPLETE {
                st.retirements.push_back(Retirement {
                    generation: worker.id,
                    reason: why.as_str().to_owned(),
                    requests,
                });
                while st.retirements.len() > HISTORY {
                    st.retirements.pop_front();
                }
            }
        }
        let expected = matches!(
            why,
            reason::ONESHOT_COMPLETE | reason::REQUEST_LIMIT | reason::AGE_LIMIT | reason::SHUTDOWN
        );
        if !expected {
            tracing::warn!(
                generation = worker.id,
                reason = why.as_str(),
                detail,
                "Waymark generation retired"
            );
        }
        self.recorder.record(
            PerfEvent::point(EventKind::WorkerRetired.as_str())
                .id(attr::GENERATION, worker.id)
                .outcome(outcome(expected))
                .attr(attr::REASON, why.as_str())
                .attr(attr::REQUESTS, requests)
                .attr(attr::PID, worker.pid)
                .attr(attr::MODE, worker.mode.as_str())
                .attr(attr::DETAIL, detail),
        );
    }

    /// Retirement, last step: kill now unless `graceful` (close stdin and wait up to
    /// `graceful_exit` first), then reap and remove the generation root — on the runtime when
    /// there is one, else here and now.
    fn start_cleanup(&self, worker: &Arc<Generation>, graceful: bool) {
        if !graceful {
            // Holding the child slot: it cannot be reaped (and its pid reused) meanwhile.
            let child = lock(&worker.child);
            if child.is_some() {
                let _ = kill_group(worker.pid);
            }
        }
        let weak = self.this.clone();
        let g = worker.clone();
        let graceful_exit = self.config.limits.graceful_exit;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(cleanup(weak, g, graceful, graceful_exit));
            }
            Err(_) => {
                if let Some(child) = lock(&g.child).take() {
                    let _ = kill_group(g.pid);
                    drop(child);
                }
                let _ = std::fs::remove_dir_all(&g.root);
                g.cleaned.send_replace(true);
                lock(&self.state).live.remove(&g.id);
            }
        }
    }

    fn emit_ready(&self, worker: &Generation, ready: &ReadyFrame) {
        let mut e = PerfEvent::point(EventKind::WorkerReady.as_str())
            .id(attr::GENERATION, worker.id)
            .attr(attr::PID, worker.pid)
            .attr(attr::WARMUP_MS, ready.warmup_ms)
            .attr(attr::MODE, worker.mode.as_str())
            .attr(attr::ENGINE, ready.engine.clone());
        e.duration_ms = worker.spawned_wall.elapsed().as_secs_f64() * 1000.0;
        self.recorder.record(e);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let gens: Vec<_> = {
            let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
            st.live.drain().map(|(_, g)| g).collect()
        };
        for g in gens {
            g.cancel.cancel();
            // Only a child not yet reaped keeps its pid (and group id) from being reused.
            if let Some(child) = lock(&g.child).take() {
                let _ = kill_group(g.pid);
                drop(child);
            }
            let _ = std::fs::remove_dir_all(&g.root);
            g.cleaned.send_replace(true);
        }
    }
}

fn map_result(frame: ResultFrame) -> Result<Discovery, DiscoveryError> {
    if frame.ok {
        let Some(scopes) = frame.scopes else {
            return Err(WorkerError::new(
                WorkerErrorCode::Protocol,
                "worker result has ok=true but no scopes",
            )
            .into());
        };
        return Ok(Discovery {
            scope_count: frame.scope_count.unwrap_or(scopes.len()),
            scopes,
            parse_ms: frame.parse_ms.unwrap_or(0.0),
            read_ms: frame.read_ms.unwrap_or(0.0),
            has_error: frame.has_error.unwrap_or(false),
            names: frame.names.unwrap_or_default(),
        });
    }
    let (code, message) = frame
        .error
        .map(|e| (e.code, e.message))
        .unwrap_or_else(|| ("parse_failed".into(), "no error detail".into()));
    match code.as_str() {
        "parse_failed" | "unsupported_language" => {
            Err(DomainFailure::ParseFailed { message }.into())
        }
        "output_too_large" => Err(DomainFailure::OutputTooLarge { message }.into()),
        "integrity_mismatch" => Err(WorkerError::new(
            WorkerErrorCode::Integrity,
            format!("the worker rejected the request file: {message}"),
        )
        .into()),
        other => Err(WorkerError::new(
            WorkerErrorCode::Protocol,
            format!("unknown worker error code {other:?}: {message}"),
        )
        .into()),
    }
}

/// Reads worker frames for one generation; any protocol fault retires it (W4).
async fn read_loop(
    weak: Weak<Inner>,
    worker: Arc<Generation>,
    mut reader: FramedRead<ChildStdout, WorkerCodec>,
) {
    loop {
        let next = tokio::select! {
            _ = worker.cancel.cancelled() => return,
            n = reader.next() => n,
        };
        let Some(inner) = weak.upgrade() else { return };
        let fault = |why: RetirementReason, detail: String| {
            inner.retire(&worker, why, &detail, false);
        };
        match next {
            None => {
                return fault(reason::WORKER_EXITED, "the worker closed its stdout".into());
            }
            Some(Err(e)) => {
                let why = match e {
                    FrameError::Io(_) => reason::PIPE_FAILED,
                    _ => reason::INVALID_FRAMING,
                };
                return fault(why, e.to_string());
            }
            Some(Ok(WorkerMessage::Ready(ready))) => {
                if !matches!(*worker.ready.borrow(), ReadyState::Starting) {
                    return fault(reason::UNSOLICITED_DATA, "a second ready frame".into());
                }
                if ready.generation != worker.id {
                    return fault(
                        reason::WRONG_GENERATION,
                        format!("ready for generation {}", ready.generation),
                    );
                }
                inner.emit_ready(&worker, &ready);
                worker.ready.send_replace(ReadyState::Ready(ready));
            }
            Some(Ok(WorkerMessage::Result(result))) => {
                let expected = lock(&worker.pending).as_ref().map(|p| p.request);
                let Some(expected) = expected else {
                    return fault(
                        reason::UNSOLICITED_DATA,
                        format!(
                            "result for request {} with none outstanding",
                            result.request
                        ),
                    );
                };
                if result.generation != worker.id {
                    return fault(
                        reason::WRONG_GENERATION,
                        format!("result for generation {}", result.generation),
                    );
                }
                if result.request != expected {
                    return fault(
                        reason::WRONG_REQUEST_ID,
                        format!("expected request {expected}, got {}", result.request),
                    );
                }
                if let Some(p) = lock(&worker.pending).take() {
                    let _ = p.tx.send(Ok(result));
                }
                if worker.mode == WaymarkMode::Oneshot {
                    return; // its one answer is in; the runner exits and is retired as complete
                }
            }
        }
    }
}

/// W10: retires a resident generation on the policy clock when it reaches its maximum age while
/// idle — not only when the next request arrives. It takes the active slot first (so it never
/// retires a generation under an active request; a busy generation retires gracefully after
/// its request, see `run_request`); if the slot is not free within the admission ceiling the
/// request-time check applies.
async fn retire_at_age(this: Weak<Inner>, worker: Arc<Generation>) {
    let (clock, max_age, admission) = match this.upgrade() {
        Some(inner) => (
            inner.config.clock.clone(),
            inner.config.limits.max_age,
            inner.config.limits.admission,
        ),
        None => return,
    };
    let deadline = worker.started + max_age;
    tokio::select! {
        () = worker.cancel.cancelled() => return,
        () = clock.sleep_until(deadline) => {}
    }
    let Some(inner) = this.upgrade() else { return };
    let permit = tokio::select! {
        () = worker.cancel.cancelled() => return,
        permit = inner.admit(admission, None, false) => permit,
    };
    if let Ok(_permit) = permit {
        inner.retire(
            &worker,
            reason::AGE_LIMIT,
            "reached its maximum age while idle",
            true,
        );
    }
}

/// W9: samples the child's RSS every 100 ms; a breach retires the generation.
async fn sample_rss(weak: Weak<Inner>, worker: Arc<Generation>) {
    let (interval, limit) = match weak.upgrade() {
        Some(inner) => (
            inner.config.limits.rss_interval,
            inner.config.limits.rss_limit_bytes,
        ),
        None => return,
    };
    let mut sampler = RssSampler::new();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = worker.cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(rss) = sampler.rss_bytes(worker.pid) else {
            continue;
        };
        let Some(inner) = weak.upgrade() else { return };
        worker.last_rss.store(rss, Ordering::SeqCst);
        let mut ids = Map::new();
        ids.insert(attr::GENERATION.into(), worker.id.into());
        inner.recorder.record_memory(worker.pid, rss, ids);
        let breach = rss > limit;
        if breach || n.is_multiple_of(RSS_EVENT_EVERY) {
            inner.recorder.record(
                PerfEvent::point(EventKind::WorkerRss.as_str())
                    .id(attr::GENERATION, worker.id)
                    .outcome(outcome(!breach))
                    .attr(attr::RSS_BYTES, rss)
                    .attr(attr::LIMIT_BYTES, limit),
            );
        }
        if breach {
            inner.retire(
                &worker,
                reason::RSS_LIMIT,
                &format!("sampled RSS {rss} bytes exceeds the {limit}-byte limit (W9)"),
                false,
            );
            return;
        }
        n += 1;
    }
}

/// Kills or gracefully stops the child, reaps it, removes the generation root (W11).
async fn cleanup(
    weak: Weak<Inner>,
    worker: Arc<Generation>,
    graceful: bool,
    graceful_exit: Duration,
) {
    let child = lock(&worker.child).take();
    let mut exit = None;
    if let Some(mut child) = child {
        if graceful {
            drop(worker.writer.lock().await.take()); // close stdin: the worker exits (W11 guard)
            match tokio::time::timeout(graceful_exit, child.wait()).await {
                Ok(Ok(status)) => exit = Some(status),
                _ => {
                    let _ = kill_group(worker.pid);
                }
            }
        } else {
            let _ = kill_group(worker.pid);
        }
        if exit.is_none()
            && let Ok(Ok(status)) = tokio::time::timeout(REAP_BOUND, child.wait()).await
        {
            exit = Some(status);
        }
    }
    drop(worker.writer.lock().await.take());
    let mut stderr_done = worker.stderr_done.subscribe();
    let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done.wait_for(|d| *d)).await;
    let removed = match std::fs::remove_dir_all(&worker.root) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    // E1: the generation's stderr evidence is complete before anyone is told it is cleaned.
    if let Some(inner) = weak.upgrade()
        && let Some(path) = &inner.config.stderr_log
    {
        append_stderr_log(path, &worker.stderr_capture(), worker.pid, exit);
    }
    worker.cleaned.send_replace(true);
    if let Some(inner) = weak.upgrade() {
        if let Err(e) = &removed {
            inner.recorder.record(
                PerfEvent::point(EventKind::WorkerCleanup.as_str())
                    .id(attr::GENERATION, worker.id)
                    .outcome(Outcome::Failed)
                    .attr(attr::CODE, WorkerErrorCode::Cleanup.as_str())
                    .attr(attr::ERROR, e.to_string()),
            );
        }
        let capture = worker.stderr_capture();
        let mut st = lock(&inner.state);
        st.live.remove(&worker.id);
        st.stderr_history.push_back(capture);
        while st.stderr_history.len() > STDERR_HISTORY {
            st.stderr_history.pop_front();
        }
    }
}

/// Opens the worker stderr evidence log for appending (created 0600).
fn open_stderr_log(path: &std::path::Path) -> Option<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .ok()?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .ok()?;
    Some(f)
}

/// E1: closes one retired generation's entry in the stderr evidence log. Its captured bytes
/// were appended as they arrived (after a `launched` header line); this adds a line with the
/// exit status or signal and the byte counts. A log that cannot be written is skipped (the
/// capture stays in status).
fn append_stderr_log(
    path: &std::path::Path,
    capture: &StderrCapture,
    pid: u32,
    exit: Option<std::process::ExitStatus>,
) {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let exit = match exit {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "exit unknown".to_owned(),
        },
        None => "exit not observed".to_owned(),
    };
    let newline = if capture.bytes.is_empty() || capture.bytes.ends_with(b"\n") {
        ""
    } else {
        "\n"
    };
    let line = format!(
        "{newline}=== generation {} pid {pid} {exit} · {} bytes of stderr{} ===\n",
        capture.generation,
        capture.total_bytes,
        if capture.truncated {
            format!(", first {} kept", capture.bytes.len())
        } else {
            String::new()
        }
    );
    if let Some(mut f) = open_stderr_log(path) {
        let _ = f.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(code(reason::RSS_LIMIT), WorkerErrorCode::RssLimit);
        assert_eq!(code(reason::SHUTDOWN), WorkerErrorCode::Cancelled);
        assert_eq!(code(reason::CANCELLED), WorkerErrorCode::Cancelled);
        assert_eq!(
            code(reason::STARTUP_TIMEOUT),
            WorkerErrorCode::StartupTimeout
        );
        for r in [
            reason::WORKER_EXITED,
            reason::INVALID_FRAMING,
            reason::UNSOLICITED_DATA,
            reason::WRONG_GENERATION,
            reason::WRONG_REQUEST_ID,
            reason::PIPE_FAILED,
        ] {
            assert_eq!(code(r), WorkerErrorCode::Protocol, "{r}");
        }
    }
}

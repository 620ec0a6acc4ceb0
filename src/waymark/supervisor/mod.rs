//! The Waymark supervisor (SPEC W1–W11): owns the Node child(ren), admits requests through the
//! FIFO queue, enforces the phase ceilings, matches generation and request ids, writes and
//! removes owned request files, samples RSS, retires generations and reports status and
//! lifecycle events (T5).
//!
//! Laid out along a generation's life: this file holds the handle and its API; `status` the
//! status types; `generation` the generation and its one state (`Starting → Ready → Retired →
//! Cleaned`); `spawn` the seam workers are started through (a Node child in production);
//! `launch` the launch window, readiness and start-up; `exchange` admission, the request file,
//! the frame exchange and the read loop; `retire` retirement, RSS sampling, the age timer and
//! cleanup; `quarantine` content that killed a generation, never sent again. Every phase
//! ceiling is counted on running time ([`super::ceiling`]): a paused process is not a slow worker.
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
//! | `phase_readiness` | span | request, generation | ceiling_ms, paused_ms (prewarm: prewarm=true) |
//! | `phase_active` | span | request, generation | ceiling_ms, paused_ms |
//! | `phase_outer` | span | request | ceiling_ms, paused_ms |
//! | `ipc_read` | one complete response wait | request, generation | code / timeout_ms / cancelled on failure |
//! | `discovery_total` | span | request | language, bytes, mode, caller, lock_holder (true only for [`CallerKind::LockHolder`]), scopes, parse_ms, code |
//! | `worker_retired` | point | generation | reason, requests, pid, mode, detail |
//! | `worker_rss` | point, every 10th 100 ms sample and on breach (failed) | generation | rss_bytes, limit_bytes |
//! | `worker_stale_roots` | point, when the sweep found roots | – | removed, kept, kept_roots |
//! | `worker_cleanup` | point, failed root removal | generation | code, error |
//!
//! `paused_ms` (present when non-zero) is time this process was found stopped during the phase
//! and not counted against its ceiling (see [`super::ceiling`]). Every RSS sample also goes to the memory
//! file via `Recorder::record_memory` (T2). A span dropped unfinished (cancellation) is recorded
//! as failed with `cancelled: true`.

mod exchange;
mod generation;
mod launch;
mod quarantine;
mod retire;
#[cfg(test)]
mod scripted;
mod spawn;
mod status;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::config::{WaymarkConfig, WaymarkMode};
use super::error::{DiscoveryError, WorkerError, WorkerErrorCode};
use super::process::ProcessIdentity;
use super::queue::{AdmissionQueue, QueueDepth};
use super::stale::{self, StaleReport};
use super::{Discovery, Language, ScopeQuery};
use crate::telemetry::{EventKind, Outcome, PerfEvent, Recorder, Span, attr};
use exchange::RequestParts;
use generation::{Generation, GenerationState, lock};
use quarantine::Quarantine;
use retire::REAP_BOUND;
use spawn::{NodeSpawner, Spawner};

pub use status::{Retirement, RetirementReason, StderrCapture, WorkerStatus};

/// Who is asking for a discovery, which decides how long admission may wait and whether a
/// worker may be started for it (W6, W7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerKind {
    /// May wait the admission ceiling (2 s) and start (or wait for) a resident worker.
    Ordinary,
    /// W7: holds its target's lock — waits at most 250 ms for an already-ready worker, in the
    /// same FIFO, and never starts one.
    LockHolder,
    /// Holds no lock but must not wait at all (a read asking whether content parses): an
    /// already-ready, idle worker or nothing; never starts one.
    IfIdle,
}

impl CallerKind {
    /// The `caller` attribute of `discovery_total`: `ordinary`, `lock_holder`, `if_idle`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ordinary => "ordinary",
            Self::LockHolder => "lock_holder",
            Self::IfIdle => "if_idle",
        }
    }

    /// True only for a caller holding its target's lock (`discovery_total`'s `lock_holder`).
    pub const fn holds_lock(self) -> bool {
        matches!(self, Self::LockHolder)
    }

    /// Whether a worker may be started (or a starting one waited for) on this caller's behalf.
    pub const fn may_launch(self) -> bool {
        matches!(self, Self::Ordinary)
    }

    /// How long admission may wait (W6 2 s, W7 250 ms, or not at all).
    fn admission_ceiling(self, config: &WaymarkConfig) -> Duration {
        match self {
            Self::Ordinary => config.limits.admission,
            Self::LockHolder => config.limits.lock_wait,
            Self::IfIdle => Duration::ZERO,
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
    /// there is none), never across the readiness wait: concurrent callers share one launch.
    launching: tokio::sync::Mutex<()>,
    /// How generations are started (a Node child in production).
    spawner: Arc<dyn Spawner>,
    /// Content that killed a generation, never sent to a worker again.
    quarantine: Quarantine,
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
        Self::with_spawner(config, recorder, Arc::new(NodeSpawner))
    }

    /// [`Waymark::new`] starting workers through `spawner` (tests: a scripted child).
    pub(crate) fn with_spawner(
        config: WaymarkConfig,
        recorder: crate::telemetry::Recorder,
        spawner: Arc<dyn Spawner>,
    ) -> Self {
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
            spawner,
            quarantine: Quarantine::default(),
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
        let result = inner.ensure_resident(&mut span).await;
        span.finish(outcome(result.is_ok()));
        result.map(|_| ())
    }

    /// Discovers the structural scopes of `source` (W1–W6): admission (FIFO, 2 s), readiness
    /// (launch if needed, 7 s), active (configured, default 15 s), all within the outer allowance
    /// (active + 13 s). Worker errors carry `WAYMARK_WORKER_*` codes; a parse failure, output
    /// over 2 MiB, active timeout or content quarantined after it killed a generation is a
    /// [`DomainFailure`](super::DomainFailure). Never retried, never switched to the other mode
    /// (W4).
    pub async fn discover(
        &self,
        language: Language,
        source: &str,
    ) -> Result<Discovery, DiscoveryError> {
        self.discover_as(CallerKind::Ordinary, language, source, None)
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
        self.discover_as(CallerKind::Ordinary, language, source, Some(query))
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
        self.discover_as(CallerKind::LockHolder, language, source, None)
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
        self.discover_as(CallerKind::LockHolder, language, source, Some(query))
            .await
    }

    /// Best-effort discovery for a caller that must not wait (a read reporting whether content
    /// parses): like [`Waymark::discover_holding_lock_query`] it never starts a child, but it
    /// does not wait at all — with the worker busy, not ready or absent it fails at once
    /// (`WAYMARK_WORKER_QUEUE_EXPIRED` / `WAYMARK_WORKER_NOT_READY`). It holds no lock:
    /// `discovery_total` records `lock_holder: false`.
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
        self.discover_as(CallerKind::IfIdle, language, source, Some(query))
            .await
    }

    /// One discovery for a caller of `kind` (the public entry points above are this with a
    /// fixed kind); `query` `None` asks for every scope.
    pub async fn discover_as(
        &self,
        kind: CallerKind,
        language: Language,
        source: &str,
        query: Option<&ScopeQuery>,
    ) -> Result<Discovery, DiscoveryError> {
        self.inner
            .discover(RequestParts {
                language,
                source,
                query,
                caller: kind,
            })
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
            self.inner.retire(
                g,
                RetirementReason::Shutdown,
                "the supervisor is shutting down",
                true,
            );
        }
        let bound = self.inner.config.limits.graceful_exit + REAP_BOUND;
        for g in gens {
            let mut state = g.state.subscribe();
            let cleaned = state.wait_for(|s| matches!(s, GenerationState::Cleaned { .. }));
            let exit = match tokio::time::timeout(bound, cleaned).await {
                Ok(Ok(s)) => match &*s {
                    GenerationState::Cleaned { exit, .. } => *exit,
                    _ => None,
                },
                _ => None,
            };
            if exit.is_none() {
                tracing::debug!(generation = g.id, "exit not observed within the reap bound");
            }
        }
    }

    /// W11: synchronous best-effort shutdown for exit paths (atexit, guard drop): kills every
    /// child's process group and removes owned roots without waiting to reap.
    pub fn shutdown_now(&self) {
        let gens = self.inner.begin_shutdown();
        for g in gens {
            self.inner.retire(
                &g,
                RetirementReason::Shutdown,
                "the supervisor is shutting down",
                false,
            );
            // Only a child not yet reaped keeps its pid (and group id) from being reused.
            g.clean_now();
            lock(&self.inner.state).live.remove(&g.id);
        }
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
        let engine = st.current.as_ref().and_then(|g| match &*g.state.borrow() {
            GenerationState::Ready(r) => Some(r.engine.clone()),
            _ => None,
        });
        let (generation, pid, ready, age_ms, served, rss) = match &st.current {
            Some(g) => (
                Some(g.id),
                Some(g.pid),
                g.is_ready(),
                Some(ms(now.saturating_duration_since(g.started))),
                g.served.load(std::sync::atomic::Ordering::SeqCst),
                Some(g.last_rss.load(std::sync::atomic::Ordering::SeqCst)).filter(|r| *r > 0),
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
            quarantined: self.quarantine.len(),
            shut_down: st.shut_down,
        }
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
            g.clean_now();
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn outcome(ok: bool) -> Outcome {
    if ok { Outcome::Ok } else { Outcome::Failed }
}

/// The worker error a request caught by retirement `reason` of `generation` fails with (W8).
fn error_for_reason(reason: RetirementReason, generation: u64, detail: &str) -> WorkerError {
    WorkerError::new(
        reason.error_code(),
        format!("worker generation {generation} retired ({reason}): {detail}"),
    )
}

/// Records time found paused during a phase on its span (see [`super::ceiling`]).
fn note_paused(span: &mut Span, paused: Duration) {
    if !paused.is_zero() {
        span.attr(attr::PAUSED_MS, ms(paused));
        tracing::warn!(
            paused_ms = ms(paused),
            "this process was paused during a Waymark phase; the pause was not counted against the ceiling"
        );
    }
}

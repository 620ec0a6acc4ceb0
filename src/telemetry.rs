//! Perf-event telemetry (SPEC T1–T5): a bounded JSONL recorder of timing and lifecycle events,
//! an optional RSS memory file, and the status receipt that says how recording is configured.
//!
//! The event schema is documented in `docs/perf-events.md`; the console and outside tools read it.
//! Telemetry never changes transactions: a misconfiguration only marks the status invalid.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::chain::ChainWriter;
use crate::owned_fs::{Refusal, open_append_private};

/// T4: at most this many events are written to one perf-events file.
pub const MAX_EVENTS: u64 = 200_000;
/// T4: at most this many bytes are written to one perf-events file (64 MiB); the memory file
/// has the same byte bound of its own.
pub const MAX_EVENT_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes kept free below the byte bound for the one `telemetry_truncated` marker line: about
/// 200 bytes of event plus its 80-byte hash-chain field (V1), with room to spare.
const MARKER_RESERVE: u64 = 512;

/// The bounds of one recorder's files (T4). The product uses [`Limits::PRODUCT`]; tests may use
/// smaller ones through [`Recorder::configure_with_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Most events written to the events file (the truncation marker not counted).
    pub max_events: u64,
    /// Most bytes in the events file, marker included; also the memory file's bound. Must be
    /// larger than 256 (the marker's reserve).
    pub max_bytes: u64,
}

impl Limits {
    /// T4: [`MAX_EVENTS`] events and [`MAX_EVENT_BYTES`] bytes.
    pub const PRODUCT: Limits = Limits {
        max_events: MAX_EVENTS,
        max_bytes: MAX_EVENT_BYTES,
    };
}

/// Live counters of a recorder (for the status receipt and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecorderStats {
    /// Events written to the events file.
    pub written_events: u64,
    /// Bytes in the events file (marker included), counting what earlier processes appended to
    /// the same path: the byte bound holds for the file, not per process (T4).
    pub written_bytes: u64,
    /// Events dropped because a bound was reached.
    pub dropped_events: u64,
    /// RSS samples written to the memory file.
    pub memory_samples: u64,
    /// Bytes in the memory file, earlier processes' samples included.
    pub memory_bytes: u64,
}

/// Outcome of a timed event (T4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Failed,
}

/// T4/T5: the perf-event kinds the Waymark supervisor writes, by the names
/// `docs/perf-events.md` documents. Writers spell a name only through [`EventKind::as_str`];
/// readers (the console, preflight, trace export) match on [`EventKind::parse`], so writer and
/// reader cannot drift apart. Other components' spans (tool calls, store steps) keep free names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Point: a generation was spawned (`generation` id; `pid`, `mode`,
    /// `launches_in_window`, `script`).
    WorkerLaunch,
    /// Point, `failed`: a generation could not be started (`generation`; `code` — e.g.
    /// `WAYMARK_WORKER_SPAWN` —, `error` with the cause, `script`). Recorded the moment the
    /// launch fails, so a preflight reports the cause at once.
    WorkerLaunchFailed,
    /// Point: a generation reported readiness (`generation`; `pid`, `warmup_ms`, `mode`,
    /// `engine`).
    WorkerReady,
    /// Point: a generation was retired (`generation`; `reason`, `requests`, `pid`, `mode`,
    /// `detail`).
    WorkerRetired,
    /// Point: a sampled RSS (`generation`; `rss_bytes`, `limit_bytes`), every 10th sample.
    WorkerRss,
    /// Point: queue depth changed (`active`, `waiting`).
    WorkerQueueDepth,
    /// Point: stale generation roots were swept (`removed`, `kept`, …).
    WorkerStaleRoots,
    /// Point: a generation's cleanup failed (`code`, `error`).
    WorkerCleanup,
    /// Span: waiting for admission (`ceiling_ms`, `code` on failure).
    PhaseAdmission,
    /// Span: waiting for readiness (`ceiling_ms`, `prewarm`).
    PhaseReadiness,
    /// Span: the active request (`ceiling_ms`).
    PhaseActive,
    /// Span: the outer discovery allowance (`ceiling_ms`).
    PhaseOuter,
    /// Span: one discovery end to end (`language`, `bytes`, `mode`, `lock_holder`, `scopes`,
    /// `parse_ms`, `code` on failure).
    DiscoveryTotal,
    /// Span: reading the worker's answer (`timeout_ms`, `code` or `error` on failure).
    IpcRead,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 14] = [
        Self::WorkerLaunch,
        Self::WorkerLaunchFailed,
        Self::WorkerReady,
        Self::WorkerRetired,
        Self::WorkerRss,
        Self::WorkerQueueDepth,
        Self::WorkerStaleRoots,
        Self::WorkerCleanup,
        Self::PhaseAdmission,
        Self::PhaseReadiness,
        Self::PhaseActive,
        Self::PhaseOuter,
        Self::DiscoveryTotal,
        Self::IpcRead,
    ];

    /// The event's `name` on the wire, e.g. `worker_ready`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::WorkerLaunch => "worker_launch",
            Self::WorkerLaunchFailed => "worker_launch_failed",
            Self::WorkerReady => "worker_ready",
            Self::WorkerRetired => "worker_retired",
            Self::WorkerRss => "worker_rss",
            Self::WorkerQueueDepth => "worker_queue_depth",
            Self::WorkerStaleRoots => "worker_stale_roots",
            Self::WorkerCleanup => "worker_cleanup",
            Self::PhaseAdmission => "phase_admission",
            Self::PhaseReadiness => "phase_readiness",
            Self::PhaseActive => "phase_active",
            Self::PhaseOuter => "phase_outer",
            Self::DiscoveryTotal => "discovery_total",
            Self::IpcRead => "ipc_read",
        }
    }

    /// The kind named `name`, or `None` for any other event (another component's span).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// T5: the `ids` and `attrs` keys of the supervisor's events (see [`EventKind`]), written and
/// read by these names only.
pub mod attr {
    /// Id: the worker generation (W10).
    pub const GENERATION: &str = "generation";
    /// Id: the supervisor's request number.
    pub const REQUEST: &str = "request";
    /// The worker's process id.
    pub const PID: &str = "pid";
    /// `resident` or `oneshot` (W1).
    pub const MODE: &str = "mode";
    /// A retirement reason (`rss_limit`, `age_limit`, …; W4, W9–W11).
    pub const REASON: &str = "reason";
    /// Requests a generation served.
    pub const REQUESTS: &str = "requests";
    /// Free text explaining a retirement.
    pub const DETAIL: &str = "detail";
    /// Sampled RSS, bytes (W9).
    pub const RSS_BYTES: &str = "rss_bytes";
    /// The RSS limit, bytes (W9).
    pub const LIMIT_BYTES: &str = "limit_bytes";
    /// Requests being served (W5: at most 1).
    pub const ACTIVE: &str = "active";
    /// Requests waiting (W5: at most 8).
    pub const WAITING: &str = "waiting";
    /// A phase's ceiling, ms (W6).
    pub const CEILING_MS: &str = "ceiling_ms";
    /// A worker error code (`WAYMARK_WORKER_*`) or domain code on failure (W8).
    pub const CODE: &str = "code";
    /// Free text of an I/O or cleanup error.
    pub const ERROR: &str = "error";
    /// A readiness wait started by prewarm, not by a request.
    pub const PREWARM: &str = "prewarm";
    /// Stale roots removed.
    pub const REMOVED: &str = "removed";
    /// Stale roots kept (still owned by a live process).
    pub const KEPT: &str = "kept";
    /// The discovery's language.
    pub const LANGUAGE: &str = "language";
    /// Source size, bytes.
    pub const BYTES: &str = "bytes";
    /// The caller holds a target lock (W7).
    pub const LOCK_HOLDER: &str = "lock_holder";
    /// Who asked for a discovery: `ordinary`, `lock_holder` or `if_idle`.
    pub const CALLER: &str = "caller";
    /// Milliseconds this process was found paused during a phase, not counted against its
    /// ceiling (W6).
    pub const PAUSED_MS: &str = "paused_ms";
    /// Scopes found.
    pub const SCOPES: &str = "scopes";
    /// The worker's parse time, ms.
    pub const PARSE_MS: &str = "parse_ms";
    /// Launches in the rolling window (W10).
    pub const LAUNCHES_IN_WINDOW: &str = "launches_in_window";
    /// The entry script the generation runs.
    pub const SCRIPT: &str = "script";
    /// The active timeout that expired, ms (W6).
    pub const TIMEOUT_MS: &str = "timeout_ms";
    /// Startup warm-up time, ms.
    pub const WARMUP_MS: &str = "warmup_ms";
    /// The parser engine's version.
    pub const ENGINE: &str = "engine";
}

/// One line of the perf-events file (T4, T5).
///
/// `start_ms` is Unix time in milliseconds; `duration_ms` is wall time in milliseconds (0 for
/// point events such as `worker_ready`). `nested` marks a span that runs inside another recorded
/// span: nested durations are not additive CPU figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfEvent {
    pub name: String,
    pub start_ms: f64,
    pub duration_ms: f64,
    pub outcome: Outcome,
    /// Identifiers: `generation`, `request`, `target`, `request_key`, … (strings or numbers).
    #[serde(default)]
    pub ids: Map<String, Value>,
    #[serde(default)]
    pub nested: bool,
    /// Event-specific measurements, e.g. `{"waiting": 3}` for `worker_queue_depth`.
    #[serde(default)]
    pub attrs: Map<String, Value>,
    /// Pid of the recording process.
    #[serde(default)]
    pub pid: u32,
}

impl PerfEvent {
    /// A point event happening now (duration 0, outcome ok).
    pub fn point(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            start_ms: unix_ms_now(),
            duration_ms: 0.0,
            outcome: Outcome::Ok,
            ids: Map::new(),
            nested: false,
            attrs: Map::new(),
            pid: own_pid(),
        }
    }

    /// Adds an identifier (builder style).
    pub fn id(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.ids.insert(key.to_owned(), value.into());
        self
    }

    /// Adds an attribute (builder style).
    pub fn attr(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.attrs.insert(key.to_owned(), value.into());
        self
    }

    /// Sets the outcome (builder style).
    pub fn outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }
}

/// Current Unix time in milliseconds (fractional).
pub fn unix_ms_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// The recorder's configuration status, reported in the worker status receipt (T2, T3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelemetryStatus {
    /// True when events are being written.
    pub recording: bool,
    /// True when telemetry configuration is valid (T3).
    pub valid: bool,
    /// Why telemetry is invalid: `relative_events_path`, `invalid_memory_configuration`,
    /// `symlink`, `not_a_regular_file`, `not_owned_by_us`, `accessible_by_others` (the events or
    /// memory path is not a private regular file of ours; nothing was changed), `open_failed`.
    pub invalid_reason: Option<String>,
    /// One human-readable line saying what was wrong and what is accepted (absent when valid).
    #[serde(default)]
    pub invalid_detail: Option<String>,
    /// T2: whether RSS samples go to the memory file.
    pub memory_sampling_enabled: bool,
    /// T1: the absolute events path (also reported when it was refused).
    pub events_path: Option<PathBuf>,
    /// T2: `<events>.memory.jsonl` when sampling is on.
    pub memory_path: Option<PathBuf>,
    /// T4: the bounds in force (absent when not recording).
    #[serde(default)]
    pub limits: Option<Limits>,
}

/// T2: the `telemetry_status` point event (the status receipt as recorded in the events file):
/// `recording`, `valid`, `invalid_reason`, `memory_sampling_enabled`, `memory_path`; `failed`
/// when the configuration is invalid.
fn status_event(status: &TelemetryStatus) -> PerfEvent {
    PerfEvent::point("telemetry_status")
        .outcome(if status.valid {
            Outcome::Ok
        } else {
            Outcome::Failed
        })
        .attr("recording", status.recording)
        .attr("valid", status.valid)
        .attr("invalid_reason", status.invalid_reason.clone())
        .attr("memory_sampling_enabled", status.memory_sampling_enabled)
        .attr(
            "memory_path",
            status.memory_path.as_ref().map(|p| p.display().to_string()),
        )
}

impl TelemetryStatus {
    fn off() -> Self {
        Self {
            recording: false,
            valid: true,
            invalid_reason: None,
            invalid_detail: None,
            memory_sampling_enabled: false,
            events_path: None,
            memory_path: None,
            limits: None,
        }
    }

    fn invalid(reason: &str, detail: String, events_path: Option<PathBuf>) -> Self {
        Self {
            recording: false,
            valid: false,
            invalid_reason: Some(reason.to_owned()),
            invalid_detail: Some(detail),
            memory_sampling_enabled: false,
            events_path,
            memory_path: None,
            limits: None,
        }
    }
}

struct Sink {
    /// V1: chained, locked appends; a failed one is reported and later recorded
    /// as a gap record by the writer.
    events: ChainWriter,
    memory: Option<ChainWriter>,
    limits: Limits,
    stats: RecorderStats,
}

/// `PATCHDIFF_PERF_MEMORY` (T3): unset or `1` samples RSS, `0` records timing events only.
/// Anything else is an invalid status, also written as the one line of the events file (T2:
/// the file says why nothing else is recorded).
fn memory_sampling(memory: Option<&str>, events: &Path) -> Result<bool, Box<TelemetryStatus>> {
    match memory {
        None | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => {
            let status = TelemetryStatus::invalid(
                "invalid_memory_configuration",
                format!(
                    "{}={other:?} is not accepted; use `1` (sample \
                     RSS, the default) or `0` (timing events only)",
                    crate::config::Key::PerfMemory.variable()
                ),
                Some(events.to_path_buf()),
            );
            if let Ok(file) = open_append_private(events) {
                let mut line = serde_json::to_string(&status_event(&status)).unwrap_or_default();
                line.push('\n');
                let _ = (&file).write_all(line.as_bytes());
            }
            Err(Box::new(status))
        }
    }
}

impl Sink {
    /// Opens (0600, appending, T1) the events file and the memory file when sampling, counting
    /// what they already hold against the bounds (T4: a path reused across restarts stays
    /// bounded) and continuing each file's hash chain (V1).
    fn open(events: &Path, memory: Option<&Path>, limits: Limits) -> std::io::Result<Sink> {
        let events_file = open_append_private(events)?;
        let memory_file = memory.map(open_append_private).transpose()?;
        let existing = |f: &File| f.metadata().map(|m| m.len()).unwrap_or(0);
        let stats = RecorderStats {
            written_bytes: existing(&events_file),
            memory_bytes: memory_file.as_ref().map_or(0, existing),
            ..RecorderStats::default()
        };
        Ok(Sink {
            events: ChainWriter::new(events, events_file),
            memory: memory.zip(memory_file).map(|(p, f)| ChainWriter::new(p, f)),
            limits,
            stats,
        })
    }
}

/// V1: the length `body` (a serialized JSON object) has as a chained line, newline included.
fn chained_len(body: &str) -> u64 {
    crate::chain::chained(crate::chain::CHAIN_GENESIS, body).len() as u64
}

/// A cheap-to-clone handle that records perf events (T1–T5). A disabled recorder drops
/// everything at the cost of one branch.
#[derive(Clone, Default)]
pub struct Recorder {
    sink: Option<Arc<Mutex<Sink>>>,
    /// Optional in-process listener (the console and tests subscribe to lifecycle events).
    listener: Option<Listener>,
}

/// An in-process subscriber to every event (see [`Recorder::with_listener`]).
pub type Listener = Arc<dyn Fn(&PerfEvent) + Send + Sync>;

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("recording", &self.sink.is_some())
            .finish()
    }
}

impl Recorder {
    /// A recorder that writes nothing.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Builds the recorder from `PATCHDIFF_PERF_EVENTS` and `PATCHDIFF_PERF_MEMORY` as the
    /// process's [`Settings`] hold them (T1–T3). Never fails: a bad configuration yields a
    /// disabled recorder and an invalid status (a non-UTF-8 memory value is one).
    pub fn from_settings(settings: &crate::config::Settings) -> (Self, TelemetryStatus) {
        use crate::config::Key;
        let events = settings.get(Key::PerfEvents);
        let memory = settings
            .get(Key::PerfMemory)
            .map(|v| v.to_string_lossy().into_owned());
        Self::configure(events.map(Path::new), memory.as_deref())
    }

    /// Builds the recorder from explicit values of `PATCHDIFF_PERF_EVENTS` (`events`) and
    /// `PATCHDIFF_PERF_MEMORY` (`memory`: unset or `1` → sampling on, `0` → off, anything else →
    /// `invalid_memory_configuration`). The events file is created 0600 and appended to; the
    /// memory file is `<events>.memory.jsonl`, created only when sampling is on. An existing
    /// file must be a regular 0600 file of ours: a symlink, device, FIFO, directory, another
    /// user's file or a file others can read is refused untouched (see
    /// [`crate::owned_fs::open_append_private`]) and the status says why.
    pub fn configure(events: Option<&Path>, memory: Option<&str>) -> (Self, TelemetryStatus) {
        Self::configure_with_limits(events, memory, Limits::PRODUCT)
    }

    /// [`Recorder::configure`] with explicit file bounds (tests use small ones; the product
    /// always uses [`Limits::PRODUCT`]).
    pub fn configure_with_limits(
        events: Option<&Path>,
        memory: Option<&str>,
        limits: Limits,
    ) -> (Self, TelemetryStatus) {
        let Some(events) = events.filter(|p| !p.as_os_str().is_empty()) else {
            return (Self::disabled(), TelemetryStatus::off());
        };
        if !events.is_absolute() {
            return (
                Self::disabled(),
                TelemetryStatus::invalid(
                    "relative_events_path",
                    format!(
                        "{}={:?} is relative; give an absolute path",
                        crate::config::Key::PerfEvents.variable(),
                        events.display()
                    ),
                    Some(events.to_path_buf()),
                ),
            );
        }
        let memory_sampling = match memory_sampling(memory, events) {
            Ok(on) => on,
            Err(status) => return (Self::disabled(), *status),
        };
        let memory_path = memory_sampling.then(|| memory_path_for(events));
        match Sink::open(events, memory_path.as_deref(), limits) {
            Ok(sink) => {
                let recorder = Self {
                    sink: Some(Arc::new(Mutex::new(sink))),
                    listener: None,
                };
                let status = TelemetryStatus {
                    recording: true,
                    valid: true,
                    invalid_reason: None,
                    invalid_detail: None,
                    memory_sampling_enabled: memory_sampling,
                    events_path: Some(events.to_path_buf()),
                    memory_path,
                    limits: Some(limits),
                };
                // T2: the status receipt is the first thing this process records.
                recorder.record(status_event(&status));
                (recorder, status)
            }
            Err(e) => {
                let reason = Refusal::of(&e).map_or("open_failed", Refusal::code);
                (
                    Self::disabled(),
                    TelemetryStatus::invalid(
                        reason,
                        format!("perf-event recording is off: {e}"),
                        Some(events.to_path_buf()),
                    ),
                )
            }
        }
    }

    /// Returns a copy that also calls `listener` for every event (recorded or not).
    pub fn with_listener(mut self, listener: Listener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// True when events are written to a file.
    pub fn is_recording(&self) -> bool {
        self.sink.is_some()
    }

    /// Live counters; all zero for a disabled recorder.
    pub fn stats(&self) -> RecorderStats {
        match &self.sink {
            Some(sink) => sink.lock().unwrap_or_else(|e| e.into_inner()).stats,
            None => RecorderStats::default(),
        }
    }

    /// Records one event (T4). Past the recorder's [`Limits`] events are dropped and counted;
    /// one `telemetry_truncated` marker line is written when a bound is first hit, so the file
    /// never exceeds `max_bytes`.
    pub fn record(&self, event: PerfEvent) {
        if let Some(listener) = &self.listener {
            listener(&event);
        }
        let Some(sink) = &self.sink else { return };
        let Ok(line) = serde_json::to_string(&event) else {
            return;
        };
        // An event's attributes may echo what the agent sent (a request key holding a
        // credential); the line passes this process's redactor before it is written.
        let line = crate::redact::process().redact(&line).into_owned();
        let mut sink = sink.lock().unwrap_or_else(|e| e.into_inner());
        let limits = sink.limits;
        let byte_room = limits.max_bytes.saturating_sub(MARKER_RESERVE);
        let fits = sink.stats.written_events < limits.max_events
            && sink.stats.written_bytes + chained_len(&line) <= byte_room;
        if !fits {
            if sink.stats.dropped_events == 0 {
                let marker = PerfEvent::point("telemetry_truncated")
                    .outcome(Outcome::Failed)
                    .attr("max_events", limits.max_events)
                    .attr("max_bytes", limits.max_bytes);
                if let Ok(m) = serde_json::to_string(&marker)
                    && sink.stats.written_bytes + chained_len(&m) <= limits.max_bytes
                    && let Ok(len) = sink.events.append(&m, None)
                {
                    sink.stats.written_bytes += len;
                }
            }
            sink.stats.dropped_events += 1;
            return;
        }
        if let Ok(len) = sink.events.append(&line, None) {
            sink.stats.written_events += 1;
            sink.stats.written_bytes += len;
        }
    }

    /// Writes one diagnostic RSS sample (bytes) for `pid` to the memory file, when sampling is on
    /// (T2). The memory file has its own byte bound (`max_bytes`); samples past it are dropped.
    pub fn record_memory(&self, pid: u32, rss_bytes: u64, ids: Map<String, Value>) {
        let Some(sink) = &self.sink else { return };
        let mut sink = sink.lock().unwrap_or_else(|e| e.into_inner());
        if sink.memory.is_none() {
            return;
        }
        let sample = serde_json::json!({
            "ts_ms": unix_ms_now(), "pid": pid, "rss_bytes": rss_bytes, "ids": ids,
        });
        let line = sample.to_string();
        if sink.stats.memory_bytes + chained_len(&line) > sink.limits.max_bytes {
            return;
        }
        let written = sink.memory.as_mut().map(|mem| mem.append(&line, None));
        if let Some(Ok(len)) = written {
            sink.stats.memory_bytes += len;
            sink.stats.memory_samples += 1;
        }
    }

    /// Starts a timed span; finish it with [`Span::finish`]. Dropping an unfinished span records
    /// it as failed (cancellation, T4).
    pub fn span(&self, name: &str) -> Span {
        // With no file and no listener nothing would see the event: none is built (a
        // discovery opens six spans; their maps and clock reads are the bench's overhead).
        let seen = self.sink.is_some() || self.listener.is_some();
        Span {
            recorder: self.clone(),
            event: seen.then(|| PerfEvent::point(name)),
            started: Instant::now(),
        }
    }
}

/// A timed event under way (see [`Recorder::span`]).
pub struct Span {
    recorder: Recorder,
    event: Option<PerfEvent>,
    started: Instant,
}

impl Span {
    /// Adds an identifier.
    pub fn id(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        if let Some(e) = self.event.as_mut() {
            e.ids.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Adds an attribute.
    pub fn attr(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        if let Some(e) = self.event.as_mut() {
            e.attrs.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Marks the span as nested inside another recorded span (T4).
    pub fn nested(&mut self) -> &mut Self {
        if let Some(e) = self.event.as_mut() {
            e.nested = true;
        }
        self
    }

    /// Records the span with its elapsed duration and `outcome`.
    pub fn finish(mut self, outcome: Outcome) {
        self.emit(outcome);
    }

    fn emit(&mut self, outcome: Outcome) {
        if let Some(mut e) = self.event.take() {
            e.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
            e.outcome = outcome;
            self.recorder.record(e);
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if self.event.is_some() {
            if let Some(e) = self.event.as_mut() {
                e.attrs.insert("cancelled".into(), Value::Bool(true));
            }
            self.emit(Outcome::Failed);
        }
    }
}

/// This process's id, read once (`std::process::id` is a system call each time; events carry
/// it on every line).
fn own_pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// The memory file's path for an events path: `<events>.memory.jsonl` beside it (T2).
pub fn memory_path_for(events: &Path) -> PathBuf {
    let mut name = events.file_name().unwrap_or_default().to_os_string();
    name.push(".memory.jsonl");
    events.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_round_trip_through_their_documented_names() {
        // T5: the names docs/perf-events.md documents, written as the spec spells them.
        let documented = [
            "worker_launch",
            "worker_launch_failed",
            "worker_ready",
            "worker_retired",
            "worker_rss",
            "worker_queue_depth",
            "worker_stale_roots",
            "worker_cleanup",
            "phase_admission",
            "phase_readiness",
            "phase_active",
            "phase_outer",
            "discovery_total",
            "ipc_read",
        ];
        let names: Vec<&str> = EventKind::ALL.into_iter().map(EventKind::as_str).collect();
        assert_eq!(names, documented);
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventKind::parse("tool_call"), None);
        let doc = include_str!("../docs/perf-events.md");
        for name in documented {
            assert!(
                doc.contains(&format!("`{name}`")),
                "{name} is not documented"
            );
        }
    }
}

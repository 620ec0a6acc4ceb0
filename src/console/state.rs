//! What the console knows about a live canary, as plain data (SPEC U2, T5): the worker's queue,
//! phase timers, generations, RSS, launches and retirements, per-event statistics and the live
//! tail — all derived from perf-event and memory-file lines. No rendering, no I/O and no clock
//! reads here: callers pass `now_ms` (Unix ms), so every rule is unit-tested with an injected clock.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

pub use super::limits::{
    GENERATION_MAX_AGE_MS, HIGH_FRACTION, LAUNCH_WINDOW_MS, LOCK_HOLDER_ADMISSION_MS, Level,
    MAX_LAUNCHES_PER_MINUTE, OLD_SPACE_BYTES, Phase, PhaseTimer, QUEUE_ACTIVE_MAX,
    QUEUE_WAITING_MAX, RSS_LIMIT_BYTES,
};
use super::ring::Ring;
use crate::telemetry::{EventKind, attr};
use crate::telemetry::{Outcome, PerfEvent};
use crate::waymark::error::WorkerErrorCode;

/// Live-tail lines kept.
pub const TAIL_CAPACITY: usize = 512;
/// Queue depths kept for the worker pane's sparkline.
pub const QUEUE_DEPTHS_KEPT: usize = 64;
/// RSS samples kept (the memory file samples every 100 ms: 2 minutes).
pub const RSS_CAPACITY: usize = 1200;
/// Durations kept per event name for percentiles.
pub const DURATIONS_PER_NAME: usize = 4096;
/// Distinct event names tracked; further names are folded into `(other)`.
pub const MAX_EVENT_NAMES: usize = 48;
/// Retirements and launches kept.
pub const HISTORY_CAPACITY: usize = 64;
pub use super::tail_item::MAX_LINE_BYTES;

/// What the worker is doing, from lifecycle events (W10, T5).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WorkerState {
    /// No `worker_launch` seen.
    #[default]
    None,
    /// Launched, not yet ready (readiness phase).
    Starting,
    /// `worker_ready` seen for the current generation.
    Ready,
    /// The current generation retired (reason).
    Retired(String),
}

impl WorkerState {
    pub fn word(&self) -> &str {
        match self {
            WorkerState::None => "not started",
            WorkerState::Starting => "starting",
            WorkerState::Ready => "ready",
            WorkerState::Retired(_) => "retired",
        }
    }
}

/// The current worker generation (W10).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkerView {
    pub generation: Option<u64>,
    pub pid: Option<u64>,
    pub mode: Option<String>,
    /// Unix ms of `worker_launch`.
    pub launched_ms: Option<f64>,
    /// Readiness time reported by `worker_ready` (ms).
    pub ready_after_ms: Option<f64>,
    pub state: WorkerState,
}

impl WorkerView {
    /// Age of the generation at `now_ms` (ms), while it lives.
    pub fn age_ms(&self, now_ms: f64) -> Option<f64> {
        match self.state {
            WorkerState::Starting | WorkerState::Ready => {
                self.launched_ms.map(|t| (now_ms - t).max(0.0))
            }
            _ => None,
        }
    }
}

/// One generation retirement (W4, W10).
#[derive(Debug, Clone, PartialEq)]
pub struct Retirement {
    pub ts_ms: f64,
    /// The MCP process that recorded it (`PerfEvent::pid`), so `gen 1` of two processes that
    /// shared an events file can be told apart (U2).
    pub pid: Option<u64>,
    /// The worker process's own pid (`attrs.pid`), when the event names it.
    pub worker_pid: Option<u64>,
    pub generation: Option<u64>,
    pub reason: String,
    pub requests: Option<u64>,
    /// False for unexpected reasons (protocol fault, RSS limit, …).
    pub expected: bool,
}

/// Counters and recent durations for one event name.
#[derive(Debug, Clone)]
pub struct EventStats {
    pub count: u64,
    pub failed: u64,
    /// Durations (ms) of timed events, or the values of a gauge (see [`Unit`]).
    durations: Ring<f64>,
    unit: Unit,
}

/// What an event's percentiles measure: durations in ms, or a gauge in its own unit
/// (`worker_rss` bytes, `worker_queue_depth` requests) — a point event's duration is 0 and says
/// nothing (U2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unit {
    #[default]
    Ms,
    Bytes,
    Count,
}

impl Unit {
    /// The gauge an event carries, with its value, if it is one.
    pub fn gauge_of(ev: &PerfEvent) -> Option<(Unit, f64)> {
        match EventKind::parse(&ev.name) {
            Some(EventKind::WorkerRss) => {
                attr_u64(&ev.attrs, attr::RSS_BYTES).map(|b| (Unit::Bytes, b as f64))
            }
            Some(EventKind::WorkerQueueDepth) => {
                let active = attr_u64(&ev.attrs, attr::ACTIVE).unwrap_or(0);
                let waiting = attr_u64(&ev.attrs, attr::WAITING).unwrap_or(0);
                Some((Unit::Count, (active + waiting) as f64))
            }
            _ => None,
        }
    }
}

impl EventStats {
    fn new() -> Self {
        Self {
            count: 0,
            failed: 0,
            durations: Ring::new(DURATIONS_PER_NAME),
            unit: Unit::Ms,
        }
    }
}

/// One row of the per-event table: totals and percentiles of the recent durations (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct StatRow {
    /// The source (process) the figures are of: sources are never mixed in one row.
    pub source: String,
    pub name: String,
    /// Events of the source's current process (its session).
    pub count: u64,
    /// Events of this source over the whole run, across relaunches.
    pub total: u64,
    pub failed: u64,
    /// The unit of the percentiles.
    pub unit: Unit,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// One live-tail line.
#[derive(Debug, Clone, PartialEq)]
pub struct TailLine {
    pub ts_ms: f64,
    /// Which file it came from (`observed`, `full`, …).
    pub source: String,
    pub name: String,
    pub duration_ms: f64,
    /// A gauge's value in its unit (`worker_rss` bytes, queue depth): shown instead of the
    /// duration, which for a gauge says nothing.
    pub gauge: Option<(Unit, f64)>,
    pub ok: bool,
    /// Ids and notable attributes, compact.
    pub detail: String,
}

/// One memory-file sample `{ts_ms, pid, rss_bytes, ids}` (T2).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct MemorySample {
    pub ts_ms: f64,
    #[serde(default)]
    pub pid: u64,
    pub rss_bytes: u64,
}

/// Nearest-rank percentile of an ascending-sorted slice (`q` in 0..=1); 0 for an empty slice.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Everything the monitoring panes show, derived from perf events and memory samples.
#[derive(Debug, Clone)]
pub struct Monitor {
    /// W5 queue: active (0/1) and waiting (0..=8) requests.
    pub queue_active: u64,
    pub queue_waiting: u64,
    /// Queue saturation over the run (U2): the most requests seen waiting, and the
    /// requests refused for a full queue or expired in it (from `discovery_total` codes).
    pub queue_peak_waiting: u64,
    pub queue_full: u64,
    pub queue_expired: u64,
    /// Recent waiting depths, oldest first, for a sparkline.
    pub queue_depths: Ring<u64>,
    pub phases: [PhaseTimer; 4],
    pub worker: WorkerView,
    /// Unix ms of recent `worker_launch` events (rolling-minute count, W10).
    pub launches: Ring<f64>,
    pub retirements: Ring<Retirement>,
    /// (Unix ms, RSS bytes) samples of the worker.
    pub rss: Ring<(f64, u64)>,
    /// RSS limit (bytes) as reported by `worker_rss`, else W9's 1 GiB.
    pub rss_limit: u64,
    /// Per source, per event name: statistics of that source's current process only (a new
    /// pid on a source starts them afresh, as a restart is a new process).
    stats: BTreeMap<String, BTreeMap<String, EventStats>>,
    /// The source whose worker the worker pane shows (the last to launch one).
    pub worker_source: Option<String>,
    /// Sessions seen: one per (source, pid) — a process that appended to a file another
    /// process wrote before starts a new one (a restart is a new process).
    pub sessions: u64,
    /// Percentile table, recomputed by [`Monitor::refresh`] (not while drawing).
    pub stat_rows: Vec<StatRow>,
    stats_dirty: bool,
    pub tail: Ring<TailLine>,
    /// Lines that were not valid events (counted, never fatal).
    pub malformed: u64,
    pub last_malformed: Option<String>,
    /// Events ingested.
    pub ingested: u64,
    /// Pid of the process recording each source's events (`PerfEvent::pid`).
    pub recorders: BTreeMap<String, u64>,
    /// Each source's latest worker generation and its pid (`worker_launch`), so every worker
    /// generation alive has a row, not only the one the worker pane shows.
    pub workers: BTreeMap<String, (Option<u64>, Option<u64>)>,
    /// Events per (source, name) over the run: never restarted by a relaunch.
    totals: BTreeMap<(String, String), u64>,
    /// Per source: how many times a new process took it over (its figures restarted then).
    pub relaunches: BTreeMap<String, u64>,
}

impl Default for Monitor {
    fn default() -> Self {
        Self::new()
    }
}

impl Monitor {
    pub fn new() -> Self {
        Self {
            queue_active: 0,
            queue_waiting: 0,
            queue_peak_waiting: 0,
            queue_full: 0,
            queue_expired: 0,
            queue_depths: Ring::new(QUEUE_DEPTHS_KEPT),
            phases: Phase::ALL.map(PhaseTimer::new),
            worker: WorkerView::default(),
            launches: Ring::new(HISTORY_CAPACITY),
            retirements: Ring::new(HISTORY_CAPACITY),
            rss: Ring::new(RSS_CAPACITY),
            rss_limit: RSS_LIMIT_BYTES,
            stats: BTreeMap::new(),
            worker_source: None,
            sessions: 0,
            stat_rows: Vec::new(),
            stats_dirty: false,
            tail: Ring::new(TAIL_CAPACITY),
            malformed: 0,
            last_malformed: None,
            ingested: 0,
            recorders: BTreeMap::new(),
            workers: BTreeMap::new(),
            totals: BTreeMap::new(),
            relaunches: BTreeMap::new(),
        }
    }

    /// The timer for `phase`.
    pub fn phase(&self, phase: Phase) -> &PhaseTimer {
        &self.phases[phase.index()]
    }

    fn phase_mut(&mut self, phase: Phase) -> &mut PhaseTimer {
        &mut self.phases[phase.index()]
    }

    /// W10: launches within the rolling minute ending at `now_ms`.
    pub fn launches_in_window(&self, now_ms: f64) -> usize {
        self.launches
            .iter()
            .filter(|&&t| t > now_ms - LAUNCH_WINDOW_MS && t <= now_ms + 1.0)
            .count()
    }

    /// The latest RSS sample (bytes).
    pub fn rss_now(&self) -> Option<u64> {
        self.rss.last().map(|&(_, b)| b)
    }

    /// Ingests one item the tailer read from `source`'s perf-events file: a line is parsed
    /// ([`Monitor::ingest_line`]); a line that could not be read counts as malformed.
    pub fn ingest_item(&mut self, source: &str, item: &super::tail_item::TailItem) {
        use super::tail_item::TailItem;
        match item {
            TailItem::Line(l) => self.ingest_line(source, l),
            TailItem::Oversize => self.note_malformed(
                source,
                &format!("a line over {MAX_LINE_BYTES} bytes was skipped"),
            ),
            TailItem::NotUtf8 => {
                self.note_malformed(source, "a line that is not UTF-8 was skipped")
            }
        }
    }

    /// Ingests one item the tailer read from a memory file (T2).
    pub fn ingest_memory_item(&mut self, item: &super::tail_item::TailItem) {
        use super::tail_item::TailItem;
        match item {
            TailItem::Line(l) => self.ingest_memory_line(l),
            TailItem::Oversize | TailItem::NotUtf8 => {
                self.note_malformed("memory", "a line that is not a sample was skipped")
            }
        }
    }

    /// Parses and ingests one perf-events line from `source`. Blank lines are skipped; lines
    /// that are not events are counted in [`Monitor::malformed`] and otherwise ignored.
    pub fn ingest_line(&mut self, source: &str, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        if line.len() > MAX_LINE_BYTES {
            self.note_malformed(
                source,
                &format!("a line over {MAX_LINE_BYTES} bytes was skipped"),
            );
            return;
        }
        match serde_json::from_str::<PerfEvent>(line) {
            Ok(ev) => self.ingest(source, &ev),
            Err(e) => self.note_malformed(source, &e.to_string()),
        }
    }

    fn note_malformed(&mut self, source: &str, why: &str) {
        self.malformed += 1;
        self.last_malformed = Some(format!("{source}: {why}"));
    }

    /// Parses and ingests one memory-file line (T2); malformed lines are counted.
    pub fn ingest_memory_line(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        match serde_json::from_str::<MemorySample>(line) {
            Ok(s) => self.push_rss(s.ts_ms, s.rss_bytes),
            Err(e) => self.note_malformed("memory", &e.to_string()),
        }
    }

    fn push_rss(&mut self, ts_ms: f64, bytes: u64) {
        // Memory-file samples and `worker_rss` events interleave; keep the series in time order.
        if self.rss.last().is_some_and(|&(t, _)| ts_ms < t) {
            return;
        }
        self.rss.push((ts_ms, bytes));
    }

    /// Ingests one event (T4, T5).
    pub fn ingest(&mut self, source: &str, ev: &PerfEvent) {
        self.ingested += 1;
        self.note_recorder(source, ev.pid);
        let ok = ev.outcome == Outcome::Ok;
        let ts = ev.start_ms;
        let end = ev.start_ms + ev.duration_ms.max(0.0);
        let gauge = Unit::gauge_of(ev);
        match gauge {
            Some((unit, value)) => self.record_stats(source, &ev.name, value, ok, unit),
            None => self.record_stats(source, &ev.name, ev.duration_ms, ok, Unit::Ms),
        }
        match EventKind::parse(&ev.name) {
            Some(EventKind::WorkerQueueDepth) => self.on_queue_depth(ev, ts),
            Some(EventKind::WorkerLaunch) => self.on_launch(source, ev, ts),
            Some(EventKind::WorkerReady) => self.on_ready(ev),
            Some(EventKind::WorkerRetired) => self.on_retired(ev, ts, ok),
            Some(EventKind::WorkerRss) => {
                if let Some(limit) = attr_u64(&ev.attrs, attr::LIMIT_BYTES).filter(|&l| l > 0) {
                    self.rss_limit = limit;
                }
                if let Some(bytes) = attr_u64(&ev.attrs, attr::RSS_BYTES) {
                    self.push_rss(ts, bytes);
                }
            }
            Some(EventKind::DiscoveryTotal) => {
                match ev.attrs.get(attr::CODE).and_then(Value::as_str) {
                    Some(c) if c == WorkerErrorCode::QueueFull.as_str() => self.queue_full += 1,
                    Some(c) if c == WorkerErrorCode::QueueExpired.as_str() => {
                        self.queue_expired += 1
                    }
                    _ => {}
                }
            }
            _ => {
                if let Some(phase) = Phase::from_event(&ev.name) {
                    self.record_phase(phase, ev, end);
                }
            }
        }
        self.tail.push(TailLine {
            ts_ms: ts,
            source: source.to_owned(),
            name: ev.name.clone(),
            duration_ms: ev.duration_ms,
            gauge,
            ok,
            detail: detail_of(ev),
        });
    }

    /// W5: the queue's depth; starts and stops the admission, active and outer timers.
    fn on_queue_depth(&mut self, ev: &PerfEvent, ts: f64) {
        let active = attr_u64(&ev.attrs, attr::ACTIVE).unwrap_or(0);
        let waiting = attr_u64(&ev.attrs, attr::WAITING).unwrap_or(0);
        if active > 0 && self.queue_active == 0 {
            self.phase_mut(Phase::Active).running_since_ms = Some(ts);
            self.phase_mut(Phase::Outer).running_since_ms = Some(ts);
        } else if active == 0 {
            self.phase_mut(Phase::Active).running_since_ms = None;
            self.phase_mut(Phase::Outer).running_since_ms = None;
        }
        if waiting > 0 && self.queue_waiting == 0 {
            self.phase_mut(Phase::Admission).running_since_ms = Some(ts);
        } else if waiting == 0 {
            self.phase_mut(Phase::Admission).running_since_ms = None;
        }
        self.queue_active = active;
        self.queue_waiting = waiting;
        self.queue_peak_waiting = self.queue_peak_waiting.max(waiting);
        self.queue_depths.push(waiting);
    }

    /// A new generation: the worker view restarts and the readiness timer runs (W1, W10).
    fn on_launch(&mut self, source: &str, ev: &PerfEvent, ts: f64) {
        self.worker_source = Some(source.to_owned());
        self.workers.insert(
            source.to_owned(),
            (
                id_u64(&ev.ids, attr::GENERATION),
                attr_u64(&ev.attrs, attr::PID),
            ),
        );
        self.launches.push(ts);
        self.worker = WorkerView {
            generation: id_u64(&ev.ids, attr::GENERATION),
            pid: attr_u64(&ev.attrs, attr::PID),
            mode: ev
                .attrs
                .get(attr::MODE)
                .and_then(Value::as_str)
                .map(str::to_owned),
            launched_ms: Some(ts),
            ready_after_ms: None,
            state: WorkerState::Starting,
        };
        self.phase_mut(Phase::Readiness).running_since_ms = Some(ts);
    }

    /// The current generation became ready (W2).
    fn on_ready(&mut self, ev: &PerfEvent) {
        let generation = id_u64(&ev.ids, attr::GENERATION);
        if generation.is_none() || generation == self.worker.generation {
            self.worker.state = WorkerState::Ready;
            self.worker.ready_after_ms = Some(ev.duration_ms);
            if self.worker.pid.is_none() {
                self.worker.pid = attr_u64(&ev.attrs, attr::PID);
            }
        }
        self.phase_mut(Phase::Readiness).running_since_ms = None;
    }

    /// A retirement row (with the recording pid); the current generation's ends its timers.
    fn on_retired(&mut self, ev: &PerfEvent, ts: f64, ok: bool) {
        let generation = id_u64(&ev.ids, attr::GENERATION);
        let reason = ev
            .attrs
            .get(attr::REASON)
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned();
        self.retirements.push(Retirement {
            ts_ms: ts,
            pid: (ev.pid != 0).then_some(u64::from(ev.pid)),
            worker_pid: attr_u64(&ev.attrs, attr::PID),
            generation,
            reason: reason.clone(),
            requests: attr_u64(&ev.attrs, attr::REQUESTS),
            expected: ok,
        });
        if generation.is_none() || generation == self.worker.generation {
            self.worker.state = WorkerState::Retired(reason);
            self.phase_mut(Phase::Readiness).running_since_ms = None;
            self.queue_active = 0;
            self.phase_mut(Phase::Active).running_since_ms = None;
            self.phase_mut(Phase::Outer).running_since_ms = None;
        }
    }

    fn record_stats(&mut self, source: &str, name: &str, duration_ms: f64, ok: bool, unit: Unit) {
        let per_source = match self.stats.get_mut(source) {
            Some(s) => s,
            None => self.stats.entry(source.to_owned()).or_default(),
        };
        let key = if per_source.contains_key(name) || per_source.len() < MAX_EVENT_NAMES {
            name
        } else {
            "(other)"
        };
        let stats = match per_source.get_mut(key) {
            Some(s) => s,
            None => per_source
                .entry(key.to_owned())
                .or_insert_with(EventStats::new),
        };
        stats.count += 1;
        stats.unit = unit;
        let key = (source.to_owned(), key.to_owned());
        *self.totals.entry(key).or_default() += 1;
        if !ok {
            stats.failed += 1;
        }
        if duration_ms.is_finite() {
            stats.durations.push(duration_ms);
        }
        self.stats_dirty = true;
    }

    /// Recomputes the percentile table when events arrived since the last call. Called once per
    /// frame before drawing (drawing itself never mutates state).
    pub fn refresh(&mut self) {
        if !self.stats_dirty {
            return;
        }
        self.stats_dirty = false;
        let mut scratch: Vec<f64> = Vec::with_capacity(DURATIONS_PER_NAME);
        // One row per (source, name): the figures of one process are never mixed with another's
        // (export's trivial calls on the full process would pull the observed one's p50 down).
        let mut rows = Vec::new();
        for (source, per_source) in &self.stats {
            for (name, s) in per_source {
                scratch.clear();
                scratch.extend(s.durations.iter().copied());
                scratch.sort_by(f64::total_cmp);
                rows.push(StatRow {
                    source: source.clone(),
                    name: name.clone(),
                    count: s.count,
                    total: self
                        .totals
                        .get(&(source.clone(), name.clone()))
                        .copied()
                        .unwrap_or(s.count),
                    failed: s.failed,
                    unit: s.unit,
                    p50: percentile(&scratch, 0.50),
                    p95: percentile(&scratch, 0.95),
                    p99: percentile(&scratch, 0.99),
                });
            }
        }
        self.stat_rows = rows;
        // Busiest first, so the table's top rows are the ones that matter.
        self.stat_rows.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.name.cmp(&b.name))
                .then(a.source.cmp(&b.source))
        });
    }
}

impl Monitor {
    /// Notes which process (`pid`, 0 = unknown) records `source`'s events. A different pid on
    /// a source that had one is a new process appending to the same file (a relaunch, or an
    /// attached file reused by another server): its session starts afresh ([`Monitor::start_session`]).
    fn note_recorder(&mut self, source: &str, pid: u32) {
        if pid == 0 {
            return;
        }
        let pid = u64::from(pid);
        match self.recorders.insert(source.to_owned(), pid) {
            Some(old) if old == pid => {}
            Some(_) => {
                self.sessions += 1;
                *self.relaunches.entry(source.to_owned()).or_default() += 1;
                self.start_session(source);
            }
            None => self.sessions += 1,
        }
    }

    /// Starts a fresh session for `source`'s new process: its event statistics, and — when it
    /// is the source the worker pane shows — the queue, phase timers, worker view, launch window
    /// (W10 counts one supervisor's launches), queue saturation and RSS series. Retirements are
    /// kept: each row carries the pid that recorded it.
    pub fn start_session(&mut self, source: &str) {
        self.stats.remove(source);
        self.stats_dirty = true;
        if self.worker_source.as_deref().is_none_or(|s| s == source) {
            // The live queue restarts; its saturation (peak, QUEUE_FULL/QUEUE_EXPIRED counts,
            // the depth sparkline) is remembered over the run (U2).
            self.queue_active = 0;
            self.queue_waiting = 0;
            self.phases = Phase::ALL.map(PhaseTimer::new);
            self.worker = WorkerView::default();
            self.launches = Ring::new(HISTORY_CAPACITY);
            self.rss = Ring::new(RSS_CAPACITY);
        }
    }

    /// A completed phase span (W6, W7). The timer's ceiling is the ordinary one (the event's
    /// configured ceiling, W6's default until one arrives), so its label keeps one meaning; a
    /// lock holder's admission ceiling (W7: 250 ms) is kept only as the last span's ceiling.
    fn record_phase(&mut self, phase: Phase, ev: &PerfEvent, end: f64) {
        let ok = ev.outcome == Outcome::Ok;
        let ceiling = ev
            .attrs
            .get(attr::CEILING_MS)
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c > 0.0);
        let t = self.phase_mut(phase);
        // W7: an admission with the lock holder's short ceiling is not an ordinary one.
        let ordinary =
            phase != Phase::Admission || ceiling.is_some_and(|c| c > LOCK_HOLDER_ADMISSION_MS);
        if let Some(c) = ceiling.filter(|_| ordinary) {
            t.ceiling_ms = c;
        }
        t.last_ceiling_ms = ceiling.unwrap_or(t.ceiling_ms);
        t.last_ms = Some(ev.duration_ms);
        t.last_ok = ok;
        t.max_ms = t.max_ms.max(ev.duration_ms);
        if t.running_since_ms.is_some_and(|s| s <= end) && phase != Phase::Admission {
            t.running_since_ms = None;
        }
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn attr_u64(attrs: &Map<String, Value>, key: &str) -> Option<u64> {
    attrs.get(key).and_then(as_u64)
}

fn id_u64(ids: &Map<String, Value>, key: &str) -> Option<u64> {
    ids.get(key).and_then(as_u64)
}

/// A compact `k=v` rendering of an event's ids and notable attributes, at most 96 chars.
fn detail_of(ev: &PerfEvent) -> String {
    const NOTABLE: [&str; 8] = [
        "active",
        "waiting",
        "reason",
        "requests",
        "rss_bytes",
        "tool",
        "code",
        "cancelled",
    ];
    let mut out = String::new();
    let pairs = ev.ids.iter().chain(
        ev.attrs
            .iter()
            .filter(|(k, _)| NOTABLE.contains(&k.as_str())),
    );
    for (k, v) in pairs {
        if !out.is_empty() {
            out.push(' ');
        }
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(k);
        out.push('=');
        out.push_str(&v);
        if out.len() > 96 {
            let mut cut = 95;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn console_limits_are_the_spec_figures_from_waymark_limits() {
        // W5, W9, W10 written as the spec states them.
        assert_eq!(super::QUEUE_WAITING_MAX, 8);
        assert_eq!(super::RSS_LIMIT_BYTES, 1_073_741_824);
        assert_eq!(super::OLD_SPACE_BYTES, 768 * 1_048_576);
        assert_eq!(super::MAX_LAUNCHES_PER_MINUTE, 3);
        assert_eq!(super::LAUNCH_WINDOW_MS, 60_000.0);
        assert_eq!(super::GENERATION_MAX_AGE_MS, 3_600_000.0);
    }

    use super::*;
    use serde_json::json;

    /// A phase event `name` started at `start_ms`, taking `duration_ms`, under `ceiling_ms`.
    fn phase_ev(name: &str, start_ms: f64, duration_ms: f64, ceiling_ms: u64) -> PerfEvent {
        let attrs = json!({ "ceiling_ms": ceiling_ms });
        ev(name, start_ms, duration_ms, attrs, json!({}))
    }

    fn ev(name: &str, start_ms: f64, duration_ms: f64, attrs: Value, ids: Value) -> PerfEvent {
        let mut e = PerfEvent::point(name);
        e.start_ms = start_ms;
        e.duration_ms = duration_ms;
        e.attrs = attrs.as_object().cloned().unwrap_or_default();
        e.ids = ids.as_object().cloned().unwrap_or_default();
        e
    }

    #[test]
    fn queue_saturation_is_remembered_after_the_queue_drains() {
        let mut m = Monitor::new();
        for (i, waiting) in [0u64, 3, 8, 2, 0].iter().enumerate() {
            m.ingest(
                "observed",
                &ev(
                    "worker_queue_depth",
                    i as f64,
                    0.0,
                    json!({"active": 1, "waiting": waiting}),
                    json!({}),
                ),
            );
        }
        for code in [
            "WAYMARK_WORKER_QUEUE_FULL",
            "WAYMARK_WORKER_QUEUE_FULL",
            "WAYMARK_WORKER_QUEUE_EXPIRED",
            "WAYMARK_WORKER_PROTOCOL",
        ] {
            m.ingest(
                "observed",
                &ev(
                    "discovery_total",
                    9.0,
                    1.0,
                    json!({"code": code}),
                    json!({}),
                ),
            );
        }
        assert_eq!(m.queue_waiting, 0);
        assert_eq!(m.queue_peak_waiting, 8);
        assert_eq!((m.queue_full, m.queue_expired), (2, 1));
        assert_eq!(
            m.queue_depths.iter().copied().collect::<Vec<_>>(),
            [0, 3, 8, 2, 0]
        );
    }

    #[test]
    fn level_turns_high_at_75_percent_and_limit_at_the_ceiling() {
        assert_eq!(Level::of(1_499.0, 2_000.0), Level::Ok);
        assert_eq!(Level::of(1_500.0, 2_000.0), Level::High);
        assert_eq!(Level::of(2_000.0, 2_000.0), Level::Limit);
        assert_eq!(Level::of(5.0, 0.0), Level::Ok);
        assert_eq!(Level::of(f64::NAN, 10.0), Level::Ok);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.50), 50.0);
        assert_eq!(percentile(&v, 0.95), 95.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn stat_rows_count_failures_and_sort_busiest_first() {
        let mut m = Monitor::new();
        for i in 0..10 {
            let mut e = ev("ipc_read", 0.0, f64::from(i), json!({}), json!({}));
            if i == 9 {
                e.outcome = Outcome::Failed;
            }
            m.ingest("observed", &e);
        }
        m.ingest("observed", &ev("mcp_call", 0.0, 1.0, json!({}), json!({})));
        m.refresh();
        assert_eq!(m.stat_rows[0].name, "ipc_read");
        assert_eq!(m.stat_rows[0].count, 10);
        assert_eq!(m.stat_rows[0].failed, 1);
        assert_eq!(m.stat_rows[0].p50, 4.0);
        assert_eq!(m.stat_rows[0].p99, 9.0);
    }

    #[test]
    fn phase_timer_runs_live_from_queue_depth_and_stops_when_idle() {
        let mut m = Monitor::new();
        m.ingest(
            "o",
            &ev(
                "worker_queue_depth",
                1_000.0,
                0.0,
                json!({"active":1,"waiting":0}),
                json!({}),
            ),
        );
        // Injected clock: 12 s after the request became active → past 75 % of 15 s.
        let t = m.phase(Phase::Active);
        assert_eq!(t.shown_ms(13_000.0), (Some(12_000.0), true));
        assert_eq!(t.level(13_000.0), Level::High);
        assert_eq!(t.level(16_000.0), Level::Limit);
        assert_eq!(m.phase(Phase::Outer).level(16_000.0), Level::Ok);
        m.ingest(
            "o",
            &ev(
                "worker_queue_depth",
                1_400.0,
                0.0,
                json!({"active":0,"waiting":0}),
                json!({}),
            ),
        );
        m.ingest("o", &phase_ev("phase_active", 1_000.0, 400.0, 15000));
        let t = m.phase(Phase::Active);
        assert_eq!(t.shown_ms(99_000.0), (Some(400.0), false));
        assert_eq!(t.level(99_000.0), Level::Ok);
    }

    #[test]
    fn phase_ceiling_comes_from_the_event() {
        let mut m = Monitor::new();
        m.ingest("o", &phase_ev("phase_outer", 0.0, 9_000.0, 10000));
        let t = m.phase(Phase::Outer);
        assert_eq!(t.ceiling_ms, 10_000.0);
        assert_eq!(t.level(0.0), Level::High);
    }

    #[test]
    fn readiness_runs_from_launch_until_ready() {
        let mut m = Monitor::new();
        m.ingest(
            "o",
            &ev(
                "worker_launch",
                500.0,
                0.0,
                json!({"pid": 42, "mode":"resident"}),
                json!({"generation": 3}),
            ),
        );
        assert_eq!(m.worker.state, WorkerState::Starting);
        assert_eq!(
            m.phase(Phase::Readiness).level(500.0 + 5_300.0),
            Level::High
        );
        m.ingest(
            "o",
            &ev(
                "worker_ready",
                800.0,
                300.0,
                json!({"pid": 42}),
                json!({"generation": 3}),
            ),
        );
        assert_eq!(m.worker.state, WorkerState::Ready);
        assert_eq!(m.worker.generation, Some(3));
        assert_eq!(m.worker.pid, Some(42));
        assert_eq!(m.worker.age_ms(60_500.0), Some(60_000.0));
        assert_eq!(m.phase(Phase::Readiness).running_since_ms, None);
    }

    #[test]
    fn launches_count_only_the_rolling_minute() {
        let mut m = Monitor::new();
        for (g, t) in [(1, 0.0), (2, 30_000.0), (3, 59_000.0)] {
            m.ingest(
                "o",
                &ev("worker_launch", t, 0.0, json!({}), json!({"generation": g})),
            );
        }
        assert_eq!(m.launches_in_window(59_500.0), 3);
        assert_eq!(m.launches_in_window(60_001.0), 2);
        assert_eq!(m.launches_in_window(200_000.0), 0);
    }

    #[test]
    fn retirements_keep_reason_and_requests() {
        let mut m = Monitor::new();
        m.ingest(
            "o",
            &ev(
                "worker_launch",
                0.0,
                0.0,
                json!({}),
                json!({"generation": 2}),
            ),
        );
        let mut r = ev(
            "worker_retired",
            10.0,
            0.0,
            json!({"reason":"rss_limit","requests": 17}),
            json!({"generation": 2}),
        );
        r.outcome = Outcome::Failed;
        m.ingest("o", &r);
        let last = m.retirements.last().cloned().unwrap();
        assert_eq!(last.reason, "rss_limit");
        assert_eq!(last.requests, Some(17));
        assert!(!last.expected);
        assert_eq!(m.worker.state, WorkerState::Retired("rss_limit".into()));
    }

    #[test]
    fn malformed_lines_are_counted_not_fatal() {
        let mut m = Monitor::new();
        m.ingest_line("o", "{not json");
        m.ingest_line("o", "");
        m.ingest_line("o", r#"{"name":"x"}"#);
        m.ingest_line("o", &"x".repeat(MAX_LINE_BYTES + 1));
        m.ingest_memory_line("{\"ts_ms\": \"soon\"}");
        assert_eq!(m.malformed, 4);
        assert_eq!(m.ingested, 0);
        m.ingest_line(
            "o",
            r#"{"name":"ipc_read","start_ms":1,"duration_ms":2,"outcome":"ok"}"#,
        );
        assert_eq!(m.ingested, 1);
    }

    #[test]
    fn rss_series_comes_from_memory_samples_and_events_in_time_order() {
        let mut m = Monitor::new();
        m.ingest_memory_line(r#"{"ts_ms": 100, "pid": 1, "rss_bytes": 1000, "ids": {}}"#);
        m.ingest(
            "o",
            &ev(
                "worker_rss",
                50.0,
                0.0,
                json!({"rss_bytes": 5, "limit_bytes": 2048}),
                json!({}),
            ),
        );
        m.ingest_memory_line(r#"{"ts_ms": 200, "pid": 1, "rss_bytes": 3000, "ids": {}}"#);
        assert_eq!(m.rss_now(), Some(3000));
        assert_eq!(m.rss.len(), 2);
        assert_eq!(m.rss_limit, 2048);
    }

    #[test]
    fn event_names_are_bounded() {
        let mut m = Monitor::new();
        for i in 0..(MAX_EVENT_NAMES + 10) {
            m.ingest("o", &ev(&format!("e{i}"), 0.0, 1.0, json!({}), json!({})));
        }
        m.refresh();
        assert_eq!(m.stat_rows.len(), MAX_EVENT_NAMES + 1);
        assert!(
            m.stat_rows
                .iter()
                .any(|r| r.name == "(other)" && r.count == 10)
        );
    }

    /// An event recorded by process `pid`.
    fn by(
        pid: u32,
        name: &str,
        start_ms: f64,
        duration_ms: f64,
        attrs: Value,
        ids: Value,
    ) -> PerfEvent {
        let mut e = ev(name, start_ms, duration_ms, attrs, ids);
        e.pid = pid;
        e
    }

    /// `worker_launch` recorded by process `pid`: generation `generation`, worker pid `worker`.
    fn launch(pid: u32, at: f64, generation: u64, worker: u64) -> PerfEvent {
        let (attrs, ids) = (json!({"pid": worker}), json!({"generation": generation}));
        by(pid, "worker_launch", at, 0.0, attrs, ids)
    }

    /// `worker_retired` recorded by process `pid` for generation `generation`.
    fn retired(pid: u32, at: f64, generation: u64, reason: &str) -> PerfEvent {
        let (attrs, ids) = (json!({"reason": reason}), json!({"generation": generation}));
        by(pid, "worker_retired", at, 0.0, attrs, ids)
    }

    /// An event of `name` recorded by process `pid`, taking `ms`, with no attributes.
    fn timed(pid: u32, name: &str, at: f64, ms: f64) -> PerfEvent {
        by(pid, name, at, ms, json!({}), json!({}))
    }

    /// What process 7010 recorded on "observed" before process 7020 appended to the same file:
    /// two launches, a slow admission, a busy queue (6 waiting), three reads, a retirement; and
    /// one read of the full process 7001.
    fn first_session(m: &mut Monitor) {
        m.ingest("observed", &launch(7010, 0.0, 1, 9001));
        m.ingest("observed", &launch(7010, 1_000.0, 2, 9002));
        let admission = json!({"ceiling_ms": 2000});
        let admitted = by(
            7010,
            "phase_admission",
            1_500.0,
            1_900.0,
            admission,
            json!({}),
        );
        m.ingest("observed", &admitted);
        let busy = json!({"active": 1, "waiting": 6});
        let depth = by(7010, "worker_queue_depth", 2_000.0, 0.0, busy, json!({}));
        m.ingest("observed", &depth);
        for d in [100.0, 200.0, 300.0] {
            m.ingest("observed", &timed(7010, "ipc_read", 2_100.0, d));
        }
        m.ingest("observed", &retired(7010, 3_000.0, 2, "shutdown"));
        // The full process's events are its own session and stay.
        m.ingest("full", &timed(7001, "ipc_read", 3_000.0, 50.0));
    }

    #[test]
    fn a_new_process_on_the_same_file_starts_a_fresh_session() {
        let mut m = Monitor::new();
        first_session(&mut m);
        assert_eq!(m.launches_in_window(3_000.0), 2);
        // Process 7020 appends to the same file (a relaunch, or a reused attach file).
        m.ingest("observed", &launch(7020, 4_000.0, 1, 9100));
        m.ingest("observed", &timed(7020, "ipc_read", 4_100.0, 7.0));
        m.refresh();
        assert_eq!(m.sessions, 3, "7010, 7001, 7020");
        // W10's launch window counts the new supervisor's launches only.
        assert_eq!(m.launches_in_window(4_000.0), 1);
        // Fresh phase timers and live queue: nothing carried over from 7010 ...
        let admission = m.phase(Phase::Admission);
        assert_eq!(admission.last_ms, None);
        assert_eq!(admission.running_since_ms, None);
        assert_eq!((m.queue_active, m.queue_waiting), (0, 0));
        // ... but the run's queue saturation is remembered: 7010's peak of 6 waiting.
        assert_eq!(m.queue_peak_waiting, 6);
        assert_eq!(m.worker.generation, Some(1));
        assert_eq!(m.worker.pid, Some(9100));
        assert_eq!(m.worker.state, WorkerState::Starting);
        // Percentiles per process: 7020's one read, not 7010's three, and never mixed with the
        // full process's; the run's total keeps 7010's.
        let row = |source: &str| {
            m.stat_rows
                .iter()
                .find(|r| r.name == "ipc_read" && r.source == source)
                .unwrap()
        };
        assert_eq!((row("observed").count, row("observed").total), (1, 4));
        assert_eq!(row("observed").p99, 7.0);
        assert_eq!((row("full").count, row("full").p99), (1, 50.0));
        assert_eq!(m.relaunches.get("observed"), Some(&1));
        // The retirement stays, carrying the pid that recorded it.
        let r = m.retirements.last().unwrap();
        assert_eq!((r.pid, r.generation), (Some(7010), Some(2)));
    }

    #[test]
    fn a_relaunch_of_another_source_leaves_the_worker_session_alone() {
        let mut m = Monitor::new();
        m.ingest("observed", &launch(7010, 0.0, 1, 9001));
        m.ingest("full", &timed(7001, "mcp_call", 10.0, 1.0));
        m.ingest("full", &timed(7002, "mcp_call", 20.0, 1.0));
        assert_eq!(m.worker.generation, Some(1));
        assert_eq!(m.launches_in_window(30.0), 1);
    }

    #[test]
    fn retirement_rows_of_two_processes_tell_their_generations_apart() {
        let mut m = Monitor::new();
        for pid in [7010, 7020] {
            m.ingest("observed", &retired(pid, 0.0, 1, "shutdown"));
        }
        let rows: Vec<(Option<u64>, Option<u64>)> = m
            .retirements
            .iter()
            .map(|r| (r.pid, r.generation))
            .collect();
        assert_eq!(rows, [(Some(7010), Some(1)), (Some(7020), Some(1))]);
    }

    #[test]
    fn the_admission_ceiling_label_keeps_its_meaning_after_a_lock_holders_admission() {
        let mut m = Monitor::new();
        // W7: a lock holder's admission runs under 250 ms; W6's ordinary one under 2 s.
        m.ingest("o", &phase_ev("phase_admission", 0.0, 200.0, 250));
        let t = m.phase(Phase::Admission);
        assert_eq!(
            t.ceiling_ms, 2_000.0,
            "the label is still the ordinary ceiling"
        );
        assert_eq!(t.last_ceiling_ms, 250.0);
        // 200 of 250 ms is past 75 % of the lock holder's ceiling.
        assert_eq!(t.level(1_000.0), Level::High);
        m.ingest("o", &phase_ev("phase_admission", 10.0, 200.0, 2000));
        let t = m.phase(Phase::Admission);
        assert_eq!((t.ceiling_ms, t.last_ceiling_ms), (2_000.0, 2_000.0));
        assert_eq!(t.level(1_000.0), Level::Ok);
        m.ingest("o", &phase_ev("phase_admission", 20.0, 10.0, 250));
        assert_eq!(m.phase(Phase::Admission).ceiling_ms, 2_000.0);
    }
}

//! The spec's limits as the console shows them (SPEC W5–W10, U2): the queue, RSS, launch and
//! age limits from [`WaymarkLimits::SPEC`] (the constant the supervisor enforces), the four
//! phase ceilings, and [`Level`] — how close a figure is to its limit, said in colour and in a
//! word. Plain data; no clock reads (callers pass `now_ms`).

use crate::telemetry::EventKind;
use crate::waymark::WaymarkLimits;
use crate::waymark::config::DEFAULT_ACTIVE_TIMEOUT;

/// W5: one active request.
pub const QUEUE_ACTIVE_MAX: u64 = 1;
/// W5: at most eight waiting requests, from [`WaymarkLimits::SPEC`].
pub const QUEUE_WAITING_MAX: u64 = WaymarkLimits::SPEC.max_waiting as u64;
/// W9: the worker's sampled RSS limit, 1 GiB (bytes), from [`WaymarkLimits::SPEC`].
pub const RSS_LIMIT_BYTES: u64 = WaymarkLimits::SPEC.rss_limit_bytes;
/// W9: Node's old-space cap, `--max-old-space-size=768` (bytes), from [`WaymarkLimits::SPEC`].
pub const OLD_SPACE_BYTES: u64 = (WaymarkLimits::SPEC.max_old_space_mib as u64) << 20;
/// W10: at most three launches in any rolling minute, from [`WaymarkLimits::SPEC`].
pub const MAX_LAUNCHES_PER_MINUTE: usize = WaymarkLimits::SPEC.max_launches;
/// W10: the rolling window for launches (ms), from [`WaymarkLimits::SPEC`].
pub const LAUNCH_WINDOW_MS: f64 = WaymarkLimits::SPEC.launch_window.as_millis() as f64;
/// W10: a generation retires after 60 minutes (ms), from [`WaymarkLimits::SPEC`].
pub const GENERATION_MAX_AGE_MS: f64 = WaymarkLimits::SPEC.max_age.as_millis() as f64;
/// W7: a lock holder waits at most 250 ms for admission (ms), from [`WaymarkLimits::SPEC`];
/// admissions with this ceiling or below are the lock holder's, not the ordinary W6 admission.
pub const LOCK_HOLDER_ADMISSION_MS: f64 = WaymarkLimits::SPEC.lock_wait.as_millis() as f64;
/// Fraction of a ceiling past which a figure is shown as `high` (yellow).
pub const HIGH_FRACTION: f64 = 0.75;

/// How close a figure is to its limit. Colour shows it, and so does [`Level::word`], so
/// `NO_COLOR` loses nothing (U4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Below 75 % of the ceiling.
    Ok,
    /// At or past 75 %.
    High,
    /// At or past the ceiling, or failed.
    Limit,
}

impl Level {
    /// Classifies `value` against `limit` (same unit). A non-positive limit is `Ok`.
    pub fn of(value: f64, limit: f64) -> Self {
        if limit <= 0.0 || !value.is_finite() {
            Level::Ok
        } else if value >= limit {
            Level::Limit
        } else if value >= limit * HIGH_FRACTION {
            Level::High
        } else {
            Level::Ok
        }
    }

    /// The word shown beside the figure.
    pub fn word(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::High => "high",
            Level::Limit => "LIMIT",
        }
    }

    /// A one-cell symbol for dense rows.
    pub fn symbol(self) -> &'static str {
        match self {
            Level::Ok => "●",
            Level::High => "▲",
            Level::Limit => "✖",
        }
    }
}

/// The four W6 phase ceilings, each timed separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// W6: ordinary admission, 2 s.
    Admission,
    /// W6: startup readiness, 7 s.
    Readiness,
    /// W6: active discovery, 15 s by default.
    Active,
    /// W6: outer allowance = active + 13 s, 28 s by default.
    Outer,
}

impl Phase {
    pub const ALL: [Phase; 4] = [
        Phase::Admission,
        Phase::Readiness,
        Phase::Active,
        Phase::Outer,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Phase::Admission => "admission",
            Phase::Readiness => "readiness",
            Phase::Active => "active",
            Phase::Outer => "outer",
        }
    }

    /// The perf event that reports the phase (T5).
    pub fn event(self) -> EventKind {
        match self {
            Phase::Admission => EventKind::PhaseAdmission,
            Phase::Readiness => EventKind::PhaseReadiness,
            Phase::Active => EventKind::PhaseActive,
            Phase::Outer => EventKind::PhaseOuter,
        }
    }

    /// The name of [`Phase::event`] on the wire.
    pub fn event_name(self) -> &'static str {
        self.event().as_str()
    }

    /// W6 default ceiling (ms); events carry the configured one in `attrs.ceiling_ms`.
    pub fn default_ceiling_ms(self) -> f64 {
        match self {
            Phase::Admission => ms_f64(WaymarkLimits::SPEC.admission),
            Phase::Readiness => ms_f64(WaymarkLimits::SPEC.readiness),
            Phase::Active => ms_f64(DEFAULT_ACTIVE_TIMEOUT),
            Phase::Outer => ms_f64(DEFAULT_ACTIVE_TIMEOUT + WaymarkLimits::SPEC.outer_extra),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn from_event(name: &str) -> Option<Self> {
        let kind = EventKind::parse(name)?;
        Phase::ALL.into_iter().find(|p| p.event() == kind)
    }
}

/// A duration in ms as the console's `f64` figures hold it.
fn ms_f64(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One phase's timer: the last completed duration and, when a phase is under way, since when.
///
/// Phase spans are written when they end, so "under way" is inferred from lifecycle events:
/// `worker_queue_depth` (waiting > 0 → admission; active = 1 → active and outer) and
/// `worker_launch` without `worker_ready` (readiness).
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseTimer {
    pub phase: Phase,
    /// The ordinary ceiling in ms (from `attrs.ceiling_ms`, else the W6 default). For
    /// admission it never takes a lock holder's 250 ms (W7), so the label keeps one meaning.
    pub ceiling_ms: f64,
    /// The ceiling the last completed span ran under (ms): differs from `ceiling_ms` for a
    /// lock holder's admission.
    pub last_ceiling_ms: f64,
    /// Duration of the last completed span (ms).
    pub last_ms: Option<f64>,
    /// Whether the last completed span ended ok.
    pub last_ok: bool,
    /// Longest completed span seen (ms).
    pub max_ms: f64,
    /// Unix ms since which the phase has been under way, if it is.
    pub running_since_ms: Option<f64>,
}

impl PhaseTimer {
    pub(crate) fn new(phase: Phase) -> Self {
        Self {
            phase,
            ceiling_ms: phase.default_ceiling_ms(),
            last_ceiling_ms: phase.default_ceiling_ms(),
            last_ms: None,
            last_ok: true,
            max_ms: 0.0,
            running_since_ms: None,
        }
    }

    /// The figure to show at `now_ms`: live elapsed while running, else the last duration (ms),
    /// and whether it is live.
    pub fn shown_ms(&self, now_ms: f64) -> (Option<f64>, bool) {
        match self.running_since_ms {
            Some(since) => (Some((now_ms - since).max(0.0)), true),
            None => (self.last_ms, false),
        }
    }

    /// The level of the shown figure against the ceiling; a failed last span counts as `Limit`
    /// only when it also reached the ceiling (a cancelled admission is not a breach).
    pub fn level(&self, now_ms: f64) -> Level {
        match self.shown_ms(now_ms) {
            (Some(ms), true) => Level::of(ms, self.ceiling_ms),
            (Some(ms), false) => Level::of(ms, self.last_ceiling_ms),
            (None, _) => Level::Ok,
        }
    }
}

//! Status types (T5, U2): why generations retire ([`RetirementReason`]), the retirement
//! history, captured stderr and the [`WorkerStatus`] snapshot the console and status endpoints
//! read.

use std::path::PathBuf;

use serde::Serialize;

use super::super::config::WaymarkMode;
use super::super::error::WorkerErrorCode;
use super::super::stale::StaleReport;

/// Why a generation was retired (W4, W9, W10, W11), as status and `worker_retired` events
/// spell it ([`RetirementReason::as_str`], also its serde form; other code and tests parse these
/// strings, so they never change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
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

impl RetirementReason {
    /// Every reason.
    pub const ALL: [RetirementReason; 14] = [
        Self::WorkerExited,
        Self::InvalidFraming,
        Self::UnsolicitedData,
        Self::WrongGeneration,
        Self::WrongRequestId,
        Self::PipeFailed,
        Self::RssLimit,
        Self::ActiveTimeout,
        Self::StartupTimeout,
        Self::RequestLimit,
        Self::AgeLimit,
        Self::Cancelled,
        Self::Shutdown,
        Self::OneshotComplete,
    ];

    /// A retirement the supervisor chose by policy (W10) or shutdown: the `worker_retired`
    /// event's outcome is `ok` and no warning is logged.
    pub const fn is_expected(self) -> bool {
        matches!(
            self,
            Self::OneshotComplete | Self::RequestLimit | Self::AgeLimit | Self::Shutdown
        )
    }

    /// How many retirements of this reason, each with the same content in flight, quarantine
    /// that content (see `supervisor::quarantine`); `None`: the reason is never the content's
    /// doing. The RSS limit and the active timeout are measured on the request itself: once.
    /// A death (the worker exited, its pipe broke) may be the content's (a crash in the
    /// parser) or not (the worker killed from outside, the OOM killer): twice.
    pub const fn strikes_to_quarantine(self) -> Option<u32> {
        match self {
            Self::RssLimit | Self::ActiveTimeout => Some(1),
            Self::WorkerExited | Self::PipeFailed => Some(2),
            _ => None,
        }
    }
}

impl PartialEq<str> for RetirementReason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for RetirementReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for RetirementReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many retirements and stderr captures status keeps (most recent).
pub(super) const HISTORY: usize = 32;
pub(super) const STDERR_HISTORY: usize = 8;

/// One generation retirement (W4, W10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retirement {
    pub generation: u64,
    /// Serialized as its wire spelling (`rss_limit`).
    pub reason: RetirementReason,
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
    /// Contents quarantined since startup because their discovery killed a generation (at
    /// most 256 remembered); they are answered `quarantined` without reaching a worker.
    pub quarantined: usize,
    pub shut_down: bool,
}

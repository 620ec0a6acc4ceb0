//! Worker errors and domain results (SPEC W8). A [`WorkerError`] means the discovery capacity
//! failed (queue, protocol, limits, cleanup): no validation attempt is recorded for it. A
//! [`DomainFailure`] is a result about the document (parse failure, output over 2 MiB, active
//! timeout, content quarantined after it killed a generation) and is recorded as a failed
//! validation attempt by the caller.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// Stable `WAYMARK_WORKER_*` codes (W8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum WorkerErrorCode {
    /// W5: eight requests are already waiting.
    QueueFull,
    /// W6/W7: not admitted within the admission ceiling (2 s; 250 ms for lock holders).
    QueueExpired,
    /// W4: invalid framing, unsolicited data, wrong generation/request id, or worker death.
    Protocol,
    /// The discovery was cancelled (caller dropped it, or the supervisor shut down).
    Cancelled,
    /// W9: the child's sampled RSS exceeded the limit (1 GiB).
    RssLimit,
    /// W10: a fourth launch within a rolling minute was refused.
    RestartLimit,
    /// W6: the child did not report ready within the readiness ceiling (7 s).
    StartupTimeout,
    /// W11: owned files or the child could not be cleaned up.
    Cleanup,
    /// W7: a lock-holding caller found no already-ready worker (it never starts one).
    NotReady,
    /// The Node child could not be started (missing or non-executable binary, script missing).
    Spawn,
    /// W3: the worker read a request file whose byte count or SHA-256 differs from the frame.
    Integrity,
    /// W6: the outer allowance (active + 13 s) ran out, cleanup included.
    OuterTimeout,
}

impl WorkerErrorCode {
    /// The stable code string, e.g. `WAYMARK_WORKER_QUEUE_FULL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::QueueFull => "WAYMARK_WORKER_QUEUE_FULL",
            Self::QueueExpired => "WAYMARK_WORKER_QUEUE_EXPIRED",
            Self::Protocol => "WAYMARK_WORKER_PROTOCOL",
            Self::Cancelled => "WAYMARK_WORKER_CANCELLED",
            Self::RssLimit => "WAYMARK_WORKER_RSS_LIMIT",
            Self::RestartLimit => "WAYMARK_WORKER_RESTART_LIMIT",
            Self::StartupTimeout => "WAYMARK_WORKER_STARTUP_TIMEOUT",
            Self::Cleanup => "WAYMARK_WORKER_CLEANUP",
            Self::NotReady => "WAYMARK_WORKER_NOT_READY",
            Self::Spawn => "WAYMARK_WORKER_SPAWN",
            Self::Integrity => "WAYMARK_WORKER_INTEGRITY",
            Self::OuterTimeout => "WAYMARK_WORKER_OUTER_TIMEOUT",
        }
    }
}

impl fmt::Display for WorkerErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one worker error type (W8): a stable code and an actionable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WorkerError {
    pub code: WorkerErrorCode,
    pub message: String,
}

impl WorkerError {
    /// Builds an error with `code` and `message`.
    pub fn new(code: WorkerErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The stable code (`.code().as_str()` gives `WAYMARK_WORKER_*`).
    pub fn code(&self) -> WorkerErrorCode {
        self.code
    }
}

/// A domain result of a discovery (W8): recorded as a failed validation attempt, not a worker
/// error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DomainFailure {
    /// The parser could not produce a tree, or the language is not supported by the worker.
    #[error("parse failed: {message}")]
    ParseFailed { message: String },
    /// W3: the scopes JSON exceeded the 2 MiB output cap.
    #[error("discovery output too large: {message}")]
    OutputTooLarge { message: String },
    /// W6: the worker did not answer within the active timeout (default 15 s). The generation is
    /// retired.
    #[error("discovery exceeded the active timeout of {} ms", timeout.as_millis())]
    ActiveTimeout { timeout: Duration },
    /// This content's discovery killed a generation earlier in this process (the worker died,
    /// exceeded the RSS limit or timed out on it), so it is not sent to a worker again: the
    /// answer comes at once, without a launch. `cause` names the generation, the retirement
    /// reason and its detail; `sha256` is the content's (lowercase hex).
    #[error("discovery refused: {cause}")]
    Quarantined { sha256: String, cause: String },
}

impl DomainFailure {
    /// Stable snake_case code: `parse_failed`, `output_too_large`, `active_timeout`,
    /// `quarantined`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ParseFailed { .. } => "parse_failed",
            Self::OutputTooLarge { .. } => "output_too_large",
            Self::ActiveTimeout { .. } => "active_timeout",
            Self::Quarantined { .. } => "quarantined",
        }
    }
}

/// What a discovery can fail with (W8): a worker error or a domain result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiscoveryError {
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error(transparent)]
    Domain(#[from] DomainFailure),
}

impl DiscoveryError {
    /// The worker error, if this is one.
    pub fn worker(&self) -> Option<&WorkerError> {
        match self {
            Self::Worker(e) => Some(e),
            Self::Domain(_) => None,
        }
    }

    /// The domain failure, if this is one.
    pub fn domain(&self) -> Option<&DomainFailure> {
        match self {
            Self::Domain(d) => Some(d),
            Self::Worker(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_error_codes_are_stable_strings() {
        assert_eq!(
            WorkerErrorCode::QueueFull.as_str(),
            "WAYMARK_WORKER_QUEUE_FULL"
        );
        let e = WorkerError::new(WorkerErrorCode::RestartLimit, "three launches");
        assert_eq!(e.code().as_str(), "WAYMARK_WORKER_RESTART_LIMIT");
        assert_eq!(
            e.to_string(),
            "WAYMARK_WORKER_RESTART_LIMIT: three launches"
        );
    }
}

//! One generation (W1, W4, W10, W11): a started worker from launch to cleanup, with ONE state
//! that only moves forward:
//!
//! `Starting` → `Ready` → `Retired { reason, detail }` → `Cleaned { exit }`
//!
//! (`Starting` may go straight to `Retired`: a worker that died or timed out before its ready
//! frame). A retirement happens once: whoever moves the state to `Retired` owns the cleanup, and
//! everyone waiting on the state (readiness waiters, shutdown) wakes on the same change.
//! `Cleaned` keeps the retirement beside the exit status, so a late observer still learns why.
//! Beside the state, two things are not states of the generation: the cancellation token that
//! stops its tasks, and whether its stderr capture has read to the end.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tokio_util::codec::FramedWrite;
use tokio_util::sync::CancellationToken;

use super::super::codec::{FrameCodec, MAX_REQUEST_FRAME, MAX_RESPONSE_FRAME};
use super::super::config::WaymarkMode;
use super::super::error::WorkerError;
use super::super::process::StderrBuffer;
use super::super::protocol::{ReadyFrame, ResultFrame, SupervisorMessage, WorkerMessage};
use super::quarantine::ContentKey;
use super::spawn::{WorkerProcess, WorkerStdin};
use super::status::{RetirementReason, StderrCapture};

pub(super) type WorkerCodec = FrameCodec<WorkerMessage, SupervisorMessage>;

/// The frame codec on the worker's pipes (W3 frame bounds).
pub(super) fn worker_codec() -> WorkerCodec {
    WorkerCodec::new(MAX_RESPONSE_FRAME, MAX_REQUEST_FRAME)
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a generation is in its life (see the module header).
#[derive(Debug, Clone)]
pub(super) enum GenerationState {
    /// Launched; its ready frame has not arrived.
    Starting,
    /// It sent its ready frame and takes requests.
    Ready(ReadyFrame),
    /// Retired (once); cleanup is under way.
    Retired {
        reason: RetirementReason,
        detail: String,
    },
    /// Killed or exited, reaped (when it could be within the bound), its root removed.
    Cleaned {
        reason: RetirementReason,
        detail: String,
        /// `None`: the exit was not observed within the reap bound.
        exit: Option<ExitStatus>,
    },
}

impl GenerationState {
    /// The retirement, once there is one.
    pub(super) fn retirement(&self) -> Option<(RetirementReason, &str)> {
        match self {
            Self::Retired { reason, detail } | Self::Cleaned { reason, detail, .. } => {
                Some((*reason, detail))
            }
            Self::Starting | Self::Ready(_) => None,
        }
    }
}

/// The one outstanding request of a generation (W5): its id, the key of its content (the
/// quarantine's key, when the content kills the generation) and where its answer goes.
pub(super) struct Pending {
    pub request: u64,
    pub content: ContentKey,
    pub tx: oneshot::Sender<Result<ResultFrame, WorkerError>>,
}

pub(super) struct Generation {
    pub id: u64,
    pub mode: WaymarkMode,
    /// The OS pid (0 for a scripted test child).
    pub pid: u32,
    pub root: PathBuf,
    /// Policy-clock start (W10 age).
    pub started: Instant,
    pub spawned_wall: std::time::Instant,
    pub state: watch::Sender<GenerationState>,
    pub writer: tokio::sync::Mutex<Option<FramedWrite<WorkerStdin, WorkerCodec>>>,
    pub pending: Mutex<Option<Pending>>,
    pub served: AtomicU64,
    /// The unreaped worker; taken by cleanup, which reaps it.
    pub process: Mutex<Option<Box<dyn WorkerProcess>>>,
    pub stderr: Arc<Mutex<StderrBuffer>>,
    /// The stderr capture read to its end (the evidence is complete).
    pub stderr_done: watch::Sender<bool>,
    /// Stops the generation's tasks (reader, RSS sampler, age timer).
    pub cancel: CancellationToken,
    pub last_rss: AtomicU64,
}

impl Generation {
    pub(super) fn is_retired(&self) -> bool {
        self.state.borrow().retirement().is_some()
    }

    pub(super) fn is_ready(&self) -> bool {
        matches!(*self.state.borrow(), GenerationState::Ready(_))
    }

    /// The retirement reason, once retired.
    pub(super) fn retired_reason(&self) -> Option<RetirementReason> {
        self.state.borrow().retirement().map(|(r, _)| r)
    }

    /// Moves `Starting`/`Ready` to `Retired`; false when it was already retired (the caller
    /// then does nothing: a retirement happens once).
    pub(super) fn begin_retirement(&self, reason: RetirementReason, detail: &str) -> bool {
        self.state.send_if_modified(|s| match s {
            GenerationState::Starting | GenerationState::Ready(_) => {
                *s = GenerationState::Retired {
                    reason,
                    detail: detail.to_owned(),
                };
                true
            }
            _ => false,
        })
    }

    /// `Starting` → `Ready`; false when the state was not `Starting` (a second ready frame, or
    /// retired meanwhile).
    pub(super) fn become_ready(&self, ready: ReadyFrame) -> bool {
        self.state.send_if_modified(|s| match s {
            GenerationState::Starting => {
                *s = GenerationState::Ready(ready);
                true
            }
            _ => false,
        })
    }

    /// The last step: `Retired` → `Cleaned` with the exit status (a generation cleaned without
    /// a retirement, on drop paths, is recorded as shut down).
    pub(super) fn mark_cleaned(&self, exit: Option<ExitStatus>) {
        self.state.send_modify(|s| {
            let (reason, detail) = match s.retirement() {
                Some((r, d)) => (r, d.to_owned()),
                None => (RetirementReason::Shutdown, String::new()),
            };
            *s = GenerationState::Cleaned {
                reason,
                detail,
                exit,
            };
        });
    }

    pub(super) fn is_cleaned(&self) -> bool {
        matches!(*self.state.borrow(), GenerationState::Cleaned { .. })
    }

    /// Kills the worker if it is still unreaped (W11).
    pub(super) fn kill(&self) {
        if let Some(p) = lock(&self.process).as_mut() {
            p.kill();
        }
    }

    pub(super) fn stderr_capture(&self) -> StderrCapture {
        let b = lock(&self.stderr);
        StderrCapture {
            generation: self.id,
            bytes: b.bytes.clone(),
            total_bytes: b.total_bytes,
            truncated: b.truncated,
        }
    }

    pub(super) fn stderr_tail(&self, max: usize) -> String {
        let b = lock(&self.stderr);
        let start = b.bytes.len().saturating_sub(max);
        String::from_utf8_lossy(&b.bytes[start..]).trim().to_owned()
    }

    /// Synchronous cleanup for exit paths (no runtime, shutdown_now, drop): kill whatever is
    /// unreaped, drop it (a Node child is killed on drop; tokio reaps orphans) and remove the
    /// root.
    pub(super) fn clean_now(&self) {
        if let Some(mut p) = lock(&self.process).take() {
            p.kill();
            drop(p);
        }
        let _ = std::fs::remove_dir_all(&self.root);
        self.mark_cleaned(None);
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // Last-resort cleanup when the owner vanished without shutdown (W11).
        self.cancel.cancel();
        if let Some(mut p) = self.process.get_mut().map(Option::take).unwrap_or(None) {
            p.kill();
            drop(p);
        }
        if !self.is_cleaned() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

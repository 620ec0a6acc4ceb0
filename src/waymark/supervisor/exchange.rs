//! One discovery's exchange (W3–W8): the caller's phases (outer allowance, readiness,
//! admission, active), the owned request file, the frame sent and its answer awaited, and the
//! read loop that matches every worker frame to its generation and request (any fault retires
//! the generation, W4).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use super::super::ceiling;
use super::super::codec::FrameError;
use super::super::config::WaymarkMode;
use super::super::error::{DiscoveryError, DomainFailure, WorkerError, WorkerErrorCode};
use super::super::protocol::{DiscoverFrame, ResultFrame, SupervisorMessage, WorkerMessage};
use super::super::queue::{AdmissionError, Permit};
use super::super::stale;
use super::super::{Discovery, Language, ScopeQuery};
use super::generation::{Generation, GenerationState, Pending, WorkerCodec, lock};
use super::quarantine::ContentKey;
use super::spawn::WorkerOutput;
use super::status::RetirementReason;
use super::{CallerKind, Inner, error_for_reason, ms, note_paused, outcome};
use crate::telemetry::{EventKind, Outcome, Span, attr};

/// What one discovery asks, as it passes from the public entry points down to the frame:
/// the language, the source (UTF-8), the question (`None`: every scope) and who asks (which
/// decides how long admission waits and whether a worker may be started, W7).
#[derive(Clone, Copy)]
pub(super) struct RequestParts<'a> {
    pub language: Language,
    pub source: &'a str,
    pub query: Option<&'a ScopeQuery>,
    pub caller: CallerKind,
}

/// Sources up to this size are hashed and written on the caller's thread: a thread hop costs
/// more than the work (the resident overhead over parse time is the bench's target figure).
const INLINE_BYTES: usize = 64 * 1024;

/// W3: the content's key, as the frame will carry it (byte count, SHA-256) — computed once, up
/// front, so a quarantined content is refused before admission.
async fn content_key(language: Language, source: &str) -> Result<ContentKey, DiscoveryError> {
    let digest = |s: &[u8]| hex::encode(Sha256::digest(s));
    let sha256 = if source.len() <= INLINE_BYTES {
        digest(source.as_bytes())
    } else {
        let owned = source.as_bytes().to_vec();
        tokio::task::spawn_blocking(move || digest(&owned))
            .await
            .map_err(|e| {
                WorkerError::new(WorkerErrorCode::Cancelled, format!("hashing stopped: {e}"))
            })?
    };
    Ok(ContentKey {
        language,
        bytes: source.len() as u64,
        sha256,
    })
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
                RetirementReason::Cancelled,
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
            Some(path) => remove_request_dir(&path).map_err(|e| (path, e)),
            None => Ok(()),
        }
    }
}

impl Drop for RequestDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = remove_request_dir(&path);
        }
    }
}

/// Removes a request directory holding what [`write_request_file`] put there: its `source`
/// and then the directory, two system calls (`remove_dir_all` makes ten: stat, open, fstat,
/// fcntl ×2, getdents ×2, unlink, close, rmdir). Anything else found there (a directory the
/// write never finished, or more files) falls back to `remove_dir_all`, whose error (the
/// directory gone with a retired root, say) is the one reported.
fn remove_request_dir(path: &Path) -> std::io::Result<()> {
    // A failure here shows as the directory still being there, below.
    let _ = std::fs::remove_file(path.join("source"));
    std::fs::remove_dir(path).or_else(|_| std::fs::remove_dir_all(path))
}

/// W3: after admission, the source goes into an owned request file. The directory is created
/// non-recursively: a root removed by a concurrent retirement is not recreated. The worker
/// reads the file only after the frame is sent, so a plain exclusive create suffices (no
/// rename). Small sources are written inline (see [`INLINE_BYTES`]).
async fn write_request_file(
    worker: &Generation,
    dir: &Path,
    source: &str,
) -> Result<(), DiscoveryError> {
    fn write_request(file_dir: &Path, source: &[u8]) -> std::io::Result<()> {
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(file_dir)?;
        stale::write_private_new(&file_dir.join("source"), source)
    }
    let written = if source.len() <= INLINE_BYTES {
        Ok(write_request(dir, source.as_bytes()))
    } else {
        let owned = source.as_bytes().to_vec();
        let file_dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || write_request(&file_dir, &owned)).await
    };
    match written {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            if let Some(why) = worker.retired_reason() {
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
    /// Admission (W5–W7), recorded as `phase_admission` for `request`; `after_startup`: the
    /// caller waited for a starting worker and enters through the queue's start-up backlog
    /// ([`AdmissionQueue::admit_after_startup`], never `QUEUE_FULL`).
    pub(super) async fn admit(
        &self,
        ceiling: Duration,
        request: Option<u64>,
        after_startup: bool,
    ) -> Result<Permit, WorkerError> {
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

    /// One discovery end to end (`discovery_total`), within the outer allowance (W6: active +
    /// 13 s, counted on running time).
    pub(super) async fn discover(
        &self,
        parts: RequestParts<'_>,
    ) -> Result<Discovery, DiscoveryError> {
        let request = self.next_request.fetch_add(1, Ordering::SeqCst);
        let mut total = self.span(EventKind::DiscoveryTotal.as_str(), Some(request));
        total
            .attr(attr::LANGUAGE, parts.language.as_str())
            .attr(attr::BYTES, parts.source.len())
            .attr(attr::MODE, self.config.mode.as_str())
            .attr(attr::CALLER, parts.caller.as_str())
            .attr(attr::LOCK_HOLDER, parts.caller.holds_lock());
        let outer = self.config.outer_allowance();
        let mut outer_span = self.span(EventKind::PhaseOuter.as_str(), Some(request));
        outer_span.attr(attr::CEILING_MS, ms(outer));
        let measured = ceiling::within(outer, self.discover_phases(request, parts)).await;
        note_paused(&mut outer_span, measured.paused);
        let result = measured.value.unwrap_or_else(|| {
            Err(DiscoveryError::Worker(WorkerError::new(
                WorkerErrorCode::OuterTimeout,
                format!(
                    "discovery exceeded the outer allowance of {} ms (W6)",
                    outer.as_millis()
                ),
            )))
        });
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

    /// The phases of one discovery: quarantine check, readiness (W6 7 s; for an ordinary
    /// caller the worker is launched or waited for first, holding no queue descriptor),
    /// admission (W5–W7), then the active request on the generation.
    async fn discover_phases(
        &self,
        request: u64,
        parts: RequestParts<'_>,
    ) -> Result<Discovery, DiscoveryError> {
        self.check_open()?;
        let content = content_key(parts.language, parts.source).await?;
        if let Some(refused) = self.quarantine.check(&content) {
            return Err(refused.into());
        }
        let may_launch = parts.caller.may_launch();
        let not_ready = || {
            WorkerError::new(
                WorkerErrorCode::NotReady,
                match parts.caller {
                    CallerKind::IfIdle => {
                        "no ready Waymark worker; a caller that must not wait never starts one"
                    }
                    _ => {
                        "no ready Waymark worker; a caller holding a target lock never starts one \
                         (W7): discover before taking the lock, or prewarm the worker"
                    }
                },
            )
        };
        if !may_launch && !self.current_ready() {
            return Err(not_ready().into());
        }
        let ceiling = parts.caller.admission_ceiling(&self.config);
        let mut readiness = self.span(EventKind::PhaseReadiness.as_str(), Some(request));
        readiness.attr(attr::CEILING_MS, ms(self.config.limits.readiness));
        // A caller arriving while the resident worker starts waits on its
        // readiness (W6, 7 s) holding no queue descriptor, then enters the FIFO through the
        // start-up backlog, so a burst during start-up waits instead of being refused.
        let startup =
            may_launch && self.config.mode == WaymarkMode::Resident && !self.current_ready();
        if startup && let Err(e) = self.ensure_resident(&mut readiness).await {
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
        let ready = if !may_launch {
            lock(&self.state)
                .current
                .clone()
                .filter(|g| g.is_ready())
                .ok_or_else(not_ready)
        } else {
            match self.config.mode {
                WaymarkMode::Resident => self.ensure_resident(&mut readiness).await,
                WaymarkMode::Oneshot => self.start_oneshot(parts.language, &mut readiness).await,
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
        let result = self
            .run_request(&worker, request, parts, content, &mut active)
            .await;
        active.finish(outcome(result.is_ok()));
        if worker.mode == WaymarkMode::Oneshot {
            self.retire(
                &worker,
                RetirementReason::OneshotComplete,
                "one-shot discovery done",
                true,
            );
        }
        drop(permit);
        result
    }

    async fn run_request(
        &self,
        worker: &Arc<Generation>,
        request: u64,
        parts: RequestParts<'_>,
        content: ContentKey,
        active: &mut Span,
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
        let exchanged = self
            .exchange(worker, request, parts, content, &dir, token, active)
            .await;
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

    /// Writes the request file, sends the frame and waits for its answer (W3, W6). Content
    /// quarantined while this request waited is refused here, before it reaches the worker.
    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &self,
        worker: &Arc<Generation>,
        request: u64,
        parts: RequestParts<'_>,
        content: ContentKey,
        dir: &RequestDir,
        token: String,
        active: &mut Span,
    ) -> Result<ResultFrame, DiscoveryError> {
        if let Some(why) = worker.retired_reason() {
            return Err(error_for_reason(why, worker.id, "retired before the request").into());
        }
        if let Some(refused) = self.quarantine.check(&content) {
            return Err(refused.into());
        }
        write_request_file(worker, dir.path(), parts.source).await?;
        let (tx, rx) = oneshot::channel();
        let frame = SupervisorMessage::Discover(DiscoverFrame {
            generation: worker.id,
            request,
            language: parts.language,
            token,
            bytes: content.bytes,
            sha256: content.sha256.clone(),
            query: parts.query.cloned(),
        });
        *lock(&worker.pending) = Some(Pending {
            request,
            content,
            tx,
        });
        if let Some(why) = worker.retired_reason() {
            lock(&worker.pending).take();
            return Err(
                error_for_reason(why, worker.id, "retired before the request was sent").into(),
            );
        }
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
            self.retire(worker, RetirementReason::PipeFailed, &e, false);
            return Err(error_for_reason(RetirementReason::PipeFailed, worker.id, &e).into());
        }
        self.await_answer(worker, request, rx, ipc, active).await
    }

    /// Waits up to the active timeout (W6, counted on running time: a pause of this process is
    /// not the worker's) for the answer to `request`; a timeout retires the generation and is a
    /// domain result.
    async fn await_answer(
        &self,
        worker: &Arc<Generation>,
        request: u64,
        rx: oneshot::Receiver<Result<ResultFrame, WorkerError>>,
        mut ipc: Span,
        active_span: &mut Span,
    ) -> Result<ResultFrame, DiscoveryError> {
        let active = self.config.active_timeout;
        let measured = ceiling::within(active, rx).await;
        note_paused(active_span, measured.paused);
        match measured.value {
            Some(Ok(Ok(frame))) => {
                ipc.finish(Outcome::Ok);
                Ok(frame)
            }
            Some(Ok(Err(e))) => {
                ipc.attr(attr::CODE, e.code.as_str());
                ipc.finish(Outcome::Failed);
                Err(e.into())
            }
            Some(Err(_)) => {
                ipc.finish(Outcome::Failed);
                Err(WorkerError::new(
                    WorkerErrorCode::Protocol,
                    format!("worker generation {} dropped request {request}", worker.id),
                )
                .into())
            }
            None => {
                ipc.attr(attr::TIMEOUT_MS, ms(active));
                ipc.finish(Outcome::Failed);
                let paused = if measured.paused.is_zero() {
                    String::new()
                } else {
                    format!(
                        " of running time (this process was paused {} ms more, not counted)",
                        ms(measured.paused)
                    )
                };
                self.retire(
                    worker,
                    RetirementReason::ActiveTimeout,
                    &format!(
                        "request {request} exceeded {} ms{paused}",
                        active.as_millis()
                    ),
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
                RetirementReason::RequestLimit,
                &format!("served {served} requests"),
                true,
            );
        } else if age >= self.config.limits.max_age {
            self.retire(
                worker,
                RetirementReason::AgeLimit,
                "reached its maximum age",
                true,
            );
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
            error_line: frame.error_line,
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
pub(super) async fn read_loop(
    weak: Weak<Inner>,
    worker: Arc<Generation>,
    mut reader: FramedRead<WorkerOutput, WorkerCodec>,
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
                return fault(
                    RetirementReason::WorkerExited,
                    "the worker closed its stdout".into(),
                );
            }
            Some(Err(e)) => {
                let why = match e {
                    FrameError::Io(_) => RetirementReason::PipeFailed,
                    _ => RetirementReason::InvalidFraming,
                };
                return fault(why, e.to_string());
            }
            Some(Ok(WorkerMessage::Ready(ready))) => {
                if !matches!(*worker.state.borrow(), GenerationState::Starting) {
                    return fault(
                        RetirementReason::UnsolicitedData,
                        "a second ready frame".into(),
                    );
                }
                if ready.generation != worker.id {
                    return fault(
                        RetirementReason::WrongGeneration,
                        format!("ready for generation {}", ready.generation),
                    );
                }
                inner.emit_ready(&worker, &ready);
                if !worker.become_ready(ready) {
                    return; // retired meanwhile: the retirement owns the rest
                }
            }
            Some(Ok(WorkerMessage::Result(result))) => {
                let expected = lock(&worker.pending).as_ref().map(|p| p.request);
                let Some(expected) = expected else {
                    return fault(
                        RetirementReason::UnsolicitedData,
                        format!(
                            "result for request {} with none outstanding",
                            result.request
                        ),
                    );
                };
                if result.generation != worker.id {
                    return fault(
                        RetirementReason::WrongGeneration,
                        format!("result for generation {}", result.generation),
                    );
                }
                if result.request != expected {
                    return fault(
                        RetirementReason::WrongRequestId,
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

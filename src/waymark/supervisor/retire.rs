//! Retirement and cleanup (W4, W9, W10, W11): a generation retires once — its pending request
//! and readiness waiters fail, content that killed it is quarantined, the retirement is
//! recorded (`worker_retired`), its tasks stop — then it is killed (or closed gracefully),
//! reaped and its root removed. Also the two tasks that retire a generation by policy: the RSS
//! sampler (W9) and the idle age timer (W10).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Map;
use tokio::time::MissedTickBehavior;

use super::super::error::WorkerErrorCode;
use super::generation::{Generation, lock};
use super::status::{HISTORY, Retirement, RetirementReason, STDERR_HISTORY, StderrCapture};
use super::{Inner, error_for_reason, outcome};
use crate::telemetry::{EventKind, Outcome, PerfEvent, attr};

/// Every Nth RSS sample (N × 100 ms) becomes a `worker_rss` event; all go to the memory file.
const RSS_EVENT_EVERY: u64 = 10;
/// Bound on reaping a killed child (W11; part of the outer allowance's cleanup).
pub(super) const REAP_BOUND: Duration = Duration::from_secs(3);

impl Inner {
    /// Retires `worker` once: fails its pending request (quarantining its content when the
    /// reason is one content causes), records the retirement, stops its tasks and starts
    /// cleanup (graceful: close stdin, wait up to `graceful_exit`, then kill; otherwise kill the
    /// process group now), then reaps and removes the generation root. False when it was
    /// already retired.
    pub(super) fn retire(
        &self,
        worker: &Arc<Generation>,
        why: RetirementReason,
        detail: &str,
        graceful: bool,
    ) -> bool {
        if !worker.begin_retirement(why, detail) {
            return false;
        }
        self.fail_pending(worker, why, detail);
        self.record_retirement(worker, why, detail);
        worker.cancel.cancel();
        self.start_cleanup(worker, graceful);
        true
    }

    /// Retirement, first step: the pending request gets the retirement's worker error, and its
    /// content is quarantined when it caused the retirement. (Readiness waiters woke on the
    /// state change itself.)
    fn fail_pending(&self, worker: &Generation, why: RetirementReason, detail: &str) {
        let Some(p) = lock(&worker.pending).take() else {
            return;
        };
        if self.quarantine.admit(&p.content, worker.id, why, detail) {
            tracing::warn!(
                generation = worker.id,
                reason = why.as_str(),
                sha256 = p.content.sha256,
                bytes = p.content.bytes,
                "content quarantined: it is not sent to the Waymark worker again"
            );
        }
        let _ = p.tx.send(Err(error_for_reason(why, worker.id, detail)));
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
            if why != RetirementReason::OneshotComplete {
                st.retirements.push_back(Retirement {
                    generation: worker.id,
                    reason: why,
                    requests,
                });
                while st.retirements.len() > HISTORY {
                    st.retirements.pop_front();
                }
            }
        }
        let expected = why.is_expected();
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
            // Holding the process slot: it cannot be reaped (and its pid reused) meanwhile.
            worker.kill();
        }
        let weak = self.this.clone();
        let g = worker.clone();
        let graceful_exit = self.config.limits.graceful_exit;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(cleanup(weak, g, graceful, graceful_exit));
            }
            Err(_) => {
                g.clean_now();
                lock(&self.state).live.remove(&g.id);
            }
        }
    }
}

/// W10: retires a resident generation on the policy clock when it reaches its maximum age while
/// idle — not only when the next request arrives. It takes the active slot first (so it never
/// retires a generation under an active request; a busy generation retires gracefully after
/// its request, see `run_request`); if the slot is not free within the admission ceiling the
/// request-time check applies.
pub(super) async fn retire_at_age(this: Weak<Inner>, worker: Arc<Generation>) {
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
            RetirementReason::AgeLimit,
            "reached its maximum age while idle",
            true,
        );
    }
}

/// W9: samples the child's RSS every 100 ms; a breach retires the generation.
pub(super) async fn sample_rss(weak: Weak<Inner>, worker: Arc<Generation>) {
    let (interval, limit) = match weak.upgrade() {
        Some(inner) => (
            inner.config.limits.rss_interval,
            inner.config.limits.rss_limit_bytes,
        ),
        None => return,
    };
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = worker.cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let sampled = lock(&worker.process).as_mut().and_then(|p| p.rss_bytes());
        let Some(rss) = sampled else {
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
                RetirementReason::RssLimit,
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
    let child = lock(&worker.process).take();
    let mut exit = None;
    if let Some(mut child) = child {
        if graceful {
            drop(worker.writer.lock().await.take()); // close stdin: the worker exits (W11 guard)
            match tokio::time::timeout(graceful_exit, child.wait()).await {
                Ok(Ok(status)) => exit = Some(status),
                _ => child.kill(),
            }
        } else {
            child.kill();
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
    worker.mark_cleaned(exit);
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
pub(super) fn open_stderr_log(path: &std::path::Path) -> Option<std::fs::File> {
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

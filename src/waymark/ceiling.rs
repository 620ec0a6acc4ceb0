//! Phase ceilings on running time (W6): a paused process is not a slow worker. Admission
//! (`queue`), readiness, the active phase and the outer allowance (`supervisor`) all wait
//! through [`within`].
//!
//! A ceiling is counted in slices of at most [`SLICE`] on the tokio timer. A slice whose timer
//! fires more than [`PAUSE_TOLERANCE`] late means this process was not running — stopped
//! (SIGSTOP, a suspended laptop), or starved so badly its timers could not fire: only the slice
//! itself is counted and the rest is reported as paused, so the ceiling is re-armed by the
//! pause instead of firing the moment the process resumes. No OS clock helps here:
//! `CLOCK_MONOTONIC` does not count a suspend but does count SIGSTOP, and `CLOCK_BOOTTIME` counts
//! both; the process's CPU time does not grow while it waits on a healthy worker either.
//! A late timer is the one sign every kind of pause leaves.
//!
//! Before a ceiling fires, the guarded future is polled once more, so an answer that arrived
//! during the last slice wins.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;

/// Longest stretch counted at once (also the granularity of pause detection).
pub(crate) const SLICE: Duration = Duration::from_millis(100);
/// A slice's timer firing later than this past its deadline is a pause, not running time.
pub(crate) const PAUSE_TOLERANCE: Duration = Duration::from_secs(1);

/// How a guarded wait ended, and how long the process was found paused during it.
#[derive(Debug)]
pub(crate) struct Measured<T> {
    /// `Some`: the future finished within the ceiling; `None`: the ceiling ran out.
    pub value: Option<T>,
    /// Time not counted against the ceiling because the process was paused (zero mostly).
    pub paused: Duration,
}

/// Runs `fut` for at most `ceiling` of running time (see the module header). The ceiling fires
/// no earlier than `ceiling` after the start and, without pauses, within one timer tick of it.
pub(crate) async fn within<F: Future>(ceiling: Duration, fut: F) -> Measured<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut counted = Duration::ZERO;
    let mut paused = Duration::ZERO;
    loop {
        let remaining = ceiling.saturating_sub(counted);
        if remaining.is_zero() {
            let value = fut.as_mut().now_or_never();
            return Measured { value, paused };
        }
        let step = remaining.min(SLICE);
        let before = Instant::now();
        tokio::select! {
            biased;
            out = fut.as_mut() => return Measured { value: Some(out), paused },
            () = tokio::time::sleep(step) => {}
        }
        let gap = before.elapsed();
        if gap > step + PAUSE_TOLERANCE {
            counted += step;
            paused += gap - step;
        } else {
            counted += gap;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_ceiling_fires_at_its_limit_without_pauses() {
        let start = Instant::now();
        let m = within(Duration::from_secs(15), std::future::pending::<()>()).await;
        assert!(m.value.is_none());
        assert_eq!(m.paused, Duration::ZERO);
        assert_eq!(start.elapsed(), Duration::from_secs(15));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_is_not_counted_against_the_ceiling() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let guarded = tokio::spawn(within(Duration::from_secs(15), rx));
        // 5 s of running time, then the whole process "stops" for 20 s: the timer jumps.
        tokio::time::sleep(Duration::from_secs(5)).await;
        tokio::time::advance(Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !guarded.is_finished(),
            "a 20 s pause must not fire a 15 s ceiling"
        );
        tx.send(7).expect("send");
        let m = guarded.await.expect("join");
        assert_eq!(m.value.map(|v| v.ok()), Some(Some(7)));
        assert!(
            m.paused >= Duration::from_secs(19) && m.paused <= Duration::from_secs(20),
            "{:?}",
            m.paused
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_that_arrived_during_the_last_slice_wins() {
        let ready = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let m = within(Duration::from_millis(100), ready).await;
        assert!(
            m.value.is_some(),
            "the answer and the ceiling at the same instant"
        );
    }
}

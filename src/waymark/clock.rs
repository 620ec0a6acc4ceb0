//! The policy clock (SPEC W10): generation age and the rolling-minute launch window are measured
//! on a [`Clock`], so tests can move time explicitly. Phase ceilings (W6) use `tokio::time`, which
//! tests can pause.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Policy clock: the system's monotonic clock (`tokio::time::Instant::now`, which honours paused
/// tokio time), or a manual clock that is `tokio` now plus an offset the test advances.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// The manual offset; [`Clock::sleep_until`] wakes when it moves.
    manual: Option<Arc<watch::Sender<Duration>>>,
}

impl Clock {
    /// The ordinary clock.
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that runs with tokio time plus an offset moved by [`Clock::advance`].
    pub fn manual() -> Self {
        Self {
            manual: Some(Arc::new(watch::Sender::new(Duration::ZERO))),
        }
    }

    /// Moves a manual clock forward by `by` (no effect on the system clock).
    pub fn advance(&self, by: Duration) {
        if let Some(offset) = &self.manual {
            offset.send_modify(|o| *o += by);
        }
    }

    /// The current instant.
    pub fn now(&self) -> Instant {
        let now = Instant::now();
        match &self.manual {
            Some(offset) => now + *offset.borrow(),
            None => now,
        }
    }

    /// Waits until [`Clock::now`] reaches `deadline`: tokio time passing (also paused time
    /// advanced by a test) or a manual clock being advanced past it (W10 age timers).
    pub async fn sleep_until(&self, deadline: Instant) {
        let mut moved = self.manual.as_ref().map(|m| m.subscribe());
        loop {
            let now = self.now();
            if now >= deadline {
                return;
            }
            let wait = tokio::time::sleep(deadline - now);
            match moved.as_mut() {
                Some(rx) => {
                    tokio::select! {
                        () = wait => {}
                        _ = rx.changed() => {}
                    }
                }
                None => wait.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn manual_clock_moves_only_when_advanced() {
        let clock = Clock::manual();
        let a = clock.now();
        clock.advance(Duration::from_secs(3600));
        assert_eq!(clock.now() - a, Duration::from_secs(3600));
        let system = Clock::system();
        let b = system.now();
        system.advance(Duration::from_secs(5));
        assert_eq!(system.now() - b, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_until_wakes_when_a_manual_clock_is_advanced_past_the_deadline() {
        let clock = Clock::manual();
        let deadline = clock.now() + Duration::from_secs(3600);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(deadline).await }
        });
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(1800));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished(), "half way is not the deadline");
        clock.advance(Duration::from_secs(1800));
        tokio::time::timeout(Duration::from_millis(1), sleeper)
            .await
            .expect("woke at the deadline without tokio time passing")
            .expect("sleeper");
    }
}

//! The policy clock (SPEC W10): generation age and the rolling-minute launch window are measured
//! on a [`Clock`], so tests can move time explicitly. Phase ceilings (W6) use `tokio::time`, which
//! tests can pause.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Policy clock: the system's monotonic clock (`tokio::time::Instant::now`, which honours paused
/// tokio time), or a manual clock that is `tokio` now plus an offset the test advances.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<Mutex<Duration>>>,
}

impl Clock {
    /// The ordinary clock.
    pub fn system() -> Self {
        Self { manual: None }
    }

    /// A clock that runs with tokio time plus an offset moved by [`Clock::advance`].
    pub fn manual() -> Self {
        Self {
            manual: Some(Arc::new(Mutex::new(Duration::ZERO))),
        }
    }

    /// Moves a manual clock forward by `by` (no effect on the system clock).
    pub fn advance(&self, by: Duration) {
        if let Some(offset) = &self.manual {
            let mut o = offset.lock().unwrap_or_else(|e| e.into_inner());
            *o += by;
        }
    }

    /// The current instant.
    pub fn now(&self) -> Instant {
        let now = Instant::now();
        match &self.manual {
            Some(offset) => now + *offset.lock().unwrap_or_else(|e| e.into_inner()),
            None => now,
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
}

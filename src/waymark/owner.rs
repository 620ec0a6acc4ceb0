//! Worker ownership for embeddings (SPEC W13).
//!
//! - [`OwnerGuard`]: a scoped owner. Nested guards in one process share one [`Waymark`]; when the
//!   last guard is released the worker is shut down (child reaped, owned files removed).
//! - [`shared`]: without a guard, a lazy process-wide singleton configured from the environment,
//!   cleaned up at process exit.
//!
//! Separate OS processes never share a child: each process owns its own.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::config::{ConfigError, WaymarkConfig};
use super::supervisor::Waymark;
use crate::config::Settings;
use crate::telemetry::Recorder;

struct Owned {
    waymark: Waymark,
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.waymark.shutdown_now();
    }
}

static GUARDED: Mutex<Weak<Owned>> = Mutex::new(Weak::new());
static SINGLETON: OnceLock<Waymark> = OnceLock::new();

/// W13: a scoped owner of the process's Waymark worker. Clone-free sharing: acquire again while
/// one is held and you get the same worker.
pub struct OwnerGuard {
    owned: Arc<Owned>,
}

impl OwnerGuard {
    /// Acquires the owner: shares the live guard's worker, or builds one with `make`.
    pub fn acquire_with(
        make: impl FnOnce() -> Result<Waymark, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let mut slot = GUARDED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(owned) = slot.upgrade() {
            return Ok(Self { owned });
        }
        let owned = Arc::new(Owned { waymark: make()? });
        *slot = Arc::downgrade(&owned);
        Ok(Self { owned })
    }

    /// Acquires the owner, building the worker from the environment
    /// ([`Settings::from_env`]: a library entry point with no `main` to resolve settings)
    /// when none is held.
    pub fn acquire() -> Result<Self, ConfigError> {
        Self::acquire_with(|| from_settings(&Settings::from_env()))
    }

    /// The owned worker.
    pub fn waymark(&self) -> &Waymark {
        &self.owned.waymark
    }

    /// Releases this guard; when it is the last one, shuts the worker down gracefully (W11).
    pub async fn release(self) {
        let waymark = self.owned.waymark.clone();
        let last = Arc::strong_count(&self.owned) == 1;
        if last {
            waymark.shutdown().await;
        }
        drop(self);
    }
}

/// W13: the process's worker: the live guard's when one is held, else a lazy singleton built
/// from the environment with exit-time cleanup.
pub fn shared() -> Result<Waymark, ConfigError> {
    if let Some(owned) = GUARDED.lock().unwrap_or_else(|e| e.into_inner()).upgrade() {
        return Ok(owned.waymark.clone());
    }
    if let Some(w) = SINGLETON.get() {
        return Ok(w.clone());
    }
    let built = from_settings(&Settings::from_env())?;
    let waymark = SINGLETON.get_or_init(|| {
        // SAFETY: registering a plain extern "C" function with atexit has no preconditions.
        unsafe {
            libc::atexit(cleanup_singleton_at_exit);
        }
        built
    });
    Ok(waymark.clone())
}

/// A worker and its recorder from `settings` (default script dir and work root).
fn from_settings(settings: &Settings) -> Result<Waymark, ConfigError> {
    let config = WaymarkConfig::from_settings(
        settings,
        WaymarkConfig::default_script_dir(settings)?,
        WaymarkConfig::default_work_root(settings),
    )?;
    Ok(Waymark::new(config, Recorder::from_settings(settings).0))
}

extern "C" fn cleanup_singleton_at_exit() {
    if let Some(w) = SINGLETON.get() {
        w.shutdown_now();
    }
}

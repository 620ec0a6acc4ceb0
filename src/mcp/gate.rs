//! The agent admission gate (SPEC A3): an observed process an agent host starts for a console
//! run holds every tool call until the console has checked the host's seal and preflighted this
//! process, so no call runs before the seal is known to hold. The console opens the gate by
//! creating a file; a process without `PATCHDIFF_AGENT_GATE` has no gate.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::config::{ConfigError, Key, Settings};

/// The variable naming the gate file (an absolute path the console creates to admit the agent).
pub const GATE_VARIABLE: &str = Key::AgentGate.variable();

/// How long a tool call waits for the console to admit the agent before it is refused: longer
/// than the console's seal report wait (60 s) plus its readiness wait (10 s).
pub const ADMISSION_WAIT: Duration = Duration::from_secs(90);

/// How often a waiting call looks for the gate file.
const POLL: Duration = Duration::from_millis(20);

/// A gate that opens once its file exists and then stays open for the life of the process.
#[derive(Debug)]
pub struct AdmissionGate {
    path: PathBuf,
    open: AtomicBool,
}

impl AdmissionGate {
    /// Reads [`GATE_VARIABLE`] from the process's settings: unset gives no gate; a relative
    /// path is refused (P2).
    pub fn from_settings(settings: &Settings) -> Result<Option<Self>, ConfigError> {
        match settings.text(Key::AgentGate)? {
            None => Ok(None),
            Some(p) if PathBuf::from(p).is_absolute() => Ok(Some(Self {
                path: PathBuf::from(p),
                open: AtomicBool::new(false),
            })),
            Some(p) => Err(ConfigError::new(
                GATE_VARIABLE,
                p,
                "an absolute file path (the console creates it to admit the agent)",
            )),
        }
    }

    /// Waits until the gate is open, up to `limit`. Errors say the agent was not admitted.
    pub async fn admit(&self, limit: Duration) -> Result<(), String> {
        if self.open.load(Ordering::Acquire) {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if tokio::fs::try_exists(&self.path).await.unwrap_or(false) {
                self.open.store(true, Ordering::Release);
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the console has not admitted the agent after {} s (its seal or preflight did not pass); no tool runs",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_waits_for_the_file_and_is_refused_when_it_never_comes() {
        let dir = tempfile::tempdir().unwrap();
        let gate = AdmissionGate {
            path: dir.path().join("admitted"),
            open: AtomicBool::new(false),
        };
        let err = gate.admit(Duration::from_secs(5)).await.unwrap_err();
        assert!(err.contains("not admitted the agent after 5 s"), "{err}");
        std::fs::write(dir.path().join("admitted"), b"").unwrap();
        gate.admit(Duration::from_secs(5)).await.unwrap();
        // Once open it stays open, whatever happens to the file.
        std::fs::remove_file(dir.path().join("admitted")).unwrap();
        gate.admit(Duration::ZERO).await.unwrap();
    }
}

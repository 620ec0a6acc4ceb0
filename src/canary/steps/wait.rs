//! `wait saved` (U1): until every target was saved at least once (a real agent host
//! finished), the observed process died, or the timeout.

use std::time::{Duration, Instant};

use serde_json::json;

use super::super::client::{self, LaunchSpec, McpProcess};
use super::super::error::StepError;
use super::super::state::TargetRow;
use super::ensure_running;

/// Polls the targets' versions through the full process (relaunched from `full_spec` if it
/// is gone) every 500 ms until each is saved. Errors: the observed process (`observed_pid`)
/// exited while waiting, or `timeout` passed; both name the targets not yet saved.
pub async fn wait_saved(
    full: &mut Option<McpProcess>,
    full_spec: &LaunchSpec,
    observed_pid: Option<u32>,
    targets: &[TargetRow],
    timeout: Duration,
) -> Result<String, StepError> {
    let deadline = Instant::now() + timeout;
    loop {
        let full = ensure_running(full, full_spec).await?;
        let mut unsaved = Vec::new();
        for row in targets {
            let t = full
                .call_ok("patchdiff_read_target", json!({"target": row.name}))
                .await?;
            if t["version"].as_u64().unwrap_or(0) == 0 {
                unsaved.push(row.name.clone());
            }
        }
        if unsaved.is_empty() {
            return Ok("every target saved".to_owned());
        }
        // U1: a process that died while we wait ends the wait, with its exit.
        if let Some(pid) = observed_pid {
            let state = client::proc_state(u64::from(pid));
            if state == "gone" || state.starts_with('Z') {
                return Err(StepError::Failed(format!(
                    "the observed process (pid {pid}) exited while waiting ({state}); not yet saved: {}",
                    unsaved.join(", ")
                )));
            }
        }
        if Instant::now() >= deadline {
            return Err(StepError::Failed(format!(
                "timed out; not yet saved: {}",
                unsaved.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

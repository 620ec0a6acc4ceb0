//! One file per canary step. Each takes only the run state it uses (a process, the manifest,
//! the run directory, the target rows) — never the whole `Canary`, which only wires them
//! together — and returns a typed [`super::error::StepError`].
//!
//! The agent host step is in [`agent_host`] (with the host's pieces in [`super::host`]).

pub mod agent;
pub mod agent_host;
pub mod compare;
pub mod deadline;
pub mod evaluate;
pub mod export;
pub mod host_config;
pub mod init;
pub mod inspect;
pub mod preflight;
pub mod replica;
pub mod seal;
pub mod suite;
pub mod views;
pub mod wait;

use super::client::{LaunchSpec, McpProcess};
use super::error::StepError;

/// The process in `slot`, launched from `spec` first when it is not running.
pub async fn ensure_running<'a>(
    slot: &'a mut Option<McpProcess>,
    spec: &LaunchSpec,
) -> Result<&'a McpProcess, StepError> {
    if slot.is_none() {
        *slot = Some(McpProcess::launch(spec).await?);
    }
    slot.as_ref().ok_or_else(StepError::no_full)
}

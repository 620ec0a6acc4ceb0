//! `init` (C1, C7): authenticate every fixture, then initialize each target through the
//! full-profile process at version 0.

use serde_json::json;

use super::super::client::McpProcess;
use super::super::error::StepError;
use super::super::state::TargetRow;
use crate::evidence::InitialTarget;
use crate::fixtures::{Fixture, FixtureManifest};

/// C1: every fixture authenticated (pinned SHA-256 of its original) before any is initialized,
/// off the async runtime (bounded reads of regular files). Errors: the first fixture that does
/// not authenticate, naming it.
pub async fn authenticate(manifest: &FixtureManifest) -> Result<Vec<Fixture>, StepError> {
    let manifest = manifest.clone();
    let fixtures = tokio::task::spawn_blocking(move || manifest.authenticate_originals())
        .await
        .map_err(|e| anyhow::anyhow!("fixture authentication task failed: {e}"))?
        .map_err(anyhow::Error::from)?;
    Ok(fixtures.into_iter().map(|(fixture, _)| fixture).collect())
}

/// Initializes each authenticated fixture's target on `full` (`patchdiff_init_target`, `reset`
/// as given) and records its version and hash in its row of `targets`. Returns what the run
/// manifest records as the initial targets. Errors name the target whose call failed.
pub async fn init_targets(
    full: &McpProcess,
    manifest: &FixtureManifest,
    fixtures: &[Fixture],
    reset: bool,
    targets: &mut [TargetRow],
) -> Result<Vec<InitialTarget>, StepError> {
    let mut initial = Vec::new();
    for fixture in fixtures {
        let path = std::fs::canonicalize(manifest.resolve(&fixture.original))?;
        let reply = full
            .call_ok(
                "patchdiff_init_target",
                json!({
                    "target": fixture.target, "fixture": path, "sha256": fixture.sha256,
                    "language": fixture.language, "reset": reset,
                }),
            )
            .await
            .map_err(|e| StepError::Call(format!("target `{}`: {}", fixture.target, e.message)))?;
        initial.push(InitialTarget {
            target: fixture.target.clone(),
            language: fixture.language.clone(),
            sha256: reply["sha256"].as_str().unwrap_or_default().to_owned(),
            version: reply["version"].as_u64().unwrap_or_default(),
        });
    }
    for row in targets.iter_mut() {
        if let Some(t) = initial.iter().find(|t| t.target == row.name) {
            row.current_sha256 = t.sha256.clone();
            row.version = t.version;
        }
    }
    Ok(initial)
}

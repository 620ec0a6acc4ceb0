//! `export` (C2, E2): each target's saved version written once into the run's `export/`
//! through the full-profile process.

use serde_json::json;

use super::super::client::McpProcess;
use super::super::error::StepError;
use super::super::state::TargetRow;
use crate::evidence::RunDir;
use crate::fixtures::FixtureManifest;

/// Exports every fixture's target to `run`'s `export/<module file>`, recording the exported
/// hash and version in its row of `targets`. Errors: an export that already exists (exports
/// are written once, E2), or the call's failure naming the target.
pub async fn export(
    full: &McpProcess,
    manifest: &FixtureManifest,
    run: &RunDir,
    targets: &mut [TargetRow],
) -> Result<String, StepError> {
    let dir = run.exports();
    crate::evidence::create_private_dir(&dir)?;
    let mut lines = Vec::new();
    for fixture in &manifest.fixtures {
        let dest = run.export(&fixture.module_file);
        if dest.exists() {
            return Err(StepError::Refused(format!(
                "`{}` was already exported in this run ({}); exports are written once (E2)",
                fixture.target,
                dest.display()
            )));
        }
        let reply = full
            .call_ok(
                "patchdiff_export_target",
                json!({"target": fixture.target, "dest": dest}),
            )
            .await
            .map_err(|e| {
                StepError::Call(format!(
                    "export of `{}` failed: {}",
                    fixture.target, e.message
                ))
            })?;
        if let Some(row) = targets.iter_mut().find(|r| r.name == fixture.target) {
            row.exported_sha256 = reply["sha256"].as_str().map(str::to_owned);
            row.version = reply["version"].as_u64().unwrap_or(row.version);
        }
        lines.push(format!("{} v{}", fixture.target, reply["version"]));
    }
    Ok(format!("{} → {}", lines.join(" · "), dir.display()))
}

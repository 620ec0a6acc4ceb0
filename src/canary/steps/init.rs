//! `init` (C1, C7): authenticate every fixture, then initialize each target through the
//! full-profile process at version 0.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::super::client::McpProcess;
use super::super::error::StepError;
use super::super::launch::Launcher;
use super::super::names::ProcessKind;
use super::super::record;
use super::super::state::TargetRow;
use crate::evidence::{AgentIdentity, InitialTarget, RunManifest};
use crate::fixtures::{Fixture, FixtureManifest};
use crate::telemetry::unix_ms_now;

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

/// What the run manifest records beyond the launcher's configuration (E1).
pub struct ManifestInputs<'a> {
    /// When the run started, Unix ms.
    pub started_ms: f64,
    pub identity: &'a AgentIdentity,
    /// The suite's manifest the run's copy was made from.
    pub suite_source: Option<&'a PathBuf>,
    /// The agent host a script will launch ([`crate::canary::host::plan`]).
    pub planned_host: Option<&'a Value>,
    pub provider_endpoints: &'a Value,
}

/// Writes the run manifest (E1, once: E2): the initial targets, each process's resolved
/// configuration and software versions, the store's identity, the run's suite copy and where it
/// came from, the agent host and provider endpoints. Errors: the manifest already exists or
/// cannot be written.
pub fn write_run_manifest(
    launcher: Launcher<'_>,
    inputs: &ManifestInputs<'_>,
    initial_targets: Vec<InitialTarget>,
    store_identity: Value,
) -> std::io::Result<()> {
    let (source_sha, source_sha_origin) = crate::evidence::source_sha();
    let observed = launcher.spec(ProcessKind::Observed);
    let full = launcher.spec(ProcessKind::Full);
    let manifest = RunManifest {
        run_id: launcher.run.run_id.clone(),
        started_ms: inputs.started_ms,
        written_ms: unix_ms_now(),
        source_sha,
        source_sha_origin,
        agent: inputs.identity.clone(),
        initial_targets,
        configuration: json!({
            "observed_process": record::redacted_env(observed.env.iter().cloned()),
            // E1: the complete run record (resolved per process; software versions).
            "processes": {
                "observed": record::process_record(&observed.env, &launcher.options.settings),
                "full": record::process_record(&full.env, &launcher.options.settings),
            },
            "node": record::node_record(&observed.env, &launcher.options.settings),
            "waymark_packages": crate::waymark::WaymarkConfig::default_script_dir(&launcher.options.settings)
                .map_or_else(|e| json!({ "error": e.to_string() }), |dir| record::waymark_packages(&dir)),
            "console": record::console_record(),
            // The database the journal lives in (`verify` refuses another one).
            "store_identity": store_identity,
            // The run's own copy of the suite (relative to the run directory) and where
            // it was copied from (a run verifies from its copy wherever it is moved).
            "fixture_manifest": launcher.options.manifest.strip_prefix(&launcher.run.path)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| launcher.options.manifest.clone()),
            "fixture_manifest_source": inputs.suite_source.map(|s| {
                std::fs::canonicalize(s).unwrap_or_else(|_| s.clone())
            }),
            "fixture_manifest_sha256": crate::evidence::file_digest(&launcher.options.manifest).ok(),
            "executable": launcher.options.exe,
            "agent_host": inputs.planned_host,
            // Which provider endpoints the agent host would talk to (host
            // and whether it is loopback, never a URL's secrets).
            "provider_endpoints": inputs.provider_endpoints,
            // A1: the observed process an agent host starts from its MCP configuration.
            "host_observed_process": inputs.planned_host.map(|_| {
                record::redacted_env(launcher.host_observed_env())
            }),
        }),
        gate2: "closed".to_owned(),
    };
    launcher.run.write_manifest(&manifest)
}

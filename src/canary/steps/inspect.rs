//! `inspect` (C5, K6): SAVE/replay consistency of every target — its journal, paged from the
//! full-profile process, replayed from the fixture bytes by the one journal replayer
//! ([`JournalReplay`], which `verify` uses too) — and the audit's counts.

use serde_json::{Value, json};

use super::super::client::McpProcess;
use super::super::error::StepError;
use super::super::names::HOST_OBSERVED;
use super::super::state::TargetRow;
use super::super::story;
use crate::evidence::run_dir::{RunDir, process::OBSERVED};
use crate::fixtures::FixtureManifest;
use crate::verify::replay::{JournalReplay, entry_from_json};

/// Reads each target's state and audit from `full`, replays its journal and records version,
/// revision, hash, counts and consistency in its row of `targets` (a broken replay also as a
/// note; so is every accepted edit that left syntax errors, found in `run`'s wire logs). Errors: [`StepError::Failed`] naming each inconsistent target and the first entry
/// that broke it; a target missing from `manifest`, a fixture that cannot be read or a failed
/// call.
pub async fn inspect(
    full: &McpProcess,
    manifest: &FixtureManifest,
    run: &RunDir,
    targets: &mut [TargetRow],
) -> Result<String, StepError> {
    let mut problems = Vec::new();
    let (mut attempts_total, mut rejected_total, mut worker_errors) = (0, 0, 0);
    for row in targets.iter_mut() {
        let name = row.name.clone();
        let fixture = manifest
            .fixture(&name)
            .ok_or_else(|| StepError::Failed(format!("target `{name}` is not in the manifest")))?;
        let original = std::fs::read(manifest.resolve(&fixture.original))?;
        let t = full
            .call_ok("patchdiff_read_target", json!({"target": name}))
            .await?;
        let audit = full
            .call_ok("patchdiff_audit", json!({"target": name}))
            .await?;
        let consistency = replay_consistency(full, &name, &original, &t).await;
        row.version = t["version"].as_u64().unwrap_or(0);
        row.revision = t["revision"].as_u64().unwrap_or(0);
        row.current_sha256 = t["sha256"].as_str().unwrap_or_default().to_owned();
        row.accepted = audit["attempts"]["accepted"].as_u64().unwrap_or(0);
        row.rejected = audit["attempts"]["rejected"].as_u64().unwrap_or(0);
        // An accepted edit that left syntax errors is the agent's doing and worth a line.
        for process in [OBSERVED, HOST_OBSERVED] {
            if let Ok(file) = std::fs::File::open(run.wire_log(process)) {
                let log = std::io::BufReader::with_capacity(64 * 1024, file);
                for a in story::attempts_in_log(log, process, &name) {
                    for w in a
                        .warnings
                        .iter()
                        .filter(|w| w.starts_with("SYNTAX_ERRORS_INTRODUCED"))
                    {
                        let at = a.revision.map_or("-".into(), |r| format!("r{r}"));
                        row.notes.push(format!("{at} (key {}): {w}", a.request_key));
                    }
                }
            }
        }
        attempts_total += row.accepted + row.rejected;
        rejected_total += row.rejected;
        worker_errors += audit["worker_errors"]
            .as_object()
            .map(|m| m.values().filter_map(Value::as_u64).sum::<u64>())
            .unwrap_or(0);
        match consistency {
            Ok(()) => row.replay_consistent = Some(true),
            Err(e) => {
                row.replay_consistent = Some(false);
                row.notes.push(e.clone());
                problems.push(format!("{name}: {e}"));
            }
        }
    }
    if !problems.is_empty() {
        return Err(StepError::Failed(format!(
            "SAVE/replay inconsistent: {}",
            problems.join("; ")
        )));
    }
    Ok(format!(
        "SAVE/replay consistent for {} targets · {attempts_total} attempts, {rejected_total} rejected · {worker_errors} worker errors",
        targets.len()
    ))
}

/// Page size used when replaying a journal for inspection.
const REPLAY_PAGE: u32 = 500;

/// K6 check through the full process: replaying the journal from the fixture bytes reproduces
/// every saved version (hash per `save` entry) and the current revision; revisions advance by
/// exactly one per edit, so no edit is applied twice. Pages of [`REPLAY_PAGE`] entries are
/// followed by their replay cursor and replayed by the one journal replayer
/// ([`JournalReplay`], which `verify` uses too). Errors say which entry (kind, revision,
/// version) broke it.
pub async fn replay_consistency(
    full: &McpProcess,
    target: &str,
    original: &[u8],
    current: &Value,
) -> Result<(), String> {
    let mut replay = JournalReplay::new(original);
    let mut after: Option<String> = None;
    loop {
        let mut args = json!({"target": target, "limit": REPLAY_PAGE});
        if let Some(a) = &after {
            args["after"] = Value::String(a.clone());
        }
        let page = full
            .call_ok("patchdiff_replay", args)
            .await
            .map_err(|e| format!("replay failed: {}", e.message))?;
        for entry in page["entries"].as_array().into_iter().flatten() {
            entry_from_json(entry)
                .and_then(|entry| replay.apply(&entry))
                .map_err(|e| e.to_string())?;
        }
        match page["next_cursor"].as_str() {
            Some(c) if page["has_more"].as_bool() == Some(true) => after = Some(c.to_owned()),
            _ => break,
        }
    }
    replay
        .ends_at(
            current["revision"].as_u64(),
            current["sha256"].as_str(),
            current["version"].as_u64(),
        )
        .map_err(|e| e.to_string())
}

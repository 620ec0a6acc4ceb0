//! The `report` step's sealing (V1): the processes stopped and gone, the run bound to its
//! journal, the evidence logs audited, the seal signed with the operator's key.

use std::path::Path;
use std::time::{Duration, Instant};

use super::super::client;
use super::super::state::TargetRow;
use crate::evidence::{JsonlLog, RunDir};

/// V1: the report seals the run, so nothing may write into it afterwards: waits (bounded,
/// 5 s in all) until each of `pids` (the processes just stopped) has exited.
pub async fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for &pid in pids {
        while Instant::now() < deadline {
            let state = client::proc_state(u64::from(pid));
            if state == "gone" || state.starts_with('Z') {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The journal binding of the seal (store identity and each target's journal digest),
/// read after the checkpoint — the run's own SQLite file through an `immutable` read-only
/// view, so sealing writes nothing into it; PostgreSQL or an operator's file as configured.
pub async fn journal_binding(
    run: &RunDir,
    database: &Path,
    database_url: Option<&str>,
    targets: &[TargetRow],
) -> anyhow::Result<crate::seal::JournalBinding> {
    let (path, url) = (database.to_path_buf(), database_url.map(str::to_owned));
    // Only the run's own file was checkpointed; an operator's file elsewhere may hold
    // frames in its WAL that an `immutable` view would not see.
    let postgres = url.as_deref().is_some_and(crate::store::is_postgres_url);
    let checkpointed = !postgres && path.starts_with(&run.path);
    let targets: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    let bound = tokio::task::spawn_blocking(move || {
        let store: std::sync::Arc<dyn crate::store::EditStore> = if checkpointed {
            std::sync::Arc::new(crate::store::SqliteStore::open_read_only(&path)?)
        } else {
            crate::store::open_backend(&path, url.as_deref())?
        };
        crate::seal::JournalBinding::of(store.as_ref(), &targets)
    })
    .await?;
    bound.map_err(|e| anyhow::anyhow!("{e}"))
}

/// What the run's chained evidence logs lost, one line per log and fault (the log,
/// how many records, which): gap records, `seq` jumps, torn lines, broken links, and this
/// process's own failed appends not yet recorded in a file.
pub fn evidence_incomplete(run: &RunDir, transcript: Option<&JsonlLog>) -> Vec<String> {
    let mut out = Vec::new();
    for rel in crate::evidence::evidence_files(&run.path)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| crate::evidence::is_chained(r))
    {
        let Ok(audit) = crate::evidence::audit_file(&run.path.join(&rel)) else {
            out.push(format!("{rel}: cannot be read"));
            continue;
        };
        for gap in &audit.gaps {
            out.push(format!("{rel}: {}", gap.describe()));
        }
        if !audit.torn.is_empty() {
            out.push(format!(
                "{rel}: {} torn line(s) (writes cut short) at line(s) {}",
                audit.torn.len(),
                audit
                    .torn
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some((line, why)) = &audit.changed {
            out.push(format!("{rel}: line {line}: {why}"));
        }
    }
    if let Some(gap) = transcript.and_then(JsonlLog::pending_gap) {
        out.push(format!(
            "{}: {} record(s) of this console lost and not yet recorded ({})",
            crate::evidence::run_dir::TRANSCRIPT_FILE,
            gap.records,
            gap.error
        ));
    }
    out
}

/// Signs the seal with the operator's key (`<config dir>/seal-key.pem`) when one exists;
/// says what happened: `signed by <key id>`, `unsigned (no key: patchdiff key new)`, or
/// why the key could not sign (the run stays sealed, unsigned).
pub fn sign_seal(run: &RunDir, config_dir: &Path) -> String {
    let path = crate::seal::key_path(config_dir);
    match crate::seal::SealKey::load(&path) {
        Ok(Some(key)) => match key.sign_run(&run.path) {
            Ok(id) => format!("signed by {id}"),
            Err(e) => format!("NOT signed: {e}"),
        },
        Ok(None) => "unsigned (no key: `patchdiff key new` makes one)".to_owned(),
        Err(e) => format!("NOT signed: {e}"),
    }
}

/// Each target row's version, revision, accepted/rejected counts and
/// current hash from the store (the run's SQLite file or the operator's database), when it
/// can be read; the connection is closed again before returning. Unreadable: rows stay.
pub async fn rows_from_store(
    database: &Path,
    database_url: Option<&str>,
    targets: &mut [TargetRow],
) {
    let (path, url) = (database.to_path_buf(), database_url.map(str::to_owned));
    if url.is_none() && !path.is_file() {
        return;
    }
    let read = tokio::task::spawn_blocking(move || {
        crate::store::open_backend(&path, url.as_deref()).and_then(|s| s.list_targets())
    })
    .await;
    let Ok(Ok(summaries)) = read else { return };
    for row in targets.iter_mut() {
        if let Some(t) = summaries.iter().find(|t| t.name == row.name) {
            row.version = t.version;
            row.revision = t.revision;
            row.accepted = t.accepted;
            row.rejected = t.rejected;
            row.current_sha256.clone_from(&t.sha256);
        }
    }
}

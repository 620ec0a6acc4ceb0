//! Replaying each target's journal (K6, V2) through [`super::replay::JournalReplay`]: the
//! last saved version against the export byte for byte, each journal's digest against the
//! seal's binding.

use serde_json::Value;

use super::Ctx;
use super::replay::JournalReplay;
use crate::evidence::run_dir::EXPORT_DIR;
use crate::fixtures::{FixtureManifest, sha256_hex};
use crate::store::EditStore;

/// What replaying one target's journal found, kept for the receipts check: each edit by
/// request key, each save by version.
#[derive(Default)]
pub(super) struct JournalIndex {
    /// request key → (revision, sha256, attempt id).
    pub(super) edits: std::collections::HashMap<String, (u64, String, Option<String>)>,
    /// version → (revision, sha256).
    pub(super) saves: std::collections::HashMap<u64, (u64, String)>,
}

/// Replays every fixture's target from `store` (`source` names it in problems), compares
/// the last saved version with the export and each journal's digest with the one `binding`
/// recorded at the seal. Returns each target's index and the check's summary.
pub(super) fn replay_all(
    ctx: &mut Ctx,
    fixtures: &FixtureManifest,
    store: &dyn EditStore,
    source: &str,
    binding: Option<&crate::seal::JournalBinding>,
) -> (std::collections::HashMap<String, JournalIndex>, String) {
    let mut entries_total = 0;
    let mut exports = 0;
    let mut digests = 0;
    let mut indexes = std::collections::HashMap::new();
    let report: Value = std::fs::read(ctx.run.report("json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    for f in &fixtures.fixtures {
        let original = match std::fs::read(fixtures.resolve(&f.original)) {
            Ok(b) => b,
            Err(_) => continue, // reported by the fixtures check
        };
        let mut hasher = crate::store::JournalHasher::default();
        let mut index = JournalIndex::default();
        match replay_target(store, &f.target, &original, &mut hasher, &mut index) {
            Ok((saved, n)) => {
                entries_total += n;
                let digest = hasher.finish(&f.target);
                if let Some(sealed) =
                    binding.and_then(|b| b.targets.iter().find(|d| d.target == f.target))
                {
                    digests += 1;
                    if sealed != &digest {
                        ctx.problem(
                            "journal",
                            source,
                            None,
                            format!(
                                "target `{}`: the journal holds {} entries (SHA-256 {}), the \
                                 seal recorded {} entries (SHA-256 {}) in {}: not the journal \
                                 the run sealed",
                                f.target,
                                digest.entries,
                                digest.sha256,
                                sealed.entries,
                                sealed.sha256,
                                crate::seal::JOURNAL_FILE
                            ),
                        );
                    }
                } else if binding.is_some() {
                    ctx.problem(
                        "journal",
                        crate::seal::JOURNAL_FILE,
                        None,
                        format!("records no journal digest for target `{}`", f.target),
                    );
                }
                indexes.insert(f.target.clone(), index);
                let rel = format!("{EXPORT_DIR}/{}", f.module_file);
                match std::fs::read(ctx.root.join(&rel)) {
                    Ok(exported) if exported == saved => exports += 1,
                    Ok(exported) => ctx.problem(
                        "journal",
                        &rel,
                        None,
                        format!(
                            "replaying `{}`'s journal gives {} bytes (SHA-256 {}), the export \
                             holds {} bytes (SHA-256 {})",
                            f.target,
                            saved.len(),
                            sha256_hex(&saved),
                            exported.len(),
                            sha256_hex(&exported)
                        ),
                    ),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        // Not exported is fine; exported and then gone is not.
                        if let Some(sha) = exported_sha256(&report, &f.target) {
                            ctx.problem(
                                "files",
                                &rel,
                                None,
                                format!(
                                    "missing: report.json records `{}` exported with SHA-256 \
                                     {sha} (deleted after the run, even if the sums were \
                                     recomputed)",
                                    f.target
                                ),
                            );
                        }
                    }
                    Err(e) => ctx.problem("journal", &rel, None, format!("cannot read: {e}")),
                }
            }
            Err(message) => ctx.problem(
                "journal",
                source,
                None,
                format!("target `{}`: {message}", f.target),
            ),
        }
    }
    let sealed = if binding.is_some() {
        format!(" · {digests} journal digests as sealed")
    } else {
        " · no journal digests sealed".to_owned()
    };
    (
        indexes,
        format!(
            "{entries_total} journal entries replayed · {exports} exports reproduced byte for \
             byte{sealed}"
        ),
    )
}

/// The SHA-256 `report.json` records for `target`'s export, if it was exported.
fn exported_sha256(report: &Value, target: &str) -> Option<String> {
    report["targets"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == target)?["exported_sha256"]
        .as_str()
        .map(str::to_owned)
}

/// Replays one target through the one journal replayer ([`JournalReplay`]); returns the
/// content of its last saved version (the initial bytes when never saved) and the number of
/// entries. Each entry goes into `hasher` and `index`. Errors: the store's, or the first entry
/// the replay refuses.
fn replay_target(
    store: &dyn EditStore,
    target: &str,
    original: &[u8],
    hasher: &mut crate::store::JournalHasher,
    index: &mut JournalIndex,
) -> Result<(Vec<u8>, usize), String> {
    let mut replay = JournalReplay::new(original);
    let mut after: Option<String> = None;
    let mut count = 0;
    loop {
        let page = store
            .replay(target, after.as_deref(), Some(REPLAY_PAGE))
            .map_err(|e| format!("replay failed: {e}"))?;
        for entry in &page.entries {
            count += 1;
            hasher.add(entry);
            replay.apply(entry).map_err(|e| e.to_string())?;
            match entry.kind {
                crate::store::JournalKind::Edit => {
                    if let Some(key) = &entry.request_key {
                        index.edits.insert(
                            key.clone(),
                            (
                                entry.revision,
                                entry.sha256.clone(),
                                entry.attempt_id.clone(),
                            ),
                        );
                    }
                }
                crate::store::JournalKind::Save => {
                    index
                        .saves
                        .insert(entry.version, (entry.revision, entry.sha256.clone()));
                }
                crate::store::JournalKind::Init => {}
            }
        }
        match page.next_cursor {
            Some(c) if page.has_more => after = Some(c),
            _ => break,
        }
    }
    Ok((replay.saved().to_vec(), count))
}

/// Journal entries read per replay page (the store's bound is higher; this keeps a page small).
pub(super) const REPLAY_PAGE: u32 = 500;

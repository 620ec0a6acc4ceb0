//! Backend-neutral row shapes and their decisions: the target row (state, summary, audit,
//! save, snapshot counters after an edit), journal rows, the in-process content cache and
//! where a content rebuild starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::*;

/// Locks a mutex, recovering from poisoning: a panicking holder leaves no partial state, since
/// every change is inside a database transaction.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A target's content at one revision of one incarnation (a re-init starts a new incarnation).
#[derive(Clone)]
pub(crate) struct Cached {
    pub(crate) incarnation: String,
    pub(crate) revision: u64,
    pub(crate) content: Arc<str>,
}

/// The in-process content cache both backends keep, by target id: a reader rebuilds from the
/// nearest of the cached revision or a snapshot, never from the fixture on every call.
#[derive(Default)]
pub(crate) struct ContentCache(Mutex<HashMap<i64, Cached>>);

impl ContentCache {
    /// The cached content of target `t`, if any (any revision of its incarnation).
    pub(crate) fn get(&self, t: &TargetRow) -> Option<Cached> {
        lock(&self.0)
            .get(&t.id)
            .filter(|c| c.incarnation == t.incarnation)
            .cloned()
    }

    /// The cached content of target `id`, if any (any incarnation: compare it yourself).
    pub(crate) fn get_by_id(&self, id: i64) -> Option<Cached> {
        lock(&self.0).get(&id).cloned()
    }

    /// Remembers `content` as target `id`'s content at `revision` unless a newer one is cached.
    pub(crate) fn remember(&self, id: i64, incarnation: &str, revision: u64, content: Arc<str>) {
        let mut cache = lock(&self.0);
        let newer = cache
            .get(&id)
            .is_some_and(|c| c.incarnation == incarnation && c.revision > revision);
        if !newer {
            cache.insert(
                id,
                Cached {
                    incarnation: incarnation.to_owned(),
                    revision,
                    content,
                },
            );
        }
    }

    /// A freshly initialized target: `content` at revision 0 of a new `incarnation`.
    pub(crate) fn reset(&self, id: i64, incarnation: String, content: Arc<str>) {
        lock(&self.0).insert(
            id,
            Cached {
                incarnation,
                revision: 0,
                content,
            },
        );
    }
}

/// A target's row, as both schemas hold it.
#[derive(Debug, Clone)]
pub(crate) struct TargetRow {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) language: String,
    pub(crate) incarnation: String,
    pub(crate) version: u64,
    pub(crate) revision: u64,
    pub(crate) sha256: String,
    pub(crate) initial_sha256: String,
    pub(crate) saved_revision: u64,
    pub(crate) edits_since_snapshot: u64,
    pub(crate) bytes_since_snapshot: u64,
}

impl TargetRow {
    /// The target's audit (C5) from its attempt, observation, rejection and worker-error counts;
    /// every attempt has a receipt and every save made a version.
    pub(crate) fn into_audit(
        self,
        accepted: u64,
        rejected: u64,
        observations: u64,
        rejections: std::collections::BTreeMap<String, u64>,
        worker_errors: std::collections::BTreeMap<String, u64>,
    ) -> Audit {
        Audit {
            target: self.name,
            version: self.version,
            revision: self.revision,
            sha256: self.sha256,
            initial_sha256: self.initial_sha256,
            attempts: AttemptCounts {
                total: accepted + rejected,
                accepted,
                rejected,
            },
            receipts: accepted + rejected,
            saves: self.version,
            observations,
            rejections,
            worker_errors,
        }
    }

    /// The target's state as `read_target` returns it, with its current `content`.
    pub(crate) fn into_state(self, content: String) -> TargetState {
        TargetState {
            name: self.name,
            language: self.language,
            version: self.version,
            revision: self.revision,
            sha256: self.sha256,
            content,
            initial_sha256: self.initial_sha256,
            saved_revision: self.saved_revision,
        }
    }
}

/// [`TargetRow`]'s columns, in its field order, for both backends' `SELECT`s.
pub(crate) const TARGET_COLS: &str = "id, name, language, incarnation, version, revision, \
     sha256, initial_sha256, saved_revision, edits_since_snapshot, bytes_since_snapshot";

/// A revision, version or count as an SQL integer (both databases store them as signed 64-bit;
/// none comes near `i64::MAX`).
pub(crate) fn i(v: u64) -> i64 {
    v as i64
}

/// The consistent read a submission's plan is made from.
pub(crate) struct PlanRead {
    pub(crate) target: TargetRow,
    pub(crate) observations: HashMap<String, crate::kernel::ObservationRecord>,
    pub(crate) steps_from: u64,
    pub(crate) steps: Vec<Vec<EditShape>>,
    pub(crate) current: Arc<str>,
    pub(crate) base_content: Option<String>,
}

impl PlanRead {
    /// K3: the kernel's plan for `submission` against this read (no I/O, no lock needed).
    pub(crate) fn plan(&self, name: &str, submission: &Submission, strict: bool) -> Plan {
        crate::kernel::plan_submission(&crate::kernel::PlanInput {
            target: name,
            submission,
            strict,
            base_content: self.base_content.as_deref().unwrap_or(&self.current),
            current_content: &self.current,
            current_revision: self.target.revision,
            steps_from: self.steps_from,
            steps: &self.steps,
            observations: &self.observations,
        })
    }
}

/// K2: the distinct observation ids a submission names, in first-use order (each is loaded
/// once for planning).
pub(crate) fn observation_ids(submission: &Submission) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    for id in submission
        .operations
        .iter()
        .filter_map(|o| o.observation_id.as_deref())
    {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// K3: the revision the kernel's transform steps start from: the oldest observation's, or the
/// submission's base when that is older.
pub(crate) fn steps_from(
    observations: &HashMap<String, crate::kernel::ObservationRecord>,
    base: u64,
) -> u64 {
    observations
        .values()
        .map(|o| o.revision)
        .chain([base])
        .min()
        .unwrap_or(base)
}

/// C1/K8: what `init_target` returns: the fixture bytes at version 0, revision 0.
pub(crate) fn initial_state(name: &str, language: &str, text: &str, sha256: String) -> TargetState {
    TargetState {
        name: name.to_owned(),
        language: language.to_owned(),
        version: 0,
        revision: 0,
        sha256: sha256.clone(),
        content: text.to_owned(),
        initial_sha256: sha256,
        saved_revision: 0,
    }
}

/// A target's attempt and observation counts: (accepted, rejected, observations).
pub(crate) type Counts = (u64, u64, u64);

impl TargetRow {
    /// C1: `TARGET_NOT_FRESH` unless this target has no history or `reset` is set.
    pub(crate) fn check_fresh(&self, counts: Counts, reset: bool) -> Result<(), StoreError> {
        let (accepted, rejected, observations) = counts;
        check_fresh(
            &self.name,
            self.version,
            self.revision,
            accepted + rejected,
            observations,
            reset,
        )
    }

    /// The target's line in `list_targets`.
    pub(crate) fn into_summary(self, counts: Counts) -> TargetSummary {
        let (accepted, rejected, observations) = counts;
        TargetSummary {
            name: self.name,
            language: self.language,
            version: self.version,
            revision: self.revision,
            sha256: self.sha256,
            initial_sha256: self.initial_sha256,
            accepted,
            rejected,
            observations,
        }
    }

    /// K6: what `save` returns once the current revision became `version`.
    pub(crate) fn saved_as(self, version: u64) -> SaveResult {
        SaveResult {
            target: self.name,
            version,
            revision: self.revision,
            sha256: self.sha256,
        }
    }

    /// K3/K7: the row's snapshot counters after `a` is journalled, and whether a snapshot of
    /// the new content is due now (then both counters restart at 0).
    pub(crate) fn after_edit(&self, a: &Applied) -> EditedRow {
        let since_edits = self.edits_since_snapshot + 1;
        let since_bytes = self.bytes_since_snapshot + journal_weight(&a.edits);
        let snapshot = snapshot_due(since_edits, since_bytes, a.new_content.len());
        EditedRow {
            snapshot,
            since_edits: if snapshot { 0 } else { since_edits },
            since_bytes: if snapshot { 0 } else { since_bytes },
        }
    }
}

/// See [`TargetRow::after_edit`]; the counters as SQL integers.
pub(crate) struct EditedRow {
    pub(crate) snapshot: bool,
    pub(crate) since_edits: u64,
    pub(crate) since_bytes: u64,
}

/// One journal entry's columns (K6), decided once for both backends: `init` (revision 0,
/// version 0), `edit` (an accepted attempt) or `save` (a new version).
pub(crate) struct JournalRow<'a> {
    pub(crate) kind: &'static str,
    pub(crate) revision: u64,
    pub(crate) version: u64,
    pub(crate) attempt_id: Option<&'a str>,
    pub(crate) request_key: Option<&'a str>,
    pub(crate) sha256: &'a str,
    pub(crate) edits: &'a [TextEdit],
}

impl<'a> JournalRow<'a> {
    /// The first entry of a target (or of a reset one): its fixture's hash.
    pub(crate) fn init(sha256: &'a str) -> Self {
        JournalRow {
            kind: "init",
            revision: 0,
            version: 0,
            attempt_id: None,
            request_key: None,
            sha256,
            edits: &[],
        }
    }

    /// An accepted attempt's edits, at the revision it made, under the current version.
    pub(crate) fn edit(t: &TargetRow, a: &'a Applied) -> Self {
        JournalRow {
            kind: "edit",
            revision: a.revision,
            version: t.version,
            attempt_id: Some(&a.attempt_id),
            request_key: Some(&a.request_key),
            sha256: &a.sha256,
            edits: &a.edits,
        }
    }

    /// A save: the current revision became `version`.
    pub(crate) fn save(t: &'a TargetRow, version: u64) -> Self {
        JournalRow {
            kind: "save",
            revision: t.revision,
            version,
            attempt_id: None,
            request_key: None,
            sha256: &t.sha256,
            edits: &[],
        }
    }
}

/// The cached content usable to rebuild target `t` at `revision`: same incarnation (a re-init
/// invalidates it) and not newer than `revision`.
pub(crate) fn usable_cache<'c>(
    cached: Option<&'c Cached>,
    t: &TargetRow,
    revision: u64,
) -> Option<&'c Cached> {
    cached.filter(|c| c.incarnation == t.incarnation && c.revision <= revision)
}

/// Where rebuilding a target's content at a revision starts.
pub(crate) enum RebuildFrom {
    /// Cached content at this revision (newer than any snapshot at or before the target one).
    Cached(u64, String),
    /// The snapshot with this id.
    Snapshot(i64),
}

/// K6: rebuild from the newer of the latest snapshot at or before `revision` (`snapshot`: its
/// id and revision) and the usable cache. `STORAGE` when there is neither.
pub(crate) fn rebuild_from(
    name: &str,
    revision: u64,
    snapshot: Option<(i64, u64)>,
    cached: Option<&Cached>,
) -> Result<RebuildFrom, StoreError> {
    match (snapshot, cached) {
        (_, Some(c)) if snapshot.is_none_or(|(_, r)| r <= c.revision) => {
            Ok(RebuildFrom::Cached(c.revision, c.content.to_string()))
        }
        (Some((id, _)), _) => Ok(RebuildFrom::Snapshot(id)),
        (None, _) => Err(StoreError::new(
            ErrorCode::Storage,
            format!("target {name} has no snapshot at or before revision {revision}"),
        )),
    }
}

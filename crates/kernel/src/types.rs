//! Data shapes of targets, observations, submissions, receipts, saves, replay and audit.
//!
//! Field names follow the M6 tool contract (`target`, `revision`, `sha256`, `observation_id`,
//! `request_key`, `attempt_id`, `outcome`, `corrections`, `reasons`, `entries`, `next_cursor`,
//! `has_more`). Offsets are UTF-8 bytes; lines are 1-based; hashes are lowercase hex SHA-256.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Current state of a target (K1): the accepted revision's content.
///
/// `version` counts saves (0 = fixture bytes); `revision` counts accepted submissions since
/// init; `saved_revision` is the revision the latest version was taken at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetState {
    pub name: String,
    pub language: String,
    pub version: u64,
    pub revision: u64,
    pub sha256: String,
    pub content: String,
    pub initial_sha256: String,
    pub saved_revision: u64,
}

/// One row of `list_targets` (console panes, C3 preflight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSummary {
    pub name: String,
    pub language: String,
    pub version: u64,
    pub revision: u64,
    pub sha256: String,
    pub initial_sha256: String,
    /// Accepted attempts.
    pub accepted: u64,
    /// Rejected attempts.
    pub rejected: u64,
    /// Observations recorded.
    pub observations: u64,
}

/// What to observe (K2): a scope found by discovery (`kind` e.g. `method`, `name` e.g.
/// `Calendar.addWindow`) or an explicit line range (`kind` = `lines`, `name` = None), as UTF-8
/// byte offsets `[start_byte, end_byte)` into the content at the revision passed to `observe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObserveRange {
    pub kind: String,
    pub name: Option<String>,
    pub start_byte: usize,
    pub end_byte: usize,
}

/// The observed scope (M6 `scope`): byte range `[start_byte, end_byte)` and 1-based inclusive
/// lines (`end_line` is the line of the last byte).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedScope {
    pub kind: String,
    pub name: Option<String>,
    pub start_byte: usize,
    pub end_byte: usize,
    pub start_line: usize,
    pub end_line: usize,
}

/// Result of `observe` (M6 `patchdiff_observe_scope`): `sha256` is of the scope's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    pub observation_id: String,
    pub revision: u64,
    pub scope: ObservedScope,
    pub sha256: String,
    pub text: String,
}

/// One text operation (K3): replace the single occurrence of `old_text` inside the observed
/// scope (or, with strict mode off and no observation, inside the whole target) by `new_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationRequest {
    #[serde(default)]
    pub observation_id: Option<String>,
    pub old_text: String,
    pub new_text: String,
}

/// A submission (K3): `request_key` makes it idempotent (K4); `base_revision` is the revision
/// whose content the agent read; `expected_sha256`, when given, must be that content's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    pub request_key: String,
    pub base_revision: u64,
    #[serde(default)]
    pub expected_sha256: Option<String>,
    pub operations: Vec<OperationRequest>,
}

/// Outcome of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Accepted,
    Rejected,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Rejected => "rejected",
        }
    }
}

/// How an operation moved when carried from the base revision to the revision it was applied
/// at (K3). `operation` is the 0-based index into `operations`; ranges are UTF-8 bytes,
/// `[base_start_byte, base_end_byte)` in the base revision's content and
/// `[applied_start_byte, applied_end_byte)` in the content it was applied to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correction {
    pub operation: usize,
    pub base_revision: u64,
    pub base_start_byte: usize,
    pub base_end_byte: usize,
    pub applied_revision: u64,
    pub applied_start_byte: usize,
    pub applied_end_byte: usize,
}

/// The durable receipt of one attempt (K3, K4; M6 receipt fields). Stored serialized; an
/// identical retry returns the stored bytes.
///
/// `revision`/`sha256`: after an acceptance, the new revision and its content hash; after a
/// rejection, the current (unchanged) revision and hash. `reasons` are agent-readable (they
/// name the operation as "operation N (index N-1)"); `reason_codes` are the stable codes in the
/// same order (`OLD_TEXT_NOT_FOUND`, `OLD_TEXT_AMBIGUOUS`, `OBSERVATION_REQUIRED`,
/// `OBSERVATION_STALE`, `OBSERVATION_NEWER_THAN_BASE`, `EDIT_CONFLICT`,
/// `OVERLAPPING_OPERATIONS`, `EXPECTED_SHA256_MISMATCH`, `CONTENT_TOO_LARGE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub target: String,
    pub request_key: String,
    pub attempt_id: String,
    pub outcome: Outcome,
    pub base_revision: u64,
    pub revision: u64,
    pub sha256: String,
    pub corrections: Vec<Correction>,
    pub reasons: Vec<String>,
    pub reason_codes: Vec<super::plan::RejectionCode>,
    /// Accepted-but-noteworthy facts, e.g. that the edit introduced syntax errors the base did
    /// not have (a warning, not a rejection). Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Result of `save` (K6; M6 `patchdiff_save`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveResult {
    pub target: String,
    pub version: u64,
    pub revision: u64,
    pub sha256: String,
}

/// Bytes of a saved version (version 0 = the fixture bytes); used by export (C5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedContent {
    pub target: String,
    pub version: u64,
    pub revision: u64,
    pub sha256: String,
    pub content: String,
}

/// Kind of a journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalKind {
    /// The fixture bytes were installed (revision 0, version 0); `sha256` is their hash.
    Init,
    /// An accepted submission: apply `operations` to get revision `revision`.
    Edit,
    /// A save: the content at `revision` became version `version`.
    Save,
}

/// One replacement of a journal edit: bytes `[start_byte, end_byte)` of the content *before*
/// the entry become `new_text`. Operations of one entry are sorted by `start_byte` and do not
/// overlap; apply them from last to first (or shift as you go).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalOperation {
    pub start_byte: usize,
    pub end_byte: usize,
    pub new_text: String,
}

/// One replay entry (K6). `cursor` is opaque; pass it as `after` to continue after this entry.
/// `sha256` is the content hash after the entry (for `save`, of the saved version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub cursor: String,
    pub kind: JournalKind,
    pub revision: u64,
    pub version: u64,
    pub request_key: Option<String>,
    pub attempt_id: Option<String>,
    pub sha256: String,
    pub operations: Vec<JournalOperation>,
}

/// A bounded page of the journal (K6; M6 `patchdiff_replay`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayPage {
    pub entries: Vec<JournalEntry>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// Attempt counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptCounts {
    pub total: u64,
    pub accepted: u64,
    pub rejected: u64,
}

/// Audit summary of one target (C5; M6 `patchdiff_audit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Audit {
    pub target: String,
    pub version: u64,
    pub revision: u64,
    pub sha256: String,
    pub initial_sha256: String,
    pub attempts: AttemptCounts,
    /// Stored receipts (one per attempt).
    pub receipts: u64,
    pub saves: u64,
    pub observations: u64,
    /// Rejected attempts counted by reason code (an attempt with two reasons counts twice).
    pub rejections: BTreeMap<String, u64>,
    /// Worker errors recorded against this target, by code (`WAYMARK_WORKER_*`).
    pub worker_errors: BTreeMap<String, u64>,
}

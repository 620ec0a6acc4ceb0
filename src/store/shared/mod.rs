//! Backend-neutral store logic that [`super::SqliteStore`] and [`super::PostgresStore`] both call
//! (K3–K8): input checks and their errors, request-key recovery's decision, the post-edit
//! validation decision, receipt construction, journal encoding, rebuilding content from a
//! snapshot plus journal edits, and replay arguments and page assembly. Nothing here touches a
//! database, so both backends decide identically and store byte-identical receipts.

use super::*;
use crate::kernel::position::{check_range, last_line_of};
use crate::kernel::{
    EditShape, MAX_NAME_BYTES, Plan, Rejection, TextEdit, position_of, sha256_hex,
};

/// Names are shown in logs, the console and audits: 1..=256 bytes, without control characters
/// (NUL, newline, DEL, C1) or the invisible bidirectional controls that reorder text (U+061C,
/// U+200E/F, U+202A–U+202E, U+2066–U+2069).
pub(crate) fn check_name(what: &str, value: &str) -> Result<(), StoreError> {
    if value.is_empty() || value.len() > MAX_NAME_BYTES {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            format!(
                "{what} must be 1..={MAX_NAME_BYTES} bytes (got {})",
                value.len()
            ),
        ));
    }
    let bidi = |c: char| matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if let Some(c) = value.chars().find(|&c| c.is_control() || bidi(c)) {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            format!(
                "{what} {value:?} holds the control character U+{:04X}; use printable characters only",
                c as u32
            ),
        ));
    }
    Ok(())
}

/// C1/K8: checks `init_target`'s arguments; returns the content as text and its SHA-256.
pub(crate) fn check_init<'c>(
    name: &str,
    language: &str,
    content: &'c [u8],
    expected_sha256: &str,
) -> Result<(&'c str, String), StoreError> {
    check_name("target name", name)?;
    check_name("language", language)?;
    if expected_sha256.len() != 64 || !expected_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            format!(
                "expected sha256 for target {name} must be 64 hex digits (got {:?})",
                crate::kernel::snippet(expected_sha256, 80)
            ),
        ));
    }
    let text = std::str::from_utf8(content).map_err(|e| {
        StoreError::new(
            ErrorCode::InvalidUtf8,
            format!(
                "fixture for target {name} is not valid UTF-8 (first bad byte at offset {}); targets are UTF-8 text",
                e.valid_up_to()
            ),
        )
    })?;
    let actual = sha256_hex(content);
    if !actual.eq_ignore_ascii_case(expected_sha256) {
        return Err(StoreError::new(
            ErrorCode::FixtureHashMismatch,
            format!(
                "fixture for target {name} hashes to {actual}, not the expected {}; the fixture is not the authenticated one — refusing target {name}",
                expected_sha256.to_ascii_lowercase()
            ),
        ));
    }
    Ok((text, actual))
}

/// C1: `TARGET_NOT_FRESH` unless the target has no history or `reset` is set.
pub(crate) fn check_fresh(
    name: &str,
    version: u64,
    revision: u64,
    attempts: u64,
    observations: u64,
    reset: bool,
) -> Result<(), StoreError> {
    if attempts + observations + version + revision > 0 && !reset {
        return Err(StoreError::new(
            ErrorCode::TargetNotFresh,
            format!(
                "target {name} is not fresh (version {version}, revision {revision}, {attempts} attempts, {observations} observations); pass reset to wipe its history, or use another name"
            ),
        ));
    }
    Ok(())
}

/// K2/K8: the scope's kind must be 1..=1024 bytes and its name at most 1024 bytes.
pub(crate) fn check_observe(range: &ObserveRange) -> Result<(), StoreError> {
    if range.kind.is_empty() || range.kind.len() > 1024 {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            "scope kind must be 1..=1024 bytes (e.g. \"method\" or \"lines\")",
        ));
    }
    if range.name.as_ref().is_some_and(|n| n.len() > 1024) {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            "scope name must be at most 1024 bytes",
        ));
    }
    Ok(())
}

/// K2: `REVISION_MOVED` unless `at_revision` is the target's current revision.
pub(crate) fn check_observed_revision(
    name: &str,
    at_revision: u64,
    current: u64,
) -> Result<(), StoreError> {
    if at_revision != current {
        return Err(StoreError::new(
            ErrorCode::RevisionMoved,
            format!(
                "target {name} is at revision {current}, not {at_revision}; read it again, rerun discovery on that content and observe again"
            ),
        ));
    }
    Ok(())
}

/// K2: the observation of `range` in `content` at `revision`, with a fresh id (not yet stored).
pub(crate) fn observation(
    name: &str,
    content: &str,
    revision: u64,
    range: ObserveRange,
) -> Result<Observation, StoreError> {
    check_range(content, range.start_byte, range.end_byte).map_err(|e| {
        StoreError::new(
            ErrorCode::OutOfRange,
            format!("scope of target {name}: {}", e.message),
        )
    })?;
    let text = content[range.start_byte..range.end_byte].to_owned();
    let start_line = position_of(content, range.start_byte)?.line;
    let end_line = last_line_of(content, range.start_byte, range.end_byte)?;
    Ok(Observation {
        observation_id: uuid::Uuid::new_v4().to_string(),
        revision,
        sha256: sha256_hex(&text),
        scope: ObservedScope {
            kind: range.kind,
            name: range.name,
            start_byte: range.start_byte,
            end_byte: range.end_byte,
            start_line,
            end_line,
        },
        text,
    })
}

/// `UNKNOWN_OBSERVATION` for observation `id` of `target`.
pub(crate) fn unknown_observation(target: &str, id: &str) -> StoreError {
    StoreError::new(
        ErrorCode::UnknownObservation,
        format!(
            "observation {id:?} does not exist for target {target}; observe the scope first and use the observation_id it returns"
        ),
    )
}

/// K3: `OUT_OF_RANGE` when a submission's base revision is ahead of the target.
pub(crate) fn check_base(name: &str, base: u64, current: u64) -> Result<(), StoreError> {
    if base > current {
        return Err(StoreError::new(
            ErrorCode::OutOfRange,
            format!(
                "base_revision {base} is ahead of target {name}'s current revision {current}; read the target and use its revision"
            ),
        ));
    }
    Ok(())
}

/// K6: `OUT_OF_RANGE` for a version the target does not have.
pub(crate) fn no_such_version(name: &str, version: u64, latest: u64) -> StoreError {
    StoreError::new(
        ErrorCode::OutOfRange,
        format!("target {name} has no version {version}; its versions are 0..={latest}"),
    )
}

/// W8: checks a worker error's code and returns its message truncated to
/// [`MAX_WORKER_ERROR_MESSAGE_BYTES`].
pub(crate) fn check_worker_error(code: &str, message: &str) -> Result<String, StoreError> {
    if code.is_empty() || code.len() > 128 {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            "worker error code must be 1..=128 bytes (e.g. WAYMARK_WORKER_QUEUE_FULL)",
        ));
    }
    Ok(crate::kernel::snippet(
        message,
        MAX_WORKER_ERROR_MESSAGE_BYTES,
    ))
}

/// K4: identity of a submission's content (SHA-256 of its canonical JSON, key included).
pub(crate) fn submission_sha256(submission: &Submission) -> Result<String, StoreError> {
    Ok(sha256_hex(
        serde_json::to_vec(submission).map_err(|e| StoreError::storage("submission", e))?,
    ))
}

/// K4: request-key recovery's decision from the attempt stored under the key, if any
/// (`(submission_sha256, receipt JSON)`): the stored receipt for an identical retry,
/// `REQUEST_KEY_CONFLICT` for different content, `None` for an unused key.
pub(crate) fn recovered(
    stored: Option<(String, String)>,
    target: &str,
    request_key: &str,
    submission_sha256: &str,
) -> Result<Option<Receipt>, StoreError> {
    match stored {
        None => Ok(None),
        Some((sha, receipt)) if sha == submission_sha256 => Ok(Some(
            serde_json::from_str(&receipt).map_err(|e| StoreError::storage("stored receipt", e))?,
        )),
        Some(_) => Err(StoreError::new(
            ErrorCode::RequestKeyConflict,
            format!(
                "request_key {request_key:?} was already used on target {target} for a different submission; use a new request_key for new content (an identical retry returns the original receipt)"
            ),
        )),
    }
}

fn validation_unavailable(code: &str, message: &str) -> StoreError {
    StoreError::new(
        ErrorCode::ValidationUnavailable,
        format!("{code}: {message}; nothing was recorded, submit again with the same request_key"),
    )
}

/// W7/W8: runs `validator` on what an accepted plan would produce (and, when that fails or has
/// syntax errors, on the base `current` content) and returns the plan to commit with the
/// receipt's warnings. A failure the base already had (same code) keeps the edit; a new one
/// rejects it as `VALIDATION_FAILED`. Errors: `VALIDATION_UNAVAILABLE` (record nothing).
pub(crate) fn decide_validation(
    plan: Plan,
    language: &str,
    current: &str,
    validator: Validator<'_>,
) -> Result<(Plan, Vec<String>), StoreError> {
    let mut warnings = Vec::new();
    let Plan::Accept {
        ref new_content, ..
    } = plan
    else {
        return Ok((plan, warnings));
    };
    let plan = match validator(language, new_content) {
        Validation::Passed => plan,
        Validation::PassedWithSyntaxErrors => {
            // A warning only when the edit introduced them.
            if validator(language, current) == Validation::Passed {
                warnings.push(format!(
                    "SYNTAX_ERRORS_INTRODUCED: the accepted edit leaves the {language} with syntax errors the base revision did not have; read the target and fix them"
                ));
            }
            plan
        }
        Validation::Failed { code, message } => {
            // Never blame an edit for a condition its base already had.
            match validator(language, current) {
                Validation::Failed {
                    code: base_code, ..
                } if base_code == code => plan,
                Validation::Unavailable { code, message } => {
                    return Err(validation_unavailable(&code, &message));
                }
                _ => Plan::Reject {
                    reasons: vec![Rejection {
                        code: crate::kernel::RejectionCode::ValidationFailed,
                        message: format!(
                            "the edited {language} no longer passes discovery ({code}: {message}); nothing was applied"
                        ),
                    }],
                },
            }
        }
        Validation::Unavailable { code, message } => {
            return Err(validation_unavailable(&code, &message));
        }
    };
    Ok((plan, warnings))
}

/// What an accepted attempt changes: the journal entry's edits, the new content and its hash.
pub(crate) struct Applied {
    /// The attempt that made it and the request key it came with (journalled beside the edits).
    pub attempt_id: String,
    pub request_key: String,
    pub edits: Vec<TextEdit>,
    pub new_content: String,
    pub revision: u64,
    pub sha256: String,
}

/// K3/K4: the receipt of one decided attempt (a fresh UUID v4 `attempt_id`) against target
/// row `t` as it is now, and what to apply when it is accepted. Both backends store
/// [`receipt_json`] of it byte for byte.
pub(crate) fn decided_receipt(
    t: &TargetRow,
    submission: &Submission,
    plan: Plan,
    warnings: Vec<String>,
) -> (Receipt, Option<Applied>) {
    let (revision, sha256) = (t.revision, t.sha256.as_str());
    let mut receipt = Receipt {
        target: t.name.clone(),
        request_key: submission.request_key.clone(),
        attempt_id: uuid::Uuid::new_v4().to_string(),
        outcome: Outcome::Rejected,
        base_revision: submission.base_revision,
        revision,
        sha256: sha256.to_owned(),
        corrections: Vec::new(),
        reasons: Vec::new(),
        reason_codes: Vec::new(),
        warnings: Vec::new(),
    };
    match plan {
        Plan::Accept {
            edits,
            new_content,
            corrections,
            notes,
        } => {
            let applied = Applied {
                attempt_id: receipt.attempt_id.clone(),
                request_key: receipt.request_key.clone(),
                revision: revision + 1,
                sha256: sha256_hex(&new_content),
                edits,
                new_content,
            };
            receipt.outcome = Outcome::Accepted;
            receipt.revision = applied.revision;
            receipt.sha256 = applied.sha256.clone();
            receipt.corrections = corrections;
            receipt.warnings = notes.into_iter().chain(warnings).collect();
            (receipt, Some(applied))
        }
        Plan::Reject { reasons } => {
            for r in reasons {
                receipt.reason_codes.push(r.code.to_owned());
                receipt.reasons.push(r.message);
            }
            (receipt, None)
        }
    }
}

/// K4: the exact JSON text stored for a receipt (and returned on every retry).
pub(crate) fn receipt_json(receipt: &Receipt) -> Result<String, StoreError> {
    serde_json::to_string(receipt).map_err(|e| StoreError::storage("receipt", e))
}

/// Journal text accounting for snapshot scheduling: bytes of new text plus 32 per edit.
pub(crate) fn journal_weight(edits: &[TextEdit]) -> u64 {
    edits.iter().map(|e| e.new_text.len() as u64 + 32).sum()
}

/// Whether an accepted edit should also write a content snapshot ([`SNAPSHOT_EVERY_EDITS`],
/// [`SNAPSHOT_MIN_BYTES`]).
pub(crate) fn snapshot_due(since_edits: u64, since_bytes: u64, content_len: usize) -> bool {
    since_edits >= SNAPSHOT_EVERY_EDITS
        || since_bytes >= (content_len as u64).max(SNAPSHOT_MIN_BYTES)
}

pub(crate) fn decode_edits(json: &str) -> Result<Vec<EditShape>, StoreError> {
    let raw: Vec<[usize; 3]> =
        serde_json::from_str(json).map_err(|e| StoreError::storage("journal edits", e))?;
    Ok(raw
        .into_iter()
        .map(|[start, end, new_len]| EditShape {
            start,
            end,
            new_len,
        })
        .collect())
}

/// An entry's edits as JSON `[[start_byte, end_byte, new_len], ...]`.
pub(crate) fn encode_edits(edits: &[TextEdit]) -> String {
    let raw: Vec<[usize; 3]> = edits
        .iter()
        .map(|e| [e.start, e.end, e.new_text.len()])
        .collect();
    serde_json::to_string(&raw).unwrap_or_else(|_| "[]".to_owned())
}

/// An entry's edits' new texts, concatenated (stored once per entry).
pub(crate) fn joined_text(edits: &[TextEdit]) -> String {
    edits.iter().map(|e| e.new_text.as_str()).collect()
}

pub(crate) fn utf8(bytes: Vec<u8>, what: &str) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|e| StoreError::storage(what, e))
}

/// Splits an entry's concatenated text into its edits' texts.
pub(crate) fn split_text(shapes: &[EditShape], text: &str) -> Result<Vec<TextEdit>, StoreError> {
    let mut at = 0;
    let mut out = Vec::with_capacity(shapes.len());
    for s in shapes {
        let t = text.get(at..at + s.new_len).ok_or_else(|| {
            StoreError::new(ErrorCode::Storage, "journal text does not match its edits")
        })?;
        out.push(TextEdit {
            start: s.start,
            end: s.end,
            new_text: t.to_owned(),
        });
        at += s.new_len;
    }
    Ok(out)
}

/// One journal edit as a content rebuild reads it.
pub(crate) struct EditRow {
    pub revision: u64,
    pub sha256: String,
    pub edits: String,
    pub text: String,
}

/// K6: applies journal edits (revisions `at+1..=revision`, in order) to `content` at `at`;
/// the result must hash to the last entry's recorded SHA-256. Errors: `STORAGE` (a gap in the
/// journal, damaged text, a hash that does not match).
pub(crate) fn rebuild(
    name: &str,
    mut at: u64,
    mut content: String,
    revision: u64,
    rows: impl IntoIterator<Item = Result<EditRow, StoreError>>,
) -> Result<String, StoreError> {
    if at == revision {
        return Ok(content);
    }
    let mut last_sha = String::new();
    for row in rows {
        let row = row?;
        if row.revision != at + 1 {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!(
                    "journal of {name} skips from revision {at} to {}",
                    row.revision
                ),
            ));
        }
        let edits = split_text(&decode_edits(&row.edits)?, &row.text)?;
        content = crate::kernel::apply_edits(&content, &edits)
            .map_err(|e| StoreError::storage("replaying the journal", e))?;
        at = row.revision;
        last_sha = row.sha256;
    }
    if at != revision || sha256_hex(&content) != last_sha {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!(
                "rebuilding {name} at revision {revision} did not reproduce its recorded SHA-256"
            ),
        ));
    }
    Ok(content)
}

/// K6: checks replay's arguments; returns the entry id to read after and the page limit.
/// Errors: `OUT_OF_RANGE` (limit 0 or over [`REPLAY_MAX_LIMIT`]), `INVALID_CURSOR`.
pub(crate) fn replay_args(
    after: Option<&str>,
    limit: Option<u32>,
) -> Result<(i64, u32), StoreError> {
    let limit = limit.unwrap_or(REPLAY_DEFAULT_LIMIT);
    if limit == 0 || limit > REPLAY_MAX_LIMIT {
        return Err(StoreError::new(
            ErrorCode::OutOfRange,
            format!("limit must be 1..={REPLAY_MAX_LIMIT} entries (got {limit})"),
        ));
    }
    let after_id: i64 = match after {
        None => 0,
        Some(c) => c.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
            StoreError::new(
                ErrorCode::InvalidCursor,
                format!(
                    "cursor {:?} was not issued by replay; pass a next_cursor or an entry's cursor, or omit it to start from the beginning",
                    crate::kernel::snippet(c, 80)
                ),
            )
        })?,
    };
    Ok((after_id, limit))
}

/// One `journal` row as replay reads it; `text` is whatever the backend needs to load the
/// entry's text (inline bytes, chunk references).
pub(crate) struct ReplayRow<T> {
    pub entry_id: i64,
    pub kind: String,
    pub revision: i64,
    pub version: i64,
    pub attempt_id: Option<String>,
    pub request_key: Option<String>,
    pub sha256: String,
    pub edits: String,
    pub text_len: usize,
    pub text: T,
}

/// K6: builds a replay page from up to `limit + 1` rows after cursor `after`: at most `limit`
/// entries and about [`REPLAY_PAGE_TEXT_BYTES`] of text (a single larger entry still comes
/// alone). `load_text(entry_id, text, text_len)` gives an edit entry's concatenated text.
pub(crate) fn replay_page<T>(
    rows: Vec<ReplayRow<T>>,
    limit: u32,
    after: Option<&str>,
    mut load_text: impl FnMut(i64, T, usize) -> Result<String, StoreError>,
) -> Result<ReplayPage, StoreError> {
    let mut entries = Vec::new();
    let mut text_bytes = 0usize;
    let mut has_more = false;
    for (n, row) in rows.into_iter().enumerate() {
        if n as u32 == limit
            || (!entries.is_empty() && text_bytes + row.text_len > REPLAY_PAGE_TEXT_BYTES)
        {
            has_more = true;
            break;
        }
        let kind = match row.kind.as_str() {
            "init" => JournalKind::Init,
            "edit" => JournalKind::Edit,
            _ => JournalKind::Save,
        };
        let operations = if kind == JournalKind::Edit {
            let text = load_text(row.entry_id, row.text, row.text_len)?;
            split_text(&decode_edits(&row.edits)?, &text)?
                .into_iter()
                .map(|e| JournalOperation {
                    start_byte: e.start,
                    end_byte: e.end,
                    new_text: e.new_text,
                })
                .collect()
        } else {
            Vec::new()
        };
        text_bytes += row.text_len;
        entries.push(JournalEntry {
            cursor: row.entry_id.to_string(),
            kind,
            revision: row.revision as u64,
            version: row.version as u64,
            request_key: row.request_key,
            attempt_id: row.attempt_id,
            sha256: row.sha256,
            operations,
        });
    }
    let next_cursor = entries
        .last()
        .map(|e| e.cursor.clone())
        .or_else(|| after.map(str::to_owned));
    Ok(ReplayPage {
        entries,
        next_cursor,
        has_more,
    })
}

/// C5: the audit's rejection counts from each rejected attempt's stored reason codes (JSON).
pub(crate) fn count_rejections(
    reason_codes: impl IntoIterator<Item = String>,
) -> std::collections::BTreeMap<String, u64> {
    let mut rejections = std::collections::BTreeMap::new();
    for row in reason_codes {
        let codes: Vec<String> = serde_json::from_str(&row).unwrap_or_default();
        for c in codes {
            *rejections.entry(c).or_insert(0u64) += 1;
        }
    }
    rejections
}

mod rows;
pub(crate) use rows::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ObservationRecord;
    use std::collections::HashMap;

    fn row(edits_since_snapshot: u64, bytes_since_snapshot: u64) -> TargetRow {
        TargetRow {
            id: 7,
            name: "calendar".into(),
            language: "javascript".into(),
            incarnation: "inc-1".into(),
            version: 2,
            revision: 5,
            sha256: "ab".repeat(32),
            initial_sha256: "cd".repeat(32),
            saved_revision: 4,
            edits_since_snapshot,
            bytes_since_snapshot,
        }
    }

    fn operation(observation_id: Option<&str>) -> OperationRequest {
        OperationRequest {
            observation_id: observation_id.map(str::to_owned),
            old_text: "a".into(),
            new_text: "b".into(),
        }
    }

    fn observed_at(revision: u64) -> ObservationRecord {
        ObservationRecord {
            observation_id: format!("obs-{revision}"),
            revision,
            scope: ObservedScope {
                kind: "function".into(),
                name: Some("f".into()),
                start_byte: 0,
                end_byte: 1,
                start_line: 1,
                end_line: 1,
            },
            sha256: "00".repeat(32),
        }
    }

    fn submission() -> Submission {
        Submission {
            request_key: "key-1".into(),
            base_revision: 5,
            expected_sha256: None,
            operations: vec![operation(Some("o1"))],
        }
    }

    fn accepted(new_text: &str) -> Plan {
        Plan::Accept {
            edits: vec![TextEdit {
                start: 0,
                end: 1,
                new_text: new_text.into(),
            }],
            new_content: format!("{new_text}bc"),
            corrections: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_submission_loads_each_named_observation_once_in_first_use_order() {
        let submission = Submission {
            request_key: "k".into(),
            base_revision: 5,
            expected_sha256: None,
            operations: vec![
                operation(Some("o2")),
                operation(None),
                operation(Some("o1")),
                operation(Some("o2")),
            ],
        };
        assert_eq!(observation_ids(&submission), vec!["o2", "o1"]);
    }

    #[test]
    fn transform_steps_start_at_the_oldest_observation_or_at_an_older_base() {
        let observations: HashMap<String, ObservationRecord> = [("a", 3), ("b", 1), ("c", 4)]
            .into_iter()
            .map(|(id, rev)| (id.to_owned(), observed_at(rev)))
            .collect();
        assert_eq!(steps_from(&observations, 5), 1);
        assert_eq!(steps_from(&observations, 0), 0);
        assert_eq!(steps_from(&HashMap::new(), 5), 5);
    }

    #[test]
    fn the_1024th_edit_since_a_snapshot_is_due_and_restarts_both_counters() {
        let (_, applied) = decided_receipt(&row(0, 0), &submission(), accepted("x"), vec![]);
        let a = applied.expect("accepted");
        // 32 bytes per edit plus its new text: 1 edit of 1 byte weighs 33.
        let not_yet = row(1022, 10).after_edit(&a);
        assert!(!not_yet.snapshot);
        assert_eq!((not_yet.since_edits, not_yet.since_bytes), (1023, 43));
        let due = row(1023, 10).after_edit(&a);
        assert!(due.snapshot);
        assert_eq!((due.since_edits, due.since_bytes), (0, 0));
        // … or once journal text since the snapshot reaches 1 MiB (content here is 3 bytes).
        let by_bytes = row(0, 1024 * 1024 - 33).after_edit(&a);
        assert!(by_bytes.snapshot);
        let below = row(0, 1024 * 1024 - 34).after_edit(&a);
        assert!(!below.snapshot);
    }

    #[test]
    fn an_accepted_edit_journals_its_attempt_and_request_key_at_the_new_revision() {
        let t = row(0, 0);
        let (receipt, applied) = decided_receipt(&t, &submission(), accepted("x"), vec![]);
        let a = applied.expect("accepted");
        assert_eq!(receipt.outcome, Outcome::Accepted);
        assert_eq!(
            receipt.attempt_id.len(),
            36,
            "a UUID: {}",
            receipt.attempt_id
        );
        let entry = JournalRow::edit(&t, &a);
        assert_eq!(entry.kind, "edit");
        assert_eq!((entry.revision, entry.version), (6, 2));
        assert_eq!(entry.attempt_id, Some(receipt.attempt_id.as_str()));
        assert_eq!(entry.request_key, Some("key-1"));
        assert_eq!(entry.sha256, receipt.sha256);
        let save = JournalRow::save(&t, 3);
        assert_eq!((save.kind, save.revision, save.version), ("save", 5, 3));
        assert_eq!((save.attempt_id, save.request_key), (None, None));
        let init = JournalRow::init("ef");
        assert_eq!(
            (init.kind, init.revision, init.version, init.sha256),
            ("init", 0, 0, "ef")
        );
    }

    #[test]
    fn a_rebuild_starts_from_the_newer_of_cache_and_snapshot_and_fails_without_either() {
        let cached = Cached {
            incarnation: "inc-1".into(),
            revision: 4,
            content: Arc::from("cached"),
        };
        let from = |snapshot, cache| rebuild_from("calendar", 5, snapshot, cache);
        assert!(
            matches!(from(Some((9, 3)), Some(&cached)), Ok(RebuildFrom::Cached(4, ref c)) if c == "cached")
        );
        assert!(matches!(
            from(Some((9, 4)), Some(&cached)),
            Ok(RebuildFrom::Cached(4, _))
        ));
        assert!(matches!(
            from(Some((9, 5)), Some(&cached)),
            Ok(RebuildFrom::Snapshot(9))
        ));
        assert!(matches!(
            from(Some((9, 2)), None),
            Ok(RebuildFrom::Snapshot(9))
        ));
        let e = match from(None, None) {
            Err(e) => e,
            Ok(_) => panic!("no snapshot and no cache must fail"),
        };
        assert_eq!(e.code, ErrorCode::Storage);
        assert!(
            e.message.contains("calendar") && e.message.contains("revision 5"),
            "{}",
            e.message
        );
        // A cache entry of another incarnation (a re-init) or newer than asked is not usable.
        let t = row(0, 0);
        assert!(usable_cache(Some(&cached), &t, 5).is_some());
        assert!(usable_cache(Some(&cached), &t, 3).is_none());
        let other = Cached {
            incarnation: "inc-2".into(),
            ..cached.clone()
        };
        assert!(usable_cache(Some(&other), &t, 5).is_none());
    }
}

//! Deciding a submission (K2, K3): pure, given the contents and intervening steps.
//!
//! For each operation: find its scope at the base revision (the observed range carried forward
//! from the observation's revision, or the whole target), require `old_text` to occur exactly
//! once there, then carry that range over the steps accepted since the base (operational
//! transform). With strict observation mode, the operation's observation must be unchanged at
//! the current revision. Overlaps between operations, or with an intervening step, reject the
//! submission — never a silent merge.

use std::collections::HashMap;

use super::near_miss::{LineEndings, explain_not_found, with_line_endings};
use super::ot::{EditShape, TextEdit, apply_edits, map_scope, transform_range};
use super::position::find_all;
use super::types::{Correction, ObservedScope, Submission};
use super::{MAX_CONTENT_BYTES, sha256_hex, snippet};

/// A stored observation (K2): scope as seen at `revision`, with its text's SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservationRecord {
    pub observation_id: String,
    pub revision: u64,
    pub scope: ObservedScope,
    pub sha256: String,
}

impl ObservationRecord {
    fn label(&self) -> String {
        match &self.scope.name {
            Some(n) => format!("{} {n}", self.scope.kind),
            None => format!(
                "{} {}-{}",
                self.scope.kind, self.scope.start_line, self.scope.end_line
            ),
        }
    }
}

/// Everything `plan_submission` needs. `steps[i]` is the step that produced revision
/// `steps_from + 1 + i`; steps must cover `(steps_from, current_revision]` where `steps_from`
/// is at most the base revision and every named observation's revision.
pub struct PlanInput<'a> {
    pub target: &'a str,
    pub submission: &'a Submission,
    pub strict: bool,
    pub base_content: &'a str,
    pub current_content: &'a str,
    pub current_revision: u64,
    pub steps_from: u64,
    pub steps: &'a [Vec<EditShape>],
    /// Observations named by the operations, by id (unknown ids are rejected upstream).
    pub observations: &'a HashMap<String, ObservationRecord>,
}

/// The stable code of a rejection reason (K2, K3, W8), as a receipt's `reason_codes` spell it
/// (serde writes [`RejectionCode::as_str`]; a receipt's bytes are unchanged by the type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RejectionCode {
    /// `expected_sha256` does not match the base revision's content.
    #[serde(rename = "EXPECTED_SHA256_MISMATCH")]
    ExpectedSha256Mismatch,
    /// K2: strict observation mode and the operation names no observation.
    ObservationRequired,
    /// The observation was made after the submission's base revision.
    ObservationNewerThanBase,
    /// K2: the observed scope changed since it was observed (or no longer maps).
    ObservationStale,
    /// `old_text` does not occur in the scope.
    OldTextNotFound,
    /// `old_text` occurs more than once in the scope.
    OldTextAmbiguous,
    /// Two operations of the submission overlap.
    OverlappingOperations,
    /// K3: an intervening revision changed the operation's text.
    EditConflict,
    /// The edit would grow the target over [`MAX_CONTENT_BYTES`].
    ContentTooLarge,
    /// W8: the edited content no longer passes discovery (a new domain failure).
    ValidationFailed,
}

impl RejectionCode {
    /// The wire spelling, e.g. `OLD_TEXT_NOT_FOUND`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ExpectedSha256Mismatch => "EXPECTED_SHA256_MISMATCH",
            Self::ObservationRequired => "OBSERVATION_REQUIRED",
            Self::ObservationNewerThanBase => "OBSERVATION_NEWER_THAN_BASE",
            Self::ObservationStale => "OBSERVATION_STALE",
            Self::OldTextNotFound => "OLD_TEXT_NOT_FOUND",
            Self::OldTextAmbiguous => "OLD_TEXT_AMBIGUOUS",
            Self::OverlappingOperations => "OVERLAPPING_OPERATIONS",
            Self::EditConflict => "EDIT_CONFLICT",
            Self::ContentTooLarge => "CONTENT_TOO_LARGE",
            Self::ValidationFailed => "VALIDATION_FAILED",
        }
    }
}

impl std::fmt::Display for RejectionCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tests and callers holding a receipt compare its codes with the spec's spelling.
impl PartialEq<&str> for RejectionCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One reason for rejecting (stable `code`, agent-readable `message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub code: RejectionCode,
    pub message: String,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Apply `edits` (current-revision coordinates, sorted by start) to get `new_content`.
    Accept {
        edits: Vec<TextEdit>,
        new_content: String,
        corrections: Vec<Correction>,
        /// What the receipt's `warnings` say about the plan itself, e.g.
        /// `LINE_ENDINGS_NORMALISED` (a `new_text` rewritten to the target's line endings).
        notes: Vec<String>,
    },
    Reject {
        reasons: Vec<Rejection>,
    },
}

impl PlanInput<'_> {
    fn steps_between(&self, from: u64, to: u64) -> &[Vec<EditShape>] {
        let a = (from - self.steps_from) as usize;
        let b = (to - self.steps_from) as usize;
        &self.steps[a..b]
    }
}

fn op_name(i: usize) -> String {
    format!("operation {} (index {i})", i + 1)
}

/// Decides a submission. Pure: the caller persists the outcome.
///
/// Every operation is located first (all reasons are collected, so one reply names every
/// problem), then the located ranges are checked against each other, carried over the
/// intervening steps (K3) and applied.
pub fn plan_submission(input: &PlanInput<'_>) -> Plan {
    let mut reasons: Vec<Rejection> = check_expected_sha256(input).into_iter().collect();
    // Base-coordinate ranges of operations that located their old_text.
    let mut located: Vec<(usize, usize, usize)> = Vec::new(); // (op index, start, end)
    for i in 0..input.submission.operations.len() {
        match locate_operation(input, i) {
            Ok((start, end)) => located.push((i, start, end)),
            Err(r) => reasons.push(r),
        }
    }
    reasons.extend(overlaps(&located));
    let (edits, corrections) = carry_over(input, &located, &mut reasons);
    if !reasons.is_empty() {
        return Plan::Reject { reasons };
    }
    apply_plan(input, edits, corrections)
}

/// `expected_sha256`, when given, must match the base revision's content.
fn check_expected_sha256(input: &PlanInput<'_>) -> Option<Rejection> {
    let expected = input.submission.expected_sha256.as_ref()?;
    let actual = sha256_hex(input.base_content);
    (!expected.eq_ignore_ascii_case(&actual)).then(|| Rejection {
        code: RejectionCode::ExpectedSha256Mismatch,
        message: format!(
            "expected_sha256 {} does not match the content of base_revision {} ({actual}); read the target again and resubmit against its revision and sha256",
            snippet(expected, 64),
            input.submission.base_revision
        ),
    })
}

/// Operation `i`'s `old_text` located exactly once in its scope at the base revision, as a
/// base-coordinate byte range (K2).
fn locate_operation(input: &PlanInput<'_>, i: usize) -> Result<(usize, usize), Rejection> {
    let op = &input.submission.operations[i];
    let base = input.submission.base_revision;
    let obs = op
        .observation_id
        .as_ref()
        .and_then(|id| input.observations.get(id));
    let (scope_start, scope_end, label) = operation_scope(input, i, obs)?;
    let Some(scope_text) = input.base_content.get(scope_start..scope_end) else {
        return Err(Rejection {
            code: RejectionCode::ObservationStale,
            message: format!(
                "{}: the scope {label} no longer maps onto base_revision {base}; observe it again",
                op_name(i)
            ),
        });
    };
    let hits = find_all(scope_text, &op.old_text);
    match hits.len() {
        1 => {
            let start = scope_start + hits[0];
            Ok((start, start + op.old_text.len()))
        }
        0 => Err(Rejection {
            code: RejectionCode::OldTextNotFound,
            message: match explain_not_found(
                input.base_content,
                scope_start,
                scope_text,
                &op.old_text,
            ) {
                Some(cause) => format!(
                    "{}: old_text {:?} does not occur in scope {label} at revision {base}: {cause}",
                    op_name(i),
                    snippet(&op.old_text, 60)
                ),
                None => format!(
                    "{}: old_text {:?} does not occur in scope {label} at revision {base}, nor anywhere else in the target, nor with other line endings, whitespace or escaping; read the scope again and copy the exact text",
                    op_name(i),
                    snippet(&op.old_text, 60)
                ),
            },
        }),
        n => Err(Rejection {
            code: RejectionCode::OldTextAmbiguous,
            message: format!(
                "{}: old_text occurs {n} times in scope {label}; include more context so it occurs exactly once",
                op_name(i)
            ),
        }),
    }
}

/// The scope operation `i` searches at the base revision: the whole target, or its
/// observation's range carried forward to the base (start, end, label for messages).
fn operation_scope(
    input: &PlanInput<'_>,
    i: usize,
    obs: Option<&ObservationRecord>,
) -> Result<(usize, usize, String), Rejection> {
    let base = input.submission.base_revision;
    let Some(o) = obs else {
        if input.strict {
            return Err(Rejection {
                code: RejectionCode::ObservationRequired,
                message: format!(
                    "{}: strict observation mode requires an observation_id; observe the scope that contains old_text first",
                    op_name(i)
                ),
            });
        }
        return Ok((
            0,
            input.base_content.len(),
            format!("target {}", input.target),
        ));
    };
    if o.revision > base {
        return Err(Rejection {
            code: RejectionCode::ObservationNewerThanBase,
            message: format!(
                "{}: observation {} was made at revision {} but base_revision is {base}; submit against the revision you observed (or later)",
                op_name(i),
                o.observation_id,
                o.revision
            ),
        });
    }
    if input.strict {
        check_unchanged(input, i, o)?;
    }
    let (mut s, mut e) = (o.scope.start_byte, o.scope.end_byte);
    for step in input.steps_between(o.revision, base) {
        ((s, e), _) = map_scope(s, e, step);
    }
    Ok((s, e.min(input.base_content.len()), o.label()))
}

/// K2 (strict mode): the observed scope must be unchanged at the current revision.
fn check_unchanged(
    input: &PlanInput<'_>,
    i: usize,
    o: &ObservationRecord,
) -> Result<(), Rejection> {
    let (mut s, mut e) = (o.scope.start_byte, o.scope.end_byte);
    let mut stale_at = None;
    for (k, step) in input
        .steps_between(o.revision, input.current_revision)
        .iter()
        .enumerate()
    {
        let ((ns, ne), touched) = map_scope(s, e, step);
        if touched {
            stale_at = Some(o.revision + 1 + k as u64);
            break;
        }
        (s, e) = (ns, ne);
    }
    let unchanged = stale_at.is_none()
        && input
            .current_content
            .get(s..e)
            .is_some_and(|t| sha256_hex(t) == o.sha256);
    if unchanged {
        return Ok(());
    }
    let when = stale_at
        .map(|r| format!("changed at revision {r}"))
        .unwrap_or_else(|| "no longer matches".to_owned());
    Err(Rejection {
        code: RejectionCode::ObservationStale,
        message: format!(
            "{}: observation {} of {} (revision {}) is stale: the scope {when}; observe it again and resubmit",
            op_name(i),
            o.observation_id,
            o.label(),
            o.revision
        ),
    })
}

/// Operations of one submission must not overlap each other (base coordinates).
fn overlaps(located: &[(usize, usize, usize)]) -> Vec<Rejection> {
    let mut by_start = located.to_vec();
    by_start.sort_by_key(|&(_, s, e)| (s, e));
    by_start
        .windows(2)
        .filter(|w| w[1].1 < w[0].2)
        .map(|w| {
            let (a, b) = (w[0].0, w[1].0);
            Rejection {
                code: RejectionCode::OverlappingOperations,
                message: format!(
                    "{} and {} overlap in the target; merge them into one operation",
                    op_name(a.min(b)),
                    op_name(a.max(b))
                ),
            }
        })
        .collect()
}

/// K3: carries each located range from the base over the intervening steps; a range an
/// intervening step changed is an `EDIT_CONFLICT` (pushed onto `reasons`), a moved one a
/// correction.
fn carry_over(
    input: &PlanInput<'_>,
    located: &[(usize, usize, usize)],
    reasons: &mut Vec<Rejection>,
) -> (Vec<TextEdit>, Vec<Correction>) {
    let (base, current) = (input.submission.base_revision, input.current_revision);
    let endings = LineEndings::of(input.current_content);
    let mut edits = Vec::with_capacity(located.len());
    let mut corrections = Vec::new();
    for &(i, bs, be) in located {
        let (mut s, mut e) = (bs, be);
        let mut conflict = None;
        for (k, step) in input.steps_between(base, current).iter().enumerate() {
            match transform_range(s, e, step) {
                Ok(r) => (s, e) = r,
                Err(c) => {
                    conflict = Some((base + 1 + k as u64, c));
                    break;
                }
            }
        }
        if let Some((rev, c)) = conflict {
            reasons.push(Rejection {
                code: RejectionCode::EditConflict,
                message: format!(
                    "{}: its text (bytes {bs}..{be} at base_revision {base}) was changed by revision {rev} (bytes {}..{} of revision {}); read the target at revision {current} and resubmit",
                    op_name(i),
                    c.edit.start,
                    c.edit.end,
                    rev - 1
                ),
            });
            continue;
        }
        if (s, e) != (bs, be) {
            corrections.push(Correction {
                operation: i,
                base_revision: base,
                base_start_byte: bs,
                base_end_byte: be,
                applied_revision: current,
                applied_start_byte: s,
                applied_end_byte: e,
            });
        }
        let op = &input.submission.operations[i];
        debug_assert_eq!(input.current_content.get(s..e), Some(op.old_text.as_str()));
        edits.push(TextEdit {
            start: s,
            end: e,
            new_text: with_line_endings(&op.new_text, endings).into_owned(),
        });
    }
    (edits, corrections)
}

/// Applies the carried-over edits to the current content, within [`MAX_CONTENT_BYTES`].
fn apply_plan(
    input: &PlanInput<'_>,
    mut edits: Vec<TextEdit>,
    corrections: Vec<Correction>,
) -> Plan {
    edits.sort_by_key(|e| e.start);
    let grown: isize = edits
        .iter()
        .map(|e| e.new_text.len() as isize - (e.end - e.start) as isize)
        .sum();
    let new_len = input.current_content.len() as isize + grown;
    if new_len as usize > MAX_CONTENT_BYTES {
        return Plan::Reject {
            reasons: vec![Rejection {
                code: RejectionCode::ContentTooLarge,
                message: format!(
                    "the edit would grow the target to {new_len} bytes, over the limit of {MAX_CONTENT_BYTES}"
                ),
            }],
        };
    }
    let notes = line_ending_notes(input);
    match apply_edits(input.current_content, &edits) {
        Ok(new_content) => Plan::Accept {
            edits,
            new_content,
            corrections,
            notes,
        },
        Err(e) => Plan::Reject {
            reasons: vec![Rejection {
                code: RejectionCode::OverlappingOperations,
                message: e.message,
            }],
        },
    }
}

/// A new text's line endings are the target's: a `new_text` with LF breaks into a CRLF target
/// (or CRLF into LF) is written with the target's, never mixed in, and the receipt says so. A
/// target that already mixes them, or has no line break, takes `new_text` as sent.
fn line_ending_notes(input: &PlanInput<'_>) -> Vec<String> {
    let target = LineEndings::of(input.current_content);
    input
        .submission
        .operations
        .iter()
        .enumerate()
        .filter(|(_, op)| with_line_endings(&op.new_text, target) != op.new_text.as_str())
        .map(|(i, op)| {
            format!(
                "LINE_ENDINGS_NORMALISED: {}: new_text used {} line endings; it was written with the target's {}",
                op_name(i),
                LineEndings::of(&op.new_text).as_str(),
                target.as_str()
            )
        })
        .collect()
}

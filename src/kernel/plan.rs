//! Deciding a submission (K2, K3): pure, given the contents and intervening steps.
//!
//! For each operation: find its scope at the base revision (the observed range carried forward
//! from the observation's revision, or the whole target), require `old_text` to occur exactly
//! once there, then carry that range over the steps accepted since the base (operational
//! transform). With strict observation mode, the operation's observation must be unchanged at
//! the current revision. Overlaps between operations, or with an intervening step, reject the
//! submission — never a silent merge.

use std::collections::HashMap;

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
pub fn plan_submission(input: &PlanInput<'_>) -> Plan {
    let sub = input.submission;
    let base = sub.base_revision;
    let current = input.current_revision;
    let mut reasons: Vec<Rejection> = Vec::new();

    if let Some(expected) = &sub.expected_sha256 {
        let actual = sha256_hex(input.base_content);
        if !expected.eq_ignore_ascii_case(&actual) {
            reasons.push(Rejection {
                code: RejectionCode::ExpectedSha256Mismatch,
                message: format!(
                    "expected_sha256 {} does not match the content of base_revision {base} ({actual}); read the target again and resubmit against its revision and sha256",
                    snippet(expected, 64)
                ),
            });
        }
    }

    // Base-coordinate ranges of operations that located their old_text.
    let mut located: Vec<(usize, usize, usize)> = Vec::new(); // (op index, start, end)
    for (i, op) in sub.operations.iter().enumerate() {
        let obs = op
            .observation_id
            .as_ref()
            .and_then(|id| input.observations.get(id));
        if input.strict && obs.is_none() {
            reasons.push(Rejection {
                code: RejectionCode::ObservationRequired,
                message: format!(
                    "{}: strict observation mode requires an observation_id; observe the scope that contains old_text first",
                    op_name(i)
                ),
            });
            continue;
        }
        let (scope_start, scope_end, label) = match obs {
            None => (
                0,
                input.base_content.len(),
                format!("target {}", input.target),
            ),
            Some(o) => {
                if o.revision > base {
                    reasons.push(Rejection {
                        code: RejectionCode::ObservationNewerThanBase,
                        message: format!(
                            "{}: observation {} was made at revision {} but base_revision is {base}; submit against the revision you observed (or later)",
                            op_name(i),
                            o.observation_id,
                            o.revision
                        ),
                    });
                    continue;
                }
                if input.strict {
                    // K2: the observed scope must be unchanged at the current revision.
                    let (mut s, mut e) = (o.scope.start_byte, o.scope.end_byte);
                    let mut stale_at = None;
                    for (k, step) in input.steps_between(o.revision, current).iter().enumerate() {
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
                    if !unchanged {
                        let when = stale_at
                            .map(|r| format!("changed at revision {r}"))
                            .unwrap_or_else(|| "no longer matches".to_owned());
                        reasons.push(Rejection {
                            code: RejectionCode::ObservationStale,
                            message: format!(
                                "{}: observation {} of {} (revision {}) is stale: the scope {when}; observe it again and resubmit",
                                op_name(i),
                                o.observation_id,
                                o.label(),
                                o.revision
                            ),
                        });
                        continue;
                    }
                }
                let (mut s, mut e) = (o.scope.start_byte, o.scope.end_byte);
                for step in input.steps_between(o.revision, base) {
                    ((s, e), _) = map_scope(s, e, step);
                }
                (s, e.min(input.base_content.len()), o.label())
            }
        };
        let Some(scope_text) = input.base_content.get(scope_start..scope_end) else {
            reasons.push(Rejection {
                code: RejectionCode::ObservationStale,
                message: format!(
                    "{}: the scope {label} no longer maps onto base_revision {base}; observe it again",
                    op_name(i)
                ),
            });
            continue;
        };
        let hits = find_all(scope_text, &op.old_text);
        match hits.len() {
            1 => {
                let start = scope_start + hits[0];
                located.push((i, start, start + op.old_text.len()));
            }
            0 => reasons.push(Rejection {
                code: RejectionCode::OldTextNotFound,
                message: format!(
                    "{}: old_text {:?} does not occur in scope {label} at revision {base}; read the scope again and copy the exact text (whitespace included)",
                    op_name(i),
                    snippet(&op.old_text, 60)
                ),
            }),
            n => reasons.push(Rejection {
                code: RejectionCode::OldTextAmbiguous,
                message: format!(
                    "{}: old_text occurs {n} times in scope {label}; include more context so it occurs exactly once",
                    op_name(i)
                ),
            }),
        }
    }

    // Operations of one submission must not overlap each other (base coordinates).
    let mut by_start = located.clone();
    by_start.sort_by_key(|&(_, s, e)| (s, e));
    for w in by_start.windows(2) {
        let (a, _, a_end) = w[0];
        let (b, b_start, _) = w[1];
        if b_start < a_end {
            let (x, y) = (a.min(b), a.max(b));
            reasons.push(Rejection {
                code: RejectionCode::OverlappingOperations,
                message: format!(
                    "{} and {} overlap in the target; merge them into one operation",
                    op_name(x),
                    op_name(y)
                ),
            });
        }
    }

    // Carry each located range from the base over the intervening steps (K3).
    let mut edits = Vec::with_capacity(located.len());
    let mut corrections = Vec::new();
    for &(i, bs, be) in &located {
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
        debug_assert_eq!(
            input.current_content.get(s..e),
            Some(sub.operations[i].old_text.as_str())
        );
        edits.push(TextEdit {
            start: s,
            end: e,
            new_text: sub.operations[i].new_text.clone(),
        });
    }

    if !reasons.is_empty() {
        return Plan::Reject { reasons };
    }
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
    match apply_edits(input.current_content, &edits) {
        Ok(new_content) => Plan::Accept {
            edits,
            new_content,
            corrections,
        },
        Err(e) => Plan::Reject {
            reasons: vec![Rejection {
                code: RejectionCode::OverlappingOperations,
                message: e.message,
            }],
        },
    }
}

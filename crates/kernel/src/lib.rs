//! Edit kernel: targets, revisions, observations, operations, operational transform, receipts (SPEC K1–K8). Pure logic, no I/O.
//!
//! - [`position`]: byte ↔ line/column (UTF-8 bytes and UTF-16 units) conversions, occurrence
//!   search, line ranges (K1).
//! - [`ot`]: byte-range replacements, range transform over accepted steps, application (K3).
//! - [`types`]: the data shapes shared with the store and the MCP layer (M6 field names).
//! - [`near_miss`]: why an `old_text` was not found (elsewhere, line endings, whitespace,
//!   escaping) and the line endings a new text is written with (K2, K3).
//! - [`plan`]: deciding a submission — locate `old_text` in the observed scope at the base
//!   revision, enforce strict observation (K2), transform over intervening steps (K3).

pub mod near_miss;
pub mod ot;
pub mod plan;
pub mod position;
pub mod types;

pub use ot::{Conflict, EditShape, TextEdit, apply_edits, map_scope, transform_range};
pub use plan::{ObservationRecord, Plan, PlanInput, Rejection, RejectionCode, plan_submission};
pub use position::{
    Position, byte_to_utf16, find_all, line_count, line_range_to_bytes, position_of, utf16_len,
    utf16_to_byte,
};
pub use types::*;

use sha2::{Digest, Sha256};

/// K3: at most this many operations in one submission (`TOO_MANY_OPERATIONS` beyond).
pub const MAX_OPERATIONS: usize = 64;
/// K3/K8: at most this many bytes of `old_text` + `new_text` summed over one submission (32 MiB).
pub const MAX_SUBMISSION_TEXT_BYTES: usize = 32 * 1024 * 1024;
/// K1/K8: a target's content may not exceed this many bytes (256 MiB); an edit that would grow
/// it further is rejected (`CONTENT_TOO_LARGE`).
pub const MAX_CONTENT_BYTES: usize = 256 * 1024 * 1024;
/// K4: request keys are 1..=256 bytes.
pub const MAX_REQUEST_KEY_BYTES: usize = 256;
/// Target names and languages are 1..=256 bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// The stable code of a [`KernelError`]; spelled as text only by [`KernelCode::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelCode {
    /// A byte offset, line or range outside the content (K1).
    OutOfRange,
    /// A byte offset inside a UTF-8 character (K1).
    NotCharBoundary,
    /// Edits of one step overlap.
    OverlappingOperations,
    /// Other malformed input (empty operations or `old_text`, bad names).
    InvalidInput,
    /// More than [`MAX_OPERATIONS`] operations (K8).
    TooManyOperations,
    /// Operations carry more than [`MAX_SUBMISSION_TEXT_BYTES`] of text (K8).
    SubmissionTooLarge,
}

impl KernelCode {
    /// `OUT_OF_RANGE`, `NOT_CHAR_BOUNDARY`, `OVERLAPPING_OPERATIONS`, `INVALID_INPUT`,
    /// `TOO_MANY_OPERATIONS`, `SUBMISSION_TOO_LARGE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OutOfRange => "OUT_OF_RANGE",
            Self::NotCharBoundary => "NOT_CHAR_BOUNDARY",
            Self::OverlappingOperations => "OVERLAPPING_OPERATIONS",
            Self::InvalidInput => "INVALID_INPUT",
            Self::TooManyOperations => "TOO_MANY_OPERATIONS",
            Self::SubmissionTooLarge => "SUBMISSION_TOO_LARGE",
        }
    }
}

impl std::fmt::Display for KernelCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kernel error with a stable [`KernelCode`] and a message saying how to recover.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct KernelError {
    pub code: KernelCode,
    pub message: String,
}

impl KernelError {
    pub fn new(code: KernelCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    pub fn out_of_range(message: impl Into<String>) -> Self {
        Self::new(KernelCode::OutOfRange, message)
    }
    pub fn not_char_boundary(message: impl Into<String>) -> Self {
        Self::new(KernelCode::NotCharBoundary, message)
    }
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(KernelCode::InvalidInput, message)
    }
}

/// K8: checks a submission's shape before anything is looked up (besides K4 recovery).
///
/// Errors: `INVALID_INPUT` (empty or oversize request key, no operations, empty `old_text`),
/// `TOO_MANY_OPERATIONS` (more than [`MAX_OPERATIONS`]), `SUBMISSION_TOO_LARGE` (more than
/// [`MAX_SUBMISSION_TEXT_BYTES`] of text).
pub fn validate_submission(s: &Submission) -> Result<(), KernelError> {
    if s.request_key.is_empty() || s.request_key.len() > MAX_REQUEST_KEY_BYTES {
        return Err(KernelError::invalid_input(format!(
            "request_key must be 1..={MAX_REQUEST_KEY_BYTES} bytes (got {}); use a fresh unique key per submission",
            s.request_key.len()
        )));
    }
    if s.operations.is_empty() {
        return Err(KernelError::invalid_input(
            "operations is empty; send at least one {observation_id, old_text, new_text}",
        ));
    }
    if s.operations.len() > MAX_OPERATIONS {
        return Err(KernelError::new(
            KernelCode::TooManyOperations,
            format!(
                "{} operations exceed the limit of {MAX_OPERATIONS} per submission; split them into several submissions",
                s.operations.len()
            ),
        ));
    }
    let mut total = 0usize;
    for (i, op) in s.operations.iter().enumerate() {
        if op.old_text.is_empty() {
            return Err(KernelError::invalid_input(format!(
                "operation {} (index {i}): old_text is empty; include the text being replaced (to insert, replace a unique neighbouring snippet with itself plus the insertion)",
                i + 1
            )));
        }
        total = total.saturating_add(op.old_text.len() + op.new_text.len());
    }
    if total > MAX_SUBMISSION_TEXT_BYTES {
        return Err(KernelError::new(
            KernelCode::SubmissionTooLarge,
            format!(
                "operations carry {total} bytes of text, over the limit of {MAX_SUBMISSION_TEXT_BYTES}; split the change into several submissions"
            ),
        ));
    }
    Ok(())
}

/// Shortens `s` for quoting in a reason (at most `max` bytes, on a character boundary).
pub fn snippet(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

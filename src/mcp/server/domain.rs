//! Domain failures and tool results (M5): the codes a tool's failure carries, and the one
//! shape of a success or an `isError` result.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

use super::*;

/// The code of a domain failure (M5): the store's codes, the worker's (W8), and the ones
/// this layer decides. The MCP boundary is the one place they become text ([`Self::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DomainCode {
    /// A store error (`UNKNOWN_TARGET`, `OUT_OF_RANGE`, `REVISION_MOVED`, …).
    Store(ErrorCode),
    /// A worker error (`WAYMARK_WORKER_*`, W8).
    Worker(WorkerErrorCode),
    /// A task or serialization failure inside this process.
    Internal,
    /// The named scope does not exist at this revision.
    UnknownScope,
    /// Several scopes share the name; the agent picks one by `start_byte` or `lines`.
    AmbiguousScope,
    /// Arguments that are well-formed but do not fit together.
    InvalidArguments,
    /// M4/W13: structural scopes need the worker, which this profile never starts.
    WorkerUnavailable,
    /// K8: discovery does not parse this language.
    UnsupportedLanguage,
    /// W8: a domain result of discovery (parse failure, output cap, active timeout).
    DiscoveryFailed,
    /// `find_occurrences` with empty `text`.
    EmptyText,
    /// C1: the fixture file could not be read.
    FixtureUnreadable,
    /// `export` to a destination that is not absolute or not ours.
    InvalidDest,
    /// `export` could not write the destination.
    ExportFailed,
    /// A result larger than an agent host delivers ([`delivery::RESULT_BUDGET_BYTES`]).
    ResultTooLarge,
}

impl DomainCode {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Store(c) => c.as_str(),
            Self::Worker(c) => c.as_str(),
            Self::Internal => "INTERNAL",
            Self::UnknownScope => "UNKNOWN_SCOPE",
            Self::AmbiguousScope => "AMBIGUOUS_SCOPE",
            Self::InvalidArguments => "INVALID_ARGUMENTS",
            Self::WorkerUnavailable => "WORKER_UNAVAILABLE",
            Self::UnsupportedLanguage => "UNSUPPORTED_LANGUAGE",
            Self::DiscoveryFailed => "DISCOVERY_FAILED",
            Self::EmptyText => "EMPTY_TEXT",
            Self::FixtureUnreadable => "FIXTURE_UNREADABLE",
            Self::InvalidDest => "INVALID_DEST",
            Self::ExportFailed => "EXPORT_FAILED",
            Self::ResultTooLarge => "RESULT_TOO_LARGE",
        }
    }
}

/// A domain failure returned to the agent as an `isError` tool result (M5).
#[derive(Debug)]
pub(super) struct DomainError {
    pub(super) code: DomainCode,
    pub(super) message: String,
}

impl DomainError {
    pub(super) fn new(code: DomainCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<StoreError> for DomainError {
    fn from(e: StoreError) -> Self {
        Self {
            code: DomainCode::Store(e.code),
            message: e.message,
        }
    }
}

pub(super) type ToolResult = Result<CallToolResult, ErrorData>;

/// A successful result (M5): the structured content with the ids first, and a one-line
/// summary as its text block — not a copy: content travels once ([`delivery`]). What an agent's
/// profile may receive is bounded in [`PatchdiffServer::call_tool`].
pub(super) fn ok_result(value: impl Serialize) -> ToolResult {
    let value = serde_json::to_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot serialize result: {e}"), None))?;
    Ok(ok_value(value))
}

/// [`ok_result`] of a result already built as JSON: taken as it is, not serialized into a
/// copy of itself (a page's content is copied once, into the page).
pub(super) fn ok_value(value: Value) -> CallToolResult {
    with_summary(delivery::ids_first(value), false)
}

/// An `isError` result (M5): `{"error": {code, message}}` (the message cut to fit
/// [`delivery::ERROR_BUDGET_BYTES`]) as both the text block and the structured content.
pub(super) fn domain_error(err: DomainError) -> ToolResult {
    Ok(with_summary(
        delivery::error_value(err.code.as_str(), &err.message),
        true,
    ))
}

/// A result of `structured` content and one text block. A success's text block is the
/// one-line summary of its ids ([`delivery::summary_of`]), not a copy: content travels once.
/// Why not the serialized JSON, as MCP suggests for backwards compatibility: it sent every
/// result twice (a 1 MiB `read_target` was a 2.08 MB line and a 2.08 MB wire-log record), and
/// the hosts read `structuredContent` of a success or are given the JSON as text
/// (`with_json_text`, [`delivery::HOST_LIMITS`]).
/// An error's text block is its JSON: Claude Code hands the model only the text blocks of an
/// `isError` result; errors are small ([`delivery::ERROR_BUDGET_BYTES`]), so the second copy
/// in the structured content (for clients that read that) is bounded too.
pub(super) fn with_summary(structured: Value, is_error: bool) -> CallToolResult {
    let text = if is_error {
        structured.to_string()
    } else {
        delivery::summary_of(&structured)
    };
    let content = vec![ContentBlock::text(text)];
    let mut result = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

pub(super) fn respond<T: Serialize>(outcome: Result<T, DomainError>) -> ToolResult {
    match outcome {
        Ok(value) => ok_result(value),
        Err(e) => domain_error(e),
    }
}

/// [`answer`] for a body whose result is already JSON ([`ok_value`]).
pub(super) async fn answer_value(
    outcome: impl std::future::Future<Output = Result<Value, DomainError>>,
) -> ToolResult {
    match outcome.await {
        Ok(value) => Ok(ok_value(value)),
        Err(e) => domain_error(e),
    }
}

/// [`respond`] to a handler's body, written as one `async` block that may use `?` on
/// [`DomainError`]s: the one shape every tool handler shares.
pub(super) async fn answer<T: Serialize>(
    outcome: impl std::future::Future<Output = Result<T, DomainError>>,
) -> ToolResult {
    respond(outcome.await)
}

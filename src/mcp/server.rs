//! The MCP server (SPEC M1–M6): tool handlers over the store and the Waymark worker, with the
//! profile boundary enforced before any handler runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_router};
use serde::Serialize;
use serde_json::{Value, json};

use super::delivery;
use super::params::*;
use crate::config::Profile;
use crate::kernel;
use crate::store::{
    EditStore, ErrorCode, ObserveRange, OperationRequest, StoreBackend, StoreError, Submission,
    TargetState, Validation,
};
use crate::telemetry::{Outcome, Recorder, TelemetryStatus};
use crate::waymark::error::WorkerErrorCode;
use crate::waymark::{Discovery, DiscoveryError, Language, Scope, ScopeQuery, Waymark};

/// Observation attempts when another writer keeps moving the revision (REVISION_MOVED).
const OBSERVE_ATTEMPTS: usize = 3;

/// M2: the observed profile advertises exactly these six tools.
pub const OBSERVED_TOOLS: [&str; 6] = [
    "patchdiff_read_target",
    "patchdiff_find_occurrences",
    "patchdiff_observe_scope",
    "patchdiff_submit_observed_operations",
    "patchdiff_save",
    "patchdiff_replay",
];

/// M3: tools only the trusted full profile adds.
pub const FULL_ONLY_TOOLS: [&str; 4] = [
    "patchdiff_init_target",
    "patchdiff_export_target",
    "patchdiff_audit",
    "patchdiff_worker_status",
];

/// The tool names a profile exposes, in listing order.
pub fn profile_tools(profile: Profile) -> Vec<&'static str> {
    let mut tools = OBSERVED_TOOLS.to_vec();
    if profile == Profile::Full {
        tools.extend(FULL_ONLY_TOOLS);
    }
    tools
}

/// Everything a server process shares across calls.
#[derive(Clone)]
pub struct PatchdiffServer {
    tool_router: ToolRouter<Self>,
    profile: Profile,
    strict: bool,
    store: Arc<dyn EditStore>,
    /// `None` in the workspace profile (W13: it never starts the worker).
    waymark: Option<Waymark>,
    recorder: Recorder,
    telemetry: TelemetryStatus,
    /// A3: tool calls wait for the console to admit the agent (console-launched hosts only).
    gate: Option<Arc<super::gate::AdmissionGate>>,
    /// Whether content parses cleanly, by (language, SHA-256): a revision's content never
    /// changes, so each is parsed for this at most once (reads stay cheap).
    parse_status: ParseStatus,
}

/// Known parse status by (language, SHA-256 of the content).
type ParseStatus = Arc<std::sync::Mutex<HashMap<(String, String), bool>>>;

/// Most entries [`PatchdiffServer::parse_status`] keeps before starting over.
const PARSE_STATUS_ENTRIES: usize = 4096;

fn remember_parse_status(known: &ParseStatus, key: (String, String), clean: bool) {
    if let Ok(mut known) = known.lock() {
        if known.len() >= PARSE_STATUS_ENTRIES {
            known.clear();
        }
        known.insert(key, clean);
    }
}

/// The code of a domain failure (M5): the store's codes, the worker's (W8), and the ones
/// this layer decides. The MCP boundary is the one place they become text ([`Self::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DomainCode {
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
    fn as_str(self) -> &'static str {
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
struct DomainError {
    code: DomainCode,
    message: String,
}

impl DomainError {
    fn new(code: DomainCode, message: impl Into<String>) -> Self {
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

type ToolResult = Result<CallToolResult, ErrorData>;

/// A successful result (M5): the structured content with the ids first, and a one-line
/// summary as its text block — not a copy: content travels once ([`delivery`]). What an agent's
/// profile may receive is bounded in [`PatchdiffServer::call_tool`].
fn ok_result(value: impl Serialize) -> ToolResult {
    let value = serde_json::to_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot serialize result: {e}"), None))?;
    Ok(with_summary(delivery::ids_first(value), false))
}

/// An `isError` result (M5): `{"error": {code, message}}` (the message cut to fit
/// [`delivery::ERROR_BUDGET_BYTES`]) as both the text block and the structured content.
fn domain_error(err: DomainError) -> ToolResult {
    Ok(with_summary(
        delivery::error_value(err.code.as_str(), &err.message),
        true,
    ))
}

/// A result of `structured` content and one text block. A success's text block is the
/// one-line summary of its ids ([`delivery::summary_of`]), not a copy: content travels once.
/// Why not the serialized JSON, as MCP suggests for backwards compatibility: it sent every
/// result twice (a 1 MiB `read_target` was a 2.08 MB line and a 2.08 MB wire-log record), and
/// both supported hosts read `structuredContent` of a success ([`delivery::HOST_LIMITS`]).
/// An error's text block is its JSON: Claude Code hands the model only the text blocks of an
/// `isError` result; errors are small ([`delivery::ERROR_BUDGET_BYTES`]), so the second copy
/// in the structured content (for clients that read that) is bounded too.
fn with_summary(structured: Value, is_error: bool) -> CallToolResult {
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

fn respond<T: Serialize>(outcome: Result<T, DomainError>) -> ToolResult {
    match outcome {
        Ok(value) => ok_result(value),
        Err(e) => domain_error(e),
    }
}

/// [`respond`] to a handler's body, written as one `async` block that may use `?` on
/// [`DomainError`]s: the one shape every tool handler shares.
async fn answer<T: Serialize>(
    outcome: impl std::future::Future<Output = Result<T, DomainError>>,
) -> ToolResult {
    respond(outcome.await)
}

impl PatchdiffServer {
    /// The worker's status as it is now (`None` in the workspace profile); reads state only and
    /// never starts a child (W13: the health endpoint uses it).
    pub fn worker_status(&self) -> Option<crate::waymark::WorkerStatus> {
        self.waymark.as_ref().map(|w| w.status())
    }
}

impl PatchdiffServer {
    /// Builds a server for `profile`. Tools outside the profile are removed from the router, so
    /// they are neither listed nor callable (M2).
    pub fn new(
        profile: Profile,
        strict: bool,
        store: Arc<dyn EditStore>,
        waymark: Option<Waymark>,
        recorder: Recorder,
        telemetry: TelemetryStatus,
    ) -> Self {
        let mut tool_router = Self::tool_router();
        let allowed = profile_tools(profile);
        let all: Vec<String> = tool_router
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        for name in all {
            if !allowed.contains(&name.as_str()) {
                tool_router.remove_route(&name);
            }
        }
        Self {
            tool_router,
            profile,
            strict,
            store,
            waymark,
            recorder,
            telemetry,
            gate: None,
            parse_status: Arc::default(),
        }
    }

    /// Holds every tool call until `gate` opens (A3); `None` leaves calls ungated.
    pub fn with_admission_gate(mut self, gate: Option<super::gate::AdmissionGate>) -> Self {
        self.gate = gate.map(Arc::new);
        self
    }

    /// Runs blocking store work off the async executor.
    async fn blocking<T, F>(&self, f: F) -> Result<T, DomainError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn EditStore) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(store.as_ref()))
            .await
            .map_err(|e| DomainError::new(DomainCode::Internal, format!("store task failed: {e}")))?
            .map_err(DomainError::from)
    }

    fn submission_validator(&self) -> SubmissionValidator {
        let resident = self
            .waymark
            .as_ref()
            .filter(|w| w.config().mode == crate::waymark::WaymarkMode::Resident);
        SubmissionValidator {
            waymark: resident.cloned(),
            runtime: tokio::runtime::Handle::current(),
            worker_error: Arc::default(),
            parse_status: self.parse_status.clone(),
        }
    }

    /// K4/W7/W8: request-key recovery first (no discovery capacity needed), then a ready worker
    /// outside the target's lock, then the store's validated submission. A worker that cannot
    /// start makes the submission `VALIDATION_UNAVAILABLE` (nothing recorded) and leaves its
    /// error in `validator.worker_error` for the audit.
    async fn submit_validated(
        &self,
        target: String,
        submission: Submission,
        validator: SubmissionValidator,
    ) -> Result<crate::store::Receipt, DomainError> {
        let strict = self.strict;
        let worker_error = validator.worker_error.clone();
        let (t, sub) = (target.clone(), submission.clone());
        if let Some(receipt) = self.blocking(move |s| s.recover_receipt(&t, &sub)).await? {
            return Ok(receipt);
        }
        // W7: the validation below holds the target's lock and so never starts a worker;
        // make sure one is ready first, outside the lock. W8: a failure carries its real
        // code (RESTART_LIMIT, PROTOCOL, SPAWN, STARTUP_TIMEOUT, …), not NOT_READY.
        if let Some(w) = validator.waymark.as_ref().filter(|w| !w.status().ready)
            && let Err(e) = w.prewarm().await
        {
            let unavailable = DomainError::new(
                DomainCode::Store(ErrorCode::ValidationUnavailable),
                format!(
                    "{}: {}; nothing was recorded, submit again with the same request_key",
                    e.code.as_str(),
                    e.message
                ),
            );
            if let Ok(mut slot) = worker_error.lock() {
                *slot = Some(e);
            }
            return Err(unavailable);
        }
        self.blocking(move |s| {
            s.submit_validated(&target, &submission, strict, &|language, content| {
                validator.validate(language, content)
            })
        })
        .await
    }

    /// One observation attempt (K2): read the current revision, resolve the range (a discovery
    /// answering only the question asked: the named scope, or the scope of a byte), record the
    /// observation at that revision. The result adds `parses_cleanly` (null when unknown).
    async fn observe_once(&self, args: &ObserveScopeArgs) -> Result<Value, DomainError> {
        let target = args.target.clone();
        let t = self.blocking(move |s| s.read_target(&target)).await?;
        let (range, parses_cleanly) = match (&args.scope, &args.lines, args.start_byte) {
            (Some(name), None, pick) => self.range_of_named_scope(&t, name, pick).await?,
            (None, None, Some(byte)) => self.range_of_scope_at(&t, byte).await?,
            (None, Some(lines), None) => self.range_of_lines(&t, lines).await?,
            _ => {
                return Err(DomainError::new(
                    DomainCode::InvalidArguments,
                    "give exactly one of `scope` (a qualified name, optionally with the `start_byte` of the one you mean), `start_byte` alone, or `lines` {start, end}",
                ));
            }
        };
        let (name, revision) = (t.name.clone(), t.revision);
        let observation = self
            .blocking(move |s| s.observe(&name, revision, range))
            .await?;
        let mut value = serde_json::to_value(observation).map_err(|e| {
            DomainError::new(DomainCode::Internal, format!("cannot serialize: {e}"))
        })?;
        value["parses_cleanly"] = json!(parses_cleanly);
        Ok(bound_observed_text(value))
    }

    /// The range of the scope named `name` (K2; `pick`: the `start_byte` of one of several
    /// scopes sharing the name) and whether the content parses cleanly.
    async fn range_of_named_scope(
        &self,
        t: &TargetState,
        name: &str,
        pick: Option<usize>,
    ) -> Result<(ObserveRange, Option<bool>), DomainError> {
        let d = self
            .discover(
                &t.name,
                &t.language,
                &t.content,
                &ScopeQuery::Name(name.to_owned()),
            )
            .await?;
        remember_parse_status(
            &self.parse_status,
            (t.language.clone(), t.sha256.clone()),
            !d.has_error,
        );
        let found = resolve_scope(&d, name, &t.name, pick)?;
        Ok((observe_range(found), Some(!d.has_error)))
    }

    /// The range of the innermost scope containing byte `byte` (UTF-8 offset; `OUT_OF_RANGE`
    /// past the end, `UNKNOWN_SCOPE` when no scope contains it).
    async fn range_of_scope_at(
        &self,
        t: &TargetState,
        byte: usize,
    ) -> Result<(ObserveRange, Option<bool>), DomainError> {
        if byte >= t.content.len() {
            return Err(DomainError::new(
                DomainCode::Store(ErrorCode::OutOfRange),
                format!(
                    "start_byte {byte} is past the end of target `{}` ({} bytes)",
                    t.name,
                    t.content.len()
                ),
            ));
        }
        let d = self
            .discover(
                &t.name,
                &t.language,
                &t.content,
                &ScopeQuery::Covering(vec![[byte, byte + 1]]),
            )
            .await?;
        let found = d.scopes.first().ok_or_else(|| {
            DomainError::new(
                DomainCode::UnknownScope,
                format!(
                    "no structural scope of target `{}` contains byte {byte}; observe by `lines` instead",
                    t.name
                ),
            )
        })?;
        Ok((observe_range(found), Some(!d.has_error)))
    }

    /// An explicit 1-based inclusive line range (`OUT_OF_RANGE` outside the content).
    async fn range_of_lines(
        &self,
        t: &TargetState,
        lines: &LineRange,
    ) -> Result<(ObserveRange, Option<bool>), DomainError> {
        let (start_byte, end_byte) =
            kernel::line_range_to_bytes(&t.content, lines.start, lines.end).map_err(|e| {
                DomainError::new(DomainCode::Store(ErrorCode::OutOfRange), e.to_string())
            })?;
        let range = ObserveRange {
            kind: "lines".into(),
            name: None,
            start_byte,
            end_byte,
        };
        let parses_cleanly = self
            .parses_cleanly(&t.language, &t.sha256, &t.content)
            .await;
        Ok((range, parses_cleanly))
    }

    /// Whether `content` parses without syntax errors (a summary discovery: no scope list), or
    /// `None` when unknown: no worker, a language discovery does not parse, or the worker busy
    /// or not ready — a read never waits for the worker (nor starts one) to answer this.
    async fn parses_cleanly(&self, language: &str, sha256: &str, content: &str) -> Option<bool> {
        let key = (language.to_owned(), sha256.to_owned());
        if let Some(known) = self.parse_status.lock().ok()?.get(&key) {
            return Some(*known);
        }
        let waymark = self.waymark.as_ref()?;
        let parsed = language.parse::<Language>().ok()?;
        let clean = waymark
            .discover_if_idle(parsed, content, &ScopeQuery::Summary)
            .await
            .ok()
            .map(|d| !d.has_error)?;
        remember_parse_status(&self.parse_status, key, clean);
        Some(clean)
    }

    /// Runs discovery on `content`, recording worker errors in the target's audit (W8).
    async fn discover(
        &self,
        target: &str,
        language: &str,
        content: &str,
        query: &ScopeQuery,
    ) -> Result<Discovery, DomainError> {
        let Some(waymark) = &self.waymark else {
            return Err(DomainError::new(
                DomainCode::WorkerUnavailable,
                "structural scopes need the Waymark worker, which the workspace profile never \
                 starts; observe by `lines` instead",
            ));
        };
        let language: Language = language.parse().map_err(|_| {
            DomainError::new(
                DomainCode::UnsupportedLanguage,
                format!("target `{target}` is in `{language}`, which discovery does not parse; observe by `lines`"),
            )
        })?;
        match waymark.discover_query(language, content, query).await {
            Ok(discovery) => Ok(discovery),
            Err(DiscoveryError::Worker(e)) => {
                let code = DomainCode::Worker(e.code);
                let message = e.message.clone();
                let t = target.to_owned();
                let (c, m) = (e.code.as_str(), message.clone());
                // Best effort: the audit records worker errors; the call fails either way.
                let _ = self
                    .blocking(move |s| s.record_worker_error(&t, c, &m))
                    .await;
                Err(DomainError::new(
                    code,
                    format!("{message}; the discovery was not retried — call again"),
                ))
            }
            Err(DiscoveryError::Domain(d)) => Err(DomainError::new(
                DomainCode::DiscoveryFailed,
                format!("{d}; observe by `lines` instead"),
            )),
        }
    }
}

/// Post-edit validation of submissions (W7, W8): discovery of the content an accepted plan would
/// produce, run while the store holds its lock. A resident worker is waited for at most 250 ms
/// and never started; oneshot mode cannot validate under the lock without starting a child, and
/// the workspace profile has no worker, so both skip validation.
struct SubmissionValidator {
    waymark: Option<Waymark>,
    runtime: tokio::runtime::Handle,
    /// The worker error that made validation unavailable, for the audit.
    worker_error: Arc<std::sync::Mutex<Option<crate::waymark::WorkerError>>>,
    /// Where what validation learnt about parse status goes (reads then need no parse).
    parse_status: ParseStatus,
}

impl SubmissionValidator {
    fn validate(&self, language: &str, content: &str) -> Validation {
        let Some(waymark) = &self.waymark else {
            return Validation::Passed;
        };
        let Ok(language) = language.parse::<Language>() else {
            return Validation::Passed;
        };
        // Validation asks only whether it parses: no scope list, so no output cap to exceed.
        match self.runtime.block_on(waymark.discover_holding_lock_query(
            language,
            content,
            &ScopeQuery::Summary,
        )) {
            Ok(d) => {
                remember_parse_status(
                    &self.parse_status,
                    (language.as_str().to_owned(), kernel::sha256_hex(content)),
                    !d.has_error,
                );
                if d.has_error {
                    Validation::PassedWithSyntaxErrors
                } else {
                    Validation::Passed
                }
            }
            Err(DiscoveryError::Domain(d)) => Validation::Failed {
                code: d.code().to_owned(),
                message: d.to_string(),
            },
            Err(DiscoveryError::Worker(e)) => {
                let verdict = Validation::Unavailable {
                    code: e.code.as_str().to_owned(),
                    message: e.message.clone(),
                };
                if let Ok(mut slot) = self.worker_error.lock() {
                    *slot = Some(e);
                }
                verdict
            }
        }
    }
}

/// The range to observe for a discovered scope.
fn observe_range(s: &Scope) -> ObserveRange {
    ObserveRange {
        kind: s.kind.clone(),
        name: Some(s.name.clone()),
        start_byte: s.start_byte,
        end_byte: s.end_byte,
    }
}

/// Finds the one scope named `name` (a qualified name) in a name query's answer, or the one of
/// them starting at byte `pick`. None → `UNKNOWN_SCOPE` listing names there are; several (a
/// getter and setter, redeclared functions, identical entries in minified code) →
/// `AMBIGUOUS_SCOPE` listing each one's kind, lines and byte range, so the agent can pick one by
/// its `start_byte` (K2).
fn resolve_scope<'a>(
    found: &'a Discovery,
    name: &str,
    target: &str,
    pick: Option<usize>,
) -> Result<&'a Scope, DomainError> {
    const LISTED: usize = 40;
    let matches: Vec<&Scope> = found.scopes.iter().filter(|s| s.name == name).collect();
    let describe = |several: &[&Scope]| {
        let mut listed: Vec<String> = several
            .iter()
            .take(LISTED)
            .map(|s| {
                format!(
                    "{} lines {}–{} bytes {}–{} (start_byte {})",
                    s.kind, s.start_line, s.end_line, s.start_byte, s.end_byte, s.start_byte
                )
            })
            .collect();
        if several.len() > LISTED {
            listed.push(format!("… and {} more", several.len() - LISTED));
        }
        listed.join(", ")
    };
    if let Some(byte) = pick {
        return match matches.iter().find(|s| s.start_byte == byte) {
            Some(one) => Ok(one),
            None if matches.is_empty() => Err(unknown_scope(found, name, target)),
            None => Err(DomainError::new(
                DomainCode::UnknownScope,
                format!(
                    "no scope named `{name}` in target `{target}` starts at byte {byte}; those named `{name}` are: {}",
                    describe(&matches)
                ),
            )),
        };
    }
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(unknown_scope(found, name, target)),
        several => Err(DomainError::new(
            DomainCode::AmbiguousScope,
            format!(
                "`{name}` names {} scopes in target `{target}` ({}); observe the one you mean with `scope` and its `start_byte`, or by `lines` {{start, end}}",
                several.len(),
                describe(several)
            ),
        )),
    }
}

fn unknown_scope(found: &Discovery, name: &str, target: &str) -> DomainError {
    let shown = found.names.len();
    let more = if found.scope_count > shown {
        format!(" (the first {shown} names of {} scopes)", found.scope_count)
    } else {
        String::new()
    };
    let listed = if found.names.is_empty() {
        "it has no structural scopes".to_owned()
    } else {
        format!("scopes are: {}{more}", found.names.join(", "))
    };
    // After a syntax error the parser may lose every later scope: say so, and what still works.
    let parse = match (found.has_error, found.error_line) {
        (true, Some(line)) => format!(
            "; the content does not parse from line {line} (a syntax error), so scopes after it may be missing — observe by `lines` {{start, end}} instead, which works whatever the parser sees"
        ),
        (true, None) => "; the content has syntax errors, so some scopes may be missing — observe by `lines` {start, end} instead, which works whatever the parser sees".to_owned(),
        (false, _) => String::new(),
    };
    DomainError::new(
        DomainCode::UnknownScope,
        format!("no scope named `{name}` in target `{target}`; {listed}{parse}"),
    )
}

/// The text `find_occurrences` searches for `text` in `content`, and a note when it differs:
/// a `text` with other line endings than the target's is searched with the target's (a mixed
/// target: as sent, else with CRLF, else with LF), so an LF needle finds CRLF text.
fn match_line_endings(content: &str, text: &str) -> (String, Option<String>) {
    use kernel::near_miss::{LineEndings, with_line_endings};
    let sent = LineEndings::of(text);
    let target = LineEndings::of(content);
    if sent == LineEndings::None || sent == target || target == LineEndings::None {
        return (text.to_owned(), None);
    }
    let candidates = match target {
        LineEndings::Mixed => vec![LineEndings::Crlf, LineEndings::Lf],
        other => vec![other],
    };
    if target == LineEndings::Mixed && !kernel::find_all(content, text).is_empty() {
        return (text.to_owned(), None);
    }
    for endings in candidates {
        let converted = with_line_endings(text, endings).into_owned();
        if converted != text && !kernel::find_all(content, &converted).is_empty() {
            let note = format!(
                "text used {} line endings and the target uses {}: matched with {}: send old_text with the target's line endings, as the occurrences' bytes have them",
                sent.as_str(),
                target.as_str(),
                endings.as_str()
            );
            return (converted, Some(note));
        }
    }
    (
        text.to_owned(),
        Some(format!(
            "text used {} line endings and the target uses {}; it was searched with the target's too and not found",
            sent.as_str(),
            target.as_str()
        )),
    )
}

/// One page of `t`'s content from byte `offset`, so a host delivers it whole: as many bytes as fit in
/// one result ([`delivery::RESULT_BUDGET_BYTES`], escapes counted) and `limit`, ending after a
/// line end when it stops early. `OUT_OF_RANGE` for an offset past the end or inside a
/// character, or a `limit` of 0.
fn read_page(
    t: &TargetState,
    offset: usize,
    limit: Option<usize>,
    parses_cleanly: Option<bool>,
) -> Result<Value, DomainError> {
    let total = t.content.len();
    if offset > total || !t.content.is_char_boundary(offset) {
        return Err(DomainError::new(
            DomainCode::Store(ErrorCode::OutOfRange),
            format!(
                "`offset` {offset} is {} of target `{}` ({total} bytes); give a UTF-8 byte \
                 offset 0..={total} on a character boundary, e.g. a page's next_offset",
                if offset > total {
                    "past the end"
                } else {
                    "inside a character"
                },
                t.name
            ),
        ));
    }
    if limit == Some(0) {
        return Err(DomainError::new(
            DomainCode::Store(ErrorCode::OutOfRange),
            "`limit` must be at least 1 byte; omit it for as much as one result holds",
        ));
    }
    let mut page = json!({
        "revision": t.revision, "sha256": t.sha256, "target": t.name, "version": t.version,
        "language": t.language, "offset": offset, "next_offset": total, "has_more": false,
        "total": total, "start_line": 0, "end_line": 0, "parses_cleanly": parses_cleanly,
        "content": "",
    });
    // The envelope, its line numbers and the continuation hint (at most ~200 bytes) beside
    // the content.
    let room = delivery::RESULT_BUDGET_BYTES
        .saturating_sub(delivery::json_len(&page) + delivery::PAGE_RESERVE_BYTES);
    let end = delivery::page_end(&t.content, offset, room, limit.unwrap_or(usize::MAX));
    let line_of = |byte: usize| kernel::position_of(&t.content, byte).map_or(0, |p| p.line);
    let has_more = end < total;
    page["next_offset"] = if has_more { json!(end) } else { Value::Null };
    page["has_more"] = json!(has_more);
    page["start_line"] = json!(line_of(offset));
    // The line holding the page's last byte.
    let last = t.content[offset..end]
        .char_indices()
        .next_back()
        .map_or(offset, |(i, _)| offset + i);
    page["end_line"] = json!(line_of(last));
    page["content"] = json!(&t.content[offset..end]);
    if has_more {
        page["how_to_continue"] = json!(format!(
            "bytes {offset}–{end} of {total} shown; call patchdiff_read_target again with \
             offset={end} for the rest"
        ));
    }
    Ok(page)
}

/// An observation whose scope text would not fit one result keeps the first page of it
/// (`text_complete: false`) and says where the rest is: the observation itself covers the
/// whole scope; `patchdiff_read_target` pages through its bytes.
fn bound_observed_text(mut value: Value) -> Value {
    let text = value["text"].as_str().unwrap_or_default().to_owned();
    value["text"] = json!("");
    let room = delivery::RESULT_BUDGET_BYTES
        .saturating_sub(delivery::json_len(&value) + delivery::PAGE_RESERVE_BYTES);
    let end = delivery::page_end(&text, 0, room, usize::MAX);
    if end == text.len() {
        value["text"] = json!(text);
        return value;
    }
    let start = value["scope"]["start_byte"].as_u64().unwrap_or(0) as usize;
    let scope_end = value["scope"]["end_byte"].as_u64().unwrap_or(0);
    value["text"] = json!(&text[..end]);
    value["text_complete"] = json!(false);
    value["text_bytes"] = json!(text.len());
    value["how_to_continue"] = json!(format!(
        "the scope's text is {} bytes; its first {end} are shown. The observation covers all of \
         it: read the rest with patchdiff_read_target offset={} (the scope ends at byte \
         {scope_end})",
        text.len(),
        start + end
    ));
    value
}

/// A receipt as delivered (K3, M6): ids first, at most [`delivery::REASONS_LISTED`] reasons
/// in full with `reasons_total` and `reasons_omitted` summarising the rest — fewer when a
/// rejection would not fit [`delivery::ERROR_BUDGET_BYTES`]; `reason_codes` stays whole (one
/// short code per operation, at most 64). Deterministic, so an identical retry's result is the
/// same bytes (K4).
fn receipt_view(receipt: &crate::store::Receipt) -> Result<Value, ErrorData> {
    let value = serde_json::to_value(receipt)
        .map_err(|e| ErrorData::internal_error(format!("cannot serialize receipt: {e}"), None))?;
    let codes: Vec<String> = receipt
        .reason_codes
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    let rejected = receipt.outcome != crate::store::Outcome::Accepted;
    let mut listed = delivery::REASONS_LISTED;
    loop {
        let mut view = value.clone();
        let (reasons, omitted) = delivery::bounded_reasons(&receipt.reasons, &codes, listed);
        view["reasons"] = json!(reasons);
        if let Some(omitted) = omitted {
            view["reasons_total"] = json!(receipt.reasons.len());
            view["reasons_omitted"] = json!(omitted);
        }
        let view = delivery::ids_first(view);
        if !rejected || listed == 0 || delivery::json_len(&view) <= delivery::ERROR_BUDGET_BYTES {
            return Ok(view);
        }
        listed -= 1;
    }
}

/// The innermost scope containing `[start, end)` (UTF-8 bytes), if any.
fn innermost_scope(scopes: &[Scope], start: usize, end: usize) -> Option<&Scope> {
    scopes
        .iter()
        .filter(|s| s.start_byte <= start && end <= s.end_byte)
        .min_by_key(|s| s.end_byte - s.start_byte)
}

// One `#[tool]` method per tool is rmcp's shape: the attribute, the signature and
// `answer(async { … })` repeat by design; what the handlers share lives in `answer`, `respond`,
// `blocking` and `file_io`.
#[tool_router]
impl PatchdiffServer {
    #[tool(
        description = "Read a target's current content, a page at a time (about 32 KiB, ending at a line end), with its version (increases per save), revision (increases per accepted submission; pass it as base_revision), SHA-256 of the whole content and language. `offset` and `next_offset` are UTF-8 byte offsets; while has_more is true, call again with offset=next_offset. start_line/end_line give the page's lines, total the content's bytes. Start here."
    )]
    async fn patchdiff_read_target(
        &self,
        Parameters(args): Parameters<ReadTargetArgs>,
    ) -> ToolResult {
        answer(async {
            let t = self.blocking(move |s| s.read_target(&args.target)).await?;
            let parses_cleanly = self
                .parses_cleanly(&t.language, &t.sha256, &t.content)
                .await;
            read_page(&t, args.offset.unwrap_or(0), args.limit, parses_cleanly)
        })
        .await
    }

    #[tool(
        description = "Find occurrences of exact text in a target, a page at a time (`offset` = index of the first occurrence, `limit` at most 1000; a page also stops at about 32 KiB). Each has start_byte/end_byte (UTF-8 byte offsets), line and column (1-based; column in UTF-8 bytes, column_utf16 in UTF-16 units) and the innermost structural scope (or null). total counts all; while has_more is true, call again with offset=next_offset."
    )]
    async fn patchdiff_find_occurrences(
        &self,
        Parameters(args): Parameters<FindOccurrencesArgs>,
    ) -> ToolResult {
        answer(async {
            if args.text.is_empty() {
                return Err(DomainError::new(DomainCode::EmptyText, "`text` must not be empty"));
            }
            let target = args.target.clone();
            let t = self.blocking(move |s| s.read_target(&target)).await?;
            let limit = args.limit.unwrap_or(OCCURRENCES_DEFAULT_LIMIT);
            if !(1..=OCCURRENCES_MAX_LIMIT).contains(&limit) {
                return Err(DomainError::new(
                    DomainCode::Store(ErrorCode::OutOfRange),
                    format!("`limit` must be 1..={OCCURRENCES_MAX_LIMIT} (got {limit}); omit it for {OCCURRENCES_DEFAULT_LIMIT}"),
                ));
            }
            let limit = limit as usize;
            // Text search needs no scopes: find first, then ask discovery only for the scopes
            // of the occurrences this page may return. Without them the occurrences still stand.
            // A text whose line endings differ from the target's matches across them (an LF
            // needle in a CRLF file finds the CRLF text), and the result says so.
            let (needle, line_endings) = match_line_endings(&t.content, &args.text);
            let starts = kernel::find_all(&t.content, &needle);
            let offset = args.offset.unwrap_or(0);
            if offset > starts.len() {
                return Err(DomainError::new(
                    DomainCode::Store(ErrorCode::OutOfRange),
                    format!(
                        "`offset` {offset} is past the {} occurrences of this text; give 0..={}",
                        starts.len(),
                        starts.len()
                    ),
                ));
            }
            let page: &[usize] = &starts[offset..starts.len().min(offset + limit)];
            let ranges: Vec<[usize; 2]> =
                page.iter().map(|&s| [s, s + needle.len()]).collect();
            let mut scope_error = None;
            let scopes = match (&self.waymark, ranges.is_empty()) {
                (Some(_), false) => match self
                    .discover(&t.name, &t.language, &t.content, &ScopeQuery::Covering(ranges))
                    .await
                {
                    Ok(d) => d.scopes,
                    Err(e) => {
                        scope_error = Some(json!({"code": e.code.as_str(), "message": delivery::cut(&e.message, 1000)}));
                        Vec::new()
                    }
                },
                _ => Vec::new(),
            };
            let mut result = json!({
                "revision": t.revision, "target": t.name, "total": starts.len(),
                "offset": offset, "next_offset": null, "has_more": false, "truncated": false,
                "occurrences": [],
            });
            if let Some(e) = scope_error {
                result["scope_error"] = e;
            }
            if let Some(note) = line_endings {
                result["line_endings"] = json!(note);
            }
            // Room for the page's occurrences: the budget less the envelope and its hint.
            let room = delivery::RESULT_BUDGET_BYTES
                .saturating_sub(delivery::json_len(&result) + delivery::PAGE_RESERVE_BYTES);
            let mut used = 0;
            let mut occurrences = Vec::new();
            for &start in page {
                let end = start + needle.len();
                let pos = kernel::position_of(&t.content, start)
                    .map_err(|e| DomainError::new(DomainCode::Store(ErrorCode::OutOfRange), e.to_string()))?;
                let scope = innermost_scope(&scopes, start, end).map(|s| {
                    json!({"kind": s.kind, "name": delivery::cut(&s.name, 200), "start_line": s.start_line, "end_line": s.end_line})
                });
                let occurrence = json!({
                    "start_byte": start, "end_byte": end, "line": pos.line,
                    "column": pos.column_utf8 + 1, "column_utf16": pos.column_utf16 + 1,
                    "scope": scope,
                });
                let size = delivery::json_len(&occurrence) + 1;
                if used + size > room {
                    break;
                }
                used += size;
                occurrences.push(occurrence);
            }
            let next = offset + occurrences.len();
            let has_more = next < starts.len();
            result["occurrences"] = Value::Array(occurrences);
            result["has_more"] = json!(has_more);
            result["truncated"] = json!(has_more);
            if has_more {
                result["next_offset"] = json!(next);
                result["how_to_continue"] = json!(format!(
                    "occurrences {offset}–{} of {} shown; call patchdiff_find_occurrences again with offset={next} for the rest",
                    next.saturating_sub(1),
                    starts.len()
                ));
            }
            Ok(result)
        })
        .await
    }

    #[tool(
        description = "Observe a structural scope (by qualified name such as `Calendar.addWindow`) or an explicit line range before editing inside it. Returns observation_id, the revision it was seen at, the scope's range, its text and SHA-256. Submissions must name an observation whose scope is unchanged."
    )]
    async fn patchdiff_observe_scope(
        &self,
        Parameters(args): Parameters<ObserveScopeArgs>,
    ) -> ToolResult {
        // Another writer may commit between our read and the observation (REVISION_MOVED): read
        // and discover the new revision, a bounded number of times. This is not a retry of a
        // failed discovery (W4) — each attempt discovers different content.
        let mut attempt = 1;
        let outcome = loop {
            match self.observe_once(&args).await {
                Err(e)
                    if e.code == DomainCode::Store(ErrorCode::RevisionMoved)
                        && attempt < OBSERVE_ATTEMPTS =>
                {
                    attempt += 1
                }
                other => break other,
            }
        };
        respond(outcome)
    }

    #[tool(
        description = "Submit edits inside observed scopes. Each operation replaces old_text (which must occur exactly once inside its observed scope) with new_text. Atomic and idempotent per request_key. Returns a receipt: outcome accepted or rejected, the new revision and SHA-256, corrections when your base revision was stale, and reasons when rejected."
    )]
    async fn patchdiff_submit_observed_operations(
        &self,
        Parameters(args): Parameters<SubmitArgs>,
    ) -> ToolResult {
        let target = args.target.clone();
        let mut span = self.recorder.span("submission");
        span.id("target", target.clone())
            .id("request_key", args.request_key.clone());
        let validator = self.submission_validator();
        let worker_error = validator.worker_error.clone();
        let outcome = self
            .submit_validated(target.clone(), submission_of(args), validator)
            .await;
        // W8: a worker error during validation is recorded against the target's audit.
        if let Some(e) = worker_error.lock().ok().and_then(|mut g| g.take()) {
            let (t, c, m) = (target, e.code.as_str().to_owned(), e.message);
            let _ = self
                .blocking(move |s| s.record_worker_error(&t, &c, &m))
                .await;
        }
        match outcome {
            Ok(receipt) => {
                let accepted = receipt.outcome == crate::store::Outcome::Accepted;
                span.attr("outcome", if accepted { "accepted" } else { "rejected" });
                span.finish(Outcome::Ok);
                Ok(with_summary(receipt_view(&receipt)?, !accepted))
            }
            Err(e) => {
                span.finish(Outcome::Failed);
                domain_error(e)
            }
        }
    }

    #[tool(
        description = "Save the target: its current accepted revision becomes a new version. Export takes the latest saved version, so save when you are done."
    )]
    async fn patchdiff_save(&self, Parameters(args): Parameters<TargetArg>) -> ToolResult {
        respond(self.blocking(move |s| s.save(&args.target)).await)
    }

    #[tool(
        description = "Read the target's journal of accepted edits and saves in order, a page at a time. Pass the returned next_cursor as `after` while has_more is true."
    )]
    async fn patchdiff_replay(&self, Parameters(args): Parameters<ReplayArgs>) -> ToolResult {
        answer(async {
            // A page the host could not deliver whole is asked for again with half the
            // entries; one entry alone too large is named, with the cursor past it.
            let mut limit = args.limit;
            loop {
                let (target, after) = (args.target.clone(), args.after.clone());
                let page = self
                    .blocking(move |s| s.replay(&target, after.as_deref(), limit))
                    .await?;
                let value = serde_json::to_value(&page).map_err(|e| {
                    DomainError::new(DomainCode::Internal, format!("cannot serialize: {e}"))
                })?;
                let size = delivery::json_len(&value);
                let entries = value["entries"].as_array().map_or(0, Vec::len);
                if !self.for_agent()
                    || size + delivery::SUMMARY_BYTES <= delivery::RESULT_BUDGET_BYTES
                {
                    return Ok(value);
                }
                if entries <= 1 {
                    return Err(DomainError::new(
                        DomainCode::ResultTooLarge,
                        format!(
                            "the journal entry after cursor {} is {size} bytes as JSON, more \
                             than the {} bytes an agent host delivers whole; read the target \
                             itself with patchdiff_read_target, or continue the replay after \
                             it with after={}",
                            args.after.as_deref().unwrap_or("(start)"),
                            delivery::RESULT_BUDGET_BYTES,
                            value["next_cursor"]
                        ),
                    ));
                }
                limit = Some((entries / 2).max(1) as u32);
            }
        })
        .await
    }

    #[tool(
        description = "Operator only. Initialize a target at version 0 from fixture bytes whose SHA-256 must match `sha256`. Refuses a target that has history unless `reset` is true."
    )]
    async fn patchdiff_init_target(
        &self,
        Parameters(args): Parameters<InitTargetArgs>,
    ) -> ToolResult {
        answer(async {
            // K8: a language discovery cannot parse would make every observation fail later.
            args.language
                .parse::<Language>()
                .map_err(|e| DomainError::new(DomainCode::UnsupportedLanguage, format!("{e}; nothing was initialized")))?;
            // A regular file within the content cap, read off the async runtime: a FIFO or our
            // own stdin must not block a runtime thread or swallow the MCP stream.
            let fixture = PathBuf::from(&args.fixture);
            let bytes = file_io(
                "fixture read",
                move || crate::owned_fs::read_regular_bounded(&fixture, kernel::MAX_CONTENT_BYTES as u64),
                |e| DomainError::new(
                    DomainCode::FixtureUnreadable,
                    format!(
                        "cannot read fixture {}: {e}; a fixture is a regular file of at most {} bytes",
                        args.fixture,
                        kernel::MAX_CONTENT_BYTES
                    ),
                ),
            )
            .await?;
            self.blocking(move |s| {
                s.init_target(&args.target, &args.language, &bytes, &args.sha256, args.reset)
            })
            .await
            .map(|t| json!({"target": t.name, "version": t.version, "revision": t.revision, "sha256": t.sha256, "language": t.language}))
        })
        .await
    }

    #[tool(
        description = "Operator only. Write the target's latest saved version to `dest` (absolute path, must not exist)."
    )]
    async fn patchdiff_export_target(
        &self,
        Parameters(args): Parameters<ExportTargetArgs>,
    ) -> ToolResult {
        answer(async {
            let dest = PathBuf::from(&args.dest);
            if !dest.is_absolute() {
                return Err(DomainError::new(
                    DomainCode::InvalidDest,
                    format!("`dest` must be an absolute path, got `{}`", args.dest),
                ));
            }
            if let StoreBackend::Sqlite { path } = self.store.backend() {
                refuse_store_paths(&dest, &path)?;
            }
            let target = args.target.clone();
            let saved = self.blocking(move |s| s.saved(&target)).await?;
            let (path, bytes) = (dest.clone(), saved.content.clone().into_bytes());
            file_io(
                "export",
                move || write_export(&path, &bytes),
                |e| {
                    DomainError::new(
                        DomainCode::ExportFailed,
                        format!("cannot write {}: {e}", dest.display()),
                    )
                },
            )
            .await?;
            Ok(json!({
                "target": saved.target, "version": saved.version, "revision": saved.revision,
                "sha256": saved.sha256, "path": dest,
            }))
        })
        .await
    }

    #[tool(
        description = "Operator only. The target's audit: attempts accepted and rejected, receipts, saves, rejections by reason, worker errors by code."
    )]
    async fn patchdiff_audit(&self, Parameters(args): Parameters<TargetArg>) -> ToolResult {
        respond(self.blocking(move |s| s.audit(&args.target)).await)
    }

    #[tool(
        description = "Operator only. The Waymark worker's status (mode, generation, pid, readiness, queue, launches, retirements; null in the workspace profile) and the telemetry status receipt: recording, valid, invalid_reason, memory_sampling_enabled, events_path, memory_path, limits, and live counters (written/dropped events, memory samples)."
    )]
    async fn patchdiff_worker_status(&self, Parameters(_): Parameters<NoArgs>) -> ToolResult {
        let worker = self.waymark.as_ref().map(|w| w.status());
        ok_result(json!({
            "profile": self.profile.as_str(),
            "strict_observation_mode": self.strict,
            "worker": worker,
            "telemetry": self.telemetry,
            "telemetry_counters": self.recorder.stats(),
        }))
    }
}

/// The store's submission for the tool's arguments (M6 shapes; the target travels apart).
fn submission_of(args: SubmitArgs) -> Submission {
    Submission {
        request_key: args.request_key,
        base_revision: args.base_revision,
        expected_sha256: args.expected_sha256,
        operations: args
            .operations
            .into_iter()
            .map(|o| OperationRequest {
                observation_id: o.observation_id,
                old_text: o.old_text,
                new_text: o.new_text,
            })
            .collect(),
    }
}

/// Runs file I/O on a blocking thread, never on the runtime (a FIFO or our own stdin must not
/// stall it). A failed task is `INTERNAL` ("`task` task failed: …"); an I/O error is
/// whatever `refused` makes of it.
async fn file_io<T: Send + 'static>(
    task: &str,
    io: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    refused: impl FnOnce(std::io::Error) -> DomainError,
) -> Result<T, DomainError> {
    tokio::task::spawn_blocking(io)
        .await
        .map_err(|e| DomainError::new(DomainCode::Internal, format!("{task} task failed: {e}")))?
        .map_err(refused)
}

/// Writes an export file exclusively (0600; parents it creates 0700); never overwrites.
fn write_export(dest: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = dest.parent() {
        crate::owned_fs::create_private_dir(parent)?;
    }
    crate::owned_fs::write_new_private(dest, bytes)
}

/// SQLite's own files beside a database: an export named like one of them could be taken for
/// (and deleted as) a hot journal.
const SIDECAR_SUFFIXES: [&str; 3] = ["-journal", "-wal", "-shm"];

/// An export never lands in the store's own directory nor under a sidecar-like name (a hostile `dest`:
/// SQLite deleted such an export).
fn refuse_store_paths(dest: &Path, database: &Path) -> Result<(), DomainError> {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned());
    if let Some(suffix) = name
        .as_deref()
        .and_then(|n| SIDECAR_SUFFIXES.iter().find(|s| n.ends_with(*s)))
    {
        return Err(DomainError::new(
            DomainCode::InvalidDest,
            format!(
                "`dest` {} ends in `{suffix}`, like an SQLite journal file; choose a name not                  ending in -journal, -wal or -shm",
                dest.display()
            ),
        ));
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if let (Some(dest_dir), Some(db_dir)) = (dest.parent(), database.parent())
        && canonical(dest_dir) == canonical(db_dir)
    {
        return Err(DomainError::new(
            DomainCode::InvalidDest,
            format!(
                "`dest` {} is in the database's own directory {}; export to another directory",
                dest.display(),
                db_dir.display()
            ),
        ));
    }
    Ok(())
}

impl PatchdiffServer {
    /// Whether results go to an agent host (observed and workspace profiles) rather than the
    /// operator's own client (full), whose bound is the line limit of its transport.
    fn for_agent(&self) -> bool {
        self.profile != Profile::Full
    }

    /// A result an agent host would not deliver whole
    /// ([`delivery::RESULT_BUDGET_BYTES`]) is never sent to an agent; paging keeps every tool
    /// below it, and one that still grew past it becomes a `RESULT_TOO_LARGE` error naming its
    /// size and what to ask for instead.
    fn deliverable(&self, response: CallToolResponse) -> CallToolResponse {
        let CallToolResponse::Complete(result) = &response else {
            return response;
        };
        if !self.for_agent() || result.is_error == Some(true) {
            return response;
        }
        let text: usize = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len()))
            .sum();
        let size = result
            .structured_content
            .as_ref()
            .map_or(0, delivery::json_len)
            + text;
        if size <= delivery::RESULT_BUDGET_BYTES {
            return response;
        }
        let refused = DomainError::new(
            DomainCode::ResultTooLarge,
            format!(
                "the result is {size} bytes, more than the {} bytes an agent host delivers \
                 whole; ask for less (a smaller `limit`, or pages by `offset`)",
                delivery::RESULT_BUDGET_BYTES
            ),
        );
        domain_error(refused).map_or(response, CallToolResponse::Complete)
    }
}

impl ServerHandler for PatchdiffServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("patchdiff", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "patchdiff {} profile. Observe a scope (patchdiff_observe_scope) before submitting \
                 edits inside it; every submission carries a request_key and gets a receipt; save \
                 when done.",
                self.profile.as_str()
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            result_type: Some(ResultType::COMPLETE),
            tools: self.tool_router.list_all(),
            meta: None,
            next_cursor: None,
            ttl_ms: None,
            cache_scope: None,
        })
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_router.get(name).cloned()
    }

    /// M2: the profile boundary. A tool outside the profile is refused here, before any work,
    /// as a JSON-RPC error naming the profile.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            let known = FULL_ONLY_TOOLS.contains(&request.name.as_ref());
            self.recorder.record(
                crate::telemetry::PerfEvent::point("profile_refusal")
                    .outcome(Outcome::Failed)
                    .id("tool", request.name.to_string())
                    .attr("profile", self.profile.as_str()),
            );
            let (noun, why) = if known {
                ("tool", "it belongs to the trusted full profile")
            } else {
                ("unknown tool", "no such tool exists")
            };
            let message = format!(
                "{noun} `{}` is not available in the {} profile ({why}); available tools: {}",
                request.name,
                self.profile.as_str(),
                profile_tools(self.profile).join(", ")
            );
            return Err(ErrorData::invalid_params(
                message,
                Some(
                    json!({"code": "PROFILE_BOUNDARY", "profile": self.profile.as_str(), "tool": request.name}),
                ),
            ));
        }
        // A3: no tool runs before the console has checked the agent host's seal.
        if let Some(gate) = &self.gate
            && let Err(why) = gate.admit(super::gate::ADMISSION_WAIT).await
        {
            return Err(ErrorData::invalid_request(
                why,
                Some(json!({"code": "NOT_ADMITTED"})),
            ));
        }
        // M5, MCP 2025-11-25 (SEP-1303): arguments that do not fit the tool's input schema are
        // refused before any handler runs, as an `isError` result the model can correct itself
        // from (a JSON-RPC error would reach only the host).
        if let Err(detail) = super::params::validate(&request.name, request.arguments.as_ref()) {
            return domain_error(DomainError::new(
                DomainCode::InvalidArguments,
                format!(
                    "invalid arguments for `{}`: {detail}; see the tool's inputSchema",
                    request.name
                ),
            ))
            .map(CallToolResponse::Complete);
        }
        let mut span = self.recorder.span("mcp_call");
        span.id("tool", request.name.to_string());
        let tcc = ToolCallContext::new(self, request, context);
        let result = self
            .tool_router
            .call(tcc)
            .await
            .map(|r| self.deliverable(r));
        let failed = match &result {
            Ok(CallToolResponse::Complete(r)) => r.is_error == Some(true),
            _ => true,
        };
        span.finish(if failed { Outcome::Failed } else { Outcome::Ok });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(name: &str, kind: &str, lines: (usize, usize)) -> Scope {
        Scope {
            kind: kind.into(),
            name: name.into(),
            start_byte: lines.0 * 10,
            end_byte: lines.1 * 10,
            start_line: lines.0,
            end_line: lines.1,
        }
    }

    /// A name query's answer (the worker returns only the scopes with that name).
    fn answer(name: &str, scopes: &[Scope], names: &[&str]) -> Discovery {
        Discovery {
            scopes: scopes.iter().filter(|s| s.name == name).cloned().collect(),
            parse_ms: 0.0,
            read_ms: 0.0,
            has_error: false,
            error_line: None,
            scope_count: scopes.len(),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        }
    }

    #[test]
    fn a_name_shared_by_two_scopes_is_ambiguous_and_lists_their_lines_and_bytes() {
        let scopes = [
            scope("Temp", "class", (1, 12)),
            scope("Temp.value", "method", (3, 5)),
            scope("Temp.value", "method", (7, 9)),
        ];
        let d = answer("Temp.value", &scopes, &[]);
        let err = resolve_scope(&d, "Temp.value", "t", None).unwrap_err();
        assert_eq!(err.code.as_str(), "AMBIGUOUS_SCOPE");
        assert!(
            err.message.contains(
                "method lines 3–5 bytes 30–50 (start_byte 30), method lines 7–9 bytes 70–90 (start_byte 70)"
            ),
            "{}",
            err.message
        );
        let d = answer("Temp", &scopes, &[]);
        assert_eq!(resolve_scope(&d, "Temp", "t", None).unwrap().start_line, 1);
    }

    #[test]
    fn an_unknown_scope_after_a_parse_error_names_the_line_and_that_lines_still_work() {
        let scopes = [scope("f1", "function", (1, 5))];
        let mut d = answer("f4", &scopes, &["f1"]);
        let plain = resolve_scope(&d, "f4", "t", None).unwrap_err();
        assert_eq!(
            plain.message,
            "no scope named `f4` in target `t`; scopes are: f1"
        );
        d.has_error = true;
        d.error_line = Some(2);
        assert_eq!(
            resolve_scope(&d, "f4", "t", None).unwrap_err().message,
            "no scope named `f4` in target `t`; scopes are: f1; the content does not parse from line 2 (a syntax error), so scopes after it may be missing — observe by `lines` {start, end} instead, which works whatever the parser sees"
        );
        d.error_line = None;
        d.names.clear();
        assert_eq!(
            resolve_scope(&d, "f4", "t", None).unwrap_err().message,
            "no scope named `f4` in target `t`; it has no structural scopes; the content has syntax errors, so some scopes may be missing — observe by `lines` {start, end} instead, which works whatever the parser sees"
        );
    }

    #[test]
    fn find_occurrences_matches_across_line_endings_and_says_so() {
        // As sent: same endings, no line break, or a target without any.
        for (content, text) in [("a\r\nb", "a\r\nb"), ("a\nb", "a"), ("ab", "a\nb")] {
            assert_eq!(match_line_endings(content, text), (text.to_owned(), None));
        }
        let (needle, note) = match_line_endings("x\r\ny\r\n", "x\ny");
        assert_eq!(needle, "x\r\ny");
        assert_eq!(
            note.unwrap(),
            "text used LF line endings and the target uses CRLF: matched with CRLF: send old_text with the target's line endings, as the occurrences' bytes have them"
        );
        let (needle, note) = match_line_endings("x\ny\n", "x\r\ny");
        assert_eq!(needle, "x\ny");
        assert!(note.unwrap().contains("matched with LF"));
        // A mixed target: as sent when that matches, else CRLF, else LF.
        assert_eq!(
            match_line_endings("a\nb\r\nc", "a\nb"),
            ("a\nb".to_owned(), None)
        );
        assert_eq!(match_line_endings("a\nb\r\nc", "b\nc").0, "b\r\nc");
        assert_eq!(match_line_endings("a\r\nb\nc", "b\r\nc").0, "b\nc");
        let (needle, note) = match_line_endings("x\r\ny", "q\nz");
        assert_eq!(needle, "q\nz");
        assert_eq!(
            note.unwrap(),
            "text used LF line endings and the target uses CRLF; it was searched with the target's too and not found"
        );
    }

    #[test]
    fn identical_entries_are_told_apart_by_start_byte() {
        // Minified code: `function lines 2–2` twice.
        let scopes = [scope("f", "function", (2, 2)), {
            let mut s = scope("f", "function", (2, 2));
            s.start_byte = 40;
            s.end_byte = 60;
            s
        }];
        let d = answer("f", &scopes, &[]);
        let err = resolve_scope(&d, "f", "t", None).unwrap_err();
        assert_eq!(err.code.as_str(), "AMBIGUOUS_SCOPE");
        assert!(err.message.contains("bytes 20–20") && err.message.contains("bytes 40–60"));
        assert_eq!(resolve_scope(&d, "f", "t", Some(40)).unwrap().end_byte, 60);
        let err = resolve_scope(&d, "f", "t", Some(41)).unwrap_err();
        assert_eq!(err.code.as_str(), "UNKNOWN_SCOPE");
        assert!(err.message.contains("start_byte 40"), "{}", err.message);
    }

    #[test]
    fn an_unknown_name_lists_the_names_discovery_returned() {
        let scopes = [
            scope("A.b", "method", (1, 2)),
            scope("A.b", "method", (3, 4)),
        ];
        let d = answer("A.c", &scopes, &["A.b"]);
        let err = resolve_scope(&d, "A.c", "t", None).unwrap_err();
        assert_eq!(err.code.as_str(), "UNKNOWN_SCOPE");
        assert!(err.message.contains("scopes are: A.b"), "{}", err.message);
    }
}

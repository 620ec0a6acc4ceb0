//! The MCP server (SPEC M1–M6): tool handlers over the store and the Waymark worker, with the
//! profile boundary enforced before any handler runs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_router};
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

mod advice;
mod domain;
mod files;
mod replicas;
mod scopes;

pub use replicas::REPLICA_TOOLS;

use crate::waymark::{Discovery, DiscoveryError, Language, Scope, ScopeQuery, Waymark};
use domain::*;
use files::*;
use scopes::*;

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
        // R1: only the trusted full profile grants leases; the agent never reaches them.
        tools.extend(REPLICA_TOOLS);
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
    /// A successful result's JSON travels as its text block instead of its structured content
    /// (`PATCHDIFF_MCP_RESULT_TEXT=json`): for hosts that hand the model only text blocks.
    json_text: bool,
    /// The store is a local SQLite file, whose reads [`Self::reading`] runs in place.
    local_store: bool,
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
        let mut tool_router = Self::tool_router() + Self::replica_router();
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
            local_store: matches!(store.backend(), StoreBackend::Sqlite { .. }),
            store,
            waymark,
            recorder,
            telemetry,
            gate: None,
            json_text: false,
            parse_status: Arc::default(),
        }
    }

    /// Holds every tool call until `gate` opens (A3); `None` leaves calls ungated.
    /// With `json_text`, a result's text block is its JSON and it has no structured content
    /// (the content travels once); for hosts that hand the model only the text blocks of a
    /// result (`PATCHDIFF_MCP_RESULT_TEXT=json`, [`delivery::HOST_LIMITS`]).
    pub fn with_json_text(mut self, json_text: bool) -> Self {
        self.json_text = json_text;
        self
    }

    pub fn with_admission_gate(mut self, gate: Option<super::gate::AdmissionGate>) -> Self {
        self.gate = gate.map(Arc::new);
        self
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
    /// outside the target's lock, then the store's validated submission (whose own recovery
    /// comes first, so with a worker already ready the separate one is skipped). A worker that cannot
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
        // W7: the validation below holds the target's lock and so never starts a worker;
        // make sure one is ready first, outside the lock. W8: a failure carries its real
        // code (RESTART_LIMIT, PROTOCOL, SPAWN, STARTUP_TIMEOUT, …), not NOT_READY.
        if let Some(w) = validator.waymark.as_ref().filter(|w| !w.status().ready) {
            // K4: a retry is answered before, and without, discovery capacity. With a ready
            // worker (or none) the store's submission makes this recovery first itself, before
            // the boundary and the validator, so it is not made twice (a round trip on
            // PostgreSQL).
            let (t, sub) = (target.clone(), submission.clone());
            if let Some(receipt) = self.blocking(move |s| s.recover_receipt(&t, &sub)).await? {
                return Ok(receipt);
            }
            if let Err(e) = w.prewarm().await {
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
        }
        self.blocking(move |s| {
            s.submit_validated(&target, &submission, strict, &|language, content| {
                validator.validate(language, content)
            })
        })
        .await
    }
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
        answer_value(async {
            let t = self.reading(move |s| s.read_target(&args.target)).await?;
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
        answer_value(async {
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
        let submission = submission_of(args);
        // Kept to name where a near miss is, should the submission be rejected for one.
        let old_texts: Vec<String> = submission
            .operations
            .iter()
            .map(|o| o.old_text.clone())
            .collect();
        let outcome = self
            .submit_validated(target.clone(), submission, validator)
            .await;
        // W8: a worker error during validation is recorded against the target's audit.
        if let Some(e) = worker_error.lock().ok().and_then(|mut g| g.take()) {
            let (t, c, m) = (target, e.code.as_str().to_owned(), e.message);
            let _ = self
                .blocking(move |s| s.record_worker_error(&t, &c, &m))
                .await;
        }
        match outcome {
            Ok(mut receipt) => {
                let accepted = receipt.outcome == crate::store::Outcome::Accepted;
                if !accepted {
                    self.name_near_miss_scopes(&mut receipt, &old_texts).await;
                }
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
        let response = self.as_json_text(response);
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

impl PatchdiffServer {
    /// With [`PatchdiffServer::with_json_text`], a success's structured content becomes its one
    /// text block, and an error (whose text block already is its JSON) loses its structured
    /// copy: Gemini CLI hands the model the whole of an error result, so the copy was sent twice.
    fn as_json_text(&self, response: CallToolResponse) -> CallToolResponse {
        match response {
            CallToolResponse::Complete(mut result) if self.json_text => {
                let structured = result.structured_content.take();
                if let (Some(structured), false) = (structured, result.is_error == Some(true)) {
                    result.content = vec![ContentBlock::text(structured.to_string())];
                }
                CallToolResponse::Complete(result)
            }
            other => other,
        }
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

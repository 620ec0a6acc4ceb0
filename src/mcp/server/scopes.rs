//! Observations and validation against discovery (K2, W7, W8): resolving a named scope, a scope
//! at a byte or a line range on the current revision, and the post-edit validation of
//! submissions; the pages `read_target` returns and receipts' views.

use super::*;

impl PatchdiffServer {
    /// One observation attempt (K2): read the current revision, resolve the range (a discovery
    /// answering only the question asked: the named scope, or the scope of a byte), record the
    /// observation at that revision. The result adds `parses_cleanly` (null when unknown).
    pub(super) async fn observe_once(&self, args: &ObserveScopeArgs) -> Result<Value, DomainError> {
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
    pub(super) async fn range_of_named_scope(
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
    pub(super) async fn range_of_scope_at(
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
    pub(super) async fn range_of_lines(
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
    pub(super) async fn parses_cleanly(
        &self,
        language: &str,
        sha256: &str,
        content: &str,
    ) -> Option<bool> {
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
    pub(super) async fn discover(
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
pub(super) struct SubmissionValidator {
    pub(super) waymark: Option<Waymark>,
    pub(super) runtime: tokio::runtime::Handle,
    /// The worker error that made validation unavailable, for the audit.
    pub(super) worker_error: Arc<std::sync::Mutex<Option<crate::waymark::WorkerError>>>,
    /// Where what validation learnt about parse status goes (reads then need no parse).
    pub(super) parse_status: ParseStatus,
}

impl SubmissionValidator {
    pub(super) fn validate(&self, language: &str, content: &str) -> Validation {
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
pub(super) fn observe_range(s: &Scope) -> ObserveRange {
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
pub(super) fn resolve_scope<'a>(
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

pub(super) fn unknown_scope(found: &Discovery, name: &str, target: &str) -> DomainError {
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
pub(super) fn match_line_endings(content: &str, text: &str) -> (String, Option<String>) {
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
pub(super) fn read_page(
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
    // 1-based lines as `kernel::position_of` counts them (one more than the newlines before),
    // counted once up to the page and once across it, not twice from the start.
    let newlines = |bytes: &[u8]| bytes.iter().filter(|&&b| b == b'\n').count();
    let has_more = end < total;
    page["next_offset"] = if has_more { json!(end) } else { Value::Null };
    page["has_more"] = json!(has_more);
    let start_line = 1 + newlines(&t.content.as_bytes()[..offset]);
    page["start_line"] = json!(start_line);
    // The line holding the page's last byte.
    let last = t.content[offset..end]
        .char_indices()
        .next_back()
        .map_or(offset, |(i, _)| offset + i);
    page["end_line"] = json!(start_line + newlines(&t.content.as_bytes()[offset..last]));
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
pub(super) fn bound_observed_text(mut value: Value) -> Value {
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
pub(super) fn receipt_view(receipt: &crate::store::Receipt) -> Result<Value, ErrorData> {
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
pub(super) fn innermost_scope(scopes: &[Scope], start: usize, end: usize) -> Option<&Scope> {
    scopes
        .iter()
        .filter(|s| s.start_byte <= start && end <= s.end_byte)
        .min_by_key(|s| s.end_byte - s.start_byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(start: usize, text: &str) -> Value {
        json!({
            "observation_id": "obs-1",
            "revision": 3,
            "scope": {"name": "big", "start_byte": start, "end_byte": start + text.len()},
            "text": text,
        })
    }

    /// M6: an observed scope that would not fit one result keeps its first page, says it is
    /// incomplete, and names the `read_target` offset where the rest starts; the result fits the
    /// budget a host delivers whole.
    #[test]
    fn an_observed_scope_too_large_for_one_result_keeps_its_first_page_and_says_where_the_rest_is()
    {
        let text: String = (0..4000)
            .map(|i| format!("    let v{i} = \"é{i}\";\n"))
            .collect();
        assert!(text.len() > 3 * delivery::RESULT_BUDGET_BYTES);
        let bounded = bound_observed_text(observed(1000, &text));
        let shown = bounded["text"].as_str().unwrap();
        assert!(!shown.is_empty() && text.starts_with(shown));
        assert!(shown.ends_with('\n'), "a page ends at a line end");
        assert_eq!(bounded["text_complete"], false);
        assert_eq!(bounded["text_bytes"], text.len());
        let rest = format!("patchdiff_read_target offset={}", 1000 + shown.len());
        let how = bounded["how_to_continue"].as_str().unwrap();
        assert!(how.contains(&rest), "{how}");
        assert!(delivery::json_len(&bounded) <= delivery::RESULT_BUDGET_BYTES);
        assert_eq!(bounded["observation_id"], "obs-1");
    }

    #[test]
    fn an_observed_scope_that_fits_is_left_whole_with_no_continuation() {
        let text = "def f():\n    return 1\n";
        let bounded = bound_observed_text(observed(10, text));
        assert_eq!(bounded, observed(10, text));
    }
}

//! What an agent host delivers of a tool result, and how every result is shaped to fit it, so
//! that nothing between the agent and the edit backend fails the agent for reasons of ours.
//!
//! A host does not hand the model whatever the server answers: Claude Code replaces a long
//! result by a note pointing at a file the sealed agent cannot read and cuts the middle out of
//! a long error, Codex cuts the middle out of any result past its configured size, Gemini CLI
//! keeps the ends of one past 40,000 characters, and opencode replaces one past 51,200 bytes by
//! a note. Each hands the model a different part of a result (structured content or text
//! blocks). [`HOST_LIMITS`] is the one table of what each supported host delivers, with where
//! it was measured; [`RESULT_BUDGET_BYTES`] and [`ERROR_BUDGET_BYTES`] follow from its smallest
//! entries, and every result of this server is built to stay within them:
//!
//! - `read_target` and `find_occurrences` page (`offset`, `next_offset`, `has_more`, `total`),
//!   and a page that stops early says how to get the rest (`how_to_continue`);
//! - content travels once: a successful result is its structured content, with a one-line
//!   summary of its ids as the text block, never a second copy (see [`summary_of`]), for the
//!   hosts that hand the model the structured content (Claude Code, Codex); an error (at most
//!   [`ERROR_BUDGET_BYTES`]) is its JSON as the text block, because that is all Claude Code
//!   hands the model of an `isError` result, and also its structured content, which is what
//!   Codex hands on. For the hosts that hand the model only text blocks (Gemini CLI, opencode)
//!   the sealed server runs with `PATCHDIFF_MCP_RESULT_TEXT=json`: a result is its JSON as its
//!   one text block, with no structured content;
//! - the ids an agent needs come first ([`ids_first`]; serde_json's `preserve_order` keeps the
//!   order on the wire), so a cut, if any host makes one, takes the tail and not the ids;
//! - a rejection lists at most [`REASONS_LISTED`] reasons in full and summarises the rest
//!   ([`bounded_reasons`]).
//!
//! Sizes are counted in bytes of the serialized JSON, escapes included. A host counts characters
//! (JavaScript string length, UTF-16 units: Claude Code, Gemini CLI) or UTF-8 bytes (Codex,
//! opencode) of what it hands on; a UTF-8 byte count is never smaller than the UTF-16 length of
//! the same text, so a byte bound holds for both.

use serde_json::{Map, Value, json};

/// One supported host's delivery limits for MCP tool results, as measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimit {
    /// The host and the version measured.
    pub host: &'static str,
    /// What of a successful result and of an `isError` result the host hands the model.
    pub hands_the_model: &'static str,
    /// Largest successful result, in characters of what the host hands on (the structured
    /// content's JSON, or the text blocks), that reached the model whole — with the host's
    /// own additions counted in its limit already taken off, and under the sealed host's
    /// configuration ([`HostLimit::larger_limit`]).
    pub result_whole_chars: usize,
    /// Largest `isError` result that reached the model whole, likewise; where no cut was seen
    /// this is the largest size tried.
    pub error_whole_chars: usize,
    /// What the host does with a larger result, and how it marks it.
    pub past_the_limit: &'static str,
    /// How a tool or an operator may declare a larger limit, and what the sealed host gets.
    pub larger_limit: &'static str,
    /// Where and how the figures were measured.
    pub measured: &'static str,
}

/// Each supported agent host's delivery limits, measured. The budgets below follow from the
/// smallest figures here (tested: `the_budgets_follow_from_the_smallest_entries_of_the_table`).
/// Sizes tried for the three measured 2026-12-03: results of 10,000, 40,000, 100,000, 400,000
/// and 1,000,000 characters, on success and as `isError`, through text blocks and through
/// structured content, then the sizes around each limit, from a stdio server whose content is
/// position marks (so a cut shows where it falls), the host run sealed as the console runs it,
/// offline against `scripted-model --requests` on loopback, whose log holds each tool result
/// as the host sent it to the model.
pub const HOST_LIMITS: [HostLimit; 4] = [
    HostLimit {
        host: "Claude Code 2.1.328",
        hands_the_model: "on success only the structured content; on isError only the text \
                          blocks",
        result_whole_chars: 39_000,
        error_whole_chars: 10_000,
        past_the_limit: "a result of 95,000 characters or more is replaced by `Error: result (N \
                         characters) exceeds maximum allowed tokens. Output has been saved to …` \
                         (a file the sealed agent cannot read); a longer isError result keeps its \
                         first and last 5,000 characters around `... [N characters truncated] ...`",
        larger_limit: "the MAX_MCP_OUTPUT_TOKENS environment variable of the host (tokens, \
                       default 25,000) and a tool's `_meta[\"anthropic/maxResultSizeChars\"]`; \
                       the sealed host gets MAX_MCP_OUTPUT_TOKENS at that default from us whatever \
                       the operator set (canary::host::host_limit_env) and no tool declares more, \
                       so the defaults hold",
        measured: "the real CLI offline against scripted-model on loopback (tests/canary/agent_host.rs, \
                   tests/canary/host_delivery.rs; /work/shared/FACTS.md 2026-12-01): results of 95,000 \
                   to 103,000 characters were replaced, 39,000 passed; the isError cut and what the \
                   model is handed: tests/canary/host_delivery.rs, 2026-12-02",
    },
    HostLimit {
        host: "Codex 0.169.0",
        hands_the_model: "the structured content's JSON when there is one (success and isError \
                          alike; the text blocks are dropped), else the text blocks; after its own \
                          `Wall time: S seconds\\nOutput:\\n` line",
        // 48,000 bytes of output with its ~34-character `Wall time` line counted in them.
        result_whole_chars: 47_960,
        error_whole_chars: 47_960,
        past_the_limit: "a longer output (its `Wall time` line included) keeps its first and last \
                         halves of the limit around `…N tokens truncated…`: 6,000 + 6,000 bytes \
                         by default, 24,000 + 24,000 as sealed; nothing marks the result as cut \
                         otherwise",
        larger_limit: "the top-level `tool_output_token_limit` of config.toml (host-wide, for \
                       every tool): a model outside Codex's own catalog (gpt-5-codex here) keeps \
                       12,000 bytes by default, 1.2 × 4 bytes per token of the setting with it \
                       (30,000 tokens: 144,000 bytes); the catalog's models default to 10,000 \
                       tokens. The sealed host's config.toml declares 10,000 tokens \
                       (canary::host::codex::CODEX_TOOL_OUTPUT_TOKEN_LIMIT), so every model \
                       gets 48,000 bytes",
        measured: "the real CLI (`exec --json`, sealed) offline against scripted-model on \
                   loopback, 2026-12-03: by default a 10,000-character result whole, 40,000 to \
                   1,000,000 cut to 12,000 bytes, the limit between 11,900 and 11,950 characters \
                   of structured content; with tool_output_token_limit = 10000 results of 47,940 \
                   characters whole and 48,000 cut, an isError result of 32,768 whole; the \
                   whole-result test is tests/canary/host_delivery_more.rs",
    },
    HostLimit {
        host: "Gemini CLI 0.61.0",
        hands_the_model: "on success only the text blocks, wrapped in `<untrusted_context>` \
                          (structured content alone reaches it as an empty response); on isError \
                          an error message holding the call's arguments and the whole result as \
                          JSON (text blocks and structured content)",
        // 40,000 characters with the 41 of its `<untrusted_context>` wrapper counted in them.
        result_whole_chars: 39_959,
        error_whole_chars: 1_000_000,
        past_the_limit: "a result of one text block longer than the threshold keeps its first 20 % \
                         and last 80 % after `Output too large. Showing first 8,000 and last \
                         32,000 characters. For full output see: <file>` and around `... [N \
                         characters omitted] ...`; the threshold shrinks to 4 characters per \
                         token of context left when less than 10,000 tokens are left, and a \
                         compressed history cuts results past 50,000 tokens in all; an isError \
                         result was never cut",
        larger_limit: "the `tools.truncateToolOutputThreshold` setting (characters, default \
                       40,000; 0 or less disables the cut): with 300,000 a 100,000-character \
                       result was whole. The sealed host reads only our settings.json (the \
                       system files are paths that do not exist), which leaves the default",
        measured: "the real CLI (`--output-format stream-json`, sealed) offline against \
                   scripted-model on loopback, 2026-12-03: a 10,000-character text block whole, \
                   40,000 to 1,000,000 cut; 39,950 characters whole, 39,990 cut; isError results \
                   up to 1,000,000 characters whole; the threshold's code is \
                   `getTruncateToolOutputThreshold` and `truncateOutputIfNeeded` in its bundle; \
                   the whole-result test is tests/canary/host_delivery_more.rs",
    },
    HostLimit {
        host: "opencode 1.18.33",
        hands_the_model: "the text blocks (the structured content only when there is no text \
                          block, as its JSON, and not at all for an isError result, which then \
                          reads `MCP tool returned an error`)",
        result_whole_chars: 51_200,
        error_whole_chars: 1_000_000,
        past_the_limit: "a successful result over 51,200 bytes (UTF-8) or 2,000 lines keeps the \
                         whole lines that fit — none of a one-line JSON result — then `...N bytes \
                         truncated...` and `The tool call succeeded but the output was truncated. \
                         Full output saved to: <file>`; an isError result was never cut",
        larger_limit: "the `tool_output.max_bytes` and `tool_output.max_lines` of opencode.json \
                       (host-wide): with max_bytes 300,000 a 100,000-character result was whole. \
                       The sealed host reads only our opencode.json (project configuration off), \
                       which leaves the defaults",
        measured: "the real CLI (`run --format json`, sealed) offline against scripted-model on \
                   loopback, 2026-12-03: text blocks of 10,000 and 40,000 characters whole, \
                   100,000 to 1,000,000 replaced; 51,200 bytes whole, 51,210 replaced; isError \
                   results up to 1,000,000 whole; the limits are `Truncate` (MAX_BYTES 51200, \
                   MAX_LINES 2000) in its binary; the whole-result test is \
                   tests/canary/host_delivery_more.rs",
    },
];

/// Most bytes of serialized JSON (structured content plus text blocks) a successful result
/// carries: 32 KiB, below the smallest [`HostLimit::result_whole_chars`] of [`HOST_LIMITS`]
/// (Claude Code's 39,000). Pages are cut to fit it.
pub const RESULT_BUDGET_BYTES: usize = 32 * 1024;

/// Most bytes of serialized JSON an `isError` result carries: 9,000, below the smallest
/// [`HostLimit::error_whole_chars`] of [`HOST_LIMITS`] (the first and last 5,000 characters
/// Claude Code keeps of a long error).
pub const ERROR_BUDGET_BYTES: usize = 9_000;

/// Reasons a rejection lists in full; the rest are counted by code in `reasons_omitted`.
pub const REASONS_LISTED: usize = 8;

/// Longest single reason kept in full, in bytes; longer ones are cut at a character boundary.
pub const REASON_BYTES: usize = 600;

/// Longest one-line text summary, in bytes.
pub const SUMMARY_BYTES: usize = 300;

/// What a page leaves free beside its envelope for the fields added after it is cut (line
/// numbers, `next_offset`, `how_to_continue`) and the text block's summary, in bytes.
pub const PAGE_RESERVE_BYTES: usize = SUMMARY_BYTES + 400;

/// The ids an agent needs, in the order every result leads with them.
pub const IDS: [&str; 5] = [
    "revision",
    "sha256",
    "request_key",
    "observation_id",
    "outcome",
];

/// Bytes `text` takes inside a JSON string as serde_json writes it: `"` and `\` take 2,
/// `\n`, `\t`, `\r`, `\b`, `\f` take 2, the other control characters 6 (`\u0001`), everything
/// else its UTF-8 bytes.
pub fn escaped_len(text: &[u8]) -> usize {
    // A table lookup per byte, summed in one pass the compiler vectorizes (pages are 32 KiB).
    text.iter()
        .map(|&b| usize::from(ESCAPED_LEN[usize::from(b)]))
        .sum()
}

/// [`escaped_byte_len`] of every byte value.
const ESCAPED_LEN: [u8; 256] = {
    let mut table = [1u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = escaped_byte_len(b as u8) as u8;
        b += 1;
    }
    table
};

const fn escaped_byte_len(b: u8) -> usize {
    match b {
        b'"' | b'\\' | b'\n' | b'\t' | b'\r' | 0x08 | 0x0c => 2,
        0x00..=0x1f => 6,
        _ => 1,
    }
}

/// Serialized size of `value` in bytes, exactly as serde_json's compact writer would write it,
/// computed without writing it: strings by [`escaped_len`] (one vectorized pass), numbers by
/// their display (serde_json writes numbers as they display). A result's size check so costs
/// a fraction of a second serialization, and no copy of its content.
pub fn json_len(value: &Value) -> usize {
    let separators = |n: usize| n.saturating_sub(1);
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => 2 + escaped_len(s.as_bytes()),
        Value::Array(items) => {
            2 + separators(items.len()) + items.iter().map(json_len).sum::<usize>()
        }
        Value::Object(map) => {
            2 + separators(map.len())
                + map
                    .iter()
                    .map(|(k, v)| 2 + escaped_len(k.as_bytes()) + 1 + json_len(v))
                    .sum::<usize>()
        }
    }
}

/// `value` with [`IDS`] moved to the front of its top-level object (in that order), the other
/// fields after them in their order. Anything but an object is returned unchanged.
pub fn ids_first(value: Value) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    let mut ordered = Map::with_capacity(map.len());
    for id in IDS {
        if let Some(v) = map.shift_remove(id) {
            ordered.insert(id.to_owned(), v);
        }
    }
    ordered.extend(map);
    Value::Object(ordered)
}

/// The one-line text block beside a result's structured content: its ids and, for a page, where
/// the next one starts — never a copy of the content (which travels once, in the structured
/// content). At most [`SUMMARY_BYTES`].
pub fn summary_of(value: &Value) -> String {
    let mut parts: Vec<String> = IDS
        .iter()
        .filter_map(|id| value.get(*id).map(|v| format!("{id} {}", plain(v))))
        .collect();
    if value.get("has_more") == Some(&Value::Bool(true)) {
        match value
            .get("next_offset")
            .or_else(|| value.get("next_cursor"))
        {
            Some(next) => parts.push(format!("has_more: call again from {}", plain(next))),
            None => parts.push("has_more".to_owned()),
        }
    }
    if parts.is_empty() {
        parts.push("ok".to_owned());
    }
    cut(
        &format!("{}; the result is the structured content", parts.join(", ")),
        SUMMARY_BYTES,
    )
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` cut to at most `max` bytes at a character boundary, ending in `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The end of the page of `content` that starts at byte `offset`: as much as fits in
/// `budget` bytes of JSON string (escapes counted) and `max_bytes` raw bytes, ending after the
/// last newline it holds when it stops early (so pages end at line ends, unless one line alone
/// is longer than a page), always at a character boundary, and never empty while content
/// remains. `offset` must be a character boundary.
pub fn page_end(content: &str, offset: usize, budget: usize, max_bytes: usize) -> usize {
    let bytes = content.as_bytes();
    // The common case, the rest fits whole: one vectorized pass instead of the byte loop.
    let rest = &bytes[offset..];
    if rest.len() <= max_bytes && rest.len() <= budget && escaped_len(rest) <= budget {
        return bytes.len();
    }
    let mut used = 0;
    let mut end = offset;
    while end < bytes.len() && end - offset < max_bytes {
        let add = usize::from(ESCAPED_LEN[usize::from(bytes[end])]);
        if used + add > budget {
            break;
        }
        used += add;
        end += 1;
    }
    if end < bytes.len() {
        if let Some(nl) = bytes[offset..end].iter().rposition(|&b| b == b'\n') {
            end = offset + nl + 1;
        }
        while end > offset && !content.is_char_boundary(end) {
            end -= 1;
        }
        if end == offset {
            // One character wider than the budget cannot happen (at most 6 bytes); take it.
            end = offset + content[offset..].chars().next().map_or(0, char::len_utf8);
        }
    }
    end
}

/// A rejection's reasons bounded for delivery: the first `listed` (at most
/// [`REASONS_LISTED`]), each cut to [`REASON_BYTES`], and — when more were given — a summary of
/// the rest counted by code, e.g. `56 more not listed: 50 OLD_TEXT_NOT_FOUND, 6
/// OBSERVATION_STALE (reasons 9–64)`.
pub fn bounded_reasons(
    reasons: &[String],
    codes: &[String],
    listed: usize,
) -> (Vec<String>, Option<String>) {
    let shown = listed.min(REASONS_LISTED).min(reasons.len());
    let listed = reasons
        .iter()
        .take(shown)
        .map(|r| cut(r, REASON_BYTES))
        .collect();
    if reasons.len() <= shown {
        return (listed, None);
    }
    let rest = &codes[shown.min(codes.len())..];
    let mut counted: Vec<(String, usize)> = Vec::new();
    for code in rest {
        match counted.iter_mut().find(|(c, _)| c == code) {
            Some((_, n)) => *n += 1,
            None => counted.push((code.clone(), 1)),
        }
    }
    let by_code = counted
        .iter()
        .map(|(c, n)| format!("{n} {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let omitted = reasons.len() - shown;
    let summary = if by_code.is_empty() {
        format!("{omitted} more reasons not listed")
    } else {
        format!(
            "{omitted} more not listed: {by_code} (reasons {}–{}); fix the listed ones and submit again to see the rest",
            shown + 1,
            reasons.len()
        )
    };
    (listed, Some(cut(&summary, 2 * REASON_BYTES)))
}

/// The structured content of an `isError` domain failure, `{"error": {code, message}}`, with
/// the message cut so the whole stays within [`ERROR_BUDGET_BYTES`] (escapes counted).
pub fn error_value(code: &str, message: &str) -> Value {
    let mut message = message.to_owned();
    loop {
        let value = json!({ "error": { "code": code, "message": message } });
        let size = json_len(&value);
        if size <= ERROR_BUDGET_BYTES || message.is_empty() {
            return value;
        }
        // Each byte cut may have taken up to 6 bytes escaped: cut at least the excess.
        let keep = message.len().saturating_sub(size - ERROR_BUDGET_BYTES + 8);
        message = cut(&message, keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budgets follow from the table: within its smallest entries, so every host gets every
    /// result whole, and not far below them (a host whose limit grew, or a lower one, moves it).
    #[test]
    fn the_budgets_follow_from_the_smallest_entries_of_the_table() {
        let result = HOST_LIMITS.iter().map(|h| h.result_whole_chars).min();
        let error = HOST_LIMITS.iter().map(|h| h.error_whole_chars).min();
        let (result, error) = (result.unwrap(), error.unwrap());
        assert!(
            RESULT_BUDGET_BYTES <= result,
            "{RESULT_BUDGET_BYTES} > {result}"
        );
        assert!(
            ERROR_BUDGET_BYTES <= error,
            "{ERROR_BUDGET_BYTES} > {error}"
        );
        assert!(
            RESULT_BUDGET_BYTES * 5 >= result * 4,
            "{RESULT_BUDGET_BYTES} ≪ {result}"
        );
        assert!(
            ERROR_BUDGET_BYTES * 5 >= error * 4,
            "{ERROR_BUDGET_BYTES} ≪ {error}"
        );
        // One entry per supported host.
        for host in ["Claude Code", "Codex", "Gemini CLI", "opencode"] {
            let n = HOST_LIMITS
                .iter()
                .filter(|h| h.host.starts_with(host))
                .count();
            assert_eq!(n, 1, "{host}");
        }
    }

    #[test]
    fn escaped_len_counts_json_escapes() {
        let text = "a\"\\\n\u{1}é";
        assert_eq!(
            escaped_len(text.as_bytes()),
            serde_json::to_string(text).unwrap().len() - 2
        );
        let controls = "\u{1}".repeat(100);
        assert_eq!(escaped_len(controls.as_bytes()), 600);
    }

    #[test]
    fn json_len_is_the_serialized_size() {
        let values = [
            json!({"content": "a\"\\\n\t\r\u{8}\u{c}\u{1}\u{1f}\u{7f}é😀", "n": [1, null, true, false]}),
            json!({"k\"ey\u{2}": {"x": 1.5, "y": -0.0, "z": 1e300, "w": u64::MAX, "v": i64::MIN}}),
            json!([]),
            json!({}),
            json!([[], {}, "", 0, 2.5e-8]),
            json!(null),
        ];
        for v in values {
            assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len(), "{v}");
        }
    }

    #[test]
    fn a_rest_that_fits_ends_the_page_at_the_end_and_one_that_does_not_is_cut() {
        let content = "ab\ncd\n\"q\"";
        // Escaped, the whole is 13 bytes: it fits 13 and not 12.
        assert_eq!(escaped_len(content.as_bytes()), 13);
        assert_eq!(page_end(content, 0, 13, usize::MAX), content.len());
        assert_eq!(page_end(content, 0, 12, usize::MAX), 6);
        assert_eq!(page_end(content, 3, 9, usize::MAX), content.len());
        assert_eq!(page_end(content, 0, 100, content.len() - 1), 6);
    }

    #[test]
    fn ids_lead_in_the_listed_order() {
        let v = json!({"reasons": ["x"], "attempt_id": "a", "sha256": "s", "revision": 3, "request_key": "k", "outcome": "rejected"});
        let keys: Vec<String> = ids_first(v).as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "revision",
                "sha256",
                "request_key",
                "outcome",
                "reasons",
                "attempt_id"
            ]
        );
    }

    #[test]
    fn a_page_ends_after_a_newline_within_the_budget_and_on_a_char_boundary() {
        let content = "ab\ncd\nef";
        assert_eq!(page_end(content, 0, 7, usize::MAX), 3);
        assert_eq!(page_end(content, 0, 8, usize::MAX), 6);
        assert_eq!(page_end(content, 0, 100, usize::MAX), content.len());
        assert_eq!(page_end(content, 0, 100, 4), 3);
        let long = "é".repeat(10);
        let end = page_end(&long, 0, 5, usize::MAX);
        assert_eq!(end, 4);
        assert!(long.is_char_boundary(end));
        // Control characters count six bytes each.
        let controls = "\u{1}".repeat(10);
        assert_eq!(page_end(&controls, 0, 30, usize::MAX), 5);
    }

    #[test]
    fn sixty_four_reasons_list_eight_and_count_the_rest_by_code() {
        let reasons: Vec<String> = (1..=64)
            .map(|i| format!("operation {i}: old_text not found"))
            .collect();
        let codes: Vec<String> = (1..=64)
            .map(|i| {
                if i % 2 == 0 {
                    "OLD_TEXT_NOT_FOUND"
                } else {
                    "OBSERVATION_STALE"
                }
                .to_owned()
            })
            .collect();
        let (listed, rest) = bounded_reasons(&reasons, &codes, REASONS_LISTED);
        assert_eq!(listed.len(), REASONS_LISTED);
        let rest = rest.unwrap();
        assert!(
            rest.starts_with(
                "56 more not listed: 28 OBSERVATION_STALE, 28 OLD_TEXT_NOT_FOUND (reasons 9–64)"
            ),
            "{rest}"
        );
    }
}

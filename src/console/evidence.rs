//! The evidence viewer (SPEC U2, E1): MCP request/result wire logs and the agent transcript,
//! read by byte offset so a log of any size opens instantly — only the lines on screen are read
//! (seek forward from an offset, or backward from the end for follow mode). Search scans forward
//! in a bounded stream; the detail view pretty-prints one message.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use super::logread::{
    LogLine, MAX_VIEW_LINE, find_matches, read_backward, read_forward, search_forward,
};

/// Most bytes one search or filtered scroll scans before giving up (bytes).
pub const MAX_SCAN_BYTES: u64 = 512 * 1024 * 1024;
/// Lines kept in the on-screen window.
pub const WINDOW_CAPACITY: usize = 256;
/// Tool names remembered per log for the filter cycle, and request keys remembered per log for
/// result lines.
const TOOLS_CAPACITY: usize = 256;
const KEYS_CAPACITY: usize = 1 << 16;
/// Most search matches remembered (their line offsets) for `match k of n`.
const MATCHES_CAPACITY: usize = 100_000;

/// `HH:MM:SS.mmm` (UTC) of a Unix-ms timestamp.
pub fn clock(ts_ms: f64) -> String {
    if !ts_ms.is_finite() || ts_ms < 0.0 {
        return "--:--:--.---".into();
    }
    let ms = ts_ms as u64;
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600 % 24,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// Parses one log line. A wire record carries the message's exact bytes in `raw` (E1); it is
/// parsed into `message` here so summaries and the detail view read one shape.
pub fn parse_line(line: &str) -> Option<Value> {
    let mut v = serde_json::from_str::<Value>(line).ok()?;
    if let Some(raw) = v.get("raw").and_then(Value::as_str)
        && v.get("message").is_none()
    {
        let message =
            serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
        if let Value::Object(map) = &mut v {
            map.insert("message".to_owned(), message);
        }
    }
    Some(v)
}

/// The tool a log line is about: `params.name` of a `tools/call` request, or the transcript's
/// `tool` field.
fn tool_of(v: &Value) -> Option<&str> {
    v.pointer("/message/params/name")
        .or_else(|| v.get("tool"))
        .and_then(Value::as_str)
}

/// The key pairing a result with its request: a wire record's [`crate::evidence::ExchangeKey`]
/// (the logging process with the JSON-RPC `id`, as every wire-log reader pairs them), the id
/// alone for a line without a process, or the transcript's `step`.
fn key_of(v: &Value) -> Option<String> {
    let Some(message) = v.get("message").filter(|m| m.get("id").is_some()) else {
        return v.get("step").map(|k| k.to_string());
    };
    match v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) {
        Some(pid) => crate::evidence::ExchangeKey::of(pid, message).map(|k| k.to_string()),
        None => message.get("id").map(Value::to_string),
    }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Notable result fields, compact.
fn result_fields(structured: &Value) -> String {
    const FIELDS: [&str; 8] = [
        "outcome",
        "target",
        "version",
        "revision",
        "observation_id",
        "request_key",
        "has_more",
        "sha256",
    ];
    let mut parts = Vec::new();
    for f in FIELDS {
        if let Some(v) = structured.get(f) {
            let v = match v {
                Value::String(s) if f == "sha256" => short(s, 9),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            parts.push(format!("{f} {v}"));
        }
    }
    if let Some(reasons) = structured.get("reasons").and_then(Value::as_array)
        && !reasons.is_empty()
    {
        parts.push(format!("{} reasons", reasons.len()));
    }
    parts.join(" · ")
}

/// One-line summary of a wire-log or transcript line. `tools` maps request keys to tool names
/// so result lines can name their tool.
pub fn summarize(line: &str, tools: &HashMap<String, String>) -> (String, Option<String>) {
    let Some(v) = parse_line(line) else {
        return (format!("(not JSON) {}", short(line, 120)), None);
    };
    // A4: a line of an agent host's own event stream (`agent.<host>.jsonl`).
    if let Some(summary) = crate::canary::host::stream_line_summary(&v) {
        return (summary, None);
    }
    if let Some(summary) = perf_event_summary(&v) {
        return (summary, None);
    }
    let ts = v
        .get("ts_ms")
        .and_then(Value::as_f64)
        .map_or_else(|| "--:--:--.---".to_owned(), clock);
    let key = key_of(&v);
    let tool = tool_of(&v)
        .map(str::to_owned)
        .or_else(|| key.as_ref().and_then(|k| tools.get(k).cloned()));
    let text = match v.get("message") {
        Some(msg) => wire_summary(&v, msg, tool.as_deref()),
        None => transcript_summary(&v, tool.as_deref()).unwrap_or_else(|| short(line, 120)),
    };
    (
        format!(
            "{ts} {}",
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        ),
        tool,
    )
}

/// A perf-event line (T4): `clock name duration outcome ids`; `None` for other lines.
fn perf_event_summary(v: &Value) -> Option<String> {
    let name = v.get("name").and_then(Value::as_str)?;
    let start = v.get("start_ms").and_then(Value::as_f64)?;
    let duration = v.get("duration_ms").and_then(Value::as_f64).unwrap_or(0.0);
    let outcome = v.get("outcome").and_then(Value::as_str).unwrap_or("?");
    let ids = v
        .get("ids")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let line = format!("{} {name} {duration:.2} ms {outcome} {ids}", clock(start));
    Some(line.trim_end().to_owned())
}

/// A wire-log record `{ts_ms, direction, message}`: the request (method, tool, target, scope),
/// an error, or the result's fields.
fn wire_summary(v: &Value, msg: &Value, tool: Option<&str>) -> String {
    let dir = v.get("direction").and_then(Value::as_str).unwrap_or("");
    if dir == "request" {
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("?");
        let args = msg.pointer("/params/arguments");
        let arg = |name: &str| {
            args.and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let (target, scope) = (arg("target"), arg("scope"));
        format!("→ {method} {} {target} {scope}", tool_of(v).unwrap_or(""))
    } else if let Some(err) = msg.get("error") {
        format!(
            "← error {}",
            short(
                err.get("message").and_then(Value::as_str).unwrap_or("?"),
                100
            )
        )
    } else {
        let result = msg.get("result").unwrap_or(&Value::Null);
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        let structured = result.get("structuredContent").unwrap_or(&Value::Null);
        format!(
            "← {} {} {}",
            if is_error { "isError" } else { "ok" },
            tool.unwrap_or(""),
            result_fields(structured)
        )
    }
}

/// A transcript record `{ts_ms, role, step, tool, arguments | structured, is_error}`; `None`
/// without a role.
fn transcript_summary(v: &Value, tool: Option<&str>) -> Option<String> {
    Some(match v.get("role").and_then(Value::as_str)? {
        "agent" => format!(
            "→ {} {} (step {})",
            tool.unwrap_or("?"),
            v.pointer("/arguments/target")
                .and_then(Value::as_str)
                .unwrap_or(""),
            v.get("step").and_then(Value::as_str).unwrap_or("?")
        ),
        role => format!(
            "← {role} {} {} {}",
            if v.get("is_error").and_then(Value::as_bool) == Some(true) {
                "isError"
            } else {
                "ok"
            },
            tool.unwrap_or(""),
            result_fields(v.get("structured").unwrap_or(&Value::Null))
        ),
    })
}

/// Pretty-prints one line for the detail view (the `message` of a wire record, else the
/// whole record); non-JSON lines are shown as they are.
pub fn pretty(line: &str) -> Vec<String> {
    match parse_line(line).map(|mut v| {
        // The message is shown parsed; its exact bytes stay in the file.
        if let Value::Object(map) = &mut v
            && map.contains_key("message")
        {
            map.remove("raw");
        }
        v
    }) {
        Some(v) => serde_json::to_string_pretty(&v)
            .unwrap_or_else(|_| line.to_owned())
            .lines()
            .map(str::to_owned)
            .collect(),
        None => vec![line.to_owned()],
    }
}

/// What one log has taught the viewer: request keys → tools and the tools that appear.
#[derive(Debug, Clone, Default)]
struct LogIndex {
    /// Bytes of the log scanned by [`EvidenceView::index_current`].
    scanned: u64,
    request_tools: HashMap<String, String>,
    tools: BTreeSet<String>,
}

impl LogIndex {
    fn learn(&mut self, v: &Value) {
        if let (Some(k), Some(t)) = (key_of(v), tool_of(v)) {
            if self.request_tools.len() < KEYS_CAPACITY {
                self.request_tools.insert(k, t.to_owned());
            }
            if self.tools.len() < TOOLS_CAPACITY {
                self.tools.insert(t.to_owned());
            }
        }
    }
}

/// The viewer's state: which log, where, how filtered. Reading happens in [`EvidenceView::reload`]
/// and the movement methods, never while drawing.
#[derive(Debug, Clone)]
pub struct EvidenceView {
    /// (label, path) of each log.
    pub sources: Vec<(String, PathBuf)>,
    pub current: usize,
    /// Follow mode: keep the newest lines on screen.
    pub follow: bool,
    /// Offset of the first line on screen when not following.
    pub top: u64,
    /// Lines on screen and their summaries.
    pub lines: Vec<LogLine>,
    pub summaries: Vec<String>,
    /// Selected row within `lines`.
    pub selected: usize,
    /// Rows available (set from the last layout).
    pub rows: usize,
    pub tool_filter: Option<String>,
    /// Tools of the current log (every tool once the log was indexed for the filter).
    pub tools_seen: BTreeSet<String>,
    /// Per log (by path): request keys → tools, and the tools seen (one map shared by
    /// all logs mislabelled results).
    indexes: HashMap<PathBuf, LogIndex>,
    pub last_search: Option<String>,
    /// Line offsets of the current search's matches (whole log, bounded), and which one is
    /// shown: `match k of n`.
    pub matches: Vec<u64>,
    pub match_at: Option<usize>,
    /// One-line status (search result, errors).
    pub status: String,
    /// Size of the current log (bytes).
    pub file_len: u64,
    /// The agent host (its pid) whose observed process's log the viewer switched to, so it
    /// switches once per host run and `o` can still leave it ([`EvidenceView::follow_host`]).
    pub followed_host: Option<u32>,
}

impl EvidenceView {
    pub fn new(sources: Vec<(String, PathBuf)>) -> Self {
        Self {
            sources,
            current: 0,
            follow: true,
            top: 0,
            lines: Vec::new(),
            summaries: Vec::new(),
            selected: 0,
            rows: 8,
            tool_filter: None,
            tools_seen: BTreeSet::new(),
            indexes: HashMap::new(),
            last_search: None,
            matches: Vec::new(),
            match_at: None,
            status: String::new(),
            file_len: 0,
            followed_host: None,
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.sources.get(self.current).map(|(_, p)| p.as_path())
    }

    pub fn label(&self) -> &str {
        self.sources
            .get(self.current)
            .map_or("none", |(l, _)| l.as_str())
    }

    fn index(&self) -> Option<&LogIndex> {
        self.path().and_then(|p| self.indexes.get(p))
    }

    /// Scans the current log from where its index stopped to its end (bounded by
    /// [`MAX_SCAN_BYTES`] per call), pairing every request key with its tool and listing every
    /// tool, so the filter offers all tools and keeps results whose requests are off screen.
    fn index_current(&mut self) {
        let Some(path) = self.path().map(Path::to_path_buf) else {
            return;
        };
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let index = self.indexes.entry(path.clone()).or_default();
        if len < index.scanned {
            *index = LogIndex::default(); // replaced or truncated
        }
        let mut budget = MAX_SCAN_BYTES;
        while index.scanned < len && budget > 0 {
            let Ok(lines) = read_forward(&path, index.scanned, 4096, budget, |_| true) else {
                break;
            };
            let Some(last) = lines.last() else { break };
            let end = last.end();
            for l in &lines {
                if let Some(v) = parse_line(&l.text) {
                    index.learn(&v);
                }
            }
            budget = budget.saturating_sub(end - index.scanned);
            index.scanned = end;
        }
        self.tools_seen = index.tools.clone();
    }

    fn keep_fn(&self) -> impl FnMut(&str) -> bool + '_ {
        let filter = self.tool_filter.clone();
        let index = self.index();
        move |line: &str| match &filter {
            None => true,
            Some(tool) => {
                if line.contains(tool.as_str()) {
                    return true;
                }
                // Result lines name no tool: pair them with this log's request key.
                parse_line(line)
                    .and_then(|v| key_of(&v))
                    .and_then(|k| index.and_then(|i| i.request_tools.get(&k)))
                    .is_some_and(|t| t == tool)
            }
        }
    }

    /// Re-reads the window: the newest lines when following, else from `top`.
    pub fn reload(&mut self) {
        let Some(path) = self.path().map(Path::to_path_buf) else {
            return;
        };
        self.file_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if self.tool_filter.is_some() {
            self.index_current(); // new results must find their requests
        }
        let rows = self.rows.clamp(1, WINDOW_CAPACITY);
        let result = if self.follow {
            read_backward(&path, u64::MAX, rows, MAX_SCAN_BYTES, self.keep_fn())
        } else {
            read_forward(&path, self.top, rows, MAX_SCAN_BYTES, self.keep_fn())
        };
        match result {
            Ok(lines) => {
                if self.status.ends_with("not written yet") {
                    self.status.clear();
                }
                self.set_lines(lines)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.set_lines(Vec::new());
                self.status = format!("{} not written yet", path.display());
            }
            Err(e) => self.status = format!("cannot read {}: {e}", path.display()),
        }
        if self.follow {
            self.selected = self.lines.len().saturating_sub(1);
        }
    }

    fn set_lines(&mut self, lines: Vec<LogLine>) {
        if let Some(first) = lines.first() {
            self.top = first.offset;
        }
        let key = self.path().map(Path::to_path_buf).unwrap_or_default();
        // A plain-text log (the worker's stderr) is shown as it is, not as "(not JSON) …".
        let plain = key.extension().is_some_and(|e| e == "log");
        let index = self.indexes.entry(key).or_default();
        self.summaries = lines
            .iter()
            .map(|l| {
                if plain {
                    return short(l.text.trim_end(), 400);
                }
                if let Some(v) = parse_line(&l.text) {
                    index.learn(&v);
                }
                summarize(&l.text, &index.request_tools).0
            })
            .collect();
        self.tools_seen.extend(index.tools.iter().cloned());
        self.lines = lines;
        self.selected = self.selected.min(self.lines.len().saturating_sub(1));
    }

    /// Moves the selection by `delta` rows, scrolling the window at its edges (leaves follow
    /// mode when moving up).
    pub fn move_by(&mut self, delta: isize) {
        let Some(path) = self.path().map(Path::to_path_buf) else {
            return;
        };
        if delta < 0 {
            self.follow = false;
        }
        let target = self.selected as isize + delta;
        if target >= 0 && (target as usize) < self.lines.len() {
            self.selected = target as usize;
            return;
        }
        let rows = self.rows.clamp(1, WINDOW_CAPACITY);
        if target < 0 {
            let need = (-target) as usize;
            let before = self.lines.first().map_or(self.top, |l| l.offset);
            if let Ok(mut earlier) =
                read_backward(&path, before, need, MAX_SCAN_BYTES, self.keep_fn())
            {
                if earlier.is_empty() {
                    self.selected = 0;
                    return;
                }
                let moved = earlier.len();
                earlier.append(&mut self.lines);
                earlier.truncate(rows);
                self.set_lines(earlier);
                self.selected = need.saturating_sub(moved);
            }
        } else {
            let over = target as usize + 1 - self.lines.len();
            let from = self.lines.last().map_or(self.top, LogLine::end);
            if let Ok(later) = read_forward(&path, from, over, MAX_SCAN_BYTES, self.keep_fn()) {
                let moved = later.len();
                let mut all = std::mem::take(&mut self.lines);
                all.extend(later);
                let drop = all.len().saturating_sub(rows);
                all.drain(..drop);
                self.set_lines(all);
                self.selected = self.lines.len().saturating_sub(1);
                if moved < over {
                    // Reached the end: following again.
                    self.follow = true;
                }
            }
        }
    }

    /// Jumps to the log's first line.
    pub fn home(&mut self) {
        self.follow = false;
        self.top = 0;
        self.selected = 0;
        self.reload();
    }

    /// Jumps to the newest line and follows.
    pub fn end(&mut self) {
        self.follow = true;
        self.reload();
    }

    pub fn toggle_follow(&mut self) {
        self.follow = !self.follow;
        self.reload();
    }

    /// Switches to the next log (its own request map, tools and search).
    pub fn next_source(&mut self) {
        if !self.sources.is_empty() {
            self.select_source((self.current + 1) % self.sources.len());
        }
    }

    /// While the agent host with pid `host` runs (SPEC A4, U2): shows `log`, the wire log of
    /// the observed process that host started, instead of the console's own — once per host
    /// run, so `o` still moves to another log. Returns whether it switched; a `log` that is not
    /// one of the viewer's sources is not shown.
    pub fn follow_host(&mut self, host: u32, log: &Path) -> bool {
        if self.followed_host == Some(host) {
            return false;
        }
        let Some(i) = self.sources.iter().position(|(_, p)| p == log) else {
            return false;
        };
        self.followed_host = Some(host);
        if i != self.current || !self.follow {
            self.select_source(i);
        }
        true
    }

    /// Shows log `i` from its end (its own request map, tools and search).
    fn select_source(&mut self, i: usize) {
        self.current = i.min(self.sources.len().saturating_sub(1));
        self.follow = true;
        self.top = 0;
        self.tool_filter = None;
        self.matches.clear();
        self.match_at = None;
        self.tools_seen = self.index().map(|i| i.tools.clone()).unwrap_or_default();
        self.reload();
    }

    /// Cycles the tool filter through every tool the current log holds, then off.
    pub fn cycle_tool_filter(&mut self) {
        self.index_current();
        let next = match &self.tool_filter {
            None => self.tools_seen.iter().next().cloned(),
            Some(t) => self
                .tools_seen
                .range::<String, _>((
                    std::ops::Bound::Excluded(t.clone()),
                    std::ops::Bound::Unbounded,
                ))
                .next()
                .cloned(),
        };
        self.tool_filter = next;
        self.reload();
    }

    /// Searches the whole log (bounded) for lines holding `needle` (ASCII case-insensitive),
    /// then shows the first match after the selection (wrapping) as the top line, with
    /// `match k of n` in `status`; `n`/`N` move between matches ([`Self::next_match`]).
    pub fn search(&mut self, needle: &str) {
        let needle = needle.trim();
        if needle.is_empty() {
            return;
        }
        self.last_search = Some(needle.to_owned());
        let Some(path) = self.path().map(Path::to_path_buf) else {
            return;
        };
        let from = self.lines.get(self.selected).map_or(0, LogLine::end);
        match find_matches(&path, needle, MAX_SCAN_BYTES, MATCHES_CAPACITY) {
            Ok(matches) if matches.is_empty() => {
                self.matches.clear();
                self.match_at = None;
                self.status = format!("/{needle}: no match");
            }
            Ok(matches) => {
                let k = matches.iter().position(|&m| m >= from).unwrap_or(0);
                self.matches = matches;
                self.show_match(k);
            }
            Err(e) => self.status = format!("/{needle}: {e}"),
        }
    }

    /// Moves to the next (`forward`) or previous match of the last search, wrapping.
    pub fn next_match(&mut self, forward: bool) {
        let n = self.matches.len();
        let Some(k) = self.match_at.filter(|_| n > 0) else {
            self.status = "no search: press / first".into();
            return;
        };
        self.show_match(if forward {
            (k + 1) % n
        } else {
            (k + n - 1) % n
        });
    }

    fn show_match(&mut self, k: usize) {
        let Some(&offset) = self.matches.get(k) else {
            return;
        };
        self.match_at = Some(k);
        self.follow = false;
        self.top = offset;
        self.selected = 0;
        self.tool_filter = None;
        self.reload();
        self.status = format!(
            "/{}: match {} of {}{}",
            self.last_search.as_deref().unwrap_or(""),
            k + 1,
            self.matches.len(),
            if self.matches.len() >= MATCHES_CAPACITY {
                "+"
            } else {
                ""
            }
        );
    }

    /// Whether row `i` on screen holds the last search's text (the UI highlights it).
    pub fn is_match(&self, i: usize) -> bool {
        match (&self.last_search, self.lines.get(i)) {
            (Some(needle), Some(line)) => line
                .text
                .to_ascii_lowercase()
                .contains(&needle.to_ascii_lowercase()),
            _ => false,
        }
    }

    /// The selected line, read whole for the detail view.
    pub fn selected_line(&self) -> Option<&LogLine> {
        self.lines.get(self.selected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;

    fn numbered(n: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut f = std::io::BufWriter::new(File::create(&path).unwrap());
        for i in 0..n {
            writeln!(f, r#"{{"ts_ms":{i},"direction":"request","message":{{"id":{i},"method":"tools/call","params":{{"name":"t{}"}}}}}}"#, i % 3).unwrap();
        }
        f.flush().unwrap();
        (dir, path)
    }

    #[test]
    fn backward_read_returns_the_newest_lines_and_skips_a_partial_one() {
        let (_d, path) = numbered(100);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "{{\"partial").unwrap();
        let lines = read_backward(&path, u64::MAX, 3, MAX_SCAN_BYTES, |_| true).unwrap();
        assert_eq!(lines.len(), 3);
        assert!(lines[2].text.contains(r#""id":99"#), "{:?}", lines[2]);
        assert!(lines[0].text.contains(r#""id":97"#));
        // Offsets are line starts: reading forward from one gives the same line.
        let again = read_forward(&path, lines[1].offset, 1, MAX_SCAN_BYTES, |_| true).unwrap();
        assert_eq!(again[0], lines[1]);
    }

    #[test]
    fn line_lengths_are_file_bytes_even_with_invalid_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, b"a\xff\xfe\nb\nc\n").unwrap();
        let back = read_backward(&path, u64::MAX, 3, MAX_SCAN_BYTES, |_| true).unwrap();
        let fwd = read_forward(&path, 0, 3, MAX_SCAN_BYTES, |_| true).unwrap();
        assert_eq!(back, fwd);
        assert_eq!(fwd[0].len, 4);
        assert_eq!(fwd[0].end(), fwd[1].offset);
        let mut view = EvidenceView::new(vec![("bad".into(), path)]);
        view.rows = 1;
        view.home();
        view.move_by(1);
        assert_eq!(view.lines[0].text, "b");
    }

    #[test]
    fn backward_read_reaches_the_first_line() {
        let (_d, path) = numbered(5);
        let lines = read_backward(&path, u64::MAX, 50, MAX_SCAN_BYTES, |_| true).unwrap();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0].offset, 0);
    }

    #[test]
    fn backward_read_handles_lines_longer_than_a_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        let big = "z".repeat(200_000);
        std::fs::write(&path, format!("a\n{big}\nb\n")).unwrap();
        let lines = read_backward(&path, u64::MAX, 3, MAX_SCAN_BYTES, |_| true).unwrap();
        let lens: Vec<usize> = lines.iter().map(|l| l.text.len()).collect();
        assert_eq!(lens, vec![1, 200_000, 1]);
        assert_eq!(lines[1].offset, 2);
    }

    #[test]
    fn a_million_line_log_opens_at_its_tail_without_reading_it_all() {
        let (_d, path) = numbered(1_000_000);
        let t = std::time::Instant::now();
        let mut view = EvidenceView::new(vec![("big".into(), path.clone())]);
        view.rows = 20;
        view.reload();
        assert_eq!(view.lines.len(), 20);
        assert!(view.lines[19].text.contains(r#""id":999999"#));
        // Scrolling up one line past the window reads one more line, not the file.
        view.move_by(-20);
        assert!(
            view.lines[0].text.contains(r#""id":999979"#),
            "{:?}",
            view.lines[0]
        );
        assert!(!view.follow);
        // Search jumps to a line near the start, then home/end work by offset.
        view.search(r#""id":12345,"#);
        assert!(
            view.lines[0].text.contains(r#""id":12345,"#),
            "{}",
            view.status
        );
        view.end();
        assert!(view.lines.last().unwrap().text.contains(r#""id":999999"#));
        // Only a window is held, whatever the file size.
        assert!(view.lines.len() <= WINDOW_CAPACITY);
        assert!(t.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn tool_filter_keeps_only_lines_of_that_tool() {
        let (_d, path) = numbered(30);
        let mut view = EvidenceView::new(vec![("log".into(), path)]);
        view.rows = 10;
        view.reload();
        view.tool_filter = Some("t1".into());
        view.reload();
        assert_eq!(view.lines.len(), 10);
        assert!(
            view.summaries.iter().all(|s| s.contains("t1")),
            "{:?}",
            view.summaries
        );
    }

    /// A wire log of `n` calls cycling through `tools` tools, each request followed by its
    /// result, in the exact-bytes format (`raw`).
    fn calls(dir: &Path, name: &str, n: usize, tools: usize, pid: u32) -> PathBuf {
        let path = dir.join(name);
        let mut f = std::io::BufWriter::new(File::create(&path).unwrap());
        for i in 0..n {
            let req = format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"tool{}","arguments":{{}}}}}}"#,
                i % tools
            );
            let res = format!(
                r#"{{"jsonrpc":"2.0","id":{i},"result":{{"structuredContent":{{"n":{i}}}}}}}"#
            );
            for (dir, raw) in [("request", req), ("result", res)] {
                let v = serde_json::json!({"seq": 0, "pid": pid, "ts_ms": 0, "direction": dir, "raw": raw});
                writeln!(f, "{v}").unwrap();
            }
        }
        f.flush().unwrap();
        path
    }

    #[test]
    fn each_log_pairs_results_with_its_own_requests() {
        let dir = tempfile::tempdir().unwrap();
        let a = calls(dir.path(), "a.jsonl", 1, 1, 7);
        // Log b holds only a result for id 0: its request is not in this log.
        let b = dir.path().join("b.jsonl");
        std::fs::write(
            &b,
            "{\"pid\":7,\"ts_ms\":0,\"direction\":\"result\",\"raw\":\"{\\\"id\\\":0,\\\"result\\\":{}}\"}\n",
        )
        .unwrap();
        let mut view = EvidenceView::new(vec![("a".into(), a), ("b".into(), b)]);
        view.reload();
        assert!(view.summaries[1].contains("tool0"), "{:?}", view.summaries);
        view.next_source();
        assert_eq!(view.summaries.len(), 1);
        assert!(
            !view.summaries[0].contains("tool0"),
            "a result labelled with another log's tool: {:?}",
            view.summaries
        );
    }

    #[test]
    fn tool_filter_lists_every_tool_and_keeps_each_result_with_its_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = calls(dir.path(), "w.jsonl", 120, 6, 9);
        let mut view = EvidenceView::new(vec![("w".into(), path)]);
        view.rows = 10;
        view.reload(); // only the last 10 lines (5 calls, 5 tools) are on screen
        view.cycle_tool_filter();
        let all: Vec<String> = (0..6).map(|i| format!("tool{i}")).collect();
        assert_eq!(view.tools_seen.iter().cloned().collect::<Vec<_>>(), all);
        assert_eq!(view.tool_filter.as_deref(), Some("tool0"));
        assert_eq!(view.lines.len(), 10);
        for pair in view.summaries.chunks(2) {
            assert!(pair[0].contains("→ tools/call tool0"), "{pair:?}");
            assert!(pair[1].contains("← ok tool0"), "{pair:?}");
        }
    }

    #[test]
    fn search_shows_match_k_of_n_and_moves_between_matches() {
        let (_d, path) = numbered(30);
        let mut view = EvidenceView::new(vec![("log".into(), path)]);
        view.rows = 5;
        view.reload();
        view.home();
        view.search(r#""name":"T1""#);
        assert_eq!(view.matches.len(), 10);
        assert_eq!(view.status, r#"/"name":"T1": match 1 of 10"#);
        assert!(view.lines[0].text.contains(r#""id":1,"#));
        assert!(view.is_match(0) && !view.is_match(1));
        view.next_match(true);
        assert_eq!(view.status, r#"/"name":"T1": match 2 of 10"#);
        assert!(view.lines[0].text.contains(r#""id":4,"#));
        view.next_match(false);
        view.next_match(false);
        assert_eq!(view.status, r#"/"name":"T1": match 10 of 10"#);
        assert!(view.lines[0].text.contains(r#""id":28,"#));
    }

    #[test]
    fn a_plain_text_log_is_shown_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.observed.stderr.log");
        std::fs::write(
            &path,
            "=== generation 1 pid 9 launched ===\nFATAL ERROR: Reached heap limit\n",
        )
        .unwrap();
        let mut view = EvidenceView::new(vec![("worker stderr".into(), path)]);
        view.reload();
        assert_eq!(
            view.summaries,
            vec![
                "=== generation 1 pid 9 launched ===",
                "FATAL ERROR: Reached heap limit"
            ]
        );
    }

    #[test]
    fn search_says_when_nothing_matches() {
        let (_d, path) = numbered(10);
        let mut view = EvidenceView::new(vec![("log".into(), path)]);
        view.reload();
        view.search("no-such-text");
        assert!(view.status.contains("no match"));
    }

    #[test]
    fn summaries_name_direction_tool_and_result_fields() {
        let mut tools = HashMap::new();
        tools.insert("7".to_owned(), "patchdiff_save".to_owned());
        let req = r#"{"ts_ms":0,"direction":"request","message":{"id":7,"method":"tools/call","params":{"name":"patchdiff_save","arguments":{"target":"chess"}}}}"#;
        let (s, tool) = summarize(req, &tools);
        assert_eq!(s, "00:00:00.000 → tools/call patchdiff_save chess");
        assert_eq!(tool.as_deref(), Some("patchdiff_save"));
        let res = r#"{"ts_ms":1500,"direction":"result","message":{"id":7,"result":{"structuredContent":{"target":"chess","version":1,"revision":3}}}}"#;
        let (s, _) = summarize(res, &tools);
        assert_eq!(
            s,
            "00:00:01.500 ← ok patchdiff_save target chess · version 1 · revision 3"
        );
        assert!(summarize("garbage", &tools).0.starts_with("(not JSON)"));
        let perf = r#"{"name":"ipc_read","start_ms":2000,"duration_ms":1.5,"outcome":"failed","ids":{"request":3}}"#;
        assert_eq!(
            summarize(perf, &tools).0,
            "00:00:02.000 ipc_read 1.50 ms failed request=3"
        );
    }

    #[test]
    fn pretty_prints_json_and_passes_other_text() {
        assert_eq!(pretty(r#"{"a":1}"#), vec!["{", "  \"a\": 1", "}"]);
        assert_eq!(pretty("plain"), vec!["plain"]);
    }
}

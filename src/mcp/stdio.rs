//! The stdio transport of `patchdiff mcp` (M1, M5, K8: every request gets an answer).
//!
//! rmcp 3.11's own stdio transport drops a line that is not JSON (no reply), drops a line over
//! 16 MiB (a log line on stderr, no reply) although a legal submission carries up to 32 MiB of
//! text (up to 192 MiB once escaped), answers shape errors with an `-32600` that has no `id`, and hands requests whose params
//! do not fit their method to the handler as unknown methods (`-32601`). This transport sits in
//! front of rmcp's service loop and answers those itself, in JSON-RPC 2.0 terms:
//!
//! | input | answer |
//! |---|---|
//! | not UTF-8, not JSON, lone surrogate, trailing garbage | `-32700`, `"id": null` |
//! | a line over [`MAX_LINE_BYTES`] | `-32600` with the request's `id` when its prefix names one, else `null` |
//! | a batch (JSON array) | an array of `-32600`, one per request in it, each with its `id` |
//! | `jsonrpc` not `"2.0"`, `id` neither string nor integer, no `method` | `-32600` (with the `id` when valid) |
//! | `params` not an object; `tools/call` without a string `name` or with non-object `arguments`; params of a standard method that do not fit it | `-32602` with the `id` |
//! | a request other than `initialize`, `server/discover` or `ping` before `initialize` (and without MCP 2026-07-28 `_meta`) | `-32600` "initialize first" with the `id` |
//!
//! Batches: MCP 2025-03-26 allowed JSON-RPC batches; later versions removed them. An `initialize`
//! asking for 2025-03-26 is offered 2025-06-18 instead (a server may answer with another version
//! it supports), so a batch is never owed a batched answer.
//!
//! Everything else goes to rmcp unchanged. All writes — rmcp's and these answers — go through one
//! [`LineWriter`] behind a mutex, written by the caller itself (no hop to a writer task: one
//! fewer wake-up per result, the `mcp-bench` figure), so lines never interleave. `receive` stays
//! cancellation-safe (rmcp polls it inside `select!`): partial lines and unsent answers live on
//! the struct, and bytes a cancelled write left unsent stay in the [`LineWriter`], written before
//! anything else.

use std::collections::VecDeque;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::kernel::MAX_SUBMISSION_TEXT_BYTES;

/// Bytes one byte of text may take inside a JSON string at the worst escaping: a control
/// character such as U+0001 is written `\u0001`.
pub const WORST_ESCAPE_FACTOR: usize = 6;

/// Bytes of a message line beside its texts: ids, names, 64 operations' keys (K8), framing.
pub const LINE_ENVELOPE_BYTES: usize = 1024 * 1024;

/// The longest request line accepted, in bytes (193 MiB): a legal submission's
/// [`MAX_SUBMISSION_TEXT_BYTES`] (32 MiB) of `old_text` + `new_text` (K3) at the worst JSON
/// escaping ([`WORST_ESCAPE_FACTOR`]: 32 MiB of control characters is 192 MiB of JSON), plus
/// [`LINE_ENVELOPE_BYTES`]. So every legal submission fits whatever it holds, and the limit an
/// agent must respect is the one on unescaped text. Longer lines are discarded unbuffered and
/// answered with an error. The console's own client accepts replies up to the
/// same bound (`canary::client`).
pub const MAX_LINE_BYTES: usize =
    WORST_ESCAPE_FACTOR * MAX_SUBMISSION_TEXT_BYTES + LINE_ENVELOPE_BYTES;

/// How much of an oversize line is kept to find its `id` (bytes).
const ID_SNIFF_BYTES: usize = 64 * 1024;

/// JSON-RPC 2.0 error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// The `_meta` key by which an MCP 2026-07-28 request names its protocol version (no session,
/// no `initialize`).
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The write half: whole lines queued in `unsent` and written out in order. A write cancelled
/// part-way leaves the rest of its bytes here, and the next [`LineWriter::drain`] writes them
/// first, so a line is never cut by another.
struct LineWriter {
    write: Box<dyn AsyncWrite + Unpin + Send>,
    /// Bytes owed to the stream, from `written` on.
    unsent: Vec<u8>,
    written: usize,
    /// Set by [`Transport::close`]: later writes fail with [`closed`].
    closed: bool,
}

impl LineWriter {
    /// Queues `line` (a whole message with its newline) behind what is still owed.
    fn push(&mut self, line: Vec<u8>) {
        if self.written == self.unsent.len() {
            // Nothing owed: take the line's buffer as it is (no copy).
            self.unsent = line;
            self.written = 0;
        } else {
            self.unsent.extend_from_slice(&line);
        }
    }

    /// Writes everything owed, then flushes. Cancellation-safe: progress is kept in `written`.
    async fn drain(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Err(closed());
        }
        while self.written < self.unsent.len() {
            let n = self.write.write(&self.unsent[self.written..]).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.written += n;
        }
        self.unsent.clear();
        self.written = 0;
        self.write.flush().await
    }
}

/// rmcp [`Transport`] over a byte stream pair (stdin/stdout, or tees of them), answering every
/// request rmcp's own transport would leave unanswered or misanswer (see the module docs).
pub struct StdioTransport<R> {
    read: BufReader<R>,
    line_buf: Vec<u8>,
    max_line: usize,
    /// Set while the tail of an oversize line is being skipped.
    discarding: bool,
    /// The first bytes of the oversize line being skipped (to find its `id`).
    oversize_prefix: Vec<u8>,
    writer: std::sync::Arc<Mutex<LineWriter>>,
    /// Answers decided here but not yet handed to the writer.
    pending: VecDeque<Vec<u8>>,
    /// Answers were handed to the writer and their drain has not completed (it was cancelled).
    owed: bool,
    /// An `initialize` request has been passed on.
    initialized: bool,
}

impl<R: AsyncRead + Unpin + Send> StdioTransport<R> {
    /// A transport reading requests from `read` and writing every message to `write`.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W) -> Self {
        Self::with_max_line(read, write, MAX_LINE_BYTES)
    }

    /// [`StdioTransport::new`] with another line limit (tests use small ones).
    pub fn with_max_line<W: AsyncWrite + Unpin + Send + 'static>(
        read: R,
        write: W,
        max_line: usize,
    ) -> Self {
        Self {
            read: BufReader::with_capacity(64 * 1024, read),
            line_buf: Vec::new(),
            max_line,
            discarding: false,
            oversize_prefix: Vec::new(),
            writer: std::sync::Arc::new(Mutex::new(LineWriter {
                write: Box::new(write),
                unsent: Vec::new(),
                written: 0,
                closed: false,
            })),
            pending: VecDeque::new(),
            owed: false,
            initialized: false,
        }
    }

    /// Reads one `\n`-terminated line into `line_buf`, never holding more than `max_line`
    /// bytes. Cancellation-safe: bytes are consumed from the reader only as they are copied
    /// (or skipped), with no await in between.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let (consumed, step) = {
                let available = match self.read.fill_buf().await {
                    Ok(a) => a,
                    Err(e) => return LineRead::Io(e),
                };
                if available.is_empty() {
                    return LineRead::Eof;
                }
                let newline = available.iter().position(|&b| b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.discarding {
                    (take, newline.map_or(Step::More, |_| Step::EndDiscard))
                } else if self.line_buf.len() + take > self.max_line {
                    let mut prefix = std::mem::take(&mut self.line_buf);
                    let room = ID_SNIFF_BYTES.saturating_sub(prefix.len());
                    prefix.extend_from_slice(&available[..take.min(room)]);
                    prefix.truncate(ID_SNIFF_BYTES);
                    self.oversize_prefix = prefix;
                    (
                        take,
                        newline.map_or(Step::StartDiscard, |_| Step::Oversized),
                    )
                } else {
                    self.line_buf.extend_from_slice(&available[..take]);
                    (take, newline.map_or(Step::More, |_| Step::Line))
                }
            };
            self.read.consume(consumed);
            match step {
                Step::Line => return LineRead::Line,
                Step::More => {}
                Step::StartDiscard => self.discarding = true,
                Step::EndDiscard => {
                    self.discarding = false;
                    return LineRead::Oversized;
                }
                Step::Oversized => return LineRead::Oversized,
            }
        }
    }

    /// Decides what to do with one complete line (without its newline).
    fn classify(&mut self, line: &[u8]) -> Verdict {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Verdict::Ignore;
        }
        let text = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(e) => {
                return Verdict::Answer(error_line(
                    None,
                    PARSE_ERROR,
                    format!(
                        "Parse error: the line is not UTF-8 (invalid byte at offset {}); send \
                         one UTF-8 JSON-RPC message per line",
                        e.valid_up_to()
                    ),
                ));
            }
        };
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                return Verdict::Answer(error_line(
                    None,
                    PARSE_ERROR,
                    format!("Parse error: {e}; send one JSON-RPC message per line"),
                ));
            }
        };
        match value {
            Value::Array(items) => Verdict::answer_opt(batch_answer(&items)),
            Value::Object(obj) => self.classify_object(obj),
            other => Verdict::Answer(error_line(
                None,
                INVALID_REQUEST,
                format!(
                    "Invalid request: a JSON-RPC message is an object, got {}",
                    kind(&other)
                ),
            )),
        }
    }

    fn classify_object(&mut self, mut obj: Map<String, Value>) -> Verdict {
        let (id, method) = match precheck(&mut obj, Some(&mut self.initialized)) {
            Ok(found) => found,
            Err(verdict) => return verdict,
        };
        deliver(obj, id, method)
    }
}

/// Envelope and params checks shared by stdio and HTTP (see the module docs). With
/// `initialized` (stdio), also the session rule "initialize first"; over HTTP rmcp's session
/// layer owns that. Rewrites an `initialize` asking for 2025-03-26 to 2025-06-18. Returns the
/// request's `id` and `method`, or the answer.
fn precheck(
    obj: &mut Map<String, Value>,
    initialized: Option<&mut bool>,
) -> Result<(Option<Value>, Option<String>), Verdict> {
    let id = match obj.get("id") {
        None => None,
        Some(v) if valid_id(v) => Some(v.clone()),
        Some(v) => {
            return Err(Verdict::Answer(error_line(
                None,
                INVALID_REQUEST,
                format!(
                    "Invalid request: `id` must be a string or an integer, got {}",
                    kind(v)
                ),
            )));
        }
    };
    let invalid =
        |code: i64, message: String| Verdict::Answer(error_line(id.clone(), code, message));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(
            INVALID_REQUEST,
            "Invalid request: `jsonrpc` must be \"2.0\"".into(),
        ));
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => Some(m.clone()),
        Some(other) => {
            return Err(invalid(
                INVALID_REQUEST,
                format!(
                    "Invalid request: `method` must be a string, got {}",
                    kind(other)
                ),
            ));
        }
        None => None,
    };
    match (&method, &id) {
        (Some(method), Some(_)) => {
            if let Some(verdict) = check_request(method, obj, initialized, &invalid) {
                return Err(verdict);
            }
        }
        (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => {}
        (None, _) => {
            return Err(invalid(
                INVALID_REQUEST,
                "Invalid request: no `method` (and not a response)".into(),
            ));
        }
        (Some(_), None) => {}
    }
    Ok((id, method))
}

/// Hands a prechecked message to rmcp, unless its params do not fit a standard method (rmcp
/// would take it for an unknown method) or it does not deserialize.
fn deliver(obj: Map<String, Value>, id: Option<Value>, method: Option<String>) -> Verdict {
    let invalid =
        |code: i64, message: String| Verdict::Answer(error_line(id.clone(), code, message));
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(Value::Object(obj)) {
        Ok(JsonRpcMessage::Request(r))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && method.as_deref().is_some_and(is_standard_request) =>
        {
            let method = method.unwrap_or_default();
            invalid(
                INVALID_PARAMS,
                format!("Invalid params: the params of `{method}` do not match its MCP schema"),
            )
        }
        Ok(message) => Verdict::Deliver(Box::new(message)),
        // A notification or a response: nobody to answer (rmcp drops these too).
        Err(_) if id.is_none() || method.is_none() => Verdict::Ignore,
        Err(e) => invalid(INVALID_REQUEST, format!("Invalid request: {e}")),
    }
}

/// Streamable HTTP: screens one POSTed JSON body as a stdio line is screened, without
/// the session rule. `Ok` is the body to pass on to rmcp (rewritten when an `initialize` asked
/// for 2025-03-26); `Err` is the JSON answer to send instead (`None`: nothing to answer).
pub(crate) fn screen_http_body(value: Value) -> Result<Value, Option<Vec<u8>>> {
    match value {
        Value::Array(items) => Err(batch_answer(&items)),
        Value::Object(mut obj) => {
            let (id, method) = match precheck(&mut obj, None) {
                Ok(found) => found,
                Err(Verdict::Answer(answer)) => return Err(Some(answer)),
                Err(_) => return Err(None),
            };
            match deliver(obj.clone(), id, method) {
                Verdict::Answer(answer) => Err(Some(answer)),
                // rmcp answers (or drops) the rest itself.
                _ => Ok(Value::Object(obj)),
            }
        }
        other => Err(Some(error_line(
            None,
            INVALID_REQUEST,
            format!(
                "Invalid request: a JSON-RPC message is an object, got {}",
                kind(&other)
            ),
        ))),
    }
}

/// Checks a request's params and the session state; `Some` answers it here.
fn check_request(
    method: &str,
    obj: &mut Map<String, Value>,
    initialized: Option<&mut bool>,
    invalid: &dyn Fn(i64, String) -> Verdict,
) -> Option<Verdict> {
    let params = match obj.get_mut("params") {
        None => None,
        Some(Value::Object(p)) => Some(p),
        Some(other) => {
            return Some(invalid(
                INVALID_PARAMS,
                format!(
                    "Invalid params: `params` of `{method}` must be an object, got {}",
                    kind(other)
                ),
            ));
        }
    };
    let stateless = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .is_some();
    match method {
        "initialize" => {
            if let Some(p) = params
                && p.get("protocolVersion").and_then(Value::as_str) == Some("2025-03-26")
            {
                // Batches belong to 2025-03-26 only: offer the next version instead.
                p.insert("protocolVersion".into(), "2025-06-18".into());
            }
            if let Some(initialized) = initialized {
                *initialized = true;
            }
        }
        // MCP 2026-07-28 discovery opens the conversation as initialize does; from then on rmcp
        // judges each request's `_meta` itself.
        "server/discover" => {
            if let Some(initialized) = initialized {
                *initialized = true;
            }
        }
        "ping" => {}
        _ if initialized.is_some_and(|done| !*done) && !stateless => {
            return Some(invalid(
                INVALID_REQUEST,
                format!(
                    "initialize first: `{method}` came before `initialize`; send \
                     `initialize` and `notifications/initialized`, then your requests (MCP \
                     2026-07-28 clients put `{META_PROTOCOL_VERSION}` in each request's \
                     `_meta` instead)"
                ),
            ));
        }
        _ => {}
    }
    if method == "tools/call"
        && let Err(problem) = check_tools_call(obj.get("params").and_then(Value::as_object))
    {
        return Some(invalid(INVALID_PARAMS, problem));
    }
    None
}

/// `tools/call` params: `name` a string, `arguments` absent or an object; `Err` is the
/// `-32602` message naming what was wrong and what is accepted.
fn check_tools_call(params: Option<&Map<String, Value>>) -> Result<(), String> {
    match params.and_then(|p| p.get("name")) {
        Some(Value::String(_)) => {}
        None => {
            return Err(
                "Invalid params: `tools/call` needs `params.name`, the name of the tool \
                 to call (see tools/list)"
                    .into(),
            );
        }
        Some(other) => {
            return Err(format!(
                "Invalid params: `params.name` of `tools/call` must be a string, got {}",
                kind(other)
            ));
        }
    }
    match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(format!(
            "Invalid params: `params.arguments` of `tools/call` must be an object \
             of named arguments, got {}",
            kind(other)
        )),
    }
}

enum LineRead {
    Line,
    Oversized,
    Eof,
    Io(std::io::Error),
}

enum Step {
    Line,
    More,
    StartDiscard,
    EndDiscard,
    Oversized,
}

enum Verdict {
    Deliver(Box<RxJsonRpcMessage<RoleServer>>),
    Answer(Vec<u8>),
    Ignore,
}

impl Verdict {
    fn answer_opt(line: Option<Vec<u8>>) -> Self {
        line.map_or(Verdict::Ignore, Verdict::Answer)
    }
}

/// Client-to-server request methods rmcp 3.11 types (MCP 2026-07-28): one of these arriving as
/// rmcp's `CustomRequest` means its params did not fit the method.
fn is_standard_request(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "completion/complete"
            | "logging/setLevel"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
    )
}

/// A JSON-RPC id: a string or an integer that fits rmcp's `i64` (`null` is not an id here).
fn valid_id(v: &Value) -> bool {
    v.is_string() || v.as_i64().is_some()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn error_value(id: Option<Value>, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": {"code": code, "message": message}})
}

fn error_line(id: Option<Value>, code: i64, message: String) -> Vec<u8> {
    let mut line = error_value(id, code, message).to_string().into_bytes();
    line.push(b'\n');
    line
}

/// A batch gets an array answer: `-32600` for each request (with its id) and for each element
/// that is not a message; notifications and responses in it get nothing (JSON-RPC 2.0 §6).
fn batch_answer(items: &[Value]) -> Option<Vec<u8>> {
    const WHY: &str = "Invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 and \
                       later removed them); send each message on its own";
    if items.is_empty() {
        return Some(error_line(
            None,
            INVALID_REQUEST,
            "Invalid request: an empty batch".into(),
        ));
    }
    let answers: Vec<Value> = items
        .iter()
        .filter_map(|item| {
            let obj = item.as_object();
            let id = obj.and_then(|o| o.get("id"));
            let is_message = obj.is_some_and(|o| {
                o.contains_key("method") || o.contains_key("result") || o.contains_key("error")
            });
            match id {
                Some(id) if valid_id(id) && obj.is_some_and(|o| o.contains_key("method")) => {
                    Some(error_value(Some(id.clone()), INVALID_REQUEST, WHY.into()))
                }
                None if is_message => None,
                Some(_) if is_message && !obj.is_some_and(|o| o.contains_key("method")) => None,
                _ => Some(error_value(None, INVALID_REQUEST, WHY.into())),
            }
        })
        .collect();
    if answers.is_empty() {
        return None;
    }
    let mut line = Value::Array(answers).to_string().into_bytes();
    line.push(b'\n');
    Some(line)
}

/// The top-level `id` of a JSON object whose text may be cut short (an oversize line's prefix).
fn sniff_id(prefix: &[u8]) -> Option<Value> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Find<'a>(&'a mut Option<Value>);
    impl<'de> Visitor<'de> for Find<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON-RPC object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value::<Value>()?);
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut found = None;
    let prefix = prefix.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(prefix);
    // The object is cut short: the error after the id is expected.
    let _ = serde_json::Deserializer::from_slice(prefix).deserialize_map(Find(&mut found));
    found.filter(valid_id)
}

fn closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "the stdio transport is closed",
    )
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for StdioTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let line = serde_json::to_vec(&item).map(|mut l| {
            l.push(b'\n');
            l
        });
        async move {
            let line = line.map_err(std::io::Error::other)?;
            let mut writer = writer.lock().await;
            writer.push(line);
            writer.drain().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.owed || !self.pending.is_empty() {
                let mut writer = self.writer.lock().await;
                for line in self.pending.drain(..) {
                    writer.push(line);
                }
                self.owed = true;
                // A failed write of an answer ends nothing here: reading goes on, and rmcp's
                // own next write reports the broken stream.
                let _ = writer.drain().await;
                self.owed = false;
            }
            match self.read_line().await {
                LineRead::Line => {}
                LineRead::Oversized => {
                    let prefix = std::mem::take(&mut self.oversize_prefix);
                    tracing::warn!(
                        max_line_bytes = self.max_line,
                        "an incoming line exceeded the line limit; answered with an error"
                    );
                    self.pending.push_back(error_line(
                        sniff_id(&prefix),
                        INVALID_REQUEST,
                        format!(
                            "Invalid request: the message is longer than {} bytes, the most this \
                             server reads in one line. A submission carries at most {} bytes of \
                             old_text + new_text, unescaped, and always fits; a line this long \
                             holds more than that — split it into several submissions",
                            self.max_line, MAX_SUBMISSION_TEXT_BYTES
                        ),
                    ));
                    continue;
                }
                LineRead::Eof => return None,
                LineRead::Io(e) => {
                    tracing::error!("reading the MCP stream failed: {e}");
                    return None;
                }
            }
            let mut line = std::mem::take(&mut self.line_buf);
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match self.classify(&line) {
                Verdict::Deliver(message) => return Some(*message),
                Verdict::Answer(answer) => self.pending.push_back(answer),
                Verdict::Ignore => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Write what is still owed, then shut the stream down.
        let mut writer = self.writer.lock().await;
        for line in self.pending.drain(..) {
            writer.push(line);
        }
        let _ = writer.drain().await;
        self.owed = false;
        writer.closed = true;
        let _ = writer.write.shutdown().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_cut_off_request_is_found_at_top_level_only() {
        let cut = br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"arguments":{"new_text":"aaaa"#;
        assert_eq!(sniff_id(cut), Some(json!(17)));
        let late = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"id":3,"x":"aaaa"#;
        assert_eq!(sniff_id(late), None);
        let after = br#"{"method":"x","params":{"id":3},"id":"k-1","#;
        assert_eq!(sniff_id(after), Some(json!("k-1")));
    }

    #[tokio::test]
    async fn an_oversize_line_is_answered_with_its_id_and_reading_goes_on() {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let (mut client, server_in) = tokio::io::duplex(4096);
        let (server_out, answers) = tokio::io::duplex(4096);
        let mut transport = StdioTransport::with_max_line(server_in, server_out, 64);
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{{"x":"{}"}}}}"#,
            "a".repeat(200)
        );
        client
            .write_all(
                format!("{long}\n{{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}}\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        match transport.receive().await {
            Some(JsonRpcMessage::Request(r)) => assert_eq!(r.id.to_string(), "8"),
            other => panic!("expected the ping with id 8, got {other:?}"),
        }
        let mut lines = tokio::io::BufReader::new(answers).lines();
        let answer: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn a_batch_is_answered_per_request_with_ids() {
        let items = vec![
            json!({"jsonrpc":"2.0","id":1,"method":"ping"}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!(5),
        ];
        let line = batch_answer(&items).unwrap();
        let v: Value = serde_json::from_slice(&line).unwrap();
        let ids: Vec<Value> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].clone())
            .collect();
        assert_eq!(ids, vec![json!(1), Value::Null]);
        assert!(
            batch_answer(&[json!({"jsonrpc":"2.0","method":"notifications/initialized"})])
                .is_none()
        );
    }
}

//! Evidence (SPEC E1, E2): the private per-run directory (0700, files 0600), append-only JSONL
//! logs (MCP request/result wire logs per process, the agent transcript), and the run manifest.
//!
//! Nothing here rewrites a file: logs are opened `O_APPEND`, and the manifest is created with
//! `O_EXCL`, once per run.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::telemetry::unix_ms_now;

pub use crate::owned_fs::{create_private_dir, open_append_private, write_new_private};

pub use crate::chain::{
    CHAIN_FIELD, CHAIN_GENESIS, ChainWriter, GAP_FIELD, PendingGap, chain_tail_of, line_digest,
};

/// An append-only JSONL log shared between tasks and hash-chained (V1): each record is written
/// as one line carrying [`CHAIN_FIELD`], the SHA-256 of the line before it, so changing any
/// line breaks the chain at the next one. Appends go through [`ChainWriter`]: several processes
/// may append to one log (an advisory lock around read-tail-and-append keeps one chain), and a
/// failed append is reported on stderr and later recorded as a gap record.
#[derive(Clone)]
pub struct JsonlLog {
    path: PathBuf,
    writer: Arc<Mutex<ChainWriter>>,
}

impl JsonlLog {
    /// Opens (or creates, 0600) the log at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = open_append_private(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            writer: Arc::new(Mutex::new(ChainWriter::new(path, file))),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (a JSON object) as a single chained line. A failure is reported on
    /// stderr and recorded as a gap when writing works again ([`ChainWriter`]); callers may
    /// ignore the error without the loss going unseen.
    /// The line passes this process's redactor ([`crate::redact::process`]) first; the
    /// replacement needs no JSON escaping, so the line stays valid and the chain covers it as
    /// written.
    pub fn append(&self, record: &Value) -> std::io::Result<()> {
        self.append_numbered(record, None)
    }

    /// [`append`](Self::append) for a record numbered `seq` (a wire log's), so a gap record
    /// can name the lost sequence numbers.
    fn append_numbered(&self, record: &Value, seq: Option<u64>) -> std::io::Result<()> {
        let mut record = record.clone();
        if let Value::Object(map) = &mut record {
            map.remove(CHAIN_FIELD);
        }
        let body = crate::redact::process()
            .redact(&serde_json::to_string(&record)?)
            .into_owned();
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        writer.append(&body, seq).map(|_| ())
    }

    /// Failed appends of this process not yet recorded in the file: the run that
    /// suffered them cannot pass.
    pub fn pending_gap(&self) -> Option<PendingGap> {
        self.writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pending_gap()
            .cloned()
    }
}

/// Direction of one MCP wire message relative to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client → server (requests and notifications).
    Request,
    /// Server → client (results, errors, notifications).
    Result,
}

/// One line of an MCP wire log (E1): one message's exact bytes as they crossed the transport
/// (a stdio line without its newline, an HTTP body, an SSE event's data), with the direction,
/// the logging process's sequence number and a monotonic timestamp taken at the read/write.
/// Lines of one process appear in the file in wire order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireRecord {
    /// Per-process sequence number, from 0, in wire order.
    pub seq: u64,
    /// The process that logged the message (a relaunched process restarts `seq`).
    pub pid: u32,
    /// `CLOCK_MONOTONIC` in ns at the read or write (comparable across processes of one boot).
    pub mono_ns: u64,
    /// Wall clock, Unix ms, at the same moment.
    pub ts_ms: f64,
    pub direction: Direction,
    /// The message's bytes when they are UTF-8 (always, for JSON-RPC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The message's bytes in hex when they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_hex: Option<String>,
    /// A stdio message that ended at end of stream without its newline.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unterminated: bool,
    /// The message was not kept, only its length and digest: the process had already recorded
    /// [`WIRE_LOG_MESSAGE_BYTES`] of messages (the wire log's bound).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elided: bool,
    /// With `elided`: the message's length in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// With `elided`: the SHA-256 (hex) of the message's bytes (after redaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The most message bytes one process records in full in its wire log: 1 GiB, so a run's evidence cannot grow without bound.
/// Each message is recorded once, as its bytes (a JSON string: a JSON-RPC line grows by its
/// escaped `"` and `\`, at most 2×; bytes that are not UTF-8 are hex, 2×), plus about 200 bytes
/// of record fields and chain link. A message that would take the process past this bound is
/// recorded as `elided` with its length and SHA-256 only, so one process's wire log stays
/// below 2 GiB + 200 bytes per message whatever an agent sends; a canary run has three MCP
/// processes (full, observed, the host's observed), each relaunch a new one. The largest legal
/// request (193 MiB, `mcp::stdio::MAX_LINE_BYTES`) fits five times; agent-facing results are
/// at most 32 KiB each (`mcp::delivery`).
pub const WIRE_LOG_MESSAGE_BYTES: u64 = 1 << 30;

impl WireRecord {
    /// The exact bytes of the message.
    pub fn bytes(&self) -> Vec<u8> {
        match (&self.raw, &self.raw_hex) {
            (Some(raw), _) => raw.as_bytes().to_vec(),
            (None, Some(h)) => hex::decode(h).unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }

    /// The message parsed as JSON, or its text as a JSON string when it is not JSON.
    pub fn message(&self) -> Value {
        let bytes = self.bytes();
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// One JSON-RPC message of a wire log, with the process that logged it (several
/// processes may append to one log, and each numbers its JSON-RPC ids on its own).
#[derive(Debug, Clone, PartialEq)]
pub struct WireMessage {
    /// 1-based line of the log the message is on.
    pub line: usize,
    pub pid: u32,
    pub seq: u64,
    pub direction: Direction,
    /// The message parsed (a JSON object).
    pub message: Value,
}

impl WireMessage {
    /// The key pairing a result with its request: (process, JSON-RPC `id` as JSON text).
    pub fn exchange_key(&self) -> Option<(u32, String)> {
        self.message.get("id").map(|id| (self.pid, id.to_string()))
    }
}

/// The one typed reader of wire logs: every [`WireRecord`] line's JSON-RPC object, in file
/// order, with its process; gap records, other lines and messages that are not JSON objects
/// are skipped. [`read_wire_messages`] streams the same from a reader.
pub fn wire_messages(log: &str) -> Vec<WireMessage> {
    read_wire_messages(log.as_bytes()).collect()
}

/// [`wire_messages`] streamed from `reader`, line by line: memory holds one line at a time.
/// A read error ends the stream (the chain check names an unreadable log).
pub fn read_wire_messages(reader: impl std::io::BufRead) -> impl Iterator<Item = WireMessage> {
    let mut reader = reader;
    let mut buf = Vec::new();
    let mut line_no = 0;
    std::iter::from_fn(move || {
        loop {
            buf.clear();
            line_no += 1;
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let Ok(record) = serde_json::from_slice::<WireRecord>(line) else {
                continue;
            };
            let message = record.message();
            if message.is_object() {
                return Some(WireMessage {
                    line: line_no,
                    pid: record.pid,
                    seq: record.seq,
                    direction: record.direction,
                    message,
                });
            }
        }
    })
}

/// The wire log at `path`, streamed ([`read_wire_messages`]). Errors: opening it.
pub fn wire_log_messages(
    path: &Path,
) -> std::io::Result<impl Iterator<Item = WireMessage> + use<>> {
    Ok(read_wire_messages(std::io::BufReader::with_capacity(
        64 * 1024,
        File::open(path)?,
    )))
}

/// Streams `messages`, pairing each request `pick` selects (keeping only what `pick` returns
/// of it) with its reply — the first later message of the same process with the same `id` and
/// no `method` — mapped by `reply`. Pairs by (process, id), like [`wire_exchanges`], but holds
/// only the selected requests' picks and replies, never the log. In request order.
pub fn pair_requests<T, U>(
    messages: impl IntoIterator<Item = WireMessage>,
    mut pick: impl FnMut(&WireMessage) -> Option<T>,
    mut reply: impl FnMut(&T, WireMessage) -> U,
) -> Vec<(T, Option<U>)> {
    let mut out: Vec<(T, Option<U>)> = Vec::new();
    let mut pending: std::collections::HashMap<(u32, String), usize> = Default::default();
    for m in messages {
        let Some(key) = m.exchange_key() else {
            continue;
        };
        if m.message.get("method").is_some() {
            if let Some(t) = pick(&m) {
                pending.insert(key, out.len());
                out.push((t, None));
            }
        } else if let Some(i) = pending.remove(&key) {
            let mapped = reply(&out[i].0, m);
            out[i].1 = Some(mapped);
        }
    }
    out
}

/// Each request (a message with a `method` and an `id`) of `messages` with its reply: the
/// first later message *of the same process* with the same `id` and no `method`. Pairing by
/// (process, id), never by id alone: two processes sharing a log both use id 1.
pub fn wire_exchanges(messages: &[WireMessage]) -> Vec<(&WireMessage, Option<&WireMessage>)> {
    let mut replies: std::collections::HashMap<(u32, String), Vec<usize>> = Default::default();
    for (i, m) in messages.iter().enumerate() {
        if m.message.get("method").is_none()
            && let Some(key) = m.exchange_key()
        {
            replies.entry(key).or_default().push(i);
        }
    }
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.message.get("method").is_some())
        .filter_map(|(i, m)| {
            let key = m.exchange_key()?;
            let reply = replies
                .get(&key)
                .and_then(|is| is.iter().find(|&&j| j > i))
                .map(|&j| &messages[j]);
            Some((m, reply))
        })
        .collect()
}

/// `CLOCK_MONOTONIC` now, in ns.
pub fn monotonic_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => (ts.tv_sec() as u64) * 1_000_000_000 + ts.tv_nsec() as u64,
        Err(_) => 0,
    }
}

/// One process's wire log (E1): assigns the sequence number and timestamps and appends, under
/// one lock that the stdio tee also holds across the transport write, so the order in the file
/// is the order on the wire.
///
/// Every message passes the process's redactor ([`crate::redact::process`]) before
/// it is written, so a credential the agent echoes (a provider key in a tool argument, an error
/// that repeats it, a database password) never reaches the file.
#[derive(Clone)]
pub struct WireLog {
    log: JsonlLog,
    seq: Arc<Mutex<u64>>,
    /// Message bytes recorded in full so far by this process (changed under `seq`'s lock).
    recorded: Arc<std::sync::atomic::AtomicU64>,
    pid: u32,
}

impl WireLog {
    /// Opens (or creates, 0600) the wire log at `path`, continuing its chain.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            log: JsonlLog::open(path)?,
            seq: Arc::new(Mutex::new(0)),
            recorded: Arc::default(),
            pid: std::process::id(),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Failed appends of this process not yet recorded in the file.
    pub fn pending_gap(&self) -> Option<PendingGap> {
        self.log.pending_gap()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.seq.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one message whose read or write has just completed.
    pub fn record(&self, direction: Direction, bytes: &[u8]) {
        let mut seq = self.lock();
        self.record_locked(&mut seq, direction, bytes, false);
    }

    fn record_locked(&self, seq: &mut u64, direction: Direction, bytes: &[u8], unterminated: bool) {
        let mono_ns = monotonic_ns();
        let bytes = crate::redact::process().redact_bytes(bytes).into_owned();
        use std::sync::atomic::Ordering;
        let recorded = self.recorded.load(Ordering::Relaxed);
        let elided = recorded + bytes.len() as u64 > WIRE_LOG_MESSAGE_BYTES;
        let (raw, raw_hex, len, sha256) = if elided {
            let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
            (None, None, Some(bytes.len() as u64), Some(digest))
        } else {
            self.recorded
                .store(recorded + bytes.len() as u64, Ordering::Relaxed);
            match std::str::from_utf8(&bytes) {
                Ok(text) => (Some(text.to_owned()), None, None, None),
                Err(_) => (None, Some(hex::encode(&bytes)), None, None),
            }
        };
        let record = WireRecord {
            seq: *seq,
            pid: self.pid,
            mono_ns,
            ts_ms: unix_ms_now(),
            direction,
            raw,
            raw_hex,
            unterminated,
            elided,
            len,
            sha256,
        };
        *seq += 1;
        if let Ok(v) = serde_json::to_value(&record) {
            // A failure is reported and later recorded as a gap by the log itself.
            let _ = self.log.append_numbered(&v, Some(record.seq));
        }
    }
}

/// Splits a byte stream into newline-delimited messages for the wire log.
struct LineTee {
    log: WireLog,
    direction: Direction,
    pending: Vec<u8>,
}

impl LineTee {
    fn new(log: WireLog, direction: Direction) -> Self {
        Self {
            log,
            direction,
            pending: Vec::new(),
        }
    }

    /// Feeds bytes that just crossed the transport; `seq` is the held wire-log lock.
    fn feed(&mut self, seq: &mut u64, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            self.log
                .record_locked(seq, self.direction, &line[..line.len() - 1], false);
        }
    }

    /// End of stream: a message without its newline is still logged.
    fn finish(&mut self, seq: &mut u64) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.log.record_locked(seq, self.direction, &rest, true);
        }
    }
}

/// Logs one whole wire message (an HTTP request or JSON response body); empty bodies are
/// skipped.
pub fn log_wire_message(log: &WireLog, direction: Direction, body: &[u8]) {
    if body.is_empty() {
        return;
    }
    log.record(direction, body);
}

/// Logs the messages of a Server-Sent Events stream as it passes (E1 wire log over Streamable
/// HTTP): each event's `data:` lines, joined by `\n`, are one message. Events without data
/// (priming, keep-alive comments) are not logged.
pub struct SseTee {
    log: WireLog,
    direction: Direction,
    pending: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl SseTee {
    pub fn new(log: WireLog, direction: Direction) -> Self {
        Self {
            log,
            direction,
            pending: Vec::new(),
            data: Vec::new(),
            has_data: false,
        }
    }

    /// Feeds the next chunk of the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                let data = std::mem::take(&mut self.data);
                if std::mem::take(&mut self.has_data) {
                    log_wire_message(&self.log, self.direction, &data);
                }
            } else if let Some(rest) = line.strip_prefix(b"data:") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.has_data = true;
                self.data
                    .extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
            }
        }
    }
}

/// An `AsyncRead` that logs every newline-delimited message it reads (E1 wire log), taking the
/// sequence number and timestamp as the read completes.
pub struct TeeReader<R> {
    inner: R,
    tee: LineTee,
}

impl<R> TeeReader<R> {
    pub fn new(inner: R, log: WireLog, direction: Direction) -> Self {
        Self {
            inner,
            tee: LineTee::new(log, direction),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TeeReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            let log = this.tee.log.clone();
            let mut seq = log.lock();
            let new = &buf.filled()[before..];
            if new.is_empty() && buf.remaining() > 0 {
                this.tee.finish(&mut seq);
            } else {
                this.tee.feed(&mut seq, new);
            }
        }
        poll
    }
}

/// An `AsyncWrite` that logs every newline-delimited message written through it (E1 wire log).
/// It holds the wire log's lock across the inner write and the logging, so a reply the peer
/// answers can never be logged after the answer is read (wire order).
pub struct TeeWriter<W> {
    inner: W,
    tee: LineTee,
}

impl<W> TeeWriter<W> {
    pub fn new(inner: W, log: WireLog, direction: Direction) -> Self {
        Self {
            inner,
            tee: LineTee::new(log, direction),
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for TeeWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let log = this.tee.log.clone();
        let mut seq = log.lock();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.tee.feed(&mut seq, &buf[..n]);
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Lost records one chained log shows: a gap record a writer left, or a jump in one
/// process's wire-log `seq` that no gap record names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogGap {
    /// 1-based line of the gap record, or of the record after the jump.
    pub line: usize,
    /// The process whose records are missing, when known.
    pub pid: Option<u32>,
    /// How many records are missing.
    pub records: u64,
    /// Their `seq` range (inclusive), for a wire log.
    pub seqs: Option<(u64, u64)>,
    /// The writer's error text, when a gap record names it; `None`: no gap record says why.
    pub error: Option<String>,
}

impl LogGap {
    /// `records 16–34 of pid 19627 missing (a failed write: …, gap record at line 17)`.
    pub fn describe(&self) -> String {
        let what = match (self.seqs, self.records) {
            (Some((a, b)), _) if a == b => format!("record {a}"),
            (Some((a, b)), _) => format!("records {a}–{b}"),
            (None, 1) => "1 record".to_owned(),
            (None, n) => format!("{n} records"),
        };
        let of = self.pid.map(|p| format!(" of pid {p}")).unwrap_or_default();
        let why = match &self.error {
            Some(e) => format!("a failed write: {e}; gap record at line {}", self.line),
            None => format!(
                "the sequence jumps at line {} and no gap record says why",
                self.line
            ),
        };
        format!("{what}{of} missing ({why})")
    }
}

/// What reading one hash-chained evidence log found (V1): the one reading of the
/// chain, the torn lines and the gaps, shared by `verify` and the canary's `report`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogAudit {
    /// Lines read.
    pub lines: usize,
    /// The first link that does not hold — a change: (1-based line, why).
    pub changed: Option<(usize, String)>,
    /// 1-based lines a write cut short (no newline, or not JSON and chained over by the next
    /// line).
    pub torn: Vec<usize>,
    pub gaps: Vec<LogGap>,
}

impl LogAudit {
    /// Nothing missing, torn or changed.
    pub fn complete(&self) -> bool {
        self.changed.is_none() && self.torn.is_empty() && self.gaps.is_empty()
    }
}

/// Reads one chained log's bytes: checks every link, names torn lines, gap records and jumps
/// in each process's wire-log `seq` (a jump a gap record covers is reported once, as that gap).
/// [`audit_file`] reads a file the same way, line by line.
pub fn audit_log(bytes: &[u8]) -> LogAudit {
    let mut auditor = LogAuditor::default();
    let mut lines = bytes.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        if lines.peek().is_none() {
            // The piece after the last newline: a torn last line, or nothing.
            if !line.is_empty() {
                auditor.line(line);
                return auditor.finish(true);
            }
            break;
        }
        auditor.line(line);
    }
    auditor.finish(false)
}

/// [`audit_log`] over a file, streamed: memory holds one line at a time (plus a digest and a
/// few fields of the line before), whatever the log's size. Errors: the file's I/O errors.
pub fn audit_file(path: &Path) -> std::io::Result<LogAudit> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, File::open(path)?);
    let mut auditor = LogAuditor::default();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(auditor.finish(false));
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            auditor.line(&buf);
        } else {
            auditor.line(&buf);
            return Ok(auditor.finish(true));
        }
    }
}

/// What the audit keeps of one line until the next one is read (the next line's link decides
/// whether this one is torn, and which of two lines a broken link names).
struct LineInfo {
    digest: String,
    /// A JSON object: its link, its gap record, its wire-log (pid, seq).
    object: Option<LineFields>,
}

struct LineFields {
    link: Option<String>,
    gap: Option<Value>,
    wire: Option<(u32, u64)>,
}

impl LineInfo {
    fn of(line: &[u8]) -> Self {
        let object = match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(mut map)) => {
                let seq = map.get("seq").and_then(Value::as_u64);
                let pid = map
                    .get("pid")
                    .and_then(Value::as_u64)
                    .and_then(|p| u32::try_from(p).ok());
                let wire = match (seq, pid, map.get("direction")) {
                    (Some(seq), Some(pid), Some(_)) => Some((pid, seq)),
                    _ => None,
                };
                Some(LineFields {
                    link: map
                        .get(CHAIN_FIELD)
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    gap: map.remove(GAP_FIELD),
                    wire,
                })
            }
            _ => None,
        };
        Self {
            digest: line_digest(line),
            object,
        }
    }
}

/// The streaming reader behind [`audit_log`] and [`audit_file`]: feed it each line (without
/// its newline) in order, then [`finish`](Self::finish).
#[derive(Default)]
pub struct LogAuditor {
    audit: LogAudit,
    /// The digest the next line's link must name.
    prev: Option<String>,
    /// Per pid: the last seq seen.
    last_seq: std::collections::BTreeMap<u32, u64>,
    /// Recorded gaps with seqs, by pid, not yet matched to a jump.
    recorded: Vec<(u32, (u64, u64))>,
    /// The line read but not yet judged (it waits for the next line's link).
    pending: Option<LineInfo>,
}

impl LogAuditor {
    /// Reads the next line (without its newline).
    pub fn line(&mut self, line: &[u8]) {
        let info = LineInfo::of(line);
        if let Some(previous) = self.pending.take() {
            self.judge(previous, Some(&info), false);
        }
        self.pending = Some(info);
    }

    /// The audit; `unterminated`: the last line fed had no newline (a write cut short).
    pub fn finish(mut self, unterminated: bool) -> LogAudit {
        if let Some(last) = self.pending.take() {
            self.judge(last, None, unterminated);
        }
        self.audit
    }

    /// Judges line `n` (the next to count) knowing the line after it (`None`: it is the last).
    fn judge(&mut self, info: LineInfo, next: Option<&LineInfo>, unterminated: bool) {
        self.audit.lines += 1;
        let n = self.audit.lines;
        let next_link = next
            .and_then(|l| l.object.as_ref())
            .and_then(|o| o.link.as_deref());
        let prev = self
            .prev
            .replace(info.digest.clone())
            .unwrap_or_else(|| CHAIN_GENESIS.to_owned());
        let Some(fields) = info.object else {
            // Not a JSON object: torn when it is the unterminated last line, or when the next
            // line chains over it (a later append ended it); otherwise a change.
            let chained_over = next_link.is_some_and(|link| link == info.digest);
            if (next.is_none() && unterminated) || chained_over {
                self.audit.torn.push(n);
            } else if self.audit.changed.is_none() {
                self.audit.changed = Some((
                    n,
                    format!("line {n} is not JSON and nothing chains over it: it was changed"),
                ));
            }
            return;
        };
        match fields.link.as_deref() {
            Some(link) if link == prev => {}
            Some(_) if self.audit.changed.is_none() => {
                // Line n's link does not name line n-1's digest: either line n-1 changed, or
                // line n's own bytes (its link) did — then line n+1's link breaks too.
                let next_breaks = next_link.is_some_and(|link| link != info.digest);
                let at = if next_breaks || n == 1 { n } else { n - 1 };
                self.audit.changed = Some((
                    at,
                    format!(
                        "line {n}'s {CHAIN_FIELD} does not match the digest of line {} — line \
                         {at} was changed, removed or inserted",
                        n - 1
                    ),
                ));
            }
            None if self.audit.changed.is_none() => {
                self.audit.changed = Some((n, format!("line {n} carries no {CHAIN_FIELD}")));
            }
            _ => {}
        }
        if let Some(gap) = fields.gap {
            let pid = gap["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
            let seqs = gap["first_seq"].as_u64().zip(gap["last_seq"].as_u64());
            if let (Some(p), Some(s)) = (pid, seqs) {
                self.recorded.push((p, s));
            }
            let records = gap["records"].as_u64().unwrap_or(0);
            if records > 0 {
                self.audit.gaps.push(LogGap {
                    line: n,
                    pid,
                    records,
                    seqs,
                    error: Some(gap["error"].as_str().unwrap_or("unknown").to_owned()),
                });
            }
            return;
        }
        let Some((pid, seq)) = fields.wire else {
            return;
        };
        let expected = self.last_seq.get(&pid).map_or(0, |s| s + 1);
        if seq > expected {
            let missing = (expected, seq - 1);
            let covered = self
                .recorded
                .iter()
                .any(|(p, (a, b))| *p == pid && *a <= missing.0 && *b >= missing.1);
            if !covered {
                self.audit.gaps.push(LogGap {
                    line: n,
                    pid: Some(pid),
                    records: seq - expected,
                    seqs: Some(missing),
                    error: None,
                });
            }
        }
        self.last_seq.insert(pid, seq);
    }
}

/// The run manifest (E1): written once, when the canary first initializes targets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunManifest {
    pub run_id: String,
    pub started_ms: f64,
    pub written_ms: f64,
    /// The SHA embedded at build time (`build.rs`), else `unknown` ([`source_sha`]).
    pub source_sha: String,
    pub source_sha_origin: String,
    /// Requested model/provider identity and effective reasoning setting, as recorded by the
    /// operator (`record`). Attested by the host, not verified here.
    pub agent: AgentIdentity,
    /// Initial target hashes, by target name (C1).
    pub initial_targets: Vec<InitialTarget>,
    /// Effective configuration of the processes this run starts.
    pub configuration: Value,
    pub gate2: String,
}

/// What the operator recorded about the agent under test.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentIdentity {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub reasoning: Option<String>,
}

/// One target's initial state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InitialTarget {
    pub target: String,
    pub language: String,
    pub sha256: String,
    pub version: u64,
}

/// The executed source SHA and where it came from (E1): the SHA embedded at build time
/// (`PATCHDIFF_BUILD_SHA`, see `build.rs`: the commit the binary was built from, or the value the
/// release build was given), else `unknown`. Never read from a checkout at run time :
/// the binary runs where no checkout is, and a checkout that moved after the build would name
/// sources that were not executed.
pub fn source_sha() -> (String, String) {
    match crate::config::BUILD_SHA {
        Some(built) => (built.to_owned(), "embedded at build".to_owned()),
        None => (
            "unknown".to_owned(),
            "not embedded: built without git and without PATCHDIFF_BUILD_SHA".to_owned(),
        ),
    }
}

/// The run's file digests (V1), `sha256sum` format: `<hex>  <relative path>` per line, sorted by
/// path; `sha256sum -c SHA256SUMS` in the run directory checks them too.
pub const SUMS_FILE: &str = "SHA256SUMS";
/// The run's final digest (V1): the digest of `manifest.json` and of [`SUMS_FILE`], created
/// once at `report`. The run manifest itself is written once at `init` and never rewritten
/// (E2), so the final digest lives beside it rather than in it.
pub const SEAL_FILE: &str = "manifest.seal";
/// The operator's signature over [`SEAL_FILE`] (a DSSE envelope, `crate::seal`), written
/// after the seal, so neither `SHA256SUMS` nor the seal lists it.
pub const SIGNATURE_FILE: &str = "SEAL.sig.json";
/// First line of a seal.
pub const SEAL_HEADER: &str = "patchdiff-seal 1";

/// SHA-256 (hex) of a file, read in 64 KiB blocks.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// SQLite's volatile side files of a database (`X.sqlite-wal`, `-shm`, `-journal`): never
/// sealed. The seal checkpoints the database first, so its content is in the main
/// file; `verify` names a non-empty WAL as writes after the seal and never replays it.
pub fn is_volatile_side_file(rel: &str) -> bool {
    [".sqlite-wal", ".sqlite-shm", ".sqlite-journal"]
        .iter()
        .any(|s| rel.ends_with(s))
}

/// Every regular file under `root` (recursively; symlinks are not followed) except the sums,
/// the seal, its signature and SQLite's volatile side files ([`is_volatile_side_file`]), as `/`-separated
/// relative paths, sorted.
pub fn evidence_files(root: &Path) -> std::io::Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                walk(root, &path, out)?;
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .map_err(std::io::Error::other)?
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                if rel != SUMS_FILE
                    && rel != SEAL_FILE
                    && rel != SIGNATURE_FILE
                    && !is_volatile_side_file(&rel)
                {
                    out.push(rel);
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// Whether a run file is a hash-chained evidence log: every JSONL file of a run (wire logs,
/// transcript, host streams, perf events and memory samples).
pub fn is_chained(rel: &str) -> bool {
    rel.ends_with(".jsonl")
}

/// The sealed run directory `path` would be written into, if any (no command of ours
/// writes into a sealed run): the nearest ancestor of `path` holding [`SEAL_FILE`]. `path`
/// need not exist; relative paths are taken from the current directory.
pub fn sealed_run_containing(path: &Path) -> Option<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    // Resolve what exists (symlinks, `..`), keep the rest as given.
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
    let mut resolved = existing.canonicalize().ok()?;
    for part in rest.iter().rev() {
        resolved.push(part);
    }
    resolved
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(SEAL_FILE).is_file())
        .map(Path::to_path_buf)
}

/// `Err` naming the sealed run when `path` lies inside one ([`sealed_run_containing`]).
pub fn refuse_sealed_destination(path: &Path) -> Result<(), String> {
    match sealed_run_containing(path) {
        Some(run) => Err(format!(
            "refusing to write {}: it is inside the sealed run {} (its {SEAL_FILE} binds every \
             file; anything added would fail `patchdiff verify`); write it outside the run",
            path.display(),
            run.display()
        )),
        None => Ok(()),
    }
}

/// The seal's exact text for these digests.
pub fn seal_text(run_id: &str, manifest_sha256: Option<&str>, sums_sha256: &str) -> String {
    let mut text = format!("{SEAL_HEADER}\nrun {run_id}\n");
    if let Some(m) = manifest_sha256 {
        text.push_str(&format!("SHA256 (manifest.json) = {m}\n"));
    }
    text.push_str(&format!("SHA256 ({SUMS_FILE}) = {sums_sha256}\n"));
    text
}

/// Seals a finished run (V1): writes [`SUMS_FILE`] over every file in the run directory, then
/// [`SEAL_FILE`]; both are created exclusively. Returns the digest of the sums. Nothing may
/// write into the run afterwards (its processes are stopped first).
pub fn seal_run(run: &RunDir) -> std::io::Result<String> {
    let mut sums = String::new();
    for rel in evidence_files(&run.path)? {
        sums.push_str(&format!("{}  {rel}\n", file_digest(&run.path.join(&rel))?));
    }
    write_new_private(&run.path.join(SUMS_FILE), sums.as_bytes())?;
    let sums_sha256 = line_digest(sums.as_bytes());
    let manifest_sha256 = match file_digest(&run.manifest()) {
        Ok(d) => Some(d),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    write_new_private(
        &run.path.join(SEAL_FILE),
        seal_text(&run.run_id, manifest_sha256.as_deref(), &sums_sha256).as_bytes(),
    )?;
    Ok(sums_sha256)
}

/// A run's evidence directory and its standard file names.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub run_id: String,
    pub path: PathBuf,
}

impl RunDir {
    /// Creates `<runs_root>/<run_id>` as a private directory (0700). Fails if it exists.
    pub fn create(runs_root: &Path, run_id: &str) -> std::io::Result<Self> {
        create_private_dir(runs_root)?;
        let path = runs_root.join(run_id);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(Self {
            run_id: run_id.to_owned(),
            path,
        })
    }

    pub fn manifest(&self) -> PathBuf {
        self.path.join("manifest.json")
    }
    /// Wire log of one MCP process, e.g. `observed.mcp.jsonl`.
    pub fn wire_log(&self, process: &str) -> PathBuf {
        self.path.join(format!("{process}.mcp.jsonl"))
    }
    /// Perf events of one MCP process, e.g. `observed.perf.jsonl`.
    pub fn perf_events(&self, process: &str) -> PathBuf {
        self.path.join(format!("{process}.perf.jsonl"))
    }
    /// Captured stderr of the Waymark worker generations of one process (E1, W3).
    pub fn worker_stderr_log(&self, process: &str) -> PathBuf {
        self.path.join(format!("worker.{process}.stderr.log"))
    }
    /// Captured stderr of one process.
    pub fn stderr_log(&self, process: &str) -> PathBuf {
        self.path.join(format!("{process}.stderr.log"))
    }
    pub fn transcript(&self) -> PathBuf {
        self.path.join("transcript.jsonl")
    }
    pub fn exports(&self) -> PathBuf {
        self.path.join("export")
    }
    pub fn database(&self) -> PathBuf {
        self.path.join("store.sqlite")
    }
    pub fn report(&self, ext: &str) -> PathBuf {
        self.path.join(format!("report.{ext}"))
    }

    /// Writes the run manifest (once; E2).
    pub fn write_manifest(&self, manifest: &RunManifest) -> std::io::Result<()> {
        // The manifest passes this process's redactor, like every log we write.
        let text = serde_json::to_string_pretty(manifest)?;
        write_new_private(
            &self.manifest(),
            crate::redact::process().redact(&text).as_bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn run_dir_and_files_are_private() {
        let root = tempfile::tempdir().unwrap();
        let run = RunDir::create(&root.path().join("runs"), "r-1").unwrap();
        let mode = std::fs::metadata(&run.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let log = JsonlLog::open(&run.transcript()).unwrap();
        log.append(&serde_json::json!({"a": 1})).unwrap();
        let mode = std::fs::metadata(run.transcript())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn an_existing_runs_root_keeps_its_mode() {
        let root = tempfile::tempdir().unwrap();
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let run = RunDir::create(&shared, "r-3").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&shared), 0o1777);
        assert_eq!(mode(&run.path), 0o700);
    }

    #[test]
    fn an_existing_evidence_file_readable_by_others_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = JsonlLog::open(&path).err().expect("refused");
        assert!(err.to_string().contains("mode 0644"), "{err}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
    }

    #[test]
    fn manifest_is_never_rewritten() {
        let root = tempfile::tempdir().unwrap();
        let run = RunDir::create(root.path(), "r-2").unwrap();
        let manifest = RunManifest {
            run_id: "r-2".into(),
            started_ms: 1.0,
            written_ms: 2.0,
            source_sha: "abc".into(),
            source_sha_origin: "test".into(),
            agent: AgentIdentity::default(),
            initial_targets: vec![],
            configuration: Value::Null,
            gate2: "closed".into(),
        };
        run.write_manifest(&manifest).unwrap();
        let err = run.write_manifest(&manifest).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    }

    #[tokio::test]
    async fn tee_logs_each_message_exactly_in_order_and_passes_bytes_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let log = WireLog::open(&path).unwrap();
        let input: &[u8] = b"{\"b\":1,  \"a\":2}\n\n{\"id\":2}\nnot json\npartial";
        let mut reader = TeeReader::new(input, log.clone(), Direction::Request);
        let mut seen = Vec::new();
        reader.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, input);
        let mut writer = TeeWriter::new(Vec::new(), log, Direction::Result);
        writer.write_all(b"{\"id\":1,").await.unwrap();
        writer.write_all(b"\"result\":{}}\n").await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let records: Vec<WireRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let logged: Vec<_> = records
            .iter()
            .map(|r| (r.seq, r.direction, r.bytes()))
            .collect();
        assert_eq!(
            logged,
            vec![
                (0, Direction::Request, b"{\"b\":1,  \"a\":2}".to_vec()),
                (1, Direction::Request, b"".to_vec()),
                (2, Direction::Request, b"{\"id\":2}".to_vec()),
                (3, Direction::Request, b"not json".to_vec()),
                (4, Direction::Request, b"partial".to_vec()),
                (5, Direction::Result, b"{\"id\":1,\"result\":{}}".to_vec()),
            ]
        );
        assert!(records[4].unterminated);
        assert!(records.windows(2).all(|w| w[0].mono_ns <= w[1].mono_ns));
    }

    /// A pipe whose peer answers the moment a message is written: its `poll_write` hands the
    /// bytes over, then lets the peer's reply be read and logged on another thread, waiting
    /// (up to 300 ms) for that to happen before returning — as a fast peer can.
    struct AnsweringPipe {
        log: WireLog,
    }

    impl AsyncWrite for AnsweringPipe {
        fn poll_write(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let log = self.log.clone();
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                log.record(Direction::Request, b"{\"id\":27}");
                let _ = done_tx.send(());
            });
            // With the tee holding the log's lock across this write, the reply cannot be
            // logged yet; without it, it would be logged first.
            let _ = done_rx.recv_timeout(std::time::Duration::from_millis(300));
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_reply_is_never_logged_before_the_message_it_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let log = WireLog::open(&path).unwrap();
        let mut writer = TeeWriter::new(
            AnsweringPipe { log: log.clone() },
            log.clone(),
            Direction::Result,
        );
        writer.write_all(b"{\"id\":26}\n").await.unwrap();
        // Let the answering thread finish logging.
        drop(writer);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let records = loop {
            let text = std::fs::read_to_string(&path).unwrap();
            let records: Vec<WireRecord> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if records.len() == 2 || std::time::Instant::now() > deadline {
                break records;
            }
            std::thread::yield_now();
        };
        let order: Vec<(u64, Vec<u8>)> = records.iter().map(|r| (r.seq, r.bytes())).collect();
        assert_eq!(
            order,
            vec![(0, b"{\"id\":26}".to_vec()), (1, b"{\"id\":27}".to_vec())]
        );
    }

    #[test]
    fn every_line_carries_the_digest_of_the_line_before_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        JsonlLog::open(&path)
            .unwrap()
            .append(&serde_json::json!({"n": 1}))
            .unwrap();
        let log = JsonlLog::open(&path).unwrap();
        log.append(&serde_json::json!({"n": 2})).unwrap();
        log.append(&serde_json::json!({"n": 3})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let prev = |l: &str| {
            serde_json::from_str::<Value>(l).unwrap()[CHAIN_FIELD]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(prev(lines[0]), CHAIN_GENESIS);
        assert_eq!(prev(lines[1]), line_digest(lines[0].as_bytes()));
        assert_eq!(prev(lines[2]), line_digest(lines[1].as_bytes()));
    }

    #[test]
    fn a_line_torn_by_an_earlier_write_is_ended_and_named_torn_not_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let log = JsonlLog::open(&path).unwrap();
        log.append(&serde_json::json!({"n": 1})).unwrap();
        // A write another process's crash cut short: no newline.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"prev_sha256\":\"00").unwrap();
        drop(f);
        JsonlLog::open(&path)
            .unwrap()
            .append(&serde_json::json!({"n": 2}))
            .unwrap();
        let audit = audit_log(&std::fs::read(&path).unwrap());
        assert_eq!(audit.lines, 4, "{audit:?}");
        assert_eq!(audit.torn, [2]);
        assert!(audit.changed.is_none(), "{audit:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().nth(2).unwrap().contains(GAP_FIELD), "{text}");
    }

    #[test]
    fn a_failed_append_is_counted_with_its_seq_until_a_gap_record_names_it() {
        // /dev/full: every write fails with ENOSPC (a real fault, no root needed).
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open("/dev/full")
            .unwrap();
        let mut writer = ChainWriter::new(Path::new("/dev/full"), file);
        for seq in [16, 17, 18] {
            let err = writer.append("{\"seq\":1}", Some(seq)).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(28));
        }
        let gap = writer.pending_gap().unwrap();
        assert_eq!((gap.records, gap.seqs), (3, Some((16, 18))));
        assert!(gap.error.contains("No space left"), "{}", gap.error);
        let gap = LogGap {
            line: 9,
            pid: Some(7),
            records: 3,
            seqs: Some((16, 18)),
            error: Some("No space left on device (os error 28)".into()),
        };
        assert_eq!(
            gap.describe(),
            "records 16–18 of pid 7 missing (a failed write: No space left on device (os error \
             28); gap record at line 9)"
        );
    }

    #[test]
    fn sse_tee_logs_each_data_event_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let log = WireLog::open(&dir.path().join("sse.jsonl")).unwrap();
        let mut tee = SseTee::new(log, Direction::Result);
        let stream = b"id: 0\nretry: 3000\ndata:\n\ndata: {\"id\":1,\r\ndata: \"result\":{}}\n\n: keep-alive\n\ndata: {\"id\":2}\n\n";
        for chunk in stream.chunks(5) {
            tee.feed(chunk);
        }
        let text = std::fs::read_to_string(dir.path().join("sse.jsonl")).unwrap();
        let messages: Vec<Vec<u8>> = text
            .lines()
            .map(|l| serde_json::from_str::<WireRecord>(l).unwrap().bytes())
            .collect();
        assert_eq!(
            messages,
            vec![
                b"{\"id\":1,\n\"result\":{}}".to_vec(),
                b"{\"id\":2}".to_vec()
            ]
        );
    }

    /// The streamed audit reads a file exactly as `audit_log` reads its bytes: a clean log, a
    /// changed line, a torn last line, a torn line ended by the next append, a `seq` jump.
    #[test]
    fn audit_file_streams_to_the_same_audit_as_audit_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.mcp.jsonl");
        let log = WireLog::open(&path).unwrap();
        for i in 0..6 {
            log.record(Direction::Request, format!("{{\"id\":{i}}}").as_bytes());
        }
        let clean = std::fs::read(&path).unwrap();
        let text = String::from_utf8(clean.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let changed = text.replacen("\"seq\":2", "\"seq\":7", 1).into_bytes();
        assert_ne!(changed, clean);
        let torn_last = clean[..clean.len() - 7].to_vec();
        let mut torn_inside = lines[..2].join("\n").into_bytes();
        torn_inside.extend_from_slice(b"\n{\"cut");
        let digest = line_digest(b"{\"cut");
        torn_inside.extend_from_slice(
            format!("\n{{\"{CHAIN_FIELD}\":\"{digest}\",\"n\":1}}\n").as_bytes(),
        );
        let mut jumped = lines[..2].join("\n");
        jumped.push('\n');
        jumped.push_str(lines[4]);
        jumped.push('\n');
        for bytes in [
            clean,
            changed,
            torn_last,
            torn_inside,
            jumped.into_bytes(),
            Vec::new(),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(audit_file(&path).unwrap(), audit_log(&bytes));
        }
        std::fs::write(&path, text.replacen("\"seq\":2", "\"seq\":7", 1)).unwrap();
        assert_eq!(audit_file(&path).unwrap().changed.unwrap().0, 3);
    }

    /// Streamed pairing keeps only the requests picked and pairs by (process, id): two
    /// processes sharing one log both use id 1.
    #[test]
    fn pair_requests_pairs_by_process_and_id_keeping_only_the_picked() {
        let message = |line, pid, json: &str| WireMessage {
            line,
            pid,
            seq: 0,
            direction: Direction::Request,
            message: serde_json::from_str(json).unwrap(),
        };
        let log = vec![
            message(
                1,
                10,
                r#"{"id":1,"method":"tools/call","params":{"name":"a"}}"#,
            ),
            message(
                2,
                20,
                r#"{"id":1,"method":"tools/call","params":{"name":"b"}}"#,
            ),
            message(3, 10, r#"{"id":2,"method":"tools/list"}"#),
            message(4, 20, r#"{"id":1,"result":"for b"}"#),
            message(5, 10, r#"{"id":2,"result":"list"}"#),
            message(6, 10, r#"{"id":1,"result":"for a"}"#),
            message(
                7,
                30,
                r#"{"id":1,"method":"tools/call","params":{"name":"c"}}"#,
            ),
        ];
        let pairs = pair_requests(
            log,
            |m| {
                (m.message["method"] == "tools/call")
                    .then(|| m.message["params"]["name"].as_str().unwrap().to_owned())
            },
            |_, reply| {
                (
                    reply.line,
                    reply.message["result"].as_str().unwrap().to_owned(),
                )
            },
        );
        assert_eq!(
            pairs,
            vec![
                ("a".to_owned(), Some((6, "for a".to_owned()))),
                ("b".to_owned(), Some((4, "for b".to_owned()))),
                ("c".to_owned(), None),
            ]
        );
    }
}

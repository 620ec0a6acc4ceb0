//! Writing wire logs (E1): [`WireLog`] numbers and timestamps each message under one lock,
//! and the tees (stdio lines, HTTP bodies, SSE events) hand it each message's exact bytes.

use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::wire::{Direction, WIRE_LOG_MESSAGE_BYTES, WireRecord};
use super::{JsonlLog, PendingGap};
use crate::telemetry::unix_ms_now;

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

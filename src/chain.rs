//! The hash chain of append-only JSONL logs (V1): each line carries the SHA-256 (hex) of the
//! line before it. Used by `evidence` (wire logs, transcripts) and `telemetry` (perf events,
//! memory samples); it uses nothing of the crate, so neither needs the other for it.
//! [`ChainWriter`] is the one writer of such logs: cross-process `flock` around
//! read-tail-and-append, and failed appends recorded as gap records.

use std::fs::File;
use std::path::Path;

/// Chain value of a log's first line: 64 zeros (V1).
pub const CHAIN_GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The field each evidence JSONL line carries: the SHA-256 (hex) of the previous line's bytes,
/// newline excluded, or [`CHAIN_GENESIS`] on the first line (V1).
pub const CHAIN_FIELD: &str = "prev_sha256";

/// SHA-256 (hex) of one log line's bytes, newline excluded: the next line's [`CHAIN_FIELD`].
pub fn line_digest(line: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(line))
}

/// The chain value to continue a log with: the digest of its last line, or the genesis value
/// for an empty or missing file. Reads backwards from the end, so it costs one line, not the
/// file.
pub(crate) fn chain_tail(file: &mut File) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(CHAIN_GENESIS.to_owned());
    }
    // The last line: everything after the last newline that precedes the final byte.
    let mut tail: Vec<u8> = Vec::new();
    let mut pos = len;
    let mut first = true;
    // 4 KiB first (a wire record is usually shorter), doubling to 64 KiB for long lines.
    let mut chunk_len: u64 = 4 * 1024;
    loop {
        let step = pos.min(chunk_len);
        chunk_len = (chunk_len * 2).min(64 * 1024);
        pos -= step;
        let mut chunk = vec![0u8; step as usize];
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(&mut chunk)?;
        if first {
            first = false;
            if chunk.last() == Some(&b'\n') {
                chunk.pop();
            }
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        if let Some(nl) = tail.iter().rposition(|&b| b == b'\n') {
            tail.drain(..=nl);
            break;
        }
        if pos == 0 {
            break;
        }
    }
    Ok(line_digest(&tail))
}

/// The key of a gap record: the line a [`ChainWriter`] appends when writing works again after
/// failed appends, so a lost record is never silent. Its value is an object:
/// `log` (file name), `pid` (the writing process), `records` (how many records were lost),
/// `first_seq`/`last_seq` (their wire-log `seq` range, when the log numbers its records),
/// `error` (the first failure's text), `first_failed_ms`/`last_failed_ms` (Unix ms).
pub const GAP_FIELD: &str = "evidence_gap";

/// Failed appends not yet recorded in the log (one fault episode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingGap {
    /// Records lost so far.
    pub records: u64,
    /// The wire-log `seq` range of the lost records, when the caller numbers them.
    pub seqs: Option<(u64, u64)>,
    /// The first failure's text.
    pub error: String,
    pub first_failed_ms: u64,
    pub last_failed_ms: u64,
}

/// Unix ms now (the chain module uses nothing of the crate, so not `telemetry::unix_ms_now`).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The one writer of hash-chained JSONL logs (V1; wire logs, transcripts, host streams, perf
/// events and memory samples all append through it).
///
/// - **Several writers, one chain.** Every append takes an exclusive `flock(2)` on
///   the file, reads the chain's tail *from the file* (cached while nobody else appended: the
///   file still ends where this writer left it), writes the line and unlocks, so two processes
///   started from one printed configuration interleave whole, correctly chained lines.
/// - **A failed append is never silent.** It is reported at once on stderr (once per fault
///   episode, with the error), counted, and when an append succeeds again a [`GAP_FIELD`]
///   record naming the log, the process, how many records (and which `seq`s) were lost goes
///   first. A line a failed write left torn (no newline) is terminated, so it stays one line of
///   the chain and the gap record after it says why. [`ChainWriter::pending_gap`] tells the
///   owner about a fault not yet recorded; dropping the writer tries once more to record it.
///
/// Lines are `{"prev_sha256":"<hex>",…}`: the chain field first, then the body's fields.
pub struct ChainWriter {
    path: std::path::PathBuf,
    file: File,
    /// (file length after this writer's last append, that line's digest).
    known_end: Option<(u64, String)>,
    pending: Option<PendingGap>,
    pid: u32,
}

impl ChainWriter {
    /// Wraps `file`, opened for appending at `path` (the caller owns the open: permissions,
    /// `O_NOFOLLOW`). Nothing is read or written yet.
    pub fn new(path: &Path, file: File) -> Self {
        Self {
            path: path.to_path_buf(),
            file,
            known_end: None,
            pending: None,
            pid: std::process::id(),
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Failed appends not yet recorded by a gap record, if any.
    pub fn pending_gap(&self) -> Option<&PendingGap> {
        self.pending.as_ref()
    }

    fn log_name(&self) -> String {
        self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// Appends `body` (one serialized JSON object, no newline) as one chained line; `seq` is
    /// the record's wire-log sequence number, if it has one (named in a later gap record when
    /// this append fails). Returns the bytes written for this record (a preceding gap record
    /// and a torn line's terminator not counted). On failure the record is counted as lost,
    /// reported on stderr when it starts a fault episode, and the error returned.
    pub fn append(&mut self, body: &str, seq: Option<u64>) -> std::io::Result<u64> {
        match self.try_append(body) {
            Ok(n) => Ok(n),
            Err(e) => {
                self.lost(seq, &e);
                Err(e)
            }
        }
    }

    fn lost(&mut self, seq: Option<u64>, e: &std::io::Error) {
        use std::io::Write;
        let now = now_ms();
        match &mut self.pending {
            Some(p) => {
                p.records += 1;
                p.last_failed_ms = now;
                if let Some(s) = seq {
                    p.seqs = Some(p.seqs.map_or((s, s), |(a, b)| (a.min(s), b.max(s))));
                }
            }
            None => {
                // Never `eprintln!`: it panics when stderr itself is on the full disk.
                let _ = writeln!(
                    std::io::stderr(),
                    "patchdiff: EVIDENCE WRITE FAILED: {}: {e}; records are being lost (pid {}); a \
                     gap record will name them when writing works again, and the run cannot pass",
                    self.path.display(),
                    self.pid
                );
                self.pending = Some(PendingGap {
                    records: 1,
                    seqs: seq.map(|s| (s, s)),
                    error: e.to_string(),
                    first_failed_ms: now,
                    last_failed_ms: now,
                });
            }
        }
    }

    /// The gap record's body for `gap`.
    fn gap_body(&self, gap: &PendingGap, torn: bool) -> String {
        let mut inner = serde_json::Map::new();
        inner.insert("log".into(), self.log_name().into());
        inner.insert("pid".into(), self.pid.into());
        inner.insert("records".into(), gap.records.into());
        if let Some((a, b)) = gap.seqs {
            inner.insert("first_seq".into(), a.into());
            inner.insert("last_seq".into(), b.into());
        }
        inner.insert("error".into(), gap.error.clone().into());
        inner.insert("first_failed_ms".into(), gap.first_failed_ms.into());
        inner.insert("last_failed_ms".into(), gap.last_failed_ms.into());
        if torn {
            inner.insert("torn_line_before".into(), true.into());
        }
        serde_json::json!({ GAP_FIELD: inner, "pid": self.pid, "ts_ms": now_ms() }).to_string()
    }

    /// A read-only open of the very file this writer appends to (the writer's descriptor is
    /// write-only): through `/proc/self/fd`, so a path swapped since the open is not followed.
    fn reader(&self) -> std::io::Result<File> {
        use std::os::fd::AsRawFd;
        File::open(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
            .or_else(|_| File::open(&self.path))
    }

    fn try_append(&mut self, body: &str) -> std::io::Result<u64> {
        use std::io::Write;
        let lock =
            nix::fcntl::Flock::lock(self.file.try_clone()?, nix::fcntl::FlockArg::LockExclusive)
                .map_err(|(_, errno)| std::io::Error::from(errno))?;
        let mut file: &File = &lock;
        let len = file.metadata()?.len();
        let (mut prev, torn) = match &self.known_end {
            Some((end, digest)) if *end == len => (digest.clone(), false),
            _ => {
                let mut reader = self.reader()?;
                (
                    chain_tail(&mut reader)?,
                    len > 0 && !ends_with_newline(&mut reader, len)?,
                )
            }
        };
        let mut end = len;
        if torn {
            // A write cut short (ours or another process's) left a line without its newline:
            // end it, so it stays one (torn) line of the chain.
            file.write_all(b"\n")?;
            end += 1;
            if self.pending.is_none() {
                self.pending = Some(PendingGap {
                    records: 0,
                    seqs: None,
                    error: "a line was left torn by an earlier write".into(),
                    first_failed_ms: now_ms(),
                    last_failed_ms: now_ms(),
                });
            }
        }
        if let Some(gap) = self.pending.clone() {
            let line = chained(&prev, &self.gap_body(&gap, torn));
            file.write_all(line.as_bytes())?;
            end += line.len() as u64;
            prev = line_digest(&line.as_bytes()[..line.len() - 1]);
            self.known_end = Some((end, prev.clone()));
            self.pending = None;
            let what = if gap.records == 0 {
                "a torn line was ended and".to_owned()
            } else {
                format!("{} lost record(s) are", gap.records)
            };
            let _ = writeln!(
                std::io::stderr(),
                "patchdiff: evidence writes to {} work again; {what} named by a gap record",
                self.path.display(),
            );
        }
        let line = chained(&prev, body);
        self.known_end = None;
        file.write_all(line.as_bytes())?;
        end += line.len() as u64;
        self.known_end = Some((end, line_digest(&line.as_bytes()[..line.len() - 1])));
        drop(lock);
        Ok(line.len() as u64)
    }
}

impl Drop for ChainWriter {
    /// A fault not yet recorded gets one last chance: the gap record alone.
    fn drop(&mut self) {
        if let Some(gap) = self.pending.clone() {
            let body = self.gap_body(&gap, false);
            // The gap record is itself the record here; its loss is already on stderr.
            if self.try_append(&body).is_ok() {
                self.pending = None;
            }
        }
    }
}

/// `body` (a serialized JSON object) with [`CHAIN_FIELD`] = `prev` first, and its newline.
pub fn chained(prev: &str, body: &str) -> String {
    let rest = body.strip_prefix('{').unwrap_or(body);
    let sep = if rest.starts_with('}') { "" } else { "," };
    format!("{{\"{CHAIN_FIELD}\":\"{prev}\"{sep}{rest}\n")
}

fn ends_with_newline(file: &mut File, len: u64) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// The chain value to continue the log at `path` with (its last line's digest, or
/// [`CHAIN_GENESIS`] when it is empty or missing).
pub fn chain_tail_of(path: &Path) -> std::io::Result<String> {
    match File::open(path) {
        Ok(mut f) => chain_tail(&mut f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CHAIN_GENESIS.to_owned()),
        Err(e) => Err(e),
    }
}

//! Auditing a chained log (V1): its links, torn lines and lost records ([`LogGap`]s: gap
//! records and per-process `seq` jumps), streamed with one line of lookahead; shared by
//! `verify` and `report`.

use std::fs::File;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::{CHAIN_FIELD, CHAIN_GENESIS, GAP_FIELD, line_digest};

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

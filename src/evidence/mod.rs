//! Evidence (SPEC E1, E2): the private per-run directory (0700, files 0600), append-only JSONL
//! logs (MCP request/result wire logs per process, the agent transcript), and the run manifest.
//!
//! Nothing here rewrites a file: logs are opened `O_APPEND`, and the manifest is created with
//! `O_EXCL`, once per run.
//!
//! Laid out by what a run holds: [`run_dir`] names every file of a run directory (the leaf
//! every path is built from), [`wire`] reads wire logs (the one typed reader, pairing by
//! (process, id)), [`wire_log`] writes them (the tees), [`audit`] checks a chained log's
//! links and gaps, [`manifest`] is the run manifest, [`sums`] the seal's digests.

pub mod audit;
pub mod manifest;
pub mod run_dir;
pub mod sums;
pub mod wire;
pub mod wire_log;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

pub use crate::owned_fs::{create_private_dir, open_append_private, write_new_private};

pub use crate::chain::{
    CHAIN_FIELD, CHAIN_GENESIS, ChainWriter, GAP_FIELD, PendingGap, chain_tail_of, line_digest,
};
pub use audit::{LogAudit, LogAuditor, LogGap, audit_file, audit_log};
pub use manifest::{AgentIdentity, InitialTarget, RunManifest, source_sha};
pub use run_dir::RunDir;
pub use sums::{
    SEAL_FILE, SEAL_HEADER, SIGNATURE_FILE, SUMS_FILE, evidence_files, file_digest, is_chained,
    is_volatile_side_file, refuse_sealed_destination, seal_run, seal_text, sealed_run_containing,
};
pub use wire::{
    Direction, ExchangeKey, WIRE_LOG_MESSAGE_BYTES, WireMessage, WireRecord, pair_requests,
    read_wire_messages, wire_exchanges, wire_log_messages, wire_messages,
};
pub use wire_log::{SseTee, TeeReader, TeeWriter, WireLog, log_wire_message, monotonic_ns};

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
    pub(crate) fn append_numbered(&self, record: &Value, seq: Option<u64>) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

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

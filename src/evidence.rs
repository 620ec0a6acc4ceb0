//! Evidence (SPEC E1, E2): the private per-run directory (0700, files 0600), append-only JSONL
//! logs (MCP request/result wire logs per process, the agent transcript), and the run manifest.
//!
//! Nothing here rewrites a file: logs are opened `O_APPEND`, and the manifest is created with
//! `O_EXCL`, once per run.

use std::fs::File;
use std::io::Write;
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

/// An append-only JSONL log shared between tasks. Each record gets `ts_ms` (Unix ms).
#[derive(Clone)]
pub struct JsonlLog {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl JsonlLog {
    /// Opens (or creates, 0600) the log at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(open_append_private(path)?)),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as a single line.
    pub fn append(&self, record: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(&line)
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

/// One line of an MCP request/result log: exactly what crossed the wire, in order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireRecord {
    pub ts_ms: f64,
    pub direction: Direction,
    /// The JSON-RPC message as parsed from the wire, or the raw line as a string when it was
    /// not JSON.
    pub message: Value,
}

/// Splits a byte stream into newline-delimited messages and logs each one.
struct LineTee {
    log: JsonlLog,
    direction: Direction,
    pending: Vec<u8>,
}

impl LineTee {
    fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            let body = &line[..line.len() - 1];
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message = serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
            let record = WireRecord {
                ts_ms: unix_ms_now(),
                direction: self.direction,
                message,
            };
            if let Ok(v) = serde_json::to_value(&record) {
                let _ = self.log.append(&v);
            }
        }
    }
}

/// Logs one whole wire message (an HTTP request or JSON response body) as a [`WireRecord`];
/// empty bodies are skipped.
pub fn log_wire_message(log: &JsonlLog, direction: Direction, body: &[u8]) {
    if body.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let message = serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    let record = WireRecord {
        ts_ms: unix_ms_now(),
        direction,
        message,
    };
    if let Ok(v) = serde_json::to_value(&record) {
        let _ = log.append(&v);
    }
}

/// Logs the messages of a Server-Sent Events stream as it passes (E1 wire log over Streamable
/// HTTP): each event's `data:` lines, joined, are one message. Events without data (priming,
/// keep-alive comments) are not logged.
pub struct SseTee {
    log: JsonlLog,
    direction: Direction,
    pending: Vec<u8>,
    data: Vec<u8>,
}

impl SseTee {
    pub fn new(log: JsonlLog, direction: Direction) -> Self {
        Self {
            log,
            direction,
            pending: Vec::new(),
            data: Vec::new(),
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
                log_wire_message(&self.log, self.direction, &data);
            } else if let Some(rest) = line.strip_prefix(b"data:") {
                if !self.data.is_empty() {
                    self.data.push(b'\n');
                }
                self.data
                    .extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
            }
        }
    }
}

/// An `AsyncRead` that logs every newline-delimited message it reads (E1 wire log).
pub struct TeeReader<R> {
    inner: R,
    tee: LineTee,
}

impl<R> TeeReader<R> {
    pub fn new(inner: R, log: JsonlLog, direction: Direction) -> Self {
        Self {
            inner,
            tee: LineTee {
                log,
                direction,
                pending: Vec::new(),
            },
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
            this.tee.feed(&buf.filled()[before..]);
        }
        poll
    }
}

/// An `AsyncWrite` that logs every newline-delimited message written through it (E1 wire log).
pub struct TeeWriter<W> {
    inner: W,
    tee: LineTee,
}

impl<W> TeeWriter<W> {
    pub fn new(inner: W, log: JsonlLog, direction: Direction) -> Self {
        Self {
            inner,
            tee: LineTee {
                log,
                direction,
                pending: Vec::new(),
            },
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
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.tee.feed(&buf[..n]);
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

/// The run manifest (E1): written once, when the canary first initializes targets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunManifest {
    pub run_id: String,
    pub started_ms: f64,
    pub written_ms: f64,
    /// `git rev-parse HEAD` of the executed checkout, else the SHA embedded at build time.
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
/// (`PATCHDIFF_BUILD_SHA`, see `build.rs`: the commit the binary was built from), else the git
/// checkout that holds the binary's sources (`git rev-parse HEAD`), else `unknown`. When both
/// exist and differ, the origin says so (the checkout moved after the build).
pub fn source_sha() -> (String, String) {
    let checkout = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|sha| !sha.is_empty());
    match (option_env!("PATCHDIFF_BUILD_SHA"), checkout) {
        (Some(built), Some(now)) if built != now => (
            built.to_owned(),
            format!("embedded at build; the checkout is now at {now}"),
        ),
        (Some(built), _) => (built.to_owned(), "embedded at build".to_owned()),
        (None, Some(now)) => (now, "git rev-parse HEAD".to_owned()),
        (None, None) => ("unknown".to_owned(), "unavailable".to_owned()),
    }
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
        let bytes = serde_json::to_vec_pretty(manifest)?;
        write_new_private(&self.manifest(), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    async fn tee_logs_each_message_in_order_and_passes_bytes_through() {
        let dir = tempfile::tempdir().unwrap();
        let log = JsonlLog::open(&dir.path().join("wire.jsonl")).unwrap();
        let input: &[u8] = b"{\"id\":1}\n{\"id\":2}\nnot json\n";
        let mut reader = TeeReader::new(input, log.clone(), Direction::Request);
        let mut seen = Vec::new();
        reader.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, input);
        let mut writer = TeeWriter::new(Vec::new(), log, Direction::Result);
        writer
            .write_all(b"{\"id\":1,\"result\":{}}\n")
            .await
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join("wire.jsonl")).unwrap();
        let records: Vec<WireRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let messages: Vec<_> = records
            .iter()
            .map(|r| (r.direction, r.message.clone()))
            .collect();
        assert_eq!(
            messages,
            vec![
                (Direction::Request, serde_json::json!({"id": 1})),
                (Direction::Request, serde_json::json!({"id": 2})),
                (Direction::Request, Value::String("not json".into())),
                (
                    Direction::Result,
                    serde_json::json!({"id": 1, "result": {}})
                ),
            ]
        );
    }

    #[test]
    fn sse_tee_logs_each_data_event_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let log = JsonlLog::open(&dir.path().join("sse.jsonl")).unwrap();
        let mut tee = SseTee::new(log, Direction::Result);
        let stream = b"id: 0\nretry: 3000\ndata:\n\ndata: {\"id\":1,\r\ndata: \"result\":{}}\n\n: keep-alive\n\ndata: {\"id\":2}\n\n";
        for chunk in stream.chunks(5) {
            tee.feed(chunk);
        }
        let text = std::fs::read_to_string(dir.path().join("sse.jsonl")).unwrap();
        let messages: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<WireRecord>(l).unwrap().message)
            .collect();
        assert_eq!(
            messages,
            vec![
                serde_json::json!({"id": 1, "result": {}}),
                serde_json::json!({"id": 2})
            ]
        );
    }
}

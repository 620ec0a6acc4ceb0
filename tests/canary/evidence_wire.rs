//! SPEC E1, E2: the request/result wire log of a real `patchdiff mcp` process equals, byte for
//! byte and in the same order, what an independent client-side recording of the same session
//! saw; logs are private, append-only and hash-chained.

use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::mcp::*;
use patchdiff::evidence::{Direction, JsonlLog, WireRecord};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Collects every byte that passes through it (the client's own record of the wire), and
/// appends each complete line, with its direction, to `order`, shared by both directions: the
/// client's view of the interleaving.
struct Capture<T> {
    inner: T,
    bytes: Arc<Mutex<Vec<u8>>>,
    direction: Direction,
    pending: Vec<u8>,
    order: WireOrder,
}

/// Complete lines in the order the client saw them cross, with their direction.
type WireOrder = Arc<Mutex<Vec<(Direction, Vec<u8>)>>>;

impl<T> Capture<T> {
    fn saw(&mut self, new: &[u8]) {
        self.bytes.lock().unwrap().extend_from_slice(new);
        self.pending.extend_from_slice(new);
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            self.order
                .lock()
                .unwrap()
                .push((self.direction, line[..line.len() - 1].to_vec()));
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Capture<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            let new = buf.filled()[before..].to_vec();
            self.saw(&new);
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Capture<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            let new = buf[..n].to_vec();
            self.saw(&new);
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

fn messages(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("client saw JSON lines"))
        .collect()
}

#[tokio::test]
async fn wire_log_equals_what_the_client_sent_and_received() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let wire = env.path().join("observed.mcp.jsonl");
    let mut cmd = tokio::process::Command::new(exe());
    cmd.arg("mcp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("observed"))
        .env("PATCHDIFF_EVIDENCE_WIRE_LOG", &wire)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn");
    let sent = Arc::new(Mutex::new(Vec::new()));
    let received = Arc::new(Mutex::new(Vec::new()));
    let order = Arc::new(Mutex::new(Vec::new()));
    let transport = (
        Capture {
            inner: child.stdout.take().expect("stdout"),
            bytes: received.clone(),
            direction: Direction::Result,
            pending: Vec::new(),
            order: order.clone(),
        },
        Capture {
            inner: child.stdin.take().expect("stdin"),
            bytes: sent.clone(),
            direction: Direction::Request,
            pending: Vec::new(),
            order: order.clone(),
        },
    );
    let client = ().serve(transport).await.expect("handshake");
    client.list_all_tools().await.expect("tools/list");
    for (tool, args) in [
        ("patchdiff_read_target", json!({"target": "calendar"})),
        (
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.addWindow"}),
        ),
        ("patchdiff_read_target", json!({"target": "missing"})),
        ("patchdiff_audit", json!({"target": "calendar"})),
        ("patchdiff_read_target", json!({"target": 7})),
        // Unicode must survive byte for byte.
        (
            "patchdiff_find_occurrences",
            json!({"target": "calendar", "text": "界 😀"}),
        ),
    ] {
        let mut p = CallToolRequestParams::new(tool);
        p.arguments = args.as_object().cloned();
        let _ = client.call_tool(p).await;
    }
    client.cancel().await.expect("close");
    let status = child.wait().await.expect("child exits when stdin closes");
    assert!(status.success(), "{status}");

    let log = std::fs::read_to_string(&wire).expect("wire log");
    let records: Vec<WireRecord> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("wire record"))
        .collect();
    // Byte for byte: each direction's logged messages, newline-terminated and concatenated, are
    // exactly the bytes the client wrote and read.
    let logged_bytes = |d: Direction| -> Vec<u8> {
        let mut out = Vec::new();
        for r in records.iter().filter(|r| r.direction == d) {
            out.extend_from_slice(&r.bytes());
            out.push(b'\n');
        }
        out
    };
    let sent = sent.lock().unwrap().clone();
    let received = received.lock().unwrap().clone();
    assert_eq!(
        String::from_utf8_lossy(&logged_bytes(Direction::Request)),
        String::from_utf8_lossy(&sent)
    );
    assert_eq!(logged_bytes(Direction::Request), sent);
    assert_eq!(logged_bytes(Direction::Result), received);
    // initialize + initialized + tools/list + 6 calls; 8 replies.
    assert_eq!(messages(&sent).len(), 9);
    assert_eq!(messages(&received).len(), 8);
    // Wire order: the file's interleaving of both directions is the client's. Every call
    // awaited its reply, so a reply logged after the next request would differ here.
    let logged_order: Vec<(Direction, Vec<u8>)> =
        records.iter().map(|r| (r.direction, r.bytes())).collect();
    assert_eq!(logged_order, *order.lock().unwrap());
    // One process, sequence numbers 0.. in file order, monotonic time never going back.
    assert!(records.iter().all(|r| r.pid == records[0].pid));
    assert!(records.iter().enumerate().all(|(i, r)| r.seq == i as u64));
    assert!(records.windows(2).all(|w| w[0].mono_ns <= w[1].mono_ns));
    // V1: every line carries the digest of the one before.
    let mut prev = patchdiff::evidence::CHAIN_GENESIS.to_owned();
    for line in log.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v[patchdiff::evidence::CHAIN_FIELD], prev.as_str());
        prev = patchdiff::evidence::line_digest(line.as_bytes());
    }
    let mode = std::fs::metadata(&wire).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn logs_are_append_only_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    let first = JsonlLog::open(&path).unwrap();
    first.append(&json!({"n": 1})).unwrap();
    let before = std::fs::read(&path).unwrap();
    // A second opener (e.g. a restarted process) only appends.
    let second = JsonlLog::open(&path).unwrap();
    second.append(&json!({"n": 2})).unwrap();
    first.append(&json!({"n": 3})).unwrap();
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before), "earlier bytes were rewritten");
    let ns: Vec<i64> = String::from_utf8(after)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["n"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ns, vec![1, 2, 3]);
}

#[tokio::test]
async fn http_wire_log_records_authenticated_messages_only() {
    let env = TestEnv::new();
    let wire = env.path().join("http.mcp.jsonl");
    let server = HttpServer::start_with(
        &env,
        "observed",
        &[("PATCHDIFF_EVIDENCE_WIRE_LOG", wire.display().to_string())],
    )
    .await;
    // Refused requests never reach the log.
    let (status, _) = server.post(&[], INITIALIZE).await;
    assert_eq!(status, 401);
    let bearer = format!("Bearer {}", server.token);
    let (status, text) = server.post(&[("Authorization", &bearer)], INITIALIZE).await;
    assert_eq!(status, 200, "{text}");
    server.stop().await;

    let records: Vec<WireRecord> = std::fs::read_to_string(&wire)
        .expect("wire log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("wire record"))
        .collect();
    assert_eq!(records.len(), 2, "{records:#?}");
    assert_eq!(records[0].direction, Direction::Request);
    // The body exactly as the client posted it.
    assert_eq!(records[0].bytes(), INITIALIZE.as_bytes());
    assert_eq!(records[1].direction, Direction::Result);
    let reply = records[1].message();
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["serverInfo"]["name"], "patchdiff");
    // The response the client saw carries the same message.
    let seen: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert_eq!(seen, vec![reply.clone()], "{text}");
    // And its bytes are exactly the event's data.
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.starts_with('{'))
        .unwrap();
    assert_eq!(records[1].bytes(), data.as_bytes());
    let mode = std::fs::metadata(&wire).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn sigterm_shuts_the_worker_down_and_completes_its_stderr_evidence() {
    let env = TestEnv::new();
    let perf = env.path().join("observed.perf.jsonl");
    let worker_log = env.path().join("worker.observed.stderr.log");
    let mut child = tokio::process::Command::new(exe())
        .arg("mcp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("observed"))
        .env("PATCHDIFF_PERF_EVENTS", &perf)
        .env("PATCHDIFF_WORKER_STDERR_LOG", &worker_log)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let pid = child.id().expect("pid");
    // The client keeps its end of stdin open throughout (tokio's `wait` would close it).
    let _stdin = child.stdin.take();
    // The stdio server prewarms its worker (W13): wait for its readiness event.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&perf)
        .unwrap_or_default()
        .contains("\"worker_ready\"")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no worker_ready in {}",
            perf.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "SIGTERM is a normal shutdown: {status}");
    let log = std::fs::read_to_string(&worker_log).expect("worker stderr log");
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[0].starts_with("=== generation 1 pid ") && lines[0].ends_with(" launched ==="),
        "{log}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("=== generation 1 pid ") && l.contains(" exit 0 · ")),
        "the generation was reaped and its exit recorded: {log}"
    );
}

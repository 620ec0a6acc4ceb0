//! SPEC E1, E2: the request/result wire log of a real `patchdiff mcp` process equals, message
//! for message, what an independent client-side recording saw; logs are private and append-only.

mod mcp_support;

use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use mcp_support::*;
use patchdiff::evidence::{Direction, JsonlLog, WireRecord};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Collects every byte that passes through it (the client's own record of the wire).
struct Capture<T> {
    inner: T,
    bytes: Arc<Mutex<Vec<u8>>>,
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
            self.bytes.lock().unwrap().extend_from_slice(&new);
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
            self.bytes.lock().unwrap().extend_from_slice(&buf[..n]);
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
    let mut cmd = tokio::process::Command::new(EXE);
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
    let transport = (
        Capture {
            inner: child.stdout.take().expect("stdout"),
            bytes: received.clone(),
        },
        Capture {
            inner: child.stdin.take().expect("stdin"),
            bytes: sent.clone(),
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

    let sent = messages(&sent.lock().unwrap());
    let received = messages(&received.lock().unwrap());
    let log = std::fs::read_to_string(&wire).expect("wire log");
    let records: Vec<WireRecord> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("wire record"))
        .collect();
    let logged = |d: Direction| -> Vec<Value> {
        records
            .iter()
            .filter(|r| r.direction == d)
            .map(|r| r.message.clone())
            .collect()
    };
    // initialize + initialized + tools/list + 6 calls.
    assert_eq!(sent.len(), 9, "client sent {sent:#?}");
    assert_eq!(logged(Direction::Request), sent);
    assert_eq!(logged(Direction::Result), received);
    assert_eq!(received.len(), 8);
    // Timestamps never go backwards: the log is written in wire order.
    assert!(records.windows(2).all(|w| w[0].ts_ms <= w[1].ts_ms));
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
    assert_eq!(
        records[0].message,
        serde_json::from_str::<Value>(INITIALIZE).unwrap()
    );
    assert_eq!(records[1].direction, Direction::Result);
    assert_eq!(records[1].message["id"], 1);
    assert_eq!(
        records[1].message["result"]["serverInfo"]["name"],
        "patchdiff"
    );
    // The response the client saw carries the same message.
    let seen: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert_eq!(seen, vec![records[1].message.clone()], "{text}");
    let mode = std::fs::metadata(&wire).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

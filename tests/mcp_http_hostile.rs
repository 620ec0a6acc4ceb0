//! Issue 12 over Streamable HTTP: malformed JSON gets 400 with a JSON-RPC error, the `Bearer`
//! scheme is case-insensitive, DELETE of an unknown session is 404 (real binary); slow and idle
//! clients are cut off and connections are capped (in process, on paused tokio time).

mod mcp_support;

use std::sync::Arc;
use std::time::Duration;

use mcp_support::*;
use patchdiff::config::Profile;
use patchdiff::mcp::PatchdiffServer;
use patchdiff::mcp::http::{HttpLimits, HttpListener, HttpOptions};
use patchdiff::store::SqliteStore;
use patchdiff::telemetry::Recorder;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes and reads the whole response (the requests say `Connection: close`).
async fn raw(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

fn json_body(response: &str) -> Value {
    let body = response.split("\r\n\r\n").nth(1).expect("a body");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {response}"))
}

#[tokio::test]
async fn malformed_json_gets_400_with_a_json_rpc_parse_error() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "workspace").await;
    let bearer = format!("Bearer {}", server.token);
    for body in ["not json", "{\"jsonrpc\":\"2.0\",", "{} trailing"] {
        let (status, text) = server.post(&[("Authorization", &bearer)], body).await;
        assert_eq!(status, 400, "{body}: {text}");
        let answer = json_body(&text);
        assert_eq!(answer["error"]["code"], -32700, "{text}");
        assert_eq!(answer.get("id"), Some(&Value::Null));
    }
    server.stop().await;
}

#[tokio::test]
async fn refused_bodies_and_their_answers_are_in_the_wire_log() {
    let env = TestEnv::new();
    let wire = env.path().join("http.mcp.jsonl");
    let server = HttpServer::start_with(
        &env,
        "workspace",
        &[("PATCHDIFF_EVIDENCE_WIRE_LOG", wire.display().to_string())],
    )
    .await;
    let bearer = format!("Bearer {}", server.token);
    let (status, _) = server.post(&[("Authorization", &bearer)], "not json").await;
    assert_eq!(status, 400);
    server.stop().await;
    let log = std::fs::read_to_string(&wire).expect("wire log");
    let records: Vec<patchdiff::evidence::WireRecord> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The refused body's exact bytes, then the answer it got.
    assert_eq!(
        records[0].direction,
        patchdiff::evidence::Direction::Request
    );
    assert_eq!(records[0].bytes(), b"not json");
    assert_eq!(records[1].direction, patchdiff::evidence::Direction::Result);
    assert_eq!(records[1].message()["error"]["code"], -32700);
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "workspace").await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} {}", server.token);
        let (status, text) = server.post(&[("Authorization", &auth)], INITIALIZE).await;
        assert_eq!(status, 200, "{scheme}: {text}");
    }
    server.stop().await;
}

#[tokio::test]
async fn delete_of_an_unknown_session_is_404() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "workspace").await;
    let request = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nMcp-Session-Id: no-such-session\r\nConnection: close\r\n\r\n",
        server.addr, server.token
    );
    let response = raw(server.addr, &request).await;
    assert_eq!(status_of(&response), 404, "{response}");
    assert!(
        json_body(&response)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-session")
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_params_and_batches_get_json_rpc_errors_with_ids_and_2025_03_26_is_not_negotiated() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "workspace").await;
    let bearer = format!("Bearer {}", server.token);
    let init = INITIALIZE.replace("2025-06-18", "2025-03-26");
    let (status, text) = server.post(&[("Authorization", &bearer)], &init).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        !text.contains("\"protocolVersion\":\"2025-03-26\""),
        "{text}"
    );
    let session = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(|_| l.split_once(": ").unwrap().1.trim().to_owned())
        })
        .expect("session id");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", &session),
    ];
    let (status, text) = server
        .post(&headers, r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#)
        .await;
    assert_eq!(status, 400, "{text}");
    let answers = json_body(&text);
    assert_eq!(answers[0]["id"], 2, "{text}");
    assert_eq!(answers[0]["error"]["code"], -32600);
    for (id, body) in [
        (
            3,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}"#,
        ),
        (
            4,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"patchdiff_read_target","arguments":[1,2]}}"#,
        ),
        (
            5,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#,
        ),
    ] {
        let (status, text) = server.post(&headers, body).await;
        assert_eq!(status, 400, "{text}");
        let answer = json_body(&text);
        assert_eq!(
            (answer["id"].clone(), answer["error"]["code"].clone()),
            (id.into(), (-32602).into()),
            "{text}"
        );
    }
    server.stop().await;
}

/// An in-process HTTP server (workspace profile, real SQLite store) with `limits`.
async fn serve_in_process(limits: HttpLimits) -> (std::net::SocketAddr, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("pd.sqlite")).unwrap());
    let (recorder, telemetry) = Recorder::configure(None, None);
    let server = PatchdiffServer::new(Profile::Workspace, true, store, None, recorder, telemetry);
    let options = HttpOptions::parse("127.0.0.1:0", None).unwrap();
    let listener = HttpListener::bind(&options)
        .await
        .unwrap()
        .with_limits(limits);
    let addr = listener.local_addr;
    let token = "t0ken".to_owned();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serve_token = token.clone();
    tokio::spawn(async move { listener.serve(server, serve_token, shutdown, None).await });
    (addr, token, dir)
}

/// A guard on paused (virtual) time, far beyond every limit below.
const GUARD: Duration = Duration::from_secs(600);

const LIMITS: HttpLimits = HttpLimits {
    header_read_timeout: Duration::from_secs(10),
    body_read_timeout: Duration::from_secs(30),
    max_connections: 2,
    ..HttpLimits::PRODUCT
};

#[tokio::test(start_paused = true)]
async fn a_request_head_sent_one_byte_at_a_time_is_cut_off_at_the_header_timeout() {
    let (addr, _, _dir) = serve_in_process(LIMITS).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let start = tokio::time::Instant::now();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // Never finishes the head: the server closes the connection, it does not wait forever.
    let mut rest = Vec::new();
    // A guard on virtual time: without a header timeout nothing else would ever fire.
    // Closed by the server: end of stream or a reset, either is fine.
    let _closed = tokio::time::timeout(GUARD, stream.read_to_end(&mut rest))
        .await
        .expect("the connection was held open");
    assert!(
        start.elapsed() >= LIMITS.header_read_timeout,
        "{:?}",
        start.elapsed()
    );
    assert!(
        start.elapsed() < LIMITS.header_read_timeout * 2,
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn idle_connections_are_capped_and_closed() {
    let (addr, _, _dir) = serve_in_process(LIMITS).await;
    // Two idle, unauthenticated connections take both slots.
    let idle: Vec<TcpStream> = futures::future::join_all((0..2).map(|_| TcpStream::connect(addr)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let start = tokio::time::Instant::now();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    // The third is served only once the idle ones are closed at the header timeout.
    let response = tokio::time::timeout(GUARD, raw(addr, &request))
        .await
        .expect("never served");
    assert_eq!(status_of(&response), 401, "{response}");
    assert!(
        start.elapsed() >= LIMITS.header_read_timeout,
        "{:?}",
        start.elapsed()
    );
    for mut conn in idle {
        let mut buf = Vec::new();
        assert_eq!(
            conn.read_to_end(&mut buf).await.unwrap_or(0),
            0,
            "idle connection closed"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_that_does_not_arrive_gets_408_at_the_body_timeout() {
    let (addr, token, _dir) = serve_in_process(LIMITS).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let start = tokio::time::Instant::now();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut out))
        .await
        .expect("the body wait never ended")
        .unwrap();
    let response = String::from_utf8_lossy(&out);
    assert_eq!(status_of(&response), 408, "{response}");
    assert!(
        start.elapsed() >= LIMITS.body_read_timeout,
        "{:?}",
        start.elapsed()
    );
}

//! Hostile clients over Streamable HTTP: malformed JSON gets 400 with a JSON-RPC error, the
//! `Bearer` scheme is case-insensitive, DELETE of an unknown session is 404, `Host` is checked in
//! every form (real binary); slow and idle clients are cut off, connections are capped, sessions
//! are capped per token and closed when idle, GET streams cannot lock new clients out, and a
//! client that never reads is dropped at the write timeout (in process, on paused tokio time
//! where time matters).

use std::sync::Arc;
use std::time::Duration;

use crate::mcp::*;
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
    serve_in_process_with(limits, |_| {}).await
}

/// [`serve_in_process`] after `prepare` ran on its store (e.g. to initialize targets).
async fn serve_in_process_with(
    limits: HttpLimits,
    prepare: impl FnOnce(&SqliteStore),
) -> (std::net::SocketAddr, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("pd.sqlite")).unwrap());
    prepare(&store);
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

#[tokio::test]
async fn an_empty_host_and_an_absolute_form_target_are_refused_with_what_is_accepted() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "workspace").await;
    let (addr, token) = (server.addr, server.token.clone());
    let body = INITIALIZE;
    let post = |target: &str, host: &str| {
        format!(
            "POST {target} HTTP/1.1\r\n{host}Authorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    for (request, status, says) in [
        (post("/mcp", "Host:\r\n"), 400, "Host header is empty"),
        (post("/mcp", "Host: \r\n"), 400, "Host header is empty"),
        (
            post("http://evil.example/mcp", &format!("Host: {addr}\r\n")),
            403,
            "evil.example",
        ),
        (
            post("http://evil.example/mcp", "Host: evil.example\r\n"),
            403,
            "evil.example",
        ),
        (post("/mcp", "Host: evil.example\r\n"), 403, "evil.example"),
        // DELETE was answered (404) before rmcp's own `Host` check ever ran.
        (
            format!(
                "DELETE /mcp HTTP/1.1\r\nHost:\r\nAuthorization: Bearer {token}\r\nMcp-Session-Id: x\r\nConnection: close\r\n\r\n"
            ),
            400,
            "Host header is empty",
        ),
    ] {
        let response = raw(addr, &request).await;
        assert_eq!(status_of(&response), status, "{request}\n{response}");
        assert!(response.contains(says), "{response}");
        assert!(
            response.contains(&format!("127.0.0.1:{}", addr.port())),
            "names what is accepted: {response}"
        );
    }
    // `/healthz` needs no token but the same authority.
    let response = raw(
        addr,
        "GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&response), 403, "{response}");
    // The origin form and an absolute form naming this server are served.
    let own = format!("http://{addr}/mcp");
    for target in ["/mcp", own.as_str()] {
        let response = raw(addr, &post(target, &format!("Host: {addr}\r\n"))).await;
        assert_eq!(status_of(&response), 200, "{target}: {response}");
    }
    server.stop().await;
}

/// A POST of `body` on a fresh connection (`Connection: close`), read to its end.
fn post_request(
    addr: std::net::SocketAddr,
    token: &str,
    session: Option<&str>,
    body: &str,
) -> String {
    let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n{session}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn session_of(response: &str) -> String {
    response
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {response}"))
}

/// Opens an MCP session (initialize, then `notifications/initialized`); returns its id.
async fn open_session(addr: std::net::SocketAddr, token: &str) -> String {
    let response = raw(addr, &post_request(addr, token, None, INITIALIZE)).await;
    assert_eq!(status_of(&response), 200, "{response}");
    let session = session_of(&response);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let response = raw(
        addr,
        &post_request(addr, token, Some(&session), initialized),
    )
    .await;
    assert_eq!(status_of(&response), 202, "{response}");
    session
}

/// The status a `ping` in `session` gets (200 while the session lives, 404 once it ended).
async fn ping(addr: std::net::SocketAddr, token: &str, session: &str) -> u16 {
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    status_of(&raw(addr, &post_request(addr, token, Some(session), ping)).await)
}

/// Opens `session`'s GET SSE stream and returns the connection (still open) with the response
/// head read.
async fn open_stream(
    addr: std::net::SocketAddr,
    token: &str,
    session: &str,
) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nMcp-Session-Id: {session}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.expect("read head");
        assert_eq!(
            n,
            1,
            "closed before a head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

#[tokio::test]
async fn three_thousand_never_closed_sessions_keep_only_the_cap() {
    let (addr, token, _dir) = serve_in_process(HttpLimits::PRODUCT).await;
    let mut sessions = Vec::new();
    for _ in 0..3000 {
        let response = raw(addr, &post_request(addr, &token, None, INITIALIZE)).await;
        assert_eq!(
            status_of(&response),
            200,
            "an initialize is never refused: {response}"
        );
        sessions.push(session_of(&response));
    }
    let cap = HttpLimits::PRODUCT.max_sessions;
    // The least recently used were evicted to admit the newer ones; the newest `cap` live.
    for evicted in [0, 1, 1500, 3000 - cap - 1] {
        assert_eq!(
            ping(addr, &token, &sessions[evicted]).await,
            404,
            "session {evicted}"
        );
    }
    for (live, session) in sessions.iter().enumerate().skip(3000 - cap) {
        assert_eq!(ping(addr, &token, session).await, 200, "session {live}");
    }
}

#[tokio::test]
async fn a_session_in_use_outlives_newer_idle_ones_at_the_cap() {
    let limits = HttpLimits {
        max_sessions: 3,
        ..HttpLimits::PRODUCT
    };
    let (addr, token, _dir) = serve_in_process(limits).await;
    let kept = open_session(addr, &token).await;
    let mut others = Vec::new();
    for _ in 0..6 {
        others.push(open_session(addr, &token).await);
        // The operator's session keeps working between the greedy client's sessions.
        assert_eq!(ping(addr, &token, &kept).await, 200);
    }
    assert_eq!(ping(addr, &token, &others[0]).await, 404);
    assert_eq!(ping(addr, &token, &others[5]).await, 200);
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_is_closed_well_before_300_s() {
    let (addr, token, _dir) = serve_in_process(HttpLimits::PRODUCT).await;
    let session = open_session(addr, &token).await;
    assert_eq!(ping(addr, &token, &session).await, 200);
    let idle = HttpLimits::PRODUCT.session_idle;
    assert!(idle < Duration::from_secs(300));
    tokio::time::sleep(idle + Duration::from_secs(1)).await;
    assert_eq!(
        ping(addr, &token, &session).await,
        404,
        "kept after {idle:?} idle"
    );
}

#[tokio::test(start_paused = true)]
async fn sixty_four_long_lived_get_streams_do_not_lock_a_new_client_out() {
    let limits = HttpLimits::PRODUCT;
    let (addr, token, _dir) = serve_in_process(limits).await;
    // A greedy client: 64 sessions, each with its GET stream held open and never read.
    let mut held = Vec::new();
    for _ in 0..limits.max_connections {
        let session = open_session(addr, &token).await;
        let (stream, head) = open_stream(addr, &token, &session).await;
        assert_eq!(status_of(&head), 200, "{head}");
        held.push(stream);
    }
    // And more GET streams on one session than one.
    let session = open_session(addr, &token).await;
    let (_first, head) = open_stream(addr, &token, &session).await;
    assert_eq!(status_of(&head), 200, "{head}");
    let (_second, head) = open_stream(addr, &token, &session).await;
    assert_eq!(status_of(&head), 409, "{head}");
    // A new client (the console) is served at once: a session, a call, its own stream.
    let start = tokio::time::Instant::now();
    let served = tokio::time::timeout(GUARD, async {
        let mine = open_session(addr, &token).await;
        assert_eq!(ping(addr, &token, &mine).await, 200);
        let (_stream, head) = open_stream(addr, &token, &mine).await;
        assert_eq!(status_of(&head), 200, "{head}");
        assert!(
            head.to_ascii_lowercase().contains("text/event-stream"),
            "{head}"
        );
    })
    .await;
    assert!(served.is_ok(), "the new client was locked out");
    assert!(
        start.elapsed() < limits.header_read_timeout,
        "served only after {:?}",
        start.elapsed()
    );
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn eight_clients_that_never_read_a_large_read_target_are_dropped_at_the_write_timeout() {
    // An agent's `read_target` answers in pages of at most 32 KiB, so one response no longer
    // outgrows a socket's buffers; a client that pipelines page requests on one connection and
    // never reads still makes the server's writes stall: 640 pages of a 16 MiB target are
    // ≈ 21 MiB, well over what the loopback buffers of one connection hold.
    const PAGES: usize = 640;
    let content = "x".repeat(16 * 1024 * 1024);
    let sha = sha256_hex(content.as_bytes());
    let limits = HttpLimits {
        write_timeout: Duration::from_secs(5),
        ..HttpLimits::PRODUCT
    };
    let (addr, token, _dir) = serve_in_process_with(limits, |store| {
        use patchdiff::store::EditStore;
        store
            .init_target("big", "javascript", content.as_bytes(), &sha, false)
            .expect("init");
    })
    .await;
    drop(content);
    let mut readers = Vec::new();
    for _ in 0..8 {
        let session = open_session(addr, &token).await;
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let mut requests = String::new();
        for page in 0..PAGES {
            let call = serde_json::json!({"jsonrpc": "2.0", "id": page + 2, "method": "tools/call",
                "params": {"name": "patchdiff_read_target",
                           "arguments": {"target": "big", "offset": page * 32_000}}})
            .to_string();
            // Keep-alive: the pipelined requests share the connection.
            requests.push_str(
                &post_request(addr, &token, Some(&session), &call)
                    .replace("Connection: close\r\n", ""),
            );
        }
        stream.write_all(requests.as_bytes()).await.expect("send");
        // Read until the first result is flowing, then never read again.
        let mut seen = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        while !String::from_utf8_lossy(&seen).contains("\"result\"") {
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(status_of(&String::from_utf8_lossy(&seen)), 200);
        readers.push((stream, seen));
    }
    let start = tokio::time::Instant::now();
    tokio::time::sleep(limits.write_timeout * 3).await;
    for (mut stream, mut seen) in readers {
        // Dropped: the rest of what the buffers held, then end of stream (or a reset) — never
        // every page.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(GUARD, stream.read_to_end(&mut rest))
            .await
            .expect("the connection was kept open");
        seen.extend_from_slice(&rest);
        let answered = String::from_utf8_lossy(&seen).matches("\"result\"").count();
        assert!(
            answered < PAGES,
            "a client that never read got all {answered} pages ({} bytes)",
            seen.len()
        );
    }
    assert!(start.elapsed() >= limits.write_timeout);
}

//! W13, issue 26 item 5: `GET /healthz` on `patchdiff mcp --http` answers without a token,
//! loopback only, with only `{"ready", "worker"}`, and never starts a worker — against the real
//! binary.

use crate::mcp::*;

/// One raw `GET /healthz` with `headers` (a `Host` of the bound address unless given);
/// returns `(status, body)`.
async fn get_health(server: &HttpServer, headers: &[(&str, &str)]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut req = "GET /healthz HTTP/1.1\r\nConnection: close\r\n".to_owned();
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {}\r\n", server.addr));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut buf),
    )
    .await
    .expect("an answer within 10 s")
    .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

#[tokio::test]
async fn healthz_answers_without_a_token_and_starts_no_worker() {
    // One-shot mode: a child per discovery, so none exists until a tool asks for one.
    let env = TestEnv::new();
    let server = HttpServer::start_with(
        &env,
        "observed",
        &[("PATCHDIFF_WAYMARK_MODE", "oneshot".to_owned())],
    )
    .await;
    let pid = server.child.id().unwrap();
    for _ in 0..5 {
        let (status, body) = get_health(&server, &[]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            json(&body),
            serde_json::json!({"ready": true, "worker": "oneshot"})
        );
    }
    assert_eq!(
        children_of(pid),
        Vec::<u32>::new(),
        "no worker process after /healthz"
    );
    server.stop().await;
}

#[tokio::test]
async fn healthz_reports_a_resident_worker_that_could_not_start_and_never_relaunches_it() {
    // The worker directory does not exist: the prewarm's launch fails at once. /healthz says the
    // process is not ready, and however often it is asked, no further launch is attempted.
    let env = TestEnv::new();
    let events = env.path().join("observed.perf.jsonl");
    let server = HttpServer::start_with(
        &env,
        "observed",
        &[
            (
                "PATCHDIFF_WAYMARK_DIR",
                env.path().join("no-such-waymark").display().to_string(),
            ),
            ("PATCHDIFF_PERF_EVENTS", events.display().to_string()),
        ],
    )
    .await;
    let launch_failures = || {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"worker_launch_failed\""))
            .count()
    };
    // Wait for the prewarm's failure to be recorded (observable state, not a sleep).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while launch_failures() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no worker_launch_failed event"
        );
        // Polling an observable condition: the event file.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for _ in 0..5 {
        let (status, body) = get_health(&server, &[]).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(
            json(&body),
            serde_json::json!({"ready": false, "worker": "failed"})
        );
    }
    assert_eq!(launch_failures(), 1, "/healthz must not launch a worker");
    assert_eq!(children_of(server.child.id().unwrap()), Vec::<u32>::new());
    server.stop().await;
}

#[tokio::test]
async fn healthz_reports_a_ready_resident_worker() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "observed").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let body = loop {
        let (status, body) = get_health(&server, &[]).await;
        let value = json(&body);
        if status == 200 {
            break value;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            ["not_started", "starting"].contains(&value["worker"].as_str().unwrap()),
            "{body}"
        );
        assert!(std::time::Instant::now() < deadline, "not ready in 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(body, serde_json::json!({"ready": true, "worker": "ready"}));
    server.stop().await;
}

#[tokio::test]
async fn healthz_refuses_foreign_origins_and_hosts_and_the_mcp_endpoint_still_needs_the_token() {
    let env = TestEnv::new();
    let server = HttpServer::start_with(
        &env,
        "observed",
        &[("PATCHDIFF_WAYMARK_MODE", "oneshot".to_owned())],
    )
    .await;
    let (status, _) = get_health(&server, &[("Origin", "http://evil.example")]).await;
    assert_eq!(status, 403);
    let (status, _) = get_health(&server, &[("Host", "evil.example")]).await;
    assert_eq!(status, 403);
    let own_origin = format!("http://{}", server.addr);
    let (status, _) = get_health(&server, &[("Origin", &own_origin)]).await;
    assert_eq!(status, 200);
    let (status, _) = server.post(&[], INITIALIZE).await;
    assert_eq!(status, 401, "only /healthz is open");
    server.stop().await;
}

//! SPEC M1: Streamable HTTP for the console — loopback only, bearer token on every request,
//! `Origin` validated, the bounds set by `PATCHDIFF_MCP_HTTP_*` — against the real binary.

use crate::mcp::*;

#[tokio::test]
async fn requests_without_the_bearer_token_get_401() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "observed").await;
    let (status, text) = server.post(&[], INITIALIZE).await;
    assert_eq!(status, 401, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{text}"
    );
    let (status, _) = server
        .post(&[("Authorization", "Bearer not-the-token")], INITIALIZE)
        .await;
    assert_eq!(status, 401);
    let (status, _) = server
        .post(
            &[("Authorization", &format!("Basic {}", server.token))],
            INITIALIZE,
        )
        .await;
    assert_eq!(status, 401);
    server.stop().await;
}

#[tokio::test]
async fn a_foreign_origin_gets_403_even_with_the_token() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "observed").await;
    let bearer = format!("Bearer {}", server.token);
    for origin in ["https://evil.example", "http://127.0.0.1:1", "null"] {
        let (status, text) = server
            .post(
                &[("Authorization", &bearer), ("Origin", origin)],
                INITIALIZE,
            )
            .await;
        assert_eq!(status, 403, "{origin}: {text}");
    }
    // The loopback origin of this very port is fine.
    let own = format!("http://{}", server.addr);
    let (status, text) = server
        .post(&[("Authorization", &bearer), ("Origin", &own)], INITIALIZE)
        .await;
    assert_eq!(status, 200, "{text}");
    server.stop().await;
}

#[tokio::test]
async fn the_token_opens_an_mcp_session() {
    let env = TestEnv::new();
    let server = HttpServer::start(&env, "observed").await;
    let bearer = format!("Bearer {}", server.token);
    let (status, text) = server.post(&[("Authorization", &bearer)], INITIALIZE).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("\"serverInfo\"") || text.to_ascii_lowercase().contains("mcp-session-id"),
        "{text}"
    );
    server.stop().await;
}

#[test]
fn non_loopback_binds_are_refused_at_startup() {
    let env = TestEnv::new();
    for bind in ["0.0.0.0:0", "10.0.0.1:8080", "[::]:0", "example.com:80"] {
        let out = std::process::Command::new(exe())
            .args(["mcp", "--http", bind])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.vars("observed"))
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{bind} was not refused");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("loopback"), "{bind}: {stderr}");
        assert!(out.stdout.is_empty(), "{bind}: it printed a banner");
    }
}

#[tokio::test]
async fn without_a_token_file_the_token_is_printed_once_with_the_banner() {
    use tokio::io::AsyncBufReadExt;
    let env = TestEnv::new();
    let mut child = tokio::process::Command::new(exe())
        .args(["mcp", "--http", "127.0.0.1:0"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("workspace"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let banner = lines.next_line().await.expect("read").expect("banner");
    let token_line = lines.next_line().await.expect("read").expect("token line");
    assert!(
        banner.starts_with("patchdiff mcp: listening on http://127.0.0.1:"),
        "{banner}"
    );
    let token = token_line.strip_prefix("token: ").expect("token line");
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    drop(child.stdin.take());
    let status = child.wait().await.expect("exit on stdin close");
    assert!(status.success());
}

#[test]
fn an_existing_token_file_is_never_overwritten() {
    let env = TestEnv::new();
    let token_file = env.path().join("token");
    std::fs::write(&token_file, "old").unwrap();
    let out = std::process::Command::new(exe())
        .args(["mcp", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("workspace"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no banner when startup fails");
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), "old");
    assert!(String::from_utf8_lossy(&out.stderr).contains("token"));
}

#[tokio::test]
async fn a_dev_null_stdin_does_not_stop_the_server_but_sigterm_does() {
    use tokio::io::AsyncBufReadExt;
    let env = TestEnv::new();
    let token_file = env.path().join("token");
    let mut child = tokio::process::Command::new(exe())
        .args(["mcp", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("workspace"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let banner = lines.next_line().await.expect("read").expect("banner");
    let addr: std::net::SocketAddr = banner
        .trim_start_matches("patchdiff mcp: listening on http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("address");
    let token = std::fs::read_to_string(&token_file).expect("token");
    let server = HttpServer {
        child,
        url: format!("http://{addr}/mcp"),
        addr,
        token,
    };
    let bearer = format!("Bearer {}", server.token);
    let (status, text) = server.post(&[("Authorization", &bearer)], INITIALIZE).await;
    assert_eq!(status, 200, "still serving with stdin at EOF: {text}");
    let pid = server.child.id().expect("pid") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let mut child = server.child;
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// The session id a response carries.
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

#[tokio::test]
async fn the_session_cap_setting_is_applied_by_the_binary() {
    let env = TestEnv::new();
    let server = HttpServer::start_with(
        &env,
        "workspace",
        &[("PATCHDIFF_MCP_HTTP_MAX_SESSIONS", "2".to_owned())],
    )
    .await;
    let bearer = format!("Bearer {}", server.token);
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let (status, text) = server.post(&[("Authorization", &bearer)], INITIALIZE).await;
        assert_eq!(status, 200, "{text}");
        let session = session_of(&text);
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Mcp-Session-Id", &session),
        ];
        assert_eq!(server.post(&headers, initialized).await.0, 202);
        sessions.push(session);
    }
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let mut statuses = Vec::new();
    for session in &sessions {
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Mcp-Session-Id", session),
        ];
        statuses.push(server.post(&headers, ping).await.0);
    }
    // The oldest was evicted to admit the third.
    assert_eq!(statuses, [404, 200, 200]);
    server.stop().await;
}

#[test]
fn an_out_of_range_http_bound_refuses_to_start_naming_it() {
    let env = TestEnv::new();
    for (variable, value) in [
        ("PATCHDIFF_MCP_HTTP_MAX_SESSIONS", "0"),
        ("PATCHDIFF_MCP_HTTP_SESSION_IDLE_S", "5"),
        ("PATCHDIFF_MCP_HTTP_WRITE_TIMEOUT_S", "never"),
    ] {
        let out = std::process::Command::new(exe())
            .args(["mcp", "--http", "127.0.0.1:0"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.vars("workspace"))
            .env(variable, value)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{variable}={value} was not refused"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(variable) && stderr.contains(value),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{variable}: it printed a banner");
    }
}

/// Issue 23 item 8: an 11 MiB submission of control characters is legal (K3: 32 MiB of text);
/// its JSON body is 66 MiB. Over stdio it was accepted (`host_delivery`), over HTTP refused
/// with 413 by a 64 MiB body limit. The HTTP limit is now stdio's per-message bound, so the
/// same submission gets its receipt.
#[tokio::test(flavor = "multi_thread")]
async fn an_11_mib_submission_of_control_characters_is_accepted_over_http_as_over_stdio() {
    let env = TestEnv::new();
    env.init_target("t", "const a = 1;\n").await;
    // Oneshot and strict mode off: validation starts no resident worker and needs no
    // observation, so nothing but the transport's limits is tested.
    let server = HttpServer::start_with(
        &env,
        "full",
        &[
            ("PATCHDIFF_WAYMARK_MODE", "oneshot".to_owned()),
            ("PATCHDIFF_STRICT_OBSERVATION_MODE", "0".to_owned()),
        ],
    )
    .await;
    let bearer = format!("Bearer {}", server.token);
    let (status, text) = server.post(&[("Authorization", &bearer)], INITIALIZE).await;
    assert_eq!(status, 200, "{text}");
    let session = session_of(&text);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", &session),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(server.post(&headers, initialized).await.0, 202);
    let controls = "\u{1}".repeat(11 * 1024 * 1024);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "patchdiff_submit_observed_operations",
        "arguments": {"target": "t", "request_key": "ctl-1", "base_revision": 0,
                      "operations": [{"old_text": "1", "new_text": controls}]}}})
    .to_string();
    assert!(call.len() > 66 * 1024 * 1024, "{} bytes", call.len());
    // Parsing, screening, storing and answering 66 MiB takes seconds on a loaded machine.
    let (status, text) = server
        .post_within(&headers, &call, std::time::Duration::from_secs(120))
        .await;
    assert_eq!(status, 200, "{}", &text[..text.len().min(2000)]);
    assert!(
        text.contains(r#"\"outcome\":\"accepted\""#) || text.contains(r#""outcome":"accepted""#),
        "{}",
        &text[..text.len().min(2000)]
    );
    server.stop().await;
}

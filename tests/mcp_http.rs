//! SPEC M1: Streamable HTTP for the console — loopback only, bearer token on every request,
//! `Origin` validated — against the real binary.

mod mcp_support;

use mcp_support::*;

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
        let out = std::process::Command::new(EXE)
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

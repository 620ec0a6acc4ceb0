//! Streamable HTTP transport for the console (SPEC M1): loopback only, a random bearer token on
//! every request, and `Origin` validation (a browser page on another origin gets 403).
//!
//! rmcp's `StreamableHttpService` checks `Host` against loopback names by default but does not
//! check `Origin` unless configured; this module configures both and adds the bearer guard in
//! front of it, so an unauthenticated request never reaches the MCP session machinery.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::server::PatchdiffServer;
use crate::config::ConfigError;
use crate::evidence::{Direction, SseTee, WireLog, log_wire_message};

/// Environment variable naming the HTTP bind address (same as `--http`).
pub const HTTP_VARIABLE: &str = "PATCHDIFF_MCP_HTTP";
/// Environment variable naming the absolute path the bearer token is written to, 0600 (same as
/// `--token-file`).
pub const TOKEN_FILE_VARIABLE: &str = "PATCHDIFF_MCP_HTTP_TOKEN_FILE";
/// The MCP endpoint path.
pub const ENDPOINT: &str = "/mcp";

/// Where and how the HTTP transport listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// A loopback socket address (127.0.0.0/8 or ::1); port 0 picks a free port.
    pub bind: SocketAddr,
    /// Absolute path the bearer token is written to (created 0600, never overwritten). `None`:
    /// the token is printed on stdout with the listening line.
    pub token_file: Option<PathBuf>,
}

impl HttpOptions {
    /// Validates a bind address and token path (P2). `localhost:PORT` means `127.0.0.1:PORT`.
    ///
    /// Errors: a non-loopback address (`0.0.0.0`, a LAN address, a host name other than
    /// `localhost`), an unparsable address, a relative token path.
    pub fn parse(bind: &str, token_file: Option<&str>) -> Result<Self, ConfigError> {
        let accepted =
            "a loopback address with a port: 127.0.0.1:PORT, [::1]:PORT or localhost:PORT";
        let addr: SocketAddr = match bind.strip_prefix("localhost:") {
            Some(port) => port
                .parse::<u16>()
                .map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p))
                .map_err(|_| ConfigError::new(HTTP_VARIABLE, bind, accepted))?,
            None => bind
                .parse()
                .map_err(|_| ConfigError::new(HTTP_VARIABLE, bind, accepted))?,
        };
        if !addr.ip().is_loopback() {
            return Err(ConfigError::new(
                HTTP_VARIABLE,
                bind,
                "a loopback address only (127.0.0.1, ::1 or localhost); patchdiff never listens \
                 on other interfaces",
            ));
        }
        let token_file = match token_file {
            Some(p) if PathBuf::from(p).is_absolute() => Some(PathBuf::from(p)),
            Some(p) => {
                return Err(ConfigError::new(
                    TOKEN_FILE_VARIABLE,
                    p,
                    "an absolute file path that does not exist yet",
                ));
            }
            None => None,
        };
        Ok(Self {
            bind: addr,
            token_file,
        })
    }
}

/// A fresh random bearer token: 64 hex characters (244 random bits from two v4 UUIDs).
pub fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The origins a request may carry: the loopback names with the bound port.
pub fn allowed_origins(port: u16) -> Vec<String> {
    vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ]
}

#[derive(Clone)]
struct Guard {
    token: Arc<str>,
    origins: Arc<Vec<String>>,
}

/// Equal-length byte comparison that does not stop at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a request was refused before reaching MCP, if it was.
fn refusal(guard: &Guard, headers: &HeaderMap) -> Option<(StatusCode, &'static str)> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| guard.origins.iter().any(|allowed| allowed == o));
        if !ok {
            return Some((
                StatusCode::FORBIDDEN,
                "Origin not allowed: only the loopback origin of this port may call patchdiff",
            ));
        }
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(t) if constant_time_eq(t.trim().as_bytes(), guard.token.as_bytes()) => None,
        Some(_) => Some((StatusCode::UNAUTHORIZED, "wrong bearer token")),
        None => Some((
            StatusCode::UNAUTHORIZED,
            "missing bearer token: send `Authorization: Bearer <token>` (the token file the \
             console gave this process)",
        )),
    }
}

async fn guard_layer(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match refusal(&guard, request.headers()) {
        None => next.run(request).await,
        Some((status, message)) => {
            let mut response = (status, message).into_response();
            if status == StatusCode::UNAUTHORIZED {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

/// E1 over HTTP: logs each authenticated request body (client → server) and each message of
/// the response (a JSON body, or the `data:` of every SSE event) as they pass, in the same
/// [`crate::evidence::WireRecord`] format as the stdio wire log. Bodies above rmcp's request
/// limit are refused with 413 before reaching MCP either way.
async fn wire_layer(State(log): State<WireLog>, request: Request, next: Next) -> Response {
    use futures::StreamExt;
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_LOGGED_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
        }
    };
    log_wire_message(&log, Direction::Request, &bytes);
    let response = next
        .run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await;
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !sse && !json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let mut sse_tee = SseTee::new(log.clone(), Direction::Result);
    let mut buffered: Vec<u8> = Vec::new();
    let stream = body.into_data_stream().map(move |chunk| {
        if let Ok(c) = &chunk {
            if sse {
                sse_tee.feed(c);
            } else {
                // A JSON body is one message: log it once it parses whole.
                buffered.extend_from_slice(c);
                if serde_json::from_slice::<serde_json::Value>(&buffered).is_ok() {
                    log_wire_message(&log, Direction::Result, &std::mem::take(&mut buffered));
                }
            }
        }
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// Largest HTTP request body (bytes, 64 MiB), for rmcp and the wire layer alike.
const MAX_LOGGED_BODY: usize = 64 * 1024 * 1024;

/// A bound listener, ready to serve.
pub struct HttpListener {
    listener: tokio::net::TcpListener,
    /// The actual bound address (the port is resolved when 0 was asked).
    pub local_addr: SocketAddr,
}

impl HttpListener {
    /// Binds `options.bind` (re-checking loopback).
    pub async fn bind(options: &HttpOptions) -> std::io::Result<Self> {
        if !options.bind.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("refusing to bind non-loopback address {}", options.bind),
            ));
        }
        let listener = tokio::net::TcpListener::bind(options.bind).await?;
        let local_addr = listener.local_addr()?;
        Ok(Self {
            listener,
            local_addr,
        })
    }

    /// Serves `server` at [`ENDPOINT`] until `shutdown` is cancelled. Each MCP session gets a
    /// clone of `server` (sharing its store, worker and recorder). Requests without the bearer
    /// `token` get 401; requests whose `Origin` is not this port's loopback origin get 403;
    /// rmcp additionally refuses non-loopback `Host` headers (DNS rebinding).
    ///
    /// With `wire_log`, every authenticated message in both directions is appended to it (E1).
    pub async fn serve(
        self,
        server: PatchdiffServer,
        token: String,
        shutdown: CancellationToken,
        wire_log: Option<WireLog>,
    ) -> std::io::Result<()> {
        let origins = allowed_origins(self.local_addr.port());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_origins(origins.clone())
            .enforce_origin_validation()
            // W3: no new source-size limit; rmcp's 4 MiB default would be one.
            .with_max_request_body_bytes(MAX_LOGGED_BODY)
            .with_cancellation_token(shutdown.child_token());
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let guard = Guard {
            token: token.into(),
            origins: Arc::new(origins),
        };
        let mut app = axum::Router::new().nest_service(ENDPOINT, service);
        if let Some(log) = wire_log {
            app = app.layer(axum::middleware::from_fn_with_state(log, wire_layer));
        }
        // The guard wraps everything: refused requests reach neither MCP nor the wire log.
        let app = app.layer(axum::middleware::from_fn_with_state(guard, guard_layer));
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_binds_are_refused() {
        for bind in [
            "0.0.0.0:8080",
            "192.168.1.4:80",
            "[::]:9000",
            "example.com:80",
        ] {
            let err = HttpOptions::parse(bind, None).unwrap_err();
            assert!(err.to_string().contains(HTTP_VARIABLE), "{err}");
        }
    }

    #[test]
    fn loopback_binds_are_accepted() {
        for (bind, port) in [
            ("127.0.0.1:0", 0),
            ("[::1]:7000", 7000),
            ("localhost:81", 81),
        ] {
            let o = HttpOptions::parse(bind, Some("/tmp/t")).unwrap();
            assert!(o.bind.ip().is_loopback());
            assert_eq!(o.bind.port(), port);
        }
        assert!(HttpOptions::parse("127.0.0.1:1", Some("rel/token")).is_err());
    }

    #[test]
    fn guard_checks_origin_then_token() {
        let guard = Guard {
            token: "abc".into(),
            origins: Arc::new(allowed_origins(5)),
        };
        let mut h = HeaderMap::new();
        assert_eq!(
            refusal(&guard, &h).map(|r| r.0),
            Some(StatusCode::UNAUTHORIZED)
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abd"),
        );
        assert_eq!(
            refusal(&guard, &h).map(|r| r.0),
            Some(StatusCode::UNAUTHORIZED)
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(refusal(&guard, &h), None);
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://localhost:5"),
        );
        assert_eq!(refusal(&guard, &h), None);
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert_eq!(
            refusal(&guard, &h).map(|r| r.0),
            Some(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn tokens_are_long_and_distinct() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}

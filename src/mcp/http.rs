//! Streamable HTTP transport for the console (SPEC M1): loopback only, a random bearer token on
//! every request, and `Origin` validation (a browser page on another origin gets 403).
//!
//! rmcp's `StreamableHttpService` checks `Host` against loopback names by default but does not
//! check `Origin` unless configured; this module configures both and adds the bearer guard in
//! front of it, so an unauthenticated request never reaches the MCP session machinery.
//!
//! Hostile clients: the accept loop caps open connections ([`HttpLimits`]) and closes
//! a connection whose request head does not arrive in time (idle keep-alive included); a body
//! must arrive in time too. A body that is not JSON gets 400 with a JSON-RPC `-32700` (rmcp
//! says 415 in plain text); a body with bad params or envelope, or a batch, gets 400 with the
//! JSON-RPC errors the stdio transport gives (`super::stdio`); DELETE of a session that does
//! not exist gets 404.

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
pub const HTTP_VARIABLE: &str = crate::config::Key::McpHttp.variable();
/// Environment variable naming the absolute path the bearer token is written to, 0600 (same as
/// `--token-file`).
pub const TOKEN_FILE_VARIABLE: &str = crate::config::Key::McpHttpTokenFile.variable();
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

/// Byte comparison whose time does not depend on where the first difference is (`subtle`).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
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
    // RFC 7235: the auth scheme is case-insensitive (`bearer`, `BEARER` are `Bearer`).
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token);
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

/// A JSON-RPC error response body with `"id": null` (the request's id cannot be known).
fn jsonrpc_error(status: StatusCode, code: i64, message: String) -> Response {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
                                  "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[derive(Clone)]
struct Protocol {
    sessions: Arc<LocalSessionManager>,
    limits: HttpLimits,
}

/// Answers what rmcp would answer badly, before it reaches rmcp. A POST body must
/// arrive within [`HttpLimits::body_read_timeout`] (else 408) and be JSON (else 400 with a
/// JSON-RPC `-32700`); DELETE of an unknown session is 404.
async fn protocol_layer(State(p): State<Protocol>, request: Request, next: Next) -> Response {
    use rmcp::transport::streamable_http_server::session::SessionManager;
    if request.method() == axum::http::Method::DELETE {
        let id = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(|v| -> rmcp::transport::streamable_http_server::SessionId { v.into() });
        if let Some(id) = id
            && !p.sessions.has_session(&id).await.unwrap_or(false)
        {
            return jsonrpc_error(
                StatusCode::NOT_FOUND,
                -32600,
                format!("no session `{id}`: it ended or never existed"),
            );
        }
        return next.run(request).await;
    }
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, &p.limits).await {
        Ok(b) => b,
        Err(refusal) => return refusal,
    };
    let value = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                format!("Parse error: {e}; the body must be one JSON-RPC message"),
            );
        }
    };
    // The same screening as stdio: -32602/-32600 with the request's id, batches answered per
    // request, 2025-03-26 not negotiated (rmcp answers 415 in plain text, without the id).
    let body = match super::stdio::screen_http_body(value) {
        Ok(v) if v.get("method").and_then(|m| m.as_str()) == Some("initialize") => {
            axum::body::Body::from(v.to_string())
        }
        Ok(_) => axum::body::Body::from(bytes),
        Err(Some(answer)) => {
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "application/json")],
                answer,
            )
                .into_response();
        }
        // Only notifications and responses: accepted, nothing to answer.
        Err(None) => return StatusCode::ACCEPTED.into_response(),
    };
    let mut parts = parts;
    parts.headers.remove(header::CONTENT_LENGTH);
    next.run(Request::from_parts(parts, body)).await
}

/// Reads a whole request body of at most [`MAX_LOGGED_BODY`] bytes within
/// [`HttpLimits::body_read_timeout`]; `Err` is the answer: 408 (too slow) or 413 (too large or
/// cut off), each a JSON-RPC `-32600` saying which bound.
async fn read_body(
    body: axum::body::Body,
    limits: &HttpLimits,
) -> Result<axum::body::Bytes, Response> {
    let read = tokio::time::timeout(
        limits.body_read_timeout,
        axum::body::to_bytes(body, MAX_LOGGED_BODY),
    )
    .await;
    match read {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(_)) => Err(jsonrpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            format!("the request body is over {MAX_LOGGED_BODY} bytes or was cut off"),
        )),
        Err(_) => Err(jsonrpc_error(
            StatusCode::REQUEST_TIMEOUT,
            -32600,
            format!(
                "the request body did not arrive within {} s",
                limits.body_read_timeout.as_secs()
            ),
        )),
    }
}

/// Bounds of the HTTP transport against slow or idle clients (one must not starve the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A request head (and, on a keep-alive connection, the next one) must arrive within this.
    pub header_read_timeout: std::time::Duration,
    /// A request body must arrive within this.
    pub body_read_timeout: std::time::Duration,
    /// Most connections open at once; further ones wait in the listen backlog.
    pub max_connections: usize,
}

impl HttpLimits {
    /// 10 s for a head, 30 s for a body (64 MiB over loopback takes well under 1 s), 64
    /// connections (the console needs two).
    pub const PRODUCT: HttpLimits = HttpLimits {
        header_read_timeout: std::time::Duration::from_secs(10),
        body_read_timeout: std::time::Duration::from_secs(30),
        max_connections: 64,
    };
}

/// E1 over HTTP: logs each authenticated request body (client → server) and each message of
/// the response (a JSON body, or the `data:` of every SSE event) as they pass, in the same
/// [`crate::evidence::WireRecord`] format as the stdio wire log. Bodies above rmcp's request
/// limit are refused with 413 before reaching MCP either way.
async fn wire_layer(
    State((log, limits)): State<(WireLog, HttpLimits)>,
    request: Request,
    next: Next,
) -> Response {
    use futures::StreamExt;
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, &limits).await {
        Ok(b) => b,
        Err(refusal) => return refusal,
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

/// The health endpoint's path (W13).
pub const HEALTH_ENDPOINT: &str = "/healthz";

#[derive(Clone)]
struct Health {
    server: PatchdiffServer,
    origins: Arc<Vec<String>>,
}

/// The worker state `/healthz` reports, from [`crate::waymark::WorkerStatus`] alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthWorker {
    /// The profile has no worker (workspace, M4).
    None,
    /// One-shot mode: a child per discovery, none between them (W1).
    Oneshot,
    /// Resident mode, no generation launched yet.
    NotStarted,
    /// Resident mode, a generation launched and not ready yet.
    Starting,
    /// Resident mode, the current generation is ready.
    Ready,
    /// Resident mode, the last launch failed before a child ran (e.g. `WAYMARK_WORKER_SPAWN`).
    Failed,
    /// Resident mode, the last generation retired and none is current.
    Retired,
}

impl HealthWorker {
    /// Classifies a status; `None` when the profile has no worker.
    pub fn of(status: Option<&crate::waymark::WorkerStatus>) -> Self {
        match status {
            None => Self::None,
            Some(s) if s.mode == crate::waymark::WaymarkMode::Oneshot => Self::Oneshot,
            Some(s) if s.ready => Self::Ready,
            Some(s) if s.generation.is_some() => Self::Starting,
            Some(s) if s.launches_total == 0 => Self::NotStarted,
            Some(s) if s.last_launch_failed => Self::Failed,
            Some(s) if !s.retirements.is_empty() => Self::Retired,
            // Launched, not yet registered as the current generation.
            Some(_) => Self::Starting,
        }
    }

    /// Whether a process with this worker can take every tool call now: only a resident worker
    /// that is not ready makes it unready.
    pub fn process_ready(self) -> bool {
        matches!(self, Self::None | Self::Oneshot | Self::Ready)
    }
}

/// `Host` names `/healthz` answers: the loopback names, with or without a port (DNS
/// rebinding: a foreign name pointed at 127.0.0.1 gets nothing).
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or("", |(n, _)| n),
        None => host.split(':').next().unwrap_or(""),
    };
    matches!(name, "127.0.0.1" | "localhost" | "::1")
}

/// `GET /healthz` (W13): no token, loopback only (a non-loopback `Host` or a foreign
/// `Origin` gets 403), never starts a worker (it reads the supervisor's state only). 200 when
/// the process can take every tool call now, 503 while its resident worker is not ready; the
/// body is only `{"ready": bool, "worker": "none"|"oneshot"|"not_started"|"starting"|"ready"|
/// "failed"|"retired"}` — no path, pid, version or configuration.
async fn healthz(State(health): State<Health>, headers: HeaderMap) -> Response {
    let foreign_origin = headers.get(header::ORIGIN).is_some_and(|o| {
        !o.to_str()
            .is_ok_and(|o| health.origins.iter().any(|allowed| allowed == o))
    });
    if foreign_origin || !loopback_host(&headers) {
        return (StatusCode::FORBIDDEN, "loopback only").into_response();
    }
    let worker = HealthWorker::of(health.server.worker_status().as_ref());
    let ready = worker.process_ready();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({ "ready": ready, "worker": worker }).to_string();
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// Largest HTTP request body (bytes, 64 MiB), for rmcp and the wire layer alike.
const MAX_LOGGED_BODY: usize = 64 * 1024 * 1024;

/// A bound listener, ready to serve.
pub struct HttpListener {
    listener: tokio::net::TcpListener,
    /// The actual bound address (the port is resolved when 0 was asked).
    pub local_addr: SocketAddr,
    limits: HttpLimits,
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
            limits: HttpLimits::PRODUCT,
        })
    }

    /// Replaces the [`HttpLimits`] (tests use small ones).
    pub fn with_limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
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
        let sessions = Arc::new(LocalSessionManager::default());
        let health_server = server.clone();
        let service =
            StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
        let protocol = Protocol {
            sessions,
            limits: self.limits,
        };
        let guard = Guard {
            token: token.into(),
            origins: Arc::new(origins),
        };
        let limits = self.limits;
        let mut app = axum::Router::new().nest_service(ENDPOINT, service).layer(
            axum::middleware::from_fn_with_state(protocol, protocol_layer),
        );
        // The wire log sees what the protocol layer refuses, and its answers, too (E1).
        if let Some(log) = wire_log {
            app = app.layer(axum::middleware::from_fn_with_state(
                (log, limits),
                wire_layer,
            ));
        }
        // The guard wraps everything: refused requests reach neither MCP nor the wire log.
        let app = app.layer(axum::middleware::from_fn_with_state(guard, guard_layer));
        // W13: the health route is added after the guard's layer, so it needs no token; it
        // has its own loopback checks and reads state only.
        let health = Health {
            server: health_server,
            origins: Arc::new(allowed_origins(self.local_addr.port())),
        };
        let app = app.route(
            HEALTH_ENDPOINT,
            axum::routing::get(healthz).with_state(health),
        );
        accept_loop(self.listener, app, self.limits, shutdown).await
    }
}

/// Serves `app` on `listener`: at most `limits.max_connections` at once (the rest wait in the
/// backlog), each closed when a request head does not arrive within
/// `limits.header_read_timeout`. On `shutdown`, stops accepting, lets open connections finish
/// their current request and waits for them (at most 5 s).
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(std::io::Error::other)?,
            _ = shutdown.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Per-connection failures (ECONNABORTED, EMFILE) must not end the server.
                Err(e) => {
                    tracing::warn!("accepting an HTTP connection failed: {e}");
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _slot = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), slots.acquire_many(all)).await;
    Ok(())
}

impl HttpListener {
    /// The bounds in force.
    pub fn limits(&self) -> HttpLimits {
        self.limits
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
        // Without an Origin header (a non-browser client), then with this port's own origin.
        for origin in [None, Some("http://localhost:5")] {
            let mut h = HeaderMap::new();
            if let Some(origin) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_static(origin));
            }
            assert_eq!(
                refusal(&guard, &h).map(|r| r.0),
                Some(StatusCode::UNAUTHORIZED),
                "no token, origin {origin:?}"
            );
            h.insert(
                header::AUTHORIZATION,
                HeaderValue::from_static("Bearer abd"),
            );
            assert_eq!(
                refusal(&guard, &h).map(|r| r.0),
                Some(StatusCode::UNAUTHORIZED),
                "wrong token, origin {origin:?}"
            );
            // RFC 7235: the scheme is case-insensitive.
            for scheme in ["Bearer abc", "bearer abc", "BEARER abc", "BeArEr abc"] {
                h.insert(header::AUTHORIZATION, HeaderValue::from_static(scheme));
                assert_eq!(refusal(&guard, &h), None, "{scheme}, origin {origin:?}");
            }
            h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
            assert!(refusal(&guard, &h).is_some(), "origin {origin:?}");
        }
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
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

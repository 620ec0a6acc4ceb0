//! Streamable HTTP transport for the console (SPEC M1): loopback only, a random bearer token on
//! every request, and `Origin` validation (a browser page on another origin gets 403).
//!
//! rmcp's `StreamableHttpService` checks `Host` against loopback names by default but does not
//! check `Origin` unless configured; this module configures both and adds the bearer guard in
//! front of it, so an unauthenticated request never reaches the MCP session machinery.
//!
//! Hostile clients: the accept loop caps open connections ([`HttpLimits`]) and closes
//! a connection whose request head does not arrive in time (idle keep-alive included); a body
//! must arrive in time too, and a connection whose client accepts no response bytes for the
//! write timeout is dropped (with the response it pinned). Sessions are capped per token (the
//! least recently used one is evicted for a new one, so a client that never closes its
//! sessions cannot lock others out) and closed when idle; each session holds at most one GET
//! SSE stream, so streams never outnumber sessions and connections stay free for requests.
//! `Host` is checked in every form before anything else: missing, empty or malformed is 400,
//! a non-loopback name (in the header or in an absolute-form request target) is 403. A body that is not JSON gets 400 with a JSON-RPC `-32700` (rmcp
//! says 415 in plain text); a body with bad params or envelope, or a batch, gets 400 with the
//! JSON-RPC errors the stdio transport gives (`super::stdio`); DELETE of a session that does
//! not exist gets 404.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, StreamableHttpServerConfig, StreamableHttpService,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::server::PatchdiffServer;
use crate::config::{ConfigError, Key, Settings};
use crate::evidence::{Direction, SseTee, WireLog, log_wire_message};

mod guard;
mod sessions;

use guard::*;
use sessions::*;

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
    sessions: Arc<Sessions>,
    limits: HttpLimits,
}

/// Answers what rmcp would answer badly, before it reaches rmcp, and admits sessions and
/// streams. A POST body must arrive within [`HttpLimits::body_read_timeout`] (else 408) and be
/// JSON (else 400 with a JSON-RPC `-32700`); DELETE of an unknown session is 404; an
/// `initialize` at [`HttpLimits::max_sessions`] evicts a session first ([`Sessions`]); a second
/// GET SSE stream for a session that has one open is 409.
async fn protocol_layer(State(p): State<Protocol>, request: Request, next: Next) -> Response {
    let session = session_header(request.headers());
    if request.method() == axum::http::Method::DELETE {
        if let Some(id) = &session
            && !p.sessions.manager.has_session(id).await.unwrap_or(false)
        {
            return jsonrpc_error(
                StatusCode::NOT_FOUND,
                -32600,
                format!("no session `{id}`: it ended or never existed"),
            );
        }
        let response = next.run(request).await;
        if let Some(id) = &session {
            p.sessions.forget(id);
        }
        return response;
    }
    if request.method() == axum::http::Method::GET {
        let Some(id) = session.filter(|_| {
            // A resumption (`Last-Event-ID`) replays and ends; only a standalone stream stays.
            !request.headers().contains_key("last-event-id")
        }) else {
            return next.run(request).await;
        };
        if !p.sessions.manager.has_session(&id).await.unwrap_or(false) {
            return next.run(request).await;
        }
        let token = CancellationToken::new();
        let serial = {
            let mut streams = p.sessions.streams.lock().unwrap_or_else(|e| e.into_inner());
            if streams.contains_key(&id) {
                return jsonrpc_error(
                    StatusCode::CONFLICT,
                    -32600,
                    format!(
                        "session `{id}` already has its GET SSE stream open: one per session \
                         (close it, or open a new session)"
                    ),
                );
            }
            let serial = p
                .sessions
                .next_stream
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            streams.insert(id.clone(), (serial, token.clone()));
            serial
        };
        p.sessions.touch(&id, true);
        let open = OpenResponse {
            sessions: p.sessions.clone(),
            id,
            stream: Some((serial, token)),
        };
        let response = next.run(request).await;
        // A refusal (404, 405, 406) drops `open` with it: the slot is free again.
        return tracked(response, open);
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
    let mut initialize = false;
    let body = match super::stdio::screen_http_body(value) {
        Ok(v) if v.get("method").and_then(|m| m.as_str()) == Some("initialize") => {
            initialize = true;
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
    let request = Request::from_parts(parts, body);
    match session {
        // Only live sessions are tracked: made-up ids must not grow the table (rmcp answers 404).
        Some(id) if p.sessions.manager.has_session(&id).await.unwrap_or(false) => {
            p.sessions.touch(&id, true);
            let open = OpenResponse {
                sessions: p.sessions.clone(),
                id,
                stream: None,
            };
            tracked(next.run(request).await, open)
        }
        None if initialize => {
            let admitted = p.sessions.admission.lock().await;
            p.sessions.make_room().await;
            let response = next.run(request).await;
            if let Some(id) = session_header(response.headers()) {
                p.sessions.touch(&id, false);
            }
            drop(admitted);
            response
        }
        _ => next.run(request).await,
    }
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

/// Bounds of the HTTP transport against slow, idle or greedy clients (one must not starve the
/// others). `max_sessions` stays below `max_connections`: with one GET stream per session at
/// most, connections always remain for requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A request head (and, on a keep-alive connection, the next one) must arrive within this.
    pub header_read_timeout: Duration,
    /// A request body must arrive within this.
    pub body_read_timeout: Duration,
    /// Most connections open at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Most MCP sessions kept for the bearer token; an `initialize` at the cap evicts one (with
    /// no open response first, then the least recently used), so it is never refused.
    pub max_sessions: usize,
    /// A session that sees no request (rmcp: no session event) for this long is closed; its
    /// next request gets 404 and the client starts a new session (Streamable HTTP).
    pub session_idle: Duration,
    /// A connection whose client accepts no response bytes for this long is dropped, with the
    /// response it pinned (a slow reader holds one bounded write buffer until then).
    pub write_timeout: Duration,
}

impl HttpLimits {
    /// 10 s for a head, 30 s for a body (193 MiB over loopback takes about 1 s), 64
    /// connections (the console needs two), 16 sessions idle-closed after 120 s (above the
    /// 28 s outer discovery allowance, W6), 30 s without write progress.
    pub const PRODUCT: HttpLimits = HttpLimits {
        header_read_timeout: Duration::from_secs(10),
        body_read_timeout: Duration::from_secs(30),
        max_connections: 64,
        max_sessions: 16,
        session_idle: Duration::from_secs(120),
        write_timeout: Duration::from_secs(30),
    };

    /// The limits `settings` ask for (P1): `PATCHDIFF_MCP_HTTP_MAX_SESSIONS` (1 to 32, half the
    /// connections), `PATCHDIFF_MCP_HTTP_SESSION_IDLE_S` (30 to 3600 s),
    /// `PATCHDIFF_MCP_HTTP_WRITE_TIMEOUT_S` (1 to 600 s); unset ones keep [`Self::PRODUCT`].
    ///
    /// Errors (P2): a value that is not a whole number or is out of range, naming the variable,
    /// the value and the accepted values.
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let max_sessions = whole_number(settings, Key::McpHttpMaxSessions, 1, 32)?;
        let idle = whole_number(settings, Key::McpHttpSessionIdleS, 30, 3600)?;
        let write = whole_number(settings, Key::McpHttpWriteTimeoutS, 1, 600)?;
        Ok(Self {
            max_sessions: usize::try_from(max_sessions).unwrap_or(usize::MAX),
            session_idle: Duration::from_secs(idle),
            write_timeout: Duration::from_secs(write),
            ..Self::PRODUCT
        })
    }
}

/// `key`'s value (or its default) as a whole number in `min..=max`.
fn whole_number(settings: &Settings, key: Key, min: u64, max: u64) -> Result<u64, ConfigError> {
    let spec = key.spec();
    let Some(text) = settings.text(key)?.or(spec.default) else {
        return Ok(min);
    };
    let refuse = |problem: &str| {
        ConfigError::new(key.variable(), text, spec.accepted).with_problem(problem.to_owned())
    };
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| refuse("not a whole number"))?;
    if !(min..=max).contains(&n) {
        return Err(refuse(&format!("out of range {min} to {max}")));
    }
    Ok(n)
}

/// A connection's byte stream whose writes fail with `TimedOut` once the peer has accepted
/// nothing for `timeout` (a write, flush or shutdown pending that long). hyper then drops the
/// connection and the response body it held, so a client that never reads pins memory for at
/// most `timeout`.
struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Passes `result` on, timing how long the writes have been pending.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        use std::future::Future;
        match result {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let timeout = self.timeout;
                let stalled = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match stalled.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "the client accepted no response bytes for {} s",
                            timeout.as_secs_f64()
                        ),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, result)
    }
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
    port: u16,
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

/// `GET /healthz` (W13): no token, loopback only (a `Host` or request target that is not this
/// loopback server, or a foreign `Origin`, gets 403), never starts a worker (it reads the supervisor's state only). 200 when
/// the process can take every tool call now, 503 while its resident worker is not ready; the
/// body is only `{"ready": bool, "worker": "none"|"oneshot"|"not_started"|"starting"|"ready"|
/// "failed"|"retired"}` — no path, pid, version or configuration.
async fn healthz(
    State(health): State<Health>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let foreign_origin = headers.get(header::ORIGIN).is_some_and(|o| {
        !o.to_str()
            .is_ok_and(|o| health.origins.iter().any(|allowed| allowed == o))
    });
    if foreign_origin || authority_refusal(&uri, &headers, health.port).is_some() {
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

/// Largest HTTP request body (bytes), for rmcp and the wire layer alike: stdio's per-message
/// bound [`super::stdio::MAX_LINE_BYTES`] (193 MiB = the 32 MiB submission limit at the worst
/// escaping + 1 MiB), so every submission stdio accepts is accepted over HTTP too: limits
/// that agree. The body is read as a stream up to this bound (413 past it) within
/// [`HttpLimits::body_read_timeout`].
const MAX_LOGGED_BODY: usize = super::stdio::MAX_LINE_BYTES;

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
        // rmcp's own session bound: closed after `session_idle` without an event (its default
        // keeps an abandoned session 300 s).
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(self.limits.session_idle);
        let sessions = Arc::new(manager);
        let health_server = server.clone();
        let service =
            StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
        let protocol = Protocol {
            sessions: Sessions::new(sessions, self.limits.max_sessions),
            limits: self.limits,
        };
        let guard = Guard {
            token: token.into(),
            origins: Arc::new(origins),
            port: self.local_addr.port(),
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
            port: self.local_addr.port(),
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
/// `limits.header_read_timeout` or its client accepts no bytes for `limits.write_timeout`. On `shutdown`, stops accepting, lets open connections finish
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
            let io = WriteDeadline::new(stream, limits.write_timeout);
            let conn = builder.serve_connection(TokioIo::new(io), service);
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

    fn own_host() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:5"));
        h
    }

    #[test]
    fn the_host_is_checked_in_every_form() {
        let cases: &[(Option<&'static str>, &str, Option<StatusCode>)] = &[
            (Some("127.0.0.1:5"), "/mcp", None),
            (Some("localhost"), "/mcp", None),
            (Some("[::1]:5"), "/mcp", None),
            (Some("127.0.0.1:5"), "http://localhost:5/mcp", None),
            (None, "/mcp", Some(StatusCode::BAD_REQUEST)),
            (Some(""), "/mcp", Some(StatusCode::BAD_REQUEST)),
            (Some("  "), "/mcp", Some(StatusCode::BAD_REQUEST)),
            (Some("evil.example"), "/mcp", Some(StatusCode::FORBIDDEN)),
            (Some("127.0.0.1:6"), "/mcp", Some(StatusCode::FORBIDDEN)),
            (
                Some("127.0.0.1.evil.example"),
                "/mcp",
                Some(StatusCode::FORBIDDEN),
            ),
            (
                Some("127.0.0.1:5"),
                "http://evil.example/mcp",
                Some(StatusCode::FORBIDDEN),
            ),
            (
                Some("127.0.0.1:5"),
                "https://127.0.0.1:5/mcp",
                Some(StatusCode::FORBIDDEN),
            ),
        ];
        for (host, target, expected) in cases {
            let mut h = HeaderMap::new();
            if let Some(host) = host {
                h.insert(header::HOST, HeaderValue::from_static(host));
            }
            let uri: axum::http::Uri = target.parse().unwrap();
            let got = authority_refusal(&uri, &h, 5);
            assert_eq!(
                got.as_ref().map(|r| r.0),
                *expected,
                "{host:?} {target}: {got:?}"
            );
            if let Some((_, message)) = got {
                assert!(
                    message.contains("127.0.0.1:5"),
                    "says what is accepted: {message}"
                );
            }
        }
    }

    #[test]
    fn guard_checks_origin_then_token() {
        let guard = Guard {
            token: "abc".into(),
            origins: Arc::new(allowed_origins(5)),
            port: 5,
        };
        let target: axum::http::Uri = "/mcp".parse().unwrap();
        let refusal = |guard: &Guard, h: &HeaderMap| refusal(guard, &target, h);
        // Without an Origin header (a non-browser client), then with this port's own origin.
        for origin in [None, Some("http://localhost:5")] {
            let mut h = own_host();
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
        let mut h = own_host();
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
    fn limits_come_from_the_settings_and_bad_values_are_refused() {
        let settings = |pairs: Vec<(Key, &'static str)>| {
            Settings::from_lookup(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k.variable() == name)
                    .map(|(_, v)| (*v).into())
            })
        };
        assert_eq!(
            HttpLimits::from_settings(&settings(vec![])).unwrap(),
            HttpLimits::PRODUCT
        );
        let set = settings(vec![
            (Key::McpHttpMaxSessions, "4"),
            (Key::McpHttpSessionIdleS, "45"),
            (Key::McpHttpWriteTimeoutS, "7"),
        ]);
        let limits = HttpLimits::from_settings(&set).unwrap();
        assert_eq!(
            (
                limits.max_sessions,
                limits.session_idle,
                limits.write_timeout
            ),
            (4, Duration::from_secs(45), Duration::from_secs(7))
        );
        for (key, value) in [
            (Key::McpHttpMaxSessions, "0"),
            (Key::McpHttpMaxSessions, "33"),
            (Key::McpHttpMaxSessions, "many"),
            (Key::McpHttpSessionIdleS, "29"),
            (Key::McpHttpSessionIdleS, "-1"),
            (Key::McpHttpWriteTimeoutS, "0"),
            (Key::McpHttpWriteTimeoutS, "1.5"),
        ] {
            let err = HttpLimits::from_settings(&settings(vec![(key, value)])).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(key.variable()), "{text}");
            assert!(text.contains(value), "{text}");
            assert!(text.contains(key.spec().accepted), "{text}");
        }
    }

    #[test]
    fn tokens_are_long_and_distinct() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}

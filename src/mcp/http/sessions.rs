//! Session admission and bookkeeping (M1): at most `max_sessions` per token with LRU
//! eviction, idle expiry, one GET SSE stream per session, and the open responses each session
//! holds (ended when a response body is dropped).

use super::*;

/// What the transport knows of one MCP session besides rmcp's state: when it was last used
/// and how many of its responses (request-wise SSE or JSON bodies, and its GET stream) are open.
#[derive(Debug, Clone, Copy)]
pub(super) struct Activity {
    pub(super) last_use: Instant,
    pub(super) open_responses: usize,
}

/// Session admission (M1): at most [`HttpLimits::max_sessions`] sessions for the token, at most
/// one GET SSE stream per session. rmcp's [`LocalSessionManager`] holds the sessions and closes
/// one after [`HttpLimits::session_idle`] without an event (its `keep_alive`); this table picks
/// the session a new one evicts at the cap: one with no open response first, then the least
/// recently used — so whoever opens sessions and never closes them evicts their own.
pub(super) struct Sessions {
    pub(super) manager: Arc<LocalSessionManager>,
    pub(super) max: usize,
    pub(super) activity: Mutex<HashMap<SessionId, Activity>>,
    /// The open GET SSE stream of each session that has one (a serial number and the token
    /// whose cancellation ends it).
    pub(super) streams: Mutex<HashMap<SessionId, (u64, CancellationToken)>>,
    pub(super) next_stream: std::sync::atomic::AtomicU64,
    /// Serializes evict-then-create, so concurrent `initialize`s cannot overshoot the cap.
    pub(super) admission: tokio::sync::Mutex<()>,
}

impl Sessions {
    pub(super) fn new(manager: Arc<LocalSessionManager>, max: usize) -> Arc<Self> {
        Arc::new(Self {
            manager,
            max: max.max(1),
            activity: Mutex::new(HashMap::new()),
            streams: Mutex::new(HashMap::new()),
            next_stream: std::sync::atomic::AtomicU64::new(0),
            admission: tokio::sync::Mutex::new(()),
        })
    }

    pub(super) fn touch(&self, id: &SessionId, opened: bool) {
        let mut activity = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        let entry = activity.entry(id.clone()).or_insert(Activity {
            last_use: Instant::now(),
            open_responses: 0,
        });
        entry.last_use = Instant::now();
        if opened {
            entry.open_responses += 1;
        }
    }

    pub(super) fn response_closed(&self, id: &SessionId) {
        let mut activity = self.activity.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = activity.get_mut(id) {
            entry.last_use = Instant::now();
            entry.open_responses = entry.open_responses.saturating_sub(1);
        }
    }

    pub(super) fn forget(&self, id: &SessionId) {
        self.activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some(stream) = self
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
        {
            stream.1.cancel();
        }
    }

    /// Makes room for one new session: forgets sessions rmcp has closed (idle, DELETE, ended)
    /// and, at the cap, closes the ones to evict. Call with `admission` held.
    pub(super) async fn make_room(&self) {
        let live: Vec<SessionId> = self.manager.sessions.read().await.keys().cloned().collect();
        let victims = {
            let mut activity = self.activity.lock().unwrap_or_else(|e| e.into_inner());
            activity.retain(|id, _| live.contains(id));
            let mut ranked: Vec<(bool, Option<Instant>, SessionId)> = live
                .iter()
                .map(|id| {
                    let a = activity.get(id);
                    (
                        a.is_some_and(|a| a.open_responses > 0),
                        a.map(|a| a.last_use),
                        id.clone(),
                    )
                })
                .collect();
            ranked.sort();
            let excess = (live.len() + 1).saturating_sub(self.max);
            ranked
                .into_iter()
                .take(excess)
                .map(|(_, _, id)| id)
                .collect::<Vec<_>>()
        };
        for id in victims {
            tracing::info!(session = %id, cap = self.max, "HTTP session cap: evicting the least recently used session");
            self.forget(&id);
            if let Err(e) = self.manager.close_session(&id).await {
                tracing::warn!(session = %id, "closing an evicted session failed: {e}");
            }
        }
    }
}

/// Ends its session's bookkeeping for one response when the response body is dropped
/// (finished, or its connection dropped).
pub(super) struct OpenResponse {
    pub(super) sessions: Arc<Sessions>,
    pub(super) id: SessionId,
    /// For a GET stream: its entry in [`Sessions::streams`].
    pub(super) stream: Option<(u64, CancellationToken)>,
}

impl Drop for OpenResponse {
    fn drop(&mut self) {
        self.sessions.response_closed(&self.id);
        if let Some((mine, _)) = &self.stream {
            let mut streams = self
                .sessions
                .streams
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            // Only this stream's own entry (an evicted session's entry is gone already).
            if streams.get(&self.id).is_some_and(|(n, _)| n == mine) {
                streams.remove(&self.id);
            }
        }
    }
}

/// `response` with its body tied to `open`: the bookkeeping ends with the body, and a GET
/// stream ends when its token is cancelled (its session evicted).
pub(super) fn tracked(response: Response, open: OpenResponse) -> Response {
    use futures::StreamExt;
    let (parts, body) = response.into_parts();
    let stop = open
        .stream
        .as_ref()
        .map_or_else(CancellationToken::new, |(_, t)| t.clone());
    let stream = body
        .into_data_stream()
        .take_until(stop.cancelled_owned())
        .map(move |chunk| {
            let _open = &open;
            chunk
        });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

pub(super) fn session_header(headers: &HeaderMap) -> Option<SessionId> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| -> SessionId { v.into() })
}

//! Messages of the private pipe protocol (SPEC W3), as carried by [`super::codec`] frames. See
//! `integrations/waymark/worker_protocol.mjs` for the worker side of the same contract.

use serde::{Deserialize, Serialize};

use super::{Language, Scope, ScopeQuery};

/// A frame from the supervisor to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SupervisorMessage {
    Discover(DiscoverFrame),
}

/// W3: one discovery request. The source is not in the frame: it is in the owned request file
/// `<generation root>/<token>/source`, whose byte count and SHA-256 the worker checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscoverFrame {
    pub generation: u64,
    pub request: u64,
    pub language: Language,
    /// Generated request directory token (`[A-Za-z0-9_-]{1,64}`).
    pub token: String,
    /// Size of the request file in bytes.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the request file.
    pub sha256: String,
    /// What to answer (absent: every scope); see [`ScopeQuery`].
    #[serde(default, skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub query: Option<ScopeQuery>,
}

/// A frame from a worker to the supervisor.
///
/// Deserialized through a flat wire struct rather than serde's internally tagged enum, which
/// would buffer a whole 2 MiB result into an intermediate tree before decoding it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    Ready(ReadyFrame),
    Result(ResultFrame),
}

#[derive(Deserialize)]
struct WireWorkerMessage {
    #[serde(rename = "type")]
    kind: String,
    generation: u64,
    #[serde(default)]
    request: Option<u64>,
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    languages: Vec<String>,
    #[serde(default)]
    warmup_ms: f64,
    #[serde(default)]
    engine: String,
    #[serde(default)]
    ok: Option<bool>,
    #[serde(default)]
    scopes: Option<Vec<Scope>>,
    #[serde(default)]
    parse_ms: Option<f64>,
    #[serde(default)]
    read_ms: Option<f64>,
    #[serde(default)]
    has_error: Option<bool>,
    #[serde(default)]
    error_line: Option<usize>,
    #[serde(default)]
    scope_count: Option<usize>,
    #[serde(default)]
    names: Option<Vec<String>>,
    #[serde(default)]
    error: Option<ResultError>,
}

impl<'de> Deserialize<'de> for WorkerMessage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = WireWorkerMessage::deserialize(deserializer)?;
        match w.kind.as_str() {
            "ready" => Ok(WorkerMessage::Ready(ReadyFrame {
                generation: w.generation,
                pid: w.pid.ok_or_else(|| D::Error::missing_field("pid"))?,
                mode: w.mode,
                languages: w.languages,
                warmup_ms: w.warmup_ms,
                engine: w.engine,
            })),
            "result" => Ok(WorkerMessage::Result(ResultFrame {
                generation: w.generation,
                request: w
                    .request
                    .ok_or_else(|| D::Error::missing_field("request"))?,
                ok: w.ok.ok_or_else(|| D::Error::missing_field("ok"))?,
                scopes: w.scopes,
                parse_ms: w.parse_ms,
                read_ms: w.read_ms,
                has_error: w.has_error,
                error_line: w.error_line,
                scope_count: w.scope_count,
                names: w.names,
                error: w.error,
            })),
            other => Err(D::Error::unknown_variant(other, &["ready", "result"])),
        }
    }
}

/// The first frame of a generation: it has loaded (and, resident, warmed up) its grammars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadyFrame {
    pub generation: u64,
    pub pid: u32,
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub languages: Vec<String>,
    /// Grammar load + warm-up time inside the worker, milliseconds.
    #[serde(default)]
    pub warmup_ms: f64,
    #[serde(default)]
    pub engine: String,
}

/// The answer to one [`DiscoverFrame`]: scopes (`ok: true`) or a domain error (`ok: false`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultFrame {
    pub generation: u64,
    pub request: u64,
    pub ok: bool,
    #[serde(default)]
    pub scopes: Option<Vec<Scope>>,
    /// Parse + walk time inside the worker, milliseconds.
    #[serde(default)]
    pub parse_ms: Option<f64>,
    /// Request file read + check time inside the worker, milliseconds.
    #[serde(default)]
    pub read_ms: Option<f64>,
    /// True when the tree contains syntax errors (discovery still succeeds).
    #[serde(default)]
    pub has_error: Option<bool>,
    /// With `has_error`: the 1-based line of the first syntax error.
    #[serde(default)]
    pub error_line: Option<usize>,
    /// How many scopes the whole file has (the answer may list fewer).
    #[serde(default)]
    pub scope_count: Option<usize>,
    /// For an unmatched name query: the first distinct names (the agent's advice).
    #[serde(default)]
    pub names: Option<Vec<String>>,
    #[serde(default)]
    pub error: Option<ResultError>,
}

/// A worker-side error: `parse_failed`, `output_too_large`, `integrity_mismatch`,
/// `unsupported_language`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultError {
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_match_the_worker_json_shape() {
        let d = SupervisorMessage::Discover(DiscoverFrame {
            generation: 1,
            request: 2,
            language: Language::Python,
            token: "abc".into(),
            bytes: 3,
            sha256: "00".into(),
            query: None,
        });
        assert_eq!(
            serde_json::to_value(&d).expect("json"),
            json!({"type":"discover","generation":1,"request":2,"language":"python",
                   "token":"abc","bytes":3,"sha256":"00"})
        );
        let r: WorkerMessage = serde_json::from_value(json!({
            "type":"result","generation":1,"request":2,"ok":false,
            "error":{"code":"parse_failed","message":"x"}}))
        .expect("result");
        assert!(matches!(
            r,
            WorkerMessage::Result(ResultFrame { ok: false, .. })
        ));
    }
}

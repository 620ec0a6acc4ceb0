//! Issue 12 "done means": a fuzz harness over the stdio transport and tool arguments — 0 panics,
//! 0 hangs, 0 unanswered requests. Each case feeds the real `PatchdiffServer` (workspace
//! profile, a real SQLite store) through the real [`StdioTransport`] a few lines mixing raw
//! bytes, broken JSON, wrong envelopes and tool calls with arbitrary arguments; after each line a
//! `ping` with a fresh id goes in, and everything before its answer is that line's answer.
//!
//! Oracle: a line that is a notification (an object with a string `method` and no `id`) or a
//! response (an `id` with `result`/`error`, no `method`) gets nothing; every other line gets
//! exactly one answer, and an error answer always has an `id` member. The server must still
//! answer the `ping` (no hang: a generous guard, not a synchronization).
//!
//! Case count: `PROPTEST_CASES` (default 48 here, so CI's `cargo test` stays bounded).

use std::sync::Arc;
use std::time::Duration;

use patchdiff::config::Profile;
use patchdiff::mcp::PatchdiffServer;
use patchdiff::mcp::stdio::StdioTransport;
use patchdiff::store::SqliteStore;
use patchdiff::telemetry::Recorder;
use proptest::prelude::*;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

const GUARD: Duration = Duration::from_secs(30);

const TOOLS: [&str; 7] = [
    "patchdiff_read_target",
    "patchdiff_find_occurrences",
    "patchdiff_observe_scope",
    "patchdiff_submit_observed_operations",
    "patchdiff_save",
    "patchdiff_replay",
    "patchdiff_init_target",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        Just(json!("calendar")),
        Just(json!(0)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z_]{1,8}",
                    Just("target".to_owned()),
                    Just("text".to_owned()),
                    Just("limit".to_owned()),
                    Just("lines".to_owned()),
                    Just("operations".to_owned()),
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_id() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        (1i64..1_000_000).prop_map(|n| Some(json!(n))),
        "[a-z0-9-]{1,8}".prop_map(|s| Some(json!(s))),
        arb_json().prop_map(Some),
    ]
}

/// One input line (without newline; never the bytes `\n`).
fn arb_line() -> impl Strategy<Value = Vec<u8>> {
    let tool_call = (arb_id(), prop::sample::select(TOOLS.to_vec()), arb_json())
        .prop_map(|(id, tool, args)| {
            let mut m = json!({"jsonrpc": "2.0", "method": "tools/call",
                               "params": {"name": tool, "arguments": args}});
            if let Some(id) = id {
                m["id"] = id;
            }
            m.to_string().into_bytes()
        })
        .boxed();
    let envelope = (
        arb_id(),
        prop_oneof![
            Just(json!("tools/call")),
            Just(json!("tools/list")),
            Just(json!("ping")),
            Just(json!("initialize")),
            Just(json!("no/such")),
            arb_json()
        ],
        arb_json(),
        prop_oneof![Just(json!("2.0")), arb_json()],
    )
        .prop_map(|(id, method, params, version)| {
            let mut m = json!({"jsonrpc": version, "method": method, "params": params});
            if let Some(id) = id {
                m["id"] = id;
            }
            m.to_string().into_bytes()
        });
    let batch = prop::collection::vec(arb_json(), 0..4)
        .prop_map(|items| Value::Array(items).to_string().into_bytes());
    let raw = prop::collection::vec(any::<u8>(), 0..64);
    let cut = tool_call.clone().prop_flat_map(|bytes| {
        let len = bytes.len();
        (Just(bytes), 0..len).prop_map(|(b, at)| b[..at].to_vec())
    });
    prop_oneof![
        3 => tool_call,
        3 => envelope,
        1 => batch,
        2 => raw,
        1 => cut,
        1 => arb_json().prop_map(|v| v.to_string().into_bytes()),
    ]
    .prop_map(|mut line| {
        line.retain(|&b| b != b'\n');
        line
    })
}

fn valid_id(v: &Value) -> bool {
    v.is_string() || v.as_i64().is_some()
}

/// Whether the oracle expects an answer to `line` (JSON-RPC 2.0: requests and invalid messages
/// are answered; notifications and responses are not).
fn expects_answer(line: &[u8]) -> bool {
    let text = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        return false;
    }
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(obj)) => {
            let id = obj.get("id");
            if id.is_some_and(|id| !valid_id(id))
                || obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0")
            {
                return true;
            }
            match obj.get("method") {
                Some(Value::String(_)) => id.is_some(),
                Some(_) => true,
                None => {
                    !(id.is_some() && (obj.contains_key("result") || obj.contains_key("error")))
                }
            }
        }
        // A batch is answered when it is empty or holds a request or an invalid element.
        Ok(Value::Array(items)) => {
            items.is_empty()
                || items.iter().any(|item| {
                    let obj = item.as_object();
                    let has = |k: &str| obj.is_some_and(|o| o.contains_key(k));
                    let is_message = has("method") || has("result") || has("error");
                    match obj.and_then(|o| o.get("id")) {
                        Some(id) if valid_id(id) && has("method") => true,
                        None => !is_message,
                        Some(_) => !is_message || has("method"),
                    }
                })
        }
        _ => true,
    }
}

struct Session {
    input: DuplexStream,
    output: tokio::io::Lines<BufReader<DuplexStream>>,
    next: i64,
}

impl Session {
    async fn start(store: Arc<SqliteStore>) -> Self {
        let (client_in, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_out) = tokio::io::duplex(1 << 20);
        let (recorder, telemetry) = Recorder::configure(None, None);
        let server =
            PatchdiffServer::new(Profile::Workspace, true, store, None, recorder, telemetry);
        tokio::spawn(async move {
            if let Ok(service) = server
                .serve(StdioTransport::new(server_in, server_out))
                .await
            {
                let _ = service.waiting().await;
            }
        });
        let mut s = Self {
            input: client_in,
            output: BufReader::new(client_out).lines(),
            next: 1_000_000_000,
        };
        let init = json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}});
        s.send(init.to_string().as_bytes()).await;
        let answer = s.read().await;
        assert_eq!(answer["id"], "init", "{answer}");
        s.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        s
    }

    async fn send(&mut self, line: &[u8]) {
        self.input.write_all(line).await.unwrap();
        self.input.write_all(b"\n").await.unwrap();
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(GUARD, self.output.next_line())
            .await
            .expect("the server stopped answering (hang)")
            .expect("read")
            .expect("the server closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {line}"))
    }

    /// Sends `line`, then a ping; returns the other answers that came before both the ping's
    /// answer and (for a request with id `awaited`) the answer carrying that id. Requests run
    /// concurrently in rmcp, so a tool call may be answered after the ping.
    async fn exchange(&mut self, line: &[u8], awaited: Option<&Value>) -> Vec<Value> {
        self.send(line).await;
        self.next += 1;
        let ping = self.next;
        self.send(
            json!({"jsonrpc":"2.0","id":ping,"method":"ping"})
                .to_string()
                .as_bytes(),
        )
        .await;
        let mut others = Vec::new();
        let mut pinged = false;
        loop {
            let answer = self.read().await;
            if answer["id"] == ping && answer.get("result").is_some() {
                pinged = true;
            } else {
                others.push(answer);
            }
            let awaited_seen = awaited.is_none_or(|id| others.iter().any(|a| &a["id"] == id));
            if pinged && awaited_seen {
                return others;
            }
        }
    }
}

/// The id of a line that is a single request with a valid id (its answer may come late).
fn request_id(line: &[u8]) -> Option<Value> {
    let text = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(text) else {
        return None;
    };
    obj.get("method")?.as_str()?;
    obj.get("id").filter(|id| valid_id(id)).cloned()
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

fn store() -> Arc<SqliteStore> {
    static STORE: std::sync::OnceLock<(tempfile::TempDir, Arc<SqliteStore>)> =
        std::sync::OnceLock::new();
    STORE
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open(&dir.path().join("fuzz.sqlite")).unwrap();
            (dir, Arc::new(store))
        })
        .1
        .clone()
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_request_line_gets_exactly_one_answer(lines in prop::collection::vec(arb_line(), 1..8)) {
        runtime().block_on(async {
            let mut session = Session::start(store()).await;
            for line in &lines {
                let awaited = request_id(line);
                let answers = session.exchange(line, awaited.as_ref()).await;
                let expected = usize::from(expects_answer(line));
                assert_eq!(
                    answers.len(),
                    expected,
                    "line {:?} got {answers:?}",
                    String::from_utf8_lossy(line)
                );
                for a in &answers {
                    let all = a.as_array().cloned().unwrap_or_else(|| vec![a.clone()]);
                    for one in all {
                        assert!(one.get("id").is_some(), "an answer without `id`: {one}");
                        assert!(
                            one.get("result").is_some() || one.get("error").is_some(),
                            "{one}"
                        );
                    }
                }
            }
        });
    }
}

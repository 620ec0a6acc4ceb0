//! Issue 12 (K8, M5): every request over stdio gets an answer — each malformed input the attack
//! run found, written raw to a real `patchdiff mcp` process's stdin, one line at a time.

use std::process::Stdio;
use std::time::Duration;

use crate::mcp::*;
use patchdiff::mcp::stdio::MAX_LINE_BYTES;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A guard against a missing answer, not a synchronization: answers come in milliseconds.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// A `patchdiff mcp` child spoken to in raw lines.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    _env: TestEnv,
}

impl Raw {
    async fn launch(profile: &str) -> Self {
        let env = TestEnv::new();
        let mut child = Command::new(exe())
            .arg("mcp")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.vars(profile))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn patchdiff mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
            _env: env,
        }
    }

    async fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    async fn answer(&mut self) -> Value {
        let line = tokio::time::timeout(ANSWER_WITHIN, self.stdout.next_line())
            .await
            .expect("no answer within the guard time")
            .expect("read")
            .expect("the server closed its stdout instead of answering");
        serde_json::from_str(&line).expect("the answer is JSON")
    }

    async fn ask(&mut self, line: &[u8]) -> Value {
        self.send(line).await;
        self.answer().await
    }

    async fn initialize(&mut self, version: &str) -> Value {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let answer = self.ask(init.to_string().as_bytes()).await;
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        answer
    }

    async fn close(mut self) {
        drop(self.stdin);
        let status = tokio::time::timeout(ANSWER_WITHIN, self.child.wait())
            .await
            .expect("exits when stdin closes")
            .expect("wait");
        assert!(status.success(), "{status}");
    }
}

fn assert_error(answer: &Value, code: i64, id: Value) {
    assert_eq!(answer["error"]["code"], code, "{answer}");
    // JSON-RPC 2.0: an error response always carries `id` (null when it cannot be known).
    assert_eq!(answer.get("id"), Some(&id), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

#[tokio::test]
async fn unparsable_lines_get_a_parse_error_with_a_null_id() {
    let mut mcp = Raw::launch("workspace").await;
    mcp.initialize("2025-11-25").await;
    for line in [
        &b"not json"[..],
        b"\xff\xfe{}",
        br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
    ] {
        let answer = mcp.ask(line).await;
        assert_error(&answer, -32700, Value::Null);
    }
    // The stream is intact: the next request is answered normally.
    let pong = mcp
        .ask(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    mcp.close().await;
}

#[tokio::test]
async fn bad_params_get_invalid_params_with_the_request_id() {
    let mut mcp = Raw::launch("workspace").await;
    mcp.initialize("2025-11-25").await;
    for (id, line) in [
        (
            3,
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}),
        ),
        (
            4,
            json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"patchdiff_read_target","arguments":[1,2]}}),
        ),
        // No name: -32602, not -32601.
        (
            5,
            json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}),
        ),
        (
            6,
            json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":7}}),
        ),
    ] {
        let answer = mcp.ask(line.to_string().as_bytes()).await;
        assert_error(&answer, -32602, json!(id));
    }
    // Envelope faults are invalid requests, with the id when it is a valid one.
    let answer = mcp.ask(br#"{"id":8,"method":"ping"}"#).await;
    assert_error(&answer, -32600, json!(8));
    let answer = mcp
        .ask(br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#)
        .await;
    assert_error(&answer, -32600, Value::Null);
    mcp.close().await;
}

#[tokio::test]
async fn argument_validation_failures_are_is_error_tool_results() {
    let mut mcp = Raw::launch("workspace").await;
    mcp.initialize("2025-11-25").await;
    let call = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{
        "name":"patchdiff_read_target","arguments":{"target":5}}});
    let answer = mcp.ask(call.to_string().as_bytes()).await;
    assert_eq!(answer["id"], 9);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["error"]["code"],
        "INVALID_ARGUMENTS"
    );
    mcp.close().await;
}

#[tokio::test]
async fn a_request_before_initialize_is_told_to_initialize_first() {
    let mut mcp = Raw::launch("workspace").await;
    let answer = mcp
        .ask(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    assert_error(&answer, -32600, json!(1));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("initialize first"),
        "{answer}"
    );
    // The session can still be initialized afterwards.
    let init = mcp.initialize("2025-11-25").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let tools = mcp
        .ask(br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .await;
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    mcp.close().await;
}

#[tokio::test]
async fn batches_are_answered_per_request_with_ids_and_2025_03_26_is_not_negotiated() {
    let mut mcp = Raw::launch("workspace").await;
    let init = mcp.initialize("2025-03-26").await;
    let version = init["result"]["protocolVersion"].as_str().unwrap();
    assert_ne!(
        version, "2025-03-26",
        "the batch-era version was negotiated"
    );
    let answer = mcp
        .ask(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#)
        .await;
    let answers = answer.as_array().expect("a batch answer is an array");
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!("b")]);
    for a in answers {
        assert_eq!(a["error"]["code"], -32600, "{a}");
    }
    let answer = mcp.ask(b"[]").await;
    assert_error(&answer, -32600, Value::Null);
    mcp.close().await;
}

/// A 17 MB `new_text` (over rmcp's 16 MiB line limit, under the 32 MiB submission limit) used
/// to get no reply at all; a line over the server's own limit gets an error with its id.
#[tokio::test]
async fn large_submissions_are_answered_and_oversize_lines_get_an_error() {
    let mut mcp = Raw::launch("workspace").await;
    mcp.initialize("2025-11-25").await;
    let big = "x".repeat(17 * 1000 * 1000);
    let call = json!({"jsonrpc":"2.0","id":21,"method":"tools/call","params":{
        "name":"patchdiff_submit_observed_operations","arguments":{
            "target":"none","request_key":"k","base_revision":0,
            "operations":[{"old_text":"a","new_text": big}]}}});
    let answer = mcp.ask(call.to_string().as_bytes()).await;
    assert_eq!(answer["id"], 21, "{answer}");
    assert_eq!(answer["result"]["isError"], true);
    assert_eq!(
        answer["result"]["structuredContent"]["error"]["code"],
        "UNKNOWN_TARGET"
    );

    let huge = "y".repeat(MAX_LINE_BYTES);
    let call = json!({"jsonrpc":"2.0","id":22,"method":"tools/call","params":{
        "name":"patchdiff_submit_observed_operations","arguments":{
            "target":"none","request_key":"k","base_revision":0,
            "operations":[{"old_text":"a","new_text": huge}]}}});
    let answer = mcp.ask(call.to_string().as_bytes()).await;
    assert_error(&answer, -32600, json!(22));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{answer}"
    );
    let pong = mcp
        .ask(br#"{"jsonrpc":"2.0","id":23,"method":"ping"}"#)
        .await;
    assert_eq!(pong["id"], 23);
    mcp.close().await;
}

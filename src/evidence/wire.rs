//! The one typed reader of wire logs (E1): [`WireRecord`] lines as [`WireMessage`]s with
//! their process, requests paired with their replies by (process, JSON-RPC id) — the story,
//! the host's seal check, `verify`'s receipts check and the console's viewer all read
//! through it.

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Direction of one MCP wire message relative to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client → server (requests and notifications).
    Request,
    /// Server → client (results, errors, notifications).
    Result,
}

/// One line of an MCP wire log (E1): one message's exact bytes as they crossed the transport
/// (a stdio line without its newline, an HTTP body, an SSE event's data), with the direction,
/// the logging process's sequence number and a monotonic timestamp taken at the read/write.
/// Lines of one process appear in the file in wire order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireRecord {
    /// Per-process sequence number, from 0, in wire order.
    pub seq: u64,
    /// The process that logged the message (a relaunched process restarts `seq`).
    pub pid: u32,
    /// `CLOCK_MONOTONIC` in ns at the read or write (comparable across processes of one boot).
    pub mono_ns: u64,
    /// Wall clock, Unix ms, at the same moment.
    pub ts_ms: f64,
    pub direction: Direction,
    /// The message's bytes when they are UTF-8 (always, for JSON-RPC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The message's bytes in hex when they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_hex: Option<String>,
    /// A stdio message that ended at end of stream without its newline.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unterminated: bool,
    /// The message was not kept, only its length and digest: the process had already recorded
    /// [`WIRE_LOG_MESSAGE_BYTES`] of messages (the wire log's bound).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elided: bool,
    /// With `elided`: the message's length in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// With `elided`: the SHA-256 (hex) of the message's bytes (after redaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The most message bytes one process records in full in its wire log: 1 GiB, so a run's evidence cannot grow without bound.
/// Each message is recorded once, as its bytes (a JSON string: a JSON-RPC line grows by its
/// escaped `"` and `\`, at most 2×; bytes that are not UTF-8 are hex, 2×), plus about 200 bytes
/// of record fields and chain link. A message that would take the process past this bound is
/// recorded as `elided` with its length and SHA-256 only, so one process's wire log stays
/// below 2 GiB + 200 bytes per message whatever an agent sends; a canary run has three MCP
/// processes (full, observed, the host's observed), each relaunch a new one. The largest legal
/// request (193 MiB, `mcp::stdio::MAX_LINE_BYTES`) fits five times; agent-facing results are
/// at most 32 KiB each (`mcp::delivery`).
pub const WIRE_LOG_MESSAGE_BYTES: u64 = 1 << 30;

impl WireRecord {
    /// The exact bytes of the message.
    pub fn bytes(&self) -> Vec<u8> {
        match (&self.raw, &self.raw_hex) {
            (Some(raw), _) => raw.as_bytes().to_vec(),
            (None, Some(h)) => hex::decode(h).unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }

    /// The message parsed as JSON, or its text as a JSON string when it is not JSON.
    pub fn message(&self) -> Value {
        let bytes = self.bytes();
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// One JSON-RPC message of a wire log, with the process that logged it (several
/// processes may append to one log, and each numbers its JSON-RPC ids on its own).
#[derive(Debug, Clone, PartialEq)]
pub struct WireMessage {
    /// 1-based line of the log the message is on.
    pub line: usize,
    pub pid: u32,
    pub seq: u64,
    pub direction: Direction,
    /// The message parsed (a JSON object).
    pub message: Value,
}

impl WireMessage {
    /// The key pairing a reply with its request ([`ExchangeKey`]); `None` for a notification.
    pub fn exchange_key(&self) -> Option<ExchangeKey> {
        ExchangeKey::of(self.pid, &self.message)
    }

    /// Whether the message is a request or a notification (it has a `method`), not a reply.
    pub fn is_request(&self) -> bool {
        self.message.get("method").is_some()
    }
}

/// What pairs a reply with its request in a wire log: the process that logged both and the
/// JSON-RPC `id` as JSON text (`1` and `"1"` differ). Never the id alone: several processes
/// may append to one log (a relaunch, the processes of one printed host configuration), and
/// each numbers its ids from 1. Shown as `pid:id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeKey {
    pub pid: u32,
    /// The JSON-RPC id, serialized.
    pub id: String,
}

impl ExchangeKey {
    /// The key of `message` (a JSON-RPC object) logged by `pid`; `None` when it has no `id`.
    pub fn of(pid: u32, message: &Value) -> Option<Self> {
        message.get("id").map(|id| Self {
            pid,
            id: id.to_string(),
        })
    }
}

impl std::fmt::Display for ExchangeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.pid, self.id)
    }
}

/// The one typed reader of wire logs: every [`WireRecord`] line's JSON-RPC object, in file
/// order, with its process; gap records, other lines and messages that are not JSON objects
/// are skipped. [`read_wire_messages`] streams the same from a reader.
pub fn wire_messages(log: &str) -> Vec<WireMessage> {
    read_wire_messages(log.as_bytes()).collect()
}

/// [`wire_messages`] streamed from `reader`, line by line: memory holds one line at a time.
/// A read error ends the stream (the chain check names an unreadable log).
pub fn read_wire_messages(reader: impl std::io::BufRead) -> impl Iterator<Item = WireMessage> {
    let mut reader = reader;
    let mut buf = Vec::new();
    let mut line_no = 0;
    std::iter::from_fn(move || {
        loop {
            buf.clear();
            line_no += 1;
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let Ok(record) = serde_json::from_slice::<WireRecord>(line) else {
                continue;
            };
            let message = record.message();
            if message.is_object() {
                return Some(WireMessage {
                    line: line_no,
                    pid: record.pid,
                    seq: record.seq,
                    direction: record.direction,
                    message,
                });
            }
        }
    })
}

/// The wire log at `path`, streamed ([`read_wire_messages`]). Errors: opening it.
pub fn wire_log_messages(
    path: &Path,
) -> std::io::Result<impl Iterator<Item = WireMessage> + use<>> {
    Ok(read_wire_messages(std::io::BufReader::with_capacity(
        64 * 1024,
        File::open(path)?,
    )))
}

/// Streams `messages`, pairing each request `pick` selects (keeping only what `pick` returns
/// of it) with its reply — the first later message of the same process with the same `id` and
/// no `method` — mapped by `reply`. Pairs by (process, id), like [`wire_exchanges`], but holds
/// only the selected requests' picks and replies, never the log. In request order.
pub fn pair_requests<T, U>(
    messages: impl IntoIterator<Item = WireMessage>,
    mut pick: impl FnMut(&WireMessage) -> Option<T>,
    mut reply: impl FnMut(&T, WireMessage) -> U,
) -> Vec<(T, Option<U>)> {
    let mut out: Vec<(T, Option<U>)> = Vec::new();
    let mut pending: std::collections::HashMap<ExchangeKey, usize> = Default::default();
    for m in messages {
        let Some(key) = m.exchange_key() else {
            continue;
        };
        if m.is_request() {
            if let Some(t) = pick(&m) {
                pending.insert(key, out.len());
                out.push((t, None));
            }
        } else if let Some(i) = pending.remove(&key) {
            let mapped = reply(&out[i].0, m);
            out[i].1 = Some(mapped);
        }
    }
    out
}

/// Each request (a message with a `method` and an `id`) of `messages` with its reply: the
/// first later message *of the same process* with the same `id` and no `method`. Pairing by
/// (process, id), never by id alone: two processes sharing a log both use id 1.
pub fn wire_exchanges(messages: &[WireMessage]) -> Vec<(&WireMessage, Option<&WireMessage>)> {
    let mut replies: std::collections::HashMap<ExchangeKey, Vec<usize>> = Default::default();
    for (i, m) in messages.iter().enumerate() {
        if !m.is_request()
            && let Some(key) = m.exchange_key()
        {
            replies.entry(key).or_default().push(i);
        }
    }
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_request())
        .filter_map(|(i, m)| {
            let key = m.exchange_key()?;
            let reply = replies
                .get(&key)
                .and_then(|is| is.iter().find(|&&j| j > i))
                .map(|&j| &messages[j]);
            Some((m, reply))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(pid: u32, seq: u64, direction: &str, message: Value) -> String {
        json!({"seq": seq, "pid": pid, "mono_ns": seq, "ts_ms": 0.0, "direction": direction,
               "raw": message.to_string()})
        .to_string()
            + "\n"
    }

    /// Two processes appending to one log both number their requests from 1, and their
    /// replies arrive in the other order: each request pairs with its own process's reply —
    /// by id alone, process 10's request would take process 20's answer.
    fn two_processes_reusing_id_1() -> String {
        [
            line(
                10,
                0,
                "request",
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "patchdiff_read_target"}}),
            ),
            line(
                20,
                0,
                "request",
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "patchdiff_save"}}),
            ),
            line(
                20,
                1,
                "result",
                json!({"jsonrpc": "2.0", "id": 1, "result": {"by": 20}}),
            ),
            line(
                10,
                1,
                "result",
                json!({"jsonrpc": "2.0", "id": 1, "result": {"by": 10}}),
            ),
            line(
                10,
                2,
                "request",
                json!({"jsonrpc": "2.0", "method": "notifications/x"}),
            ),
            "not a record\n".to_owned(),
        ]
        .concat()
    }

    #[test]
    fn requests_pair_with_replies_by_process_and_id_when_two_processes_reuse_id_1() {
        let log = two_processes_reusing_id_1();
        let messages = wire_messages(&log);
        assert_eq!(
            messages.len(),
            5,
            "the line that is not a record is skipped"
        );
        let pairs: Vec<(u32, Option<(u32, usize)>)> = wire_exchanges(&messages)
            .into_iter()
            .map(|(req, reply)| {
                (
                    req.pid,
                    reply.map(|r| (r.message["result"]["by"].as_u64().unwrap() as u32, r.line)),
                )
            })
            .collect();
        assert_eq!(pairs, vec![(10, Some((10, 4))), (20, Some((20, 3)))]);

        // The streamed pairing agrees, holding only the picked requests.
        let streamed = pair_requests(
            read_wire_messages(log.as_bytes()),
            |m| m.message["params"]["name"].as_str().map(str::to_owned),
            |_, reply| reply.message["result"]["by"].as_u64(),
        );
        assert_eq!(
            streamed,
            vec![
                ("patchdiff_read_target".to_owned(), Some(Some(10))),
                ("patchdiff_save".to_owned(), Some(Some(20))),
            ]
        );
    }

    #[test]
    fn the_exchange_key_is_the_process_and_the_ids_json_text() {
        let number = ExchangeKey::of(7, &json!({"id": 1})).unwrap();
        let string = ExchangeKey::of(7, &json!({"id": "1"})).unwrap();
        assert_ne!(number, string, "1 and \"1\" are different ids");
        assert_ne!(number, ExchangeKey::of(8, &json!({"id": 1})).unwrap());
        assert_eq!(number.to_string(), "7:1");
        assert_eq!(string.to_string(), "7:\"1\"");
        assert_eq!(
            ExchangeKey::of(7, &json!({"method": "notifications/x"})),
            None
        );
    }

    #[test]
    fn a_reply_before_its_request_or_without_one_pairs_with_nothing() {
        let log = [
            line(1, 0, "result", json!({"id": 5, "result": {}})),
            line(1, 1, "request", json!({"id": 5, "method": "tools/list"})),
        ]
        .concat();
        let messages = wire_messages(&log);
        let pairs = wire_exchanges(&messages);
        assert_eq!(pairs.len(), 1);
        assert!(
            pairs[0].1.is_none(),
            "a reply only pairs with an earlier request"
        );
    }
}

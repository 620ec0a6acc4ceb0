//! The Anthropic Messages answers on the wire: SSE events for one content block, JSON bodies
//! and error bodies; and the tool results a request carries for the first time.

use super::*;

pub(crate) fn stop_reason(content: &Value) -> &'static str {
    if content["type"] == "tool_use" {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// The Messages streaming events for one content block.
pub(crate) fn sse_response(model: &str, content: Value) -> Response {
    let stop = stop_reason(&content);
    let (start, delta) = if content["type"] == "tool_use" {
        (
            json!({"type": "tool_use", "id": content["id"], "name": content["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": content["input"].to_string()}),
        )
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": content["text"]}),
        )
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": message_id(), "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                // Per request: 10 uncached input tokens, 3 written to and 20 read from the
                // prompt cache, 10 output tokens (the final count is in `message_delta`).
                "usage": {"input_tokens": 10, "cache_creation_input_tokens": 3,
                          "cache_read_input_tokens": 20, "output_tokens": 1},
            }}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": 10}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    event_stream(&events)
}

/// A `text/event-stream` response carrying `events` (name, data) in order.
pub(crate) fn event_stream(events: &[(&str, Value)]) -> Response {
    let body: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(crate) fn json_response(value: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

pub(crate) fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The tool results a conversation hands the model for the first time, as the host sent them:
/// the parts (`field`: `content` for Messages, `parts` for Gemini) of its last message that
/// are results (`is_result`). Earlier messages were logged by earlier requests.
pub(crate) fn new_results(
    conversation: &[Value],
    field: &str,
    is_result: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    conversation
        .last()
        .and_then(|m| m[field].as_array())
        .map(|parts| parts.iter().filter(|p| is_result(p)).cloned().collect())
        .unwrap_or_default()
}

/// The results at the end of a Responses `input` (`function_call_output` items after the last
/// call): those the host hands the model for the first time.
pub(crate) fn trailing(items: &[Value], is_result: impl Fn(&Value) -> bool) -> Vec<Value> {
    let fresh = items.iter().rev().take_while(|i| is_result(i)).count();
    items[items.len() - fresh..].to_vec()
}

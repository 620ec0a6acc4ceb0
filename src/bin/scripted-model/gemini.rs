//! The Gemini API (Gemini CLI, `GOOGLE_GEMINI_BASE_URL=http://ADDR`):
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (SSE `data:` chunks),
//! `:generateContent` (one JSON body) and `:countTokens`. The conversation is `contents`, each
//! `{role: user|model, parts}`; earlier calls are `functionCall` parts and their results
//! `functionResponse` parts; tools are `tools[].functionDeclarations[]`. A request that offers
//! no tools is a side request (the CLI's next-speaker or loop checks): plain text, or, when it
//! asks for JSON (`responseMimeType: application/json`), the smallest value its schema accepts.

use axum::extract::Path;

use super::*;

/// `POST /v1beta/models/{model}:{method}`.
pub(crate) async fn gemini(
    State(model): State<Arc<Model>>,
    Path(action): Path<String>,
    body: Bytes,
) -> Response {
    let Some((model_name, method)) = action.rsplit_once(':') else {
        return gemini_error(StatusCode::NOT_FOUND, "no method: expected MODEL:METHOD");
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return gemini_error(StatusCode::BAD_REQUEST, &format!("body is not JSON: {e}"));
        }
    };
    let stream = match method {
        "countTokens" => {
            return json_response(json!({"totalTokens": body.len() / 4 + 1}));
        }
        "streamGenerateContent" => true,
        "generateContent" => false,
        other => {
            return gemini_error(
                StatusCode::NOT_FOUND,
                &format!(
                    "unknown method `{other}` (accepted: streamGenerateContent, generateContent, countTokens)"
                ),
            );
        }
    };
    let offered = declared_tools(&request);
    let contents = request["contents"].as_array().cloned().unwrap_or_default();
    let history = gemini_history(&contents);
    let session = model.session(&history, model_name, &offered);
    let path = format!("/v1beta/models/{action}");
    let results = new_results(&contents, "parts", |p| p.get("functionResponse").is_some());
    if let Some(status) = model.admit(
        &path,
        &offered,
        contents.len(),
        model_name,
        &session,
        results,
    ) {
        return gemini_error(
            status,
            &format!("scripted-model answers {status} (--fail-status)"),
        );
    }
    let part = match next_turn(&model, &history, &offered, &session) {
        Turn::Stall => std::future::pending::<Value>().await,
        Turn::Text(text) if offered.is_empty() => side_answer(&request, text),
        Turn::Text(text) => json!({"text": text}),
        Turn::ToolUse { id, name, input } => {
            json!({"functionCall": {"id": id, "name": name, "args": input}})
        }
    };
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]},
                        "finishReason": "STOP", "index": 0}],
        // Per request, as on the other APIs: 40 prompt tokens of which 25 cached, 10 output
        // tokens, 2 thinking tokens.
        "usageMetadata": {"promptTokenCount": 40, "cachedContentTokenCount": 25,
                          "candidatesTokenCount": 10, "thoughtsTokenCount": 2,
                          "totalTokenCount": 52},
        "modelVersion": model_name,
        "responseId": message_id(),
    });
    if stream {
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            format!("data: {chunk}\r\n\r\n"),
        )
            .into_response()
    } else {
        json_response(chunk)
    }
}

/// The function names a request declares.
fn declared_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["functionDeclarations"].as_array())
        .flatten()
        .filter_map(|f| f["name"].as_str().map(str::to_owned))
        .collect()
}

/// The Messages shape of a Gemini conversation, so one planner serves every API. A
/// `functionResponse` is paired with its call by `id`, or else with the oldest call not yet
/// answered (the API does not require ids).
fn gemini_history(contents: &[Value]) -> Vec<Value> {
    let mut history = Vec::new();
    let mut calls = 0usize;
    let mut unanswered: std::collections::VecDeque<String> = Default::default();
    for content in contents {
        for part in content["parts"].as_array().into_iter().flatten() {
            if let Some(call) = part.get("functionCall") {
                let id = call["id"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("gemini_call_{calls}"));
                calls += 1;
                unanswered.push_back(id.clone());
                history.push(json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": id, "name": call["name"]}
                ]}));
            } else if let Some(response) = part.get("functionResponse") {
                let id = match response["id"].as_str() {
                    Some(id) => {
                        unanswered.retain(|u| u != id);
                        id.to_owned()
                    }
                    None => unanswered.pop_front().unwrap_or_default(),
                };
                history.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id,
                     "content": response_text(&response["response"])}
                ]}));
            }
        }
    }
    history
}

/// The text of a `functionResponse.response`: the CLI's `output` string, or MCP-style text
/// parts, or else the response itself as JSON.
fn response_text(response: &Value) -> String {
    if let Some(text) = response["output"].as_str() {
        return text.to_owned();
    }
    if let Some(parts) = response["content"].as_array() {
        return parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
    }
    response.to_string()
}

/// A side request's answer: JSON its `responseJsonSchema` (or `responseSchema`) accepts when it
/// asks for JSON, else `text`.
fn side_answer(request: &Value, text: String) -> Value {
    let config = &request["generationConfig"];
    if config["responseMimeType"] == "application/json" {
        let schema = config
            .get("responseJsonSchema")
            .or(config.get("responseSchema"))
            .cloned()
            .unwrap_or(Value::Null);
        return json!({"text": smallest_value(&schema).to_string()});
    }
    json!({"text": text})
}

/// The first enum value, else an empty string, 0, false, an empty list, or an object of its
/// properties' smallest values.
fn smallest_value(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let kind = schema["type"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "string" => json!(""),
        "number" | "integer" => json!(0),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => Value::Object(
            schema["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), smallest_value(v)))
                .collect(),
        ),
    }
}

/// The Gemini API's error body, `{"error": {code, message, status}}`, with
/// `x-should-retry: false`.
fn gemini_error(status: StatusCode, message: &str) -> Response {
    let name = match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 | 529 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    let body = json!({"error": {"code": status.as_u16(), "message": message, "status": name}});
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    no_retry(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_conversation_pairs_results_with_calls_by_id_or_in_order() {
        let contents = json!([
            {"role": "user", "parts": [{"text": "brief"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "toolu_m0s1_0000_a", "name": "t", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "toolu_m0s1_0000_a", "name": "t",
                "response": {"output": "{\"revision\": 3}"}}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "t",
                "response": {"content": [{"type": "text", "text": "{\"revision\": 4}"}]}}}]},
        ]);
        let history = gemini_history(contents.as_array().unwrap());
        assert_eq!(history.len(), 4);
        assert_eq!(history[1]["content"][0]["tool_use_id"], "toolu_m0s1_0000_a");
        assert_eq!(history[1]["content"][0]["content"], "{\"revision\": 3}");
        assert_eq!(history[3]["content"][0]["tool_use_id"], "gemini_call_1");
        assert_eq!(history[3]["content"][0]["content"], "{\"revision\": 4}");
    }

    #[test]
    fn a_side_request_asking_for_json_gets_the_smallest_value_its_schema_accepts() {
        let request = json!({"generationConfig": {"responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object", "properties": {
                "reasoning": {"type": "string"},
                "next_speaker": {"type": "string", "enum": ["user", "model"]},
                "confidence": {"type": "number"}}}}});
        let answer = side_answer(&request, "OK".into());
        let value: Value = serde_json::from_str(answer["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            value,
            json!({"reasoning": "", "next_speaker": "user", "confidence": 0})
        );
        assert_eq!(side_answer(&json!({}), "OK".into()), json!({"text": "OK"}));
    }
}

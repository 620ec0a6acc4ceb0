//! scripted-model: a model server on loopback that speaks the Anthropic Messages API (streaming
//! SSE and plain JSON), the OpenAI Responses API (streaming SSE) and the Gemini API
//! (`streamGenerateContent`, `generateContent`) and plays a canary plan as tool calls, so a real
//! agent host CLI (Claude Code, Codex, Gemini CLI, opencode) can run a canary with no network
//! and no model (SPEC A1: real hosts tested offline).
//!
//! The operator's rehearsal tool: rehearse a canary with a real host CLI and
//! a plan of your own — the host's seal, the MCP wiring, the evaluation, the report — offline,
//! before a real model spends anything. The tests drive the real Claude Code and Codex CLIs
//! with it too. A run against it records a loopback provider endpoint and is marked a
//! rehearsal.
//!
//! ```text
//! scripted-model --plan PLAN.jsonl [--listen 127.0.0.1:0] [--after-plan finish|stall]
//!                [--stall-after-saves N] [--fail-status CODE [--fail-from N] [--fail-count K]]
//!                [--requests LOG.jsonl]
//!                [--mixture [MODEL=]PLAN:WEIGHT[,PLAN:WEIGHT…]]… [--seed N]
//! ```
//!
//! Mixtures (for comparisons: an arm that "fails chess 40 % of the time"): `--mixture` names several
//! plans with weights; each *session* plays one of them. With `MODEL=`, the mixture serves
//! only requests whose `model` is MODEL (so one server plays a different mixture for each arm
//! of a comparison, the arms' canaries naming different models); without it, every model that
//! no other mixture names (it replaces `--plan`). A session is a conversation: the n-th request
//! of a mixture (1-based, counted in arrival order) whose history holds no tool call yet starts
//! session n, whose plan is drawn from the weights by SplitMix64 seeded with `--seed` and n —
//! so for a seed the sequence of plans is fixed whatever the timing. The chosen plan and
//! session ride in the tool-use ids the model hands out (`toolu_m<K>s<N>_…`), which the host
//! sends back in every later request of that conversation: the server still keeps no
//! per-conversation state. A host that resends a session's first request counts it again.
//!
//! It prints `http://ADDR` on the first line of stdout once it listens, then serves until
//! killed. Each `POST /v1/messages` (or `/v1/responses`) is answered from the conversation it
//! carries, so the server
//! keeps no state between requests: the number of `tool_use` blocks already in the history is
//! the index of the next plan step; `${step.field}` references in that step's arguments are
//! filled from the `tool_result` blocks in the history (the leading JSON value of each result's
//! text: a host may append its own reminders after it). Tool names are matched against the
//! request's `tools` by suffix (`mcp__<server>__<tool>`, `mcp_<server>_<tool>`, `<server>_<tool>`). After the last step the model ends its
//! turn with a short text (`finish`), or never answers again (`stall`: a model that never saves,
//! for timeout tests); `--stall-after-saves N` stalls as soon as the conversation holds the
//! results of N `patchdiff_save` calls (partial work for a host timeout). `--fail-status CODE`
//! answers model requests with that HTTP status and the provider's error body (Anthropic
//! `{"type":"error","error":{…}}`, OpenAI `{"error":{…}}`), from the `--fail-from`-th request
//! (1-based, default 1) for `--fail-count` requests (default 0: every one from there on); the
//! answer carries `x-should-retry: false` so a host gives up at once instead of backing off.
//! Only requests that offer tools are counted and failed. A request that offers no tools (a
//! host's side request) gets plain text. `--requests` appends one JSON line per request (path,
//! offered tool names, message count, the status answered, and `results`: the tool results the
//! request hands the model for the first time, as the host sent them — what a host delivers).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use patchdiff::canary::plan::{PlanStep, load_plan, substitute};

#[path = "scripted-model/gemini.rs"]
mod gemini;
#[path = "scripted-model/mixture.rs"]
mod mixture;
#[path = "scripted-model/wire.rs"]
mod wire;

use mixture::*;
use wire::*;

/// What the model does after the plan's last step.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum AfterPlan {
    /// End the turn with a short text.
    Finish,
    /// Never answer again (a model that never saves, for timeout tests).
    Stall,
}

/// The operator's rehearsal tool: a model server on loopback that plays a canary plan as tool
/// calls, so a real agent host CLI (Claude Code, Codex) runs a canary offline, with no network
/// and no model. Prints `http://ADDR` on its first line once it listens, then serves until
/// stopped. A run against it is marked a rehearsal (its provider endpoint is loopback).
#[derive(clap::Parser)]
#[command(
    name = "scripted-model",
    after_help = "Examples:\n  \
      scripted-model --plan assets/canary/demo.plan.jsonl\n  \
      scripted-model --plan demo.plan.jsonl --stall-after-saves 2      # saves two targets, then hangs\n  \
      scripted-model --plan demo.plan.jsonl --fail-status 529          # overloaded at the first request\n  \
      scripted-model --plan demo.plan.jsonl --fail-status 500 --fail-from 4 --fail-count 1\n\n\
      Point the host at it: ANTHROPIC_BASE_URL=http://ADDR (Claude Code, opencode), OPENAI_BASE_URL=http://ADDR/v1\n\
      (Codex; the /v1 matters), GOOGLE_GEMINI_BASE_URL=http://ADDR (Gemini CLI).\n\n\
      Rehearse the Claude canary (the recipe stops what it starts):\n  \
      scripted-model --plan assets/canary/demo.plan.jsonl > model.url & model=$!\n  \
      trap 'kill $model' EXIT; until [ -s model.url ]; do sleep 0.1; done\n  \
      ANTHROPIC_BASE_URL=$(head -1 model.url) ANTHROPIC_API_KEY=rehearsal \\\n    \
      patchdiff console --script claude --set model=claude-sonnet-4-5\n\n\
      Rehearse the Codex canary:\n  \
      OPENAI_BASE_URL=$(head -1 model.url)/v1 OPENAI_API_KEY=rehearsal \\\n    \
      patchdiff console --script codex --set model=gpt-5-codex"
)]
struct Args {
    /// The canary plan to play (one step per line), for every model no `--mixture` names.
    #[arg(long, value_name = "PLAN.jsonl", required_unless_present = "mixture")]
    plan: Option<PathBuf>,
    /// The loopback address to listen on; port 0 picks one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: String,
    /// After the last step: finish the turn, or stall.
    #[arg(long, value_enum, default_value = "finish")]
    after_plan: AfterPlan,
    /// Stall (never answer again) once the conversation holds the results of N `patchdiff_save`
    /// calls: an agent that saved part of the work when the host times out. 0 never answers a
    /// model request at all (a provider that hangs on the first request).
    #[arg(long, value_name = "N")]
    stall_after_saves: Option<usize>,
    /// Answer model requests with this HTTP status (400–599) and the provider's error body, e.g.
    /// 529 (overloaded), 500, 429, 401. Only requests that offer tools are answered so.
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(400..=599))]
    fail_status: Option<u16>,
    /// With --fail-status: the first model request (1-based) to fail.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "fail_status",
          value_parser = clap::value_parser!(u64).range(1..))]
    fail_from: u64,
    /// With --fail-status: how many requests fail from --fail-from on; 0 means every one.
    #[arg(long, value_name = "K", default_value_t = 0, requires = "fail_status")]
    fail_count: u64,
    /// Append one JSON line per request (path, offered tool names, message count, status,
    /// model, the tool results new in it as the host sent them, and for a mixture the session
    /// and plan chosen) here.
    #[arg(long, value_name = "LOG.jsonl")]
    requests: Option<PathBuf>,
    /// Several plans with weights, one drawn per session: `[MODEL=]PLAN:WEIGHT[,PLAN:WEIGHT…]`
    /// (weights positive; they need not sum to 1). Repeat for other models.
    #[arg(long, value_name = "SPEC", value_parser = parse_mixture)]
    mixture: Vec<MixtureSpec>,
    /// Seed of the mixtures' per-session draws.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,
}

/// `--fail-status`: which model requests get an HTTP error instead of an answer.
#[derive(Clone, Copy)]
struct Failure {
    status: StatusCode,
    /// 1-based index of the first failed request.
    from: u64,
    /// How many fail; 0 means every one from `from` on.
    count: u64,
}

impl Failure {
    /// Whether the `n`-th (1-based) model request fails.
    fn applies(&self, n: u64) -> bool {
        n >= self.from && (self.count == 0 || n - self.from < self.count)
    }
}

struct Model {
    mixtures: Vec<Mixture>,
    seed: u64,
    after: AfterPlan,
    stall_after_saves: Option<usize>,
    failure: Option<Failure>,
    /// Model requests (those offering tools) answered so far.
    served: AtomicU64,
    requests: Option<std::sync::Mutex<std::fs::File>>,
}

/// One conversation's place in a mixture.
#[derive(Clone, Copy)]
struct Session {
    /// Index into `Model::mixtures`.
    mixture: usize,
    /// Index into that mixture's plans.
    plan: usize,
    /// The session's number within its mixture (1-based).
    number: u64,
}

/// What the model says next.
enum Turn {
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    Text(String),
    Stall,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Args {
        plan,
        listen,
        after_plan: after,
        stall_after_saves,
        fail_status,
        fail_from,
        fail_count,
        requests,
        mixture,
        seed,
    } = clap::Parser::parse();
    let failure = fail_status.map(|code| Failure {
        // The range 400..=599 is checked by clap, and every such code is a valid status.
        status: StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        from: fail_from,
        count: fail_count,
    });
    let load = |path: &PathBuf| {
        load_plan(path).unwrap_or_else(|e| {
            eprintln!("scripted-model: {e}");
            std::process::exit(2)
        })
    };
    let mut specs = mixture;
    if let Some(plan) = plan {
        if specs.iter().any(|m| m.model.is_none()) {
            eprintln!(
                "scripted-model: --plan and a --mixture without MODEL= both serve every model; give one"
            );
            std::process::exit(2);
        }
        specs.push(MixtureSpec {
            model: None,
            plans: vec![(plan, 1.0)],
        });
    }
    let mixtures: Vec<Mixture> = specs
        .iter()
        .map(|m| Mixture {
            model: m.model.clone(),
            plans: m
                .plans
                .iter()
                .map(|(p, w)| (p.display().to_string(), load(p), *w))
                .collect(),
            sessions: AtomicU64::new(0),
        })
        .collect();
    let requests = requests.map(|p| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .unwrap_or_else(|e| {
                eprintln!("scripted-model: cannot open {}: {e}", p.display());
                std::process::exit(2)
            });
        std::sync::Mutex::new(file)
    });
    let model = Arc::new(Model {
        mixtures,
        seed,
        after,
        stall_after_saves,
        failure,
        served: AtomicU64::new(0),
        requests,
    });
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/responses", post(responses))
        .route("/v1beta/models/{action}", post(gemini::gemini))
        .fallback(not_found)
        .with_state(model);
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .unwrap_or_else(|e| {
            eprintln!("scripted-model: cannot listen on {listen}: {e}");
            std::process::exit(2)
        });
    let addr = listener.local_addr().expect("bound address");
    println!("http://{addr}");
    let _ = std::io::stdout().flush();
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("scripted-model: {e}");
        std::process::exit(1);
    }
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "not_found_error", "no such endpoint")
}

async fn count_tokens(body: Bytes) -> Response {
    // A rough figure is enough: hosts only use it to decide on compaction.
    let tokens = body.len() / 4 + 1;
    json_response(json!({ "input_tokens": tokens }))
}

async fn messages(State(model): State<Arc<Model>>, body: Bytes) -> Response {
    let request = match request_json(&body) {
        Ok(v) => v,
        Err(response) => return *response,
    };
    let offered: Vec<String> = request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let history = request["messages"].as_array().cloned().unwrap_or_default();
    let model_name = request["model"].as_str().unwrap_or("scripted").to_owned();
    let session = model.session(&history, &model_name, &offered);
    if let Some(status) = model.admit(
        "/v1/messages",
        &offered,
        history.len(),
        &model_name,
        &session,
        new_results(&history, "content", |b| b["type"] == "tool_result"),
    ) {
        return anthropic_error(status);
    }
    let content = match next_turn(&model, &history, &offered, &session) {
        Turn::Stall => std::future::pending::<Value>().await,
        Turn::Text(text) => json!({"type": "text", "text": text}),
        Turn::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
    };
    if request["stream"].as_bool() == Some(true) {
        sse_response(&model_name, content)
    } else {
        let stop = stop_reason(&content);
        json_response(json!({
            "id": message_id(), "type": "message", "role": "assistant", "model": model_name,
            "content": [content], "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }))
    }
}

/// The request body as JSON, or the API's `400 invalid_request_error` answer.
fn request_json(body: &Bytes) -> Result<Value, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("body is not JSON: {e}"),
        ))
    })
}

impl Model {
    /// Counts a model request (one that offers tools) and logs it; returns the status to fail
    /// it with (`--fail-status`), or `None` to answer it.
    fn admit(
        &self,
        path: &str,
        tools: &[String],
        messages: usize,
        model: &str,
        session: &Option<Session>,
        results: Vec<Value>,
    ) -> Option<StatusCode> {
        let failed = if tools.is_empty() {
            None
        } else {
            let n = self.served.fetch_add(1, Ordering::SeqCst) + 1;
            self.failure.filter(|f| f.applies(n)).map(|f| f.status)
        };
        let status = failed.unwrap_or(StatusCode::OK);
        if let Some(log) = &self.requests
            && let Ok(mut file) = log.lock()
        {
            let mut line = json!({"path": path, "tools": tools, "messages": messages,
                                  "status": status.as_u16(), "model": model,
                                  "results": results});
            if let Some(s) = session {
                line["session"] = json!(s.number);
                line["plan"] = json!(self.mixtures[s.mixture].plans[s.plan].0);
            }
            let _ = writeln!(file, "{line}");
        }
        failed
    }

    /// The session a model request belongs to: read back from the first tool-use id in its
    /// history (`toolu_m<K>s<N>_…`), or — no tool call yet — a new session of the mixture
    /// serving `model`, its plan drawn now. `None`: a side request (no tools offered), or no
    /// mixture serves `model`.
    fn session(&self, history: &[Value], model: &str, offered: &[String]) -> Option<Session> {
        if offered.is_empty() {
            return None;
        }
        let mixture = self
            .mixtures
            .iter()
            .position(|m| m.model.as_deref() == Some(model))
            .or_else(|| self.mixtures.iter().position(|m| m.model.is_none()))?;
        let first_call = history
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find(|b| b["type"] == "tool_use")
            .and_then(|b| b["id"].as_str().map(str::to_owned));
        if let Some(id) = first_call {
            let tag = id.strip_prefix("toolu_m")?.split('_').next()?;
            let (plan, number) = tag.split_once('s')?;
            let plan: usize = plan.parse().ok()?;
            let number: u64 = number.parse().ok()?;
            return (plan < self.mixtures[mixture].plans.len()).then_some(Session {
                mixture,
                plan,
                number,
            });
        }
        let m = &self.mixtures[mixture];
        let number = m.sessions.fetch_add(1, Ordering::SeqCst) + 1;
        Some(Session {
            mixture,
            plan: m.pick(self.seed, number),
            number,
        })
    }
}

/// The Anthropic error `type` for an HTTP status (as the Messages API names them).
fn anthropic_error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// `--fail-status` on the Messages API, with `x-should-retry: false` so the host does not back
/// off and retry.
fn anthropic_error(status: StatusCode) -> Response {
    let mut response = error_response(
        status,
        anthropic_error_type(status),
        &format!("scripted-model answers {status} (--fail-status)"),
    );
    no_retry(&mut response);
    response
}

/// `--fail-status` on the Responses API: OpenAI's `{"error": {message, type, code}}` body.
fn openai_error(status: StatusCode) -> Response {
    let body = json!({"error": {
        "message": format!("scripted-model answers {status} (--fail-status)"),
        "type": if status.is_server_error() { "server_error" } else { "invalid_request_error" },
        "code": anthropic_error_type(status),
    }});
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    no_retry(&mut response);
    response
}

fn no_retry(response: &mut Response) {
    response.headers_mut().insert(
        header::HeaderName::from_static("x-should-retry"),
        header::HeaderValue::from_static("false"),
    );
}

/// A tool a Responses request offers: its full name as matched against the plan
/// (`namespace__name` for a tool inside a namespace), its namespace, its name inside it.
struct Offered {
    full: String,
    namespace: Option<String>,
    name: String,
}

/// The OpenAI Responses API (Codex): `input` holds the conversation as items; earlier calls are
/// `function_call` items and their results `function_call_output` items. Tools may be grouped
/// in `namespace` entries (Codex puts an MCP server's tools under `mcp__<server>`).
async fn responses(State(model): State<Arc<Model>>, body: Bytes) -> Response {
    let request = match request_json(&body) {
        Ok(v) => v,
        Err(response) => return *response,
    };
    let offered = offered_tools(&request);
    let names: Vec<String> = offered.iter().map(|t| t.full.clone()).collect();
    let items = request["input"].as_array().cloned().unwrap_or_default();
    let history = messages_history(&items);
    let model_name = request["model"].as_str().unwrap_or("scripted").to_owned();
    let session = model.session(&history, &model_name, &names);
    let results = trailing(&items, |i| i["type"] == "function_call_output");
    if let Some(status) = model.admit(
        "/v1/responses",
        &names,
        items.len(),
        &model_name,
        &session,
        results,
    ) {
        return openai_error(status);
    }
    let item = match next_turn(&model, &history, &names, &session) {
        Turn::Stall => std::future::pending::<Value>().await,
        Turn::Text(text) => json!({
            "type": "message", "id": message_id(), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        Turn::ToolUse { id, name, input } => function_call(&offered, &id, &name, &input),
    };
    let id = format!("resp_{}", uuid::Uuid::new_v4().simple());
    // Per request, so a host's totals can be checked against the request log: 40 input tokens of
    // which 25 cached, 10 output tokens of which 2 reasoning.
    let usage = json!({"input_tokens": 40, "input_tokens_details": {"cached_tokens": 25},
                       "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 2},
                       "total_tokens": 50});
    let events = [
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": id}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": id, "usage": usage}}),
        ),
    ];
    event_stream(&events)
}

/// The tools a Responses request offers, namespaces flattened: its `tools`, and the tools of
/// its `additional_tools` input items (how Codex offers tools to a catalog model on its
/// "responses lite" wire, where the `functions` namespace holds the un-namespaced ones).
fn offered_tools(request: &Value) -> Vec<Offered> {
    let mut offered = Vec::new();
    let additional = request["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "additional_tools")
        .flat_map(|item| item["tools"].as_array().into_iter().flatten());
    for tool in request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(additional)
    {
        let name = tool["name"]
            .as_str()
            .unwrap_or(tool["type"].as_str().unwrap_or("?"));
        match tool["tools"].as_array() {
            Some(inner) if name == "functions" => {
                for t in inner {
                    let n = t["name"].as_str().unwrap_or("?");
                    offered.push(Offered {
                        full: n.to_owned(),
                        namespace: None,
                        name: n.to_owned(),
                    });
                }
            }
            Some(inner) => {
                for t in inner {
                    let n = t["name"].as_str().unwrap_or("?");
                    offered.push(Offered {
                        full: format!("{name}__{n}"),
                        namespace: Some(name.to_owned()),
                        name: n.to_owned(),
                    });
                }
            }
            None => offered.push(Offered {
                full: name.to_owned(),
                namespace: None,
                name: name.to_owned(),
            }),
        }
    }
    offered
}

/// The Messages shape of a Responses conversation, so one planner serves both APIs.
fn messages_history(items: &[Value]) -> Vec<Value> {
    let mut history = Vec::new();
    for item in items {
        match item["type"].as_str() {
            Some("function_call") => history.push(json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": item["call_id"], "name": item["name"]}
            ]})),
            Some("function_call_output") => {
                let output = match &item["output"] {
                    Value::String(s) => s.clone(),
                    other => result_text(&json!({"content": other})),
                };
                history.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": item["call_id"], "content": output}
                ]}));
            }
            _ => {}
        }
    }
    history
}

/// A Responses `function_call` item for the plan's call of `name`, named as offered (inside
/// its namespace when it has one).
fn function_call(offered: &[Offered], id: &str, name: &str, input: &Value) -> Value {
    let (namespace, inner) = offered
        .iter()
        .find(|t| t.full == name)
        .map(|t| (t.namespace.clone(), t.name.clone()))
        .unwrap_or((None, name.to_owned()));
    let mut call = json!({
        "type": "function_call", "id": format!("fc_{id}"), "call_id": id,
        "name": inner, "arguments": input.to_string(), "status": "completed",
    });
    if let Some(ns) = namespace {
        call["namespace"] = Value::String(ns);
    }
    call
}

/// Decides the next turn from the conversation so far. A request that offers no tools (a
/// host's side request) gets plain text.
fn next_turn(
    model: &Model,
    history: &[Value],
    offered: &[String],
    session: &Option<Session>,
) -> Turn {
    if offered.is_empty() {
        return Turn::Text("OK".to_owned());
    }
    let Some(session) = *session else {
        return Turn::Text(
            "I cannot continue: no plan serves this model (see scripted-model --mixture)"
                .to_owned(),
        );
    };
    let plan = &model.mixtures[session.mixture].plans[session.plan].1;
    let mut calls: Vec<String> = Vec::new();
    let mut results: HashMap<String, Value> = HashMap::new();
    let mut step_of: HashMap<String, String> = HashMap::new();
    for message in history {
        let Some(blocks) = message["content"].as_array() else {
            continue;
        };
        for block in blocks {
            match block["type"].as_str() {
                Some("tool_use") => {
                    let id = block["id"].as_str().unwrap_or_default().to_owned();
                    if let Some(step) = plan.get(calls.len()) {
                        step_of.insert(id.clone(), step.step.clone());
                    }
                    calls.push(id);
                }
                Some("tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if let Some(step) = step_of.get(id) {
                        results.insert(step.clone(), leading_json(&result_text(block)));
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(n) = model.stall_after_saves {
        let saved = results
            .keys()
            .filter(|step| {
                plan.iter()
                    .any(|p| &p.step == *step && p.tool == "patchdiff_save")
            })
            .count();
        if saved >= n {
            return Turn::Stall;
        }
    }
    let Some(step) = plan.get(calls.len()) else {
        return match model.after {
            AfterPlan::Finish => Turn::Text("Every target is edited and saved.".to_owned()),
            AfterPlan::Stall => Turn::Stall,
        };
    };
    let input = match substitute(&step.args, &results) {
        Ok(v) => v,
        Err(e) => return Turn::Text(format!("I cannot continue: step `{}`: {e}", step.step)),
    };
    // Hosts prefix the server's name their own way: `mcp__patchdiff__` (Claude Code),
    // `mcp_patchdiff_` (Gemini CLI), `patchdiff_` (opencode), none (Codex, in a namespace).
    let suffix = format!("__{}", step.tool);
    let single = format!("_{}", step.tool);
    let name = offered
        .iter()
        .find(|n| n.ends_with(&suffix) || **n == step.tool)
        .or_else(|| offered.iter().find(|n| n.ends_with(&single)))
        .cloned()
        .unwrap_or_else(|| format!("mcp__patchdiff{suffix}"));
    Turn::ToolUse {
        id: format!(
            "toolu_m{}s{}_{:04}_{}",
            session.plan,
            session.number,
            calls.len(),
            sanitize(&step.step)
        ),
        name,
        input,
    }
}

/// The text of a `tool_result` block (a string, or text blocks).
fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The first JSON object in `text`, else the text. Hosts wrap results: Claude Code may append
/// reminders after it, Codex puts `Wall time: …\nOutput:\n` before it.
fn leading_json(text: &str) -> Value {
    text.match_indices("{")
        .find_map(|(i, _)| {
            serde_json::Deserializer::from_str(&text[i..])
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_applies_from_its_first_request_for_its_count_or_forever() {
        let failure = |from, count| Failure {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            from,
            count,
        };
        let failed = |f: Failure| (1..=6).filter(|n| f.applies(*n)).collect::<Vec<u64>>();
        assert_eq!(failed(failure(1, 0)), [1, 2, 3, 4, 5, 6]);
        assert_eq!(failed(failure(4, 1)), [4]);
        assert_eq!(failed(failure(2, 3)), [2, 3, 4]);
        assert!(
            failure(u64::MAX, 5).applies(u64::MAX),
            "no overflow at the end"
        );
    }

    #[test]
    fn a_mixture_draws_each_session_by_its_weights_and_the_same_seed_gives_the_same_plans() {
        let spec = parse_mixture("cand=wrong.plan.jsonl:0.6,demo.plan.jsonl:0.4").unwrap();
        assert_eq!(spec.model.as_deref(), Some("cand"));
        assert_eq!(spec.plans.len(), 2);
        let mixture = Mixture {
            model: spec.model,
            plans: spec
                .plans
                .iter()
                .map(|(p, w)| (p.display().to_string(), Vec::new(), *w))
                .collect(),
            sessions: AtomicU64::new(0),
        };
        let draws: Vec<usize> = (1..=10_000).map(|n| mixture.pick(7, n)).collect();
        let wrong = draws.iter().filter(|&&k| k == 0).count() as f64 / 10_000.0;
        assert!((wrong - 0.6).abs() < 0.02, "share of the 0.6 plan: {wrong}");
        let again: Vec<usize> = (1..=10_000).map(|n| mixture.pick(7, n)).collect();
        assert_eq!(draws, again, "a seed fixes the sequence");
        let other: Vec<usize> = (1..=10_000).map(|n| mixture.pick(8, n)).collect();
        assert_ne!(draws, other, "another seed, another sequence");
        for bad in [
            "x.jsonl",
            "x.jsonl:0",
            "x.jsonl:-1",
            "=x.jsonl:1",
            "x.jsonl:nan",
        ] {
            assert!(parse_mixture(bad).is_err(), "{bad} is refused");
        }
        assert!(parse_mixture("x.jsonl:2").unwrap().model.is_none());
    }

    #[test]
    fn provider_errors_are_named_as_the_messages_api_names_them() {
        assert_eq!(
            anthropic_error_type(StatusCode::from_u16(529).unwrap()),
            "overloaded_error"
        );
        assert_eq!(
            anthropic_error_type(StatusCode::TOO_MANY_REQUESTS),
            "rate_limit_error"
        );
        assert_eq!(anthropic_error_type(StatusCode::BAD_GATEWAY), "api_error");
        let response = anthropic_error(StatusCode::UNAUTHORIZED);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()["x-should-retry"], "false");
    }
}

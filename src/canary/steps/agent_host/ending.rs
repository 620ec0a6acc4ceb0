//! How an agent host run ended and how it is judged (A1–A4): the ending, the seal's refusal,
//! the host record, the verdict, how the agent stopped and the step's summary.

use std::time::{Duration, Instant};

use crate::canary::host::{self, HostRecord, HostRun, StreamState};
use crate::canary::outcome::{AgentStop, StopReason};
use crate::evidence::run_dir::AgentFile;

/// How the host run ended, before it is judged.
pub(super) enum Ending {
    /// The stream closed and the host exited.
    Exited,
    TimedOut,
    /// The step stopped the host: the seal or the preflight did not hold (the reason before
    /// the agent acted: [`StopReason::SealRefused`], [`StopReason::PreflightFailed`], …).
    Refused(StopReason, String),
}

/// A3 on a stream line just observed: a call to a tool outside the six, or a seal the host
/// reported that does not hold, refuses the host; a seal that holds is timed (`sealed_at`).
pub(super) fn seal_refusal(state: &StreamState, sealed_at: &mut Option<Instant>) -> Option<Ending> {
    if let Some(call) = &state.foreign_call {
        // After the agent acted this is its outcome (`SealBroken`), see `agent_stop`.
        return Some(Ending::Refused(
            StopReason::SealRefused,
            format!(
                "the seal does not hold: the host used `{call}`, which is not one of the six observed tools (A3)"
            ),
        ));
    }
    if sealed_at.is_none()
        && let Some(seal) = &state.seal
    {
        if let Some(problem) = &seal.problem {
            return Some(Ending::Refused(
                StopReason::SealRefused,
                format!(
                    "the seal does not hold, the host was stopped before the agent acted: {problem} (A3)"
                ),
            ));
        }
        *sealed_at = Some(Instant::now());
    }
    None
}

/// What one host run produced, for its [`HostRecord`].
pub(super) struct HostOutcome<'a> {
    pub(super) run: &'a HostRun,
    pub(super) version: String,
    pub(super) pid: Option<u32>,
    pub(super) state: &'a StreamState,
    pub(super) duration: Duration,
    /// The exit status, and what stopping the group took.
    pub(super) exit: String,
    pub(super) timed_out: bool,
    pub(super) provider: &'a [(String, String)],
    /// The operator's network settings the host received.
    pub(super) network: &'a [(String, String)],
    /// Tool errors by tool and reason code, from the host-started observed process's wire log.
    pub(super) tool_errors:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
}

/// A4: the record of the run (`agent.<host>.json`, and the report).
pub(super) fn host_record(o: HostOutcome<'_>) -> HostRecord {
    let state = o.state;
    let usage = state.normalized_usage();
    HostRecord {
        host: o.run.host.as_str().to_owned(),
        binary: o.run.binary.display().to_string(),
        version: o.version,
        pid: o.pid,
        requested_model: o.run.model.clone(),
        reported_models: state.reported_models.clone(),
        max_turns: o.run.max_turns,
        timeout_s: o.run.timeout.as_secs(),
        session_id: state.session_id.clone(),
        seal: state.seal.clone().unwrap_or_default(),
        turns: state.turns,
        host_turns: state.host_turns,
        tool_calls: state.tool_calls.clone(),
        tool_calls_total: state.tool_calls.values().sum(),
        tool_errors: o.tool_errors,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        usage_source: usage.source.to_owned(),
        usage: usage.raw,
        cost_usd: state.cost_usd,
        host_duration_ms: state.host_duration_ms,
        duration_ms: o.duration.as_millis() as u64,
        minutes: o.duration.as_secs_f64() / 60.0,
        provider_error: state.provider_error.clone(),
        result: state.result.clone(),
        exit: o.exit,
        timed_out: o.timed_out,
        provider_variables: o.provider.iter().map(|(k, _)| k.clone()).collect(),
        network_variables: o.network.iter().map(|(k, _)| k.clone()).collect(),
        host_limit_variables: host::host_limit_env(o.run.host)
            .iter()
            .map(|(k, _)| (*k).to_owned())
            .collect(),
    }
}

/// The step's verdict: the host exited with status 0 and a result that is not an error, within
/// the timeout; otherwise why not (timed out, refused, closed its stream but did not exit, or
/// the exit and result it ended with). `exit` is the status without what stopping took.
pub(super) fn judge_host(
    ending: &Ending,
    exit: &str,
    timed_out: bool,
    state: &StreamState,
    record: &HostRecord,
    run: &HostRun,
) -> Result<(), String> {
    let name = run.host.as_str();
    let calls: u64 = record.tool_calls.values().sum();
    match ending {
        Ending::TimedOut => Err(format!(
            "timed out after {} s and was stopped (process group {}); {} turns, {calls} tool calls so far",
            run.timeout.as_secs(),
            record.pid.map_or("?".into(), |p| p.to_string()),
            record.turns
        )),
        Ending::Refused(_, why) => Err(why.clone()),
        Ending::Exited if timed_out => Err(format!(
            "closed its stream but did not exit within the timeout of {} s",
            run.timeout.as_secs()
        )),
        Ending::Exited if !exit.contains("exit status: 0") || state.result_is_error => {
            Err(format!(
                "{name} ended with {exit}, result {}; see {} and {}",
                record.result.as_deref().unwrap_or("none"),
                AgentFile::Stream.name(name),
                AgentFile::Stderr.name(name)
            ))
        }
        Ending::Exited => Ok(()),
    }
}

/// How the agent stopped, from how the host run ended, the step's verdict,
/// whether it ran into the timeout, its stream, and whether the agent `acted` (the model
/// answered, or a tool call reached the observed process). Before acting, a refusal keeps its
/// reason, a provider error is `ProviderRefused`, a timeout `ProviderSilent`, any other end
/// `HostExitedEarly`; after it, the reasons are the agent's own.
pub(super) fn agent_stop(
    ending: &Ending,
    verdict: &Result<(), String>,
    timed_out: bool,
    state: &StreamState,
    acted: bool,
) -> AgentStop {
    let detail = match verdict {
        Ok(()) => state.result.clone().unwrap_or_else(|| "exited".into()),
        Err(why) => why.clone(),
    };
    let detail = match &state.provider_error {
        Some(e) if !detail.contains(e.as_str()) => format!("{detail}; provider: {e}"),
        _ => detail,
    };
    let reason = match (ending, acted) {
        (Ending::Refused(reason, _), false) => *reason,
        // The admission gate holds every tool call until the host-started process passes
        // preflight, so a failed preflight (its worker not ready in time, a wrong tool list)
        // kept the agent's calls from every target even when the model already answered:
        // the product's fault, before the agent could act, never the agent's seal.
        (Ending::Refused(StopReason::PreflightFailed, _), true) => StopReason::PreflightFailed,
        (Ending::Refused(..), true) => StopReason::SealBroken,
        (Ending::TimedOut, true) => StopReason::TimedOut,
        (Ending::TimedOut, false) if state.provider_error.is_some() => StopReason::ProviderRefused,
        (Ending::TimedOut, false) => StopReason::ProviderSilent,
        (Ending::Exited, _) if verdict.is_ok() && acted => StopReason::Finished,
        (Ending::Exited, false) if state.provider_error.is_some() => StopReason::ProviderRefused,
        (Ending::Exited, false) => StopReason::HostExitedEarly,
        (Ending::Exited, true) if timed_out => StopReason::HostCrashed,
        (Ending::Exited, true) if state.result.as_deref() == Some("error_max_turns") => {
            StopReason::MaxTurns
        }
        (Ending::Exited, true) if state.provider_error.is_some() => StopReason::ProviderError,
        (Ending::Exited, true) => StopReason::HostCrashed,
    };
    AgentStop::new(reason, detail)
}

/// Whether an MCP wire log holds a `tools/call` request (the agent reached the process).
pub(super) fn wire_has_tool_call(wire: &str) -> bool {
    crate::evidence::wire_messages(wire)
        .iter()
        .any(|m| m.message["method"] == "tools/call")
}

/// The step's summary when the host succeeded: version, model, turns, tool calls and errors,
/// tokens in and out, cost, seal, seconds.
pub(super) fn host_summary(record: &HostRecord, run: &HostRun, elapsed: Duration) -> String {
    let calls = record.tool_calls_total;
    let errors: u64 = record.tool_errors.values().flat_map(|c| c.values()).sum();
    let seal = format!("sealed: 6 tools, server {}", host::SERVER_NAME);
    let tokens = match (record.input_tokens, record.output_tokens) {
        (Some(i), Some(o)) => format!(" · {i} in / {o} out tokens"),
        _ => String::new(),
    };
    format!(
        "{} {} · model {} · {} turns · {calls} tool calls ({errors} errors){tokens}{} · {seal} · {:.1} s",
        run.host.as_str(),
        record.version,
        record
            .reported_models
            .first()
            .cloned()
            .unwrap_or_else(|| run.model.clone()),
        record.turns,
        record
            .cost_usd
            .map_or(String::new(), |c| format!(" · ${c:.4}")),
        elapsed.as_secs_f64()
    )
}

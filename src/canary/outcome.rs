//! How the agent step ended and what the run's outcome is: partial work is
//! judged, and failures are told apart. A failure *before the agent acted* (the host could not
//! start, its seal was refused, the provider refused or never answered its first request, the
//! preflight failed) is the infrastructure's: the run is [`RunOutcome::InfraAbort`], no target
//! is judged and nothing counts against the agent. Everything after the agent acted is the
//! agent's outcome: `export`, `inspect` and `evaluate` still run on what it saved, and the report
//! says why it stopped ([`AgentStop`]).
//!
//! Also here: the tool errors an agent met, counted from the observed process's wire log
//! ([`tool_errors_in_wire_log`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Why the agent step ended. The `acted`-side reasons are the agent's outcome; the others mean
/// the agent never acted (see [`StopReason::before_acting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The agent ended its work itself (host exit 0, a result that is not an error; a scripted
    /// plan that played as written).
    Finished,
    /// A1: the host ran into the step's timeout and its process group was stopped.
    TimedOut,
    /// The host stopped at its turn limit (`--max-turns`; Claude Code `error_max_turns`).
    MaxTurns,
    /// The host exited with a failure and no result, or closed its stream and did not exit.
    HostCrashed,
    /// The provider answered a model request with an error after the agent had acted.
    ProviderError,
    /// A3 after the agent acted: the host used a tool outside the six.
    SealBroken,
    /// The scripted agent's calls did not meet its plan's expectations.
    PlanDeviated,
    /// Before acting: the host's binary or its files could not be prepared or started.
    HostUnavailable,
    /// Before acting: A3 — the host's own report of its tools or servers did not hold.
    SealRefused,
    /// Before acting: C3 on the observed process (the console's or the host's) did not hold.
    PreflightFailed,
    /// Before acting: the provider answered the first model request with an error (4xx/5xx).
    ProviderRefused,
    /// Before acting: the provider never answered the first model request within the timeout.
    ProviderSilent,
    /// Before acting: the host exited before its first model turn, for another reason.
    HostExitedEarly,
    /// Before acting: the step itself refused to start (no `init`, no passed preflight, …).
    NotStarted,
}

impl StopReason {
    /// The report's words for it: `agent timed out`, `agent reached its turn limit`, …
    pub fn text(self) -> &'static str {
        match self {
            Self::Finished => "agent finished",
            Self::TimedOut => "agent timed out",
            Self::MaxTurns => "agent reached its turn limit",
            Self::HostCrashed => "agent host crashed",
            Self::ProviderError => "provider error while the agent worked",
            Self::SealBroken => "agent broke the seal",
            Self::PlanDeviated => "scripted agent deviated from its plan",
            Self::HostUnavailable => "agent host could not start",
            Self::SealRefused => "agent host's seal was refused before the agent acted",
            Self::PreflightFailed => "preflight failed before the agent acted",
            Self::ProviderRefused => "provider refused the first model request",
            Self::ProviderSilent => "provider did not answer the first model request",
            Self::HostExitedEarly => "agent host exited before its first model turn",
            Self::NotStarted => "agent step did not start",
        }
    }

    /// True for the reasons that mean the agent never acted (the run is `infra_abort`).
    pub fn before_acting(self) -> bool {
        !matches!(
            self,
            Self::Finished
                | Self::TimedOut
                | Self::MaxTurns
                | Self::HostCrashed
                | Self::ProviderError
                | Self::SealBroken
                | Self::PlanDeviated
        )
    }
}

/// How the agent step ended, in `report.json` as `agent_stop`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentStop {
    /// The agent made at least one model turn or tool call: what follows is its outcome.
    pub acted: bool,
    pub reason: StopReason,
    /// [`StopReason::text`], spelled out for readers of the JSON.
    pub why: String,
    /// The step's own account (timeout, exit status, the host's result, the first error).
    pub detail: String,
}

impl AgentStop {
    /// A stop for `reason`; `acted` is false exactly for the reasons before acting.
    pub fn new(reason: StopReason, detail: impl Into<String>) -> Self {
        Self {
            acted: !reason.before_acting(),
            reason,
            why: reason.text().to_owned(),
            detail: detail.into(),
        }
    }
}

/// The run's outcome as the report, `--json` and the exit code give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Every step succeeded and every target passed.
    Passed,
    /// The agent's outcome (or a step after it) did not pass.
    Failed,
    /// The run stopped before the agent acted: nothing was judged, nothing counts against the
    /// agent (exit code [`crate::console::headless::EXIT_INFRA_ABORT`]).
    InfraAbort,
}

impl RunOutcome {
    /// `PASSED`, `FAILED`, `INFRA_ABORT`: the report's header word.
    pub fn headline(self) -> &'static str {
        match self {
            Self::Passed => "PASSED",
            Self::Failed => "FAILED",
            Self::InfraAbort => "INFRA_ABORT",
        }
    }
}

/// Decides the run's outcome from its steps: `failed` names the first step (not `report`) that
/// failed, `passed` is whether the evaluation ran and every target passed, `agent_stop` how the
/// agent step ended (if one ran), and `agent_expected` whether the run is meant to hand over to
/// an agent (a script with an agent step; always for a failed `preflight`, which exists only to
/// hand over). Returns the outcome and, for `infra_abort`, why.
pub fn decide(
    failed: Option<(&str, &str)>,
    passed: bool,
    agent_stop: Option<&AgentStop>,
    agent_expected: bool,
) -> (RunOutcome, Option<String>) {
    match (failed, agent_stop) {
        (None, _) if passed => (RunOutcome::Passed, None),
        (_, Some(stop)) if stop.acted => (RunOutcome::Failed, None),
        (Some(_), Some(stop)) => (
            RunOutcome::InfraAbort,
            Some(format!("{}: {}", stop.why, stop.detail)),
        ),
        (Some((step, summary)), None) if agent_expected || step == "preflight" => (
            RunOutcome::InfraAbort,
            Some(format!(
                "step {step} failed before the agent acted: {summary}"
            )),
        ),
        _ => (RunOutcome::Failed, None),
    }
}

/// The tool errors in an MCP wire log, by tool and reason code: a rejected
/// receipt counts each of its `reason_codes` (`REJECTED` when it names none); another `isError`
/// result its `error.code` (`IS_ERROR` when it has none); a JSON-RPC error its `data.code`
/// (`JSONRPC_<code>` when it has none). Calls are paired with results by (process, request id)
/// through the one wire-log reader ([`crate::evidence::pair_requests`]: processes sharing a
/// log reuse ids); lines that are not wire records are skipped.
pub fn tool_errors_in_wire_log(log: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let calls = crate::evidence::pair_requests(
        crate::evidence::read_wire_messages(log.as_bytes()),
        |m| {
            (m.message["method"] == "tools/call")
                .then(|| m.message["params"]["name"].as_str().map(str::to_owned))
                .flatten()
        },
        |_, reply| error_codes(&reply.message),
    );
    let mut errors: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (tool, codes) in calls {
        for code in codes.into_iter().flatten() {
            *errors
                .entry(tool.clone())
                .or_default()
                .entry(code)
                .or_default() += 1;
        }
    }
    errors
}

/// The reason codes one `tools/call` answer carries (empty for a success).
fn error_codes(answer: &Value) -> Vec<String> {
    if let Some(error) = answer.get("error") {
        return vec![error["data"]["code"].as_str().map_or_else(
            || format!("JSONRPC_{}", error["code"].as_i64().unwrap_or(0)),
            str::to_owned,
        )];
    }
    let result = &answer["result"];
    let structured = &result["structuredContent"];
    if structured["outcome"] == "rejected" {
        let codes: Vec<String> = structured["reason_codes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect();
        return if codes.is_empty() {
            vec!["REJECTED".to_owned()]
        } else {
            codes
        };
    }
    if result["isError"] == true {
        return vec![
            structured["error"]["code"]
                .as_str()
                .unwrap_or("IS_ERROR")
                .to_owned(),
        ];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stop(reason: StopReason) -> AgentStop {
        AgentStop::new(reason, "detail")
    }

    #[test]
    fn a_failure_before_the_agent_acted_aborts_the_run_and_after_it_fails_it() {
        let timed_out = stop(StopReason::TimedOut);
        assert!(timed_out.acted);
        assert_eq!(timed_out.why, "agent timed out");
        assert_eq!(
            decide(Some(("agent", "timed out")), false, Some(&timed_out), true),
            (RunOutcome::Failed, None)
        );
        let refused = stop(StopReason::ProviderRefused);
        assert!(!refused.acted);
        let (outcome, why) = decide(Some(("agent", "529")), false, Some(&refused), true);
        assert_eq!(outcome, RunOutcome::InfraAbort);
        assert_eq!(
            why.unwrap(),
            "provider refused the first model request: detail"
        );
        // A preflight failure aborts even without a planned agent; another step only with one.
        let (outcome, why) = decide(Some(("preflight", "controls")), false, None, false);
        assert_eq!(outcome, RunOutcome::InfraAbort);
        assert!(why.unwrap().contains("before the agent acted"));
        assert_eq!(
            decide(Some(("init", "fixture")), false, None, false).0,
            RunOutcome::Failed
        );
        assert_eq!(
            decide(Some(("init", "fixture")), false, None, true).0,
            RunOutcome::InfraAbort
        );
        assert_eq!(
            decide(None, true, Some(&stop(StopReason::Finished)), true).0,
            RunOutcome::Passed
        );
        // Evaluated and not every target passed: the agent's outcome.
        assert_eq!(
            decide(
                Some(("evaluate", "chess")),
                false,
                Some(&stop(StopReason::Finished)),
                true
            )
            .0,
            RunOutcome::Failed
        );
    }

    #[test]
    fn every_reason_before_acting_is_named_and_the_agents_own_are_not() {
        let acted = [
            StopReason::Finished,
            StopReason::TimedOut,
            StopReason::MaxTurns,
            StopReason::HostCrashed,
            StopReason::ProviderError,
            StopReason::SealBroken,
            StopReason::PlanDeviated,
        ];
        for r in acted {
            assert!(!r.before_acting(), "{r:?}");
        }
        for r in [
            StopReason::HostUnavailable,
            StopReason::SealRefused,
            StopReason::PreflightFailed,
            StopReason::ProviderRefused,
            StopReason::ProviderSilent,
            StopReason::HostExitedEarly,
            StopReason::NotStarted,
        ] {
            assert!(r.before_acting(), "{r:?}");
        }
        assert_eq!(
            serde_json::to_value(StopReason::ProviderRefused).unwrap(),
            "provider_refused"
        );
        assert_eq!(
            serde_json::to_value(RunOutcome::InfraAbort).unwrap(),
            "infra_abort"
        );
    }

    /// One wire record as `evidence::WireLog` writes it.
    fn record(seq: u64, direction: &str, message: Value) -> String {
        json!({"seq": seq, "pid": 1, "mono_ns": 0, "ts_ms": 0.0, "direction": direction,
               "raw": message.to_string()})
        .to_string()
    }

    #[test]
    fn tool_errors_are_counted_by_tool_and_reason_code_from_receipts_and_is_error_results() {
        let call = |id: u64, name: &str| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": {}}})
        };
        let result = |id: u64, is_error: bool, structured: Value| {
            json!({"jsonrpc": "2.0", "id": id,
                   "result": {"isError": is_error, "structuredContent": structured, "content": []}})
        };
        let submit = "patchdiff_submit_observed_operations";
        let lines = [
            record(0, "request", call(1, submit)),
            record(
                1,
                "result",
                result(
                    1,
                    true,
                    json!({"outcome": "rejected", "reason_codes": ["OLD_TEXT_AMBIGUOUS", "NOT_OBSERVED"]}),
                ),
            ),
            record(2, "request", call(2, submit)),
            record(
                3,
                "result",
                result(2, false, json!({"outcome": "accepted", "reason_codes": []})),
            ),
            record(4, "request", call(3, "patchdiff_observe_scope")),
            record(
                5,
                "result",
                result(
                    3,
                    true,
                    json!({"error": {"code": "UNKNOWN_SCOPE", "message": "x"}}),
                ),
            ),
            record(6, "request", call(4, submit)),
            record(
                7,
                "result",
                json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "bad"}}),
            ),
            record(8, "request", call(5, submit)),
            record(9, "result", result(5, true, json!({"outcome": "rejected"}))),
            // An answer to something that is not a tool call, and a line that is no record.
            record(
                10,
                "result",
                json!({"jsonrpc": "2.0", "id": 99, "error": {"code": 1}}),
            ),
            "not json".to_owned(),
        ];
        let errors = tool_errors_in_wire_log(&lines.join("\n"));
        assert_eq!(
            serde_json::to_value(&errors).unwrap(),
            json!({
                "patchdiff_observe_scope": {"UNKNOWN_SCOPE": 1},
                submit: {"JSONRPC_-32602": 1, "NOT_OBSERVED": 1, "OLD_TEXT_AMBIGUOUS": 1, "REJECTED": 1},
            })
        );
    }

    /// Two processes sharing a log (a relaunch, or the processes of one printed host
    /// configuration) both use id 1: each error is counted against its own process's call.
    /// Paired by id alone, process 1's rejection was counted against process 2's save.
    #[test]
    fn tool_errors_pair_by_process_and_id_when_two_processes_reuse_id_1() {
        let with_pid = |pid: u32, seq: u64, direction: &str, message: Value| {
            json!({"seq": seq, "pid": pid, "mono_ns": seq, "ts_ms": 0.0, "direction": direction,
                   "raw": message.to_string()})
            .to_string()
        };
        let call = |name: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}});
        let lines = [
            with_pid(
                1,
                0,
                "request",
                call("patchdiff_submit_observed_operations"),
            ),
            with_pid(2, 0, "request", call("patchdiff_save")),
            with_pid(
                2,
                1,
                "result",
                json!({"jsonrpc": "2.0", "id": 1,
                "result": {"isError": false, "structuredContent": {"version": 1}}}),
            ),
            with_pid(
                1,
                1,
                "result",
                json!({"jsonrpc": "2.0", "id": 1,
                "result": {"isError": true, "structuredContent": {"outcome": "rejected",
                    "reason_codes": ["NOT_OBSERVED"]}}}),
            ),
        ];
        assert_eq!(
            serde_json::to_value(tool_errors_in_wire_log(&lines.join("\n"))).unwrap(),
            json!({"patchdiff_submit_observed_operations": {"NOT_OBSERVED": 1}})
        );
    }
}

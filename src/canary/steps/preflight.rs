//! `preflight` (C3), in order: the observed process lists exactly the six tools, refuses a
//! full-only tool at the profile boundary, its worker is ready, every target is fresh, and the
//! evaluator's controls hold (V3) — before the agent is handed the process.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::super::client::{self, McpProcess};
use super::super::error::StepError;
use super::super::state::TargetRow;
use crate::evidence::RunDir;
use crate::mcp::{FULL_ONLY_TOOLS, OBSERVED_TOOLS};
use crate::telemetry::PerfEvent;

/// W6: startup readiness ceiling; preflight waits this long (plus slack) for `worker_ready`.
pub const READINESS_WAIT: Duration = Duration::from_secs(10);

/// C3 on the observed process: exactly the six tools, a full-only tool refused at the profile
/// boundary, the worker ready within [`READINESS_WAIT`]. Returns the readiness time in ms.
/// Errors: [`StepError::Failed`] naming what does not hold.
pub async fn check_observed(observed: &McpProcess, run: &RunDir) -> Result<u64, StepError> {
    let mut names = observed.tool_names().await?;
    names.sort();
    let mut expected: Vec<String> = OBSERVED_TOOLS.iter().map(|s| s.to_string()).collect();
    expected.sort();
    if names != expected {
        return Err(StepError::Failed(format!(
            "tools/list on the observed process is {} tools [{}], expected exactly the six [{}]",
            names.len(),
            names.join(", "),
            expected.join(", ")
        )));
    }
    let probe = FULL_ONLY_TOOLS[0];
    boundary_refusal(probe, observed.call(probe, json!({})).await)?;
    wait_worker_ready(observed, run, READINESS_WAIT).await
}

/// C3: every target is at version 0 and revision 0 with no attempts, as `full` reads it.
pub async fn check_targets_fresh(
    full: &McpProcess,
    targets: &[TargetRow],
) -> Result<(), StepError> {
    let mut stale = Vec::new();
    for row in targets {
        let t = full
            .call_ok("patchdiff_read_target", json!({"target": row.name}))
            .await?;
        let audit = full
            .call_ok("patchdiff_audit", json!({"target": row.name}))
            .await?;
        let attempts = attempts_of(&audit);
        if t["version"].as_u64() != Some(0) || t["revision"].as_u64() != Some(0) || attempts != 0 {
            stale.push(format!(
                "{} (version {}, revision {}, attempts {attempts})",
                row.name, t["version"], t["revision"]
            ));
        }
    }
    if !stale.is_empty() {
        return Err(StepError::Failed(format!(
            "targets are not fresh: {}",
            stale.join(", ")
        )));
    }
    Ok(())
}

/// Waits for `observed`'s `worker_ready` perf event (in `run`'s `observed.perf.jsonl`), at
/// most `limit`; returns its readiness time in ms. A failed launch or a generation retired
/// before readiness fails at once (nothing relaunches it before a request).
pub async fn wait_worker_ready(
    observed: &McpProcess,
    run: &RunDir,
    limit: Duration,
) -> Result<u64, StepError> {
    use crate::evidence::run_dir::process::OBSERVED;
    let pid = observed
        .pid
        .ok_or_else(|| StepError::NotRunning("the observed process has no pid".to_owned()))?;
    let path = run.perf_events(OBSERVED);
    let deadline = Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let state = worker_readiness(&text, pid);
        if let WorkerReadiness::Ready { readiness_ms } = state {
            return Ok(readiness_ms);
        }
        // A failed launch or a generation retired before readiness will not become
        // ready (nothing relaunches it before a request); say why now, not at the deadline.
        if matches!(
            state,
            WorkerReadiness::LaunchFailed { .. } | WorkerReadiness::Retired { .. }
        ) {
            return Err(StepError::Failed(format!(
                "the observed process's worker is not ready ({}; see {})",
                state.describe(),
                run.stderr_log(OBSERVED).display()
            )));
        }
        if Instant::now() >= deadline {
            return Err(StepError::Failed(format!(
                "the observed process's worker is not ready after {} s ({}; see {})",
                limit.as_secs(),
                state.describe(),
                run.stderr_log(OBSERVED).display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the perf events of one MCP process say about its current worker generation (C3).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerReadiness {
    /// No lifecycle event from this process yet.
    Unknown,
    /// A generation was launched and has not reported ready.
    Starting,
    /// The current generation is ready; `readiness_ms` is its spawn-to-ready time.
    Ready { readiness_ms: u64 },
    /// The last generation retired (and no new one is ready).
    Retired { reason: String },
    /// The last launch failed before a child ran (`code`, e.g. `WAYMARK_WORKER_SPAWN`, and its
    /// cause): nothing will become ready without another launch.
    LaunchFailed { code: String, error: String },
}

impl WorkerReadiness {
    pub fn describe(&self) -> String {
        match self {
            Self::Unknown => "no worker lifecycle event yet".into(),
            Self::Starting => "a generation is starting".into(),
            Self::Ready { readiness_ms } => format!("ready in {readiness_ms} ms"),
            Self::Retired { reason } => format!("the last generation retired: {reason}"),
            Self::LaunchFailed { code, error } => {
                format!("the worker could not start: {code}: {error}")
            }
        }
    }
}

/// Reads perf-events JSONL and returns the state of the worker of the process `pid`: the last
/// of its `worker_launch`, `worker_ready` and `worker_retired` events decides. Events of other
/// processes (an earlier observed process appending to the same file) and malformed lines are
/// ignored.
pub fn worker_readiness(perf_events: &str, pid: u32) -> WorkerReadiness {
    let mut state = WorkerReadiness::Unknown;
    for ev in perf_events
        .lines()
        .filter_map(|l| serde_json::from_str::<PerfEvent>(l).ok())
        .filter(|ev| ev.pid == pid)
    {
        use crate::telemetry::{EventKind, attr};
        state = match EventKind::parse(&ev.name) {
            Some(EventKind::WorkerLaunch) => WorkerReadiness::Starting,
            Some(EventKind::WorkerLaunchFailed) => WorkerReadiness::LaunchFailed {
                code: ev.attrs[attr::CODE]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_owned(),
                error: ev.attrs[attr::ERROR].as_str().unwrap_or("").to_owned(),
            },
            Some(EventKind::WorkerReady) => WorkerReadiness::Ready {
                readiness_ms: ev.duration_ms.round() as u64,
            },
            Some(EventKind::WorkerRetired) => WorkerReadiness::Retired {
                reason: ev.attrs[attr::REASON]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_owned(),
            },
            _ => continue,
        };
    }
    state
}

/// Total attempts in an audit result.
fn attempts_of(audit: &Value) -> u64 {
    audit["attempts"]["total"].as_u64().unwrap_or(0)
}

/// C3: the observed process must refuse a full-only tool *at the profile boundary* — a JSON-RPC
/// error whose `data.code` is `PROFILE_BOUNDARY`. Any other failure (a transport loss, a crash,
/// another error) or an answer is not that refusal.
fn boundary_refusal(
    probe: &str,
    outcome: Result<client::ToolReply, client::CallError>,
) -> Result<(), StepError> {
    match outcome {
        Err(e) if e.code.as_deref() == Some("PROFILE_BOUNDARY") => Ok(()),
        Err(e) => Err(StepError::Failed(format!(
            "calling `{probe}` on the observed process failed without a PROFILE_BOUNDARY refusal: {}",
            e.message
        ))),
        Ok(reply) => Err(StepError::Failed(format!(
            "the observed process answered `{probe}` (is_error={}) instead of refusing it at the profile boundary",
            reply.is_error
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::PerfEvent;

    fn event_line(name: &str, pid: u32, reason: Option<&str>) -> String {
        let mut ev = PerfEvent::point(name);
        ev.pid = pid;
        ev.duration_ms = 300.0;
        if let Some(r) = reason {
            ev = ev.attr("reason", r);
        }
        serde_json::to_string(&ev).unwrap()
    }

    #[test]
    fn readiness_follows_the_last_lifecycle_event_of_this_process() {
        let lines = [
            event_line("worker_launch", 7, None),
            event_line("worker_ready", 7, None),
            "not json".to_owned(),
            event_line("worker_retired", 7, Some("worker_exited")),
            event_line("worker_ready", 8, None),
        ]
        .join("\n");
        assert_eq!(
            worker_readiness(&lines, 7),
            WorkerReadiness::Retired {
                reason: "worker_exited".into()
            }
        );
        assert_eq!(
            worker_readiness(&lines, 8),
            WorkerReadiness::Ready { readiness_ms: 300 }
        );
        assert_eq!(worker_readiness(&lines, 9), WorkerReadiness::Unknown);
        let relaunched = format!("{lines}\n{}", event_line("worker_launch", 7, None));
        assert_eq!(worker_readiness(&relaunched, 7), WorkerReadiness::Starting);
    }

    #[test]
    fn preflight_accepts_only_a_profile_boundary_refusal() {
        let error = |code: Option<&str>| client::CallError {
            tool: "patchdiff_init_target".into(),
            message: "connection closed".into(),
            code: code.map(str::to_owned),
        };
        let probe = "patchdiff_init_target";
        assert!(boundary_refusal(probe, Err(error(Some("PROFILE_BOUNDARY")))).is_ok());
        let err = boundary_refusal(probe, Err(error(None))).expect_err("a transport loss");
        assert!(
            err.to_string()
                .contains("without a PROFILE_BOUNDARY refusal"),
            "{err}"
        );
        let err = boundary_refusal(probe, Err(error(Some("INVALID_ARGUMENTS"))))
            .expect_err("another JSON-RPC error");
        assert!(err.to_string().contains("connection closed"), "{err}");
        let answered = client::ToolReply {
            is_error: true,
            structured: serde_json::Value::Null,
            text: String::new(),
        };
        assert!(boundary_refusal(probe, Ok(answered)).is_err());
    }
}

//! `agent PLAN` (C4): the scripted agent plays its plan against the observed process, only
//! after that process passed preflight (C3).

use std::path::Path;

use super::super::client::McpProcess;
use super::super::error::StepError;
use super::super::outcome::{AgentStop, StopReason};
use super::super::plan;
use crate::evidence::JsonlLog;

/// Runs the plan at `plan_path` on `observed` (the process that passed preflight has pid
/// `preflighted_pid`), recording every call in `transcript` and calling `on_step` before each
/// call (a replica beside the agent waits on it, R2). Returns the step's result and
/// how the agent stopped: refused before its first call (no plan, no passed preflight),
/// deviated from its plan, or finished.
pub async fn run_scripted(
    plan_path: &Path,
    observed: Result<&McpProcess, StepError>,
    preflighted_pid: Option<u32>,
    transcript: &JsonlLog,
    on_step: impl FnMut(usize, &plan::PlanStep),
) -> (Result<String, StepError>, AgentStop) {
    let ready = plan::load_plan(plan_path)
        .map_err(StepError::Refused)
        .and_then(|steps| {
            let observed = observed?;
            if observed.pid.is_none() || observed.pid != preflighted_pid {
                return Err(StepError::Refused(format!(
                    "run `preflight` first: the agent is handed the observed process only \
                     after it passes preflight (C3), and this one (pid {}) has not",
                    observed.pid.map_or("?".into(), |p| p.to_string())
                )));
            }
            Ok((steps, observed))
        });
    let (steps, observed) = match ready {
        Ok(ready) => ready,
        Err(e) => {
            let stop = AgentStop::new(StopReason::NotStarted, e.to_string());
            return (Err(e), stop);
        }
    };
    let outcome = plan::run_plan(observed, &steps, transcript, on_step).await;
    if !outcome.deviations.is_empty() {
        let why = format!(
            "{} of {} calls deviated from the plan: {}",
            outcome.deviations.len(),
            outcome.calls,
            outcome.deviations.join(" | ")
        );
        let mut stop = AgentStop::new(StopReason::PlanDeviated, why.clone());
        // A plan whose every call failed at the transport never reached the agent's work.
        stop.acted = outcome.calls > 0;
        return (Err(StepError::Failed(why)), stop);
    }
    let stop = AgentStop::new(StopReason::Finished, format!("{} calls", outcome.calls));
    (
        Ok(format!(
            "{} calls · {} expected rejections · plan {}",
            outcome.calls,
            outcome.errors_expected,
            plan_path.display()
        )),
        stop,
    )
}

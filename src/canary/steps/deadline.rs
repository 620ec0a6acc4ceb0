//! The step deadline: no canary step waits without a bound that holds from the step's start.
//!
//! A call to an MCP process has its own deadline ([`crate::canary::client::CALL_DEADLINE`]),
//! but a step makes many calls (preflight reads every target, `agent PLAN` plays a whole plan),
//! so per-call bounds add up to no bound a person would wait for. Every step without a timeout
//! of its own runs under [`STEP_TIMEOUT`] (or `console --step-timeout`), counted from the
//! step's start, the work before its first call included. The steps with their own bound keep
//! it: `agent HOST timeout=S` (its whole host run, the work before the host starts included),
//! `wait … timeout=S`, `evaluate` (each check under its `check_timeout`), and `compare` (whose
//! runs are canaries whose steps are each bounded here).

use std::future::Future;
use std::time::Duration;

use crate::canary::command::Command;
use crate::canary::error::{StepError, StepResult};

/// The default bound of a step without a timeout of its own, from its start (10 minutes: a
/// preflight of five 256 MiB targets reads 1.25 GiB).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(600);

/// The longest `--step-timeout` accepted, in seconds (one day).
pub const STEP_TIMEOUT_MAX_SECS: u64 = 86_400;

/// The deadline `command` runs under: `None` for the steps bounded by their own timeout.
pub fn deadline_of(command: &Command, step_timeout: Duration) -> Option<Duration> {
    match command {
        Command::AgentHost { .. }
        | Command::Wait { .. }
        | Command::Evaluate { .. }
        | Command::Compare { .. } => None,
        _ => Some(step_timeout),
    }
}

/// Runs `step` (the body of `command`) under its deadline. A step that does not finish in time
/// is dropped — its calls abandoned, processes it was starting killed on drop — and fails
/// naming the step, the deadline and how to give more time.
pub async fn within(
    command: &Command,
    step_timeout: Duration,
    step: impl Future<Output = StepResult>,
) -> StepResult {
    let Some(limit) = deadline_of(command, step_timeout) else {
        return step.await;
    };
    tokio::time::timeout(limit, step).await.unwrap_or_else(|_| {
        Err(StepError::Failed(format!(
            "`{}` did not finish within its step deadline of {} s (a process it waits on may be \
             stopped or hung); give more with `console --step-timeout SECONDS`",
            command.name(),
            limit.as_secs_f64()
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On paused time: a step that would wait for ever fails at the deadline, from its start;
    /// one that finishes in time is untouched; a step with its own timeout is not cut.
    #[tokio::test(start_paused = true)]
    async fn a_step_that_never_finishes_fails_at_its_deadline_from_its_start() {
        let limit = Duration::from_secs(5);
        let start = tokio::time::Instant::now();
        let hung = within(&Command::Preflight, limit, std::future::pending()).await;
        assert_eq!(start.elapsed(), limit);
        let message = hung.unwrap_err().to_string();
        assert!(
            message.starts_with("`preflight` did not finish within its step deadline of 5 s"),
            "{message}"
        );
        assert!(message.contains("--step-timeout"), "{message}");

        let quick = within(&Command::Export, limit, async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            Ok("done".to_owned())
        })
        .await;
        assert_eq!(quick.unwrap(), "done");

        let own = Command::parse("agent claude timeout=60").unwrap();
        let start = tokio::time::Instant::now();
        let long = within(&own, limit, async {
            tokio::time::sleep(Duration::from_secs(50)).await;
            Ok("host ended".to_owned())
        })
        .await;
        assert_eq!(long.unwrap(), "host ended");
        assert_eq!(start.elapsed(), Duration::from_secs(50));
    }

    #[test]
    fn only_the_steps_with_their_own_bound_go_without_the_step_deadline() {
        let t = STEP_TIMEOUT;
        for own in [
            "agent claude",
            "wait saved",
            "evaluate",
            "compare plan.toml",
        ] {
            let c = Command::parse(own).unwrap();
            assert_eq!(deadline_of(&c, t), None, "{own}");
        }
        for bounded in [
            "init",
            "launch observed",
            "preflight",
            "agent demo.plan.jsonl",
            "export",
            "inspect",
            "report",
        ] {
            let c = Command::parse(bounded).unwrap();
            assert_eq!(deadline_of(&c, t), Some(t), "{bounded}");
        }
    }
}

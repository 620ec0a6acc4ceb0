//! `evaluate` (C6, V3): the evaluator is a separate process reading only the exports and the
//! fixture manifest; its controls also run in preflight ([`run_controls`]).

use std::path::Path;

use super::super::error::StepError;
use super::super::state::TargetRow;
use crate::evaluate::Evaluation;

/// The evaluator process as a run invokes it: the `patchdiff` executable, the run's fixture
/// manifest, its exports and the control cache.
#[derive(Debug, Clone, Copy)]
pub struct Evaluator<'a> {
    pub exe: &'a Path,
    pub manifest: &'a Path,
    pub exports: &'a Path,
    pub control_cache: &'a Path,
}

/// The `evaluate` step's options (U3): `--repeat`, `--require`, `--check-timeout` (s),
/// `--fresh-controls`.
#[derive(Debug, Clone, Copy)]
pub struct EvaluateOptions {
    pub repeat: u32,
    pub require: Option<crate::evaluate::Require>,
    pub check_timeout: Option<u64>,
    pub fresh_controls: bool,
}

/// Runs the evaluator (C6: it dies with this step, kill on drop, and its checks with it) and
/// records each verdict in its row of `targets`. Returns the evaluation (when the evaluator
/// produced one) and the step's result: [`StepError::Failed`] naming each target that did not
/// pass, or an evaluator that produced no report.
pub async fn evaluate(
    evaluator: &Evaluator<'_>,
    options: &EvaluateOptions,
    targets: &mut [TargetRow],
) -> (Option<Evaluation>, Result<String, StepError>) {
    let EvaluateOptions {
        repeat,
        require,
        check_timeout,
        fresh_controls,
    } = *options;
    // C6: a separate process that reads only the exports and the fixture manifest; it dies
    // with this step (kill on drop), and its checks die with it.
    let mut cmd = tokio::process::Command::new(evaluator.exe);
    cmd.arg("evaluate")
        .arg("--repeat")
        .arg(repeat.to_string())
        .arg("--require")
        .arg(require.unwrap_or_default().as_str())
        .arg("--manifest")
        .arg(evaluator.manifest)
        .arg("--exports")
        .arg(evaluator.exports)
        .arg("--control-cache")
        .arg(evaluator.control_cache)
        .arg("--json")
        .kill_on_drop(true);
    if let Some(secs) = check_timeout {
        cmd.arg("--check-timeout").arg(secs.to_string());
    }
    if fresh_controls {
        cmd.arg("--fresh-controls");
    }
    let output = match cmd.output().await {
        Ok(output) => output,
        Err(e) => return (None, Err(e.into())),
    };
    let evaluation: Evaluation = match serde_json::from_slice(&output.stdout) {
        Ok(evaluation) => evaluation,
        Err(e) => {
            return (
                None,
                Err(StepError::Failed(format!(
                    "the evaluator did not produce a report ({e}): {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ))),
            );
        }
    };
    for verdict in &evaluation.targets {
        if let Some(row) = targets.iter_mut().find(|r| r.name == verdict.name) {
            row.full_byte = Some(verdict.full_byte);
            row.behavioral = Some(verdict.behavioral);
            row.status = Some(verdict.status);
            row.check_exit.clone_from(&verdict.check_exit);
            row.check_output = (!verdict.passed()).then(|| verdict.check_output.clone());
            row.notes.extend(verdict.notes.iter().cloned());
            row.require = Some(verdict.require);
            row.first_difference.clone_from(&verdict.first_difference);
            row.checks.clone_from(&verdict.checks);
            row.failing_checks.clone_from(&verdict.failing_checks);
            row.checks_note.clone_from(&verdict.checks_note);
            row.controls = verdict
                .controls_source
                .as_ref()
                .map(crate::evaluate::ControlSource::describe);
        }
    }
    let failed: Vec<String> = evaluation
        .targets
        .iter()
        .filter(|t| !t.passed())
        .map(|t| match t.status {
            crate::evaluate::Status::InfraError | crate::evaluate::Status::Flaky => format!(
                "{} {} ({}: {})",
                t.name,
                t.status.as_str(),
                t.check_exit.as_deref().unwrap_or("-"),
                crate::evaluate::headline(&t.check_output)
            ),
            _ if !t.failing_checks.is_empty() => {
                format!(
                    "{} (failing checks: {})",
                    t.name,
                    t.failing_checks.join(", ")
                )
            }
            _ => t.name.clone(),
        })
        .collect();
    let identical = evaluation.targets.iter().filter(|t| t.full_byte).count();
    let summary = format!(
        "{}/{} targets pass ({}) · {identical}/{} identical to the reference · controls {} run, {} reused",
        evaluation.passed,
        evaluation.total,
        match evaluation.require {
            crate::evaluate::Require::FullByte => "full-byte required",
            crate::evaluate::Require::Behavioral => "behaviour decides",
        },
        evaluation.total,
        evaluation.controls_run,
        evaluation.controls_reused
    );
    let result = if failed.is_empty() {
        Ok(summary)
    } else {
        Err(StepError::Failed(format!(
            "{summary}; failed: {}",
            failed.join(", ")
        )))
    };
    (Some(evaluation), result)
}

/// V3 in preflight: the evaluator's controls (`patchdiff evaluate --controls-only`), so a
/// broken check environment stops the canary before the agent starts. A target whose
/// controls do not hold is marked `infra_error` with the check's exit and output.
pub async fn run_controls(
    evaluator: &Evaluator<'_>,
    targets: &mut [TargetRow],
) -> Result<String, StepError> {
    let output = tokio::process::Command::new(evaluator.exe)
        .arg("evaluate")
        .arg("--controls-only")
        .arg("--manifest")
        .arg(evaluator.manifest)
        .arg("--control-cache")
        .arg(evaluator.control_cache)
        .arg("--json")
        .kill_on_drop(true)
        .output()
        .await?;
    let report: crate::evaluate::ControlReport =
        serde_json::from_slice(&output.stdout).map_err(|e| {
            StepError::Failed(format!(
                "the evaluator's controls produced no report ({e}): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        })?;
    let mut broken = Vec::new();
    for t in report.targets.iter().filter(|t| !t.hold) {
        if let Some(row) = targets.iter_mut().find(|r| r.name == t.name) {
            row.status = Some(crate::evaluate::Status::InfraError);
            row.check_exit.clone_from(&t.check_exit);
            row.check_output = Some(t.check_output.clone());
            row.notes.push(format!(
                "infra_error: {}",
                t.reason.as_deref().unwrap_or("")
            ));
        }
        broken.push(format!(
            "{} ({}; {}: {})",
            t.name,
            t.reason.as_deref().unwrap_or("control failed"),
            t.check_exit.as_deref().unwrap_or("-"),
            crate::evaluate::headline(&t.check_output)
        ));
    }
    if !broken.is_empty() {
        return Err(StepError::Failed(format!(
            "evaluator controls do not hold — infra_error, not the agent's: {}",
            broken.join("; ")
        )));
    }
    let reused = report
        .targets
        .iter()
        .filter(|t| t.source.as_ref().is_some_and(|s| s.how == "reused"))
        .count();
    Ok(format!(
        "{} checks' controls hold ({} run, {reused} reused from the control cache)",
        report.targets.len(),
        report.targets.len() - reused
    ))
}

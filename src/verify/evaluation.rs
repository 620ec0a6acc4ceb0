//! `--evaluate` (V2): a fresh evaluation of the exports against the verdicts `report.json`
//! states.

use serde_json::Value;

use super::Ctx;
use crate::evidence::run_dir::{EXPORT_DIR, report_name};
use crate::fixtures::FixtureManifest;

/// Re-runs the evaluator on the exports and compares each target's verdict with `report.json`.
pub(super) async fn check_evaluation(ctx: &mut Ctx, fixtures: &FixtureManifest) {
    let before = ctx.problems.len();
    let report: Value = match std::fs::read(ctx.run.report("json"))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            ctx.problem("evaluation", &report_name("json"), None, e);
            ctx.done("evaluation", before, "no report".into());
            return;
        }
    };
    // A run that stopped before the agent acted judged nothing: there is no verdict to
    // reproduce (and often no export).
    if report["outcome"] == "infra_abort" {
        ctx.done(
            "evaluation",
            before,
            "nothing judged (infra_abort): nothing to re-evaluate".into(),
        );
        return;
    }
    // The rule the run was judged by; reports from before it was recorded used
    // full-byte.
    let options = crate::evaluate::EvaluateOptions {
        require: report["require"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(crate::evaluate::Require::FullByte),
        ..Default::default()
    };
    let evaluation =
        match crate::evaluate::evaluate_with(fixtures, &ctx.run.exports(), &options).await {
            Ok(e) => e,
            Err(e) => {
                ctx.problem("evaluation", EXPORT_DIR, None, e.to_string());
                ctx.done("evaluation", before, "evaluator failed".into());
                return;
            }
        };
    for t in &evaluation.targets {
        let stated = report["targets"]
            .as_array()
            .and_then(|ts| ts.iter().find(|r| r["name"] == t.name.as_str()))
            .map(|r| r["status"].clone())
            .unwrap_or(Value::Null);
        let fresh = serde_json::to_value(t.status).unwrap_or(Value::Null);
        if stated != fresh {
            ctx.problem(
                "evaluation",
                &report_name("json"),
                None,
                format!(
                    "target `{}`: the report states {stated}, a fresh evaluation gives {fresh}",
                    t.name
                ),
            );
        }
    }
    ctx.done(
        "evaluation",
        before,
        format!(
            "{}/{} pass on re-evaluation",
            evaluation.passed, evaluation.total
        ),
    );
}

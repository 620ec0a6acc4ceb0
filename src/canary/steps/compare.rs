//! `compare PLAN` (gate 2, SPEC C7): a pre-registered comparison run from the console — a
//! script line or the `:` command line — through [`crate::gate2::cli::run_plan`], the same code
//! as `patchdiff compare run PLAN`: closed by default (`PATCHDIFF_GATE2`, environment only), the
//! plan sealed into `cmp-<id>/` under the console's runs root, member runs as child consoles,
//! one progress line per finished run, then the report. The step writes nothing into the
//! console's own run, so it needs no run directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::error::{StepError, StepResult};
use crate::config::Settings;

/// Where a long step's progress lines go while it runs (the headless console prints them; the
/// interactive one shows them as status lines). Called from the step's task.
pub type StepProgress = Arc<dyn Fn(String) + Send + Sync>;

/// What the last `compare` step left for the console to show.
#[derive(Default)]
pub struct CompareState {
    /// Progress lines of a running `compare` go here (none: they are dropped).
    pub progress: Option<StepProgress>,
    /// The last `compare` step's end, once one ran.
    pub last: Option<Compared>,
}

/// How one `compare` step ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// `patchdiff compare run`'s exit code for the same plan: 0 unchanged/improved,
    /// 1 regressed, 2 refused (gate closed, bad plan), 3 invalid/incomplete.
    pub exit_code: i32,
    /// The comparison directory, when the plan was sealed.
    pub dir: Option<PathBuf>,
    /// The report's text, exactly as `compare run` prints it and `report.txt` holds it.
    pub text: Option<String>,
    /// The report as `report.json` holds it.
    pub json: Option<serde_json::Value>,
}

/// Runs the comparison `plan` under `runs_root` and records its end in `state`. The summary is
/// `comparison cmp-… · VERDICT · N runs counted · report …/report.txt`; the step fails unless
/// the verdict is UNCHANGED or IMPROVED (exit code 0), and is refused (nothing run) with the
/// gate closed, saying how to open it.
pub async fn run(
    state: &mut CompareState,
    plan: &Path,
    runs_root: &Path,
    settings: &Settings,
) -> StepResult {
    let sink = state.progress.clone();
    let mut on_line = move |line: String| {
        if let Some(sink) = &sink {
            sink(line);
        }
    };
    match crate::gate2::cli::run_plan(plan, runs_root, settings, &mut on_line).await {
        Err(refused) => {
            state.last = Some(Compared {
                exit_code: refused.code,
                dir: None,
                text: None,
                json: None,
            });
            Err(StepError::Refused(format!("compare: {}", refused.message)))
        }
        Ok(done) => {
            let verdict = &done.report.verdict;
            let summary = format!(
                "comparison {} · {} · {} runs counted · report {}",
                done.dir
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                verdict.kind.word(),
                done.report.runs.len(),
                done.dir.join("report.txt").display()
            );
            let exit_code = verdict.exit_code;
            state.last = Some(Compared {
                exit_code,
                text: Some(crate::display::visible(&done.report.to_text()).into_owned()),
                json: Some(done.report.to_json()),
                dir: Some(done.dir),
            });
            if exit_code == 0 {
                Ok(summary)
            } else {
                Err(StepError::Failed(summary))
            }
        }
    }
}

//! The `runs` views (U2): past runs under the runs root, read back from their own files by
//! [`crate::runs`]; nothing here writes, so a view needs no run directory.

use std::path::{Path, PathBuf};

use super::super::command::RunsAction;
use super::super::error::{StepError, StepResult};
use crate::runs;

/// The text of a `runs` view under `root`: the list of past runs, a comparison of two, or
/// (headless) one run's detail — the interactive console switches its panes instead.
/// Errors: [`StepError::Failed`] naming an id that resolves to no run, or to several.
pub fn runs_view(root: &Path, action: &RunsAction) -> StepResult {
    match action {
        RunsAction::List => Ok(runs::render_list(root, &runs::list_runs(root))),
        RunsAction::Compare(a, b) => {
            let (a, b) = (runs::resolve(root, a), runs::resolve(root, b));
            runs::compare(
                &a.map_err(StepError::Failed)?,
                &b.map_err(StepError::Failed)?,
            )
            .map_err(StepError::Failed)
        }
        RunsAction::Open(id) => runs::detail::open(root, id)
            .map(|d| d.to_text())
            .map_err(StepError::Failed),
    }
}

/// A run named by id (a directory under `root`, or a unique prefix: [`runs::resolve`]) or by
/// path.
pub fn resolve_run(root: &Path, id: &str) -> PathBuf {
    if let Ok(found) = runs::resolve(root, id) {
        return found;
    }
    let p = Path::new(id);
    if p.components().count() > 1 || p.is_absolute() {
        p.to_owned()
    } else {
        root.join(id)
    }
}

//! The run state the steps share (a leaf of `canary`): each target's row as the run knows it,
//! each step's one-line outcome, and the options fixed for a run.

use std::path::PathBuf;

use serde::Serialize;

/// The result of one step: `ok` and a one-line summary (U5).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepOutcome {
    pub command: String,
    pub ok: bool,
    pub summary: String,
    pub elapsed_ms: u64,
}

/// One target's row as the run knows it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TargetRow {
    pub name: String,
    pub language: String,
    pub initial_sha256: String,
    pub version: u64,
    pub revision: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub current_sha256: String,
    pub exported_sha256: Option<String>,
    pub replay_consistent: Option<bool>,
    pub full_byte: Option<bool>,
    pub behavioral: Option<bool>,
    /// The evaluator's verdict class, or a preflight control's `infra_error` (V3).
    pub status: Option<crate::evaluate::Status>,
    /// Exit status and output tail (≤ 4 KiB) of the check run that explains a non-pass.
    pub check_exit: Option<String>,
    pub check_output: Option<String>,
    pub notes: Vec<String>,
    /// The rule that decided this target.
    pub require: Option<crate::evaluate::Require>,
    /// Where the export first differs from the reference; null when identical or unevaluated.
    pub first_difference: Option<String>,
    /// The named checks of the run that explains the verdict.
    pub checks: Vec<crate::evaluate::NamedCheck>,
    /// Names of the named checks that failed in any run on the export.
    pub failing_checks: Vec<String>,
    /// Why the check's output gave no named checks, if it did not.
    pub checks_note: Option<String>,
    /// `run (digest …)` or `reused (digest …)`: where the controls came from.
    pub controls: Option<String>,
}

/// Options fixed for the life of a run.
#[derive(Debug, Clone)]
pub struct CanaryOptions {
    /// The `patchdiff` executable used for child processes (`patchdiff mcp`, `patchdiff evaluate`).
    pub exe: PathBuf,
    pub manifest: PathBuf,
    /// Where run directories are created.
    pub runs_root: PathBuf,
    /// `PATCHDIFF_DATABASE_URL` to use instead of the per-run database.
    pub database_url: Option<String>,
    /// The console's resolved configuration (P1): what its children are given, the Node binary
    /// and host CLIs it resolves.
    pub settings: crate::config::Settings,
    /// The bound of every step without a timeout of its own, from the step's start
    /// ([`super::steps::deadline`]; default [`super::steps::deadline::STEP_TIMEOUT`]).
    pub step_timeout: std::time::Duration,
}

impl TargetRow {
    /// One fresh row per fixture of `manifest`, in its order: name, language, initial hash.
    pub fn of(manifest: &crate::fixtures::FixtureManifest) -> Vec<Self> {
        manifest
            .fixtures
            .iter()
            .map(|f| Self {
                name: f.target.clone(),
                language: f.language.clone(),
                initial_sha256: f.sha256.clone(),
                ..Self::default()
            })
            .collect()
    }
}

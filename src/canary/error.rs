//! The canary's typed step error (a leaf): what a step's failure was, so a caller can match on
//! it; its text is the step's one-line summary (U5), as the console and the report show it.

use super::client::CallError;

/// Why a step failed. Every variant's text is the summary the step reports.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The step may not run now (before `init`, a second canary in one run (C7), a refused
    /// order, a sealed destination): nothing was done.
    #[error("{0}")]
    Refused(String),
    /// A process the step needs is not running (or has no pid).
    #[error("{0}")]
    NotRunning(String),
    /// A call to an MCP process failed or was answered with an error.
    #[error("{0}")]
    Call(String),
    /// The step ran and what it checks does not hold (preflight, SAVE/replay, the evaluation,
    /// the report's verdict, a timeout while waiting).
    #[error("{0}")]
    Failed(String),
    /// Reading or writing the run's files, starting a child, or a blocking task failed.
    #[error("{0:#}")]
    Io(anyhow::Error),
}

impl StepError {
    /// The full-profile process is not running.
    pub fn no_full() -> Self {
        Self::NotRunning("the full-profile process is not running".to_owned())
    }

    /// The observed-profile process is not running.
    pub fn no_observed() -> Self {
        Self::NotRunning(
            "the observed-profile process is not running; run `launch observed`".to_owned(),
        )
    }
}

impl From<CallError> for StepError {
    fn from(e: CallError) -> Self {
        Self::Call(e.to_string())
    }
}

impl From<std::io::Error> for StepError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e.into())
    }
}

impl From<anyhow::Error> for StepError {
    fn from(e: anyhow::Error) -> Self {
        Self::Io(e)
    }
}

impl From<tokio::task::JoinError> for StepError {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::Io(e.into())
    }
}

/// A step's result: its one-line summary, or why it failed.
pub type StepResult = Result<String, StepError>;

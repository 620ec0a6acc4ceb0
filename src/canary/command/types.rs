//! The command set's types (U3): a console action ([`Command`]) and its arguments' values.

use std::path::PathBuf;
use std::time::Duration;

use crate::canary::names::{Host, ProcessKind};

/// What `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    /// The observed process's resident worker reported ready.
    Ready,
    /// Every target has been saved at least once (a real agent host finished).
    Saved,
}

/// One console action.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// C1: the fixture suite this run uses (its `manifest.json`, or the directory holding it);
    /// before `init`. In a script a relative path is relative to the script.
    Suite { path: PathBuf },
    /// C1: authenticate fixtures and initialize the five targets (`--reset` wipes history).
    Init { reset: bool },
    /// U1: start (or restart) MCP processes.
    Launch { which: Option<ProcessKind> },
    /// C3: the preflight checks.
    Preflight,
    /// C4: run a scripted agent plan against the observed process.
    Agent { plan: PathBuf },
    /// R1–R3: arm a scripted replica on `target` for the next `agent` step: a full-profile
    /// process leases it now and submits `plan`'s edits while the agent works. In a script a
    /// relative path is relative to the script.
    Replica { target: String, plan: PathBuf },
    /// A1–A4: launch a real agent host CLI headless and sealed against an observed process it
    /// starts itself; `model` defaults to the one given to `record`.
    AgentHost {
        host: Host,
        model: Option<String>,
        max_turns: Option<u32>,
        timeout: Duration,
    },
    /// Wait for a condition, up to a timeout.
    Wait { what: WaitFor, timeout: Duration },
    /// C5: export every target's latest saved version.
    Export,
    /// C5: SAVE/replay consistency and the audit summary.
    Inspect,
    /// C6: run the independent evaluator; each behavioral check runs `repeat` times (V3),
    /// judged by `require` (`full-byte` where exact bytes are the point; default
    /// behavioral), each check run killed after `check_timeout` seconds (default: the
    /// fixture's, else 120 s), controls re-run when `fresh_controls` (else reused from the
    /// control cache).
    Evaluate {
        repeat: u32,
        require: Option<crate::evaluate::Require>,
        check_timeout: Option<u64>,
        fresh_controls: bool,
    },
    /// Write the final report (text, JSON, JUnit XML) to the run directory.
    Report,
    /// U1: stop MCP processes.
    Stop { which: Option<ProcessKind> },
    /// E1: record the agent's identity for the run manifest.
    Record {
        model: Option<String>,
        provider: Option<String>,
        reasoning: Option<String>,
    },
    /// Print the agent-host configuration for the observed process; with `file`, also write
    /// that host's document to a new file (0600, never over an existing one).
    HostConfig {
        host: Option<Host>,
        file: Option<PathBuf>,
    },
    /// Show a target's story: verdicts with the check's output, the agent's submissions with
    /// their receipts, diffs against the expected and original bytes (a view, not a step).
    Target { name: String },
    /// Past runs: list them, compare two, or open one read-only (a view, not a step).
    Runs { action: RunsAction },
    /// Interactive console only: watch an observed process an agent host started, by tailing
    /// its perf-events file (and memory file) and reading its store.
    Attach {
        events: PathBuf,
        database: Option<PathBuf>,
    },
    /// Interactive console only: start the next run in this console once the current one is
    /// sealed.
    New,
    /// Gate 2 (C7): run a pre-registered comparison plan (`compare plan`'s `plan.toml`) as
    /// `patchdiff compare run PLAN` does; refused while the gate is closed. In a script a
    /// relative path is relative to the script.
    Compare { plan: PathBuf },
}

/// What `runs` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsAction {
    /// List past runs, newest first.
    List,
    /// Open one run read-only in the console (its perf events and store), by id or path.
    Open(String),
    /// Compare two runs (ids or paths): verdict changes and phase deltas.
    Compare(String, String),
}

/// Default wait timeout when none is given.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(600);

impl Command {
    /// The command's table name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Suite { .. } => "suite",
            Self::Init { .. } => "init",
            Self::Launch { .. } => "launch",
            Self::Preflight => "preflight",
            Self::Agent { .. } | Self::AgentHost { .. } => "agent",
            Self::Replica { .. } => "replica",
            Self::Wait { .. } => "wait",
            Self::Export => "export",
            Self::Inspect => "inspect",
            Self::Evaluate { .. } => "evaluate",
            Self::Report => "report",
            Self::Stop { .. } => "stop",
            Self::Record { .. } => "record",
            Self::HostConfig { .. } => "host-config",
            Self::Target { .. } => "target",
            Self::Runs { .. } => "runs",
            Self::Attach { .. } => "attach",
            Self::New => "new",
            Self::Compare { .. } => "compare",
        }
    }

    /// Whether the command is a view (`target`, `runs`): it writes nothing into the run, is
    /// not a step of its report, and needs no run directory.
    pub fn is_view(&self) -> bool {
        matches!(self, Self::Target { .. } | Self::Runs { .. })
    }

    /// Whether the step needs this run's directory: every step but the views and `compare`
    /// (which writes into its own `cmp-<id>/` beside the runs, never into this run).
    pub fn needs_run_dir(&self) -> bool {
        !self.is_view() && !matches!(self, Self::Compare { .. })
    }

    /// Whether the command may follow `report` on the same run — the views, which
    /// write nothing into it (`target`, `runs`), and `new`, which starts another run.
    pub fn allowed_after_seal(&self) -> bool {
        matches!(self, Self::Target { .. } | Self::Runs { .. } | Self::New)
    }
}

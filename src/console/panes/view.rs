//! What a pane reads and answers (SPEC U2): the [`View`] of the whole screen a pane is given
//! for one key or one frame, and the [`Effect`] its key asks the app to carry out. A leaf
//! module: every pane imports it and it imports no pane, so the panes form no cycle with their
//! parent.

use std::path::PathBuf;

use crate::canary::command::Command;
use crate::console::procs::ProcTable;
use crate::console::ring::Ring;
use crate::console::runner::CanarySnapshot;
use crate::console::state::Monitor;
use crate::console::theme::Theme;

/// A watched observed process started elsewhere (attach mode, SPEC U1, ARCHITECTURE).
#[derive(Debug, Clone, PartialEq)]
pub struct Attached {
    pub events: PathBuf,
    pub database: Option<PathBuf>,
}

/// Status lines (step outcomes, notices) kept.
pub const STATUS_CAPACITY: usize = 64;

/// One status line.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub ok: bool,
    pub text: String,
}

/// What the whole screen knows, as the panes read it (borrowed from the app for one key or one
/// frame).
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub monitor: &'a Monitor,
    pub canary: Option<&'a CanarySnapshot>,
    pub attached: Option<&'a Attached>,
    pub procs: &'a ProcTable,
    pub statuses: &'a Ring<Status>,
    /// The console's clock (Unix ms).
    pub now_ms: f64,
    pub theme: Theme,
    /// Whether the pane being drawn or given a key has the focus.
    pub focused: bool,
}

impl<'a> View<'a> {
    /// The canary's snapshot unless the screen shows an attached process (then the screen
    /// shows none of the canary's processes or targets).
    pub fn run(&self) -> Option<&'a CanarySnapshot> {
        self.canary.filter(|_| self.attached.is_none())
    }
}

/// What a confirmed question does (the operator answered `y`).
#[derive(Debug, Clone, PartialEq)]
pub enum Confirmed {
    /// SIGKILL the process (for an agent host: its whole process group).
    Kill {
        label: String,
        pid: u32,
        group: bool,
    },
    /// Quit while a step runs: the step is cancelled and every child stopped; nothing is sealed.
    Quit,
    /// Run a command that cannot be undone (`report` seals the run).
    Run(Command),
}

/// What a pane's key asks the app to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The key was the pane's; nothing more to do.
    Handled,
    /// Send a command to the canary task, saying `status` first when given.
    Command(Command, Option<String>),
    /// A status line (`ok`, text).
    Status(bool, String),
    /// Show lines in an overlay.
    Overlay { title: String, lines: Vec<String> },
    /// Ask `question` (y/N) before doing `action`.
    Confirm { question: String, action: Confirmed },
    /// Open the evidence search line.
    Search,
}

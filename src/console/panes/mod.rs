//! The console's panes as components (SPEC U2): each pane is one module owning its state, its
//! key table (the one [`Binding`](super::keys::Binding) table its handler matches and the bar
//! and help show) and its drawing. A pane reads what the whole screen knows through a [`View`]
//! (the monitor, the canary's snapshot, the process table, the clock) and answers a key with an
//! [`Effect`] the app carries out, so no pane reaches into the app and drawing stays pure.

pub mod evidence;
pub mod perf;
pub mod processes;
pub mod targets;
pub mod worker;

use std::path::PathBuf;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Paragraph};

use super::procs::ProcTable;
use super::ring::Ring;
use super::runner::CanarySnapshot;
use super::state::Monitor;
use super::theme::Theme;
use crate::canary::command::Command;

/// The panes focus moves between (Tab / Shift-Tab).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Processes,
    Targets,
    Worker,
    Perf,
    Evidence,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::Processes,
        Pane::Targets,
        Pane::Worker,
        Pane::Perf,
        Pane::Evidence,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Processes => "PROCESSES",
            Pane::Targets => "TARGETS",
            Pane::Worker => "WORKER",
            Pane::Perf => "PERF EVENTS",
            Pane::Evidence => "EVIDENCE",
        }
    }

    /// Keys the pane handles itself when focused, `(label, hint)`, from the pane's own key
    /// table (shown in the bottom bar and in help).
    pub fn keys(self) -> Vec<(&'static str, &'static str)> {
        use super::keys::hints;
        match self {
            Pane::Evidence => hints(evidence::KEYS),
            Pane::Perf => hints(perf::KEYS),
            Pane::Processes => hints(processes::KEYS),
            Pane::Targets => hints(targets::KEYS),
            Pane::Worker => Vec::new(),
        }
    }

    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }
}

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

/// Every pane's own state.
pub struct Panes {
    pub processes: processes::ProcessesPane,
    pub targets: targets::TargetsPane,
    pub perf: perf::PerfPane,
    pub evidence: super::evidence::EvidenceView,
}

impl Default for Panes {
    fn default() -> Self {
        Self {
            processes: processes::ProcessesPane::default(),
            targets: targets::TargetsPane::default(),
            perf: perf::PerfPane::default(),
            evidence: super::evidence::EvidenceView::new(Vec::new()),
        }
    }
}

impl Panes {
    /// Draws `pane` (border, title, content) into `rect`.
    pub fn draw(&self, frame: &mut Frame, view: &View, pane: Pane, rect: Rect) {
        let theme = view.theme;
        let block = Block::default().borders(Borders::ALL).title(Span::styled(
            format!(" {}{} ", if view.focused { "▸ " } else { "" }, pane.title()),
            theme.title(view.focused),
        ));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        let lines = match pane {
            Pane::Processes => self.processes.lines(view, inner.height),
            Pane::Targets => self.targets.lines(view, inner.width, inner.height),
            Pane::Worker => return worker::draw(frame, view, inner),
            Pane::Perf => self.perf.lines(view, inner.height),
            Pane::Evidence => evidence::lines(&self.evidence, view, inner.height),
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }

    /// A key for the focused `pane`; `None` when it is not one of that pane's keys.
    pub fn on_key(
        &mut self,
        pane: Pane,
        view: &View,
        key: &crossterm::event::KeyEvent,
    ) -> Option<Effect> {
        match pane {
            Pane::Processes => self.processes.on_key(view, key),
            Pane::Targets => self.targets.on_key(view, key),
            Pane::Worker => None,
            Pane::Perf => self.perf.on_key(view.monitor, key),
            Pane::Evidence => evidence::on_key(&mut self.evidence, key),
        }
    }
}

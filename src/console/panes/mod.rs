//! The console's panes as components (SPEC U2): each pane is one module owning its state, its
//! key table (the one [`Binding`](super::keys::Binding) table its handler matches and the bar
//! and help show) and its drawing. A pane reads what the whole screen knows through a [`View`]
//! (the monitor, the canary's snapshot, the process table, the clock) and answers a key with an
//! [`Effect`] the app carries out, so no pane reaches into the app and drawing stays pure.

pub mod evidence;
pub mod perf;
pub mod processes;
pub mod runs;
pub mod targets;
pub mod view;
pub mod worker;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Paragraph};

pub use view::{Attached, Confirmed, Effect, STATUS_CAPACITY, Status, View};

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

/// Every pane's own state.
pub struct Panes {
    pub processes: processes::ProcessesPane,
    pub targets: targets::TargetsPane,
    pub perf: perf::PerfPane,
    pub evidence: super::evidence::EvidenceView,
    /// Past runs and comparisons, shown over the live panes while open.
    pub runs: runs::RunsPane,
}

impl Default for Panes {
    fn default() -> Self {
        Self {
            processes: processes::ProcessesPane::default(),
            targets: targets::TargetsPane::default(),
            perf: perf::PerfPane::default(),
            evidence: super::evidence::EvidenceView::new(Vec::new()),
            runs: runs::RunsPane::default(),
        }
    }
}

impl Panes {
    /// Draws `pane` (border, title, content) into `rect`.
    pub fn draw(&self, frame: &mut Frame, view: &View, pane: Pane, rect: Rect) {
        let theme = view.theme;
        // EVIDENCE says whose evidence it shows (the observed process a host started, …).
        let owner = match pane {
            Pane::Evidence => evidence::owner(&self.evidence, view),
            _ => None,
        }
        .map_or_else(String::new, |o| format!(" · {o}"));
        let block = Block::default().borders(Borders::ALL).title(Span::styled(
            format!(
                " {}{}{owner} ",
                if view.focused { "▸ " } else { "" },
                pane.title()
            ),
            theme.title(view.focused),
        ));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        let lines = match pane {
            Pane::Processes => self.processes.lines(view, inner.width, inner.height),
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

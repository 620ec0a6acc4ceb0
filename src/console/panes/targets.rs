//! The TARGETS pane (SPEC U2, C5, C6): the five targets — version, revision, accepted and
//! rejected edits, current vs initial hash, export and evaluation — from the store as it is now
//! (live while the MCP processes write) or the canary's last reading; the rows scroll so the
//! selected target is always on screen, and Enter opens its story.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::text::{Line, Span};

use super::view::{Effect, View};
use crate::canary::command::Command;
use crate::console::keys::{Binding, DOWN, UP, lookup, step_cursor};
use crate::console::limits::Level;
use crate::console::theme::{Theme, mark, short_sha};
use crate::kernel::TargetSummary;

/// What a key on the pane does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    Story,
}

/// The pane's keys: the one table the handler matches and the bar and help show.
pub const KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "select", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(
        &[KeyCode::Enter],
        "⏎",
        "story: verdicts, diffs",
        Action::Story,
    ),
];

/// The pane's own state: its cursor and the store's latest reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetsPane {
    /// The selected row (Enter opens that target's story).
    pub cursor: usize,
    /// Targets as the store reports them (live while MCP processes write, WAL).
    pub store: Vec<TargetSummary>,
    /// Why the store could not be read, if it could not.
    pub store_error: Option<String>,
}

impl TargetsPane {
    /// Target names in the order the pane shows them: the run's rows, then targets only the
    /// store knows.
    pub fn names(&self, view: &View) -> Vec<String> {
        let mut names: Vec<String> = view
            .run()
            .map(|c| c.targets.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        for s in &self.store {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
        names
    }

    /// A key on the focused pane: move the cursor, or ask for the selected target's story.
    pub fn on_key(&mut self, view: &View, key: &KeyEvent) -> Option<Effect> {
        let action = lookup(KEYS, key)?;
        let names = self.names(view);
        Some(match action {
            Action::Up | Action::Down => {
                let last = names.len().saturating_sub(1);
                self.cursor = step_cursor(self.cursor, action == Action::Down, last);
                Effect::Handled
            }
            Action::Story => match names.get(self.cursor) {
                Some(name) => Effect::Command(Command::Target { name: name.clone() }, None),
                None => Effect::Handled,
            },
        })
    }

    /// The pane's lines fitted to `height` rows of `width` columns.
    pub fn lines<'a>(&self, view: &View, width: u16, height: u16) -> Vec<Line<'a>> {
        self.scrolled(self.table(view, &view.theme, width), view, height)
    }

    /// The targets pane's lines fitted to `height` rows: the header stays, and the rows scroll so
    /// the selected target is always on screen (at 40×12 the pane shows two or three targets; j/k
    /// reach every one). Trailing lines (a store error) stay below the rows.
    fn scrolled<'a>(&self, mut lines: Vec<Line<'a>>, view: &View, height: u16) -> Vec<Line<'a>> {
        let height = height as usize;
        let rows = self.names(view).len().min(lines.len().saturating_sub(1));
        if lines.len() <= height || height < 2 {
            return lines;
        }
        let extra = lines.len() - 1 - rows;
        let visible = height.saturating_sub(1 + extra).max(1);
        if rows <= visible {
            return lines;
        }
        let cursor = self.cursor.min(rows - 1);
        let first = cursor.saturating_sub(visible - 1);
        let header = lines.remove(0);
        let mut out = vec![header];
        out.extend(lines.drain(first..first + visible));
        out.extend(lines.drain(rows - visible..));
        out
    }

    fn table<'a>(&self, view: &View, theme: &Theme, width: u16) -> Vec<Line<'a>> {
        let mut out = vec![Line::styled(
            format!(
                "  {:<12} {:>3} {:>4} {:>7}  {:<15} {:<9} {}",
                "target", "ver", "rev", "acc/rej", "hash", "export", "evaluate"
            ),
            theme.dim(),
        )];
        // Attached, the targets are the attached store's only (never the canary's).
        let rows = view.run().map(|c| c.targets.as_slice()).unwrap_or(&[]);
        let focused = view.focused;
        for (index, name) in self.names(view).iter().enumerate() {
            let row = rows.iter().find(|r| &r.name == name);
            let live = self.store.iter().find(|s| &s.name == name);
            let Some(figures) = live.map(Figures::from).or(row.map(Figures::from)) else {
                continue;
            };
            let line = target_line(name, &figures, row, theme, width);
            out.push(mark(line, focused && index == self.cursor, theme));
        }
        if let Some(e) = &self.store_error {
            out.push(Line::styled(
                format!("store: {e}"),
                theme.level(Level::High),
            ));
        }
        out
    }
}

/// A target's figures, from the store as it is now or else from the canary's last reading.
struct Figures<'a> {
    version: u64,
    revision: u64,
    accepted: u64,
    rejected: u64,
    sha256: &'a str,
    initial_sha256: &'a str,
}

impl<'a> From<&'a crate::kernel::TargetSummary> for Figures<'a> {
    fn from(s: &'a crate::kernel::TargetSummary) -> Self {
        Figures {
            version: s.version,
            revision: s.revision,
            accepted: s.accepted,
            rejected: s.rejected,
            sha256: &s.sha256,
            initial_sha256: &s.initial_sha256,
        }
    }
}

impl<'a> From<&'a crate::canary::TargetRow> for Figures<'a> {
    fn from(r: &'a crate::canary::TargetRow) -> Self {
        Figures {
            version: r.version,
            revision: r.revision,
            accepted: r.accepted,
            rejected: r.rejected,
            sha256: &r.current_sha256,
            initial_sha256: &r.initial_sha256,
        }
    }
}

/// One target's row: figures and hash, then (from 60 columns) export and evaluation.
fn target_line<'a>(
    name: &str,
    f: &Figures,
    row: Option<&crate::canary::TargetRow>,
    theme: &Theme,
    width: u16,
) -> Line<'a> {
    let hash = if f.sha256.is_empty() {
        "— not init".to_owned()
    } else if f.sha256 == f.initial_sha256 {
        format!("= init {}", short_sha(f.sha256))
    } else {
        format!("≠ init {}", short_sha(f.sha256))
    };
    let mut spans = vec![Span::raw(format!(
        "{:<12} {:>3} {:>4} {:>7}  {:<15} ",
        name.chars().take(12).collect::<String>(),
        f.version,
        f.revision,
        format!("{}/{}", f.accepted, f.rejected),
        hash
    ))];
    if width >= 60 {
        let (export, export_level) = export_cell(row, f.sha256);
        let (eval, eval_level) = evaluation_cell(row);
        spans.push(Span::styled(
            format!("{export:<9} "),
            theme.level(export_level),
        ));
        spans.push(Span::styled(eval, theme.level(eval_level)));
    }
    Line::from(spans)
}

/// `✔ exported` when the export holds the current bytes, `≠ changed` when they moved on since.
fn export_cell(row: Option<&crate::canary::TargetRow>, sha: &str) -> (String, Level) {
    match row.and_then(|r| r.exported_sha256.as_deref()) {
        None => ("—".to_owned(), Level::Ok),
        Some(e) if e == sha || sha.is_empty() => ("✔ exported".to_owned(), Level::Ok),
        Some(_) => ("≠ changed".to_owned(), Level::High),
    }
}

/// The evaluation's verdict: pass (and whether the export is identical to the reference), what
/// failed (the first failing named check, or the bytes where they were required), or a check
/// that could not judge (V3).
fn evaluation_cell(row: Option<&crate::canary::TargetRow>) -> (String, Level) {
    use crate::evaluate::Status;
    let Some(row) = row else {
        return ("—".to_owned(), Level::Ok);
    };
    let identical = match row.full_byte {
        Some(true) => " · identical",
        Some(false) => " · ≠ reference",
        None => "",
    };
    match row.status {
        // V3: a broken check environment is not the agent's failure.
        Some(Status::InfraError) => ("⚠ infra_error".to_owned(), Level::High),
        Some(Status::Flaky) => ("⚠ flaky".to_owned(), Level::High),
        Some(Status::Pass) => (format!("✔ pass{identical}"), Level::Ok),
        Some(Status::Fail) => {
            let why = match (row.failing_checks.as_slice(), row.behavioral) {
                ([first], _) => first.clone(),
                ([first, rest @ ..], _) => format!("{first} +{}", rest.len()),
                ([], Some(false)) => "behavior".to_owned(),
                ([], _) if row.full_byte == Some(false) => "bytes".to_owned(),
                ([], _) => String::new(),
            };
            (format!("✖ FAIL {why}").trim_end().to_owned(), Level::Limit)
        }
        None => ("—".to_owned(), Level::Ok),
    }
}

//! The PERF EVENTS pane (SPEC T4, T5, U2): per-event counts, failures and percentiles (a
//! gauge's in its own unit), and, from 12 rows, the live tail of events across sources in time
//! order; `x` hides the selected row's kind from the tail.

use std::collections::BTreeSet;

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::text::{Line, Span};

use super::view::{Effect, View};
use crate::console::evidence::clock;
use crate::console::keys::{Binding, DOWN, UP, lookup, step_cursor};
use crate::console::limits::Level;
use crate::console::state::{Monitor, StatRow, TailLine, Unit};
use crate::console::theme::{MIB, Theme, mark, secs};

/// What a key on the pane does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    Hide,
}

/// The pane's keys: the one table the handler matches and the bar and help show.
pub const KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "select", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(
        &[KeyCode::Char('x')],
        "x",
        "hide/show kind in tail",
        Action::Hide,
    ),
];

/// The pane's own state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfPane {
    /// The selected row of the table (the table scrolls from it).
    pub cursor: usize,
    /// Event kinds the live tail hides (`x` on the selected row toggles).
    pub hidden: BTreeSet<String>,
}

impl PerfPane {
    /// A key on the focused pane: move through the table, hide or show a kind in the tail.
    pub fn on_key(&mut self, monitor: &Monitor, key: &KeyEvent) -> Option<Effect> {
        let action = lookup(KEYS, key)?;
        match action {
            Action::Up | Action::Down => {
                let last = monitor.stat_rows.len().saturating_sub(1);
                self.cursor = step_cursor(self.cursor, action == Action::Down, last);
            }
            Action::Hide => {
                if let Some(row) = monitor.stat_rows.get(self.cursor) {
                    let name = row.name.clone();
                    if !self.hidden.remove(&name) {
                        self.hidden.insert(name);
                    }
                }
            }
        }
        Some(Effect::Handled)
    }

    /// The PERF EVENTS pane: the per-event percentile table (from the selected row) and, from 12
    /// rows, the live tail below it.
    pub fn lines<'a>(&self, view: &View<'a>, height: u16) -> Vec<Line<'a>> {
        let theme = &view.theme;
        let mut out = Vec::new();
        // Say what the figures cover: a relaunch starts a source's figures afresh.
        let relaunched: Vec<String> = view
            .monitor
            .relaunches
            .iter()
            .map(|(source, n)| format!("{source} ×{n}"))
            .collect();
        if !relaunched.is_empty() {
            out.push(Line::styled(
                format!(
                    "relaunched: {} — count is the current process's, total the run's",
                    relaunched.join(", ")
                ),
                theme.level(Level::High),
            ));
        }
        out.push(Line::styled(
            format!(
                "  {:<8} {:<20} {:>6} {:>6} {:>9} {:>9} {:>9} {:>6}",
                "source", "event", "count", "total", "p50", "p95", "p99", "failed"
            ),
            theme.dim(),
        ));
        let table_rows = if height >= 12 {
            (height as usize / 2).saturating_sub(1)
        } else {
            height as usize
        };
        for (i, r) in view
            .monitor
            .stat_rows
            .iter()
            .enumerate()
            .skip(self.cursor)
            .take(table_rows)
        {
            let line = self.row(r, theme);
            out.push(mark(line, view.focused && i == self.cursor, theme));
        }
        if height >= 12 {
            self.tail(&mut out, view, theme, height);
        }
        out
    }

    /// One event kind's row: count, p50/p95/p99 in its unit, failures, whether the tail hides it.
    fn row<'a>(&self, r: &StatRow, theme: &Theme) -> Line<'a> {
        let level = if r.failed > 0 { Level::High } else { Level::Ok };
        let value = |v: f64| gauge_text(r.unit, v);
        let hidden = self.hidden.contains(&r.name);
        Line::from(vec![
            Span::raw(format!(
                "{:<8} {:<20} {:>6} {:>6} {:>9} {:>9} {:>9} ",
                r.source.chars().take(8).collect::<String>(),
                r.name.chars().take(20).collect::<String>(),
                r.count,
                r.total,
                value(r.p50),
                value(r.p95),
                value(r.p99)
            )),
            Span::styled(format!("{:>6}", r.failed), theme.level(level)),
            Span::styled(if hidden { "  hidden" } else { "" }, theme.dim()),
        ])
    }

    /// The live tail under the table: its heading (naming hidden kinds), then the newest lines
    /// that fit in `height`, in timestamp order across sources.
    fn tail<'a>(&self, out: &mut Vec<Line<'a>>, view: &View<'a>, theme: &Theme, height: u16) {
        let hidden = if self.hidden.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.hidden.iter().map(String::as_str).collect();
            format!(" (hidden: {})", names.join(", "))
        };
        out.push(Line::styled(
            format!("live tail, by time{hidden}"),
            theme.dim(),
        ));
        let room = (height as usize).saturating_sub(out.len());
        // Sources interleave: show the newest `room` lines in timestamp order.
        let mut shown: Vec<&TailLine> = view
            .monitor
            .tail
            .iter()
            .filter(|l| !self.hidden.contains(&l.name))
            .collect();
        shown.sort_by(|a, b| a.ts_ms.total_cmp(&b.ts_ms));
        let folded = fold_gauges(&shown);
        let start = folded.len().saturating_sub(room);
        for (l, repeats) in folded.into_iter().skip(start) {
            let level = if l.ok { Level::Ok } else { Level::High };
            // A gauge shows its value, not its (meaningless) duration.
            let figure = match l.gauge {
                Some((unit, v)) => gauge_text(unit, v),
                None => secs(Some(l.duration_ms)),
            };
            let name = if repeats > 1 {
                format!("{} ×{repeats}", l.name)
            } else {
                l.name.clone()
            };
            out.push(Line::from(vec![
                Span::raw(format!("{} ", clock(l.ts_ms))),
                Span::styled(if l.ok { "✔ " } else { "✖ " }, theme.level(level)),
                Span::raw(format!(
                    "{:<8} {:<20} {:>9} {}",
                    l.source, name, figure, l.detail
                )),
            ]));
        }
    }
}

/// A gauge's value in its unit.
fn gauge_text(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ms => secs(Some(v)),
        Unit::Bytes => format!("{:.1} MiB", v / MIB),
        Unit::Count => format!("{v:.0}"),
    }
}

/// The tail's lines with each run of consecutive gauge lines of one source and name folded
/// into its newest line and how many it stands for (`worker_rss ×37`); timed events are never
/// folded.
pub fn fold_gauges<'a>(lines: &[&'a TailLine]) -> Vec<(&'a TailLine, usize)> {
    let mut out: Vec<(&TailLine, usize)> = Vec::new();
    for l in lines {
        match out.last_mut() {
            Some((last, n))
                if l.gauge.is_some()
                    && last.gauge.is_some()
                    && last.name == l.name
                    && last.source == l.source
                    && last.ok == l.ok =>
            {
                *last = l;
                *n += 1;
            }
            _ => out.push((l, 1)),
        }
    }
    out
}

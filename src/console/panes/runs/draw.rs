//! Drawing the RUNS pane (SPEC U2, U4): a pure function of the pane's state — the list with
//! its cursor and marks, an opened run with its target cursor, an opened comparison with its
//! strip cell cursor, or text — into one bordered rectangle. Every string a run or an agent
//! wrote passes [`visible_inline`] (the detail and pair texts are escaped where they are
//! built); the cursor and the marks are glyphs, so `NO_COLOR` loses neither.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::list::{FILTER_KEYS, sort_word};
use super::{RunsPane, Screen};
use crate::console::limits::Level;
use crate::console::theme::{SELECTED, Theme, mark};
use crate::display::visible_inline;
use crate::runs::detail::RunDetail;
use crate::runs::{EntryKind, RunSummary, RunVerdict, date};

/// What a screen draws: its title, its lines, the first line shown (the page keys' scroll)
/// and a line that must stay on screen (the cursor's), if any.
type Drawn = (String, Vec<Line<'static>>, usize, Option<usize>);

/// The glyph in front of a marked run.
pub const MARKED: &str = "◆";

impl RunsPane {
    /// Draws the pane into `rect`.
    pub fn draw(&self, frame: &mut Frame, theme: &Theme, rect: Rect) {
        let (title, lines, top, keep) = match self.stack.last() {
            None => self.list_lines(
                theme,
                rect.width.saturating_sub(2) as usize,
                rect.height.saturating_sub(2) as usize,
            ),
            Some(Screen::Run {
                detail,
                cursor,
                scroll,
            }) => run_lines(detail, *cursor, *scroll, theme),
            Some(Screen::Comparison {
                detail,
                row,
                cell,
                scroll,
            }) => comparison_lines(detail, *row, *cell, *scroll, theme),
            Some(Screen::Text {
                title,
                lines,
                scroll,
            }) => (
                title.clone(),
                lines.iter().map(|l| Line::raw(l.clone())).collect(),
                *scroll,
                None,
            ),
        };
        let depth = self.stack.len();
        let block = Block::default().borders(Borders::ALL).title(Span::styled(
            format!(
                " ▸ RUNS{} {title}  (Esc {}) ",
                if depth > 0 { " ›" } else { " ·" },
                if depth > 0 { "back" } else { "closes" }
            ),
            theme.title(true),
        ));
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        // Never scrolled past the last screenful.
        let height = inner.height as usize;
        let mut top = top.min(lines.len().saturating_sub(height));
        if let Some(row) = keep {
            if row < top {
                top = row;
            } else if row >= top + height {
                top = row + 1 - height.max(1);
            }
        }
        let shown: Vec<Line> = lines.into_iter().skip(top).take(height).collect();
        frame.render_widget(Paragraph::new(shown), inner);
    }

    /// The list's title, lines (a header, then one row per entry) and first line shown, so the
    /// cursor's row is always on screen in `height` rows.
    fn list_lines(&self, theme: &Theme, width: usize, height: usize) -> Drawn {
        let wide = width >= WIDE;
        let l = &self.list;
        let root = self.root.as_ref().map_or("-".to_owned(), |r| {
            visible_inline(&r.display().to_string()).into_owned()
        });
        let title = format!("{} of {} under {root}", l.shown.len(), l.all.len());
        let filter = match &self.filter_input {
            Some(text) => format!(
                "filter: {}█ (Enter applies; {FILTER_KEYS})",
                visible_inline(text)
            ),
            None if l.filter_text.is_empty() => "filter: none (/)".to_owned(),
            None => format!("filter: {}", visible_inline(&l.filter_text)),
        };
        let mut out = vec![Line::styled(
            format!(
                "sort: {} (s) · {filter} · marked {}/2{}",
                sort_word(l.sort),
                l.marked.len(),
                if l.marked.is_empty() {
                    String::new()
                } else {
                    format!(
                        ": {}",
                        l.marked
                            .iter()
                            .map(|m| visible_inline(m).into_owned())
                            .collect::<Vec<_>>()
                            .join(" → ")
                    )
                }
            ),
            theme.dim(),
        )];
        out.push(Line::styled(
            if wide {
                format!(
                    "    {:<26} {:<16} {:<20} {:<8} {:<10} {:<20} {}",
                    "id", "started", "model", "host", "suite", "verdict", "targets"
                )
            } else {
                format!(
                    "    {:<26} {:<16} {:<12} {}",
                    "id", "started", "verdict", "targets not passing"
                )
            },
            theme.dim(),
        ));
        if l.shown.is_empty() {
            out.push(Line::raw(if l.all.is_empty() {
                "  no runs yet: a run's directory appears here once it has a manifest".to_owned()
            } else {
                format!("  none of {} entries passes the filter", l.all.len())
            }));
        }
        for (i, r) in l.rows().enumerate() {
            out.push(mark(
                row_line(r, l.is_marked(&r.id), wide, theme),
                i == l.cursor,
                theme,
            ));
        }
        // The header stays; the rows scroll so the cursor's row is shown.
        let rows = height.saturating_sub(2).max(1);
        let top = l.cursor.saturating_sub(rows - 1);
        if top > 0 {
            let header: Vec<Line> = out.drain(..2).collect();
            out.drain(..top);
            out.splice(0..0, header);
        }
        (title, out, 0, None)
    }
}

/// Inner width from which the list shows model, host and suite columns; below it, the
/// verdict and targets come right after the date so 80 columns still show them.
pub const WIDE: usize = 130;

/// One entry's row: mark, id, start, (`wide`: model, host, suite,) verdict, targets.
fn row_line(r: &RunSummary, marked: bool, wide: bool, theme: &Theme) -> Line<'static> {
    let verdict = crate::runs::verdict_word(r);
    let level = match r.verdict {
        RunVerdict::Passed | RunVerdict::Unchanged | RunVerdict::Improved => Level::Ok,
        RunVerdict::NoReport | RunVerdict::Incomplete => Level::High,
        _ => Level::Limit,
    };
    let targets = match r.kind {
        EntryKind::Comparison => r
            .members
            .map_or("-".to_owned(), |(n, of)| format!("{n}/{of} member runs")),
        EntryKind::Run if r.verdict == RunVerdict::Unreadable => {
            visible_inline(r.problem.as_deref().unwrap_or("-")).into_owned()
        }
        EntryKind::Run => {
            // Narrow, only the targets that did not pass (they are what the operator looks for).
            let each: Vec<String> = r
                .verdicts
                .iter()
                .filter(|(_, v)| wide || *v != "pass")
                .map(|(name, v)| format!("{} {v}", visible_inline(name)))
                .collect();
            format!(
                "{}/{} {}",
                r.targets_passed,
                r.targets_total,
                if each.is_empty() {
                    "all pass".to_owned()
                } else {
                    each.join(", ")
                }
            )
        }
    };
    let mut head = format!(
        "{} {:<26} {:<16} ",
        if marked { MARKED } else { " " },
        visible_inline(&r.id),
        date(r.started_ms),
    );
    if wide {
        head.push_str(&format!(
            "{:<20} {:<8} {:<10} ",
            visible_inline(r.model.as_deref().unwrap_or("-")),
            visible_inline(r.host_label()),
            visible_inline(r.suite.as_deref().unwrap_or("-")),
        ));
    }
    let verdict_width = if wide { 20 } else { 12 };
    Line::from(vec![
        Span::raw(head),
        Span::styled(format!("{verdict:<verdict_width$}"), theme.level(level)),
        Span::raw(format!(" {targets}")),
    ])
}

/// An opened run: its detail text with the cursor's target row marked, scrolled so that row
/// is shown (from `scroll` on otherwise).
fn run_lines(d: &RunDetail, cursor: usize, scroll: usize, theme: &Theme) -> Drawn {
    let text = d.to_text();
    let lines: Vec<&str> = text.lines().collect();
    // The detail lists the targets right below its `targets  N/M pass` line, in report order.
    let first = lines
        .iter()
        .position(|l| l.starts_with("targets  "))
        .map(|i| i + 1);
    let selected = first
        .filter(|_| cursor < d.targets.len())
        .map(|i| i + cursor);
    let out: Vec<Line> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let line = Line::raw((*l).to_owned());
            if Some(i) == selected {
                let mut spans = vec![Span::raw(SELECTED)];
                spans.extend(line.spans.into_iter().map(|s| {
                    let t = s.content.strip_prefix(' ').unwrap_or(&s.content).to_owned();
                    Span::raw(t)
                }));
                Line::from(spans).style(theme.selected())
            } else {
                line
            }
        })
        .collect();
    (
        format!(
            "run {} · {}",
            visible_inline(&d.summary.id),
            crate::runs::verdict_word(&d.summary)
        ),
        out,
        scroll,
        selected,
    )
}

/// An opened comparison: its detail text with the strip table drawn cell by cell, the
/// cursor's cell shown in the selected style and named on a line below the table.
fn comparison_lines(d: &RunDetail, row: usize, cell: usize, scroll: usize, theme: &Theme) -> Drawn {
    let title = format!(
        "comparison {} · {}",
        visible_inline(&d.summary.id),
        d.summary.verdict.label()
    );
    let text = d.to_text();
    let Some(c) = d.comparison.as_ref() else {
        return (
            title,
            text.lines().map(|l| Line::raw(l.to_owned())).collect(),
            scroll,
            None,
        );
    };
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("target ") && l.contains("A baseline"));
    let mut out: Vec<Line> = Vec::new();
    let Some(header) = header else {
        return (
            title,
            lines.iter().map(|l| Line::raw((*l).to_owned())).collect(),
            scroll,
            None,
        );
    };
    out.extend(lines[..=header].iter().map(|l| Line::raw((*l).to_owned())));
    let na = c.members_a.len();
    for (r, strip) in c.strips.iter().enumerate() {
        let mut spans = vec![Span::raw(format!(
            "{} {:<14} ",
            if r == row { SELECTED } else { " " },
            visible_inline(&strip.target)
        ))];
        for (cells, offset) in [(&strip.a, 0), (&strip.b, na)] {
            let mut n = 0;
            for (i, ch) in cells.chars().enumerate() {
                let style = if r == row && offset + i == cell {
                    theme.selected()
                } else {
                    ratatui::style::Style::default()
                };
                spans.push(Span::styled(ch.to_string(), style));
                n += 1;
            }
            spans.push(Span::raw(" ".repeat(25usize.saturating_sub(n))));
        }
        spans.push(Span::styled(strip.flag.clone(), theme.level(Level::Limit)));
        out.push(Line::from(spans));
    }
    let member = if cell < na {
        c.members_a.get(cell)
    } else {
        c.members_b.get(cell - na)
    };
    let target = c.strips.get(row).map(|s| s.target.as_str()).unwrap_or("-");
    out.push(Line::styled(
        match member {
            Some(m) => {
                let outcome = m.outcomes.get(row).map_or("-", String::as_str);
                format!(
                    "{SELECTED} cell {} ({}) · run {} · {}: {outcome} · ⏎ opens its story",
                    visible_inline(&m.slot),
                    visible_inline(&m.arm),
                    visible_inline(&m.run_id),
                    visible_inline(target),
                )
            }
            None => "no member run at the cursor".to_owned(),
        },
        theme.title(true),
    ));
    let rest = header + 1 + c.strips.len();
    out.extend(
        lines[rest.min(lines.len())..]
            .iter()
            .map(|l| Line::raw((*l).to_owned())),
    );
    // The selected strip and the line naming its cell stay on screen.
    let keep = header + 1 + c.strips.len();
    (title, out, scroll, Some(keep.max(header + 1 + row)))
}

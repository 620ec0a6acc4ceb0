//! Drawing (SPEC U2, U4): a pure function of [`App`] — `draw` takes `&App` and only paints.
//! The layout is computed from the terminal size alone ([`layout`]), drops panes in a fixed
//! order on small terminals (charts first, then tables) and never panics, down to 1×1. Every
//! state shown in colour also has a word or symbol, so `NO_COLOR` loses nothing.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::app::{App, CONSOLE_KEYS, Input, Overlay};
use super::evidence::clock;
use super::keys::hints;
use super::limits::Level;
use super::panes::Pane;
use super::panes::worker::{RSS_CHART_ROWS, WORKER_TEXT_ROWS};
use super::theme::{Theme, plain_words, secs};
use crate::canary::command::COMMANDS;

/// Smallest size that shows panes; below it a one-line notice is drawn.
pub const MIN_WIDTH: u16 = 20;
pub const MIN_HEIGHT: u16 = 6;

/// Where everything goes for a terminal of `area`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub panes: Vec<(Pane, Rect)>,
    pub status: Rect,
    pub keys: Rect,
}

/// Computes the layout. Wide terminals (≥ 100 × 25) get the two-column screen of CONSOLE.md;
/// smaller ones stack panes in one column, adding them by priority (processes, targets, perf
/// table, worker charts, evidence) while they fit, then showing them in the fixed screen order.
/// The `focus`ed pane is always shown: when priority leaves it out, it takes the place of the
/// lowest-priority pane shown, so focus never lands on a hidden pane and Tab reaches every one.
pub fn layout(area: Rect, focus: Pane) -> Areas {
    layout_for(area, focus, 3)
}

/// [`layout`] for a PROCESSES pane of `process_rows` rows: it grows with them (on a wide screen
/// up to half the left column, on a stacked one after the tables have their rows) and scrolls
/// beyond.
pub fn layout_for(area: Rect, focus: Pane, process_rows: usize) -> Areas {
    let wanted = u16::try_from(process_rows)
        .unwrap_or(u16::MAX)
        .saturating_add(2);
    let [header, body, status, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let panes = if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        Vec::new()
    } else if body.width >= 100 && body.height >= 22 {
        wide_panes(body, wanted)
    } else {
        stacked_panes(body, focus, wanted)
    };
    Areas {
        header,
        panes,
        status,
        keys,
    }
}

/// The two-column screen of CONSOLE.md (a body of at least 100 × 22): processes over targets
/// on the left, the worker over perf events on the right, evidence across the bottom. A tall
/// screen (a top part of 50 rows or more) gives the worker pane room for its RSS chart.
fn wide_panes(body: Rect, process_rows: u16) -> Vec<(Pane, Rect)> {
    let evidence_h = (body.height / 3).clamp(6, 16);
    let [top, evidence] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(evidence_h)]).areas(body);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(top);
    let [procs, targets] = Layout::vertical([
        Constraint::Length(process_rows.clamp(5, (left.height / 2).max(5))),
        Constraint::Min(0),
    ])
    .areas(left);
    let worker_h = if top.height >= 50 {
        WORKER_TEXT_ROWS + 2 + RSS_CHART_ROWS + 2
    } else {
        WORKER_TEXT_ROWS + 2
    };
    let [worker, perf] =
        Layout::vertical([Constraint::Length(worker_h), Constraint::Min(0)]).areas(right);
    vec![
        (Pane::Processes, procs),
        (Pane::Targets, targets),
        (Pane::Worker, worker),
        (Pane::Perf, perf),
        (Pane::Evidence, evidence),
    ]
}

/// One column for smaller screens. Requests in priority order: a pane's first request must
/// fit whole (its minimum), later ones grow it by what is left. Tables come before charts, so
/// charts (the worker pane) drop first, then tables (CONSOLE.md). The `focus`ed pane takes the
/// place of the lowest-priority pane shown when priority leaves it out; spare rows go to the
/// last shown pane in screen order.
fn stacked_panes(body: Rect, focus: Pane, process_rows: u16) -> Vec<(Pane, Rect)> {
    let requests = [
        (Pane::Processes, 5u16),
        (Pane::Targets, 4),
        (Pane::Targets, 4),
        (Pane::Processes, process_rows.saturating_sub(5)),
        (Pane::Perf, 4),
        (Pane::Worker, 6),
        (Pane::Perf, 4),
        (Pane::Worker, 5),
        (Pane::Evidence, 4),
        (Pane::Evidence, 4),
    ];
    let mut left = body.height;
    let mut chosen: Vec<(Pane, u16)> = Vec::new();
    for (pane, rows) in requests {
        match chosen.iter_mut().find(|(p, _)| *p == pane) {
            Some(slot) => {
                let extra = rows.min(left);
                slot.1 += extra;
                left -= extra;
            }
            None if rows <= left => {
                chosen.push((pane, rows));
                left -= rows;
            }
            None => {}
        }
    }
    if chosen.is_empty() {
        chosen.push((Pane::Processes, body.height));
        left = 0;
    }
    if !chosen.iter().any(|(p, _)| *p == focus)
        && let Some(last) = chosen.last_mut()
    {
        last.0 = focus;
    }
    chosen.sort_by_key(|(p, _)| Pane::ALL.iter().position(|q| q == p));
    if let Some(last) = chosen.last_mut() {
        last.1 += left;
    }
    let mut y = body.y;
    chosen
        .into_iter()
        .map(|(pane, h)| {
            let rect = Rect::new(body.x, y, body.width, h);
            y += h;
            (pane, rect)
        })
        .collect()
}

/// Draws the whole console.
pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let theme = Theme { color: app.color };
    let areas = layout_for(area, app.focus, app.process_rows().len());
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        frame.render_widget(
            Paragraph::new(format!(
                "patchdiff console: terminal {}×{} too small (need {MIN_WIDTH}×{MIN_HEIGHT}) · q quits",
                area.width, area.height
            ))
            .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    draw_header(frame, app, areas.header, &theme);
    if app.panes.runs.open {
        // Over the live panes, which keep updating underneath (Esc returns to them).
        let top = areas.header.y + areas.header.height;
        let body = Rect::new(area.x, top, area.width, areas.status.y.saturating_sub(top));
        app.panes.runs.draw(frame, &theme, body);
    } else {
        for (pane, rect) in &areas.panes {
            draw_pane(frame, app, *pane, *rect);
        }
    }
    draw_status(frame, app, areas.status, &theme);
    draw_keys(frame, app, areas.keys, &theme);
    match &app.overlay {
        Overlay::None => {}
        Overlay::Help { scroll } => {
            draw_overlay(frame, "HELP  (Esc closes)", &help_lines(), *scroll)
        }
        Overlay::Text {
            title,
            lines,
            scroll,
        } => {
            let lines: Vec<Line> = lines.iter().map(|l| Line::from(l.as_str())).collect();
            draw_overlay(frame, &format!("{title}  (Esc closes)"), &lines, *scroll)
        }
    }
}

/// Draws one pane (border, title, content) into `rect`.
pub fn draw_pane(frame: &mut Frame, app: &App, pane: Pane, rect: Rect) {
    app.panes
        .draw(frame, &app.view(pane == app.focus), pane, rect);
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect, theme: &Theme) {
    let what = match (&app.canary, &app.attached) {
        (_, Some(a)) => format!("attached · events {}", a.events.display()),
        (Some(c), None) if c.sealed => format!(
            "canary · run {}{} · sealed: `:new` starts the next run",
            c.run_id,
            verdict(c)
        ),
        (Some(c), None) => format!("canary · run {}{}", c.run_id, verdict(c)),
        (None, None) => "canary · starting".into(),
    };
    let m = &app.monitor;
    let malformed = if m.malformed > 0 {
        format!(" · {} malformed", m.malformed)
    } else {
        String::new()
    };
    let shown = layout_for(
        Rect::new(
            0,
            0,
            app.size.0.max(area.width),
            app.size.1.max(area.height),
        ),
        app.focus,
        app.process_rows().len(),
    )
    .panes
    .len();
    let hidden = Pane::ALL.len().saturating_sub(shown);
    let hint = if hidden > 0 && shown > 0 {
        format!(" · +{hidden} panes: Tab ·")
    } else {
        String::new()
    };
    let text = format!(
        " patchdiff{hint} {what} · one canary · {} events{malformed} · {} ",
        m.ingested,
        clock(app.now_ms)
    );
    frame.render_widget(Paragraph::new(Span::styled(text, theme.title(true))), area);
}

/// ` · PASSED 5/5`, ` · FAILED 4/5 (chess)` or ` · INFRA_ABORT (…)` once the run has a `report`
/// step; empty before.
pub fn verdict(c: &crate::console::runner::CanarySnapshot) -> String {
    let Some(report) = c.steps.iter().rev().find(|s| s.command == "report") else {
        return String::new();
    };
    if c.infra_abort.is_some() {
        return " · INFRA_ABORT (stopped before the agent acted: nothing judged)".to_owned();
    }
    let passing: Vec<&str> = c
        .targets
        .iter()
        .filter(|t| t.status == Some(crate::evaluate::Status::Pass))
        .map(|t| t.name.as_str())
        .collect();
    let failing: Vec<&str> = c
        .targets
        .iter()
        .filter(|t| !passing.contains(&t.name.as_str()))
        .map(|t| t.name.as_str())
        .collect();
    // A failed step says itself which step and why (a killed host, say), in its own words.
    let failed_step = c
        .steps
        .iter()
        .find(|s| !s.ok && s.command != "report")
        .map(|s| {
            let why: String = plain_words(&s.summary).chars().take(80).collect();
            format!("`{}` failed: {why}", s.command)
        });
    if report.ok {
        format!(" · PASSED {}/{}", passing.len(), c.targets.len())
    } else if let Some(step) = failed_step.filter(|_| failing.is_empty()) {
        format!(
            " · FAILED: {step} · {}/{} targets pass",
            passing.len(),
            c.targets.len()
        )
    } else if failing.is_empty() {
        format!(
            " · FAILED: the report did not pass · {}/{} targets pass",
            passing.len(),
            c.targets.len()
        )
    } else {
        format!(
            " · FAILED {}/{} ({})",
            passing.len(),
            c.targets.len(),
            failing.join(", ")
        )
    }
}

fn draw_status(frame: &mut Frame, app: &App, area: Rect, theme: &Theme) {
    let line = if let Some(notice) = &app.notice {
        Line::styled(format!("! {notice}"), theme.level(Level::Limit))
    } else if let Some((name, since)) = &app.running {
        Line::styled(
            format!(
                "⟳ running {name} {}{}",
                secs(Some(app.now_ms - since)),
                if app.queued > 0 {
                    format!(" · {} queued", app.queued)
                } else {
                    String::new()
                }
            ),
            theme.level(Level::High),
        )
    } else if let Some(s) = app.statuses.last() {
        let level = if s.ok { Level::Ok } else { Level::Limit };
        Line::styled(
            format!("{} {}", if s.ok { "✔" } else { "✖" }, s.text),
            theme.level(level),
        )
    } else {
        Line::styled("ready · press ? for help", theme.dim())
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_keys(frame: &mut Frame, app: &App, area: Rect, theme: &Theme) {
    let line = match &app.input {
        Input::Command { text, .. } => {
            let cands = app.completions();
            Line::from(vec![
                Span::raw(format!(":{text}█  ")),
                Span::styled(cands.join(" "), theme.dim()),
            ])
        }
        Input::Search { text } => Line::raw(format!("/{text}█  (Enter searches the log)")),
        Input::Confirm { question, .. } => {
            Line::styled(question.clone(), theme.level(Level::Limit))
        }
        // Only the focused pane's keys (a key another pane means differently is never shown
        // here); the command keys and every pane's keys are in help.
        Input::Normal => {
            let mut spans = Vec::new();
            let keys = if app.panes.runs.open {
                app.panes.runs.keys()
            } else {
                app.focus.keys()
            };
            for (k, what) in keys {
                spans.push(Span::styled(format!("{k} "), theme.title(true)));
                spans.push(Span::raw(format!("{what}  ")));
            }
            spans.push(Span::raw(if app.panes.runs.open {
                ": command  ? help, all keys"
            } else {
                ": command  ? help, all keys  q quit"
            }));
            Line::from(spans)
        }
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The help text, generated from the command table, the console's keys and the panes' keys.
pub fn help_lines() -> Vec<Line<'static>> {
    let mut out = vec![Line::from(
        "Commands (key, or `:` + the usage line; --script runs the same):",
    )];
    for spec in COMMANDS {
        out.push(Line::from(format!(
            "  {:<3} {:<44} {}",
            spec.key.map_or(String::new(), |k| k.to_string()),
            spec.usage(),
            plain_words(spec.help)
        )));
    }
    out.push(Line::from(""));
    out.push(Line::from("Console keys:"));
    for (k, what) in hints(CONSOLE_KEYS) {
        out.push(Line::from(format!("  {k:<16} {what}")));
    }
    for pane in Pane::ALL {
        if pane.keys().is_empty() {
            continue;
        }
        out.push(Line::from(""));
        out.push(Line::from(format!("{} pane (when focused):", pane.title())));
        for (k, what) in pane.keys() {
            out.push(Line::from(format!("  {k:<16} {what}")));
        }
    }
    for (screen, table) in [
        ("list", super::panes::runs::LIST_KEYS),
        ("an opened run", super::panes::runs::RUN_KEYS),
        ("an opened comparison", super::panes::runs::COMPARISON_KEYS),
        (
            "a story or two runs compared",
            super::panes::runs::TEXT_KEYS,
        ),
    ] {
        out.push(Line::from(""));
        out.push(Line::from(format!("RUNS pane (u or :runs), {screen}:")));
        for (k, what) in hints(table) {
            out.push(Line::from(format!("  {k:<16} {what}")));
        }
    }
    out.push(Line::from(""));
    out.push(Line::from(
        "One canary per run: comparing a baseline with a candidate is a separate mode that this \
         configuration keeps off (`runs compare` compares finished runs).",
    ));
    out.push(Line::from(
        "Levels: ● ok (below 75 % of a ceiling) · ▲ high (≥ 75 %) · ✖ LIMIT (at the ceiling or failed)",
    ));
    out.push(Line::from(
        "Processes: ● running · ◐ starting, stopped or no events yet · ○ not running, exited cleanly or retired as expected · ✖ exited or failed",
    ));
    out
}

fn draw_overlay(frame: &mut Frame, title: &str, lines: &[Line], scroll: u16) {
    let area = frame.area();
    let w = area.width.saturating_sub(4).max(1);
    let h = area.height.saturating_sub(2).max(1);
    let rect = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines.to_vec())
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" {title} ")),
            )
            // Long lines (a message's raw text) wrap instead of being cut; scrolling still works.
            .wrap(ratatui::widgets::Wrap { trim: false })
            .scroll((scroll, 0)),
        rect,
    );
}

//! Drawing (SPEC U2, U4): a pure function of [`App`] — `draw` takes `&App` and only paints.
//! The layout is computed from the terminal size alone ([`layout`]), drops panes in a fixed
//! order on small terminals (charts first, then tables) and never panics, down to 1×1. Every
//! state shown in colour also has a word or symbol, so `NO_COLOR` loses nothing.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Clear, Dataset, GraphType, LineGauge, Paragraph, Sparkline, Wrap,
};

use super::app::{App, CONSOLE_KEYS, Input, Overlay, Pane};
use super::evidence::clock;
use super::state::{
    GENERATION_MAX_AGE_MS, Level, MAX_LAUNCHES_PER_MINUTE, OLD_SPACE_BYTES, Phase,
    QUEUE_ACTIVE_MAX, QUEUE_WAITING_MAX, Unit, WorkerState,
};
use crate::canary::command::COMMANDS;

/// Smallest size that shows panes; below it a one-line notice is drawn.
pub const MIN_WIDTH: u16 = 20;
pub const MIN_HEIGHT: u16 = 6;
const MIB: f64 = 1024.0 * 1024.0;

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
        wide_panes(body)
    } else {
        stacked_panes(body, focus)
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
fn wide_panes(body: Rect) -> Vec<(Pane, Rect)> {
    let evidence_h = (body.height / 3).clamp(6, 16);
    let [top, evidence] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(evidence_h)]).areas(body);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(top);
    let [procs, targets] =
        Layout::vertical([Constraint::Length(5), Constraint::Min(0)]).areas(left);
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
fn stacked_panes(body: Rect, focus: Pane) -> Vec<(Pane, Rect)> {
    let requests = [
        (Pane::Processes, 5u16),
        (Pane::Targets, 4),
        (Pane::Targets, 4),
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

/// Styles that collapse to plain text under `NO_COLOR`.
struct Theme {
    color: bool,
}

impl Theme {
    fn level(&self, l: Level) -> Style {
        if !self.color {
            return match l {
                Level::Limit => Style::default().add_modifier(Modifier::BOLD),
                _ => Style::default(),
            };
        }
        Style::default().fg(match l {
            Level::Ok => Color::Green,
            Level::High => Color::Yellow,
            Level::Limit => Color::Red,
        })
    }
    fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }
    fn title(&self, focused: bool) -> Style {
        let s = Style::default().add_modifier(Modifier::BOLD);
        if focused && self.color {
            s.fg(Color::Cyan)
        } else {
            s
        }
    }
    fn selected(&self) -> Style {
        if self.color {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }
}

/// Minutes and seconds (`mm:ss`, or `h:mm:ss` past an hour) of a duration in ms.
pub fn hms(ms: f64) -> String {
    let s = (ms.max(0.0) / 1000.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// A duration in ms as `0.4 s` / `12 ms` / `—`.
pub fn secs(ms: Option<f64>) -> String {
    match ms {
        None => "—".into(),
        Some(ms) if ms < 1.0 => format!("{ms:.2} ms"),
        Some(ms) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{:.1} s", ms / 1000.0),
    }
}

/// Unit squares for small counts: `■■■□□□□□`.
fn squares(n: u64, of: u64) -> String {
    let n = n.min(of) as usize;
    format!("{}{}", "■".repeat(n), "□".repeat(of as usize - n))
}

fn short_sha(s: &str) -> &str {
    s.get(..7).unwrap_or(s)
}

/// Draws the whole console.
pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let theme = Theme { color: app.color };
    let areas = layout(area, app.focus);
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
    for (pane, rect) in &areas.panes {
        draw_pane(frame, app, *pane, *rect);
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
    let theme = Theme { color: app.color };
    let focused = pane == app.focus;
    let block = Block::default().borders(Borders::ALL).title(Span::styled(
        format!(" {}{} ", if focused { "▸ " } else { "" }, pane.title()),
        theme.title(focused),
    ));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let lines = match pane {
        Pane::Processes => processes(app, &theme),
        Pane::Targets => scrolled_targets(targets(app, &theme, inner.width), app, inner.height),
        Pane::Worker => return draw_worker(frame, app, &theme, inner),
        Pane::Perf => perf(app, &theme, inner.height),
        Pane::Evidence => evidence(app, &theme, inner.height),
    };
    frame.render_widget(Paragraph::new(lines), inner);
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
    let shown = layout(
        Rect::new(
            0,
            0,
            app.size.0.max(area.width),
            app.size.1.max(area.height),
        ),
        app.focus,
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
        " patchdiff{hint} {what} · gate 2 closed · {} events{malformed} · {} ",
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
    if report.ok {
        format!(" · PASSED {}/{}", passing.len(), c.targets.len())
    } else if failing.is_empty() {
        format!(
            " · FAILED {}/{} (a step failed)",
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

/// A process state in transition or needing a look (starting, stopped, no events yet). `▲`
/// is kept for one meaning only: a figure past 75 % of its ceiling (so the colour means one thing).
pub const PENDING: &str = "◐";
/// A process or worker that ended as expected (a clean exit, an expected retirement).
pub const GONE: &str = "○";

/// The symbol of a process state: `●` running, `◐` in transition, `✖` failed or exited.
fn state_symbol(level: Level) -> &'static str {
    match level {
        Level::Ok => "●",
        Level::High => PENDING,
        Level::Limit => "✖",
    }
}

/// Whether the worker's last retirement was an expected one (shutdown, age, request limit).
fn last_retirement_expected(app: &App) -> bool {
    app.monitor.retirements.last().is_some_and(|r| r.expected)
}

/// ` (last: lock holder, ceiling 0.25 s)` when the last completed span ran under another
/// ceiling than the one on the label (W7's lock-holder admission); empty otherwise.
fn lock_holder_note(t: &crate::console::state::PhaseTimer, live: bool) -> String {
    if live || t.last_ms.is_none() || t.last_ceiling_ms == t.ceiling_ms {
        return String::new();
    }
    format!(
        " (last: lock holder, ceiling {})",
        secs(Some(t.last_ceiling_ms))
    )
}

/// The attached process's symbol, level and word. We are not its parent, so its exit status
/// is unknown; a process that is gone after its worker retired for `shutdown` ended cleanly
/// (its host closed it) and is not shown as a failure (closing is normal for a host).
fn attached_word(app: &App, pid: u64) -> (&'static str, Level, String) {
    let (level, word) = proc_word(app, Some(pid));
    if level != Level::Limit {
        return (state_symbol(level), level, word);
    }
    let clean = app
        .monitor
        .retirements
        .iter()
        .rev()
        .find(|r| r.pid == Some(pid))
        .is_some_and(|r| r.expected && r.reason == "shutdown");
    if clean {
        (GONE, Level::Ok, "exited (clean shutdown)".into())
    } else {
        (state_symbol(level), level, word)
    }
}

/// A process's state word from its sampled `/proc` state (U1: state and exit status).
fn proc_word(app: &App, pid: Option<u64>) -> (Level, String) {
    match pid.and_then(|p| app.proc_state.get(&p)) {
        None => (Level::Ok, "running".into()),
        Some(s) if s.starts_with("Z ") => (Level::Limit, format!("exited ({})", &s[2..])),
        Some(s) if s == "Z" || s == "X" || s == "gone" => (Level::Limit, "exited".into()),
        Some(s) if s == "T" || s == "t" => (Level::High, "stopped".into()),
        Some(_) => (Level::Ok, "running".into()),
    }
}

/// The agent host's row (A1, U1): pid, uptime, turns, tool calls, the last tool and its state.
fn host_line<'a>(app: &App, h: &crate::canary::host::HostProgress, theme: &Theme) -> Line<'a> {
    let running = matches!(h.state.as_str(), "starting" | "running");
    let (level, word) = if running {
        proc_word(app, h.pid.map(u64::from))
    } else if h.state.starts_with("exit status: 0") {
        (Level::Ok, h.state.clone())
    } else {
        (Level::Limit, h.state.clone())
    };
    let calls: u64 = h.tool_calls.values().sum();
    Line::from(vec![
        Span::styled(format!("{} ", state_symbol(level)), theme.level(level)),
        Span::raw(format!(
            "{:<9} pid {:<7} up {:>8}  {} turns · {calls} calls · last {}  ",
            h.host,
            h.pid.map_or("?".into(), |p| p.to_string()),
            hms(app.now_ms - h.started_ms),
            h.turns,
            h.last_tool
                .as_deref()
                .map_or("-", |t| t.strip_prefix("patchdiff_").unwrap_or(t)),
        )),
        Span::styled(word, theme.level(level)),
    ])
}

/// `rss 62.1 MiB cpu 3%` for a sampled process, empty when it has no sample.
fn usage_text(app: &App, pid: Option<u32>) -> String {
    match pid.and_then(|p| app.proc_usage.get(&u64::from(p))) {
        Some(u) => format!(
            "  rss {:.1} MiB cpu {:.0}%",
            u.rss_bytes as f64 / (1024.0 * 1024.0),
            u.cpu_percent
        ),
        None => String::new(),
    }
}

fn processes<'a>(app: &'a App, theme: &Theme) -> Vec<Line<'a>> {
    let mut out = processes_rows(app, theme);
    let rows = app.process_rows();
    let focused = app.focus == Pane::Processes;
    for (i, line) in out.iter_mut().enumerate() {
        if let Some(row) = rows.get(i) {
            let usage = usage_text(app, row.pid);
            if !usage.is_empty() {
                line.spans.push(Span::styled(usage, theme.dim()));
            }
        }
        if focused && i == app.process_cursor.min(rows.len().saturating_sub(1)) {
            *line = line.clone().style(theme.selected());
        }
    }
    out
}

/// One row per process: the MCP processes (only the attached one when attached), the agent
/// host when there is one, and the worker.
fn processes_rows<'a>(app: &'a App, theme: &Theme) -> Vec<Line<'a>> {
    let mcp_kinds: &[&str] = if app.attached.is_some() {
        &["observed"]
    } else {
        &["full", "observed"]
    };
    let mut out: Vec<Line> = mcp_kinds
        .iter()
        .map(|kind| mcp_process_line(app, kind, theme))
        .collect();
    if let Some(h) = app.canary.as_ref().and_then(|c| c.host.as_ref()) {
        out.push(host_line(app, h, theme));
    }
    out.push(worker_process_line(app, theme));
    out
}

/// An MCP process's row: the canary's child with pid, uptime and state; the attached process
/// (we are not its parent); or one that is not running, with its exit when known.
fn mcp_process_line<'a>(app: &App, kind: &str, theme: &Theme) -> Line<'a> {
    // Attached, the screen shows only the attached process: never the canary's.
    let snap = app
        .canary
        .as_ref()
        .filter(|_| app.attached.is_none())
        .and_then(|c| c.processes.iter().find(|p| p.kind == kind));
    match (snap, app.attached.as_ref()) {
        (Some(p), _) => {
            let (level, word) = proc_word(app, p.pid.map(u64::from));
            Line::from(vec![
                Span::styled(format!("{} ", state_symbol(level)), theme.level(level)),
                Span::raw(format!(
                    "{kind:<9} pid {:<7} up {:>8}  ",
                    p.pid.map_or("?".into(), |p| p.to_string()),
                    hms(app.now_ms - p.started_ms)
                )),
                Span::styled(word, theme.level(level)),
            ])
        }
        (None, Some(_)) => {
            let pid = app.attached_pid();
            let (symbol, level, word) = match pid {
                Some(p) => attached_word(app, p),
                None => (PENDING, Level::High, "no events yet".to_owned()),
            };
            Line::from(vec![
                Span::styled(format!("{symbol} "), theme.level(level)),
                Span::raw(format!(
                    "{kind:<9} pid {:<7} attached  ",
                    pid.map_or("?".into(), |p| p.to_string())
                )),
                Span::styled(word, theme.level(level)),
            ])
        }
        (None, None) => {
            let exit = app
                .canary
                .as_ref()
                .and_then(|c| c.exits.iter().find(|(k, _)| k == kind))
                .map_or("not running".to_owned(), |(_, v)| format!("exited: {v}"));
            Line::from(vec![
                Span::styled("○ ", theme.dim()),
                Span::styled(format!("{kind:<9} {exit}"), theme.dim()),
            ])
        }
    }
}

/// The worker's row: generation, pid, state and mode. A worker that has not started is shown
/// like a process not running, not as "ok"; an expected retirement is not a failure.
fn worker_process_line<'a>(app: &App, theme: &Theme) -> Line<'a> {
    let w = &app.monitor.worker;
    let (level, word) = match &w.state {
        WorkerState::None => {
            return Line::from(vec![
                Span::styled("○ ", theme.dim()),
                Span::styled(format!("{:<9} not started", "worker"), theme.dim()),
            ]);
        }
        WorkerState::Ready => match proc_word(app, w.pid) {
            (l, word) if word == "running" => (l, "ready".to_owned()),
            other => other,
        },
        WorkerState::Starting => (Level::High, "starting".into()),
        // An expected retirement (shutdown, age, request limit) is not a failure.
        WorkerState::Retired(r) if last_retirement_expected(app) => {
            (Level::Ok, format!("retired ({r})"))
        }
        WorkerState::Retired(r) => (Level::Limit, format!("retired ({r})")),
    };
    let symbol = match &w.state {
        WorkerState::Retired(_) if level == Level::Ok => GONE,
        _ => state_symbol(level),
    };
    Line::from(vec![
        Span::styled(format!("{symbol} "), theme.level(level)),
        Span::raw(format!(
            "{:<9} gen {:<3} pid {:<7} ",
            "worker",
            w.generation.map_or("-".into(), |g| g.to_string()),
            w.pid.map_or("-".into(), |p| p.to_string()),
        )),
        Span::styled(word, theme.level(level)),
        Span::raw(format!(" {}", w.mode.as_deref().unwrap_or(""))),
    ])
}

/// The targets pane's lines fitted to `height` rows: the header stays, and the rows scroll so
/// the selected target is always on screen (at 40×12 the pane shows two or three targets; j/k
/// reach every one). Trailing lines (a store error) stay below the rows.
fn scrolled_targets<'a>(mut lines: Vec<Line<'a>>, app: &App, height: u16) -> Vec<Line<'a>> {
    let height = height as usize;
    let rows = app.target_names().len().min(lines.len().saturating_sub(1));
    if lines.len() <= height || height < 2 {
        return lines;
    }
    let extra = lines.len() - 1 - rows;
    let visible = height.saturating_sub(1 + extra).max(1);
    if rows <= visible {
        return lines;
    }
    let cursor = app.target_cursor.min(rows - 1);
    let first = cursor.saturating_sub(visible - 1);
    let header = lines.remove(0);
    let mut out = vec![header];
    out.extend(lines.drain(first..first + visible));
    out.extend(lines.drain(rows - visible..));
    out
}

fn targets<'a>(app: &'a App, theme: &Theme, width: u16) -> Vec<Line<'a>> {
    let mut out = vec![Line::styled(
        format!(
            "{:<12} {:>3} {:>4} {:>7}  {:<15} {:<9} {}",
            "target", "ver", "rev", "acc/rej", "hash", "export", "evaluate"
        ),
        theme.dim(),
    )];
    // Attached, the targets are the attached store's only (never the canary's).
    let rows = app
        .canary
        .as_ref()
        .filter(|_| app.attached.is_none())
        .map(|c| c.targets.as_slice())
        .unwrap_or(&[]);
    let focused = app.focus == Pane::Targets;
    for (index, name) in app.target_names().iter().enumerate() {
        let row = rows.iter().find(|r| &r.name == name);
        let live = app.store_targets.iter().find(|s| &s.name == name);
        let Some(figures) = live.map(Figures::from).or(row.map(Figures::from)) else {
            continue;
        };
        let mut line = target_line(name, &figures, row, theme, width);
        if focused && index == app.target_cursor {
            line = line.style(theme.selected());
        }
        out.push(line);
    }
    if let Some(e) = &app.store_error {
        out.push(Line::styled(
            format!("store: {e}"),
            theme.level(Level::High),
        ));
    }
    out
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

/// The WORKER pane (W5–W10), drawn row by row into `area`: the generation line, the queue with
/// a `Sparkline` of its depth, a `LineGauge` per phase timer against its ceiling (below 9 rows
/// the four timers share one line, each keeping its word), RSS with a `LineGauge` against the
/// limit and a `Sparkline` of its history, launches and retirements; on a pane with
/// [`RSS_CHART_ROWS`] rows to spare, a `Chart` of RSS over the samples kept.
fn draw_worker(frame: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // Row `i` of the pane (empty below its bottom: nothing is drawn there).
    let row =
        |i: u16| Rect::new(area.x, area.y.saturating_add(i), area.width, 1).intersection(area);
    frame.render_widget(worker_generation(app, theme), row(0));
    draw_worker_queue(frame, &app.monitor, theme, row(1));
    let phase_rows = if area.height < WORKER_TEXT_ROWS {
        frame.render_widget(worker_phases_line(app, theme), row(2));
        1
    } else {
        for (i, phase) in (2..).zip(Phase::ALL) {
            draw_worker_phase(frame, app, theme, phase, area.width, row(i));
        }
        4
    };
    draw_worker_rss(frame, app, theme, row(2 + phase_rows));
    frame.render_widget(worker_launches(app, theme), row(3 + phase_rows));
    frame.render_widget(worker_retirements(&app.monitor, theme), row(4 + phase_rows));
    let used = 5 + phase_rows;
    if area.height >= used + RSS_CHART_ROWS {
        let chart = Rect::new(area.x, area.y + used, area.width, area.height - used);
        draw_rss_chart(frame, &app.monitor, theme, chart);
    }
}

/// Rows a worker pane needs beyond its text rows to show the RSS chart.
pub const RSS_CHART_ROWS: u16 = 6;
/// Text rows of a worker pane tall enough for one row per phase timer.
const WORKER_TEXT_ROWS: u16 = 9;

/// Renders `before`, then `widget` in the next `width` cells, then `after`, on the one-row
/// `area` (each part cut where the row ends).
fn render_in_row(
    frame: &mut Frame,
    area: Rect,
    before: Line,
    widget: impl ratatui::widgets::Widget,
    width: u16,
    after: Line,
) {
    let (first, rest) = split_row(area, before.width() as u16);
    let (middle, last) = split_row(rest, width);
    frame.render_widget(before, first);
    frame.render_widget(widget, middle);
    frame.render_widget(after, last);
}

/// `area` cut after `width` cells (at most all of it): the part before and the rest.
fn split_row(area: Rect, width: u16) -> (Rect, Rect) {
    let width = width.min(area.width);
    let rest = Rect {
        x: area.x + width,
        width: area.width - width,
        ..area
    };
    (Rect { width, ..area }, rest)
}

/// Bars for the one-row sparklines: a zero is the lowest bar, not a blank, so an idle queue
/// still shows its history.
const SPARK_BARS: symbols::bar::Set = symbols::bar::Set {
    empty: symbols::bar::ONE_EIGHTH,
    ..symbols::bar::NINE_LEVELS
};

/// A one-row sparkline of the last `width` of `values`, a full bar at `max`.
fn sparkline<'a>(values: &[u64], max: u64, width: u16, style: Style) -> Sparkline<'a> {
    let start = values.len().saturating_sub(width as usize);
    Sparkline::default()
        .data(values[start..].to_vec())
        .max(max.max(1))
        .bar_set(SPARK_BARS)
        .style(style)
}

/// A gauge of `ratio` (clamped to 0..=1) after `label`: thick where filled, thin where not, so
/// it reads the same without colour.
fn line_gauge<'a>(label: Line<'a>, ratio: f64, theme: &Theme, level: Level) -> LineGauge<'a> {
    let ratio = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    LineGauge::default()
        .label(label)
        .ratio(ratio)
        .filled_symbol(symbols::line::THICK_HORIZONTAL)
        .unfilled_symbol(symbols::line::HORIZONTAL)
        .filled_style(theme.level(level))
        .unfilled_style(theme.dim())
}

/// `gen G · pid P · state · age A / 60 min · ready in R` (W10).
fn worker_generation<'a>(app: &'a App, theme: &Theme) -> Line<'a> {
    let now = app.now_ms;
    let w = &app.monitor.worker;
    let age = w.age_ms(now);
    let age_level = age.map_or(Level::Ok, |a| Level::of(a, GENERATION_MAX_AGE_MS));
    Line::from(vec![
        Span::raw(format!(
            "gen {} · pid {} · {} · age ",
            w.generation.map_or("-".into(), |g| g.to_string()),
            w.pid.map_or("-".into(), |p| p.to_string()),
            w.state.word(),
        )),
        Span::styled(
            format!(
                "{} / {}",
                age.map_or("--:--".into(), hms),
                hms(GENERATION_MAX_AGE_MS)
            ),
            theme.level(age_level),
        ),
        Span::raw(
            w.ready_after_ms
                .map_or(String::new(), |r| format!(" · ready in {}", secs(Some(r)))),
        ),
    ])
}

/// Cells of the queue-depth sparkline.
const QUEUE_SPARK_WIDTH: u16 = 12;

/// The queue row: active/waiting squares, saturation remembered (peak, full, expired) and a
/// sparkline of the waiting depth against the 8 allowed (W5).
fn draw_worker_queue(
    frame: &mut Frame,
    m: &crate::console::state::Monitor,
    theme: &Theme,
    row: Rect,
) {
    let waiting_level = Level::of(m.queue_waiting as f64, QUEUE_WAITING_MAX as f64);
    let saturated = if m.queue_full + m.queue_expired > 0 {
        theme.level(Level::High)
    } else {
        theme.level(Level::Ok)
    };
    let before = Line::from(vec![
        Span::raw(format!(
            "queue   active {} {}/{}   waiting {} {}/{} ",
            squares(m.queue_active, QUEUE_ACTIVE_MAX),
            m.queue_active,
            QUEUE_ACTIVE_MAX,
            squares(m.queue_waiting, QUEUE_WAITING_MAX),
            m.queue_waiting,
            QUEUE_WAITING_MAX
        )),
        Span::styled(waiting_level.word(), theme.level(waiting_level)),
        // Saturation is remembered after the queue drains.
        Span::styled(
            format!(
                "  peak {}/{QUEUE_WAITING_MAX} · full {} · expired {} ",
                m.queue_peak_waiting, m.queue_full, m.queue_expired,
            ),
            saturated,
        ),
    ]);
    let depths: Vec<u64> = m.queue_depths.iter().copied().collect();
    let spark = sparkline(&depths, QUEUE_WAITING_MAX, QUEUE_SPARK_WIDTH, saturated);
    render_in_row(
        frame,
        row,
        before,
        spark,
        QUEUE_SPARK_WIDTH,
        Line::default(),
    );
}

/// All four phase timers on one line, each with its word (a short pane, W6, W7).
fn worker_phases_line<'a>(app: &App, theme: &Theme) -> Line<'a> {
    let (m, now) = (&app.monitor, app.now_ms);
    let mut spans = vec![Span::raw("phases ")];
    for phase in Phase::ALL {
        let t = m.phase(phase);
        let (shown, live) = t.shown_ms(now);
        let level = t.level(now);
        spans.push(Span::raw(format!(
            "{} {}{} ",
            phase.label(),
            if live { "▶" } else { "" },
            secs(shown)
        )));
        spans.push(Span::styled(
            format!("{} ", level.symbol()),
            theme.level(level),
        ));
    }
    Line::from(spans)
}

/// One phase timer's row: its time, a gauge against its ceiling, the ceiling and its word
/// (W6, W7). The gauge is 12 cells wide on a pane of 70 or more, else 6.
fn draw_worker_phase(
    frame: &mut Frame,
    app: &App,
    theme: &Theme,
    phase: Phase,
    width: u16,
    row: Rect,
) {
    let (m, now) = (&app.monitor, app.now_ms);
    let gauge_w = if width >= 70 { 12 } else { 6 };
    let t = m.phase(phase);
    let (shown, live) = t.shown_ms(now);
    let level = t.level(now);
    let failed = !live && shown.is_some() && !t.last_ok;
    let label = Line::raw(format!(
        "{}{:<10} {} {:>8}",
        if phase == Phase::Admission {
            "phases  "
        } else {
            "        "
        },
        phase.label(),
        if live { "▶" } else { "·" },
        secs(shown),
    ));
    let label_w = label.width() as u16;
    let gauge = line_gauge(label, shown.unwrap_or(0.0) / t.ceiling_ms, theme, level);
    let after = Line::from(vec![
        Span::raw(format!(" {:>5} ", secs(Some(t.ceiling_ms)))),
        Span::styled(level.word(), theme.level(level)),
        Span::styled(
            if failed { " (last failed)" } else { "" },
            theme.level(Level::High),
        ),
        Span::styled(lock_holder_note(t, live), theme.dim()),
    ]);
    render_in_row(
        frame,
        row,
        Line::default(),
        gauge,
        label_w + 1 + gauge_w,
        after,
    );
}

/// Why the worker is gone (a retirement, or its process exited), or `None` while it runs.
fn worker_gone(app: &App) -> Option<String> {
    let m = &app.monitor;
    match &m.worker.state {
        WorkerState::Retired(r) => Some(format!("worker gone ({r})")),
        _ => m
            .worker
            .pid
            .and_then(|p| app.proc_state.get(&p))
            .filter(|s| s.as_str() == "gone" || s.starts_with('Z'))
            .map(|_| "worker gone (process exited)".to_owned()),
    }
}

/// Cells of the RSS gauge.
const RSS_GAUGE_WIDTH: u16 = 12;

/// The RSS row: current value with a gauge against the 1 GiB limit (high from 768 MiB, 75 %),
/// a sparkline of the samples kept, the limits and the level word, or that the worker is gone
/// (after `stop` or a retirement: said rather than a frozen value, W9).
fn draw_worker_rss(frame: &mut Frame, app: &App, theme: &Theme, row: Rect) {
    let m = &app.monitor;
    let gone = worker_gone(app);
    let rss = if gone.is_some() { None } else { m.rss_now() };
    let rss_level = rss.map_or(Level::Ok, |r| Level::of(r as f64, m.rss_limit as f64));
    let label = Line::raw(format!(
        "RSS {:>8}",
        rss.map_or("—".into(), |r| format!("{:.0} MiB", r as f64 / MIB))
    ));
    let gauge_w = label.width() as u16 + 1 + RSS_GAUGE_WIDTH;
    let gauge = line_gauge(
        label,
        rss.map_or(0.0, |r| r as f64 / m.rss_limit.max(1) as f64),
        theme,
        rss_level,
    );
    let after = Line::from(vec![
        Span::raw(format!(
            " limit {:.0} · old space {:.0} MiB ",
            m.rss_limit as f64 / MIB,
            OLD_SPACE_BYTES as f64 / MIB
        )),
        Span::styled(
            gone.clone().unwrap_or_else(|| rss_level.word().to_owned()),
            theme.level(if gone.is_some() {
                Level::High
            } else {
                rss_level
            }),
        ),
    ]);
    // The sparkline takes what the row has left, 4 to 40 cells, and no more than the samples.
    let values: Vec<u64> = m.rss.iter().map(|&(_, b)| b).collect();
    let room = row.width.saturating_sub(gauge_w + 1 + after.width() as u16);
    let spark_w = room.clamp(4, 40).min(values.len() as u16);
    let spark = sparkline(&values, m.rss_limit, spark_w, theme.level(rss_level));
    render_in_row(frame, row, Line::default(), gauge, gauge_w, Line::default());
    let (_, rest) = split_row(row, gauge_w);
    render_in_row(frame, rest, Line::raw(" "), spark, spark_w, after);
}

/// RSS over the samples kept (seconds since the oldest, MiB) on a 0 to 1 GiB scale (the limit,
/// W9), with the 768 MiB old-space flag as a dim line, on the rows a tall worker pane has to
/// spare.
fn draw_rss_chart(
    frame: &mut Frame,
    m: &crate::console::state::Monitor,
    theme: &Theme,
    area: Rect,
) {
    let first = m.rss.iter().next().map_or(0.0, |&(t, _)| t);
    let points: Vec<(f64, f64)> = m
        .rss
        .iter()
        .map(|&(t, b)| ((t - first) / 1000.0, b as f64 / MIB))
        .collect();
    let span = points.last().map_or(1.0, |p| p.0.max(1.0));
    let limit = m.rss_limit as f64 / MIB;
    let old_space = OLD_SPACE_BYTES as f64 / MIB;
    let old_space_line = [(0.0, old_space), (span, old_space)];
    let level = m
        .rss_now()
        .map_or(Level::Ok, |r| Level::of(r as f64, m.rss_limit as f64));
    let chart = Chart::new(vec![
        Dataset::default()
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.dim())
            .data(&old_space_line),
        Dataset::default()
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.level(level))
            .data(&points),
    ])
    .legend_position(None)
    .x_axis(
        Axis::default()
            .bounds([0.0, span])
            .labels([Line::raw("0 s"), Line::raw(format!("{span:.0} s"))]),
    )
    // Labels are spaced evenly: 0, half the limit, the limit.
    .y_axis(Axis::default().bounds([0.0, limit]).labels([
        Line::raw("0 MiB"),
        Line::raw(format!("{:.0}", limit / 2.0)),
        Line::raw(format!("{limit:.0} MiB")),
    ]));
    frame.render_widget(chart, area);
}

/// Launches in the rolling minute against the three allowed (W10).
fn worker_launches<'a>(app: &'a App, theme: &Theme) -> Line<'a> {
    let (m, now) = (&app.monitor, app.now_ms);
    let launches = m.launches_in_window(now);
    let l_level = Level::of(launches as f64, MAX_LAUNCHES_PER_MINUTE as f64);
    Line::from(vec![
        Span::raw(format!(
            "launches this minute {launches}/{MAX_LAUNCHES_PER_MINUTE} "
        )),
        Span::styled(l_level.word(), theme.level(l_level)),
    ])
}

/// The last three retirements, with pid and generation, unexpected ones marked.
fn worker_retirements<'a>(m: &crate::console::state::Monitor, theme: &Theme) -> Line<'a> {
    let retired: Vec<String> = m
        .retirements
        .iter()
        .rev()
        .take(3)
        .map(|r| {
            format!(
                "{}{}gen {} {}{}",
                if r.expected { "" } else { "✖ " },
                r.pid.map_or(String::new(), |p| format!("pid {p} ")),
                r.generation.map_or("?".into(), |g| g.to_string()),
                r.reason,
                r.requests.map_or(String::new(), |n| format!(" ({n} req)"))
            )
        })
        .collect();
    let any_bad = m.retirements.iter().rev().take(3).any(|r| !r.expected);
    Line::from(vec![
        Span::raw("retired "),
        Span::styled(
            if retired.is_empty() {
                "none".to_owned()
            } else {
                retired.join(" · ")
            },
            theme.level(if any_bad { Level::Limit } else { Level::Ok }),
        ),
    ])
}

/// The PERF EVENTS pane: the per-event percentile table (from the selected row) and, from 12
/// rows, the live tail below it.
fn perf<'a>(app: &'a App, theme: &Theme, height: u16) -> Vec<Line<'a>> {
    let mut out = vec![Line::styled(
        format!(
            "{:<22} {:>7} {:>9} {:>9} {:>9} {:>6}",
            "event", "count", "p50", "p95", "p99", "failed"
        ),
        theme.dim(),
    )];
    let table_rows = if height >= 12 {
        (height as usize / 2).saturating_sub(1)
    } else {
        height as usize
    };
    for (i, r) in app
        .monitor
        .stat_rows
        .iter()
        .enumerate()
        .skip(app.perf_scroll)
        .take(table_rows)
    {
        let mut line = perf_row(app, r, theme);
        if app.focus == Pane::Perf && i == app.perf_scroll {
            line = line.style(theme.selected());
        }
        out.push(line);
    }
    if height >= 12 {
        perf_tail(&mut out, app, theme, height);
    }
    out
}

/// One event kind's row: count, p50/p95/p99 in its unit, failures, whether the tail hides it.
fn perf_row<'a>(app: &App, r: &crate::console::state::StatRow, theme: &Theme) -> Line<'a> {
    let level = if r.failed > 0 { Level::High } else { Level::Ok };
    let value = |v: f64| match r.unit {
        Unit::Ms => secs(Some(v)),
        Unit::Bytes => format!("{:.1} MiB", v / MIB),
        Unit::Count => format!("{v:.0}"),
    };
    let hidden = app.perf_hidden.contains(&r.name);
    Line::from(vec![
        Span::raw(format!(
            "{:<22} {:>7} {:>9} {:>9} {:>9} ",
            r.name.chars().take(22).collect::<String>(),
            r.count,
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
fn perf_tail<'a>(out: &mut Vec<Line<'a>>, app: &'a App, theme: &Theme, height: u16) {
    let hidden = if app.perf_hidden.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = app.perf_hidden.iter().map(String::as_str).collect();
        format!(" (hidden: {})", names.join(", "))
    };
    out.push(Line::styled(
        format!("live tail, by time{hidden}"),
        theme.dim(),
    ));
    let room = (height as usize).saturating_sub(out.len());
    // Sources interleave: show the newest `room` lines in timestamp order.
    let mut shown: Vec<&crate::console::state::TailLine> = app
        .monitor
        .tail
        .iter()
        .filter(|l| !app.perf_hidden.contains(&l.name))
        .collect();
    shown.sort_by(|a, b| a.ts_ms.total_cmp(&b.ts_ms));
    let start = shown.len().saturating_sub(room);
    for l in shown.into_iter().skip(start) {
        let level = if l.ok { Level::Ok } else { Level::High };
        out.push(Line::from(vec![
            Span::raw(format!("{} ", clock(l.ts_ms))),
            Span::styled(if l.ok { "✔ " } else { "✖ " }, theme.level(level)),
            Span::raw(format!(
                "{:<8} {:<20} {:>9} {}",
                l.source,
                l.name,
                secs(Some(l.duration_ms)),
                l.detail
            )),
        ]));
    }
}

fn evidence<'a>(app: &'a App, theme: &Theme, height: u16) -> Vec<Line<'a>> {
    let ev = &app.evidence;
    let mut out = vec![Line::styled(
        format!(
            "{} · {} · filter {} · {} KiB{}",
            ev.label(),
            if ev.follow { "following" } else { "paused" },
            ev.tool_filter.as_deref().unwrap_or("none"),
            ev.file_len / 1024,
            if ev.status.is_empty() {
                String::new()
            } else {
                format!(" · {}", ev.status)
            }
        ),
        theme.dim(),
    )];
    let room = (height as usize).saturating_sub(1);
    let start = if ev.selected >= room {
        ev.selected + 1 - room
    } else {
        0
    };
    for (i, s) in ev.summaries.iter().enumerate().skip(start).take(room) {
        if i == ev.selected && app.focus == Pane::Evidence {
            out.push(Line::styled(format!("▶ {s}"), theme.selected()));
        } else if ev.is_match(i) {
            // A line holding the search text.
            out.push(Line::styled(format!("≡ {s}"), theme.level(Level::High)));
        } else {
            out.push(Line::raw(format!("  {s}")));
        }
    }
    out
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
        Input::Normal => {
            let mut spans = Vec::new();
            for (k, what) in app.focus.keys() {
                spans.push(Span::styled(format!("{k} "), theme.title(true)));
                spans.push(Span::raw(format!("{what}  ")));
            }
            for spec in COMMANDS {
                if let Some(k) = spec.key {
                    spans.push(Span::styled(format!("{k} "), theme.title(false)));
                    spans.push(Span::raw(format!("{}  ", spec.name)));
                }
            }
            spans.push(Span::raw(": command  ? help  q quit"));
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
            spec.help
        )));
    }
    out.push(Line::from(""));
    out.push(Line::from("Console keys:"));
    for (k, what) in CONSOLE_KEYS {
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
    out.push(Line::from(""));
    out.push(Line::from(
        "gate 2 closed: a run is one canary (C7); comparing a baseline with a candidate is a \
         separate mode, closed in this configuration (`runs compare` compares finished runs).",
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

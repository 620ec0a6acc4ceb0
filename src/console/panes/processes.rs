//! The PROCESSES pane (SPEC U1): one row per process — the MCP processes the console launched
//! (only the attached one when attached), the agent host when one ran, the worker — with pid,
//! uptime, state and sampled RSS and CPU; `R`/`X` restart or stop a process the console
//! launched, `K` kills the selected row's process after a y/N question, `E` shows its stderr,
//! Enter the step log.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::text::{Line, Span};

use super::view::{Confirmed, Effect, View};
use crate::canary::command::{Command, ProcessKind};
use crate::console::keys::{Binding, DOWN, UP, lookup, step_cursor};
use crate::console::limits::Level;
use crate::console::state::WorkerState;
use crate::console::theme::{GONE, PENDING, Theme, hms, mark, state_symbol};

/// How much of a process's stderr log the `E` view shows (its last lines).
pub const STDERR_TAIL_LINES: usize = 200;
/// Status lines (step outcomes, notices) kept, as the step log says.
pub const STEP_LOG_LINES: usize = super::view::STATUS_CAPACITY;

/// What a key on the pane does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    Restart,
    Stop,
    Kill,
    Stderr,
    StepLog,
}

/// The pane's keys: the one table the handler matches and the bar and help show.
pub const KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "select", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(&[KeyCode::Char('R')], "R", "restart", Action::Restart),
    Binding::new(&[KeyCode::Char('X')], "X", "stop", Action::Stop),
    Binding::new(&[KeyCode::Char('K')], "K", "kill…", Action::Kill),
    Binding::new(&[KeyCode::Char('E')], "E", "stderr", Action::Stderr),
    Binding::new(&[KeyCode::Enter], "⏎", "step log", Action::StepLog),
];

/// One row of the processes pane, as the operator selects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    /// `full`, `observed`, the agent host's name, `worker`, `host-observed` (the observed
    /// process a host started), `worker gen G (source)`, or a process's own name.
    pub label: String,
    pub pid: Option<u32>,
    /// The parent's pid, from the process table, when it was read.
    pub parent: Option<u32>,
    /// The file holding the process's stderr, if the run keeps one.
    pub stderr: Option<std::path::PathBuf>,
    pub kind: RowKind,
}

/// Which kind of process a row shows (it decides the row's figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// An MCP process the console launched (or the attached one).
    Mcp,
    /// The agent host.
    Host,
    /// The worker the WORKER pane shows.
    Worker,
    /// Any other process found: a host's descendant, another source's worker.
    Found,
}

/// The pane's own state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessesPane {
    /// The selected row.
    pub cursor: usize,
}

/// The processes pane's rows, in order: the MCP processes, the agent host (when one ran),
/// the worker.
pub fn rows(view: &View) -> Vec<ProcessRow> {
    let run = view.canary.map(|c| c.run_path.clone());
    let file = |name: String| run.as_ref().map(|r| r.join(name));
    let mut rows = Vec::new();
    let kinds: &[&str] = if view.attached.is_some() {
        &["observed"]
    } else {
        &["full", "observed"]
    };
    for kind in kinds {
        let pid = match view.attached {
            Some(_) => attached_pid(view).and_then(|p| u32::try_from(p).ok()),
            None => view
                .canary
                .and_then(|c| c.processes.iter().find(|p| p.kind == *kind))
                .and_then(|p| p.pid),
        };
        rows.push(ProcessRow {
            label: (*kind).to_owned(),
            pid,
            parent: parent_of(view, pid),
            stderr: file(format!("{kind}.stderr.log")),
            kind: RowKind::Mcp,
        });
    }
    if let Some(h) = view.canary.and_then(|c| c.host.as_ref()) {
        rows.push(ProcessRow {
            label: h.host.clone(),
            pid: h.pid,
            parent: parent_of(view, h.pid),
            stderr: file(format!("agent.{}.stderr.log", h.host)),
            kind: RowKind::Host,
        });
    }
    let worker_pid = view.monitor.worker.pid.and_then(|p| u32::try_from(p).ok());
    rows.push(ProcessRow {
        label: "worker".into(),
        pid: worker_pid,
        parent: parent_of(view, worker_pid),
        stderr: file("worker.observed.stderr.log".into()),
        kind: RowKind::Worker,
    });
    found_rows(view, &mut rows, &file);
    rows
}

/// The rows the process table and the perf events add: the host's descendants (the observed
/// process it started — the pid recording the `host` source's events —, its worker, anything
/// else), then any source's worker not shown yet. One row per pid.
fn found_rows(
    view: &View,
    rows: &mut Vec<ProcessRow>,
    file: &dyn Fn(String) -> Option<std::path::PathBuf>,
) {
    use crate::canary::names::HOST_OBSERVED;
    let host_observed = view.monitor.recorders.get("host").copied();
    let worker_of = |pid: u64| {
        view.monitor
            .workers
            .iter()
            .find(|(_, (_, p))| *p == Some(pid))
            .map(|(source, (generation, _))| (source.clone(), *generation))
    };
    let mut found: Vec<u64> = view.procs.host_tree.clone();
    found.extend(host_observed.filter(|p| !found.contains(p)));
    found.extend(view.monitor.workers.values().filter_map(|(_, p)| *p));
    for pid in found {
        let Ok(pid32) = u32::try_from(pid) else {
            continue;
        };
        if rows.iter().any(|r| r.pid == Some(pid32)) {
            continue;
        }
        let label = if Some(pid) == host_observed {
            HOST_OBSERVED.to_owned()
        } else if let Some((source, generation)) = worker_of(pid) {
            let source = if source == "host" {
                HOST_OBSERVED
            } else {
                source.as_str()
            };
            format!(
                "worker gen {} ({source})",
                generation.map_or("?".into(), |g| g.to_string())
            )
        } else {
            view.procs
                .info
                .get(&pid)
                .map_or_else(|| "process".to_owned(), |i| i.comm.clone())
        };
        let stderr = if Some(pid) == host_observed {
            file(format!("{HOST_OBSERVED}.stderr.log"))
        } else {
            None
        };
        rows.push(ProcessRow {
            label,
            pid: Some(pid32),
            parent: parent_of(view, Some(pid32)),
            stderr,
            kind: RowKind::Found,
        });
    }
}

/// `pid`'s parent as the process table last said.
fn parent_of(view: &View, pid: Option<u32>) -> Option<u32> {
    view.procs.info.get(&u64::from(pid?)).map(|i| i.ppid)
}

/// In attach mode: the observed process's pid, from its events' `pid` field.
pub fn attached_pid(view: &View) -> Option<u64> {
    view.attached?;
    view.monitor.recorders.get("observed").copied()
}

impl ProcessesPane {
    /// A key on the focused pane: select, restart, stop, kill (confirmed), stderr, step log.
    pub fn on_key(&mut self, view: &View, key: &KeyEvent) -> Option<Effect> {
        let action = lookup(KEYS, key)?;
        let rows = rows(view);
        let last = rows.len().saturating_sub(1);
        let row = rows.get(self.cursor.min(last))?.clone();
        let kind = match row.label.as_str() {
            "full" => Some(ProcessKind::Full),
            "observed" => Some(ProcessKind::Observed),
            _ => None,
        };
        Some(match action {
            Action::Up | Action::Down => {
                self.cursor = step_cursor(self.cursor.min(last), action == Action::Down, last);
                Effect::Handled
            }
            Action::Restart => relaunch_or_stop(view, &row, kind, true),
            Action::Stop => relaunch_or_stop(view, &row, kind, false),
            Action::Kill => confirm_kill(&row, kind),
            Action::Stderr => Effect::Overlay {
                title: format!("{} stderr (last {STDERR_TAIL_LINES} lines)", row.label),
                lines: stderr_tail(row.stderr.as_deref()),
            },
            Action::StepLog => step_log(view),
        })
    }

    /// The pane's lines fitted to `height` rows and `width` columns: one per process, the rows
    /// scrolled so the selected one is always shown (the cursor never rests on a row off
    /// screen), marked `▶` when focused. Pid, parent, uptime, state, RSS and CPU are columns
    /// every row shows; the label column takes what is left (cut with `…`, at least
    /// `MIN_LABEL` characters), and what else a row tells (a host's turns, a worker's mode)
    /// comes last. A pane too narrow for them all leaves out CPU, then RSS, parent and uptime
    /// (see `Widths::fit`): label, pid and state are always shown (U1).
    pub fn lines<'a>(&self, view: &View<'a>, width: u16, height: u16) -> Vec<Line<'a>> {
        let theme = &view.theme;
        let rows = rows(view);
        let cursor = self.cursor.min(rows.len().saturating_sub(1));
        let height = usize::from(height).max(1);
        let first = cursor.saturating_sub(height - 1);
        // Widths from every row, so the columns stay put as the pane scrolls.
        let cells: Vec<Cells> = rows.iter().map(|row| row_cells(view, row)).collect();
        let widths = Widths::fit(&cells, usize::from(width));
        cells
            .into_iter()
            .enumerate()
            .skip(first)
            .take(height)
            .map(|(i, c)| {
                mark(
                    cells_line(c, &widths, usize::from(width), theme),
                    view.focused && i == cursor,
                    theme,
                )
            })
            .collect()
    }
}

/// `R` (`restart`) or `X` (stop) on a process the console launched (`kind`), said before it
/// is done; any other row is refused (it can only be killed).
fn relaunch_or_stop(
    view: &View,
    row: &ProcessRow,
    kind: Option<ProcessKind>,
    restart: bool,
) -> Effect {
    let Some(kind) = kind.filter(|_| view.attached.is_none()) else {
        return Effect::Status(
            false,
            format!(
                "{} is not a process the console launched; it can only be killed (K)",
                row.label
            ),
        );
    };
    let status = format!(
        "{} the {} process only (pid {})…",
        if restart { "restarting" } else { "stopping" },
        kind.as_str(),
        row.pid.map_or("-".into(), |p| p.to_string())
    );
    let command = if restart {
        Command::Launch { which: Some(kind) }
    } else {
        Command::Stop { which: Some(kind) }
    };
    Effect::Command(command, Some(status))
}

/// `K`: asks y/N before sending SIGKILL to the row's process (an agent host: its whole
/// process group).
fn confirm_kill(row: &ProcessRow, kind: Option<ProcessKind>) -> Effect {
    let Some(pid) = row.pid else {
        return Effect::Status(false, format!("{} is not running", row.label));
    };
    // Only the agent host is killed with its whole group; any other row is the one process.
    let group = kind.is_none() && row.kind == RowKind::Host;
    Effect::Confirm {
        question: format!(
            "kill {} (pid {pid}{}) with SIGKILL? y/N",
            row.label,
            if group {
                ", its whole process group"
            } else {
                ""
            }
        ),
        action: Confirmed::Kill {
            label: row.label.clone(),
            pid,
            group,
        },
    }
}

/// Enter: the step log in an overlay.
fn step_log(view: &View) -> Effect {
    let mut lines: Vec<String> = view
        .statuses
        .iter()
        .map(|s| format!("{} {}", if s.ok { "✔" } else { "✖" }, s.text))
        .collect();
    if lines.is_empty() {
        lines.push("no steps run yet".into());
    }
    Effect::Overlay {
        title: format!("step log (last {STEP_LOG_LINES})"),
        lines,
    }
}

/// The last [`STDERR_TAIL_LINES`] lines of a process's stderr file, or why there are none.
fn stderr_tail(path: Option<&std::path::Path>) -> Vec<String> {
    let Some(path) = path else {
        return vec!["no run directory".to_owned()];
    };
    match std::fs::read(path) {
        Ok(bytes) if bytes.is_empty() => vec![format!("{} is empty", path.display())],
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let skip = all.len().saturating_sub(STDERR_TAIL_LINES);
            all[skip..].iter().map(|l| (*l).to_owned()).collect()
        }
        Err(e) => vec![format!("{}: {e}", path.display())],
    }
}

/// Whether the worker's last retirement was an expected one (shutdown, age, request limit).
fn last_retirement_expected(view: &View) -> bool {
    view.monitor.retirements.last().is_some_and(|r| r.expected)
}

/// The attached process's symbol, level and word. We are not its parent, so its exit status
/// is unknown; a process that is gone after its worker retired for `shutdown` ended cleanly
/// (its host closed it) and is not shown as a failure (closing is normal for a host).
fn attached_word(view: &View, pid: u64) -> (&'static str, Level, String) {
    let (level, word) = view.procs.word(Some(pid));
    if level != Level::Limit {
        return (state_symbol(level), level, word);
    }
    let clean = view
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

/// `up 01:23` while the process runs; `ran 01:23` frozen at the time it was first seen ended.
fn uptime(view: &View, pid: Option<u32>, started_ms: f64) -> String {
    match pid.and_then(|p| view.procs.ended_ms.get(&u64::from(p))) {
        Some(ended) => format!("ran {}", hms(ended - started_ms)),
        None => format!("up {}", hms(view.now_ms - started_ms)),
    }
}

/// Shown in a cell with nothing to show (a process not running, not sampled yet).
const NONE: &str = "—";
/// The label column's least width (characters, its ellipsis included): enough for `worker gen…`
/// and `host-obser…` to say what a row is.
const MIN_LABEL: usize = 11;

/// One row's cells, in the pane's column order: label, pid, parent, uptime, state, RSS, CPU,
/// then what else the row tells (a host's turns and calls, a worker's mode).
struct Cells {
    symbol: &'static str,
    level: Level,
    /// A process that is not running: the row is dimmed.
    dim: bool,
    label: String,
    pid: String,
    parent: String,
    uptime: String,
    state: String,
    rss: String,
    cpu: String,
    extra: String,
}

impl Cells {
    /// A row's cells: `pid`'s parent, RSS and CPU from the process table, `—` where unknown.
    fn new(view: &View, row: &ProcessRow, level: Level, state: String, uptime: String) -> Self {
        let usage = row.pid.and_then(|p| view.procs.usage.get(&u64::from(p)));
        Self {
            symbol: state_symbol(level),
            level,
            dim: false,
            label: row.label.clone(),
            pid: row.pid.map_or(NONE.into(), |p| p.to_string()),
            parent: row.parent.map_or(NONE.into(), |p| p.to_string()),
            uptime,
            state,
            rss: usage.map_or(NONE.into(), |u| {
                format!("{:.1} MiB", u.rss_bytes as f64 / (1024.0 * 1024.0))
            }),
            cpu: usage.map_or(NONE.into(), |u| format!("{:.0}%", u.cpu_percent)),
            extra: String::new(),
        }
    }
}

/// Column widths (characters) fitting every row's cells in `width`: the fixed columns as wide
/// as their widest cell, the label column what is left (at least [`MIN_LABEL`]). When even
/// that does not fit (a pane narrower than about 80 columns, e.g. the left column of a 100- to
/// 190-column screen) the optional columns go, CPU first, then RSS, parent and uptime, so the
/// label, pid and state are never cut off; a left-out column's width is 0.
struct Widths {
    label: usize,
    pid: usize,
    parent: usize,
    uptime: usize,
    state: usize,
    rss: usize,
    cpu: usize,
}

impl Widths {
    fn fit(cells: &[Cells], width: usize) -> Self {
        let most = |f: fn(&Cells) -> &str| cells.iter().map(|c| f(c).chars().count()).max();
        let mut w = Self {
            label: 0,
            pid: most(|c| &c.pid).unwrap_or(1),
            parent: most(|c| &c.parent).unwrap_or(1),
            uptime: most(|c| &c.uptime).unwrap_or(1),
            state: most(|c| &c.state).unwrap_or(1),
            rss: most(|c| &c.rss).unwrap_or(1),
            cpu: most(|c| &c.cpu).unwrap_or(1),
        };
        let label = most(|c| &c.label).unwrap_or(MIN_LABEL);
        let least = label.min(MIN_LABEL);
        // The optional columns, in the order they give way.
        let drops: [fn(&mut Self); 4] = [
            |w: &mut Self| w.cpu = 0,
            |w: &mut Self| w.rss = 0,
            |w: &mut Self| w.parent = 0,
            |w: &mut Self| w.uptime = 0,
        ];
        for drop in drops {
            if w.used() + least <= width {
                break;
            }
            drop(&mut w);
        }
        w.label = label.min(width.saturating_sub(w.used())).max(MIN_LABEL);
        w
    }

    /// The characters every column but the label takes: the marker and symbol (4), ` pid `,
    /// the space before the state, then each column shown: ` parent `, the uptime's space,
    /// ` rss `, ` cpu `.
    fn used(&self) -> usize {
        let shown = |prefix: usize, width: usize| if width == 0 { 0 } else { prefix + width };
        4 + 5
            + self.pid
            + 1
            + self.state
            + shown(8, self.parent)
            + shown(1, self.uptime)
            + shown(5, self.rss)
            + shown(5, self.cpu)
    }
}

/// `s` in `width` characters: padded, or cut with an ellipsis.
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return format!("{s:<width$}");
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// `s` cut to `width` characters with an ellipsis when longer, never padded.
fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    fit(s, width)
}

/// A row's line in the pane's columns, at most `width` characters (the selection marker is
/// added by [`mark`]); a column [`Widths::fit`] left out is not written, and what else the
/// row tells (a host's turns, a worker's mode) is cut with `…` to the room left, so a row
/// never ends mid-word at the pane's edge.
fn cells_line<'a>(c: Cells, w: &Widths, width: usize, theme: &Theme) -> Line<'a> {
    let mut text = format!(
        "{} pid {:<pid$} ",
        fit(&c.label, w.label),
        c.pid,
        pid = w.pid
    );
    if w.parent > 0 {
        text.push_str(&format!("parent {:<parent$} ", c.parent, parent = w.parent));
    }
    if w.uptime > 0 {
        text.push_str(&format!("{:<uptime$} ", c.uptime, uptime = w.uptime));
    }
    let mut usage = String::new();
    if w.rss > 0 {
        usage.push_str(&format!(" rss {:>rss$}", c.rss, rss = w.rss));
    }
    if w.cpu > 0 {
        usage.push_str(&format!(" cpu {:>cpu$}", c.cpu, cpu = w.cpu));
    }
    let state = format!("{:<width$}", c.state, width = w.state);
    // What is left after the marker and symbol (4 characters) and the columns, which
    // `Widths::fit` made fit.
    let room = width.saturating_sub(
        4 + [&text, &state, &usage]
            .map(|s| s.chars().count())
            .iter()
            .sum::<usize>(),
    );
    // Cut to what fits, its leading separator kept; with no room for `  …` it is left out.
    if room >= 3 || c.extra.chars().count() <= room {
        usage.push_str(&cut(&c.extra, room));
    }
    if c.dim {
        return Line::from(vec![
            Span::styled(format!("{} ", c.symbol), theme.dim()),
            Span::styled(format!("{text}{state}{usage}"), theme.dim()),
        ]);
    }
    Line::from(vec![
        Span::styled(format!("{} ", c.symbol), theme.level(c.level)),
        Span::raw(text),
        Span::styled(state, theme.level(c.level)),
        Span::styled(usage, theme.dim()),
    ])
}

/// The agent host's cells (A1, U1): its state from its progress once it ended, then turns,
/// tool calls and the last tool.
fn host_cells(view: &View, row: &ProcessRow, h: &crate::canary::host::HostProgress) -> Cells {
    let running = crate::console::procs::host_running(&h.state);
    let (level, word) = if running {
        view.procs.word(h.pid.map(u64::from))
    } else if h.state.starts_with("exit status: 0") {
        (Level::Ok, h.state.clone())
    } else {
        (Level::Limit, h.state.clone())
    };
    let calls: u64 = h.tool_calls.values().sum();
    let mut cells = Cells::new(view, row, level, word, uptime(view, h.pid, h.started_ms));
    cells.extra = format!(
        "  {} turns · {calls} calls · last {}",
        h.turns,
        h.last_tool
            .as_deref()
            .map_or("-", |t| t.strip_prefix("patchdiff_").unwrap_or(t)),
    );
    cells
}

/// One row's cells, by what the row shows.
fn row_cells(view: &View, row: &ProcessRow) -> Cells {
    match row.kind {
        RowKind::Mcp => mcp_process_cells(view, row),
        RowKind::Worker => worker_process_cells(view, row),
        RowKind::Host => match view.canary.and_then(|c| c.host.as_ref()) {
            Some(h) => host_cells(view, row, h),
            None => found_cells(view, row),
        },
        RowKind::Found => found_cells(view, row),
    }
}

/// When `pid` started, from the process table.
fn started_ms(view: &View, pid: Option<u32>) -> Option<f64> {
    view.procs.info.get(&u64::from(pid?))?.started_ms
}

/// A process found in the process table or named by perf events: uptime (frozen once it
/// ended) and state from `/proc`.
fn found_cells(view: &View, row: &ProcessRow) -> Cells {
    let pid = row.pid.map(u64::from);
    let (level, word) = match pid {
        Some(p) if view.procs.state.contains_key(&p) => view.procs.word(Some(p)),
        _ => (Level::High, "not sampled yet".to_owned()),
    };
    let up =
        started_ms(view, row.pid).map_or_else(|| NONE.to_owned(), |s| uptime(view, row.pid, s));
    Cells::new(view, row, level, word, up)
}

/// An MCP process's cells: the canary's child with its uptime and state; the attached process
/// (we are not its parent); or one that is not running, with its exit when known.
fn mcp_process_cells(view: &View, row: &ProcessRow) -> Cells {
    let kind = row.label.as_str();
    // Attached, the screen shows only the attached process: never the canary's.
    let snap = view
        .canary
        .filter(|_| view.attached.is_none())
        .and_then(|c| c.processes.iter().find(|p| p.kind == kind));
    match (snap, view.attached) {
        (Some(p), _) => {
            let (level, word) = view.procs.word(p.pid.map(u64::from));
            Cells::new(view, row, level, word, uptime(view, p.pid, p.started_ms))
        }
        (None, Some(_)) => {
            let (symbol, level, word) = match attached_pid(view) {
                Some(p) => attached_word(view, p),
                None => (PENDING, Level::High, "no events yet".to_owned()),
            };
            let up = started_ms(view, row.pid)
                .map_or_else(|| NONE.to_owned(), |s| uptime(view, row.pid, s));
            let mut cells = Cells::new(view, row, level, word, up);
            cells.symbol = symbol;
            cells.extra = "  attached".into();
            cells
        }
        (None, None) => {
            let exit = view
                .canary
                .and_then(|c| c.exits.iter().find(|(k, _)| k == kind))
                .map_or("not running".to_owned(), |(_, v)| format!("exited: {v}"));
            let mut cells = Cells::new(view, row, Level::Ok, exit, NONE.into());
            cells.symbol = GONE;
            cells.dim = true;
            cells
        }
    }
}

/// The worker's cells, labelled with its generation: state and mode. A worker that has not
/// started is shown like a process not running, not as "ok"; an expected retirement is not a
/// failure.
fn worker_process_cells(view: &View, row: &ProcessRow) -> Cells {
    let w = &view.monitor.worker;
    let (level, word) = match &w.state {
        WorkerState::None => {
            let mut cells = Cells::new(view, row, Level::Ok, "not started".into(), NONE.into());
            cells.symbol = GONE;
            cells.dim = true;
            return cells;
        }
        WorkerState::Ready => match view.procs.word(w.pid) {
            (l, word) if word == "running" => (l, "ready".to_owned()),
            other => other,
        },
        WorkerState::Starting => (Level::High, "starting".into()),
        // An expected retirement (shutdown, age, request limit) is not a failure.
        WorkerState::Retired(r) if last_retirement_expected(view) => {
            (Level::Ok, format!("retired ({r})"))
        }
        WorkerState::Retired(r) => (Level::Limit, format!("retired ({r})")),
    };
    let up =
        started_ms(view, row.pid).map_or_else(|| NONE.to_owned(), |s| uptime(view, row.pid, s));
    let mut cells = Cells::new(view, row, level, word, up);
    if matches!(&w.state, WorkerState::Retired(_)) && level == Level::Ok {
        cells.symbol = GONE;
    }
    cells.label = format!(
        "worker gen {}",
        w.generation.map_or("-".into(), |g| g.to_string())
    );
    cells.extra = w
        .mode
        .as_deref()
        .map_or(String::new(), |m| format!("  {m}"));
    cells
}

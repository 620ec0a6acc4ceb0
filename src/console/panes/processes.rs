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

    /// The pane's lines fitted to `height` rows: one per process, the rows scrolled so the
    /// selected one is always shown (the cursor never rests on a row off screen), marked `▶`
    /// when focused, with its sampled RSS and CPU.
    pub fn lines<'a>(&self, view: &View<'a>, height: u16) -> Vec<Line<'a>> {
        let theme = &view.theme;
        let rows = rows(view);
        let cursor = self.cursor.min(rows.len().saturating_sub(1));
        let height = usize::from(height).max(1);
        let first = cursor.saturating_sub(height - 1);
        rows.iter()
            .enumerate()
            .skip(first)
            .take(height)
            .map(|(i, row)| {
                let mut line = row_line(view, row, theme);
                let usage = view.procs.usage_text(row.pid);
                if !usage.is_empty() {
                    line.spans.push(Span::styled(usage, theme.dim()));
                }
                mark(line, view.focused && i == cursor, theme)
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
        Some(ended) => format!("ran{:>8}", hms(ended - started_ms)),
        None => format!("up {:>8}", hms(view.now_ms - started_ms)),
    }
}

/// The agent host's row (A1, U1): pid, uptime, parent and state first (a narrow pane cuts the
/// row's end, never these), then turns, tool calls and the last tool.
fn host_line<'a>(
    view: &View,
    h: &crate::canary::host::HostProgress,
    parent: Option<u32>,
    theme: &Theme,
) -> Line<'a> {
    let running = crate::console::procs::host_running(&h.state);
    let (level, word) = if running {
        view.procs.word(h.pid.map(u64::from))
    } else if h.state.starts_with("exit status: 0") {
        (Level::Ok, h.state.clone())
    } else {
        (Level::Limit, h.state.clone())
    };
    let calls: u64 = h.tool_calls.values().sum();
    Line::from(vec![
        Span::styled(format!("{} ", state_symbol(level)), theme.level(level)),
        Span::raw(format!(
            "{:<9} pid {:<7} {}{}  ",
            h.host,
            h.pid.map_or("?".into(), |p| p.to_string()),
            uptime(view, h.pid, h.started_ms),
            parent.map_or(String::new(), |p| format!("  parent {p}")),
        )),
        Span::styled(word, theme.level(level)),
        Span::raw(format!(
            "  {} turns · {calls} calls · last {}",
            h.turns,
            h.last_tool
                .as_deref()
                .map_or("-", |t| t.strip_prefix("patchdiff_").unwrap_or(t)),
        )),
    ])
}

/// One row's line, by what the row shows.
fn row_line<'a>(view: &View<'a>, row: &ProcessRow, theme: &Theme) -> Line<'a> {
    match row.kind {
        RowKind::Mcp => mcp_process_line(view, &row.label, theme),
        RowKind::Worker => worker_process_line(view, row.parent, theme),
        RowKind::Host => match view.canary.and_then(|c| c.host.as_ref()) {
            Some(h) => host_line(view, h, row.parent, theme),
            None => found_line(view, row, theme),
        },
        RowKind::Found => found_line(view, row, theme),
    }
}

/// A process found in the process table or named by perf events: pid, parent, uptime (frozen
/// once it ended) and state from `/proc`.
fn found_line<'a>(view: &View, row: &ProcessRow, theme: &Theme) -> Line<'a> {
    let pid = row.pid.map(u64::from);
    let (level, word) = match pid {
        Some(p) if view.procs.state.contains_key(&p) => view.procs.word(Some(p)),
        _ => (Level::High, "not sampled yet".to_owned()),
    };
    let started = pid
        .and_then(|p| view.procs.info.get(&p))
        .and_then(|i| i.started_ms);
    Line::from(vec![
        Span::styled(format!("{} ", state_symbol(level)), theme.level(level)),
        Span::raw(format!(
            "{:<9} pid {:<7} {}  parent {}  ",
            row.label,
            row.pid.map_or("?".into(), |p| p.to_string()),
            started.map_or_else(|| "up        —".to_owned(), |s| uptime(view, row.pid, s)),
            row.parent.map_or("?".into(), |p| p.to_string()),
        )),
        Span::styled(word, theme.level(level)),
    ])
}

/// An MCP process's row: the canary's child with pid, uptime and state; the attached process
/// (we are not its parent); or one that is not running, with its exit when known.
fn mcp_process_line<'a>(view: &View, kind: &str, theme: &Theme) -> Line<'a> {
    // Attached, the screen shows only the attached process: never the canary's.
    let snap = view
        .canary
        .filter(|_| view.attached.is_none())
        .and_then(|c| c.processes.iter().find(|p| p.kind == kind));
    match (snap, view.attached) {
        (Some(p), _) => {
            let (level, word) = view.procs.word(p.pid.map(u64::from));
            Line::from(vec![
                Span::styled(format!("{} ", state_symbol(level)), theme.level(level)),
                Span::raw(format!(
                    "{kind:<9} pid {:<7} {}  ",
                    p.pid.map_or("?".into(), |p| p.to_string()),
                    uptime(view, p.pid, p.started_ms)
                )),
                Span::styled(word, theme.level(level)),
            ])
        }
        (None, Some(_)) => {
            let pid = attached_pid(view);
            let (symbol, level, word) = match pid {
                Some(p) => attached_word(view, p),
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
            let exit = view
                .canary
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
/// like a process not running, not as "ok"; an expected retirement is not a failure. Its parent
/// (the MCP process that owns it) is shown once the process table has been read.
fn worker_process_line<'a>(view: &View, parent: Option<u32>, theme: &Theme) -> Line<'a> {
    let w = &view.monitor.worker;
    let (level, word) = match &w.state {
        WorkerState::None => {
            return Line::from(vec![
                Span::styled("○ ", theme.dim()),
                Span::styled(format!("{:<9} not started", "worker"), theme.dim()),
            ]);
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
        Span::raw(parent.map_or(String::new(), |p| format!("  parent {p}"))),
    ])
}

//! The interactive console's state and input handling (SPEC U2–U4): focus, the `:` command line
//! with completion from the commands' clap definition, the `?` help overlay, the evidence viewer's keys, and the
//! bookkeeping of events from the canary task and the data sources. Keys become [`Command`]s
//! (the one action type shared with `--script`); drawing lives in `ui` and never mutates this.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use super::evidence::{EvidenceView, pretty};
use super::ring::Ring;
use super::runner::{CanarySnapshot, RunnerEvent};
use super::state::Monitor;
pub use crate::canary::command::argument_choices;
use crate::canary::command::{COMMANDS, Command, ProcessKind, complete};
use crate::config::{Key, Settings};
use crate::kernel::TargetSummary;

/// Frame times kept.
pub const FRAME_TIMES: usize = 4096;
/// Status lines (step outcomes, notices) kept.
pub const STATUS_CAPACITY: usize = 64;
/// The C1 advice shown (before the store's own message) when init meets a target with history.
pub const NOT_FRESH_ADVICE: &str = "TARGET_NOT_FRESH: init refuses targets with history (C1); run `:init --reset` to wipe it, or use a fresh database";

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

    /// Keys the pane handles itself when focused (shown in the bottom bar and in help).
    pub fn keys(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Pane::Evidence => &[
                ("↑↓", "select"),
                ("/", "search"),
                ("n/N", "next/prev match"),
                ("f", "follow"),
                ("t", "tool filter"),
                ("o", "other log"),
                ("⏎", "detail"),
                ("g/G", "top/end"),
            ],
            Pane::Perf => &[("↑↓", "select"), ("x", "hide/show kind in tail")],
            Pane::Processes => &[
                ("↑↓", "select"),
                ("R", "restart"),
                ("X", "stop"),
                ("K", "kill…"),
                ("E", "stderr"),
                ("⏎", "step log"),
            ],
            Pane::Targets => &[("↑↓", "select"), ("⏎", "story: verdicts, diffs")],
            Pane::Worker => &[],
        }
    }

    fn index(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }
}

/// How much of a process's stderr log the `E` view shows (its last lines).
pub const STDERR_TAIL_LINES: usize = 200;

/// Keys the console itself owns (not in the command table).
pub const CONSOLE_KEYS: &[(&str, &str)] = &[
    (":", "command line (Tab completes)"),
    ("?", "this help"),
    ("Tab / Shift-Tab", "focus next / previous pane"),
    ("m", "mouse capture on/off"),
    ("q / Ctrl-C", "quit (stops every child process)"),
    ("Esc", "close an overlay or the command line"),
];

/// What the bottom line is being used for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Normal,
    /// The `:` command line; `cycle` is the index into the current completions.
    Command {
        text: String,
        cycle: Option<(String, usize)>,
    },
    /// The evidence viewer's `/` search.
    Search {
        text: String,
    },
    /// A question the operator answers with `y` (anything else cancels), e.g. before a kill.
    Confirm {
        question: String,
        action: ProcessAction,
    },
}

/// What the processes pane can do to one process (U1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessAction {
    /// SIGKILL the process (for an agent host: its whole process group). Confirmed first.
    Kill {
        label: String,
        pid: u32,
        group: bool,
    },
}

/// One row of the processes pane, as the operator selects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    /// `full`, `observed`, the agent host's name, or `worker`.
    pub label: String,
    pub pid: Option<u32>,
    /// The file holding the process's stderr, if the run keeps one.
    pub stderr: Option<std::path::PathBuf>,
}

/// Resident memory and CPU of one process, sampled by the console (U1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcUsage {
    pub rss_bytes: u64,
    /// Percent of one core since the previous sample.
    pub cpu_percent: f32,
}

/// A window drawn over the panes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help {
        scroll: u16,
    },
    /// Multi-line output of a command (e.g. `host-config`), or the detail of one message.
    Text {
        title: String,
        lines: Vec<String>,
        scroll: u16,
    },
}

/// One status line.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub ok: bool,
    pub text: String,
}

/// A watched observed process started elsewhere (attach mode, SPEC U1, ARCHITECTURE).
#[derive(Debug, Clone, PartialEq)]
pub struct Attached {
    pub events: PathBuf,
    pub database: Option<PathBuf>,
}

/// The console's whole state.
pub struct App {
    pub monitor: Monitor,
    pub canary: Option<CanarySnapshot>,
    pub attached: Option<Attached>,
    /// Targets as the store reports them (live while MCP processes write, WAL).
    pub store_targets: Vec<TargetSummary>,
    pub store_error: Option<String>,
    /// Process state from `/proc` by pid: `R`, `S`, `Z`, … or `gone`.
    pub proc_state: BTreeMap<u64, String>,
    /// RSS and CPU by pid, for every process the pane shows.
    pub proc_usage: BTreeMap<u64, ProcUsage>,
    /// The selected row of the processes pane.
    pub process_cursor: usize,
    /// The console's clock (Unix ms), advanced by ticks; injected in tests.
    pub now_ms: f64,
    pub focus: Pane,
    pub input: Input,
    pub overlay: Overlay,
    pub statuses: Ring<Status>,
    /// The step running in the canary task and since when (Unix ms).
    pub running: Option<(String, f64)>,
    /// Commands sent and not yet started.
    pub queued: usize,
    pub evidence: EvidenceView,
    /// Scroll offset of the perf table.
    pub perf_scroll: usize,
    /// The selected row of the targets pane (Enter opens that target's story).
    pub target_cursor: usize,
    /// Event kinds the perf pane's live tail hides (`x` on the selected row toggles).
    pub perf_hidden: std::collections::BTreeSet<String>,
    /// False under `NO_COLOR` (U4).
    pub color: bool,
    pub mouse: bool,
    /// Mouse capture changed and must be applied to the terminal.
    pub mouse_changed: bool,
    pub quit: bool,
    /// An explanation that stays on screen (e.g. C1's TARGET_NOT_FRESH advice).
    pub notice: Option<String>,
    /// Last terminal size (columns, rows), for mouse hit-testing.
    pub size: (u16, u16),
    /// Recent frame times (ms: refresh + draw + flush), for the bench and diagnostics.
    pub frame_ms: Ring<f64>,
}

impl App {
    /// A console with no data yet. `color` follows `NO_COLOR` (see [`color_enabled`]).
    pub fn new(color: bool, now_ms: f64) -> Self {
        Self {
            monitor: Monitor::new(),
            canary: None,
            attached: None,
            store_targets: Vec::new(),
            store_error: None,
            proc_state: BTreeMap::new(),
            proc_usage: BTreeMap::new(),
            process_cursor: 0,
            now_ms,
            focus: Pane::Processes,
            input: Input::Normal,
            overlay: Overlay::None,
            statuses: Ring::new(STATUS_CAPACITY),
            running: None,
            queued: 0,
            evidence: EvidenceView::new(Vec::new()),
            perf_scroll: 0,
            target_cursor: 0,
            perf_hidden: std::collections::BTreeSet::new(),
            color,
            mouse: false,
            mouse_changed: false,
            quit: false,
            notice: None,
            size: (80, 24),
            frame_ms: Ring::new(FRAME_TIMES),
        }
    }

    /// Pids whose `/proc` state the console samples: MCP processes and the worker.
    pub fn watched_pids(&self) -> Vec<u64> {
        let mut pids: Vec<u64> = self
            .canary
            .iter()
            .flat_map(|c| c.processes.iter().filter_map(|p| p.pid.map(u64::from)))
            .collect();
        pids.extend(
            self.canary
                .as_ref()
                .and_then(|c| c.host.as_ref())
                .and_then(|h| h.pid)
                .map(u64::from),
        );
        pids.extend(self.monitor.worker.pid);
        pids.extend(self.attached_pid());
        pids
    }

    /// In attach mode: the observed process's pid, from its events' `pid` field.
    pub fn attached_pid(&self) -> Option<u64> {
        self.attached.as_ref()?;
        self.monitor.recorders.get("observed").copied()
    }

    /// Why the screen cannot switch to another run now, if it cannot: a live canary (an MCP
    /// process or an agent host running) keeps the screen, so two runs are never mixed on it
    /// (U1). Stop the canary's processes (`stop`) first, or attach from another console.
    pub fn attach_refusal(&self) -> Option<String> {
        let c = self.canary.as_ref().filter(|_| self.attached.is_none())?;
        let mut live: Vec<String> = c
            .processes
            .iter()
            .filter_map(|p| p.pid.map(|pid| format!("{} pid {pid}", p.kind)))
            .collect();
        if let Some(h) = c.host.as_ref()
            && matches!(h.state.as_str(), "starting" | "running")
        {
            live.push(format!(
                "{} pid {}",
                h.host,
                h.pid.map_or("?".into(), |p| p.to_string())
            ));
        }
        (!live.is_empty()).then(|| {
            format!(
                "run {} is live ({}): the screen stays on it so two runs never mix; `stop` its processes first, or use `patchdiff console --attach-events FILE` in another terminal",
                c.run_id,
                live.join(", ")
            )
        })
    }

    /// Why `command` is refused while this console shows an attached process or a past run
    /// (read-only: only `runs` and `attach` switch what is shown), if it is.
    pub fn read_only_refusal(&self, command: &Command) -> Option<String> {
        let a = self.attached.as_ref()?;
        match command {
            Command::Runs { .. } | Command::Attach { .. } => None,
            other => Some(format!(
                "`{}` refused: the screen shows {} read-only; restart the console to run a canary",
                other.name(),
                a.events.display()
            )),
        }
    }

    pub fn push_status(&mut self, ok: bool, text: impl Into<String>) {
        let text = text.into();
        // C1: the store's TARGET_NOT_FRESH refusal (the canary passes on its message, which
        // says "is not fresh"; the code itself may or may not be included).
        if !ok && (text.contains("TARGET_NOT_FRESH") || text.contains("is not fresh")) {
            self.notice = Some(format!("{NOT_FRESH_ADVICE} · {text}"));
        }
        self.statuses.push(Status { ok, text });
    }

    /// Applies an event from the canary task.
    pub fn on_runner(&mut self, event: RunnerEvent) {
        match event {
            RunnerEvent::Started(name) => {
                self.queued = self.queued.saturating_sub(1);
                self.running = Some((name, self.now_ms));
            }
            RunnerEvent::Finished { outcome, output } => {
                self.running = None;
                if outcome.ok && outcome.command == "init" {
                    self.notice = None;
                }
                self.push_status(
                    outcome.ok,
                    format!(
                        "{} {} {} ({} ms)",
                        outcome.command,
                        if outcome.ok { "ok" } else { "FAIL" },
                        outcome.summary,
                        outcome.elapsed_ms
                    ),
                );
                if let Some(text) = output {
                    self.overlay = Overlay::Text {
                        title: outcome.command.clone(),
                        lines: text.lines().map(str::to_owned).collect(),
                        scroll: 0,
                    };
                }
            }
            RunnerEvent::Snapshot(s) => self.canary = Some(*s),
            RunnerEvent::Host(progress) => {
                if let Some(c) = self.canary.as_mut() {
                    c.host = Some(*progress);
                }
            }
            RunnerEvent::Stopped => self.running = None,
        }
    }

    /// Handles one key; returns a command for the canary task, if the key asked for one.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return None;
        }
        if self.overlay != Overlay::None {
            self.overlay_key(key);
            return None;
        }
        match std::mem::replace(&mut self.input, Input::Normal) {
            Input::Command { text, cycle } => return self.command_key(key, text, cycle),
            Input::Search { text } => {
                self.search_key(key, text);
                return None;
            }
            Input::Confirm { action, .. } => {
                if key.code == KeyCode::Char('y') {
                    self.perform(action);
                } else {
                    self.push_status(true, "cancelled");
                }
                return None;
            }
            Input::Normal => {}
        }
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.overlay = Overlay::Help { scroll: 0 },
            KeyCode::Char(':') => {
                self.input = Input::Command {
                    text: String::new(),
                    cycle: None,
                }
            }
            KeyCode::Tab => self.focus = Pane::ALL[(self.focus.index() + 1) % Pane::ALL.len()],
            KeyCode::BackTab => {
                self.focus = Pane::ALL[(self.focus.index() + Pane::ALL.len() - 1) % Pane::ALL.len()]
            }
            KeyCode::Char('m') => {
                self.mouse = !self.mouse;
                self.mouse_changed = true;
            }
            KeyCode::Esc => self.notice = None,
            _ if self.focus == Pane::Processes
                && let Some(outcome) = self.process_key(key) =>
            {
                return outcome;
            }
            KeyCode::Enter if self.focus == Pane::Targets => {
                let name = self.target_names().get(self.target_cursor).cloned()?;
                return Some(self.submit(Command::Target { name }));
            }
            _ if self.pane_key(key) => {}
            KeyCode::Char(c) => return self.table_key(c),
            _ => {}
        }
        None
    }

    /// A key from the command table: runs the command with default arguments, or opens the
    /// command line pre-filled when the command needs arguments (e.g. `agent PLAN`).
    fn table_key(&mut self, c: char) -> Option<Command> {
        let spec = COMMANDS.iter().find(|s| s.key == Some(c))?;
        // `record` with no arguments records nothing: its key opens the command line.
        let bare = Command::parse(spec.name)
            .ok()
            .filter(|_| spec.name != "record");
        match bare {
            Some(command) => Some(self.submit(command)),
            None => {
                self.input = Input::Command {
                    text: format!("{} ", spec.name),
                    cycle: None,
                };
                None
            }
        }
    }

    /// The processes pane's rows, in order: the MCP processes, the agent host (when one ran),
    /// the worker.
    pub fn process_rows(&self) -> Vec<ProcessRow> {
        let run = self.canary.as_ref().map(|c| c.run_path.clone());
        let file = |name: String| run.as_ref().map(|r| r.join(name));
        let mut rows = Vec::new();
        let kinds: &[&str] = if self.attached.is_some() {
            &["observed"]
        } else {
            &["full", "observed"]
        };
        for kind in kinds {
            let pid = match self.attached {
                Some(_) => self.attached_pid().and_then(|p| u32::try_from(p).ok()),
                None => self
                    .canary
                    .as_ref()
                    .and_then(|c| c.processes.iter().find(|p| p.kind == *kind))
                    .and_then(|p| p.pid),
            };
            rows.push(ProcessRow {
                label: (*kind).to_owned(),
                pid,
                stderr: file(format!("{kind}.stderr.log")),
            });
        }
        if let Some(h) = self.canary.as_ref().and_then(|c| c.host.as_ref()) {
            rows.push(ProcessRow {
                label: h.host.clone(),
                pid: h.pid,
                stderr: file(format!("agent.{}.stderr.log", h.host)),
            });
        }
        rows.push(ProcessRow {
            label: "worker".into(),
            pid: self.monitor.worker.pid.and_then(|p| u32::try_from(p).ok()),
            stderr: file("worker.observed.stderr.log".into()),
        });
        rows
    }

    /// A key on the focused processes pane: select, restart, stop, kill (confirmed), stderr.
    fn process_key(&mut self, key: KeyEvent) -> Option<Option<Command>> {
        let rows = self.process_rows();
        let row = rows
            .get(self.process_cursor.min(rows.len().saturating_sub(1)))?
            .clone();
        let kind = match row.label.as_str() {
            "full" => Some(ProcessKind::Full),
            "observed" => Some(ProcessKind::Observed),
            _ => None,
        };
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                self.process_cursor = self.process_cursor.saturating_sub(1);
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.process_cursor = (self.process_cursor + 1).min(rows.len().saturating_sub(1));
            }
            KeyCode::Char('R') => return Some(self.relaunch_or_stop(&row, kind, true)),
            KeyCode::Char('X') => return Some(self.relaunch_or_stop(&row, kind, false)),
            KeyCode::Char('K') => self.confirm_kill(&row, kind),
            KeyCode::Char('E') => {
                self.overlay = Overlay::Text {
                    title: format!("{} stderr (last {STDERR_TAIL_LINES} lines)", row.label),
                    lines: stderr_tail(row.stderr.as_deref()),
                    scroll: 0,
                };
            }
            _ => return None,
        }
        Some(None)
    }

    /// `R` (`restart`) or `X` (stop) on a process the console launched (`kind`), said before it
    /// is done; any other row is refused (it can only be killed).
    fn relaunch_or_stop(
        &mut self,
        row: &ProcessRow,
        kind: Option<ProcessKind>,
        restart: bool,
    ) -> Option<Command> {
        let Some(kind) = kind.filter(|_| self.attached.is_none()) else {
            self.push_status(
                false,
                format!(
                    "{} is not a process the console launched; it can only be killed (K)",
                    row.label
                ),
            );
            return None;
        };
        self.push_status(
            true,
            format!(
                "{} the {} process only (pid {})…",
                if restart { "restarting" } else { "stopping" },
                kind.as_str(),
                row.pid.map_or("-".into(), |p| p.to_string())
            ),
        );
        let command = if restart {
            Command::Launch { which: Some(kind) }
        } else {
            Command::Stop { which: Some(kind) }
        };
        Some(self.submit(command))
    }

    /// `K`: asks y/N before sending SIGKILL to the row's process (an agent host: its whole
    /// process group).
    fn confirm_kill(&mut self, row: &ProcessRow, kind: Option<ProcessKind>) {
        let Some(pid) = row.pid else {
            self.push_status(false, format!("{} is not running", row.label));
            return;
        };
        let group = kind.is_none() && row.label != "worker";
        self.input = Input::Confirm {
            question: format!(
                "kill {} (pid {pid}{}) with SIGKILL? y/N",
                row.label,
                if group {
                    ", its whole process group"
                } else {
                    ""
                }
            ),
            action: ProcessAction::Kill {
                label: row.label.clone(),
                pid,
                group,
            },
        };
    }

    /// Target names in the order the targets pane shows them: the run's rows, then targets
    /// only the store knows.
    pub fn target_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .canary
            .as_ref()
            .filter(|_| self.attached.is_none())
            .map(|c| c.targets.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        for s in &self.store_targets {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
        names
    }

    /// Carries out a confirmed action. A kill goes straight to the process (not through the
    /// canary task, which may be busy running the very step that process serves).
    fn perform(&mut self, action: ProcessAction) {
        match action {
            ProcessAction::Kill { label, pid, group } => {
                use nix::sys::signal::{Signal, kill, killpg};
                use nix::unistd::Pid;
                let target = Pid::from_raw(pid as i32);
                let sent = if group {
                    killpg(target, Signal::SIGKILL)
                } else {
                    kill(target, Signal::SIGKILL)
                };
                match sent {
                    Ok(()) => self.push_status(
                        true,
                        format!(
                            "sent SIGKILL to {label} (pid {pid}{})",
                            if group { ", process group" } else { "" }
                        ),
                    ),
                    Err(e) => self.push_status(false, format!("kill {label} (pid {pid}): {e}")),
                }
            }
        }
    }

    fn submit(&mut self, command: Command) -> Command {
        self.queued += 1;
        command
    }

    /// A key for the focused pane; whether it was one of that pane's keys.
    fn pane_key(&mut self, key: KeyEvent) -> bool {
        let (up, down) = (
            matches!(key.code, KeyCode::Up | KeyCode::Char('k')),
            matches!(key.code, KeyCode::Down | KeyCode::Char('j')),
        );
        match self.focus {
            Pane::Evidence => self.evidence_key(key),
            Pane::Processes if key.code == KeyCode::Enter => {
                self.show_step_log();
                true
            }
            Pane::Targets if up || down => {
                let last = self.target_names().len().saturating_sub(1);
                self.target_cursor = step_cursor(self.target_cursor, down, last);
                true
            }
            Pane::Perf if up || down => {
                let last = self.monitor.stat_rows.len().saturating_sub(1);
                self.perf_scroll = step_cursor(self.perf_scroll, down, last);
                true
            }
            Pane::Perf if key.code == KeyCode::Char('x') => {
                if let Some(row) = self.monitor.stat_rows.get(self.perf_scroll) {
                    let name = row.name.clone();
                    if !self.perf_hidden.remove(&name) {
                        self.perf_hidden.insert(name);
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// A key on the focused evidence pane: move, follow, filter, source, search, open a line.
    fn evidence_key(&mut self, key: KeyEvent) -> bool {
        let ev = &mut self.evidence;
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => ev.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => ev.move_by(1),
            KeyCode::PageUp => ev.move_by(-(ev.rows.max(1) as isize)),
            KeyCode::PageDown => ev.move_by(ev.rows.max(1) as isize),
            KeyCode::Char('g') | KeyCode::Home => ev.home(),
            KeyCode::Char('G') | KeyCode::End => ev.end(),
            KeyCode::Char('f') => ev.toggle_follow(),
            KeyCode::Char('t') => ev.cycle_tool_filter(),
            KeyCode::Char('o') => ev.next_source(),
            KeyCode::Char('n') => ev.next_match(true),
            KeyCode::Char('N') => ev.next_match(false),
            KeyCode::Char('/') => {
                self.input = Input::Search {
                    text: String::new(),
                }
            }
            KeyCode::Enter => {
                if let Some(line) = ev.selected_line() {
                    self.overlay = Overlay::Text {
                        title: format!("{} @ byte {}", ev.label(), line.offset),
                        lines: pretty(&line.text),
                        scroll: 0,
                    };
                }
            }
            _ => return false,
        }
        true
    }

    /// Enter on the processes pane: the step log in an overlay.
    fn show_step_log(&mut self) {
        let mut lines: Vec<String> = self
            .statuses
            .iter()
            .map(|s| format!("{} {}", if s.ok { "✔" } else { "✖" }, s.text))
            .collect();
        if lines.is_empty() {
            lines.push("no steps run yet".into());
        }
        self.overlay = Overlay::Text {
            title: format!("step log (last {STATUS_CAPACITY})"),
            lines,
            scroll: 0,
        };
    }

    fn overlay_key(&mut self, key: KeyEvent) {
        let scroll = match &mut self.overlay {
            Overlay::Help { scroll } | Overlay::Text { scroll, .. } => scroll,
            Overlay::None => return,
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Enter | KeyCode::Char('?') => {
                self.overlay = Overlay::None
            }
            KeyCode::Down | KeyCode::Char('j') => *scroll = scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => *scroll = scroll.saturating_add(10),
            KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
            _ => {}
        }
    }

    fn command_key(
        &mut self,
        key: KeyEvent,
        mut text: String,
        cycle: Option<(String, usize)>,
    ) -> Option<Command> {
        match key.code {
            KeyCode::Esc => return None,
            KeyCode::Enter => {
                let line = text.trim();
                if line.is_empty() {
                    return None;
                }
                return match Command::parse(line) {
                    Ok(command) => Some(self.submit(command)),
                    Err(e) => {
                        self.push_status(false, format!(":{line}: {e}"));
                        None
                    }
                };
            }
            KeyCode::Tab => {
                let (text, cycle) = complete_line(&text, cycle);
                self.input = Input::Command { text, cycle };
                return None;
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        self.input = Input::Command { text, cycle: None };
        None
    }

    fn search_key(&mut self, key: KeyEvent, mut text: String) {
        match key.code {
            KeyCode::Esc => return,
            KeyCode::Enter => {
                self.evidence.search(&text);
                return;
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        self.input = Input::Search { text };
    }

    /// Mouse (optional, U4): a click focuses the pane under it; the wheel scrolls the evidence.
    pub fn on_mouse(&mut self, mouse: MouseEvent, panes: &[(Pane, ratatui::layout::Rect)]) {
        let hit = panes.iter().find(|(_, r)| {
            mouse.column >= r.x
                && mouse.column < r.x + r.width
                && mouse.row >= r.y
                && mouse.row < r.y + r.height
        });
        match mouse.kind {
            MouseEventKind::Down(_) => {
                if let Some((p, _)) = hit {
                    self.focus = *p;
                }
            }
            MouseEventKind::ScrollUp => self.evidence.move_by(-3),
            MouseEventKind::ScrollDown => self.evidence.move_by(3),
            _ => {}
        }
    }

    /// The candidates shown while typing a command line.
    pub fn completions(&self) -> Vec<String> {
        match &self.input {
            Input::Command { text, .. } => candidates(text),
            _ => Vec::new(),
        }
    }
}

/// Completion candidates for a partial command line: command names, then arguments.
pub fn candidates(text: &str) -> Vec<String> {
    match text.split_once(' ') {
        None => complete(text).into_iter().map(str::to_owned).collect(),
        Some((name, rest)) => {
            let word = rest.rsplit(' ').next().unwrap_or("");
            let mut out: Vec<String> = argument_choices(name)
                .into_iter()
                .filter(|a| a.starts_with(word))
                .collect();
            // Commands whose arguments are files (a plan, an events file, a database).
            if matches!(name, "agent" | "attach") && !word.contains('=') {
                out.extend(path_candidates(word));
            }
            out
        }
    }
}

/// At most this many file names are offered for one Tab.
pub const PATH_CANDIDATES: usize = 64;

/// Files and directories (with a trailing `/`) whose path starts with `word`, as typed
/// (relative to the console's working directory unless absolute). Hidden entries only when the
/// typed name starts with `.`.
pub fn path_candidates(word: &str) -> Vec<String> {
    let (typed_dir, prefix) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    let dir = if typed_dir.is_empty() { "." } else { typed_dir };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let slash = if e.path().is_dir() { "/" } else { "" };
            Some(format!("{typed_dir}{name}{slash}"))
        })
        .collect();
    out.sort();
    out.truncate(PATH_CANDIDATES);
    out
}

/// Tab on a command line: a single candidate is completed (with a trailing space); several are
/// cycled through, remembering what was typed in `cycle`.
pub fn complete_line(
    text: &str,
    cycle: Option<(String, usize)>,
) -> (String, Option<(String, usize)>) {
    let typed = cycle.as_ref().map_or(text, |(t, _)| t.as_str()).to_owned();
    let cands = candidates(&typed);
    if cands.is_empty() {
        return (text.to_owned(), None);
    }
    let prefix = match typed.rsplit_once(' ') {
        Some((head, _)) => format!("{head} "),
        None => String::new(),
    };
    if cands.len() == 1 {
        // A directory stays open for the next Tab; anything else is a whole word.
        let space = if cands[0].ends_with('/') { "" } else { " " };
        return (format!("{prefix}{}{space}", cands[0]), None);
    }
    let next = cycle.map_or(0, |(_, i)| (i + 1) % cands.len());
    (format!("{prefix}{}", cands[next]), Some((typed, next)))
}

/// A list cursor moved one row up or (`down`) down, staying within `0..=last`.
fn step_cursor(cursor: usize, down: bool, last: usize) -> usize {
    if down {
        (cursor + 1).min(last)
    } else {
        cursor.saturating_sub(1)
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

/// U4: colour unless `NO_COLOR` ([`Key::NoColor`]) is set to a non-empty value
/// (no-color.org), as the resolved `settings` hold it.
pub fn color_enabled(settings: &Settings) -> bool {
    settings.get(Key::NoColor).is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_set_and_non_empty_turns_colour_off() {
        let with = |value: Option<&str>| {
            color_enabled(&Settings::from_lookup(|k| {
                (k == "NO_COLOR").then_some(value).flatten().map(Into::into)
            }))
        };
        assert!(with(None), "unset: colour");
        assert!(with(Some("")), "empty: colour");
        assert!(!with(Some("1")), "set: no colour");
        assert!(!with(Some("false")), "any non-empty value: no colour");
    }
}

//! The console's screen-wide state and input dispatch (SPEC U2–U4): focus, the `:` command
//! line, the `?` help overlay and text overlays, y/N questions, status lines, and the
//! bookkeeping of events from the canary task. Each pane owns its own state, keys and drawing
//! ([`super::panes`]); a key goes to the console's own table first, then the focused pane's
//! table, then the command table. Keys become [`Command`]s (the one action type shared with
//! `--script`); drawing lives in `ui` and never mutates this.

use crossterm::event::{KeyCode, KeyEvent, MouseEvent, MouseEventKind};

use super::keys::{Binding, lookup};
use super::panes::{Effect, Pane as PaneId, Panes, View};
use super::procs::{ProcTable, host_running};
use super::ring::Ring;
use super::runner::{CanarySnapshot, RunnerEvent};
use super::state::Monitor;
use super::theme::{Theme, plain_words};
use crate::canary::command::{COMMANDS, Command};
use crate::config::{Key, Settings};

pub use super::command_line::{
    PATH_CANDIDATES, argument_choices, candidates, complete_line, path_candidates,
};
pub use super::panes::processes::{ProcessRow, STDERR_TAIL_LINES};
pub use super::panes::{Attached, Confirmed, Pane, STATUS_CAPACITY, Status};
pub use super::procs::ProcUsage;

/// Frame times kept.
pub const FRAME_TIMES: usize = 4096;
/// The advice shown (before the store's own message) when init meets a target with history.
pub const NOT_FRESH_ADVICE: &str = "TARGET_NOT_FRESH: init refuses targets with history; run `:init --reset` to wipe it, or use a fresh database";

/// What a console key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleAction {
    CommandLine,
    Help,
    FocusNext,
    FocusPrevious,
    Mouse,
    Quit,
    CloseNotice,
}

/// Keys the console itself owns (not in the command table): the one table the handler matches
/// and help shows.
pub const CONSOLE_KEYS: &[Binding<ConsoleAction>] = &[
    Binding::new(&[KeyCode::Char('c')], "", "", ConsoleAction::Quit).ctrl(),
    Binding::new(
        &[KeyCode::Char(':')],
        ":",
        "command line (Tab completes)",
        ConsoleAction::CommandLine,
    ),
    Binding::new(&[KeyCode::Char('?')], "?", "this help", ConsoleAction::Help),
    Binding::new(
        &[KeyCode::Tab],
        "Tab / Shift-Tab",
        "focus next / previous pane",
        ConsoleAction::FocusNext,
    ),
    Binding::new(&[KeyCode::BackTab], "", "", ConsoleAction::FocusPrevious),
    Binding::new(
        &[KeyCode::Char('m')],
        "m",
        "mouse capture on/off",
        ConsoleAction::Mouse,
    ),
    Binding::new(
        &[KeyCode::Char('q')],
        "q / Ctrl-C",
        "quit (stops every child process)",
        ConsoleAction::Quit,
    ),
    Binding::new(
        &[KeyCode::Esc],
        "Esc",
        "close an overlay or the command line",
        ConsoleAction::CloseNotice,
    ),
];

/// What the bottom line is being used for.
#[derive(Debug, Clone, PartialEq)]
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
        action: Confirmed,
    },
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

/// The console's whole state: what the screen shows and each pane's own state.
pub struct App {
    pub monitor: Monitor,
    pub canary: Option<CanarySnapshot>,
    pub attached: Option<Attached>,
    /// Each pane's own state (cursors, the evidence viewer, the store's targets).
    pub panes: Panes,
    /// The process table from the last `/proc` sample.
    pub procs: ProcTable,
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
    /// False under `NO_COLOR` (U4).
    pub color: bool,
    pub mouse: bool,
    /// Mouse capture changed and must be applied to the terminal.
    pub mouse_changed: bool,
    pub quit: bool,
    /// An explanation that stays on screen (e.g. the TARGET_NOT_FRESH advice).
    pub notice: Option<String>,
    /// Last terminal size (columns, rows), for mouse hit-testing.
    pub size: (u16, u16),
    /// Recent frame times (ms: refresh + draw + flush), for the bench and diagnostics.
    pub frame_ms: Ring<f64>,
    /// The target whose story was asked for last (its overlay's title names it).
    pub story_target: Option<String>,
}

impl App {
    /// A console with no data yet. `color` follows `NO_COLOR` (see [`color_enabled`]).
    pub fn new(color: bool, now_ms: f64) -> Self {
        Self {
            monitor: Monitor::new(),
            canary: None,
            attached: None,
            panes: Panes::default(),
            procs: ProcTable::default(),
            now_ms,
            focus: Pane::Processes,
            input: Input::Normal,
            overlay: Overlay::None,
            statuses: Ring::new(STATUS_CAPACITY),
            running: None,
            queued: 0,
            color,
            mouse: false,
            mouse_changed: false,
            quit: false,
            notice: None,
            size: (80, 24),
            frame_ms: Ring::new(FRAME_TIMES),
            story_target: None,
        }
    }

    /// What the panes read of the screen now; `focused` for the pane being drawn or keyed.
    pub fn view(&self, focused: bool) -> View<'_> {
        View {
            monitor: &self.monitor,
            canary: self.canary.as_ref(),
            attached: self.attached.as_ref(),
            procs: &self.procs,
            statuses: &self.statuses,
            now_ms: self.now_ms,
            theme: Theme { color: self.color },
            focused,
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
        // What the process table and the perf events name beyond the console's own children:
        // the host's descendants, every source's worker, the observed process a host started.
        pids.extend(self.procs.host_tree.iter().copied());
        pids.extend(self.monitor.workers.values().filter_map(|(_, p)| *p));
        pids.extend(self.monitor.recorders.get("host").copied());
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// In attach mode: the observed process's pid, from its events' `pid` field.
    pub fn attached_pid(&self) -> Option<u64> {
        super::panes::processes::attached_pid(&self.view(false))
    }

    /// The processes pane's rows, in order (see [`super::panes::processes::rows`]).
    pub fn process_rows(&self) -> Vec<ProcessRow> {
        super::panes::processes::rows(&self.view(false))
    }

    /// Target names in the order the targets pane shows them.
    pub fn target_names(&self) -> Vec<String> {
        self.panes.targets.names(&self.view(false))
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

    /// Adds a status line, in plain words (requirement ids the canary's messages carry are
    /// left out: [`plain_words`]).
    pub fn push_status(&mut self, ok: bool, text: impl Into<String>) {
        let text = plain_words(&text.into());
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
                    // A story's title names its target.
                    let title = match (outcome.command.as_str(), self.story_target.take()) {
                        ("target", Some(name)) => format!("story of {name}"),
                        (command, _) => command.to_owned(),
                    };
                    self.overlay = Overlay::Text {
                        title,
                        lines: text.lines().map(str::to_owned).collect(),
                        scroll: 0,
                    };
                }
            }
            RunnerEvent::Snapshot(s) => {
                self.canary = Some(*s);
                self.follow_host_evidence();
            }
            RunnerEvent::Progress(line) => self.push_status(true, line),
            RunnerEvent::Host(progress) => {
                // A host that ended keeps the uptime it had then (frozen at exit).
                if let Some(pid) = progress.pid.filter(|_| !host_running(&progress.state)) {
                    self.procs
                        .ended_ms
                        .entry(u64::from(pid))
                        .or_insert(self.now_ms);
                }
                if let Some(c) = self.canary.as_mut() {
                    c.host = Some(*progress);
                }
                self.follow_host_evidence();
            }
            RunnerEvent::Stopped => self.running = None,
        }
    }

    /// While the run's agent host runs, EVIDENCE shows the wire log of the observed process
    /// that host started, not the console's own (A4; once per host run, so `o` can leave it).
    fn follow_host_evidence(&mut self) {
        let Some(c) = self.canary.as_ref().filter(|_| self.attached.is_none()) else {
            return;
        };
        let Some(host) = c
            .host
            .as_ref()
            .filter(|h| matches!(h.state.as_str(), "starting" | "running"))
            .and_then(|h| h.pid)
        else {
            return;
        };
        let log = c.run_path.join(crate::evidence::run_dir::wire_log_name(
            crate::evidence::run_dir::process::HOST_OBSERVED,
        ));
        self.panes.evidence.follow_host(host, &log);
    }

    /// Handles one key; returns a command for the canary task, if the key asked for one.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        if lookup(&CONSOLE_KEYS[..1], &key).is_some() {
            // Ctrl-C asks while a step runs; a second Ctrl-C answers the question.
            let asked = matches!(
                self.input,
                Input::Confirm {
                    action: Confirmed::Quit,
                    ..
                }
            );
            if asked || !self.ask_before_quitting() {
                self.quit = true;
            }
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
                    return self.perform(action);
                } else {
                    self.push_status(true, "cancelled");
                }
                return None;
            }
            Input::Normal => {}
        }
        // The runs pane, while open, takes every key but the command line and help (a command
        // key such as `r` must not reach the live run from there).
        if self.panes.runs.open {
            match lookup(CONSOLE_KEYS, &key) {
                Some(action @ (ConsoleAction::CommandLine | ConsoleAction::Help)) => {
                    self.console_action(action)
                }
                _ => {
                    if let Some(effect) = self.panes.runs.on_key(&key) {
                        return self.apply(effect);
                    }
                }
            }
            return None;
        }
        if let Some(action) = lookup(CONSOLE_KEYS, &key) {
            self.console_action(action);
            return None;
        }
        // The view borrows what the screen shows; the pane's own state is borrowed apart.
        let Self {
            monitor,
            canary,
            attached,
            procs,
            statuses,
            panes,
            now_ms,
            color,
            focus,
            ..
        } = self;
        let view = View {
            monitor,
            canary: canary.as_ref(),
            attached: attached.as_ref(),
            procs,
            statuses,
            now_ms: *now_ms,
            theme: Theme { color: *color },
            focused: true,
        };
        let effect = panes.on_key(*focus, &view, &key);
        match effect {
            Some(effect) => self.apply(effect),
            None => match key.code {
                KeyCode::Char(c) => self.table_key(c),
                _ => None,
            },
        }
    }

    /// Carries out one of the console's own keys.
    fn console_action(&mut self, action: ConsoleAction) {
        let n = PaneId::ALL.len();
        match action {
            ConsoleAction::Quit => {
                if !self.ask_before_quitting() {
                    self.quit = true;
                }
            }
            ConsoleAction::Help => self.overlay = Overlay::Help { scroll: 0 },
            ConsoleAction::CommandLine => {
                self.input = Input::Command {
                    text: String::new(),
                    cycle: None,
                }
            }
            ConsoleAction::FocusNext => self.focus = PaneId::ALL[(self.focus.index() + 1) % n],
            ConsoleAction::FocusPrevious => {
                self.focus = PaneId::ALL[(self.focus.index() + n - 1) % n]
            }
            ConsoleAction::Mouse => {
                self.mouse = !self.mouse;
                self.mouse_changed = true;
            }
            ConsoleAction::CloseNotice => self.notice = None,
        }
    }

    /// While a step runs, asks before quitting (quitting cancels the step — a host run of
    /// half an hour is lost — and seals nothing); returns whether it asked.
    fn ask_before_quitting(&mut self) -> bool {
        let Some((step, _)) = &self.running else {
            return false;
        };
        self.input = Input::Confirm {
            question: format!(
                "`{step}` is running: quitting stops it and every child process and seals nothing. Quit? y/N"
            ),
            action: Confirmed::Quit,
        };
        true
    }

    /// Carries out what a pane's key asked for.
    fn apply(&mut self, effect: Effect) -> Option<Command> {
        match effect {
            Effect::Handled => {}
            Effect::Command(command, status) => {
                if let Some(text) = status {
                    self.push_status(true, text);
                }
                return self.dispatch(command);
            }
            Effect::Status(ok, text) => self.push_status(ok, text),
            Effect::Overlay { title, lines } => {
                self.overlay = Overlay::Text {
                    title,
                    lines,
                    scroll: 0,
                }
            }
            Effect::Confirm { question, action } => {
                self.input = Input::Confirm { question, action }
            }
            Effect::Search => {
                self.input = Input::Search {
                    text: String::new(),
                }
            }
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
            // `report` seals the run (no step runs after it): its key asks first.
            Some(Command::Report) => {
                self.input = Input::Confirm {
                    question: "report seals the run: no step can run in it afterwards (`new` starts the next). Seal now? y/N".to_owned(),
                    action: Confirmed::Run(Command::Report),
                };
                None
            }
            Some(command) => self.dispatch(command),
            None => {
                self.input = Input::Command {
                    text: format!("{} ", spec.name),
                    cycle: None,
                };
                None
            }
        }
    }

    /// Carries out a confirmed action. A kill goes straight to the process (not through the
    /// canary task, which may be busy running the very step that process serves).
    fn perform(&mut self, action: Confirmed) -> Option<Command> {
        match action {
            Confirmed::Quit => self.quit = true,
            Confirmed::Run(command) => return self.dispatch(command),
            Confirmed::Kill { label, pid, group } => {
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
        None
    }

    /// Where runs live: what the session said, else the live run's parent directory.
    pub fn runs_root(&self) -> Option<std::path::PathBuf> {
        self.panes.runs.root.clone().or_else(|| {
            self.canary
                .as_ref()
                .and_then(|c| c.run_path.parent().map(std::path::Path::to_path_buf))
        })
    }

    /// Sends `command` to the canary task, except the runs views the console shows itself:
    /// `runs` opens the runs pane, `runs compare A B` opens it on the two runs side by side;
    /// `runs open ID` switches the whole screen to that run (the session does it), so the pane
    /// closes first.
    fn dispatch(&mut self, command: Command) -> Option<Command> {
        use crate::canary::command::RunsAction;
        let Command::Runs { action } = &command else {
            return Some(self.submit(command));
        };
        if let RunsAction::Open(_) = action {
            self.panes.runs.open = false;
            return Some(self.submit(command));
        }
        let Some(root) = self.runs_root() else {
            self.push_status(
                false,
                "no runs directory known yet (`--runs-dir DIR` names one)",
            );
            return None;
        };
        match action {
            RunsAction::Compare(a, b) => {
                if let Err(e) = self.panes.runs.open_pair(&root, a, b) {
                    self.push_status(false, format!("runs compare: {e}"));
                }
            }
            _ => self.panes.runs.open_list(&root),
        }
        None
    }

    fn submit(&mut self, command: Command) -> Command {
        if let Command::Target { name } = &command {
            self.story_target = Some(name.clone());
        }
        self.queued += 1;
        command
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
                    Ok(command) => self.dispatch(command),
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
                self.panes.evidence.search(&text);
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
            MouseEventKind::ScrollUp => self.panes.evidence.move_by(-3),
            MouseEventKind::ScrollDown => self.panes.evidence.move_by(3),
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

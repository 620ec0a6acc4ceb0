//! The operator console (SPEC U1–U5): the interactive ratatui screen and the headless
//! `--script` runner, both driving [`crate::canary::Canary`] through one command set.
//!
//! Structure (interactive): the canary task ([`runner`]) owns the `Canary`; the tailer and store
//! poller ([`sources`]) read what processes wrote; a crossterm reader and signal handlers feed
//! terminal input. All of them send one [`AppEvent`] enum into [`run_loop`], which updates
//! [`app::App`] (state in [`state`], the evidence viewer in [`evidence`]) and redraws with the
//! pure [`ui::draw`]. The loop is generic over the ratatui backend, so tests and the bench run
//! it on `TestBackend`.

pub mod app;
pub mod evidence;
pub mod headless;
pub mod ring;
pub mod runner;
pub mod sources;
pub mod state;
pub mod tail;
pub mod ui;

use std::collections::BTreeMap;
use std::io::Stdout;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use self::app::{App, Attached, Pane};
use self::runner::RunnerEvent;
use self::sources::{FileKind, SourceEvent};
use crate::canary::command::{Command, RunsAction};
use crate::canary::{Canary, CanaryOptions};
use crate::telemetry::{memory_path_for, unix_ms_now};

/// Events into the UI loop; capacity of that channel.
pub const EVENT_QUEUE: usize = 1024;
/// The loop wakes this often to advance clocks and redraw if needed.
pub const TICK: Duration = Duration::from_millis(100);
/// A screen with nothing new is still redrawn this often (live timers, uptimes).
pub const IDLE_REDRAW: Duration = Duration::from_millis(500);
/// `/proc` is sampled this often for process states.
pub const PROC_SAMPLE: Duration = Duration::from_millis(1000);
/// The longest the loop spends applying queued events before it draws (it stays live): a file
/// with a long history (a past run of 200,000 events) reaches the screen batch by batch
/// instead of after the whole file; keys keep being answered under a flood.
pub const DRAIN_BUDGET: Duration = Duration::from_millis(50);

/// Everything that reaches the UI loop.
#[derive(Debug)]
pub enum AppEvent {
    Term(TermEvent),
    Source(SourceEvent),
    Runner(RunnerEvent),
    /// SIGTERM, SIGINT or SIGHUP: quit, restoring the terminal and stopping children (U4).
    Signal(&'static str),
}

/// The store the targets pane reads: the SQLite file `sqlite`, or the PostgreSQL database at
/// `postgres_url` when the resolved settings name one ([`sources::postgres_url`], P1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreAt {
    pub sqlite: PathBuf,
    pub postgres_url: Option<String>,
    /// How the SQLite file is opened (a past run's: read-only, immutable).
    pub access: sources::StoreAccess,
}

/// Data-source tasks; replaced wholesale on `attach`, aborted on drop (the store poller's
/// connection is closed then, synchronously).
#[derive(Default)]
pub struct Sources {
    tasks: Vec<JoinHandle<()>>,
    store: Option<sources::StoreHandle>,
}

impl Sources {
    /// Follows the perf-event files (`(source, path)`) and their memory files, and polls the
    /// store at `database` (PostgreSQL instead when `database.postgres_url` is set).
    pub fn start(
        perf: &[(String, PathBuf)],
        database: Option<StoreAt>,
        tx: &mpsc::Sender<AppEvent>,
    ) -> Self {
        Self::start_from(perf, database, tx, sources::FIRST_BATCH_BYTES)
    }

    /// [`Sources::start`] with the tailer's first batch of `first_batch` bytes.
    pub fn start_from(
        perf: &[(String, PathBuf)],
        database: Option<StoreAt>,
        tx: &mpsc::Sender<AppEvent>,
        first_batch: usize,
    ) -> Self {
        let mut files = Vec::new();
        for (source, path) in perf {
            files.push((source.clone(), path.clone(), FileKind::Perf));
            if source == "observed" {
                files.push((source.clone(), memory_path_for(path), FileKind::Memory));
            }
        }
        let mut tasks = vec![sources::spawn_tailer_from(
            files,
            tx.clone(),
            AppEvent::Source,
            first_batch,
        )];
        let mut store = None;
        if let Some(db) = database {
            let (task, handle) = sources::spawn_store_poller(
                db.sqlite,
                db.postgres_url,
                db.access,
                tx.clone(),
                AppEvent::Source,
            );
            tasks.push(task);
            store = Some(handle);
        }
        Self { tasks, store }
    }

    /// Stops every source and closes the store poller's connection; when this returns the
    /// console holds no handle on the run's database (before `report` seals it).
    pub fn close(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(store) = &self.store {
            store.close();
        }
    }

    /// Whether the store poller holds a database connection now.
    pub fn store_open(&self) -> bool {
        self.store
            .as_ref()
            .is_some_and(sources::StoreHandle::is_open)
    }
}

impl Drop for Sources {
    fn drop(&mut self) {
        self.close();
    }
}

pub use crate::canary::client::{parse_proc_stat, proc_state};

/// Applies one event to the app; returns a command for the canary task, if any.
pub fn apply_event(app: &mut App, event: AppEvent) -> Option<Command> {
    match event {
        AppEvent::Term(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => {
            // Debug builds only: F12 panics when PATCHDIFF_CONSOLE_TEST_PANIC is set, so the
            // end-to-end test can check the terminal is restored on panic (U4).
            #[cfg(debug_assertions)]
            if key.code == crossterm::event::KeyCode::F(12)
                && std::env::var_os(crate::config::Key::ConsoleTestPanic.variable()).is_some()
            {
                panic!("test panic requested (F12 with PATCHDIFF_CONSOLE_TEST_PANIC set)");
            }
            return app.on_key(key);
        }
        AppEvent::Term(TermEvent::Mouse(m)) => {
            let area = ratatui::layout::Rect::new(0, 0, app.size.0, app.size.1);
            let panes = ui::layout(area, app.focus).panes;
            app.on_mouse(m, &panes);
        }
        AppEvent::Term(TermEvent::Resize(w, h)) => app.size = (w, h),
        AppEvent::Term(_) => {}
        AppEvent::Source(SourceEvent::Lines {
            source,
            kind,
            lines,
        }) => {
            for l in &lines {
                match kind {
                    FileKind::Perf => app.monitor.ingest_line(&source, l),
                    FileKind::Memory => app.monitor.ingest_memory_line(l),
                }
            }
        }
        AppEvent::Source(SourceEvent::Targets(r)) => match r {
            Ok(t) => {
                app.store_targets = t;
                app.store_error = None;
            }
            Err(e) => app.store_error = Some(e),
        },
        AppEvent::Runner(e) => app.on_runner(e),
        AppEvent::Signal(name) => {
            app.push_status(false, format!("{name} received: quitting"));
            app.quit = true;
        }
    }
    None
}

/// Sets the evidence viewer's row count from the layout for `size` (before a redraw).
fn fit_evidence(app: &mut App) {
    let area = ratatui::layout::Rect::new(0, 0, app.size.0, app.size.1);
    let rows = ui::layout(area, app.focus)
        .panes
        .iter()
        .find(|(p, _)| *p == Pane::Evidence)
        .map_or(8, |(_, r)| r.height.saturating_sub(3) as usize);
    if rows != app.evidence.rows {
        app.evidence.rows = rows.max(1);
        app.evidence.reload();
    }
}

/// What the loop does with a command: send it to the canary task, or (for `attach`) switch the
/// data sources itself.
pub trait CommandSink {
    fn send(&mut self, app: &mut App, command: Command);
    /// Turns mouse capture on or off (U4: mouse optional). The default does nothing.
    fn mouse(&mut self, _on: bool) {}
}

/// The interactive loop, generic over the backend (U4; tests use `TestBackend`). Returns when
/// the app quits or the event channel closes. Redraws at most every [`TICK`] when something
/// changed, and every [`IDLE_REDRAW`] otherwise.
pub async fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &mut mpsc::Receiver<AppEvent>,
    sink: &mut dyn CommandSink,
) -> anyhow::Result<()> {
    run_loop_with(terminal, app, rx, sink, Some(DRAIN_BUDGET)).await
}

/// [`run_loop`] with the time spent applying queued events before a draw bounded by
/// `drain_budget` (`None`: only by [`EVENT_QUEUE`] events, the earlier behaviour, kept for
/// `console-bench`'s side-by-side figure).
pub async fn run_loop_with<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &mut mpsc::Receiver<AppEvent>,
    sink: &mut dyn CommandSink,
    drain_budget: Option<Duration>,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_draw: Option<Instant> = None;
    let mut last_proc = Instant::now() - PROC_SAMPLE;
    let mut sampler = ProcSampler::new();
    let mut dirty = true;
    loop {
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { break };
                let drain_started = Instant::now();
                if let Some(c) = apply_event(app, ev) { sink.send(app, c); }
                drain_queued(app, rx, sink, drain_started, drain_budget);
                dirty = true;
            }
            _ = tick.tick() => {}
        }
        if app.quit {
            break;
        }
        if app.mouse_changed {
            app.mouse_changed = false;
            sink.mouse(app.mouse);
        }
        app.now_ms = unix_ms_now();
        if last_proc.elapsed() >= PROC_SAMPLE {
            last_proc = Instant::now();
            dirty |= sampler.sample(app);
        }
        if dirty || last_draw.is_none_or(|t| t.elapsed() >= IDLE_REDRAW) {
            draw_frame(terminal, app)?;
            last_draw = Some(Instant::now());
            dirty = false;
        }
    }
    Ok(())
}

/// Applies what is already queued, bounded in count ([`EVENT_QUEUE`]) and, when given, in time
/// since `started` (`budget`), before the next redraw (batching per frame).
fn drain_queued(
    app: &mut App,
    rx: &mut mpsc::Receiver<AppEvent>,
    sink: &mut dyn CommandSink,
    started: Instant,
    budget: Option<Duration>,
) {
    for _ in 0..EVENT_QUEUE {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        match rx.try_recv() {
            Ok(ev) => {
                if let Some(c) = apply_event(app, ev) {
                    sink.send(app, c);
                }
            }
            Err(_) => break,
        }
    }
}

/// Draws one frame at the terminal's size and records how long it took.
fn draw_frame<B: Backend>(terminal: &mut Terminal<B>, app: &mut App) -> anyhow::Result<()> {
    if let Ok(size) = terminal.size() {
        app.size = (size.width, size.height);
    }
    let frame_started = Instant::now();
    fit_evidence(app);
    app.monitor.refresh();
    terminal
        .draw(|f| ui::draw(f, app))
        .map_err(|e| anyhow::anyhow!("cannot draw the console: {e}"))?;
    app.frame_ms
        .push(frame_started.elapsed().as_secs_f64() * 1000.0);
    Ok(())
}

/// What the loop samples every [`PROC_SAMPLE`]: process states, RSS and CPU (U1), and the
/// evidence log's length in follow mode.
struct ProcSampler {
    /// sysinfo keeps the CPU baseline between samples; `None` where it is unsupported.
    usage: Option<sysinfo::System>,
    evidence_len: u64,
}

impl ProcSampler {
    fn new() -> Self {
        Self {
            usage: sysinfo::System::new().ok(),
            evidence_len: u64::MAX,
        }
    }

    /// Samples every watched process; in follow mode re-reads the evidence log when it grew.
    /// Returns whether the log was re-read (the screen needs a redraw).
    fn sample(&mut self, app: &mut App) -> bool {
        remember_children(app);
        let pids = app.watched_pids();
        app.proc_usage = sample_usage(&mut self.usage, &pids);
        app.proc_state = pids.into_iter().map(|p| (p, proc_state(p))).collect();
        if !app.evidence.follow {
            return false;
        }
        let len = app
            .evidence
            .path()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        if len == self.evidence_len {
            return false;
        }
        self.evidence_len = len;
        app.evidence.reload();
        true
    }
}

/// Restores the terminal: raw mode off, mouse capture off, main screen, cursor shown. Safe to
/// call more than once (U4).
pub fn restore_terminal() {
    use crossterm::{cursor, event, execute, terminal};
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Pids of the MCP processes this console started, for the panic hook (U4). Their stdin
/// closes when the console dies, which also stops them (W11); the hook does not wait for that.
static CHILD_PIDS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

fn remember_children(app: &App) {
    let pids: Vec<u32> = app
        .canary
        .iter()
        .flat_map(|c| c.processes.iter().filter_map(|p| p.pid))
        .collect();
    let mut slot = CHILD_PIDS.lock().unwrap_or_else(|e| e.into_inner());
    if *slot != pids {
        *slot = pids;
    }
}

/// Raw mode + alternate screen, with a panic hook that restores the terminal first and then
/// sends SIGTERM to the MCP processes the console started (U4).
fn enter_terminal() -> std::io::Result<Terminal<CrosstermBackend<Stdout>>> {
    use crossterm::{execute, terminal};
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        let pids = CHILD_PIDS.lock().map(|p| p.clone()).unwrap_or_default();
        for pid in pids {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        previous(info);
    }));
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    Terminal::new(CrosstermBackend::new(std::io::stdout()))
}

/// Restores the terminal when dropped, also on early return and unwinding.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// The interactive loop's command sink: commands go to the canary task; `attach` switches the
/// data sources to a process an agent host started.
struct Interactive {
    /// The canary task's queue; `None` in attach-only mode.
    commands: Option<mpsc::Sender<Command>>,
    /// The canary task and the options its run was created with (`new` starts the next run
    /// with them); `None` in attach-only mode.
    runner: Option<(runner::RunnerHandle, CanaryOptions)>,
    sources: Sources,
    tx: mpsc::Sender<AppEvent>,
    /// The PostgreSQL store the settings select, for attached stores too (P1).
    postgres_url: Option<String>,
}

impl CommandSink for Interactive {
    fn send(&mut self, app: &mut App, command: Command) {
        if let Some(why) = self.refusal(app, &command) {
            app.queued = app.queued.saturating_sub(1);
            app.push_status(false, why);
            return;
        }
        match command {
            // `runs open ID`: the past run's panes, read-only, through the attach path (its perf
            // events, its store); the whole screen switches (refused while a run is live).
            Command::Runs {
                action: RunsAction::Open(id),
            } => {
                app.queued = app.queued.saturating_sub(1);
                self.open_past_run(app, &id);
            }
            Command::Attach { events, database } => {
                app.queued = app.queued.saturating_sub(1);
                self.attach(app, &events, database.as_deref());
            }
            Command::New => {
                app.queued = app.queued.saturating_sub(1);
                self.new_run(app);
            }
            // Sealed means finished — the console's own handles on the run (the store
            // poller's connection, the tailers) are closed before `report` checkpoints and
            // hashes it; a sealed run's report is refused by the canary before anything.
            Command::Report if !app.canary.as_ref().is_some_and(|c| c.sealed) => {
                self.sources.close();
                self.forward(app, Command::Report);
            }
            command => self.forward(app, command),
        }
    }

    fn mouse(&mut self, on: bool) {
        use crossterm::{event, execute};
        let _ = if on {
            execute!(std::io::stdout(), event::EnableMouseCapture)
        } else {
            execute!(std::io::stdout(), event::DisableMouseCapture)
        };
    }
}

impl Interactive {
    /// Why `command` is refused here, if it is: a step while attached (read-only), or switching
    /// the screen (`attach`, `runs open`) while a canary run is live.
    fn refusal(&self, app: &App, command: &Command) -> Option<String> {
        if let Some(why) = app.read_only_refusal(command) {
            return Some(why);
        }
        let switches = matches!(
            command,
            Command::Attach { .. }
                | Command::Runs {
                    action: RunsAction::Open(_)
                }
        );
        if switches { app.attach_refusal() } else { None }
    }

    /// [`attach`] with this console's sources and store settings.
    fn attach(&mut self, app: &mut App, events: &Path, database: Option<&Path>) {
        attach(
            app,
            &mut self.sources,
            &self.tx,
            events,
            database,
            self.postgres_url.as_deref(),
        );
    }

    /// `runs open ID`: attaches to the past run's observed perf events and store, read-only.
    fn open_past_run(&mut self, app: &mut App, id: &str) {
        let Some(root) = app
            .canary
            .as_ref()
            .and_then(|c| c.run_path.parent().map(Path::to_path_buf))
        else {
            app.push_status(false, "no runs root known yet");
            return;
        };
        let run = crate::canary::resolve_run(&root, id);
        let events = ["host-observed", "observed"]
            .iter()
            .map(|p| run.join(format!("{p}.perf.jsonl")))
            .find(|p| p.exists());
        let Some(events) = events else {
            app.push_status(
                false,
                format!("{} has no observed perf events to open", run.display()),
            );
            return;
        };
        let database = Some(run.join("store.sqlite")).filter(|d| d.exists());
        // Truly read-only — the store opens `immutable=1`, nothing is created in the
        // run (a console killed while it is open leaves the run verifying).
        attach_with(
            app,
            &mut self.sources,
            &self.tx,
            &events,
            database.as_deref(),
            None,
            sources::StoreAccess::ReadOnly,
        );
        app.push_status(true, format!("opened past run {} read-only", run.display()));
    }

    /// `new`: once the run is sealed, starts the next run in this console — a new
    /// run directory and canary task, the screen's sources and evidence logs switched to it.
    fn new_run(&mut self, app: &mut App) {
        let sealed = app.canary.as_ref().is_some_and(|c| c.sealed);
        let Some((_, options)) = self.runner.as_ref().filter(|_| sealed) else {
            app.push_status(
                false,
                if self.runner.is_none() {
                    "`new` needs a canary; this console only watches (attach mode)".to_owned()
                } else {
                    "`new` starts the next run once this one is sealed: run `report` first"
                        .to_owned()
                },
            );
            return;
        };
        let canary = match Canary::create(options.clone()) {
            Ok(c) => c,
            Err(e) => {
                app.push_status(false, format!("cannot start a new run: {e:#}"));
                return;
            }
        };
        let previous = app.canary.as_ref().map(|c| c.run_id.clone());
        self.sources.close();
        self.sources = run_sources(&canary, self.postgres_url.clone(), &self.tx);
        app.evidence = run_evidence_view(&canary.run);
        app.evidence.reload();
        app.monitor = state::Monitor::new();
        app.store_targets.clear();
        app.canary = None;
        let options = canary.options.clone();
        let run_id = canary.run.run_id.clone();
        let handle = runner::spawn(canary, self.tx.clone(), AppEvent::Runner);
        self.commands = Some(handle.commands.clone());
        if let Some((old, _)) = self.runner.replace((handle, options)) {
            // The sealed run's processes are already stopped; its task ends in the background.
            tokio::spawn(old.shutdown());
        }
        app.push_status(
            true,
            format!(
                "new run {run_id} (the sealed run {} stays as it is)",
                previous.unwrap_or_default()
            ),
        );
    }

    /// Any other command goes to the canary task; attach-only mode has none.
    fn forward(&mut self, app: &mut App, command: Command) {
        let Some(commands) = &self.commands else {
            app.queued = app.queued.saturating_sub(1);
            app.push_status(
                false,
                format!(
                    "`{}` needs a canary; this console only watches (attach mode)",
                    command.name()
                ),
            );
            return;
        };
        if let Err(e) = commands.try_send(command) {
            app.queued = app.queued.saturating_sub(1);
            app.push_status(false, format!("command not queued: {e}"));
        }
    }
}

/// Switches the console to watching `events` (and the store at `database`, or the PostgreSQL
/// database at `postgres_url` when the settings name one): a fresh monitor, the file tailed
/// from its start, the evidence viewer on that file.
pub fn attach(
    app: &mut App,
    sources: &mut Sources,
    tx: &mpsc::Sender<AppEvent>,
    events: &Path,
    database: Option<&Path>,
    postgres_url: Option<&str>,
) {
    attach_with(
        app,
        sources,
        tx,
        events,
        database,
        postgres_url,
        sources::StoreAccess::Live,
    );
}

/// [`attach`] opening the store with `access` (a past run's: read-only).
pub fn attach_with(
    app: &mut App,
    sources: &mut Sources,
    tx: &mpsc::Sender<AppEvent>,
    events: &Path,
    database: Option<&Path>,
    postgres_url: Option<&str>,
    access: sources::StoreAccess,
) {
    // The old sources close (and their store connection) before the new ones start.
    sources.close();
    *sources = Sources::start(
        &[("observed".to_owned(), events.to_path_buf())],
        database.map(|d| StoreAt {
            sqlite: d.to_path_buf(),
            postgres_url: postgres_url.map(str::to_owned),
            access,
        }),
        tx,
    );
    app.monitor = state::Monitor::new();
    app.store_targets.clear();
    app.attached = Some(Attached {
        events: events.to_path_buf(),
        database: database.map(Path::to_path_buf),
    });
    // The attached process's own wire log (and the run's transcript) when they sit beside the
    // events file: `X.perf.jsonl` pairs with `X.mcp.jsonl` — never another process's log.
    let mut logs = Vec::new();
    if let Some(wire) = wire_log_beside(events).filter(|p| p.exists()) {
        let stem = wire
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_end_matches(".mcp.jsonl")
                    .to_owned()
            })
            .unwrap_or_default();
        logs.push((format!("{stem} requests/results"), wire));
    }
    if let Some(dir) = events.parent() {
        for (label, name) in [
            ("transcript", "transcript.jsonl"),
            // A4: the agent host's own stream, when the host was launched from a run.
            ("agent host stream (claude)", "agent.claude.jsonl"),
            ("agent host stream (codex)", "agent.codex.jsonl"),
        ] {
            let p = dir.join(name);
            if p.exists() {
                logs.push((label.to_owned(), p));
            }
        }
    }
    logs.push(("perf events".to_owned(), events.to_path_buf()));
    app.evidence = evidence::EvidenceView::new(logs);
    app.evidence.reload();
    app.push_status(true, format!("attached to {}", events.display()));
}

/// The wire log an MCP process writes beside its perf events (E1 naming in a run directory:
/// `observed.perf.jsonl` → `observed.mcp.jsonl`, `host-observed.perf.jsonl` →
/// `host-observed.mcp.jsonl`); `None` when `events` is not named `NAME.perf.jsonl`.
pub fn wire_log_beside(events: &Path) -> Option<PathBuf> {
    let name = events.file_name()?.to_str()?;
    let stem = name.strip_suffix(".perf.jsonl").filter(|s| !s.is_empty())?;
    Some(events.with_file_name(format!("{stem}.mcp.jsonl")))
}

/// RSS and CPU (percent of one core since the previous call) of `pids`; pids that are gone or
/// unreadable are left out.
fn sample_usage(
    system: &mut Option<sysinfo::System>,
    pids: &[u64],
) -> BTreeMap<u64, app::ProcUsage> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate};
    let Some(system) = system.as_mut() else {
        return BTreeMap::new();
    };
    let wanted: Vec<Pid> = pids
        .iter()
        .filter_map(|p| u32::try_from(*p).ok())
        .map(Pid::from_u32)
        .collect();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&wanted),
        true,
        ProcessRefreshKind::nothing().with_memory().with_cpu(),
    );
    wanted
        .iter()
        .filter_map(|pid| {
            system.process(*pid).map(|p| {
                (
                    u64::from(pid.as_u32()),
                    app::ProcUsage {
                        rss_bytes: p.memory(),
                        cpu_percent: p.cpu_usage(),
                    },
                )
            })
        })
        .collect()
}

fn spawn_terminal_input(tx: mpsc::Sender<AppEvent>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = EventStream::new();
        while let Some(Ok(ev)) = stream.next().await {
            if tx.send(AppEvent::Term(ev)).await.is_err() {
                return;
            }
        }
    })
}

fn spawn_signals(tx: mpsc::Sender<AppEvent>) -> JoinHandle<()> {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        };
        let _ = tx.send(AppEvent::Signal(name)).await;
    })
}

/// Opens the interactive console (U1–U4) for a new canary run. Returns when the operator quits
/// or a signal arrives; the terminal is restored and every child process stopped first.
pub async fn run_interactive(options: CanaryOptions) -> anyhow::Result<()> {
    let color = app::color_enabled(&options.settings);
    let postgres_url = sources::postgres_url(&options.settings);
    let canary = Canary::create(options)?;
    let (tx, mut rx) = mpsc::channel::<AppEvent>(EVENT_QUEUE);
    let sources = run_sources(&canary, postgres_url.clone(), &tx);
    let mut app = App::new(color, unix_ms_now());
    app.evidence = run_evidence_view(&canary.run);
    let options = canary.options.clone();
    let handle = runner::spawn(canary, tx.clone(), AppEvent::Runner);
    let mut sink = Interactive {
        commands: Some(handle.commands.clone()),
        runner: Some((handle, options)),
        sources,
        tx: tx.clone(),
        postgres_url,
    };
    let result = run_terminal(&mut app, &tx, &mut rx, &mut sink).await;
    let runner = sink.runner.take();
    drop(sink);
    eprintln!("patchdiff: stopping child processes…");
    if let Some((handle, _)) = runner {
        handle.shutdown().await;
    }
    let shown = app
        .canary
        .as_ref()
        .map_or_else(String::new, |c| c.run_path.display().to_string());
    eprintln!("patchdiff: console closed · evidence {shown}");
    result
}

/// The data sources of a canary run: its processes' perf events and its store.
fn run_sources(
    canary: &Canary,
    postgres_url: Option<String>,
    tx: &mpsc::Sender<AppEvent>,
) -> Sources {
    let run = &canary.run;
    Sources::start(
        &[
            ("observed".to_owned(), run.perf_events("observed")),
            ("full".to_owned(), run.perf_events("full")),
            // An observed process a real agent host started from `host-config` (C4).
            ("host".to_owned(), run.perf_events("host-observed")),
        ],
        Some(StoreAt {
            sqlite: canary.database_path(),
            postgres_url,
            access: sources::StoreAccess::Live,
        }),
        tx,
    )
}

/// The evidence viewer's logs of a canary run.
fn run_evidence_view(run: &crate::evidence::RunDir) -> evidence::EvidenceView {
    evidence::EvidenceView::new(vec![
        ("observed requests/results".into(), run.wire_log("observed")),
        ("full requests/results".into(), run.wire_log("full")),
        ("transcript".into(), run.transcript()),
        // A4: an agent host's own stream and the observed process it started.
        (
            "agent host stream (claude)".into(),
            run.path.join("agent.claude.jsonl"),
        ),
        (
            "agent host stream (codex)".into(),
            run.path.join("agent.codex.jsonl"),
        ),
        (
            "host-observed requests/results".into(),
            run.wire_log(crate::canary::names::HOST_OBSERVED),
        ),
        (
            "worker stderr (observed)".into(),
            run.worker_stderr_log("observed"),
        ),
    ])
}

/// Opens the interactive console in attach mode only (no canary, no child processes): it
/// watches an observed process an agent host started, from its perf-events file `events`
/// (and memory file) and its store `database`. Meant for `patchdiff console --attach-events
/// PATH [--database PATH]`; `:attach` does the same from a running console. Colour and the
/// PostgreSQL store come from the resolved `settings` (U4, P1).
pub async fn run_attach(
    events: PathBuf,
    database: Option<PathBuf>,
    settings: &crate::config::Settings,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::channel::<AppEvent>(EVENT_QUEUE);
    let mut app = App::new(app::color_enabled(settings), unix_ms_now());
    let mut sink = Interactive {
        commands: None,
        runner: None,
        sources: Sources::default(),
        tx: tx.clone(),
        postgres_url: sources::postgres_url(settings),
    };
    sink.attach(&mut app, &events, database.as_deref());
    run_terminal(&mut app, &tx, &mut rx, &mut sink).await
}

/// Terminal input, signals, raw mode and the loop; the terminal is restored on every exit.
async fn run_terminal(
    app: &mut App,
    tx: &mpsc::Sender<AppEvent>,
    rx: &mut mpsc::Receiver<AppEvent>,
    sink: &mut Interactive,
) -> anyhow::Result<()> {
    let input = spawn_terminal_input(tx.clone());
    let signals = spawn_signals(tx.clone());
    let result = {
        let _guard = TerminalGuard;
        match enter_terminal() {
            Ok(mut terminal) => run_loop(&mut terminal, app, rx, sink).await,
            Err(e) => Err(anyhow::anyhow!(
                "cannot open the terminal for the console ({e}); use --script to run headless"
            )),
        }
    };
    input.abort();
    signals.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(state: &str, exit_code: i32) -> String {
        // pid (comm) state, then fields 4..=51 as zeros, then exit_code (field 52).
        let middle = vec!["0"; 48].join(" ");
        format!("4242 (patch diff) {state} {middle} {exit_code}")
    }

    #[test]
    fn proc_stat_gives_state_and_a_zombies_exit_status() {
        assert_eq!(parse_proc_stat(&stat("S", 0)), "S");
        assert_eq!(parse_proc_stat(&stat("Z", 1 << 8)), "Z exit 1");
        assert_eq!(parse_proc_stat(&stat("Z", 9)), "Z signal 9");
        assert_eq!(
            parse_proc_stat("4242 (x) Z 1"),
            "?",
            "a truncated line is not a stat"
        );
        assert_eq!(parse_proc_stat("garbage"), "?");
    }

    #[test]
    fn proc_state_reads_a_real_zombie_and_a_reaped_process() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .expect("sh");
        let pid = u64::from(child.id());
        // Until it is reaped the exited child is a zombie carrying its wait status; poll (the
        // exit is asynchronous) with a deadline rather than sleeping a fixed time.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proc_state(pid) != "Z exit 3" {
            assert!(
                std::time::Instant::now() < deadline,
                "state {}",
                proc_state(pid)
            );
            std::thread::yield_now();
        }
        child.wait().expect("reap");
        assert_eq!(proc_state(pid), "gone");
        assert!(["R", "S"].contains(&proc_state(u64::from(std::process::id())).as_str()));
    }

    #[test]
    fn signal_event_quits() {
        let mut app = App::new(false, 0.0);
        assert_eq!(apply_event(&mut app, AppEvent::Signal("SIGTERM")), None);
        assert!(app.quit);
    }

    #[test]
    fn an_attached_process_pairs_with_its_own_wire_log_only() {
        let p = |s: &str| wire_log_beside(Path::new(s));
        assert_eq!(
            p("/runs/r-1/host-observed.perf.jsonl"),
            Some(PathBuf::from("/runs/r-1/host-observed.mcp.jsonl"))
        );
        assert_eq!(
            p("/runs/r-1/observed.perf.jsonl"),
            Some(PathBuf::from("/runs/r-1/observed.mcp.jsonl"))
        );
        assert_eq!(p("/tmp/events.jsonl"), None);
        assert_eq!(p("/tmp/.perf.jsonl"), None);
    }
}

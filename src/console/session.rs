//! A console session (SPEC U1, U3): the data sources of what the screen shows (a canary run's
//! files and store, an attached process, a past run read-only), the command sink that sends
//! commands to the canary task or switches those sources (`attach`, `runs open`, `new`), and
//! the entry points `run_interactive` and `run_attach`.

use std::path::{Path, PathBuf};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::app::{App, Attached};
use super::event_loop::{AppEvent, CommandSink, EVENT_QUEUE, run_loop};
use super::sources::{self, FileKind};
use super::terminal::{TerminalGuard, enter_terminal, spawn_signals, spawn_terminal_input};
use super::{evidence, runner, state};
use crate::canary::command::{Command, RunsAction};
use crate::canary::{Canary, CanaryOptions};
use crate::telemetry::{memory_path_for, unix_ms_now};

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
        app.panes.evidence = run_evidence_view(&canary.run);
        app.panes.evidence.reload();
        app.monitor = state::Monitor::new();
        app.panes.targets.store.clear();
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
    app.panes.targets.store.clear();
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
    app.panes.evidence = evidence::EvidenceView::new(logs);
    app.panes.evidence.reload();
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

/// Opens the interactive console (U1–U4) for a new canary run. Returns when the operator quits
/// or a signal arrives; the terminal is restored and every child process stopped first.
pub async fn run_interactive(options: CanaryOptions) -> anyhow::Result<()> {
    let color = super::app::color_enabled(&options.settings);
    let postgres_url = sources::postgres_url(&options.settings);
    let canary = Canary::create(options)?;
    let (tx, mut rx) = mpsc::channel::<AppEvent>(EVENT_QUEUE);
    let sources = run_sources(&canary, postgres_url.clone(), &tx);
    let mut app = App::new(color, unix_ms_now());
    app.panes.evidence = run_evidence_view(&canary.run);
    app.panes.runs.root = Some(canary.options.runs_root.clone());
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
    let mut app = App::new(super::app::color_enabled(settings), unix_ms_now());
    app.panes.runs.root = Some(settings.paths.runs_root());
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

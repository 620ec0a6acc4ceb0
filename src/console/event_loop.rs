//! The interactive loop (SPEC U4): one [`AppEvent`] enum from every source — terminal input,
//! the data sources, the canary task, signals — applied to the [`App`] in batches bounded in
//! time before each pure [`ui::draw`]; every second the process table is sampled. Generic over
//! the ratatui backend, so tests and the bench run it on `TestBackend`.

use std::time::{Duration, Instant};

use crossterm::event::{Event as TermEvent, KeyEventKind};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;

use super::app::{App, Pane};
use super::procs::sample_usage;
use super::runner::RunnerEvent;
use super::sources::{FileKind, SourceEvent};
use super::ui;
use crate::canary::client::proc_state;
use crate::canary::command::Command;
use crate::telemetry::unix_ms_now;

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
            let panes = ui::layout_for(area, app.focus, app.process_rows().len()).panes;
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
                    FileKind::Perf => app.monitor.ingest_item(&source, l),
                    FileKind::Memory => app.monitor.ingest_memory_item(l),
                }
            }
        }
        AppEvent::Source(SourceEvent::Targets(r)) => match r {
            Ok(t) => {
                app.panes.targets.store = t;
                app.panes.targets.store_error = None;
            }
            Err(e) => app.panes.targets.store_error = Some(e),
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
    let rows = ui::layout_for(area, app.focus, app.process_rows().len())
        .panes
        .iter()
        .find(|(p, _)| *p == Pane::Evidence)
        .map_or(8, |(_, r)| r.height.saturating_sub(3) as usize);
    if rows != app.panes.evidence.rows {
        app.panes.evidence.rows = rows.max(1);
        app.panes.evidence.reload();
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

/// What the loop samples every [`PROC_SAMPLE`]: process states, parents, RSS and CPU (U1), the
/// agent host's process tree, and the evidence log's length in follow mode.
pub struct ProcSampler {
    /// sysinfo keeps the CPU baseline between samples; `None` where it is unsupported.
    usage: Option<sysinfo::System>,
    evidence_len: u64,
}

impl Default for ProcSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcSampler {
    pub fn new() -> Self {
        Self {
            usage: sysinfo::System::new().ok(),
            evidence_len: u64::MAX,
        }
    }

    /// Samples every watched process; in follow mode re-reads the evidence log when it grew.
    /// Returns whether the log was re-read (the screen needs a redraw).
    pub fn sample(&mut self, app: &mut App) -> bool {
        remember_children(app);
        // The host's process tree, from the process table: the observed process it started and
        // that process's worker have no other source until they write events.
        let host = app
            .canary
            .as_ref()
            .and_then(|c| c.host.as_ref())
            .filter(|h| super::procs::host_running(&h.state))
            .and_then(|h| h.pid);
        if let Some(host) = host {
            for (pid, info) in super::procs::descendants(u64::from(host)) {
                if !app.procs.host_tree.contains(&pid) {
                    app.procs.host_tree.push(pid);
                }
                app.procs.info.insert(pid, info);
            }
        }
        let pids = app.watched_pids();
        for pid in &pids {
            if let Some(info) = super::procs::read_info(*pid) {
                app.procs.info.insert(*pid, info);
            }
        }
        app.procs.usage = sample_usage(&mut self.usage, &pids);
        app.procs.state = pids.into_iter().map(|p| (p, proc_state(p))).collect();
        // A process first seen ended keeps the uptime it had then.
        let now = app.now_ms;
        let ended: Vec<u64> = app
            .procs
            .state
            .keys()
            .copied()
            .filter(|p| app.procs.gone(*p))
            .collect();
        for pid in ended {
            app.procs.ended_ms.entry(pid).or_insert(now);
        }
        if !app.panes.evidence.follow {
            return false;
        }
        let len = app
            .panes
            .evidence
            .path()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        if len == self.evidence_len {
            return false;
        }
        self.evidence_len = len;
        app.panes.evidence.reload();
        true
    }
}

/// Pids of the MCP processes this console started, for the panic hook (U4). Their stdin
/// closes when the console dies, which also stops them (W11); the hook does not wait for that.
pub(crate) static CHILD_PIDS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_event_quits() {
        let mut app = App::new(false, 0.0);
        assert_eq!(apply_event(&mut app, AppEvent::Signal("SIGTERM")), None);
        assert!(app.quit);
    }
}

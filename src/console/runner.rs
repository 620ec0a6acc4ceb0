//! The canary task (SPEC U1, U3): one tokio task owns the [`Canary`], receives [`Command`]s over
//! an mpsc channel, runs them one at a time and publishes a [`CanarySnapshot`] before and after
//! each step. The UI never awaits a step; quitting drops the command sender, which cancels a
//! running step and stops every child process.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::canary::command::Command;
use crate::canary::host::HostProgress;
use crate::canary::{Canary, StepOutcome, TargetRow};
use crate::telemetry::unix_ms_now;

/// Commands that may wait in the queue while a step runs.
pub const COMMAND_QUEUE: usize = 16;
/// How often a running step's agent-host progress is looked at.
pub const HOST_PROGRESS_INTERVAL: Duration = Duration::from_millis(250);
/// How long shutdown waits for children to stop before giving up (their owners still kill
/// them on drop).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// One MCP process as the run knows it (U1).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSnapshot {
    /// `full` or `observed`.
    pub kind: &'static str,
    pub pid: Option<u32>,
    /// Unix ms when it was launched.
    pub started_ms: f64,
}

/// What the UI shows of the canary; published by the canary task.
#[derive(Debug, Clone, PartialEq)]
pub struct CanarySnapshot {
    pub run_id: String,
    pub run_path: PathBuf,
    /// The database the run's processes share (read by the targets pane).
    pub database: PathBuf,
    pub processes: Vec<ProcessSnapshot>,
    /// Exit status of stopped processes, by kind.
    pub exits: Vec<(String, String)>,
    pub targets: Vec<TargetRow>,
    /// Steps run so far, oldest first (at most the last 64).
    pub steps: Vec<StepOutcome>,
    /// The agent host of this run (A1), while it runs and after.
    pub host: Option<HostProgress>,
    /// Why the run stopped before the agent acted (`infra_abort`), if it did.
    pub infra_abort: Option<String>,
    /// `report` sealed the run; steps are refused, `new` starts the next run.
    pub sealed: bool,
}

impl CanarySnapshot {
    /// Takes a snapshot of `canary` now.
    pub fn of(canary: &Canary) -> Self {
        let now = unix_ms_now();
        let processes = [&canary.full, &canary.observed]
            .into_iter()
            .flatten()
            .map(|p| ProcessSnapshot {
                kind: p.kind.as_str(),
                pid: p.pid,
                started_ms: now - p.started.elapsed().as_secs_f64() * 1000.0,
            })
            .collect();
        let skip = canary.steps.len().saturating_sub(64);
        Self {
            run_id: canary.run.run_id.clone(),
            run_path: canary.run.path.clone(),
            database: canary.database_path(),
            processes,
            exits: canary
                .exits
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            targets: canary.targets.clone(),
            steps: canary.steps[skip..].to_vec(),
            host: canary.host_progress.lock().ok().and_then(|p| p.clone()),
            infra_abort: canary.infra_abort(),
            sealed: canary.is_sealed(),
        }
    }
}

/// What the canary task reports to the UI.
#[derive(Debug, Clone)]
pub enum RunnerEvent {
    /// A step started.
    Started(String),
    /// A step finished; `output` carries multi-line text to show (e.g. `host-config`).
    Finished {
        outcome: StepOutcome,
        output: Option<String>,
    },
    Snapshot(Box<CanarySnapshot>),
    /// The running agent host's progress changed (turns, last tool call; U1).
    Host(Box<HostProgress>),
    /// A progress line of the running step (`compare`: one per finished member run).
    Progress(String),
    /// The task stopped every process and ended.
    Stopped,
}

/// The UI's handle on the canary task.
pub struct RunnerHandle {
    pub commands: mpsc::Sender<Command>,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl RunnerHandle {
    /// Cancels any running step, stops every process and waits (bounded) for the task.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        drop(self.commands);
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.task).await;
    }
}

/// Spawns the task owning `canary`; its events go to `events` via `wrap`.
pub fn spawn<E: Send + 'static>(
    mut canary: Canary,
    events: mpsc::Sender<E>,
    wrap: fn(RunnerEvent) -> E,
) -> RunnerHandle {
    let (tx, mut rx) = mpsc::channel::<Command>(COMMAND_QUEUE);
    let shutdown = CancellationToken::new();
    let cancelled = shutdown.clone();
    // A long step's progress lines (`compare`) reach the screen while it runs; a full queue
    // drops a line rather than block the step.
    let lines = events.clone();
    canary.comparison.progress = Some(std::sync::Arc::new(move |line: String| {
        let _ = lines.try_send(wrap(RunnerEvent::Progress(line)));
    }));
    let task = tokio::spawn(async move {
        let send = |e: RunnerEvent| {
            let events = events.clone();
            async move {
                let _ = events.send(wrap(e)).await;
            }
        };
        send(RunnerEvent::Snapshot(Box::new(CanarySnapshot::of(&canary)))).await;
        loop {
            let command = tokio::select! {
                c = rx.recv() => match c { Some(c) => c, None => break },
                _ = cancelled.cancelled() => break,
            };
            send(RunnerEvent::Started(command.name().to_owned())).await;
            let progress = canary.host_progress.clone();
            let mut last: Option<HostProgress> = None;
            let mut tick = tokio::time::interval(HOST_PROGRESS_INTERVAL);
            let outcome = {
                let step = canary.execute(&command);
                tokio::pin!(step);
                loop {
                    tokio::select! {
                        o = &mut step => break Some(o),
                        _ = cancelled.cancelled() => break None,
                        _ = tick.tick() => {
                            let now = progress.lock().ok().and_then(|p| p.clone());
                            if now.is_some() && now != last {
                                last.clone_from(&now);
                                if let Some(p) = now {
                                    send(RunnerEvent::Host(Box::new(p))).await;
                                }
                            }
                        }
                    }
                }
            };
            let Some(outcome) = outcome else { break };
            let output = match (&command, outcome.ok) {
                (Command::HostConfig { host, .. }, true) => Some(canary.host_config(*host)),
                (Command::Target { name }, true) => canary.target_story(name).ok(),
                (Command::Runs { action }, true) => canary.runs_view(action).ok(),
                // A comparison's report, whatever its verdict.
                (Command::Compare { .. }, _) => {
                    canary.comparison.last.as_ref().and_then(|c| c.text.clone())
                }
                _ => None,
            };
            send(RunnerEvent::Finished { outcome, output }).await;
            send(RunnerEvent::Snapshot(Box::new(CanarySnapshot::of(&canary)))).await;
        }
        canary.stop(None).await;
        send(RunnerEvent::Stopped).await;
    });
    RunnerHandle {
        commands: tx,
        shutdown,
        task,
    }
}

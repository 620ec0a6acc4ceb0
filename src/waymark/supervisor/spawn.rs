//! The spawn seam (W1, W9, W11): the supervisor starts every generation through a [`Spawner`].
//! In production that is [`NodeSpawner`], a real Node child in its own process group that dies
//! with its parent; the supervisor's unit tests use an in-process scripted child speaking the
//! same frames over in-memory pipes (`supervisor::scripted`), so retirement reasons, the launch
//! window and the phase ceilings are tested on paused time without Node.

use std::path::Path;
use std::process::ExitStatus;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};

use super::super::Language;
use super::super::config::WaymarkConfig;
use super::super::error::{WorkerError, WorkerErrorCode};
use super::super::process::{ProcessIdentity, RssSampler, kill_group};

/// The worker's stdin, as the supervisor writes frames to it.
pub(crate) type WorkerStdin = Box<dyn AsyncWrite + Send + Unpin>;
/// The worker's stdout or stderr, as the supervisor reads it.
pub(crate) type WorkerOutput = Box<dyn AsyncRead + Send + Unpin>;

/// What a [`Spawner`] is asked to start: generation `generation` with its owned `root`, a
/// resident worker (`language` `None`) or a one-shot runner for `language`, running `script`.
pub(crate) struct LaunchSpec<'a> {
    pub generation: u64,
    pub root: &'a Path,
    pub language: Option<Language>,
    pub script: &'a Path,
    pub config: &'a WaymarkConfig,
}

/// A started worker: its pid (0 when it is not an OS process), its three pipes and the handle
/// that kills, reaps and measures it.
pub(crate) struct SpawnedWorker {
    pub pid: u32,
    pub stdin: WorkerStdin,
    pub stdout: WorkerOutput,
    pub stderr: WorkerOutput,
    pub process: Box<dyn WorkerProcess>,
}

/// The supervisor's hold on a started worker (W9, W11). Killing is idempotent and never blocks;
/// `wait` reaps it.
pub(crate) trait WorkerProcess: Send {
    /// W11: kills the worker (for a Node child: SIGKILL to its whole process group). Called only
    /// while the worker is unreaped, so its pid cannot have been reused.
    fn kill(&mut self);
    /// Waits for the worker to exit (reaps it).
    fn wait(&mut self) -> BoxFuture<'_, std::io::Result<ExitStatus>>;
    /// W9: the worker's resident set size in bytes, `None` when unreadable.
    fn rss_bytes(&mut self) -> Option<u64>;
    /// W12: the worker's creation identity for the ownership manifest (`None` when it is not an
    /// OS process).
    fn identity(&self) -> Option<ProcessIdentity>;
}

/// Starts workers (W1). Errors: `WAYMARK_WORKER_SPAWN` naming what could not be started.
pub(crate) trait Spawner: Send + Sync {
    fn spawn(&self, spec: &LaunchSpec<'_>) -> Result<SpawnedWorker, WorkerError>;
}

/// The production spawner: `node --max-old-space-size=768 SCRIPT --generation N --root DIR
/// [--language L] ARGS…` in the script directory, in its own process group (W11), dying with
/// its parent, without an inherited `NODE_OPTIONS`.
pub(crate) struct NodeSpawner;

impl NodeSpawner {
    /// The Node command for `spec` (W9 old-space cap, W11 own process group and parent-death
    /// signal); `NODE_OPTIONS` is not inherited.
    fn command(spec: &LaunchSpec<'_>) -> tokio::process::Command {
        let config = spec.config;
        let mut cmd = tokio::process::Command::new(&config.node_binary);
        cmd.arg(format!(
            "--max-old-space-size={}",
            config.limits.max_old_space_mib
        ))
        .arg(spec.script)
        .arg("--generation")
        .arg(spec.generation.to_string())
        .arg("--root")
        .arg(spec.root);
        if let Some(l) = spec.language {
            cmd.arg("--language").arg(l.as_str());
        }
        cmd.args(&config.worker_args)
            .current_dir(&config.script_dir)
            .env_remove("NODE_OPTIONS")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0); // W11: own process group
        // W11: and it dies with us even when its main thread is busy or it is stopped.
        super::super::process::die_with_parent(&mut cmd);
        cmd
    }
}

impl Spawner for NodeSpawner {
    fn spawn(&self, spec: &LaunchSpec<'_>) -> Result<SpawnedWorker, WorkerError> {
        let mut child = Self::command(spec).spawn().map_err(|e| {
            WorkerError::new(
                WorkerErrorCode::Spawn,
                format!(
                    "cannot start {} {}: {e}",
                    spec.config.node_binary.display(),
                    spec.script.display()
                ),
            )
        })?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = kill_group(pid);
            return Err(WorkerError::new(
                WorkerErrorCode::Spawn,
                "child pipes were not created",
            ));
        };
        Ok(SpawnedWorker {
            pid,
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            process: Box::new(NodeProcess {
                child,
                pid,
                sampler: RssSampler::new(),
            }),
        })
    }
}

/// A Node child in its own process group.
struct NodeProcess {
    child: tokio::process::Child,
    pid: u32,
    sampler: RssSampler,
}

impl WorkerProcess for NodeProcess {
    fn kill(&mut self) {
        let _ = kill_group(self.pid);
    }

    fn wait(&mut self) -> BoxFuture<'_, std::io::Result<ExitStatus>> {
        Box::pin(self.child.wait())
    }

    fn rss_bytes(&mut self) -> Option<u64> {
        self.sampler.rss_bytes(self.pid)
    }

    fn identity(&self) -> Option<ProcessIdentity> {
        ProcessIdentity::of(self.pid)
    }
}

//! TEST-ONLY: a scripted worker behind the spawn seam. It runs in-process as a tokio task and
//! speaks the real frames (the same [`FrameCodec`], `ready` and `result` messages) over in-memory
//! pipes, reading the real request file, so the supervisor's policy — retirement reasons, the
//! launch window, phase ceilings, pauses, caller kinds, the quarantine — is tested on paused
//! time in milliseconds. What it fakes: the Node process (kill is aborting the task, RSS is a
//! number the script sets). The Node fault workers in `integrations/waymark/test-fixtures/`
//! remain the end-to-end check of the same faults.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::super::codec::{FrameCodec, MAX_REQUEST_FRAME, MAX_RESPONSE_FRAME};
use super::super::error::WorkerError;
use super::super::process::ProcessIdentity;
use super::super::protocol::{
    DiscoverFrame, ReadyFrame, ResultFrame, SupervisorMessage, WorkerMessage,
};
use super::spawn::{LaunchSpec, SpawnedWorker, Spawner, WorkerProcess};

/// What the scripted worker does with one request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// Answers at once with no scopes.
    Answer,
    /// Answers after this much (tokio) time.
    AnswerAfter(Duration),
    /// Never answers.
    Hang,
    /// Exits without answering (closes its pipes).
    Die,
    /// Writes a frame whose body is not JSON.
    Garbage,
    /// Answers with the wrong request id.
    WrongRequest,
    /// Answers with the wrong generation id.
    WrongGeneration,
    /// Reports this RSS (bytes) and never answers.
    Balloon(u64),
}

/// Decides the reply to one request from its frame and the request file's content.
pub(crate) type ReplyFn = Arc<dyn Fn(&DiscoverFrame, &str) -> Reply + Send + Sync>;

/// How one generation behaves: when it says ready (`None`: never) and its reply to each
/// request, given the frame and the request file's content.
#[derive(Clone)]
pub(crate) struct Script {
    pub ready_after: Option<Duration>,
    pub reply: ReplyFn,
}

impl Script {
    /// Ready at once; `reply` for every request.
    pub(crate) fn replying(
        reply: impl Fn(&DiscoverFrame, &str) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self {
            ready_after: Some(Duration::ZERO),
            reply: Arc::new(reply),
        }
    }
}

/// Starts scripted workers: `script(generation)` decides each generation's behaviour.
pub(crate) struct ScriptedSpawner {
    script: Box<dyn Fn(u64) -> Script + Send + Sync>,
    pub spawned: AtomicU64,
}

impl ScriptedSpawner {
    pub(crate) fn new(script: impl Fn(u64) -> Script + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            script: Box::new(script),
            spawned: AtomicU64::new(0),
        })
    }
}

type ChildCodec = FrameCodec<SupervisorMessage, WorkerMessage>;

impl Spawner for ScriptedSpawner {
    fn spawn(&self, spec: &LaunchSpec<'_>) -> Result<SpawnedWorker, WorkerError> {
        self.spawned.fetch_add(1, Ordering::SeqCst);
        let script = (self.script)(spec.generation);
        let (stdin, child_in) = tokio::io::duplex(64 * 1024);
        let (child_out, stdout) = tokio::io::duplex(64 * 1024);
        let (child_err, stderr) = tokio::io::duplex(64 * 1024);
        let rss = Arc::new(AtomicU64::new(50 * 1024 * 1024));
        let exit = Arc::new(watch::Sender::new(None::<ExitStatus>));
        let generation = spec.generation;
        let root = spec.root.to_path_buf();
        let task = {
            let rss = rss.clone();
            let exit = exit.clone();
            tokio::spawn(async move {
                let _stderr = child_err;
                run(generation, root, script, child_in, child_out, rss).await;
                exit.send_if_modified(|e| {
                    if e.is_none() {
                        *e = Some(ExitStatus::from_raw(0));
                        true
                    } else {
                        false
                    }
                });
            })
        };
        Ok(SpawnedWorker {
            pid: 0,
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            process: Box::new(ScriptedProcess {
                abort: task.abort_handle(),
                exit,
                rss,
            }),
        })
    }
}

/// The scripted worker's main loop: ready (per script), then one reply per request frame.
async fn run(
    generation: u64,
    root: std::path::PathBuf,
    script: Script,
    stdin: tokio::io::DuplexStream,
    stdout: tokio::io::DuplexStream,
    rss: Arc<AtomicU64>,
) {
    let mut frames = FramedRead::new(
        stdin,
        ChildCodec::new(MAX_REQUEST_FRAME, MAX_RESPONSE_FRAME),
    );
    let mut out = FramedWrite::new(
        stdout,
        ChildCodec::new(MAX_REQUEST_FRAME, MAX_RESPONSE_FRAME),
    );
    let Some(delay) = script.ready_after else {
        // Never ready: hold the pipes open until stdin closes.
        while frames.next().await.is_some() {}
        return;
    };
    tokio::time::sleep(delay).await;
    let ready = WorkerMessage::Ready(ReadyFrame {
        generation,
        pid: 0,
        mode: "resident".into(),
        languages: vec!["javascript".into()],
        warmup_ms: 0.0,
        engine: "scripted".into(),
    });
    if out.send(ready).await.is_err() {
        return;
    }
    while let Some(Ok(SupervisorMessage::Discover(frame))) = frames.next().await {
        let source =
            std::fs::read_to_string(root.join(&frame.token).join("source")).unwrap_or_default();
        let answer = |generation: u64, request: u64| {
            WorkerMessage::Result(ResultFrame {
                generation,
                request,
                ok: true,
                scopes: Some(Vec::new()),
                parse_ms: Some(0.1),
                read_ms: Some(0.0),
                has_error: Some(false),
                error_line: None,
                scope_count: Some(0),
                names: None,
                error: None,
            })
        };
        let sent = match (script.reply)(&frame, &source) {
            Reply::Answer => out.send(answer(generation, frame.request)).await,
            Reply::AnswerAfter(d) => {
                tokio::time::sleep(d).await;
                out.send(answer(generation, frame.request)).await
            }
            Reply::Hang => std::future::pending().await,
            Reply::Die => return,
            Reply::Garbage => {
                let w = out.get_mut();
                let _ = w.write_all(&[0, 0, 0, 3, b'{', b'{', b'{']).await;
                let _ = w.flush().await;
                std::future::pending().await
            }
            Reply::WrongRequest => out.send(answer(generation, frame.request + 1000)).await,
            Reply::WrongGeneration => out.send(answer(generation + 1000, frame.request)).await,
            Reply::Balloon(bytes) => {
                rss.store(bytes, Ordering::SeqCst);
                std::future::pending().await
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// The scripted worker's process handle: kill aborts its task (its pipes close, as a killed
/// child's do) and reports SIGKILL.
struct ScriptedProcess {
    abort: tokio::task::AbortHandle,
    exit: Arc<watch::Sender<Option<ExitStatus>>>,
    rss: Arc<AtomicU64>,
}

impl WorkerProcess for ScriptedProcess {
    fn kill(&mut self) {
        self.abort.abort();
        self.exit.send_if_modified(|e| {
            if e.is_none() {
                *e = Some(ExitStatus::from_raw(9)); // terminated by SIGKILL
                true
            } else {
                false
            }
        });
    }

    fn wait(&mut self) -> BoxFuture<'_, std::io::Result<ExitStatus>> {
        let mut rx = self.exit.subscribe();
        Box::pin(async move {
            let status = rx
                .wait_for(Option::is_some)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            Ok(status.unwrap_or_else(|| ExitStatus::from_raw(0)))
        })
    }

    fn rss_bytes(&mut self) -> Option<u64> {
        Some(self.rss.load(Ordering::SeqCst))
    }

    fn identity(&self) -> Option<ProcessIdentity> {
        None
    }
}

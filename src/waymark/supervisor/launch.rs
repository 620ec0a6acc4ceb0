//! Starting generations (W1, W6, W10–W12): the rolling launch window, the owned root and its
//! manifest, the spawn (through the [`Spawner`](super::spawn::Spawner) seam), the generation's
//! tasks, and the readiness wait (7 s, counted on running time).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use super::super::Language;
use super::super::ceiling;
use super::super::config::{WaymarkLimits, WaymarkMode};
use super::super::error::{WorkerError, WorkerErrorCode};
use super::super::process::{ProcessIdentity, StderrBuffer, capture_stderr};
use super::super::protocol::ReadyFrame;
use super::super::stale::{self, Manifest};
use super::exchange::read_loop;
use super::generation::{Generation, GenerationState, lock, worker_codec};
use super::retire::{open_stderr_log, retire_at_age, sample_rss};
use super::spawn::{LaunchSpec, WorkerOutput};
use super::status::RetirementReason;
use super::{Inner, error_for_reason, note_paused};
use crate::telemetry::{EventKind, Outcome, PerfEvent, Span, attr};

impl Inner {
    /// Resident: the current generation, ready; launches one when there is none (W10 limits).
    /// The launch decision is serialized by `launching`, so concurrent callers share one
    /// generation; the readiness wait (W6, 7 s) holds neither that lock nor a queue descriptor.
    /// Time this process was paused during the wait goes on `readiness` as `paused_ms`.
    pub(super) async fn ensure_resident(
        &self,
        readiness: &mut Span,
    ) -> Result<Arc<Generation>, WorkerError> {
        let worker = {
            let _launching = self.launching.lock().await;
            match self.usable_resident() {
                Some(worker) => worker,
                None => self.launch(None).await?,
            }
        };
        self.wait_ready(&worker, readiness).await?;
        Ok(worker)
    }

    /// The current resident generation when it may take requests (retiring it at its W10 age).
    fn usable_resident(&self) -> Option<Arc<Generation>> {
        let worker = lock(&self.state).current.clone()?;
        if self.age(&worker) >= self.config.limits.max_age {
            self.retire(
                &worker,
                RetirementReason::AgeLimit,
                "generation reached its maximum age",
                true,
            );
            return None;
        }
        (!worker.is_retired()).then_some(worker)
    }

    /// W1 oneshot: a fresh runner for `language`, ready.
    pub(super) async fn start_oneshot(
        &self,
        language: Language,
        readiness: &mut Span,
    ) -> Result<Arc<Generation>, WorkerError> {
        let worker = self.launch(Some(language)).await?;
        if let Err(e) = self.wait_ready(&worker, readiness).await {
            self.retire(&worker, RetirementReason::StartupTimeout, &e.message, false);
            return Err(e);
        }
        Ok(worker)
    }

    /// Waits for `worker`'s ready frame within the readiness ceiling (W6, 7 s of running
    /// time); past it the generation retires as `startup_timeout`. A worker that retired
    /// before ready fails with its retirement's code, with the tail of its stderr.
    async fn wait_ready(
        &self,
        worker: &Arc<Generation>,
        readiness: &mut Span,
    ) -> Result<(), WorkerError> {
        let ceiling = self.config.limits.readiness;
        let mut rx = worker.state.subscribe();
        let started = async {
            rx.wait_for(|s| !matches!(s, GenerationState::Starting))
                .await
                .map(|s| s.clone())
        };
        let measured = ceiling::within(ceiling, started).await;
        note_paused(readiness, measured.paused);
        let state = match measured.value {
            None => {
                let detail = format!(
                    "not ready within {} ms (W6 readiness ceiling)",
                    ceiling.as_millis()
                );
                self.retire(worker, RetirementReason::StartupTimeout, &detail, false);
                return Err(WorkerError::new(
                    WorkerErrorCode::StartupTimeout,
                    format!("worker generation {}: {detail}", worker.id),
                ));
            }
            Some(Err(_)) => {
                return Err(WorkerError::new(
                    WorkerErrorCode::Protocol,
                    format!("worker generation {} vanished during startup", worker.id),
                ));
            }
            Some(Ok(state)) => state,
        };
        match state.retirement() {
            None => Ok(()),
            Some((reason, detail)) => {
                let mut e = error_for_reason(reason, worker.id, detail);
                // A child that died during startup usually said why on stderr.
                let mut done = worker.stderr_done.subscribe();
                let _ =
                    tokio::time::timeout(Duration::from_millis(500), done.wait_for(|d| *d)).await;
                let tail = worker.stderr_tail(600);
                if !tail.is_empty() {
                    e.message = format!("{}; stderr: {tail}", e.message);
                }
                Err(e)
            }
        }
    }

    /// Starts a generation (W1, W10, W11): a resident one (`language` `None`, counted against
    /// the launch window) or a one-shot process for `language`. Its owned root holds the
    /// ownership manifest; its reader, stderr capture, RSS sampler and (resident) age timer run
    /// as tasks. Errors: `RESTART_LIMIT` (window full), `SPAWN`, `CANCELLED` (shut down).
    async fn launch(&self, language: Option<Language>) -> Result<Arc<Generation>, WorkerError> {
        self.sweep_once();
        let now = self.config.clock.now();
        let id = self.reserve_generation(language.is_none(), now)?;
        let script = self.config.entry_script();
        self.spawn_generation(id, now, language, &script)
            .inspect(|_| lock(&self.state).last_launch_failed = false)
            .inspect_err(|e| {
                // Say why at once (a preflight reads this), not only in a log.
                if e.code != WorkerErrorCode::Cancelled {
                    lock(&self.state).last_launch_failed = true;
                    self.recorder.record(
                        PerfEvent::point(EventKind::WorkerLaunchFailed.as_str())
                            .id(attr::GENERATION, id)
                            .outcome(Outcome::Failed)
                            .attr(attr::CODE, e.code.as_str())
                            .attr(attr::ERROR, e.message.as_str())
                            .attr(attr::SCRIPT, script.display().to_string()),
                    );
                }
            })
    }

    /// [`Self::launch`] after the generation id is reserved.
    fn spawn_generation(
        &self,
        id: u64,
        now: Instant,
        language: Option<Language>,
        script: &Path,
    ) -> Result<Arc<Generation>, WorkerError> {
        let (root, mut manifest) = self.create_root(id)?;
        let spec = LaunchSpec {
            generation: id,
            root: &root,
            language,
            script,
            config: &self.config,
        };
        let spawned_wall = std::time::Instant::now();
        let spawned = match self.spawner.spawn(&spec) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&root);
                return Err(e);
            }
        };
        manifest.child = spawned.process.identity();
        let _ = stale::write_manifest(&root, &manifest);
        let worker = Arc::new(Generation {
            id,
            mode: if language.is_some() {
                WaymarkMode::Oneshot
            } else {
                WaymarkMode::Resident
            },
            pid: spawned.pid,
            root,
            started: now,
            spawned_wall,
            state: watch::Sender::new(GenerationState::Starting),
            writer: tokio::sync::Mutex::new(Some(FramedWrite::new(spawned.stdin, worker_codec()))),
            pending: Mutex::new(None),
            served: AtomicU64::new(0),
            process: Mutex::new(Some(spawned.process)),
            stderr: Arc::new(Mutex::new(StderrBuffer::default())),
            stderr_done: watch::Sender::new(false),
            cancel: CancellationToken::new(),
            last_rss: AtomicU64::new(0),
        });
        let shut_down = self.register(&worker, script);
        self.start_tasks(&worker, spawned.stdout, spawned.stderr);
        if shut_down {
            // Shutdown raced this launch: it saw no such generation, so retire it here.
            self.retire(
                &worker,
                RetirementReason::Shutdown,
                "launched during shutdown",
                false,
            );
            return Err(WorkerError::new(
                WorkerErrorCode::Cancelled,
                "the Waymark worker has been shut down",
            ));
        }
        Ok(worker)
    }

    /// Takes the next generation id; a resident launch must fit the launch window (W10).
    fn reserve_generation(&self, resident: bool, now: Instant) -> Result<u64, WorkerError> {
        let mut st = lock(&self.state);
        if st.shut_down {
            return Err(WorkerError::new(
                WorkerErrorCode::Cancelled,
                "the Waymark worker has been shut down",
            ));
        }
        if resident {
            admit_in_window(&mut st.launches, now, &self.config.limits)?;
        }
        st.launches_total += 1;
        let id = st.next_generation;
        st.next_generation += 1;
        Ok(id)
    }

    /// Creates the generation's owned root (0700) under the work root and writes its
    /// ownership manifest (W11, W12); on failure nothing is left behind.
    fn create_root(&self, id: u64) -> Result<(PathBuf, Manifest), WorkerError> {
        let spawn_err = |what: String, e: &dyn std::fmt::Display| {
            WorkerError::new(WorkerErrorCode::Spawn, format!("{what}: {e}"))
        };
        let work_root = &self.config.work_root;
        stale::create_private_dir(work_root)
            .map_err(|e| spawn_err(format!("cannot create {}", work_root.display()), &e))?;
        let random = uuid::Uuid::new_v4().simple().to_string();
        let root = work_root.join(format!(
            "{}{}-g{}-{}",
            stale::ROOT_PREFIX,
            std::process::id(),
            id,
            &random[..8]
        ));
        stale::create_private_dir(&root)
            .map_err(|e| spawn_err(format!("cannot create {}", root.display()), &e))?;
        let manifest = Manifest {
            format: stale::MANIFEST_FORMAT,
            generation: id,
            owner: self.own.unwrap_or(ProcessIdentity {
                pid: std::process::id(),
                start_time: 0,
            }),
            child: None,
            created_unix_ms: crate::telemetry::unix_ms_now() as u64,
        };
        if let Err(e) = stale::write_manifest(&root, &manifest) {
            let _ = std::fs::remove_dir_all(&root);
            return Err(spawn_err("cannot write the ownership manifest".into(), &e));
        }
        Ok((root, manifest))
    }

    /// Makes `worker` live (and current, if resident) and records `worker_launch`. Returns
    /// whether a shutdown raced the launch.
    fn register(&self, worker: &Arc<Generation>, script: &Path) -> bool {
        let (launches_in_window, shut_down) = {
            let mut st = lock(&self.state);
            st.live.insert(worker.id, worker.clone());
            st.latest = Some((worker.id, worker.pid));
            if worker.mode == WaymarkMode::Resident && !st.shut_down {
                st.current = Some(worker.clone());
            }
            (st.launches.len(), st.shut_down)
        };
        self.recorder.record(
            PerfEvent::point(EventKind::WorkerLaunch.as_str())
                .id(attr::GENERATION, worker.id)
                .attr(attr::PID, worker.pid)
                .attr(attr::MODE, worker.mode.as_str())
                .attr(attr::LAUNCHES_IN_WINDOW, launches_in_window)
                .attr(attr::SCRIPT, script.display().to_string()),
        );
        shut_down
    }

    /// The generation's tasks: frame reader, stderr capture (teed to the E1 log when
    /// configured), RSS sampler (W9) and, for a resident generation, the age timer (W10).
    fn start_tasks(&self, worker: &Arc<Generation>, stdout: WorkerOutput, stderr: WorkerOutput) {
        let weak = self.this.clone();
        tokio::spawn(read_loop(
            weak,
            worker.clone(),
            FramedRead::new(stdout, worker_codec()),
        ));
        let g = worker.clone();
        let cap = self.config.limits.stderr_cap_bytes;
        let (id, pid) = (worker.id, worker.pid);
        let tee = self.config.stderr_log.as_deref().and_then(|path| {
            let mut f = open_stderr_log(path)?;
            use std::io::Write;
            f.write_all(format!("=== generation {id} pid {pid} launched ===\n").as_bytes())
                .ok()?;
            // E1 like every evidence file: a secret the worker prints (its environment is this
            // process's) is redacted, line by line; the held-back last line is written when
            // the capture ends, before `stderr_done`.
            Some(crate::redact::RedactingWriter::new(
                f,
                crate::redact::process().clone(),
            ))
        });
        tokio::spawn(async move {
            capture_stderr(stderr, g.stderr.clone(), cap, tee).await;
            g.stderr_done.send_replace(true);
        });
        tokio::spawn(sample_rss(self.this.clone(), worker.clone()));
        if worker.mode == WaymarkMode::Resident {
            tokio::spawn(retire_at_age(self.this.clone(), worker.clone()));
        }
    }

    pub(super) fn emit_ready(&self, worker: &Generation, ready: &ReadyFrame) {
        let mut e = PerfEvent::point(EventKind::WorkerReady.as_str())
            .id(attr::GENERATION, worker.id)
            .attr(attr::PID, worker.pid)
            .attr(attr::WARMUP_MS, ready.warmup_ms)
            .attr(attr::MODE, worker.mode.as_str())
            .attr(attr::ENGINE, ready.engine.clone());
        e.duration_ms = worker.spawned_wall.elapsed().as_secs_f64() * 1000.0;
        self.recorder.record(e);
    }
}

/// W10: admits a resident launch at `now` if fewer than `limits.max_launches` launches
/// happened in the rolling `limits.launch_window` before it (older entries are pruned from
/// `launches`; an admitted launch is appended). Refused: `RESTART_LIMIT`, saying how many
/// launches, the window and when the next launch is allowed (ms).
pub(super) fn admit_in_window(
    launches: &mut VecDeque<Instant>,
    now: Instant,
    limits: &WaymarkLimits,
) -> Result<(), WorkerError> {
    while launches
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= limits.launch_window)
    {
        launches.pop_front();
    }
    if launches.len() >= limits.max_launches {
        let oldest = launches.front().copied().unwrap_or(now);
        let wait = limits
            .launch_window
            .saturating_sub(now.saturating_duration_since(oldest));
        return Err(WorkerError::new(
            WorkerErrorCode::RestartLimit,
            format!(
                "{} launches in the last {} s (W10 limit {}); next launch allowed in {} ms",
                launches.len(),
                limits.launch_window.as_secs(),
                limits.max_launches,
                wait.as_millis()
            ),
        ));
    }
    launches.push_back(now);
    Ok(())
}

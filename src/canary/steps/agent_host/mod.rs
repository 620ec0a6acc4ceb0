//! The `agent claude|codex|gemini|opencode` step (SPEC A1–A4): launch the host CLI headless and sealed, check
//! the seal from its stream, preflight the observed process it started, keep its stream as
//! evidence, and stop its whole process group at the timeout.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

mod ending;

use self::ending::{
    Ending, HostOutcome, agent_stop, host_record, host_summary, judge_host, seal_refusal,
    wire_has_tool_call,
};
use crate::canary::client::McpProcess;
use crate::canary::error::StepError;
use crate::canary::host::{
    self, HostPaths, HostProgress, HostRecord, HostRun, Redactor, SEAL_REPORT_WAIT, SharedProgress,
    StreamState, TERMINATE_GRACE,
};
use crate::canary::names::{HOST_OBSERVED, Host};
use crate::canary::outcome::{AgentStop, StopReason};
use crate::canary::state::TargetRow;
use crate::canary::steps::preflight::{READINESS_WAIT, WorkerReadiness, worker_readiness};
use crate::config::Settings;
use crate::evidence::run_dir::AgentFile;
use crate::evidence::{
    JsonlLog, RunDir, create_private_dir, open_append_private, write_new_private,
};
use crate::fixtures::FixtureManifest;
use crate::telemetry::unix_ms_now;

/// The run state the agent host step uses (A1–A4), borrowed from the run for the step's
/// length; what the step learned comes back in [`HostStep::stop`] and [`HostStep::record`].
pub struct HostStep<'a> {
    pub run: &'a RunDir,
    /// The `patchdiff` executable the host starts as its observed process.
    pub exe: &'a Path,
    pub settings: &'a Settings,
    /// The run's suite: the agent brief is written from it.
    pub manifest: &'a FixtureManifest,
    /// The observed process's environment as the host is to start it.
    pub observed_env: Vec<(String, String)>,
    /// The model `record` named, used when the step names none.
    pub recorded_model: Option<String>,
    /// `init` ran (the agent works on initialized targets).
    pub initialized: bool,
    /// An agent host already ran in this run (C7: one canary per run).
    pub host_ran: bool,
    /// Where the console reads the running host's progress (U1).
    pub progress: &'a SharedProgress,
    /// The full-profile process, for the targets' freshness (C3).
    pub full: Option<&'a McpProcess>,
    pub targets: &'a [TargetRow],
    /// How the agent stopped, once the step knows (output).
    pub stop: Option<AgentStop>,
    /// The host record (A4), once the host ran (output).
    pub record: Option<HostRecord>,
}

impl HostStep<'_> {
    /// The `agent claude|codex|gemini|opencode` step (A1–A4): checks the step may run, prepares the sealed
    /// working directory and configuration, launches the host, follows its stream to its end,
    /// the timeout or a refusal, stops its process group, and writes `agent.<host>.json`.
    /// Records how the agent stopped ([`Canary::agent_stop`]): a failure before
    /// the host's first model turn is a reason before acting (the run is `infra_abort`).
    /// Returns the step's summary; errors say why the host was refused, failed or timed out.
    pub async fn run(
        &mut self,
        host: Host,
        model: Option<String>,
        max_turns: Option<u32>,
        timeout: Duration,
    ) -> Result<String, StepError> {
        // A1: the step's timeout holds from here, the step's start: the checks before the host
        // starts count against it too, so nothing below waits without this deadline.
        let started = Instant::now();
        let deadline = started + timeout;
        let name = host.as_str();
        let model = self
            .check_host_step(host, model)
            .map_err(|e| self.stopped_before(StopReason::NotStarted, e))?;
        let binary = host::resolve_binary(host, self.settings)
            .map_err(|e| self.stopped_before(StopReason::HostUnavailable, e))?;
        // C3 for what the console can check before the host exists: fresh targets.
        let doing = "checking that the targets are fresh";
        let fresh = before_deadline(
            deadline,
            timeout,
            doing,
            check_fresh(self.full, self.targets),
        )
        .await;
        fresh.map_err(|e| self.stopped_before(StopReason::PreflightFailed, e))?;
        let doing = "asking the host for its --version";
        let asked = before_deadline(deadline, timeout, doing, async {
            Ok(host::host_version(&binary).await)
        });
        let version = asked
            .await
            .map_err(|e| self.stopped_before(StopReason::HostUnavailable, e))?;
        // A2: Codex's own catalog gives a model it lists native tools whatever the features
        // say; the host gets it sealed (`host::codex::sealed_model_catalog`).
        let catalog = match host {
            Host::Codex => {
                let doing = "reading Codex's bundled model catalog";
                let read = before_deadline(deadline, timeout, doing, async {
                    host::codex::sealed_model_catalog(host::codex::bundled_catalog(&binary).await?)
                });
                Some(
                    read.await
                        .map_err(|e| self.stopped_before(StopReason::HostUnavailable, e))?,
                )
            }
            _ => None,
        };
        // `home` is removed when dropped, after the host's group is gone.
        let (paths, home, brief) = self
            .prepare_host_files(host, &model, max_turns, catalog.as_ref())
            .map_err(|e| self.stopped_before(StopReason::HostUnavailable, e))?;
        let run = HostRun {
            host,
            binary,
            model,
            max_turns,
            timeout,
        };
        let provider = host::provider_env();
        // The operator's proxy and CA settings reach the host, or nothing does behind a proxy.
        let network = host::network_env();
        let passed = Passed {
            provider: &provider,
            network: &network,
        };
        let hosted = self.run_host(&run, &paths, &brief, passed, deadline).await;
        let hosted = hosted.map_err(|e| self.stopped_before(StopReason::HostUnavailable, e))?;
        let Hosted {
            ending,
            state,
            pid,
            exit,
            stopped,
        } = hosted;
        let timed_out = matches!(ending, Ending::TimedOut) || exit == "did not exit";
        let wire = std::fs::read_to_string(self.run.wire_log(HOST_OBSERVED)).unwrap_or_default();
        let record = host_record(HostOutcome {
            run: &run,
            version,
            pid,
            state: &state,
            duration: started.elapsed(),
            exit: if stopped.is_empty() {
                exit.clone()
            } else {
                format!("{exit} ({stopped})")
            },
            timed_out,
            provider: &provider,
            network: &network,
            tool_errors: crate::canary::outcome::tool_errors_in_wire_log(&wire),
        });
        write_new_private(
            &host.file(self.run, AgentFile::Record),
            &serde_json::to_vec_pretty(&record).map_err(anyhow::Error::from)?,
        )?;
        let verdict = judge_host(&ending, &exit, timed_out, &state, &record, &run);
        // The agent acted once the model answered or a call reached the
        // observed process; before that, every failure is the infrastructure's.
        let acted = state.turns > 0 || wire_has_tool_call(&wire);
        let stop = agent_stop(&ending, &verdict, timed_out, &state, acted);
        self.finish_progress(match &verdict {
            Ok(()) => exit.clone(),
            Err(_) if timed_out => "timed out".into(),
            Err(_) => "failed".into(),
        });
        let summary = host_summary(&record, &run, started.elapsed());
        self.record = Some(record);
        self.stop = Some(stop.clone());
        drop(home);
        match verdict {
            Ok(()) => Ok(summary),
            Err(why) if stop.acted => Err(StepError::Failed(format!(
                "agent {name}: {}: {why}",
                stop.why
            ))),
            Err(why) => Err(StepError::Failed(format!(
                "agent {name}: {}: {why} — the agent never acted: nothing is judged (infra_abort)",
                stop.why
            ))),
        }
    }

    /// Records that the agent step stopped before the agent acted, for `reason`; returns `e`.
    fn stopped_before(&mut self, reason: StopReason, e: anyhow::Error) -> StepError {
        let why = format!("{e:#}");
        self.stop = Some(AgentStop::new(reason, why.clone()));
        match reason {
            StopReason::NotStarted => StepError::Refused(why),
            _ => StepError::Failed(why),
        }
    }

    /// Launches the host, keeps its stream (A4, V1: each line exactly as printed, credentials
    /// redacted, hash-chained) and stderr as evidence, follows the stream to its end, the
    /// timeout or a refusal, waits for the exit within the timeout, and stops what is left of
    /// its process group. Errors when the host or its logs cannot be started.
    async fn run_host(
        &self,
        run: &HostRun,
        paths: &HostPaths,
        brief: &str,
        passed: Passed<'_>,
        deadline: Instant,
    ) -> anyhow::Result<Hosted> {
        let started = Instant::now();
        let name = run.host.as_str();
        // A proxy URL's password is a credential too: the redactor knows the network values.
        let redactor = Redactor::new(passed.provider.iter().chain(passed.network));
        let mut child = spawn_host(run, paths, brief, passed)?;
        let pid = child.id();
        let stream_log = JsonlLog::open(&run.host.file(self.run, AgentFile::Stream))?;
        let stderr_log = open_append_private(&run.host.file(self.run, AgentFile::Stderr))?;
        let stderr_task = child
            .stderr
            .take()
            .map(|stderr| tokio::spawn(copy_redacted(stderr, stderr_log, redactor.clone())));
        self.set_progress(HostProgress {
            host: name.to_owned(),
            pid,
            started_ms: unix_ms_now(),
            state: "starting".into(),
            ..HostProgress::default()
        });
        let mut state = StreamState::new(run.host);
        let ending = self
            .follow_stream(
                &mut child, &mut state, stream_log, &redactor, started, deadline,
            )
            .await;
        let exit = match &ending {
            Ending::Exited => {
                let remaining = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(remaining, child.wait()).await {
                    Ok(Ok(status)) => status.to_string(),
                    Ok(Err(e)) => format!("wait failed: {e}"),
                    Err(_) => "did not exit".to_owned(),
                }
            }
            Ending::TimedOut | Ending::Refused(..) => "stopped by the console".to_owned(),
        };
        // Whatever happened, nothing of the host's group outlives the step; a host that was
        // refused or timed out is stopped at once.
        let mut stopped = stop_group(&mut child, pid, matches!(ending, Ending::Exited)).await;
        if let Some(mut task) = stderr_task {
            // A process that left the group (`setsid`) may hold stderr open for ever: copy what
            // is there within the grace, then stop copying, so the step ends.
            if tokio::time::timeout(TERMINATE_GRACE, &mut task)
                .await
                .is_err()
            {
                task.abort();
                let note =
                    "stderr held open by a process outside the host's group; its copy stopped";
                stopped = if stopped.is_empty() {
                    note.to_owned()
                } else {
                    format!("{stopped}; {note}")
                };
            }
        }
        Ok(Hosted {
            ending,
            state,
            pid,
            exit,
            stopped,
        })
    }

    /// Whether `agent HOST` may run now (a headless host, `init` done, no host yet in this run,
    /// C7); returns the model: the step's, else the recorded one.
    fn check_host_step(&self, host: Host, model: Option<String>) -> anyhow::Result<String> {
        if host == Host::Cursor {
            anyhow::bail!(
                "cursor has no headless mode here; `agent` launches claude, codex, gemini or opencode"
            );
        }
        if !self.initialized {
            anyhow::bail!("run `init` first: the agent works on the five initialized targets");
        }
        if self.host_ran {
            anyhow::bail!("an agent host already ran in this run; a run is one canary (C7)");
        }
        let name = host.as_str();
        model
            .or_else(|| self.recorded_model.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "agent {name}: no model: give model=… or run `record model=…` first"
                )
            })
    }

    /// A2: a fresh working directory holding only the brief, with the host's MCP configuration
    /// and settings beside it in the run directory, and a private `HOME` (a temporary directory,
    /// removed when the returned guard drops). Returns the paths, the guard and the brief.
    fn prepare_host_files(
        &self,
        host: Host,
        model: &str,
        max_turns: Option<u32>,
        catalog: Option<&serde_json::Value>,
    ) -> anyhow::Result<(HostPaths, tempfile::TempDir, String)> {
        let brief_path =
            crate::canary::steps::host_config::write_agent_brief(self.run, self.manifest)?;
        let brief = std::fs::read_to_string(&brief_path)?;
        let workdir = self.run.path.join(AGENT_WORKDIR);
        if workdir.exists() {
            anyhow::bail!(
                "{} already exists; one agent host per run",
                workdir.display()
            );
        }
        create_private_dir(&workdir)?;
        write_new_private(
            &workdir.join(crate::evidence::run_dir::AGENT_BRIEF_FILE),
            brief.as_bytes(),
        )?;
        let home = tempfile::Builder::new()
            .prefix("patchdiff-host-")
            .tempdir()?;
        let paths = HostPaths {
            workdir,
            mcp_config: host.file(self.run, AgentFile::McpConfig),
            settings: host.file(self.run, AgentFile::Settings),
            home: home.path().to_owned(),
        };
        self.write_host_files(host, &paths, model, max_turns, catalog)?;
        Ok((paths, home, brief))
    }

    /// The host's configuration naming the observed process it is to start: Claude Code's
    /// `--mcp-config` JSON and settings; Codex's `config.toml`, Gemini CLI's `settings.json`
    /// and opencode's `opencode.json` in its private home (and a copy in the run directory as
    /// evidence). `model` and `max_turns` are the step's (opencode's and Gemini CLI's files
    /// carry them); `catalog`, Codex's sealed model catalog, goes beside its `config.toml`.
    fn write_host_files(
        &self,
        host: Host,
        paths: &HostPaths,
        model: &str,
        max_turns: Option<u32>,
        catalog: Option<&serde_json::Value>,
    ) -> anyhow::Result<()> {
        let exe = self.exe.display().to_string();
        let observed_env = &self.observed_env;
        // The evidence copies carry no credential (database password, provider key).
        let redactor = Redactor::new(
            observed_env
                .iter()
                .chain(&host::provider_env())
                .chain(&host::network_env()),
        );
        match host {
            Host::Claude => {
                let config =
                    serde_json::to_string_pretty(&host::claude_mcp_config(&exe, observed_env))?;
                write_new_private(&paths.host_mcp_config(), config.as_bytes())?;
                write_new_private(&paths.mcp_config, redactor.redact(&config).as_bytes())?;
                let settings = serde_json::to_vec_pretty(&host::claude_settings())?;
                write_new_private(&paths.settings, &settings)?;
            }
            Host::Codex | Host::Cursor => {
                let codex_home = paths.home.join(".codex");
                create_private_dir(&codex_home)?;
                let text = crate::canary::steps::host_config::host_config_text(
                    Some(Host::Codex),
                    &exe,
                    observed_env,
                );
                let server: String = text
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .map(|l| format!("{l}\n"))
                    .collect();
                let catalog_path = codex_home.join("model-catalog.json");
                if let Some(catalog) = catalog {
                    write_new_private(&catalog_path, &serde_json::to_vec(catalog)?)?;
                }
                let catalog_path = catalog.map(|_| catalog_path.as_path());
                let body = host::codex_config(&server, &host::provider_env(), catalog_path);
                write_new_private(&codex_home.join("config.toml"), body.as_bytes())?;
                write_new_private(&paths.mcp_config, redactor.redact(&body).as_bytes())?;
            }
            Host::Gemini => {
                let gemini_home = paths.home.join(".gemini");
                create_private_dir(&gemini_home)?;
                let settings = host::gemini_settings(&exe, observed_env, max_turns);
                let body = serde_json::to_string_pretty(&settings)?;
                write_new_private(&gemini_home.join("settings.json"), body.as_bytes())?;
                write_new_private(&paths.mcp_config, redactor.redact(&body).as_bytes())?;
            }
            Host::Opencode => {
                let config = host::opencode::run_config(
                    host::opencode_config(&exe, observed_env),
                    model,
                    max_turns,
                    &host::provider_env(),
                );
                let body = serde_json::to_string_pretty(&config)?;
                write_new_private(&host::opencode::config_path(paths), body.as_bytes())?;
                write_new_private(&paths.mcp_config, redactor.redact(&body).as_bytes())?;
            }
        }
        Ok(())
    }

    /// Reads the host's stream to its end, the timeout, or a refusal: each line is kept
    /// (redacted) as evidence and fed to `state`; the seal is checked as soon as the host
    /// reports it, then the observed process it started is preflighted.
    async fn follow_stream(
        &self,
        child: &mut tokio::process::Child,
        state: &mut StreamState,
        log: JsonlLog,
        redactor: &Redactor,
        started: Instant,
        deadline: Instant,
    ) -> Ending {
        let Some(stdout) = child.stdout.take() else {
            return Ending::Refused(
                StopReason::HostUnavailable,
                "the host's stdout is not a pipe".into(),
            );
        };
        let mut lines = BufReader::new(stdout).lines();
        let deadline = tokio::time::Instant::from_std(deadline);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sealed_at: Option<Instant> = None;
        let mut seq: u64 = 0;
        let mut preflighted = false;
        loop {
            tokio::select! {
                line = lines.next_line() => match line {
                    Ok(Some(line)) => {
                        let _ = log.append(&json!({
                            "ts_ms": unix_ms_now(), "seq": seq, "raw": redactor.redact(&line),
                        }));
                        seq += 1;
                        state.observe(&line);
                        self.update_progress(state, if preflighted { "running" } else { "starting" });
                        if let Some(refused) = seal_refusal(state, &mut sealed_at) {
                            return refused;
                        }
                    }
                    Ok(None) | Err(_) => return Ending::Exited,
                },
                _ = tokio::time::sleep_until(deadline) => return Ending::TimedOut,
                _ = tick.tick() => {}
            }
            if let Some(refused) = self.admit_when_ready(started, sealed_at, &mut preflighted) {
                return refused;
            }
        }
    }

    /// A3 after each stream line or tick: refuses a host that has not reported its tools within
    /// [`SEAL_REPORT_WAIT`]; once the seal held, preflights the observed process the host
    /// started and, when it is ready, opens the admission gate (sets `preflighted`). Refuses when
    /// the preflight fails or is not ready within [`READINESS_WAIT`] of the seal.
    fn admit_when_ready(
        &self,
        started: Instant,
        sealed_at: Option<Instant>,
        preflighted: &mut bool,
    ) -> Option<Ending> {
        match sealed_at {
            None if started.elapsed() > SEAL_REPORT_WAIT => Some(Ending::Refused(
                StopReason::SealRefused,
                format!(
                    "the host did not report its tools within {} s, so its seal cannot be checked (A3)",
                    SEAL_REPORT_WAIT.as_secs()
                ),
            )),
            Some(at) if !*preflighted => match self.host_observed_preflight() {
                Ok(true) => {
                    // A3: seal and preflight hold — open the gate for the agent's calls.
                    let note = format!("admitted at {} ms\n", unix_ms_now() as u64);
                    if let Err(e) = write_new_private(&self.run.admission(), note.as_bytes()) {
                        return Some(Ending::Refused(
                            StopReason::PreflightFailed,
                            format!("cannot admit the agent: {e}"),
                        ));
                    }
                    *preflighted = true;
                    None
                }
                Ok(false) if at.elapsed() <= READINESS_WAIT => None,
                Ok(false) => Some(Ending::Refused(
                    StopReason::PreflightFailed,
                    format!(
                        "preflight of the observed process the host started: {} (C3)",
                        self.host_observed_state()
                    ),
                )),
                Err(why) => Some(Ending::Refused(
                    StopReason::PreflightFailed,
                    format!("preflight of the observed process the host started: {why} (C3)"),
                )),
            },
            _ => None,
        }
    }

    /// C3 on the host-started observed process: `Ok(true)` once its `tools/list` answer (in its
    /// wire log) is exactly the six and its worker is ready; `Ok(false)` while not yet; `Err`
    /// when the tool list is wrong.
    fn host_observed_preflight(&self) -> Result<bool, String> {
        let wire = std::fs::read_to_string(self.run.wire_log(HOST_OBSERVED)).unwrap_or_default();
        let perf = std::fs::read_to_string(self.run.perf_events(HOST_OBSERVED)).unwrap_or_default();
        // The process the host started (the newest), never another one sharing the log.
        let pid = host::newest_pid(&perf);
        if let Some(mut tools) = host::listed_tools_in_wire_log(&wire, pid) {
            tools.sort();
            let mut six: Vec<String> = crate::mcp::OBSERVED_TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect();
            six.sort();
            if tools != six {
                return Err(format!(
                    "tools/list answered {} tools [{}], expected exactly the six",
                    tools.len(),
                    tools.join(", ")
                ));
            }
        } else {
            return Ok(false);
        }
        match pid.map(|pid| worker_readiness(&perf, pid)) {
            Some(WorkerReadiness::Ready { .. }) => Ok(true),
            // A failed launch is reported at once, with its cause.
            Some(failed @ WorkerReadiness::LaunchFailed { .. }) => Err(failed.describe()),
            _ => Ok(false),
        }
    }

    fn host_observed_state(&self) -> String {
        let perf = std::fs::read_to_string(self.run.perf_events(HOST_OBSERVED)).unwrap_or_default();
        match host::newest_pid(&perf) {
            None => format!(
                "no perf events from it after {} s (see {})",
                READINESS_WAIT.as_secs(),
                self.run.perf_events(HOST_OBSERVED).display()
            ),
            Some(pid) => format!(
                "its worker is not ready after {} s ({})",
                READINESS_WAIT.as_secs(),
                worker_readiness(&perf, pid).describe()
            ),
        }
    }

    fn set_progress(&self, progress: HostProgress) {
        if let Ok(mut cell) = self.progress.lock() {
            *cell = Some(progress);
        }
    }

    fn update_progress(&self, state: &StreamState, phase: &str) {
        if let Ok(mut cell) = self.progress.lock()
            && let Some(p) = cell.as_mut()
        {
            p.turns = state.turns;
            p.tool_calls = state.tool_calls.clone();
            p.last_tool = state.last_tool.clone();
            p.state = phase.to_owned();
        }
    }

    fn finish_progress(&self, how: String) {
        if let Ok(mut cell) = self.progress.lock()
            && let Some(p) = cell.as_mut()
        {
            p.state = how;
        }
    }
}

/// The name of the sealed working directory the host runs in, in the run directory (A2).
pub const AGENT_WORKDIR: &str = "agent-workdir";

/// C3 before the host exists: the targets are fresh, as the full process reads them.
async fn check_fresh(full: Option<&McpProcess>, targets: &[TargetRow]) -> anyhow::Result<()> {
    let full = full.ok_or_else(|| anyhow::anyhow!("{}", StepError::no_full()))?;
    super::preflight::check_targets_fresh(full, targets)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Runs `work` (a step's part before its host starts) until the step's `deadline`; past it, the
/// error says the step's `timeout` ran out before the host started, and while doing what.
async fn before_deadline<T>(
    deadline: Instant,
    timeout: Duration,
    doing: &str,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(remaining, work).await {
        Ok(done) => done,
        Err(_) => Err(anyhow::anyhow!(
            "the step's timeout of {} s ran out before the host started, while {doing}",
            timeout.as_secs()
        )),
    }
}

/// The operator's variables a host run receives (A2): provider credentials and settings, and
/// network settings ([`host::NETWORK_VARIABLES`] that are set).
#[derive(Clone, Copy)]
struct Passed<'a> {
    provider: &'a [(String, String)],
    network: &'a [(String, String)],
}

/// What following a launched host produced.
struct Hosted {
    ending: Ending,
    state: StreamState,
    pid: Option<u32>,
    /// The exit status (`did not exit`, `stopped by the console`).
    exit: String,
    /// What stopping its process group took; empty when it was already gone.
    stopped: String,
}

/// Starts the host CLI headless in its sealed working directory, with only the environment
/// [`host::host_env`] gives it, in its own process group (A1: the whole group stops at the
/// timeout). Errors name the binary that could not start.
fn spawn_host(
    run: &HostRun,
    paths: &HostPaths,
    brief: &str,
    passed: Passed<'_>,
) -> anyhow::Result<tokio::process::Child> {
    // Shaped like evaluate's check launch (own group, piped output), but sealed: the
    // environment is cleared and only the host's own is given (A2).
    tokio::process::Command::new(&run.binary)
        .args(host::host_args(run, paths, brief))
        .current_dir(&paths.workdir)
        .env_clear()
        .envs(host::host_env(
            run.host,
            paths,
            passed.provider,
            passed.network,
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", run.binary.display()))
}

/// Copies the host's stderr to its log, line by line, with credentials redacted (A4).
async fn copy_redacted(
    stderr: tokio::process::ChildStderr,
    mut log: std::fs::File,
    redactor: Redactor,
) {
    use std::io::Write;
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let _ = writeln!(log, "{}", redactor.redact(&line));
    }
}

/// Stops what is left of the host's process group (A1): SIGTERM, then SIGKILL after
/// [`TERMINATE_GRACE`]; reaps the host. Returns what it had to do, empty when the group was
/// already gone.
async fn stop_group(child: &mut tokio::process::Child, pid: Option<u32>, settle: bool) -> String {
    let Some(pgid) = pid.and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw) else {
        let _ = child.kill().await;
        return String::new();
    };
    // Signal 0 to the group: true while any member (or the unreaped host) remains.
    let alive = || killpg(pgid, None).is_ok();
    if settle {
        // After a normal exit, members (the MCP server the host started) close by themselves.
        let since = Instant::now();
        while alive() && since.elapsed() < TERMINATE_GRACE {
            let _ = child.try_wait();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !alive() {
            let _ = child.wait().await;
            return String::new();
        }
        let _ = killpg(pgid, Signal::SIGTERM);
        let since = Instant::now();
        while alive() && since.elapsed() < TERMINATE_GRACE {
            let _ = child.try_wait();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let how = if alive() {
        let _ = killpg(pgid, Signal::SIGKILL);
        "process group killed"
    } else {
        "process group terminated"
    };
    let _ = child.wait().await;
    how.to_owned()
}

/// True when `path` holds exactly `agent-brief.md` (A2), for tests and `verify`.
pub fn workdir_is_sealed(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|entries| {
        let names: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        names.len() == 1 && names[0] == "agent-brief.md"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(turns: u64, result: Option<&str>, provider_error: Option<&str>) -> StreamState {
        let mut state = StreamState::new(Host::Claude);
        state.turns = turns;
        state.result = result.map(str::to_owned);
        state.provider_error = provider_error.map(str::to_owned);
        state
    }

    /// Every way a host run ends maps to one reason, before or after acting.
    #[test]
    fn every_ending_of_a_host_run_is_told_apart_before_and_after_the_agent_acted() {
        let failed: Result<(), String> = Err("ended with exit status: 1".into());
        let ok: Result<(), String> = Ok(());
        let refused = || Ending::Refused(StopReason::SealRefused, "Bash".into());
        let preflight = || Ending::Refused(StopReason::PreflightFailed, "tools".into());
        let cases = [
            // (ending, verdict, timed out, model turns, result, provider error, acted) → reason
            (
                refused(),
                &failed,
                false,
                0,
                None,
                None,
                false,
                StopReason::SealRefused,
            ),
            (
                preflight(),
                &failed,
                false,
                0,
                None,
                None,
                false,
                StopReason::PreflightFailed,
            ),
            (
                refused(),
                &failed,
                false,
                3,
                None,
                None,
                true,
                StopReason::SealBroken,
            ),
            (
                Ending::TimedOut,
                &failed,
                true,
                3,
                None,
                None,
                true,
                StopReason::TimedOut,
            ),
            (
                Ending::TimedOut,
                &failed,
                true,
                0,
                None,
                None,
                false,
                StopReason::ProviderSilent,
            ),
            (
                Ending::TimedOut,
                &failed,
                true,
                0,
                None,
                Some("HTTP 500"),
                false,
                StopReason::ProviderRefused,
            ),
            (
                Ending::Exited,
                &ok,
                false,
                9,
                Some("success"),
                None,
                true,
                StopReason::Finished,
            ),
            (
                Ending::Exited,
                &failed,
                false,
                0,
                Some("success"),
                Some("HTTP 529"),
                false,
                StopReason::ProviderRefused,
            ),
            (
                Ending::Exited,
                &failed,
                false,
                0,
                None,
                None,
                false,
                StopReason::HostExitedEarly,
            ),
            (
                Ending::Exited,
                &failed,
                false,
                5,
                Some("error_max_turns"),
                None,
                true,
                StopReason::MaxTurns,
            ),
            (
                Ending::Exited,
                &failed,
                false,
                5,
                Some("success"),
                Some("HTTP 500"),
                true,
                StopReason::ProviderError,
            ),
            (
                Ending::Exited,
                &failed,
                false,
                5,
                None,
                None,
                true,
                StopReason::HostCrashed,
            ),
            (
                Ending::Exited,
                &failed,
                true,
                5,
                None,
                None,
                true,
                StopReason::HostCrashed,
            ),
        ];
        for (ending, verdict, timed_out, turns, result, provider, acted, expected) in cases {
            let s = state(turns, result, provider);
            let stop = agent_stop(&ending, verdict, timed_out, &s, acted);
            assert_eq!(
                stop.reason, expected,
                "{turns} turns, {result:?}, {provider:?}"
            );
            assert_eq!(stop.acted, acted, "{expected:?}");
            if let Some(p) = provider {
                assert!(stop.detail.contains(p), "{}", stop.detail);
            }
        }
        // The model answered, but its calls were held at the admission gate while the host's
        // process failed preflight (its worker missed readiness under load): nothing reached a
        // target, so the run stopped before the agent acted (infra_abort, retried by a
        // comparison), not a seal the agent broke.
        let stop = agent_stop(&preflight(), &failed, false, &state(1, None, None), true);
        assert_eq!(stop.reason, StopReason::PreflightFailed);
        assert!(!stop.acted);
    }
}

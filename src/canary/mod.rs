//! The canary procedure (SPEC C1–C7): the step runner shared by the interactive console and
//! `--script`. One [`Canary`] owns a run directory, the two MCP processes and what the run has
//! learned so far; [`Canary::execute`] runs one [`Command`] and returns its one-line outcome.

pub mod client;
pub mod command;
pub mod error;
pub mod host;
pub mod launch;
pub mod names;
pub mod outcome;
pub mod plan;
pub mod record;
pub mod report;
// Runs over time moved to `crate::runs`; the old path stays for its callers.
pub use crate::runs;
pub mod state;
pub mod steps;
pub mod story;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use self::client::{LaunchSpec, McpProcess};
use self::command::{Command, WaitFor};
use self::error::{StepError, StepResult};
use self::names::{HOST_OBSERVED, Host, ProcessKind};
use self::steps::evaluate::{EvaluateOptions, Evaluator};
use crate::evaluate::Evaluation;
use crate::evidence::{AgentIdentity, JsonlLog, RunDir};
use crate::fixtures::FixtureManifest;
use crate::telemetry::unix_ms_now;

pub use self::state::{CanaryOptions, StepOutcome, TargetRow};
pub use self::steps::host_config::host_config_text;
pub use self::steps::preflight::{READINESS_WAIT, WorkerReadiness, worker_readiness};

/// A live canary run.
pub struct Canary {
    pub options: CanaryOptions,
    pub run: RunDir,
    pub manifest: FixtureManifest,
    pub full: Option<McpProcess>,
    pub observed: Option<McpProcess>,
    pub identity: AgentIdentity,
    pub targets: Vec<TargetRow>,
    pub steps: Vec<StepOutcome>,
    pub evaluation: Option<Evaluation>,
    started_ms: f64,
    manifest_written: bool,
    /// C7: one canary per run — targets are initialized once.
    initialized: bool,
    /// C3: the observed process (by pid) that last passed preflight; `agent` requires it.
    preflighted_pid: Option<u32>,
    /// The transcript, opened when the run directory is created (the first writing step).
    transcript: Option<JsonlLog>,
    /// Exit statuses of processes that stopped, by kind (U1).
    pub exits: BTreeMap<&'static str, String>,
    /// A1: the agent host a script will launch, known before `init` so the run manifest can
    /// name its CLI and version (`host`, `binary`, `version`, `requested_model`).
    pub planned_host: Option<Value>,
    /// Live progress of a running agent host, read by the console while the step runs (U1).
    pub host_progress: host::SharedProgress,
    /// A4: the record of the agent host run, once it ended.
    pub host_record: Option<host::HostRecord>,
    /// How the agent step (scripted or a host) ended, once it ran.
    pub agent_stop: Option<outcome::AgentStop>,
    /// Whether this run is meant to hand over to an agent (a script with an `agent` step): a
    /// step failing before the agent acted then aborts the run (`infra_abort`).
    pub agent_planned: bool,
    /// `report` sealed the run; every step that would write to it is refused.
    sealed: bool,
    /// [`record::provider_endpoints`] of the agent hosts' provider variables (loopback: rehearsal).
    pub provider_endpoints: Value,
    /// The suite's manifest the run's `suite/` copy was made from at `init`; from then on
    /// `manifest` and `options.manifest` are the run's copy.
    suite_source: Option<PathBuf>,
    /// Gate 2's `compare` step: where its progress goes, and how the last one ended.
    pub comparison: steps::compare::CompareState,
    /// `replica TARGET PLAN`'s replica, armed for the next agent step (R2).
    replica: Option<steps::replica::Armed>,
}

pub(crate) use self::names::civil_from_days;
pub use self::names::new_run_id;
pub use self::steps::views::resolve_run;

impl Canary {
    /// Creates the run directory and loads the fixture manifest. Nothing is started yet.
    pub fn create(options: CanaryOptions) -> anyhow::Result<Self> {
        // What this process writes never carries the database password, even when
        // the URL came from a configuration file.
        if let Ok(Some(url)) = options.settings.text(crate::config::Key::DatabaseUrl) {
            crate::redact::learn_database_url(crate::config::Key::DatabaseUrl.variable(), url);
        }
        let manifest = FixtureManifest::load(&options.manifest)?;
        // The directory is created by the first step that writes ([`Canary::execute`]): a
        // session that only views (`runs`, `target`) leaves nothing behind.
        let run_id = new_run_id();
        let run = RunDir {
            path: options.runs_root.join(&run_id),
            run_id,
        };
        let targets = TargetRow::of(&manifest);
        Ok(Self {
            options,
            run,
            manifest,
            full: None,
            observed: None,
            identity: AgentIdentity::default(),
            targets,
            steps: Vec::new(),
            evaluation: None,
            started_ms: unix_ms_now(),
            manifest_written: false,
            initialized: false,
            preflighted_pid: None,
            transcript: None,
            exits: BTreeMap::new(),
            planned_host: None,
            host_progress: Default::default(),
            host_record: None,
            agent_stop: None,
            agent_planned: false,
            sealed: false,
            provider_endpoints: record::provider_endpoints(&host::provider_env()),
            suite_source: None,
            comparison: Default::default(),
            replica: None,
        })
    }

    /// `suite PATH`: the fixture suite this run uses — a suite directory (its `manifest.json`)
    /// or a manifest file. Only before `init`; the targets shown are the suite's. Errors: after
    /// `init`, or a manifest that does not load (naming the file and the field).
    pub fn use_suite(&mut self, path: &Path) -> StepResult {
        if self.initialized || self.suite_source.is_some() {
            return Err(StepError::Refused(format!(
                "`suite` must come before `init`: this run already copied its suite from {}",
                self.suite_source
                    .as_deref()
                    .unwrap_or(&self.options.manifest)
                    .display()
            )));
        }
        let (manifest, manifest_path) = steps::suite::load(path)?;
        self.targets = TargetRow::of(&manifest);
        let summary = steps::suite::summary(&manifest, &manifest_path);
        self.manifest = manifest;
        self.options.manifest = manifest_path;
        Ok(summary)
    }

    /// Copies the authenticated suite into the run (`suite/`) once, and makes
    /// the copy the run's manifest from then on: init, the brief, the evaluator and `verify`
    /// all read the run's own copy, so the run verifies on any machine.
    async fn copy_suite_into_run(&mut self) -> Result<(), StepError> {
        if self.suite_source.is_some() {
            return Ok(());
        }
        let source = self.manifest.clone();
        let dest = self.run.suite();
        let copy = tokio::task::spawn_blocking(move || {
            source
                .copy_into(&dest)
                .and_then(|m| FixtureManifest::load(&m).map(|l| (m, l)))
        })
        .await
        .map_err(|e| anyhow::anyhow!("suite copy task failed: {e}"))?
        .map_err(anyhow::Error::from)?;
        self.suite_source = Some(std::mem::replace(&mut self.options.manifest, copy.0));
        self.manifest = copy.1;
        Ok(())
    }

    /// The run's launcher ([`launch::Launcher`]).
    fn launcher(&self) -> launch::Launcher<'_> {
        launch::Launcher {
            options: &self.options,
            run: &self.run,
        }
    }

    /// `PATCHDIFF_DATABASE_URL` for the run's processes: the operator's, else the run's own file.
    pub fn database_url(&self) -> String {
        self.launcher().database_url()
    }

    /// The database file the run's processes use.
    pub fn database_path(&self) -> PathBuf {
        self.launcher().database_path()
    }

    fn launch_spec(&self, kind: ProcessKind) -> LaunchSpec {
        self.launcher().spec(kind)
    }

    fn host_observed_env(&self) -> Vec<(String, String)> {
        self.launcher().host_observed_env()
    }

    /// Resolves the host's binary and version before `init`, so the manifest names them (A4;
    /// [`host::plan`]).
    pub async fn plan_host(&mut self, host: Host, model: Option<&str>) {
        let model = model.or(self.identity.model.as_deref());
        self.planned_host = Some(host::plan(host, model, &self.options.settings).await);
    }

    /// Runs one command. Never panics on bad input; failures come back as `ok: false` with a
    /// summary naming what failed.
    pub async fn execute(&mut self, command: &Command) -> StepOutcome {
        let started = Instant::now();
        if self.sealed && !command.allowed_after_seal() {
            // A refused step is not a step of the sealed run (its report is written).
            return StepOutcome {
                command: command.name().to_owned(),
                ok: false,
                summary: self.sealed_refusal(command),
                elapsed_ms: 0,
            };
        }
        let (result, limit) = (self.create_run_dir_for(command), self.options.step_timeout);
        let result = match result {
            Err(e) => Err(e),
            Ok(()) => steps::deadline::within(command, limit, self.run_step(command)).await,
        };
        let (ok, summary) = match result {
            Ok(s) => (true, s),
            Err(e) => (false, e.to_string()),
        };
        let outcome = StepOutcome {
            command: command.name().to_owned(),
            ok,
            summary,
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        // A view is not a step of the canary: it neither appears in nor fails the report.
        if !command.is_view() {
            self.steps.push(outcome.clone());
        }
        outcome
    }

    /// Whether the run directory exists yet: it is created by the first step that is not a
    /// view, so a session that only views leaves none.
    pub fn run_dir_created(&self) -> bool {
        self.transcript.is_some()
    }

    /// Creates the run directory (0700) and opens its transcript before the first step that
    /// needs it ([`Command::needs_run_dir`]); views and `compare` write nothing into it.
    fn create_run_dir_for(&mut self, command: &Command) -> Result<(), StepError> {
        if !command.needs_run_dir() || self.transcript.is_some() {
            return Ok(());
        }
        let run = RunDir::create(&self.options.runs_root, &self.run.run_id).map_err(|e| {
            StepError::Io(anyhow::anyhow!(
                "cannot create the run directory {}: {e}",
                self.run.path.display()
            ))
        })?;
        self.transcript = Some(JsonlLog::open(&run.transcript())?);
        self.run = run;
        Ok(())
    }

    /// Runs one step's body (the run directory exists unless the step is a view).
    async fn run_step(&mut self, command: &Command) -> StepResult {
        match command {
            Command::Record {
                model,
                provider,
                reasoning,
            } => self.record(model, provider, reasoning),
            Command::Suite { path } => self.use_suite(path),
            Command::Init { reset } => self.init(*reset).await,
            Command::Launch { which } => self.launch(*which).await,
            Command::Preflight => self.preflight().await,
            Command::Agent { plan } => self.agent(plan).await,
            Command::Replica { target, plan } => {
                let spec = self.launch_spec(ProcessKind::Full);
                let (slot, run, ready) = (&mut self.replica, &self.run, self.initialized);
                steps::replica::arm(slot, spec, run, target, plan, ready).await
            }
            Command::AgentHost {
                host,
                model,
                max_turns,
                timeout,
            } => {
                self.agent_host(*host, model.clone(), *max_turns, *timeout)
                    .await
            }
            Command::Wait { what, timeout } => self.wait(*what, *timeout).await,
            Command::Export => self.export().await,
            Command::Inspect => self.inspect().await,
            Command::Evaluate {
                repeat,
                require,
                check_timeout,
                fresh_controls,
            } => {
                self.evaluate(&EvaluateOptions {
                    repeat: *repeat,
                    require: *require,
                    check_timeout: *check_timeout,
                    fresh_controls: *fresh_controls,
                })
                .await
            }
            Command::Report => self.report().await,
            Command::Stop { which } => {
                self.stop(*which).await;
                Ok("stopped".to_owned())
            }
            Command::Attach { .. } => Err(StepError::Refused(
                "`attach` works only in the interactive console (it watches a process, it runs no step)"
                    .to_owned(),
            )),
            Command::New => Err(StepError::Refused(
                "`new` works only in the interactive console (a script is one run)".to_owned(),
            )),
            Command::Compare { plan } => {
                let (root, settings) = (&self.options.runs_root, &self.options.settings);
                steps::compare::run(&mut self.comparison, plan, root, settings).await
            }
            Command::Runs { action } => self
                .runs_view(action)
                .map(|text| format!("{} lines", text.lines().count())),
            Command::Target { name } => self.target_story(name).map(|story| {
                format!(
                    "story of `{name}` ({} lines: verdicts, submissions, diffs)",
                    story.lines().count()
                )
            }),
            Command::HostConfig { host, file } => {
                self.write_agent_brief().and_then(|brief| {
                    let written = match (host, file) {
                        (Some(h), Some(path)) => {
                            crate::evidence::refuse_sealed_destination(path)
                                .map_err(StepError::Refused)?;
                            self.write_host_config(*h, path)?;
                            format!(" · written to {} (0600)", path.display())
                        }
                        _ => String::new(),
                    };
                    Ok(format!(
                        "agent-host configuration for the observed process ({}) · agent brief {}{written}",
                        host.map_or("claude, codex, gemini, opencode, cursor", |h| h.as_str()),
                        brief.display()
                    ))
                })
            }
        }
    }

    fn record(
        &mut self,
        model: &Option<String>,
        provider: &Option<String>,
        reasoning: &Option<String>,
    ) -> StepResult {
        if self.manifest_written {
            return Err(StepError::Refused(
                "the run manifest is already written (it is append-only, E2); record before init"
                    .to_owned(),
            ));
        }
        for (slot, value) in [
            (&mut self.identity.model, model),
            (&mut self.identity.provider, provider),
            (&mut self.identity.reasoning, reasoning),
        ] {
            if value.is_some() {
                slot.clone_from(value);
            }
        }
        Ok(format!(
            "model {} · provider {} · reasoning {}",
            self.identity.model.as_deref().unwrap_or("-"),
            self.identity.provider.as_deref().unwrap_or("-"),
            self.identity.reasoning.as_deref().unwrap_or("-")
        ))
    }

    fn slot(&mut self, kind: ProcessKind) -> &mut Option<McpProcess> {
        match kind {
            ProcessKind::Full => &mut self.full,
            ProcessKind::Observed => &mut self.observed,
        }
    }

    /// Where the evaluator caches controls that hold: the data directory's
    /// `control-cache`.
    pub fn control_cache_dir(&self) -> PathBuf {
        self.options.settings.paths.data_dir.join("control-cache")
    }

    async fn launch_one(&mut self, kind: ProcessKind) -> StepResult {
        if let Some(old) = self.slot(kind).take() {
            old.stop().await;
        }
        let spec = self.launch_spec(kind);
        let process = McpProcess::launch(&spec).await?;
        let pid = process.pid.map_or("?".to_owned(), |p| p.to_string());
        *self.slot(kind) = Some(process);
        Ok(format!("{} pid {pid}", kind.as_str()))
    }

    async fn launch(&mut self, which: Option<ProcessKind>) -> StepResult {
        let kinds = match which {
            Some(k) => vec![k],
            None => vec![ProcessKind::Full, ProcessKind::Observed],
        };
        let mut parts = Vec::new();
        for kind in kinds {
            parts.push(self.launch_one(kind).await?);
        }
        Ok(parts.join(" · "))
    }

    /// Starts the full-profile process if it is not running (C2: it does init/export/audit).
    async fn ensure_full(&mut self) -> Result<&McpProcess, StepError> {
        let spec = self.launch_spec(ProcessKind::Full);
        steps::ensure_running(&mut self.full, &spec).await
    }

    fn observed(&self) -> Result<&McpProcess, StepError> {
        self.observed.as_ref().ok_or_else(StepError::no_observed)
    }

    async fn init(&mut self, reset: bool) -> StepResult {
        if self.initialized {
            return Err(StepError::Refused(
                "this run already initialized its targets; a run is one canary (C7) — start a new \
                 run for another"
                    .to_owned(),
            ));
        }
        let fixtures = steps::init::authenticate(&self.manifest).await?;
        self.copy_suite_into_run().await?;
        self.ensure_full().await?;
        let full = self.full.as_ref().ok_or_else(StepError::no_full)?;
        let initial =
            steps::init::init_targets(full, &self.manifest, &fixtures, reset, &mut self.targets)
                .await?;
        if !self.manifest_written {
            let store = self.launcher().store_identity().await;
            let inputs = steps::init::ManifestInputs {
                started_ms: self.started_ms,
                identity: &self.identity,
                suite_source: self.suite_source.as_ref(),
                planned_host: self.planned_host.as_ref(),
                provider_endpoints: &self.provider_endpoints,
            };
            steps::init::write_run_manifest(self.launcher(), &inputs, initial, store)?;
            self.manifest_written = true;
        }
        self.initialized = true;
        Ok(format!(
            "{} targets at version 0 · fixture hashes verified",
            fixtures.len()
        ))
    }

    async fn preflight(&mut self) -> StepResult {
        // C3, in order: exact tool list; boundary refusal; worker ready; fresh targets.
        let ready_ms = steps::preflight::check_observed(self.observed()?, &self.run).await?;
        self.ensure_full().await?;
        let full = self.full.as_ref().ok_or_else(StepError::no_full)?;
        steps::preflight::check_targets_fresh(full, &self.targets).await?;
        // V3: a check that cannot judge (missing toolchain) stops the canary before the agent.
        let (cache, exports) = (self.control_cache_dir(), self.run.exports());
        let evaluator = Evaluator {
            exe: &self.options.exe,
            manifest: &self.options.manifest,
            exports: &exports,
            control_cache: &cache,
        };
        let controls = steps::evaluate::run_controls(&evaluator, &mut self.targets).await?;
        self.preflighted_pid = self.observed.as_ref().and_then(|p| p.pid);
        Ok(format!(
            "tools/list = 6 exact · full-profile call refused · worker ready {ready_ms} ms · {} targets fresh · {controls}",
            self.targets.len()
        ))
    }

    /// The scripted agent (C4). Records how it stopped ([`Canary::agent_stop`]).
    async fn agent(&mut self, plan_path: &Path) -> StepResult {
        let replica = self.replica.take();
        let transcript = self.transcript.as_ref().ok_or_else(|| {
            StepError::Io(anyhow::anyhow!(
                "the run directory was not created before the agent step"
            ))
        })?;
        let (observed, pid) = (self.observed(), self.preflighted_pid);
        let (result, stop) = steps::replica::beside_agent(replica, |mut progress| {
            let on_step = move |i: usize, s: &plan::PlanStep| progress.on_step(i, s);
            steps::agent::run_scripted(plan_path, observed, pid, transcript, on_step)
        })
        .await;
        self.agent_stop = Some(stop);
        result
    }

    /// The `agent claude|codex|gemini|opencode` step (A1–A4, [`steps::agent_host`]); records the host record
    /// and how the agent stopped.
    async fn agent_host(
        &mut self,
        host: Host,
        model: Option<String>,
        max_turns: Option<u32>,
        timeout: Duration,
    ) -> StepResult {
        if self.initialized && self.host_record.is_none() && host != Host::Cursor {
            // The freshness check reads the targets through the full process; a launch
            // failure shows there as the process not running.
            let _ = self.ensure_full().await;
        }
        let mut step = steps::agent_host::HostStep {
            run: &self.run,
            exe: &self.options.exe,
            settings: &self.options.settings,
            manifest: &self.manifest,
            observed_env: self.host_observed_env(),
            recorded_model: self.identity.model.clone(),
            initialized: self.initialized,
            host_ran: self.host_record.is_some(),
            progress: &self.host_progress,
            full: self.full.as_ref(),
            targets: &self.targets,
            stop: None,
            record: None,
        };
        let result = step.run(host, model, max_turns, timeout).await;
        let (stop, record) = (step.stop, step.record);
        if let Some(stop) = stop {
            self.agent_stop = Some(stop);
        }
        if let Some(record) = record {
            self.host_record = Some(record);
        }
        result
    }

    async fn wait(&mut self, what: WaitFor, timeout: Duration) -> StepResult {
        match what {
            WaitFor::Ready => {
                let ms = steps::preflight::wait_worker_ready(self.observed()?, &self.run, timeout)
                    .await?;
                Ok(format!("worker ready {ms} ms"))
            }
            WaitFor::Saved => {
                let spec = self.launch_spec(ProcessKind::Full);
                let observed_pid = self.observed.as_ref().and_then(|p| p.pid);
                steps::wait::wait_saved(&mut self.full, &spec, observed_pid, &self.targets, timeout)
                    .await
            }
        }
    }

    async fn export(&mut self) -> StepResult {
        crate::evidence::create_private_dir(&self.run.exports())?;
        self.ensure_full().await?;
        let full = self.full.as_ref().ok_or_else(StepError::no_full)?;
        steps::export::export(full, &self.manifest, &self.run, &mut self.targets).await
    }

    async fn inspect(&mut self) -> StepResult {
        self.ensure_full().await?;
        let full = self.full.as_ref().ok_or_else(StepError::no_full)?;
        steps::inspect::inspect(full, &self.manifest, &self.run, &mut self.targets).await
    }

    async fn evaluate(&mut self, options: &EvaluateOptions) -> StepResult {
        let (cache, exports) = (self.control_cache_dir(), self.run.exports());
        let evaluator = Evaluator {
            exe: &self.options.exe,
            manifest: &self.options.manifest,
            exports: &exports,
            control_cache: &cache,
        };
        let (evaluation, result) =
            steps::evaluate::evaluate(&evaluator, options, &mut self.targets).await;
        if let Some(evaluation) = evaluation {
            self.evaluation = Some(evaluation);
        }
        result
    }

    /// What the run's chained evidence logs lost, one line per log and fault
    /// ([`steps::seal::evidence_incomplete`]).
    pub fn evidence_incomplete(&self) -> Vec<String> {
        steps::seal::evidence_incomplete(&self.run, self.transcript.as_ref())
    }

    async fn report(&mut self) -> StepResult {
        // V1: nothing may write into the sealed run: both processes stopped and gone first.
        let pids: Vec<u32> = [&self.full, &self.observed]
            .into_iter()
            .filter_map(|p| p.as_ref().and_then(|p| p.pid))
            .collect();
        self.stop(None).await;
        steps::replica::disarm(self.replica.take()).await;
        steps::seal::wait_gone(&pids).await;
        // The report's target rows come from the store whenever it is
        // readable, whatever step failed.
        steps::seal::rows_from_store(
            &self.database_path(),
            self.options.database_url.as_deref(),
            &mut self.targets,
        )
        .await;
        // Sealed means finished — the run's own database is checkpointed into its
        // main file (its -wal/-shm are never sealed) before anything is hashed.
        let database = self.database_path();
        if database.starts_with(&self.run.path) {
            crate::store::checkpoint_for_seal(&database)
                .map_err(|e| StepError::Failed(format!("the run was not sealed: {e}")))?;
        }
        // Bound to its journal: the store's identity and each target's journal digest,
        // once targets exist (a run that never initialized has no journal).
        // A store that cannot be read now does not cost the run its seal: the binding file
        // says why, and `verify` names it.
        let mut unbound = String::new();
        if self.initialized {
            let url = self.options.database_url.as_deref();
            match steps::seal::journal_binding(&self.run, &database, url, &self.targets).await {
                Ok(binding) => binding.write(&self.run)?,
                Err(e) => {
                    crate::seal::JournalBinding::write_failure(&self.run, &e.to_string())?;
                    unbound = format!(" · journal NOT bound ({e})");
                }
            }
        }
        let report = self.build_report();
        report::write_reports(&self.run, &report)?;
        let sums = crate::evidence::seal_run(&self.run)?;
        self.sealed = true;
        let signed = steps::seal::sign_seal(&self.run, &self.options.settings.paths.config_dir);
        if report.infra_abort.is_some() {
            Err(StepError::Failed(format!(
                "the canary stopped before the agent acted (report in {}): {}",
                self.run.path.display(),
                report.failure_summary()
            )))
        } else if report.passed {
            Ok(format!(
                "report written to {} · sealed ({} {}) · {signed}{unbound}",
                self.run.path.display(),
                crate::evidence::SUMS_FILE,
                &sums[..12]
            ))
        } else {
            Err(StepError::Failed(format!(
                "the canary did not pass (report in {}): {}",
                self.run.path.display(),
                report.failure_summary()
            )))
        }
    }

    /// The text of a `runs` view ([`steps::views::runs_view`]) under this run's root.
    pub fn runs_view(&self, action: &command::RunsAction) -> StepResult {
        steps::views::runs_view(&self.options.runs_root, action)
    }

    /// The report as of now.
    pub fn build_report(&self) -> report::Report {
        report::Report::build(report::ReportInputs {
            run: &self.run,
            steps: &self.steps,
            targets: &self.targets,
            evaluation: self.evaluation.as_ref(),
            identity: &self.identity,
            host_record: self.host_record.as_ref(),
            agent_stop: self.agent_stop.as_ref(),
            agent_planned: self.agent_planned,
            provider_endpoints: &self.provider_endpoints,
            evidence_incomplete: self.evidence_incomplete(),
        })
    }

    /// Writes `<run>/agent-brief.md` (once; [`steps::host_config::write_agent_brief`]).
    pub fn write_agent_brief(&self) -> Result<PathBuf, StepError> {
        steps::host_config::write_agent_brief(&self.run, &self.manifest)
    }

    /// Writes `host`'s configuration document to a new file at `path`, 0600
    /// ([`steps::host_config::write_host_config`]). An existing file is refused, untouched.
    pub fn write_host_config(&self, host: Host, path: &Path) -> Result<(), StepError> {
        steps::host_config::write_host_config(&self.host_config(Some(host)), path)
    }

    /// The agent-host configuration for the observed process (SPEC C4, A5).
    pub fn host_config(&self, host: Option<Host>) -> String {
        let node = steps::host_config::resolved_node_binary(&self.options.settings);
        let mut env = client::host_env(
            &self.database_path(),
            &self.run.perf_events(HOST_OBSERVED),
            &self.run.wire_log(HOST_OBSERVED),
            node.as_deref(),
        );
        // The operator's database (PostgreSQL too), as the console's own processes use.
        for (k, v) in env.iter_mut() {
            if k == crate::config::Key::DatabaseUrl.variable() {
                *v = self.database_url();
            }
        }
        let exe = self.options.exe.display().to_string();
        host_config_text(host, &exe, &env)
    }

    /// The story of target `name` as this run knows it now (errors name the known targets).
    pub fn target_story(&self, name: &str) -> StepResult {
        story::target_story(
            &story::StoryInputs {
                run: &self.run,
                targets: &self.targets,
                manifest: &self.manifest,
                evaluation: self.evaluation.as_ref(),
            },
            name,
        )
    }

    /// Whether `report` sealed this run.
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }

    /// Why `command` is refused on this sealed run.
    pub fn sealed_refusal(&self, command: &Command) -> String {
        format!(
            "`{}` refused: run {} is sealed (its `report` wrote {} and {}) and nothing may write \
             to it; `new` starts the next run in this console",
            command.name(),
            self.run.run_id,
            crate::evidence::SUMS_FILE,
            crate::evidence::SEAL_FILE
        )
    }

    /// Why the run is `infra_abort` (a step failed before the agent acted), or `None`.
    pub fn infra_abort(&self) -> Option<String> {
        let failed = self
            .steps
            .iter()
            .find(|s| !s.ok && s.command != "report")
            .map(|s| (s.command.as_str(), s.summary.as_str()));
        outcome::decide(failed, false, self.agent_stop.as_ref(), self.agent_planned).1
    }

    /// Whether `command` still runs after a step failed. Views and `report`
    /// always do; once the agent acted, `export`, `inspect` and `evaluate` judge what it saved
    /// even when its step failed (timeout, turn limit, crash, provider error) — unless a step
    /// other than the agent's failed too.
    pub fn runs_after_failure(&self, command: &Command) -> bool {
        if matches!(
            command,
            Command::Report | Command::Target { .. } | Command::Runs { .. }
        ) {
            return true;
        }
        let acted = self.agent_stop.as_ref().is_some_and(|s| s.acted);
        let only_the_agent_failed = self
            .steps
            .iter()
            .filter(|s| !s.ok && s.command != "report")
            .all(|s| s.command == "agent");
        acted
            && only_the_agent_failed
            && matches!(
                command,
                Command::Export | Command::Inspect | Command::Evaluate { .. }
            )
    }

    /// Stops the named processes (both by default), recording their exit.
    pub async fn stop(&mut self, which: Option<ProcessKind>) {
        let kinds = match which {
            Some(k) => vec![k],
            None => vec![ProcessKind::Observed, ProcessKind::Full],
        };
        for kind in kinds {
            if let Some(p) = self.slot(kind).take() {
                p.stop().await;
                self.exits
                    .insert(kind.as_str(), "stopped by operator".into());
            }
        }
    }
}

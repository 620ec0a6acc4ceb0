//! The canary procedure (SPEC C1–C7): the step runner shared by the interactive console and
//! `--script`. One [`Canary`] owns a run directory, the two MCP processes and what the run has
//! learned so far; [`Canary::execute`] runs one [`Command`] and returns its one-line outcome.

pub mod client;
pub mod command;
pub mod host;
pub mod host_run;
pub mod outcome;
pub mod plan;
pub mod record;
pub mod report;
// Runs over time moved to `crate::runs`; the old path stays for its callers.
pub use crate::runs;
pub mod story;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use self::client::{LaunchSpec, McpProcess, observed_env};
use self::command::{Command, Host, ProcessKind, WaitFor};
use crate::evaluate::Evaluation;
use crate::evidence::{AgentIdentity, InitialTarget, JsonlLog, RunDir, RunManifest};
use crate::fixtures::FixtureManifest;
use crate::mcp::{FULL_ONLY_TOOLS, OBSERVED_TOOLS};
use crate::telemetry::{PerfEvent, unix_ms_now};

/// W6: startup readiness ceiling; preflight waits this long (plus slack) for `worker_ready`.
pub const READINESS_WAIT: Duration = Duration::from_secs(10);

/// The result of one step: `ok` and a one-line summary (U5).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepOutcome {
    pub command: String,
    pub ok: bool,
    pub summary: String,
    pub elapsed_ms: u64,
}

/// One target's row as the run knows it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TargetRow {
    pub name: String,
    pub language: String,
    pub initial_sha256: String,
    pub version: u64,
    pub revision: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub current_sha256: String,
    pub exported_sha256: Option<String>,
    pub replay_consistent: Option<bool>,
    pub full_byte: Option<bool>,
    pub behavioral: Option<bool>,
    /// The evaluator's verdict class, or a preflight control's `infra_error` (V3).
    pub status: Option<crate::evaluate::Status>,
    /// Exit status and output tail (≤ 4 KiB) of the check run that explains a non-pass.
    pub check_exit: Option<String>,
    pub check_output: Option<String>,
    pub notes: Vec<String>,
    /// The rule that decided this target.
    pub require: Option<crate::evaluate::Require>,
    /// Where the export first differs from the reference; null when identical or unevaluated.
    pub first_difference: Option<String>,
    /// The named checks of the run that explains the verdict.
    pub checks: Vec<crate::evaluate::NamedCheck>,
    /// Names of the named checks that failed in any run on the export.
    pub failing_checks: Vec<String>,
    /// Why the check's output gave no named checks, if it did not.
    pub checks_note: Option<String>,
    /// `run (digest …)` or `reused (digest …)`: where the controls came from.
    pub controls: Option<String>,
}

/// Options fixed for the life of a run.
#[derive(Debug, Clone)]
pub struct CanaryOptions {
    /// The `patchdiff` executable used for child processes (`patchdiff mcp`, `patchdiff evaluate`).
    pub exe: PathBuf,
    pub manifest: PathBuf,
    /// Where run directories are created.
    pub runs_root: PathBuf,
    /// `PATCHDIFF_DATABASE_URL` to use instead of the per-run database.
    pub database_url: Option<String>,
    /// The console's resolved configuration (P1): what its children are given, the Node binary
    /// and host CLIs it resolves.
    pub settings: crate::config::Settings,
}

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
    /// [`record::provider_endpoints`] of the provider variables this console
    /// passes to agent hosts (recorded in the manifest; loopback marks a rehearsal).
    pub provider_endpoints: Value,
    /// The suite's manifest the run's copy was made from, once `init` copied the
    /// authenticated suite into the run (`suite/`); from then on `manifest` and
    /// `options.manifest` are the run's copy.
    suite_source: Option<PathBuf>,
}

/// Builds a run id from the wall clock: `r-YYYYMMDD-HHMMSS-<pid>`.
pub fn new_run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "r-{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        std::process::id()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

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
        let targets = manifest
            .fixtures
            .iter()
            .map(|f| TargetRow {
                name: f.target.clone(),
                language: f.language.clone(),
                initial_sha256: f.sha256.clone(),
                ..TargetRow::default()
            })
            .collect();
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
        })
    }

    /// `suite PATH`: the fixture suite this run uses — a suite directory (its `manifest.json`)
    /// or a manifest file. Only before `init`; the targets shown are the suite's. Errors: after
    /// `init`, or a manifest that does not load (naming the file and the field).
    pub fn use_suite(&mut self, path: &Path) -> anyhow::Result<String> {
        if self.initialized || self.suite_source.is_some() {
            anyhow::bail!(
                "`suite` must come before `init`: this run already copied its suite from {}",
                self.suite_source
                    .as_deref()
                    .unwrap_or(&self.options.manifest)
                    .display()
            );
        }
        let manifest_path = if path.is_dir() {
            path.join("manifest.json")
        } else {
            path.to_path_buf()
        };
        let manifest = FixtureManifest::load(&manifest_path)?;
        self.targets = manifest
            .fixtures
            .iter()
            .map(|f| TargetRow {
                name: f.target.clone(),
                language: f.language.clone(),
                initial_sha256: f.sha256.clone(),
                ..TargetRow::default()
            })
            .collect();
        let summary = format!(
            "{} targets ({}) · {}",
            manifest.fixtures.len(),
            manifest
                .fixtures
                .iter()
                .map(|f| f.target.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            manifest_path.display()
        );
        self.manifest = manifest;
        self.options.manifest = manifest_path;
        Ok(summary)
    }

    /// Copies the authenticated suite into the run (`suite/`) once, and makes
    /// the copy the run's manifest from then on: init, the brief, the evaluator and `verify`
    /// all read the run's own copy, so the run verifies on any machine.
    async fn copy_suite_into_run(&mut self) -> anyhow::Result<()> {
        if self.suite_source.is_some() {
            return Ok(());
        }
        let source = self.manifest.clone();
        let dest = self.run.path.join(crate::fixtures::RUN_SUITE_DIR);
        let copy = tokio::task::spawn_blocking(move || {
            source
                .copy_into(&dest)
                .and_then(|m| FixtureManifest::load(&m).map(|l| (m, l)))
        })
        .await
        .map_err(|e| anyhow::anyhow!("suite copy task failed: {e}"))??;
        self.suite_source = Some(std::mem::replace(&mut self.options.manifest, copy.0));
        self.manifest = copy.1;
        Ok(())
    }

    /// `PATCHDIFF_DATABASE_URL` for the run's processes: the operator's, else the run's own file.
    pub fn database_url(&self) -> String {
        self.options
            .database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.run.database().display()))
    }

    /// The database file the run's processes use.
    pub fn database_path(&self) -> PathBuf {
        crate::config::parse_database_url(&self.database_url())
            .unwrap_or_else(|_| self.run.database())
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
        let result = match self.create_run_dir_for(command) {
            Err(e) => Err(e),
            Ok(()) => self.run_step(command).await,
        };
        let (ok, summary) = match result {
            Ok(s) => (true, s),
            Err(e) => (false, format!("{e:#}")),
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

    /// Creates the run directory (0700) and opens its transcript before the first step that is
    /// not a view ([`Command::is_view`]); views write nothing and need none.
    fn create_run_dir_for(&mut self, command: &Command) -> anyhow::Result<()> {
        if command.is_view() || self.transcript.is_some() {
            return Ok(());
        }
        let run = RunDir::create(&self.options.runs_root, &self.run.run_id).map_err(|e| {
            anyhow::anyhow!(
                "cannot create the run directory {}: {e}",
                self.run.path.display()
            )
        })?;
        self.transcript = Some(JsonlLog::open(&run.transcript())?);
        self.run = run;
        Ok(())
    }

    /// Runs one step's body (the run directory exists unless the step is a view).
    async fn run_step(&mut self, command: &Command) -> anyhow::Result<String> {
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
                self.evaluate(*repeat, *require, *check_timeout, *fresh_controls)
                    .await
            }
            Command::Report => self.report().await,
            Command::Stop { which } => {
                self.stop(*which).await;
                Ok("stopped".to_owned())
            }
            Command::Attach { .. } => Err(anyhow::anyhow!(
                "`attach` works only in the interactive console (it watches a process, it runs no step)"
            )),
            Command::New => Err(anyhow::anyhow!(
                "`new` works only in the interactive console (a script is one run)"
            )),
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
                                .map_err(anyhow::Error::msg)?;
                            self.write_host_config(*h, path)?;
                            format!(" · written to {} (0600)", path.display())
                        }
                        _ => String::new(),
                    };
                    Ok(format!(
                        "agent-host configuration for the observed process ({}) · agent brief {}{written}",
                        host.map_or("claude, codex, cursor", |h| h.as_str()),
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
    ) -> anyhow::Result<String> {
        if self.manifest_written {
            anyhow::bail!(
                "the run manifest is already written (it is append-only, E2); record before init"
            );
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

    fn launch_spec(&self, kind: ProcessKind) -> LaunchSpec {
        let mut env = match kind {
            ProcessKind::Observed => {
                observed_env(&self.database_path(), &self.run.perf_events(kind.as_str()))
            }
            // The trusted process only initializes, exports and audits: it needs no resident
            // worker, so it runs discovery one-shot if ever asked.
            ProcessKind::Full => vec![
                (
                    crate::config::Key::McpProfile.variable().into(),
                    "full".into(),
                ),
                (
                    crate::config::Key::WaymarkMode.variable().into(),
                    "oneshot".into(),
                ),
                (
                    crate::config::Key::PerfEvents.variable().into(),
                    self.run.perf_events("full").display().to_string(),
                ),
            ],
        };
        env.retain(|(k, _)| k != crate::config::Key::DatabaseUrl.variable());
        env.push((
            crate::config::Key::DatabaseUrl.variable().into(),
            self.database_url(),
        ));
        env.push((
            crate::config::Key::EvidenceWireLog.variable().into(),
            self.run.wire_log(kind.as_str()).display().to_string(),
        ));
        env.push((
            crate::config::Key::WorkerStderrLog.variable().into(),
            self.run
                .worker_stderr_log(kind.as_str())
                .display()
                .to_string(),
        ));
        // P1/P3: the child gets exactly the configuration this console resolved (its
        // environment, with its config file already applied), nothing else: the operator-level
        // settings it honours are forwarded, and it reads no config file of its own (the
        // operator's `patchdiff.toml` was this console's to apply, or not).
        env.extend(self.options.settings.child_env(&FORWARDED_TO_CHILDREN));
        env.push((
            crate::config::Key::Config.variable().into(),
            "/dev/null".into(),
        ));
        // The observed process knows the provider credentials' values (and never uses them) so
        // that its wire log redacts a key the agent puts into a tool argument.
        if kind == ProcessKind::Observed {
            for (k, v) in host::provider_env() {
                if crate::redact::is_secret_name(&k) && !env.iter().any(|(ek, _)| *ek == k) {
                    env.push((k, v));
                }
            }
        }
        LaunchSpec {
            kind,
            exe: self.options.exe.clone(),
            env,
            stderr: self.run.stderr_log(kind.as_str()),
        }
    }

    fn slot(&mut self, kind: ProcessKind) -> &mut Option<McpProcess> {
        match kind {
            ProcessKind::Full => &mut self.full,
            ProcessKind::Observed => &mut self.observed,
        }
    }

    async fn launch_one(&mut self, kind: ProcessKind) -> anyhow::Result<String> {
        if let Some(old) = self.slot(kind).take() {
            old.stop().await;
        }
        let spec = self.launch_spec(kind);
        let process = McpProcess::launch(&spec).await?;
        let pid = process.pid.map_or("?".to_owned(), |p| p.to_string());
        *self.slot(kind) = Some(process);
        Ok(format!("{} pid {pid}", kind.as_str()))
    }

    async fn launch(&mut self, which: Option<ProcessKind>) -> anyhow::Result<String> {
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
    async fn ensure_full(&mut self) -> anyhow::Result<()> {
        if self.full.is_none() {
            self.launch_one(ProcessKind::Full).await?;
        }
        Ok(())
    }

    fn full(&self) -> anyhow::Result<&McpProcess> {
        self.full
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the full-profile process is not running"))
    }

    fn observed(&self) -> anyhow::Result<&McpProcess> {
        self.observed.as_ref().ok_or_else(|| {
            anyhow::anyhow!("the observed-profile process is not running; run `launch observed`")
        })
    }

    async fn init(&mut self, reset: bool) -> anyhow::Result<String> {
        if self.initialized {
            anyhow::bail!(
                "this run already initialized its targets; a run is one canary (C7) — start a new \
                 run for another"
            );
        }
        // C1: authenticate every fixture before initializing any.
        // Off the async runtime: these are file reads (bounded, regular files only).
        let manifest = self.manifest.clone();
        let fixtures = tokio::task::spawn_blocking(move || manifest.authenticate_originals())
            .await
            .map_err(|e| anyhow::anyhow!("fixture authentication task failed: {e}"))??;
        self.copy_suite_into_run().await?;
        self.ensure_full().await?;
        let full = self
            .full
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no full process"))?;
        let mut initial = Vec::new();
        for (fixture, _) in &fixtures {
            let path = std::fs::canonicalize(self.manifest.resolve(&fixture.original))?;
            let reply = full
                .call_ok(
                    "patchdiff_init_target",
                    json!({
                        "target": fixture.target, "fixture": path, "sha256": fixture.sha256,
                        "language": fixture.language, "reset": reset,
                    }),
                )
                .await
                .map_err(|e| anyhow::anyhow!("target `{}`: {}", fixture.target, e.message))?;
            initial.push(InitialTarget {
                target: fixture.target.clone(),
                language: fixture.language.clone(),
                sha256: reply["sha256"].as_str().unwrap_or_default().to_owned(),
                version: reply["version"].as_u64().unwrap_or_default(),
            });
        }
        for row in &mut self.targets {
            if let Some(t) = initial.iter().find(|t| t.target == row.name) {
                row.current_sha256 = t.sha256.clone();
                row.version = t.version;
            }
        }
        if !self.manifest_written {
            let store = self.store_identity().await;
            self.write_manifest(initial, store)?;
        }
        self.initialized = true;
        Ok(format!(
            "{} targets at version 0 · fixture hashes verified",
            fixtures.len()
        ))
    }

    /// The run's database's identity (backend, database name, store id, on PostgreSQL the
    /// cluster's `system_identifier` and the database oid; never a secret), or why it could
    /// not be read — the manifest records either, and `verify` refuses another database.
    async fn store_identity(&self) -> serde_json::Value {
        let (path, url) = (self.database_path(), self.options.database_url.clone());
        let read = tokio::task::spawn_blocking(move || {
            crate::store::open_backend(&path, url.as_deref()).and_then(|s| s.identity())
        })
        .await;
        match read {
            Ok(Ok(identity)) => serde_json::to_value(identity).unwrap_or_default(),
            Ok(Err(e)) => json!({ "error": e.to_string() }),
            Err(e) => json!({ "error": e.to_string() }),
        }
    }

    /// The journal binding of the seal (store identity and each target's journal digest),
    /// read after the checkpoint — the run's own SQLite file through an `immutable` read-only
    /// view, so sealing writes nothing into it; PostgreSQL or an operator's file as configured.
    async fn journal_binding(&self) -> anyhow::Result<crate::seal::JournalBinding> {
        let (path, url) = (self.database_path(), self.options.database_url.clone());
        // Only the run's own file was checkpointed; an operator's file elsewhere may hold
        // frames in its WAL that an `immutable` view would not see.
        let postgres = url.as_deref().is_some_and(crate::store::is_postgres_url);
        let checkpointed = !postgres && path.starts_with(&self.run.path);
        let targets: Vec<String> = self.targets.iter().map(|t| t.name.clone()).collect();
        let bound = tokio::task::spawn_blocking(move || {
            let store: std::sync::Arc<dyn crate::store::EditStore> = if checkpointed {
                std::sync::Arc::new(crate::store::SqliteStore::open_read_only(&path)?)
            } else {
                crate::store::open_backend(&path, url.as_deref())?
            };
            crate::seal::JournalBinding::of(store.as_ref(), &targets)
        })
        .await?;
        bound.map_err(|e| anyhow::anyhow!("{e}"))
    }

    fn write_manifest(
        &mut self,
        initial_targets: Vec<InitialTarget>,
        store_identity: serde_json::Value,
    ) -> anyhow::Result<()> {
        let (source_sha, source_sha_origin) = crate::evidence::source_sha();
        let observed = self.launch_spec(ProcessKind::Observed);
        let full = self.launch_spec(ProcessKind::Full);
        let manifest = RunManifest {
            run_id: self.run.run_id.clone(),
            started_ms: self.started_ms,
            written_ms: unix_ms_now(),
            source_sha,
            source_sha_origin,
            agent: self.identity.clone(),
            initial_targets,
            configuration: json!({
                "observed_process": record::redacted_env(observed.env.iter().cloned()),
                // E1: the complete run record (resolved per process; software versions).
                "processes": {
                    "observed": record::process_record(&observed.env, &self.options.settings),
                    "full": record::process_record(&full.env, &self.options.settings),
                },
                "node": record::node_record(&observed.env, &self.options.settings),
                "waymark_packages": crate::waymark::WaymarkConfig::default_script_dir(&self.options.settings)
                    .map_or_else(|e| json!({ "error": e.to_string() }), |dir| record::waymark_packages(&dir)),
                "console": record::console_record(),
                // The database the journal lives in (`verify` refuses another one).
                "store_identity": store_identity,
                // The run's own copy of the suite (relative to the run directory) and where
                // it was copied from (a run verifies from its copy wherever it is moved).
                "fixture_manifest": self.options.manifest.strip_prefix(&self.run.path)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| self.options.manifest.clone()),
                "fixture_manifest_source": self.suite_source.as_ref().map(|s| {
                    std::fs::canonicalize(s).unwrap_or_else(|_| s.clone())
                }),
                "fixture_manifest_sha256": crate::evidence::file_digest(&self.options.manifest).ok(),
                "executable": self.options.exe,
                "agent_host": self.planned_host,
                // Which provider endpoints the agent host would talk to (host
                // and whether it is loopback, never a URL's secrets).
                "provider_endpoints": self.provider_endpoints,
                // A1: the observed process an agent host starts from its MCP configuration.
                "host_observed_process": self.planned_host.as_ref().map(|_| {
                    record::redacted_env(self.host_observed_env())
                }),
            }),
            gate2: "closed".to_owned(),
        };
        self.run.write_manifest(&manifest)?;
        self.manifest_written = true;
        Ok(())
    }

    async fn preflight(&mut self) -> anyhow::Result<String> {
        // C3, in order: exact tool list; boundary refusal; worker ready; fresh targets.
        let observed = self.observed()?;
        let mut names = observed.tool_names().await?;
        names.sort();
        let mut expected: Vec<String> = OBSERVED_TOOLS.iter().map(|s| s.to_string()).collect();
        expected.sort();
        if names != expected {
            anyhow::bail!(
                "tools/list on the observed process is {} tools [{}], expected exactly the six [{}]",
                names.len(),
                names.join(", "),
                expected.join(", ")
            );
        }
        let probe = FULL_ONLY_TOOLS[0];
        boundary_refusal(probe, observed.call(probe, json!({})).await)?;
        let ready_ms = self.wait_worker_ready(READINESS_WAIT).await?;
        self.check_targets_fresh().await?;
        // V3: a check that cannot judge (missing toolchain) stops the canary before the agent.
        let controls = report::run_controls(self).await?;
        self.preflighted_pid = self.observed.as_ref().and_then(|p| p.pid);
        Ok(format!(
            "tools/list = 6 exact · full-profile call refused · worker ready {ready_ms} ms · {} targets fresh · {controls}",
            self.targets.len()
        ))
    }

    /// C3: every target is at version 0 and revision 0 with no attempts.
    async fn check_targets_fresh(&mut self) -> anyhow::Result<()> {
        self.ensure_full().await?;
        let full = self.full()?;
        let mut stale = Vec::new();
        for row in &self.targets {
            let t = full
                .call_ok("patchdiff_read_target", json!({"target": row.name}))
                .await?;
            let audit = full
                .call_ok("patchdiff_audit", json!({"target": row.name}))
                .await?;
            let attempts = attempts_of(&audit);
            if t["version"].as_u64() != Some(0)
                || t["revision"].as_u64() != Some(0)
                || attempts != 0
            {
                stale.push(format!(
                    "{} (version {}, revision {}, attempts {attempts})",
                    row.name, t["version"], t["revision"]
                ));
            }
        }
        if !stale.is_empty() {
            anyhow::bail!("targets are not fresh: {}", stale.join(", "));
        }
        Ok(())
    }

    /// Waits for the observed process's `worker_ready` perf event; returns its readiness time.
    async fn wait_worker_ready(&self, limit: Duration) -> anyhow::Result<u64> {
        let pid = self
            .observed()?
            .pid
            .ok_or_else(|| anyhow::anyhow!("the observed process has no pid"))?;
        let path = self.run.perf_events(ProcessKind::Observed.as_str());
        let deadline = Instant::now() + limit;
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let state = worker_readiness(&text, pid);
            if let WorkerReadiness::Ready { readiness_ms } = state {
                return Ok(readiness_ms);
            }
            // A failed launch or a generation retired before readiness will not become
            // ready (nothing relaunches it before a request); say why now, not at the deadline.
            if matches!(
                state,
                WorkerReadiness::LaunchFailed { .. } | WorkerReadiness::Retired { .. }
            ) {
                anyhow::bail!(
                    "the observed process's worker is not ready ({}; see {})",
                    state.describe(),
                    self.run.stderr_log("observed").display()
                );
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "the observed process's worker is not ready after {} s ({}; see {})",
                    limit.as_secs(),
                    state.describe(),
                    self.run.stderr_log("observed").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The scripted agent (C4). Records how it stopped ([`Canary::agent_stop`]): refused before
    /// its first call (no plan, no passed preflight), deviated from its plan, or finished.
    async fn agent(&mut self, plan_path: &Path) -> anyhow::Result<String> {
        use outcome::{AgentStop, StopReason};
        let ready = plan::load_plan(plan_path)
            .map_err(anyhow::Error::msg)
            .and_then(|steps| {
                let observed = self.observed()?;
                if observed.pid.is_none() || observed.pid != self.preflighted_pid {
                    anyhow::bail!(
                        "run `preflight` first: the agent is handed the observed process only \
                         after it passes preflight (C3), and this one (pid {}) has not",
                        observed.pid.map_or("?".into(), |p| p.to_string())
                    );
                }
                Ok((steps, observed))
            });
        let (steps, observed) = match ready {
            Ok(ready) => ready,
            Err(e) => {
                self.agent_stop = Some(AgentStop::new(StopReason::NotStarted, format!("{e:#}")));
                return Err(e);
            }
        };
        let Some(transcript) = self.transcript.as_ref() else {
            anyhow::bail!("the run directory was not created before the agent step");
        };
        let outcome = plan::run_plan(observed, &steps, transcript, |_, _| {}).await;
        if !outcome.deviations.is_empty() {
            let why = format!(
                "{} of {} calls deviated from the plan: {}",
                outcome.deviations.len(),
                outcome.calls,
                outcome.deviations.join(" | ")
            );
            let mut stop = AgentStop::new(StopReason::PlanDeviated, why.clone());
            // A plan whose every call failed at the transport never reached the agent's work.
            stop.acted = outcome.calls > 0;
            self.agent_stop = Some(stop);
            anyhow::bail!(why);
        }
        self.agent_stop = Some(AgentStop::new(
            StopReason::Finished,
            format!("{} calls", outcome.calls),
        ));
        Ok(format!(
            "{} calls · {} expected rejections · plan {}",
            outcome.calls,
            outcome.errors_expected,
            plan_path.display()
        ))
    }

    async fn wait(&mut self, what: WaitFor, timeout: Duration) -> anyhow::Result<String> {
        match what {
            WaitFor::Ready => {
                let ms = self.wait_worker_ready(timeout).await?;
                Ok(format!("worker ready {ms} ms"))
            }
            WaitFor::Saved => {
                let deadline = Instant::now() + timeout;
                loop {
                    self.ensure_full().await?;
                    let full = self.full()?;
                    let mut unsaved = Vec::new();
                    for row in &self.targets {
                        let t = full
                            .call_ok("patchdiff_read_target", json!({"target": row.name}))
                            .await?;
                        if t["version"].as_u64().unwrap_or(0) == 0 {
                            unsaved.push(row.name.clone());
                        }
                    }
                    if unsaved.is_empty() {
                        return Ok("every target saved".to_owned());
                    }
                    // U1: a process that died while we wait ends the wait, with its exit.
                    if let Some(pid) = self.observed.as_ref().and_then(|p| p.pid) {
                        let state = client::proc_state(u64::from(pid));
                        if state == "gone" || state.starts_with('Z') {
                            anyhow::bail!(
                                "the observed process (pid {pid}) exited while waiting ({state}); not yet saved: {}",
                                unsaved.join(", ")
                            );
                        }
                    }
                    if Instant::now() >= deadline {
                        anyhow::bail!("timed out; not yet saved: {}", unsaved.join(", "));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    async fn export(&mut self) -> anyhow::Result<String> {
        let dir = self.run.exports();
        crate::evidence::create_private_dir(&dir)?;
        self.ensure_full().await?;
        let full = self
            .full
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no full process"))?;
        let mut lines = Vec::new();
        for fixture in &self.manifest.fixtures {
            let dest = dir.join(&fixture.module_file);
            if dest.exists() {
                anyhow::bail!(
                    "`{}` was already exported in this run ({}); exports are written once (E2)",
                    fixture.target,
                    dest.display()
                );
            }
            let reply = full
                .call_ok(
                    "patchdiff_export_target",
                    json!({"target": fixture.target, "dest": dest}),
                )
                .await
                .map_err(|e| {
                    anyhow::anyhow!("export of `{}` failed: {}", fixture.target, e.message)
                })?;
            if let Some(row) = self.targets.iter_mut().find(|r| r.name == fixture.target) {
                row.exported_sha256 = reply["sha256"].as_str().map(str::to_owned);
                row.version = reply["version"].as_u64().unwrap_or(row.version);
            }
            lines.push(format!("{} v{}", fixture.target, reply["version"]));
        }
        Ok(format!("{} → {}", lines.join(" · "), dir.display()))
    }

    async fn inspect(&mut self) -> anyhow::Result<String> {
        self.ensure_full().await?;
        let full = self
            .full
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no full process"))?;
        let mut problems = Vec::new();
        let (mut attempts_total, mut rejected_total, mut worker_errors) = (0, 0, 0);
        for i in 0..self.targets.len() {
            let name = self.targets[i].name.clone();
            let fixture = self
                .manifest
                .fixture(&name)
                .ok_or_else(|| anyhow::anyhow!("target `{name}` is not in the manifest"))?;
            let original = std::fs::read(self.manifest.resolve(&fixture.original))?;
            let t = full
                .call_ok("patchdiff_read_target", json!({"target": name}))
                .await?;
            let audit = full
                .call_ok("patchdiff_audit", json!({"target": name}))
                .await?;
            let consistency = report::replay_consistency(full, &name, &original, &t).await;
            let row = &mut self.targets[i];
            row.version = t["version"].as_u64().unwrap_or(0);
            row.revision = t["revision"].as_u64().unwrap_or(0);
            row.current_sha256 = t["sha256"].as_str().unwrap_or_default().to_owned();
            row.accepted = audit["attempts"]["accepted"].as_u64().unwrap_or(0);
            row.rejected = audit["attempts"]["rejected"].as_u64().unwrap_or(0);
            attempts_total += row.accepted + row.rejected;
            rejected_total += row.rejected;
            worker_errors += audit["worker_errors"]
                .as_object()
                .map(|m| m.values().filter_map(Value::as_u64).sum::<u64>())
                .unwrap_or(0);
            match consistency {
                Ok(()) => row.replay_consistent = Some(true),
                Err(e) => {
                    row.replay_consistent = Some(false);
                    row.notes.push(e.clone());
                    problems.push(format!("{name}: {e}"));
                }
            }
        }
        if !problems.is_empty() {
            anyhow::bail!("SAVE/replay inconsistent: {}", problems.join("; "));
        }
        Ok(format!(
            "SAVE/replay consistent for {} targets · {attempts_total} attempts, {rejected_total} rejected · {worker_errors} worker errors",
            self.targets.len()
        ))
    }

    /// Where the evaluator caches controls that hold: the data directory's
    /// `control-cache`.
    pub fn control_cache_dir(&self) -> PathBuf {
        self.options.settings.paths.data_dir.join("control-cache")
    }

    async fn evaluate(
        &mut self,
        repeat: u32,
        require: Option<crate::evaluate::Require>,
        check_timeout: Option<u64>,
        fresh_controls: bool,
    ) -> anyhow::Result<String> {
        // C6: a separate process that reads only the exports and the fixture manifest; it dies
        // with this step (kill on drop), and its checks die with it.
        let mut cmd = tokio::process::Command::new(&self.options.exe);
        cmd.arg("evaluate")
            .arg("--repeat")
            .arg(repeat.to_string())
            .arg("--require")
            .arg(require.unwrap_or_default().as_str())
            .arg("--manifest")
            .arg(&self.options.manifest)
            .arg("--exports")
            .arg(self.run.exports())
            .arg("--control-cache")
            .arg(self.control_cache_dir())
            .arg("--json")
            .kill_on_drop(true);
        if let Some(secs) = check_timeout {
            cmd.arg("--check-timeout").arg(secs.to_string());
        }
        if fresh_controls {
            cmd.arg("--fresh-controls");
        }
        let output = cmd.output().await?;
        let evaluation: Evaluation = serde_json::from_slice(&output.stdout).map_err(|e| {
            anyhow::anyhow!(
                "the evaluator did not produce a report ({e}): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })?;
        for verdict in &evaluation.targets {
            if let Some(row) = self.targets.iter_mut().find(|r| r.name == verdict.name) {
                row.full_byte = Some(verdict.full_byte);
                row.behavioral = Some(verdict.behavioral);
                row.status = Some(verdict.status);
                row.check_exit.clone_from(&verdict.check_exit);
                row.check_output = (!verdict.passed()).then(|| verdict.check_output.clone());
                row.notes.extend(verdict.notes.iter().cloned());
                row.require = Some(verdict.require);
                row.first_difference.clone_from(&verdict.first_difference);
                row.checks.clone_from(&verdict.checks);
                row.failing_checks.clone_from(&verdict.failing_checks);
                row.checks_note.clone_from(&verdict.checks_note);
                row.controls = verdict
                    .controls_source
                    .as_ref()
                    .map(crate::evaluate::ControlSource::describe);
            }
        }
        let failed: Vec<String> = evaluation
            .targets
            .iter()
            .filter(|t| !t.passed())
            .map(|t| match t.status {
                crate::evaluate::Status::InfraError | crate::evaluate::Status::Flaky => format!(
                    "{} {} ({}: {})",
                    t.name,
                    t.status.as_str(),
                    t.check_exit.as_deref().unwrap_or("-"),
                    crate::evaluate::headline(&t.check_output)
                ),
                _ if !t.failing_checks.is_empty() => {
                    format!(
                        "{} (failing checks: {})",
                        t.name,
                        t.failing_checks.join(", ")
                    )
                }
                _ => t.name.clone(),
            })
            .collect();
        let identical = evaluation.targets.iter().filter(|t| t.full_byte).count();
        let summary = format!(
            "{}/{} targets pass ({}) · {identical}/{} identical to the reference · controls {} run, {} reused",
            evaluation.passed,
            evaluation.total,
            match evaluation.require {
                crate::evaluate::Require::FullByte => "full-byte required",
                crate::evaluate::Require::Behavioral => "behaviour decides",
            },
            evaluation.total,
            evaluation.controls_run,
            evaluation.controls_reused
        );
        self.evaluation = Some(evaluation);
        if failed.is_empty() {
            Ok(summary)
        } else {
            anyhow::bail!("{summary}; failed: {}", failed.join(", "))
        }
    }

    /// Each target row's version, revision, accepted/rejected counts and
    /// current hash from the store (the run's SQLite file or the operator's database), when it
    /// can be read; the connection is closed again before returning. Unreadable: rows stay.
    async fn refresh_rows_from_store(&mut self) {
        let (path, url) = (self.database_path(), self.options.database_url.clone());
        if url.is_none() && !path.is_file() {
            return;
        }
        let read = tokio::task::spawn_blocking(move || {
            crate::store::open_backend(&path, url.as_deref()).and_then(|s| s.list_targets())
        })
        .await;
        let Ok(Ok(summaries)) = read else { return };
        for row in &mut self.targets {
            if let Some(t) = summaries.iter().find(|t| t.name == row.name) {
                row.version = t.version;
                row.revision = t.revision;
                row.accepted = t.accepted;
                row.rejected = t.rejected;
                row.current_sha256.clone_from(&t.sha256);
            }
        }
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

    /// What the run's chained evidence logs lost, one line per log and fault (the log,
    /// how many records, which): gap records, `seq` jumps, torn lines, broken links, and this
    /// process's own failed appends not yet recorded in a file.
    pub fn evidence_incomplete(&self) -> Vec<String> {
        let mut out = Vec::new();
        for rel in crate::evidence::evidence_files(&self.run.path)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| crate::evidence::is_chained(r))
        {
            let Ok(audit) = crate::evidence::audit_file(&self.run.path.join(&rel)) else {
                out.push(format!("{rel}: cannot be read"));
                continue;
            };
            for gap in &audit.gaps {
                out.push(format!("{rel}: {}", gap.describe()));
            }
            if !audit.torn.is_empty() {
                out.push(format!(
                    "{rel}: {} torn line(s) (writes cut short) at line(s) {}",
                    audit.torn.len(),
                    audit
                        .torn
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if let Some((line, why)) = &audit.changed {
                out.push(format!("{rel}: line {line}: {why}"));
            }
        }
        if let Some(gap) = self.transcript.as_ref().and_then(JsonlLog::pending_gap) {
            out.push(format!(
                "transcript.jsonl: {} record(s) of this console lost and not yet recorded ({})",
                gap.records, gap.error
            ));
        }
        out
    }

    async fn report(&mut self) -> anyhow::Result<String> {
        report::stop_for_seal(self).await;
        // The report's target rows come from the store whenever it is
        // readable, whatever step failed.
        self.refresh_rows_from_store().await;
        // Sealed means finished — the run's own database is checkpointed into its
        // main file (its -wal/-shm are never sealed) before anything is hashed.
        let database = self.database_path();
        if database.starts_with(&self.run.path) {
            crate::store::checkpoint_for_seal(&database)
                .map_err(|e| anyhow::anyhow!("the run was not sealed: {e}"))?;
        }
        // Bound to its journal: the store's identity and each target's journal digest,
        // once targets exist (a run that never initialized has no journal).
        // A store that cannot be read now does not cost the run its seal: the binding file
        // says why, and `verify` names it.
        let mut unbound = String::new();
        if self.initialized {
            match self.journal_binding().await {
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
        let signed = self.sign_seal();
        if report.infra_abort.is_some() {
            anyhow::bail!(
                "the canary stopped before the agent acted (report in {}): {}",
                self.run.path.display(),
                report.failure_summary()
            )
        } else if report.passed {
            Ok(format!(
                "report written to {} · sealed ({} {}) · {signed}{unbound}",
                self.run.path.display(),
                crate::evidence::SUMS_FILE,
                &sums[..12]
            ))
        } else {
            anyhow::bail!(
                "the canary did not pass (report in {}): {}",
                self.run.path.display(),
                report.failure_summary()
            )
        }
    }

    /// Signs the seal with the operator's key (`<config dir>/seal-key.pem`) when one exists;
    /// says what happened: `signed by <key id>`, `unsigned (no key: patchdiff key new)`, or
    /// why the key could not sign (the run stays sealed, unsigned).
    fn sign_seal(&self) -> String {
        let path = crate::seal::key_path(&self.options.settings.paths.config_dir);
        match crate::seal::SealKey::load(&path) {
            Ok(Some(key)) => match key.sign_run(&self.run.path) {
                Ok(id) => format!("signed by {id}"),
                Err(e) => format!("NOT signed: {e}"),
            },
            Ok(None) => "unsigned (no key: `patchdiff key new` makes one)".to_owned(),
            Err(e) => format!("NOT signed: {e}"),
        }
    }

    /// The text of a `runs` view: the list of past runs under this run's root, or a comparison.
    /// `open` is the interactive console's (it switches the screen).
    pub fn runs_view(&self, action: &command::RunsAction) -> anyhow::Result<String> {
        let root = &self.options.runs_root;
        match action {
            command::RunsAction::List => Ok(runs::render_list(root, &runs::list_runs(root))),
            command::RunsAction::Compare(a, b) => {
                let (a, b) = (runs::resolve(root, a), runs::resolve(root, b));
                runs::compare(
                    &a.map_err(anyhow::Error::msg)?,
                    &b.map_err(anyhow::Error::msg)?,
                )
                .map_err(anyhow::Error::msg)
            }
            // Headless, a past run's detail (the interactive console switches its panes).
            command::RunsAction::Open(id) => runs::detail::open(root, id)
                .map(|d| d.to_text())
                .map_err(anyhow::Error::msg),
        }
    }

    /// The report as of now.
    pub fn build_report(&self) -> report::Report {
        report::Report::build(self)
    }

    /// Why the run is `infra_abort` (a step failed before the agent acted),
    /// or `None` (see [`outcome::decide`]).
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

    /// Writes `<run>/agent-brief.md` (once): the unchanged original task texts plus the target
    /// mapping, which is all a real agent is given (C4). Returns its path.
    pub fn write_agent_brief(&self) -> anyhow::Result<PathBuf> {
        let path = self.run.path.join("agent-brief.md");
        if path.exists() {
            return Ok(path);
        }
        let mut brief = String::from(
            "# Targets\n\nEdit these targets only through the patchdiff MCP tools. Observe a scope \
             before editing inside it; save each target when you are done.\n\n\
             | target | language | file |\n|---|---|---|\n",
        );
        for f in &self.manifest.fixtures {
            brief.push_str(&format!(
                "| `{}` | {} | `{}` |\n",
                f.target, f.language, f.module_file
            ));
        }
        for f in &self.manifest.fixtures {
            let task = std::fs::read_to_string(self.manifest.resolve(&f.task))
                .map_err(|e| anyhow::anyhow!("cannot read the task of `{}`: {e}", f.target))?;
            brief.push_str(&format!("\n---\n\nTarget `{}`:\n\n{task}", f.target));
        }
        crate::evidence::write_new_private(&path, brief.as_bytes())?;
        Ok(path)
    }

    /// Writes `host`'s configuration document (exactly what its config file holds: the `#`
    /// hint lines are left out) to a new file at `path`, 0600. An existing file is refused,
    /// untouched.
    pub fn write_host_config(&self, host: Host, path: &Path) -> anyhow::Result<()> {
        let text = self.host_config(Some(host));
        let body: String = text
            .split_inclusive('\n')
            .skip_while(|l| l.starts_with('#'))
            .collect();
        crate::evidence::write_new_private(path, body.as_bytes()).map_err(|e| {
            anyhow::anyhow!(
                "cannot write {} ({e}); host-config writes a new file only",
                path.display()
            )
        })
    }

    /// The agent-host configuration for the observed process (SPEC C4, A5).
    pub fn host_config(&self, host: Option<Host>) -> String {
        let node = resolved_node_binary(&self.options.settings);
        let mut env = client::host_env(
            &self.database_path(),
            &self.run.perf_events("host-observed"),
            &self.run.wire_log("host-observed"),
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
}

/// A run named by id (a directory under `root`, or a unique prefix: [`runs::resolve`]) or by
/// path.
pub fn resolve_run(root: &Path, id: &str) -> PathBuf {
    if let Ok(found) = runs::resolve(root, id) {
        return found;
    }
    let p = Path::new(id);
    if p.components().count() > 1 || p.is_absolute() {
        p.to_owned()
    } else {
        root.join(id)
    }
}

/// The Node binary an agent host's observed process should run (P1: resolved once, here, so
/// the host's `PATH` does not decide), or `None` when none resolves.
fn resolved_node_binary(settings: &crate::config::Settings) -> Option<PathBuf> {
    use crate::config::Key;
    crate::waymark::config::resolve_node_binary(
        settings.get(Key::NodeBinary),
        settings.get(Key::SearchPath),
    )
    .ok()
}

/// P1/P3: the operator-level settings a console's `patchdiff mcp` children honour, forwarded
/// from the console's resolved [`crate::config::Settings`] (environment and config file).
const FORWARDED_TO_CHILDREN: [crate::config::Key; 8] = {
    use crate::config::Key;
    [
        Key::NodeBinary,
        Key::WaymarkDir,
        Key::WaymarkWorkers,
        Key::WaymarkActiveTimeoutMs,
        Key::WaymarkWorkRoot,
        Key::PerfMemory,
        Key::StateDir,
        Key::DataDir,
    ]
};

/// Renders the host configuration for one host, or all three.
pub fn host_config_text(host: Option<Host>, exe: &str, env: &[(String, String)]) -> String {
    let claude = || {
        format!(
            "# Claude Code: .mcp.json. Seal the agent to the six observed tools (A2):\n\
             #   claude --strict-mcp-config --mcp-config .mcp.json --tools \"\" --allowedTools {}\n\
             # or in .claude/settings.json: {}\n{}\n",
            Host::Claude.sealed_tool_names().join(","),
            host::claude_settings(),
            serde_json::to_string_pretty(&host::claude_mcp_config(exe, env)).unwrap_or_default()
        )
    };
    let cursor = || {
        format!(
            "# Cursor: .cursor/mcp.json\n{}\n",
            serde_json::to_string_pretty(&host::cursor_mcp_config(exe, env)).unwrap_or_default()
        )
    };
    let codex = || host::codex_server_config(exe, env);
    match host {
        Some(Host::Claude) => claude(),
        Some(Host::Codex) => codex(),
        Some(Host::Cursor) => cursor(),
        None => format!("{}\n{}\n{}", claude(), codex(), cursor()),
    }
}

/// What the perf events of one MCP process say about its current worker generation (C3).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerReadiness {
    /// No lifecycle event from this process yet.
    Unknown,
    /// A generation was launched and has not reported ready.
    Starting,
    /// The current generation is ready; `readiness_ms` is its spawn-to-ready time.
    Ready { readiness_ms: u64 },
    /// The last generation retired (and no new one is ready).
    Retired { reason: String },
    /// The last launch failed before a child ran (`code`, e.g. `WAYMARK_WORKER_SPAWN`, and its
    /// cause): nothing will become ready without another launch.
    LaunchFailed { code: String, error: String },
}

impl WorkerReadiness {
    fn describe(&self) -> String {
        match self {
            Self::Unknown => "no worker lifecycle event yet".into(),
            Self::Starting => "a generation is starting".into(),
            Self::Ready { readiness_ms } => format!("ready in {readiness_ms} ms"),
            Self::Retired { reason } => format!("the last generation retired: {reason}"),
            Self::LaunchFailed { code, error } => {
                format!("the worker could not start: {code}: {error}")
            }
        }
    }
}

/// Reads perf-events JSONL and returns the state of the worker of the process `pid`: the last
/// of its `worker_launch`, `worker_ready` and `worker_retired` events decides. Events of other
/// processes (an earlier observed process appending to the same file) and malformed lines are
/// ignored.
pub fn worker_readiness(perf_events: &str, pid: u32) -> WorkerReadiness {
    let mut state = WorkerReadiness::Unknown;
    for ev in perf_events
        .lines()
        .filter_map(|l| serde_json::from_str::<PerfEvent>(l).ok())
        .filter(|ev| ev.pid == pid)
    {
        use crate::telemetry::{EventKind, attr};
        state = match EventKind::parse(&ev.name) {
            Some(EventKind::WorkerLaunch) => WorkerReadiness::Starting,
            Some(EventKind::WorkerLaunchFailed) => WorkerReadiness::LaunchFailed {
                code: ev.attrs[attr::CODE]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_owned(),
                error: ev.attrs[attr::ERROR].as_str().unwrap_or("").to_owned(),
            },
            Some(EventKind::WorkerReady) => WorkerReadiness::Ready {
                readiness_ms: ev.duration_ms.round() as u64,
            },
            Some(EventKind::WorkerRetired) => WorkerReadiness::Retired {
                reason: ev.attrs[attr::REASON]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_owned(),
            },
            _ => continue,
        };
    }
    state
}

/// Total attempts in an audit result.
fn attempts_of(audit: &Value) -> u64 {
    audit["attempts"]["total"].as_u64().unwrap_or(0)
}

/// C3: the observed process must refuse a full-only tool *at the profile boundary* — a JSON-RPC
/// error whose `data.code` is `PROFILE_BOUNDARY`. Any other failure (a transport loss, a crash,
/// another error) or an answer is not that refusal.
fn boundary_refusal(
    probe: &str,
    outcome: Result<client::ToolReply, client::CallError>,
) -> anyhow::Result<()> {
    match outcome {
        Err(e) if e.code.as_deref() == Some("PROFILE_BOUNDARY") => Ok(()),
        Err(e) => anyhow::bail!(
            "calling `{probe}` on the observed process failed without a PROFILE_BOUNDARY refusal: {}",
            e.message
        ),
        Ok(reply) => anyhow::bail!(
            "the observed process answered `{probe}` (is_error={}) instead of refusing it at the profile boundary",
            reply.is_error
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event_line(name: &str, pid: u32, reason: Option<&str>) -> String {
        let mut ev = PerfEvent::point(name);
        ev.pid = pid;
        ev.duration_ms = 300.0;
        if let Some(r) = reason {
            ev = ev.attr("reason", r);
        }
        serde_json::to_string(&ev).unwrap()
    }

    #[test]
    fn readiness_follows_the_last_lifecycle_event_of_this_process() {
        let lines = [
            event_line("worker_launch", 7, None),
            event_line("worker_ready", 7, None),
            "not json".to_owned(),
            event_line("worker_retired", 7, Some("worker_exited")),
            event_line("worker_ready", 8, None),
        ]
        .join("\n");
        assert_eq!(
            worker_readiness(&lines, 7),
            WorkerReadiness::Retired {
                reason: "worker_exited".into()
            }
        );
        assert_eq!(
            worker_readiness(&lines, 8),
            WorkerReadiness::Ready { readiness_ms: 300 }
        );
        assert_eq!(worker_readiness(&lines, 9), WorkerReadiness::Unknown);
        let relaunched = format!("{lines}\n{}", event_line("worker_launch", 7, None));
        assert_eq!(worker_readiness(&relaunched, 7), WorkerReadiness::Starting);
    }

    #[test]
    fn civil_dates_are_correct() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
    }

    #[test]
    fn host_config_for_codex_is_valid_toml_with_the_seed_settings() {
        let env = observed_env(Path::new("/tmp/pd.sqlite"), Path::new("/tmp/perf.jsonl"));
        let text = host_config_text(Some(Host::Codex), "/usr/bin/patchdiff", &env);
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let parsed: toml::Table = body.parse().unwrap();
        let server = &parsed["mcp_servers"]["patchdiff"];
        assert_eq!(server["command"].as_str(), Some("/usr/bin/patchdiff"));
        assert_eq!(
            server["env"][crate::config::Key::McpProfile.variable()].as_str(),
            Some("observed")
        );
        assert_eq!(
            server["env"][crate::config::Key::StrictObservationMode.variable()].as_str(),
            Some("1")
        );
        assert_eq!(
            server["env"][crate::config::Key::WaymarkMode.variable()].as_str(),
            Some("resident")
        );
    }

    #[test]
    fn preflight_accepts_only_a_profile_boundary_refusal() {
        let error = |code: Option<&str>| client::CallError {
            tool: "patchdiff_init_target".into(),
            message: "connection closed".into(),
            code: code.map(str::to_owned),
        };
        let probe = "patchdiff_init_target";
        assert!(boundary_refusal(probe, Err(error(Some("PROFILE_BOUNDARY")))).is_ok());
        let err = boundary_refusal(probe, Err(error(None))).expect_err("a transport loss");
        assert!(
            err.to_string()
                .contains("without a PROFILE_BOUNDARY refusal"),
            "{err}"
        );
        let err = boundary_refusal(probe, Err(error(Some("INVALID_ARGUMENTS"))))
            .expect_err("another JSON-RPC error");
        assert!(err.to_string().contains("connection closed"), "{err}");
        let answered = client::ToolReply {
            is_error: true,
            structured: serde_json::Value::Null,
            text: String::new(),
        };
        assert!(boundary_refusal(probe, Ok(answered)).is_err());
    }
}

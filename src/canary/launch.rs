//! How a run's MCP processes are launched (C2, P1, P3): each one's environment, built only
//! from the console's resolved settings and the run directory, and the run's database.

use std::path::PathBuf;

use serde_json::json;

use super::client::{self, LaunchSpec, observed_env};
use super::host;
use super::names::{HOST_OBSERVED, ProcessKind};
use super::state::CanaryOptions;
use crate::evidence::RunDir;

/// A run's launcher: its options (the console's settings, the executable, the operator's
/// database) and its directory (where each process's logs go).
#[derive(Clone, Copy)]
pub struct Launcher<'a> {
    pub options: &'a CanaryOptions,
    pub run: &'a RunDir,
}

impl Launcher<'_> {
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

    /// How to launch the `kind` process of the run.
    pub fn spec(&self, kind: ProcessKind) -> LaunchSpec {
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
                    self.run
                        .perf_events(ProcessKind::Full.as_str())
                        .display()
                        .to_string(),
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
        // P1: the worker directory the console resolved (and the manifest records), also when
        // the operator set none: the bundle this console verified. A child started with
        // another HOME — the private one an agent host is given — would otherwise unpack its
        // own 19 MB copy into it and verify it, on its way to readiness, in every run.
        let waymark_dir = crate::config::Key::WaymarkDir.variable();
        if !env.iter().any(|(k, _)| k == waymark_dir)
            && let Ok(dir) =
                crate::waymark::WaymarkConfig::default_script_dir(&self.options.settings)
        {
            env.push((waymark_dir.into(), dir.display().to_string()));
        }
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

    /// The observed process's environment as the host is to start it: the console's observed
    /// configuration, with its own perf events and wire log in the run directory (E1) and the
    /// resolved Node binary (P1).
    pub fn host_observed_env(&self) -> Vec<(String, String)> {
        let mut env = self.spec(ProcessKind::Observed).env;
        env.retain(|(k, _)| {
            k != crate::config::Key::PerfEvents.variable()
                && k != crate::config::Key::EvidenceWireLog.variable()
                && k != crate::config::Key::NodeBinary.variable()
        });
        let node = super::steps::host_config::resolved_node_binary(&self.options.settings);
        let extra = client::host_env(
            &self.database_path(),
            &self.run.perf_events(HOST_OBSERVED),
            &self.run.wire_log(HOST_OBSERVED),
            node.as_deref(),
        );
        for (k, v) in extra {
            if !env.iter().any(|(ek, _)| *ek == k) {
                env.push((k, v));
            }
        }
        // The observed process knows the provider credentials' values (and never uses
        // them) so that its wire log redacts a key the model puts into a tool argument.
        for (k, v) in host::provider_env() {
            if crate::redact::is_secret_name(&k) && !env.iter().any(|(ek, _)| *ek == k) {
                env.push((k, v));
            }
        }
        // A3: the process holds tool calls until the step has checked the seal.
        env.push((
            crate::mcp::gate::GATE_VARIABLE.into(),
            self.run.admission().display().to_string(),
        ));
        env
    }

    /// The run's database's identity (backend, database name, store id, on PostgreSQL the
    /// cluster's `system_identifier` and the database oid; never a secret), or why it could
    /// not be read — the manifest records either, and `verify` refuses another database.
    pub async fn store_identity(&self) -> serde_json::Value {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn options(vars: &[(&str, &str)]) -> CanaryOptions {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        CanaryOptions {
            exe: PathBuf::from("/usr/bin/patchdiff"),
            manifest: PathBuf::from("/nonexistent/manifest.json"),
            runs_root: PathBuf::from("/nonexistent/runs"),
            database_url: None,
            settings: crate::config::Settings::from_lookup(|k| {
                vars.iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v.into())
            }),
            step_timeout: crate::canary::steps::deadline::STEP_TIMEOUT,
        }
    }

    fn waymark_dir_of(env: &[(String, String)]) -> Vec<&str> {
        env.iter()
            .filter(|(k, _)| k == crate::config::Key::WaymarkDir.variable())
            .map(|(_, v)| v.as_str())
            .collect()
    }

    #[test]
    fn every_child_and_the_host_started_process_get_the_worker_directory_the_console_resolved() {
        let operator = options(&[(crate::config::Key::WaymarkDir.variable(), "/srv/waymark")]);
        let run = RunDir::at(std::path::Path::new("/nonexistent/run"));
        let launcher = Launcher {
            options: &operator,
            run: &run,
        };
        for env in [
            launcher.spec(ProcessKind::Observed).env,
            launcher.spec(ProcessKind::Full).env,
            launcher.host_observed_env(),
        ] {
            assert_eq!(waymark_dir_of(&env), ["/srv/waymark"], "{env:?}");
        }
        // Unset: the bundle this console verified (what the run manifest records), so a host's
        // private HOME never gets a copy of its own.
        let default = options(&[]);
        let launcher = Launcher {
            options: &default,
            run: &run,
        };
        let resolved = crate::waymark::WaymarkConfig::default_script_dir(&default.settings)
            .expect("the test binary carries the engine")
            .display()
            .to_string();
        assert_eq!(
            waymark_dir_of(&launcher.host_observed_env()),
            [resolved.as_str()]
        );
    }
}

//! Resolving one comparison arm without running an agent (GATE2 §4.3): a
//! canary script, parsed by [`crate::canary::command::parse_script`], becomes the dotted
//! configuration fields a [`super::plan::Arm`] holds — the agent step (scripted plan digest, or
//! host, model, turn limit, timeout), the recorded identity, the host CLI's `--version`, this
//! patchdiff build, the fixture manifest's digest, the evaluator's rule and the other steps,
//! and Node's version. [`ScriptResolver`] is the canary side of [`super::plan::ResolveArm`].
//!
//! The same field names are read back from a finished run's `manifest.json` and `report.json`
//! ([`run_fields`]), so `compare report` can check that every member run ran its arm's plan.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::canary::command::{Command, parse_script};
use crate::config::Settings;

/// Field prefixes an operator may `--declare` (every resolved field starts with one of them).
pub const DECLARABLE: &[&str] = &["agent", "host", "build", "suite", "node", "script"];

/// Resolves canary scripts into arm configuration for [`super::plan::Plan::draft`].
pub struct ScriptResolver<'a> {
    /// The resolved settings (host binaries, Node).
    pub settings: &'a Settings,
    /// The fixture manifest the runs will authenticate against.
    pub manifest: PathBuf,
}

impl ScriptResolver<'_> {
    fn fields(&self, script: &str) -> Result<BTreeMap<String, String>, String> {
        let path = crate::assets::resolve_script(Path::new(script)).map_err(|e| e.to_string())?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let commands = parse_script(&text)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut out = BTreeMap::new();
        let mut others = Vec::new();
        let mut recorded_model = None;
        let mut agents = 0;
        for (_, command) in &commands {
            match command {
                Command::Record {
                    model,
                    provider,
                    reasoning,
                } => {
                    recorded_model.clone_from(model);
                    for (k, v) in [("provider", provider), ("reasoning", reasoning)] {
                        if let Some(v) = v {
                            out.insert(format!("agent.{k}"), v.clone());
                        }
                    }
                }
                Command::Agent { plan } => {
                    agents += 1;
                    let plan = if plan.is_relative() {
                        dir.join(plan)
                    } else {
                        plan.clone()
                    };
                    let digest = crate::evidence::file_digest(&plan).map_err(|e| {
                        format!("the agent plan {} cannot be read: {e}", plan.display())
                    })?;
                    out.insert("agent.kind".into(), "scripted".into());
                    out.insert("agent.plan_sha256".into(), digest);
                }
                Command::AgentHost {
                    host,
                    model,
                    max_turns,
                    timeout,
                } => {
                    agents += 1;
                    out.insert("agent.kind".into(), host.as_str().into());
                    if let Some(m) = model {
                        out.insert("agent.model".into(), m.clone());
                    }
                    if let Some(t) = max_turns {
                        out.insert("agent.max_turns".into(), t.to_string());
                    }
                    out.insert("agent.timeout_s".into(), timeout.as_secs_f64().to_string());
                    let binary = crate::canary::host::resolve_binary(*host, self.settings)
                        .map_err(|e| format!("{e:#}"))?;
                    out.insert("host.version".into(), version_line(&binary));
                }
                Command::Evaluate {
                    repeat,
                    require,
                    check_timeout,
                    fresh_controls: _,
                } => {
                    out.insert(
                        "suite.require".into(),
                        require.map_or("behavioral", |r| r.as_str()).to_owned(),
                    );
                    out.insert("suite.repeat".into(), repeat.to_string());
                    if let Some(t) = check_timeout {
                        out.insert("suite.check_timeout_s".into(), t.to_string());
                    }
                }
                other => others.push(other.name()),
            }
        }
        if agents != 1 {
            return Err(format!(
                "a comparison arm runs exactly one agent step (`agent PLAN` or `agent claude|codex|gemini|opencode`); \
                 this script has {agents}"
            ));
        }
        if !commands.iter().any(|(_, c)| matches!(c, Command::Report)) {
            return Err("the script never runs `report`, so its run is never sealed".into());
        }
        if let Some(m) = recorded_model {
            out.entry("agent.model".into()).or_insert(m);
        }
        out.insert("script.steps".into(), others.join(" "));
        let (sha, _) = crate::evidence::source_sha();
        out.insert("build.source_sha".into(), sha);
        out.insert("build.version".into(), env!("CARGO_PKG_VERSION").into());
        let manifest = crate::evidence::file_digest(&self.manifest).map_err(|e| {
            format!(
                "the fixture manifest {} cannot be read: {e}",
                self.manifest.display()
            )
        })?;
        out.insert("suite.fixture_manifest_sha256".into(), manifest);
        let node = crate::canary::record::node_record(&[], self.settings);
        out.insert(
            "node.version".into(),
            node["version"].as_str().unwrap_or("unknown").to_owned(),
        );
        Ok(out)
    }
}

impl super::plan::ResolveArm for ScriptResolver<'_> {
    fn resolve(&self, script: &str) -> Result<BTreeMap<String, String>, String> {
        self.fields(script)
    }
}

/// The first line a host CLI prints for `--version` (the same line a run's manifest records).
fn version_line(binary: &Path) -> String {
    match std::process::Command::new(binary)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        Ok(out) => format!("unknown (--version exited {})", out.status),
        Err(e) => format!("unknown (--version: {e})"),
    }
}

/// The configuration fields a finished run records about itself, named as [`ScriptResolver`]
/// names them: `agent.model`, `agent.kind`, `host.version`, `build.source_sha`,
/// `build.version`, `suite.fixture_manifest_sha256`, `suite.require`, `node.version` — each
/// present only when the run's `manifest.json` / `report.json` holds it. A member run whose
/// field differs from its arm's plan did not run that arm.
pub fn run_fields(manifest: &Value, report: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: &Value| {
        if let Some(s) = v.as_str() {
            out.insert(k.to_owned(), s.to_owned());
        }
    };
    put("agent.model", &manifest["agent"]["model"]);
    put("agent.provider", &manifest["agent"]["provider"]);
    put("agent.reasoning", &manifest["agent"]["reasoning"]);
    let host = &manifest["configuration"]["agent_host"];
    put("agent.kind", &host["host"]);
    put("host.version", &host["version"]);
    put("build.source_sha", &manifest["source_sha"]);
    put(
        "build.version",
        &manifest["configuration"]["console"]["version"],
    );
    put(
        "suite.fixture_manifest_sha256",
        &manifest["configuration"]["fixture_manifest_sha256"],
    );
    put("suite.require", &report["require"]);
    put(
        "node.version",
        &manifest["configuration"]["node"]["version"],
    );
    out
}

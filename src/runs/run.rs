//! One run directory (`r-*`) read back as an index entry (U2): only the few fields a summary
//! needs are deserialized from `manifest.json` and `report.json` (typed, everything else
//! skipped), and the seal is checked against the files it binds. Reads only.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::summary::{
    EntryKind, RunSummary, RunVerdict, dir_name, parse, read_file, seal_state, suite_name,
};

// --- the few fields a summary reads; serde skips the rest of each file -----------------------

#[derive(Deserialize, Default)]
#[serde(default)]
struct ManifestHead {
    started_ms: Option<f64>,
    agent: AgentHead,
    configuration: ConfigurationHead,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct AgentHead {
    model: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ConfigurationHead {
    agent_host: Option<HostHead>,
    provider_endpoints: Option<Vec<EndpointHead>>,
    fixture_manifest_source: Option<String>,
    fixture_manifest_sha256: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct HostHead {
    host: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct EndpointHead {
    loopback: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReportHead {
    passed: Option<bool>,
    outcome: Option<String>,
    agent: AgentHead,
    agent_host: Option<HostHead>,
    targets: Vec<TargetHead>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TargetHead {
    name: Option<String>,
    status: Option<String>,
    evaluated: Option<bool>,
    full_byte: Option<bool>,
    behavioral: Option<bool>,
}

/// One target's verdict column from its report entry (an aborted run judged nothing).
fn target_verdict(t: &TargetHead, aborted: bool) -> &'static str {
    match t.status.as_deref() {
        _ if aborted => "infra_abort",
        Some("pass") => "pass",
        Some("fail") => "FAIL",
        Some("infra_error") => "infra_error",
        Some("flaky") => "flaky",
        _ if t.evaluated == Some(true)
            && t.full_byte == Some(true)
            && t.behavioral == Some(true) =>
        {
            "pass"
        }
        _ if t.evaluated == Some(true) => "FAIL",
        _ => "-",
    }
}

/// Reads one run directory. Errors when it holds neither a manifest nor a report, or one of
/// them is not what a run writes (the message names the file).
pub fn read_run(path: &Path) -> Result<RunSummary, String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let manifest_bytes = read_file(path, "manifest.json").map_err(at)?;
    let report_bytes = read_file(path, "report.json").map_err(at)?;
    if manifest_bytes.is_none() && report_bytes.is_none() {
        return Err(format!(
            "{} has neither manifest.json nor report.json",
            path.display()
        ));
    }
    let manifest: ManifestHead = match &manifest_bytes {
        Some(b) => parse("manifest.json", b).map_err(at)?,
        None => ManifestHead::default(),
    };
    let report: Option<ReportHead> = match &report_bytes {
        Some(b) => Some(parse("report.json", b).map_err(at)?),
        None => None,
    };
    let seal = read_file(path, crate::evidence::SEAL_FILE).map_err(at)?;
    let sums = if seal.is_some() {
        read_file(path, crate::evidence::SUMS_FILE).map_err(at)?
    } else {
        None
    };
    let (seal, problem) = seal_state(
        seal.as_deref(),
        &[
            ("manifest.json", manifest_bytes.as_deref()),
            (crate::evidence::SUMS_FILE, sums.as_deref()),
        ],
    );
    let mut verdicts = BTreeMap::new();
    let mut targets_passed = 0;
    let report_ref = report.as_ref();
    let aborted = report_ref.is_some_and(|r| r.outcome.as_deref() == Some("infra_abort"));
    for t in report_ref.map(|r| r.targets.as_slice()).unwrap_or_default() {
        let v = target_verdict(t, aborted);
        targets_passed += usize::from(v == "pass");
        verdicts.insert(t.name.clone().unwrap_or_else(|| "?".into()), v.to_owned());
    }
    let passed = report_ref.and_then(|r| r.passed);
    let outcome = report_ref.and_then(|r| r.outcome.clone());
    let verdict = match (passed, outcome.as_deref(), report_ref) {
        (_, Some("infra_abort"), _) => RunVerdict::InfraAbort,
        (Some(true), _, _) => RunVerdict::Passed,
        (Some(false), _, _) => RunVerdict::Failed,
        (None, _, _) => RunVerdict::NoReport,
    };
    let configuration = &manifest.configuration;
    Ok(RunSummary {
        id: dir_name(path),
        kind: EntryKind::Run,
        path: path.to_owned(),
        started_ms: manifest.started_ms.unwrap_or(0.0),
        model: manifest
            .agent
            .model
            .clone()
            .or_else(|| report_ref.and_then(|r| r.agent.model.clone())),
        host: report_ref
            .and_then(|r| r.agent_host.as_ref())
            .and_then(|h| h.host.clone())
            .or_else(|| {
                configuration
                    .agent_host
                    .as_ref()
                    .and_then(|h| h.host.clone())
            }),
        suite: configuration
            .fixture_manifest_source
            .as_deref()
            .map(suite_name),
        suite_sha256: configuration.fixture_manifest_sha256.clone(),
        verdict,
        passed,
        targets_total: verdicts.len(),
        targets_passed,
        verdicts,
        outcome,
        members: None,
        rehearsal: configuration
            .provider_endpoints
            .iter()
            .flatten()
            .any(|e| e.loopback == Some(true)),
        seal,
        signed: path.join(crate::evidence::SIGNATURE_FILE).is_file(),
        problem,
    })
}

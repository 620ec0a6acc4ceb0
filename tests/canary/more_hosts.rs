//! SPEC A1–A4 with the real Gemini CLI and opencode, offline: `agent gemini` and `agent opencode`
//! launch the pinned CLIs (`tests/tools`) headless and sealed against `scripted-model` on
//! loopback (the Gemini API for Gemini CLI, the Anthropic Messages API for opencode), playing the
//! demo plan. Everything else is real: the CLIs, the observed process each starts from the run's
//! configuration, the worker, the store, the evaluator.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::agent_host::{
    Model, SECRET, assert_no_credential, host_stream, repo, report, the_only_run,
};

/// The pinned Gemini CLI (its `gemini` script, run by `node` on PATH), or
/// `PATCHDIFF_GEMINI_BINARY`. Missing is a failure, not a skip: CI installs it.
pub(crate) fn gemini() -> PathBuf {
    if let Some(p) = std::env::var_os("PATCHDIFF_GEMINI_BINARY") {
        return PathBuf::from(p);
    }
    let p = repo().join("tests/tools/node_modules/@google/gemini-cli/bundle/gemini.js");
    assert!(
        p.is_file(),
        "the Gemini CLI is missing: run `npm ci --prefix tests/tools` (or set PATCHDIFF_GEMINI_BINARY)"
    );
    p
}

/// The pinned opencode CLI's native binary, or `PATCHDIFF_OPENCODE_BINARY`.
pub(crate) fn opencode() -> PathBuf {
    if let Some(p) = std::env::var_os("PATCHDIFF_OPENCODE_BINARY") {
        return PathBuf::from(p);
    }
    let p = repo().join("tests/tools/node_modules/opencode-linux-x64/bin/opencode");
    assert!(
        p.is_file(),
        "the opencode CLI is missing: run `npm ci --prefix tests/tools` (or set PATCHDIFF_OPENCODE_BINARY)"
    );
    p
}

/// Runs the bundled `script` with `model` and the host's environment `env`.
fn run_bundled(runs: &Path, script: &str, model: &str, env: &[(&str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(repo().join(format!("assets/canary/{script}.canary")))
        .args(["--set", &format!("model={model}")])
        .arg("--runs-dir")
        .arg(runs)
        .arg("--json")
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("patchdiff runs")
}

/// The six as `prefix<tool>`, sorted (M2/A3, spelled out from SPEC).
fn six(prefix: &str) -> Vec<String> {
    let mut six: Vec<String> = [
        "patchdiff_read_target",
        "patchdiff_find_occurrences",
        "patchdiff_observe_scope",
        "patchdiff_submit_observed_operations",
        "patchdiff_save",
        "patchdiff_replay",
    ]
    .iter()
    .map(|t| format!("{prefix}{t}"))
    .collect();
    six.sort();
    six
}

/// The checks both hosts share: the run passed 5/5 with the seal holding, every model request
/// that offered tools offered exactly the six as the host names them, the stream is kept and no
/// file holds the credential. Returns the host record.
fn assert_sealed_pass(
    runs: &Path,
    output: &Output,
    model: &Model,
    host: &str,
    prefix: &str,
) -> Value {
    let report = report(output);
    assert!(
        output.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["passed"], true);
    let record = report["agent_host"].clone();
    assert_eq!(record["host"], host);
    assert_eq!(record["seal"]["problem"], Value::Null, "{record}");
    assert_eq!(record["tool_calls"]["patchdiff_save"], 5, "{record}");
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 5);
    for t in targets {
        assert_eq!(t["full_byte"], true, "{t}");
        assert_eq!(t["behavioral"], true, "{t}");
    }
    assert_eq!(report["agent_stop"]["reason"], "finished", "{report:#}");
    assert_eq!(record["timed_out"], false);
    // What the host offered the model: the six, and no native tool (side requests, such as
    // opencode's title, offer none).
    let offered: Vec<Vec<String>> = model
        .offered_tools()
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect();
    assert!(!offered.is_empty());
    for mut tools in offered {
        tools.sort();
        assert_eq!(tools, six(prefix), "offered");
    }
    let run = the_only_run(runs);
    let stream = host_stream(&run.join(format!("agent.{host}.jsonl")));
    assert!(!stream.is_empty());
    assert_no_credential(&run);
    record
}

#[test]
fn gemini_runs_the_bundled_canary_sealed_and_passes_five_of_five() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let output = run_bundled(
        runs.path(),
        "gemini",
        "gemini-2.5-pro",
        &[
            ("PATCHDIFF_GEMINI_BINARY", gemini().display().to_string()),
            ("GOOGLE_GEMINI_BASE_URL", model.url.clone()),
            ("GEMINI_API_KEY", SECRET.to_owned()),
        ],
    );
    let host = assert_sealed_pass(runs.path(), &output, &model, "gemini", "mcp_patchdiff_");
    assert!(
        host["version"].as_str().unwrap().contains("0.61.0"),
        "{host}"
    );
    assert_eq!(host["reported_models"][0], "gemini-2.5-pro", "{host}");
    let run = the_only_run(runs.path());
    let stream = host_stream(&run.join("agent.gemini.jsonl"));
    assert!(stream[0].contains("\"type\":\"init\""), "{}", stream[0]);
}

#[test]
fn opencode_runs_the_bundled_canary_sealed_and_passes_five_of_five() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let output = run_bundled(
        runs.path(),
        "opencode",
        "anthropic/claude-sonnet-4-5",
        &[
            (
                "PATCHDIFF_OPENCODE_BINARY",
                opencode().display().to_string(),
            ),
            ("ANTHROPIC_BASE_URL", model.url.clone()),
            ("ANTHROPIC_API_KEY", SECRET.to_owned()),
        ],
    );
    let host = assert_sealed_pass(runs.path(), &output, &model, "opencode", "patchdiff_");
    assert!(
        host["version"].as_str().unwrap().contains("1.18.33"),
        "{host}"
    );
}

//! SPEC E1: a whole canary run's evidence directory — every directory 0700 and every file 0600,
//! the per-process wire logs and perf events present, and a manifest carrying the executed
//! source SHA (the one embedded at build), the requested agent identity and reasoning, the
//! initial target hashes (equal to the authenticated fixture hashes) and the configuration.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read run dir").flatten() {
        let path = entry.path();
        out.push(path.clone());
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            walk(&path, out);
        }
    }
}

#[test]
fn demo_run_evidence_is_private_and_the_manifest_is_complete() {
    let root = env!("CARGO_MANIFEST_DIR");
    let runs = tempfile::tempdir().expect("temp");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["console", "--script"])
        .arg(format!("{root}/assets/canary/demo.canary"))
        .arg("--runs-dir")
        .arg(runs.path())
        .env("PATCHDIFF_STATE_DIR", runs.path().join("state"))
        .env("PATCHDIFF_DATA_DIR", runs.path().join("data"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .env_remove("PATCHDIFF_PERF_EVENTS")
        .output()
        .expect("run the demo canary");
    assert!(
        out.status.success(),
        "demo canary failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = std::fs::read_dir(runs.path())
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("r-"))
        })
        .expect("one run directory");

    // E1: private directory, private files, all the way down.
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&run), 0o700);
    let mut entries = Vec::new();
    walk(&run, &mut entries);
    for p in &entries {
        let want = if p.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(p), want, "{} is {:o}", p.display(), mode(p));
    }
    for name in [
        "manifest.json",
        "observed.mcp.jsonl",
        "observed.perf.jsonl",
        "transcript.jsonl",
    ] {
        assert!(run.join(name).is_file(), "missing {name}");
    }

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("manifest JSON");
    // The executed source SHA: embedded at build (build.rs), the same value this test sees.
    if let Some(built) = option_env!("PATCHDIFF_BUILD_SHA") {
        assert_eq!(manifest["source_sha"], built);
        assert!(
            manifest["source_sha_origin"]
                .as_str()
                .is_some_and(|o| o.starts_with("embedded at build"))
        );
    }
    assert_eq!(manifest["agent"]["model"], "scripted-demo");
    assert_eq!(manifest["agent"]["provider"], "patchdiff");
    assert_eq!(manifest["agent"]["reasoning"], "none");
    assert_eq!(manifest["gate2"], "closed");
    assert!(manifest["started_ms"].as_f64() <= manifest["written_ms"].as_f64());

    // Initial target hashes are the authenticated fixture hashes, version 0.
    let fixtures: Value = serde_json::from_slice(
        &std::fs::read(format!("{root}/assets/fixtures/manifest.json")).expect("fixtures"),
    )
    .expect("fixture manifest");
    let initial = manifest["initial_targets"].as_array().expect("targets");
    assert_eq!(initial.len(), 5);
    for f in fixtures["fixtures"].as_array().expect("fixtures") {
        let t = initial
            .iter()
            .find(|t| t["target"] == f["target"])
            .unwrap_or_else(|| panic!("{} missing from the manifest", f["target"]));
        assert_eq!(t["sha256"], f["sha256"]);
        assert_eq!(t["version"], 0);
    }

    // The configuration of the observed process the agent reached.
    let observed = &manifest["configuration"]["observed_process"];
    assert_eq!(observed["PATCHDIFF_MCP_PROFILE"], "observed");
    assert_eq!(observed["PATCHDIFF_STRICT_OBSERVATION_MODE"], "1");
    for path_var in ["PATCHDIFF_PERF_EVENTS", "PATCHDIFF_EVIDENCE_WIRE_LOG"] {
        assert!(
            observed[path_var].as_str().is_some_and(
                |p| Path::new(p).is_absolute() && p.starts_with(run.to_str().unwrap_or("?"))
            ),
            "{path_var} = {}",
            observed[path_var]
        );
    }
}

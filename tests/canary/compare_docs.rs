//! The `--slot` examples in `docs/examples/` (issue 24 item 3): a GitHub Actions matrix and a
//! Kubernetes Indexed Job that fan a plan's slots out. Parsed as YAML (PyYAML, from
//! `tests/requirements.txt`), they must list or produce every slot of the plan exactly once, in
//! the form `Slot::parse` accepts, and their commands must be ones the real binary parses (it
//! answers them with the gate-2 refusal, not a usage error).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use patchdiff::gate2::matrix::Slot;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A Python with PyYAML: the test venv (`target/venv`) if it has it, else `python3`.
fn python() -> PathBuf {
    let venv = repo().join("target/venv/bin/python");
    for candidate in [venv, PathBuf::from("python3")] {
        let ok = Command::new(&candidate)
            .args(["-c", "import yaml"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return candidate;
        }
    }
    panic!("PyYAML is missing: `target/venv/bin/pip install -r tests/requirements.txt`");
}

/// The YAML file as JSON (its one document).
fn yaml(path: &Path) -> Value {
    let out = Command::new(python())
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every slot of a plan with `runs` per arm.
fn all_slots(runs: u32) -> BTreeSet<String> {
    (1..=runs)
        .flat_map(|i| [format!("A-{i:02}"), format!("B-{i:02}")])
        .collect()
}

fn assert_slots(ids: &[String], runs: u32, what: &str) {
    for id in ids {
        let slot = Slot::parse(id, runs).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            &slot.id(),
            id,
            "{what}: slot ids are written as the matrix writes them"
        );
    }
    let unique: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "{what}: a slot listed twice: {ids:?}"
    );
    assert_eq!(unique, all_slots(runs), "{what}: every slot of the plan");
}

/// The real binary given `args` (gate 2 unset): the refusal says the gate is closed, so the
/// arguments themselves parsed.
fn assert_binary_parses(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(args)
        .env_remove("PATCHDIFF_GATE2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains("gate 2 is closed"), "{args:?}: {stderr}");
}

#[test]
fn the_github_actions_matrix_runs_every_slot_once_and_collects_them() {
    let doc = yaml(&repo().join("docs/examples/gate2-github-actions.yml"));
    let job = &doc["jobs"]["slot"];
    let ids: Vec<String> = job["strategy"]["matrix"]["slot"]
        .as_array()
        .expect("a slot matrix")
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_slots(&ids, ids.len() as u32 / 2, "the matrix");
    let run = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["run"].as_str())
        .expect("a run step");
    assert!(
        run.contains("patchdiff compare run") && run.contains("--slot ${{ matrix.slot }}"),
        "{run}"
    );
    assert_eq!(
        job["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "Run one slot")
            .unwrap()["env"]["PATCHDIFF_GATE2"],
        "open"
    );
    let report = &doc["jobs"]["report"];
    assert_eq!(report["needs"], "slot");
    let collect = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["run"].as_str())
        .unwrap();
    assert!(collect.contains("patchdiff compare report"), "{collect}");
    assert_binary_parses(&[
        "compare",
        "run",
        "compare/plan.toml",
        "--slot",
        &ids[0],
        "--runs-dir",
        "gate2-runs",
    ]);
}

#[test]
fn the_kubernetes_indexed_job_maps_every_completion_index_to_one_slot() {
    let doc = yaml(&repo().join("docs/examples/gate2-k8s-indexed-job.yaml"));
    let spec = &doc["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let completions = spec["completions"].as_u64().unwrap() as u32;
    let container = &spec["template"]["spec"]["containers"][0];
    let runs: u32 = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "RUNS_PER_ARM")
        .and_then(|e| e["value"].as_str())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(completions, 2 * runs, "one completion per slot");
    assert_eq!(container["command"][0], "/bin/sh");
    let script = container["args"][0].as_str().unwrap();
    // Run the container's script for every index, with `echo` standing in for the binary.
    let mut ids = Vec::new();
    let mut first_args = Vec::new();
    for index in 0..completions {
        let out = Command::new("/bin/sh")
            .args(["-c", script])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("RUNS_PER_ARM", runs.to_string())
            .env("PATCHDIFF", "echo")
            .output()
            .unwrap();
        assert!(out.status.success(), "index {index}: {out:?}");
        let line = String::from_utf8(out.stdout).unwrap();
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        let at = args.iter().position(|a| a == "--slot").expect("--slot");
        ids.push(args[at + 1].clone());
        if index == 0 {
            first_args = args;
        }
    }
    assert_eq!(ids[0], "A-01");
    assert_eq!(ids[runs as usize], "B-01");
    assert_slots(&ids, runs, "the indexed job");
    let first: Vec<&str> = first_args.iter().map(String::as_str).collect();
    assert_binary_parses(&first);
}

//! The headless canary end to end through the real binary (SPEC C1–C7, U5): the bundled demo
//! passes 5/5, a wrong agent fails naming its target, and bad fixtures or a broken observed
//! process stop the run at the step that failed; `inspect` names a target whose journal was
//! tampered with so that replay no longer reproduces its saved version (C5, K6).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `patchdiff console --script SCRIPT --runs-dir RUNS [extra…]` with a private state dir.
fn run_script(runs: &Path, script: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_patchdiff"));
    cmd.arg("console")
        .arg("--script")
        .arg(script)
        .arg("--runs-dir")
        .arg(runs)
        .args(extra)
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("patchdiff runs")
}

fn report_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a JSON report ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn the_only_run(runs: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn demo_canary_passes_both_checks_on_all_five_targets() {
    let runs = tempfile::tempdir().unwrap();
    let output = run_script(
        runs.path(),
        &repo().join("assets/canary/demo.canary"),
        &["--json"],
        &[],
    );
    let report = report_json(&output);
    assert!(
        output.status.success(),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 5);
    for t in targets {
        assert_eq!(t["full_byte"], true, "{t}");
        assert_eq!(t["behavioral"], true, "{t}");
        assert_eq!(t["replay_consistent"], true, "{t}");
    }
    assert_eq!(report["passed"], true);
    assert_eq!(report["gate2"], "closed");

    // E1: the evidence is where the report says, private, and complete.
    let run = the_only_run(runs.path());
    assert_eq!(report["run_dir"], run.display().to_string());
    assert_eq!(
        std::fs::metadata(&run).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for file in [
        "manifest.json",
        "observed.mcp.jsonl",
        "full.mcp.jsonl",
        "observed.perf.jsonl",
        "transcript.jsonl",
        "report.txt",
        "report.json",
        "report.junit.xml",
        "store.sqlite",
    ] {
        let meta = std::fs::metadata(run.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{file}");
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["agent"]["model"], "scripted-demo");
    assert_eq!(manifest["initial_targets"].as_array().unwrap().len(), 5);
    assert_eq!(manifest["source_sha"].as_str().unwrap().len(), 40);
    // E1, the complete run record: every process resolved, Node and its version, the pinned
    // engine and grammars, the console's own build.
    let config = &manifest["configuration"];
    assert_eq!(config["processes"]["observed"]["profile"], "observed");
    assert_eq!(config["processes"]["full"]["profile"], "full");
    assert_eq!(
        config["processes"]["observed"]["waymark"]["mode"],
        "resident"
    );
    assert_eq!(
        config["processes"]["observed"]["waymark"]["limits"]["rss_limit_bytes"],
        1u64 << 30
    );
    let node_version = config["node"]["version"].as_str().unwrap();
    let node_path = config["node"]["path"].as_str().unwrap();
    let actual = Command::new(node_path).arg("--version").output().unwrap();
    assert_eq!(node_version, String::from_utf8_lossy(&actual.stdout).trim());
    assert_eq!(
        config["waymark_packages"]["packages"]["node_modules/web-tree-sitter"]["version"],
        "0.25.10"
    );
    assert_eq!(config["console"]["version"], env!("CARGO_PKG_VERSION"));
    // W3 + E1: the worker's stderr of each generation, with its exit, is in the run.
    let worker_log = run.join("worker.observed.stderr.log");
    let text = std::fs::read_to_string(&worker_log).unwrap();
    assert!(text.starts_with("=== generation 1 pid "), "{text}");
    assert_eq!(
        std::fs::metadata(&worker_log).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // C3/M2: the tools/list answer the observed process gave preflight, as it crossed the wire,
    // is exactly the six tools of the spec (written out here, not the product's list).
    let wire = std::fs::read_to_string(run.join("observed.mcp.jsonl")).unwrap();
    let listed: Vec<Vec<String>> = wire
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| serde_json::from_str::<Value>(r["raw"].as_str()?).ok())
        .filter_map(|m| {
            let tools = m["result"]["tools"].as_array()?;
            let mut names: Vec<String> = tools
                .iter()
                .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
                .collect();
            names.sort();
            Some(names)
        })
        .collect();
    let mut six = vec![
        "patchdiff_read_target",
        "patchdiff_find_occurrences",
        "patchdiff_observe_scope",
        "patchdiff_submit_observed_operations",
        "patchdiff_save",
        "patchdiff_replay",
    ];
    six.sort();
    assert!(
        !listed.is_empty(),
        "preflight's tools/list is in the wire log"
    );
    for names in &listed {
        assert_eq!(names, &six);
    }
    // One progress line per step on stderr in --json mode (U5).
    let stderr = String::from_utf8_lossy(&output.stderr);
    for (i, step) in [
        "record",
        "init",
        "launch",
        "preflight",
        "agent",
        "export",
        "inspect",
        "evaluate",
        "report",
    ]
    .iter()
    .enumerate()
    {
        let prefix = format!("[{}/9] {step}", i + 1);
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&prefix) && l.contains(" ok ")),
            "{prefix} in:\n{stderr}"
        );
    }
}

#[test]
fn wrong_agent_fails_the_run_the_report_names_the_target_and_its_story_shows_why() {
    let runs = tempfile::tempdir().unwrap();
    // wrong.canary, with a look at the failing target's story before the report.
    let wrong = std::fs::read_to_string(repo().join("assets/canary/wrong.canary")).unwrap();
    let plan = repo().join("assets/canary/wrong.plan.jsonl");
    let script = runs.path().join("wrong-story.canary");
    std::fs::write(
        &script,
        wrong
            .replace("wrong.plan.jsonl", &plan.display().to_string())
            .replace("\nreport", "\ntarget chess\nreport"),
    )
    .unwrap();
    let output = run_script(runs.path(), &script, &["--json"], &[]);
    assert_eq!(output.status.code(), Some(1));
    let progress = String::from_utf8_lossy(&output.stderr);
    // The story runs after the failed evaluation and shows the wrong line against the expected.
    assert!(progress.contains("target      ok"), "{progress}");
    assert!(
        progress.contains(
            "verdict: FAIL (full-byte) · identical to the reference: no · behavioral FAIL"
        ),
        "{progress}"
    );
    assert!(progress.contains("submissions (2):"), "{progress}");
    assert!(
        progress.contains("-            if any(self.is_attacked(x, rank, opponent(color)) for x in (crossed, target)):")
            && progress.contains("+            if any(self.is_attacked(x, rank, color) for x in (crossed, target)):"),
        "{progress}"
    );
    let report = report_json(&output);
    // A view is not a step: the report does not list it.
    assert!(
        report["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["command"] != "target")
    );
    assert_eq!(report["passed"], false);
    let failing: Vec<&str> = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["full_byte"] != true || t["behavioral"] != true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(failing, vec!["chess"]);
    let text = std::fs::read_to_string(the_only_run(runs.path()).join("report.txt")).unwrap();
    assert!(text.contains("chess") && text.contains("FAIL"), "{text}");
}

/// K3, U2: an accepted edit that leaves the target with syntax errors its base did not have is
/// flagged on its receipt (`SYNTAX_ERRORS_INTRODUCED`), and that warning reaches the operator
/// in all three places they look: the target's story, `report.json`'s target notes and
/// `report.txt`. The demo plan, plus one accepted edit before chess is saved that breaks its
/// first line.
#[test]
fn a_syntax_breaking_edit_is_named_in_the_story_the_json_report_and_the_text_report() {
    let runs = tempfile::tempdir().unwrap();
    let canary = repo().join("assets/canary");
    let demo_plan = std::fs::read_to_string(canary.join("demo.plan.jsonl")).unwrap();
    let save = demo_plan
        .find("{\"step\": \"chess-save\"")
        .expect("the demo plan saves chess");
    let (before_save, from_save) = demo_plan.split_at(save);
    let mut plan = before_save.to_owned();
    let first_line = "\"\"\"Chess move validator.\n";
    assert!(
        std::fs::read_to_string(repo().join("assets/fixtures/chess/original.py"))
            .unwrap()
            .starts_with(first_line)
    );
    for step in [
        serde_json::json!({"step": "chess-obs-top", "tool": "patchdiff_observe_scope",
                           "args": {"target": "chess", "lines": {"start": 1, "end": 1}}}),
        serde_json::json!({"step": "chess-break", "tool": "patchdiff_submit_observed_operations",
                           "args": {"target": "chess", "request_key": "chess-break",
                                    "base_revision": "${chess-obs-top.revision}",
                                    "operations": [{"observation_id": "${chess-obs-top.observation_id}",
                                                    "old_text": first_line,
                                                    "new_text": format!("def broken(:\n{first_line}")}]}}),
    ] {
        plan.push_str(&format!("{step}\n"));
    }
    plan.push_str(from_save);
    let plan_path = runs.path().join("broken.plan.jsonl");
    std::fs::write(&plan_path, plan).unwrap();
    let script = runs.path().join("broken.canary");
    let demo = std::fs::read_to_string(canary.join("demo.canary")).unwrap();
    std::fs::write(
        &script,
        demo.replace("demo.plan.jsonl", &plan_path.display().to_string())
            .replace("\nreport", "\ntarget chess\nreport"),
    )
    .unwrap();
    let output = run_script(runs.path(), &script, &["--json"], &[]);
    let progress = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{progress}");

    // The story: the receipt's warning under its submission.
    let story_line = progress
        .lines()
        .find(|l| l.contains("warning: SYNTAX_ERRORS_INTRODUCED"))
        .unwrap_or_else(|| panic!("the story shows no syntax warning:\n{progress}"));
    assert!(story_line.contains("python"), "{story_line}");

    // report.json: chess's notes name the revision and request key that broke it; no other
    // target has such a note.
    let report = report_json(&output);
    for t in report["targets"].as_array().unwrap() {
        let notes: Vec<&str> = t["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .filter(|n| n.contains("SYNTAX_ERRORS_INTRODUCED"))
            .collect();
        if t["name"] == "chess" {
            assert_eq!(notes.len(), 1, "{t:#}");
            assert!(notes[0].contains("(key chess-break)"), "{}", notes[0]);
            assert_eq!(t["behavioral"], false, "{t:#}");
        } else {
            assert!(notes.is_empty(), "{t:#}");
        }
    }

    // report.txt, the file an operator forwards.
    let text = std::fs::read_to_string(the_only_run(runs.path()).join("report.txt")).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains("chess") && l.contains("SYNTAX_ERRORS_INTRODUCED")),
        "{text}"
    );
}

/// R1–R3, the replica canary: a scripted replica (a third MCP process, full profile) edits a
/// second region of `calendar` while the scripted agent works on it. The run passes on the
/// behavioural checks, the export holds the replica's docstring beside the agent's fixes, the
/// journal holds both writers' edits, and the story and `verify`'s receipts check show both
/// writers' receipts.
#[test]
fn replica_canary_passes_and_its_evidence_shows_both_writers_receipts() {
    let runs = tempfile::tempdir().unwrap();
    let canary = repo().join("assets/canary");
    let script = runs.path().join("replica-story.canary");
    let text = std::fs::read_to_string(canary.join("replica.canary")).unwrap();
    std::fs::write(
        &script,
        text.replace(
            "replica-calendar.jsonl",
            &canary.join("replica-calendar.jsonl").display().to_string(),
        )
        .replace(
            "replica.plan.jsonl",
            &canary.join("replica.plan.jsonl").display().to_string(),
        )
        .replace("\nreport", "\ntarget calendar\nreport"),
    )
    .unwrap();
    let output = run_script(runs.path(), &script, &["--json"], &[]);
    let progress = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "stderr:\n{progress}");
    let report = report_json(&output);
    assert_eq!(report["passed"], true, "{report:#}");
    for t in report["targets"].as_array().unwrap() {
        assert_eq!(t["behavioral"], true, "{t}");
        assert_eq!(t["replay_consistent"], true, "{t}");
    }
    assert!(
        progress.contains("replica: 1 submissions accepted"),
        "{progress}"
    );
    let run = the_only_run(runs.path());

    // The export holds the replica's edit and the agent's two fixes.
    let exported = std::fs::read_to_string(run.join("export/calendar.js")).unwrap();
    assert!(
        exported.contains("(to the minute; seconds are dropped). */"),
        "{exported}"
    );
    assert!(
        exported.contains("aStart < bEnd") && exported.contains("instant < w.end"),
        "{exported}"
    );

    // The journal (read from a copy, so the sealed run stays untouched) holds both writers'
    // edits, each once.
    let scratch = tempfile::tempdir().unwrap();
    let db = scratch.path().join("store.sqlite");
    std::fs::copy(run.join("store.sqlite"), &db).unwrap();
    let store = patchdiff::store::open_backend(&db, None).unwrap();
    let page = store.replay("calendar", None, Some(1000)).unwrap();
    let keys: Vec<&str> = page
        .entries
        .iter()
        .filter_map(|e| e.request_key.as_deref())
        .collect();
    for key in ["cal-2", "cal-3", "replica-doc-1"] {
        assert_eq!(keys.iter().filter(|k| **k == key).count(), 1, "{keys:?}");
    }

    // The story lists both writers' submissions with their receipts.
    assert!(
        progress.contains("accepted  key replica-doc-1 · at its cursor → r"),
        "{progress}"
    );
    assert!(
        progress.contains("accepted  key cal-2 · base r0 → r1"),
        "{progress}"
    );

    // verify's receipts check covers both writers' wire logs.
    let count = verified_receipts_per_log(&run);
    // The agent: five saves and its submissions; the replica: its submission (and its save
    // when the agent's calendar save came before it).
    assert!(count("observed.mcp.jsonl") >= 12);
    assert!((1..=2).contains(&count("replica.mcp.jsonl")));
}

/// `patchdiff verify RUN --json` must hold; returns its receipts check's count for a wire log
/// (`observed.mcp.jsonl`, `replica.mcp.jsonl`, …) from the summary's per-log counts.
fn verified_receipts_per_log(run: &Path) -> impl Fn(&str) -> u64 {
    let verified = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg(run)
        .arg("--json")
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap();
    let verdict: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verdict["ok"], true, "{verdict:#}");
    let receipts = verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "receipts")
        .unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    move |log: &str| -> u64 {
        let at = receipts
            .find(&format!("{log} "))
            .unwrap_or_else(|| panic!("{log} in {receipts}"));
        receipts[at + log.len() + 1..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }
}

/// R2: a replica whose edit lands after the agent's last save of its target saves it itself,
/// so the export holds it. Deterministically so: this agent reads and saves `calendar` without
/// a submission, so the replica submits once the agent step is done.
#[test]
fn replica_edit_after_the_agents_last_save_is_saved_by_the_replica_and_exported() {
    let runs = tempfile::tempdir().unwrap();
    let canary = repo().join("assets/canary");
    let plan = runs.path().join("read-and-save.plan.jsonl");
    std::fs::write(
        &plan,
        concat!(
            r#"{"step": "read", "tool": "patchdiff_read_target", "args": {"target": "calendar"}}"#,
            "\n",
            r#"{"step": "save", "tool": "patchdiff_save", "args": {"target": "calendar"}, "expect": {"version": 1, "revision": 0}}"#,
            "\n"
        ),
    )
    .unwrap();
    let script = runs.path().join("late-replica.canary");
    std::fs::write(
        &script,
        format!(
            "record model=scripted-demo provider=patchdiff reasoning=none\ninit\nlaunch observed\n\
             preflight\nreplica calendar {}\nagent {}\nexport\nreport\n",
            canary.join("replica-calendar.jsonl").display(),
            plan.display()
        ),
    )
    .unwrap();
    let output = run_script(runs.path(), &script, &[], &[]);
    let progress = String::from_utf8_lossy(&output.stderr).into_owned();
    let agent = step_line(&String::from_utf8_lossy(&output.stdout), "[6/8]");
    assert!(
        agent.contains(" ok ")
            && agent.contains("replica: 1 submissions accepted (revisions 1)")
            && agent.contains("saved as version 2 · lease released"),
        "{agent}\n{progress}"
    );
    let run = the_only_run(runs.path());
    let exported = std::fs::read_to_string(run.join("export/calendar.js")).unwrap();
    assert!(
        exported.contains("(to the minute; seconds are dropped). */"),
        "{exported}"
    );
    // The replica's submission and its save, both checked against the journal.
    let count = verified_receipts_per_log(&run);
    assert_eq!(count("replica.mcp.jsonl"), 2);
    assert_eq!(count("observed.mcp.jsonl"), 1);
}

/// A replica plan that is not one submission per line is refused before anything runs, naming
/// the script line, the plan's line and what a line must be.
#[test]
fn bad_replica_plan_is_refused_before_anything_runs() {
    let runs = tempfile::tempdir().unwrap();
    let plan = runs.path().join("bad.jsonl");
    std::fs::write(&plan, "{\"request_key\": \"k\", \"ops\": []}\n").unwrap();
    let script = runs.path().join("bad-replica.canary");
    std::fs::write(
        &script,
        format!("init\nreplica calendar {}\n", plan.display()),
    )
    .unwrap();
    let output = run_script(runs.path(), &script, &[], &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad-replica.canary:2: replica plan")
            && stderr.contains("line 1: unknown field `ops`")
            && stderr.contains(r#"a line is {"request_key": "…", "operations""#),
        "{stderr}"
    );
    assert!(the_runs_are_empty(runs.path()), "nothing ran");
}

fn the_runs_are_empty(runs: &Path) -> bool {
    std::fs::read_dir(runs)
        .unwrap()
        .all(|e| !e.unwrap().file_name().to_string_lossy().starts_with("r-"))
}

/// Copies the bundled fixtures to a scratch directory and writes an init-only script there.
fn scratch_fixtures(dir: &Path) -> (PathBuf, PathBuf) {
    let src = repo().join("assets/fixtures");
    let dst = dir.join("fixtures");
    copy_dir(&src, &dst);
    let script = dir.join("init.canary");
    std::fs::write(&script, "init\nlaunch observed\n").unwrap();
    (dst.join("manifest.json"), script)
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

#[test]
fn tampered_fixture_is_refused_by_name_and_nothing_is_initialized() {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, script) = scratch_fixtures(dir.path());
    let chess = manifest.parent().unwrap().join("chess/original.py");
    let mut bytes = std::fs::read(&chess).unwrap();
    bytes.push(b'\n');
    std::fs::write(&chess, bytes).unwrap();
    let runs = dir.path().join("runs");
    let output = run_script(
        &runs,
        &script,
        &["--manifest", manifest.to_str().unwrap()],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let init_line = stdout
        .lines()
        .find(|l| l.starts_with("[1/2] init"))
        .unwrap();
    assert!(
        init_line.contains("FAIL") && init_line.contains("fixture `chess`"),
        "{init_line}"
    );
    assert!(stdout.contains("[2/2] launch      skipped"), "{stdout}");
    // Authentication happens before any process starts: no database was even created.
    assert!(!the_only_run(&runs).join("store.sqlite").exists());
}

#[test]
fn missing_fixture_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, script) = scratch_fixtures(dir.path());
    std::fs::remove_file(manifest.parent().unwrap().join("limiter/original.rs")).unwrap();
    let runs = dir.path().join("runs");
    let output = run_script(
        &runs,
        &script,
        &["--manifest", manifest.to_str().unwrap()],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("fixture `limiter`: cannot read"),
        "{stdout}"
    );
}

#[test]
fn observed_process_that_will_not_start_fails_the_launch_step() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("launch.canary");
    std::fs::write(&script, "launch observed\npreflight\n").unwrap();
    let runs = dir.path().join("runs");
    let output = run_script(
        &runs,
        &script,
        &[],
        &[("PATCHDIFF_NODE_BINARY", "/nonexistent/node")],
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("[1/2] launch"))
        .unwrap();
    assert!(line.contains("FAIL") && line.contains("observed"), "{line}");
    // The child's own error (P2) is in its captured stderr, naming the variable.
    let stderr = std::fs::read_to_string(the_only_run(&runs).join("observed.stderr.log")).unwrap();
    assert!(stderr.contains("PATCHDIFF_NODE_BINARY"), "{stderr}");
}

#[test]
fn invalid_script_exits_2_naming_the_line_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.canary");
    std::fs::write(&script, "init\nlaunch everything\n").unwrap();
    let runs = dir.path().join("runs");
    let output = run_script(&runs, &script, &[], &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.canary:2: usage: launch"), "{stderr}");
    assert!(
        !runs.exists(),
        "no run directory for a script that did not parse"
    );
}

#[test]
fn missing_plan_or_record_after_init_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let script = dir.path().join("bad.canary");
    std::fs::write(
        &script,
        "init\nlaunch observed\npreflight\nagent nowhere.plan.jsonl\n",
    )
    .unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.canary:4: ") && stderr.contains("cannot read plan"),
        "{stderr}"
    );
    std::fs::write(&script, "init\nrecord model=m\n").unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("`record` must come before `init`"));
    assert!(!runs.exists(), "nothing ran");
}

#[test]
fn agent_needs_a_passed_preflight_and_a_run_initializes_once() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let script = dir.path().join("skip.canary");
    let plan = repo().join("assets/canary/demo.plan.jsonl");
    std::fs::write(
        &script,
        format!("init\nlaunch observed\nagent {}\n", plan.display()),
    )
    .unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    // The agent never acted: infra_abort (exit 3), nothing counts against it (issue 21).
    assert_eq!(output.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("INFRA_ABORT"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("[3/3] agent"))
        .unwrap();
    assert!(
        line.contains("FAIL") && line.contains("run `preflight` first"),
        "{line}"
    );

    std::fs::write(&script, "init\ninit --reset\n").unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("already initialized its targets"),
        "{stdout}"
    );
}

#[test]
fn sigint_during_wait_saved_stops_the_run_with_exit_130() {
    // U5: an interrupt was reported as the wait's timeout and exited 1.
    use std::io::{BufRead, BufReader};
    let runs = tempfile::tempdir().unwrap();
    let script = runs.path().join("wait.canary");
    std::fs::write(&script, "init\nwait saved 600\nreport\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(&script)
        .arg("--runs-dir")
        .arg(runs.path())
        .env("PATCHDIFF_STATE_DIR", runs.path().join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("patchdiff runs");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "{seen:?}");
        let init_done = line.contains(" init ");
        seen.push(line);
        if init_done {
            break;
        }
    }
    assert!(seen.last().unwrap().contains(" ok "), "{seen:?}");
    // The wait step runs (or is about to): interrupt it as a terminal's Ctrl-C would.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(
        rest.contains("wait") && rest.contains("interrupted by SIGINT"),
        "{rest}"
    );
    assert!(!rest.contains("timed out"), "{rest}");
}

#[test]
fn console_children_get_exactly_the_consoles_configuration() {
    // P1/P3: with `waymark_workers = 2` in the operator's patchdiff.toml, `launch observed`
    // failed even under PATCHDIFF_CONFIG=/dev/null (the child re-read the file), while the
    // operator's PATCHDIFF_PERF_MEMORY never reached the child.
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config_dir = home.join(".config/patchdiff");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(config_dir.join("patchdiff.toml"), "waymark_workers = 2\n").unwrap();
    let script = dir.path().join("launch.canary");
    std::fs::write(&script, "init\nlaunch observed\npreflight\n").unwrap();
    let runs = dir.path().join("runs");
    let output = run_script(
        &runs,
        &script,
        &[],
        &[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CONFIG_HOME", home.join(".config").to_str().unwrap()),
            ("PATCHDIFF_CONFIG", "/dev/null"),
            ("PATCHDIFF_PERF_MEMORY", "0"),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let run = the_only_run(&runs);
    let events = std::fs::read_to_string(run.join("observed.perf.jsonl")).unwrap();
    let status: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(status["name"], "telemetry_status", "{status}");
    assert_eq!(
        status["attrs"]["memory_sampling_enabled"], false,
        "{status}"
    );
    assert!(!run.join("observed.perf.jsonl.memory.jsonl").exists());
}

#[test]
fn runs_lists_past_runs_with_their_verdicts_and_compares_two() {
    let runs = tempfile::tempdir().unwrap();
    let demo = run_script(
        runs.path(),
        &repo().join("assets/canary/demo.canary"),
        &[],
        &[],
    );
    assert!(demo.status.success(), "{demo:?}");
    let first = the_only_run(runs.path());
    let id = first.file_name().unwrap().to_string_lossy().into_owned();
    // A second console lists the first run and compares it with itself.
    let script = runs.path().join("runs.canary");
    std::fs::write(&script, format!("runs\nruns compare {id} {id}\n")).unwrap();
    let output = run_script(runs.path(), &script, &[], &[]);
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let listed = text
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        listed.contains("scripted-demo") && listed.contains("PASSED"),
        "{listed}"
    );
    for target in ["calendar", "chess", "incidents", "worker-logs", "limiter"] {
        assert!(listed.contains(&format!("{target} pass")), "{listed}");
    }
    let chess = text
        .lines()
        .find(|l| l.starts_with("chess "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(chess.trim_end().ends_with("pass"), "no change: {chess}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("phase_active") && l.contains("+0.00")),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// C3: preflight refuses what it must refuse.

/// The `[n/N] preflight` progress line numbered `n` in a headless run's stdout.
fn step_line(stdout: &str, prefix: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{stdout}"))
        .to_owned()
}

#[test]
fn preflight_refuses_targets_that_are_no_longer_fresh() {
    // The same run, preflighted again after the agent has edited: the targets have attempts and
    // revisions, so C3's "targets fresh" check must fail.
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let script = dir.path().join("twice.canary");
    let plan = repo().join("assets/canary/demo.plan.jsonl");
    std::fs::write(
        &script,
        format!(
            "init\nlaunch observed\npreflight\nagent {}\npreflight\n",
            plan.display()
        ),
    )
    .unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first = step_line(&stdout, "[3/5] preflight");
    assert!(
        first.contains(" ok ") && first.contains("5 targets fresh"),
        "{first}"
    );
    let again = step_line(&stdout, "[5/5] preflight");
    assert!(
        again.contains("FAIL") && again.contains("targets are not fresh"),
        "{again}"
    );
    for target in ["calendar", "chess", "limiter"] {
        assert!(again.contains(target), "{target} is named: {again}");
    }
}

#[test]
fn preflight_refuses_a_target_saved_without_edits_and_one_with_only_a_rejected_attempt() {
    // C3 names three ways a target is not fresh, each on its own: a version above 0 (chess is
    // saved at revision 0, with no attempt) and an attempt (limiter's one submission is
    // rejected: strict mode and no observation_id, so its revision stays 0).
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let plan = dir.path().join("two.plan.jsonl");
    std::fs::write(
        &plan,
        concat!(
            r#"{"step": "save-chess", "tool": "patchdiff_save", "args": {"target": "chess"}, "expect": {"version": 1, "revision": 0}}"#,
            "\n",
            r#"{"step": "lim-sub", "tool": "patchdiff_submit_observed_operations", "args": {"target": "limiter", "request_key": "lim-1", "base_revision": 0, "operations": [{"old_text": "a", "new_text": "b"}]}, "expect": {"outcome": "rejected", "revision": 0}, "expect_error": true}"#,
            "\n",
        ),
    )
    .unwrap();
    let script = dir.path().join("twice.canary");
    std::fs::write(
        &script,
        format!(
            "init\nlaunch observed\npreflight\nagent {}\npreflight\n",
            plan.display()
        ),
    )
    .unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let agent = step_line(&stdout, "[4/5] agent");
    assert!(agent.contains(" ok "), "{agent}");
    let again = step_line(&stdout, "[5/5] preflight");
    assert!(
        again.contains(
            "targets are not fresh: chess (version 1, revision 0, attempts 0), \
             limiter (version 0, revision 0, attempts 1)"
        ),
        "{again}"
    );
}

#[test]
fn preflight_refuses_a_worker_that_is_not_ready() {
    // A worker script that exits at once: the observed process serves, but its worker retires
    // before it is ever ready.
    let dir = tempfile::tempdir().unwrap();
    let waymark = dir.path().join("dead-waymark");
    std::fs::create_dir_all(&waymark).unwrap();
    std::fs::write(
        waymark.join("waymark_worker.mjs"),
        "process.stderr.write('no worker here\\n');\nprocess.exit(3);\n",
    )
    .unwrap();
    let runs = dir.path().join("runs");
    let script = dir.path().join("launch.canary");
    std::fs::write(&script, "launch observed\npreflight\n").unwrap();
    let output = run_script(
        &runs,
        &script,
        &[],
        &[("PATCHDIFF_WAYMARK_DIR", waymark.to_str().unwrap())],
    );
    // A failed preflight stops the run before any agent acted: infra_abort, exit 3 (issue 21).
    assert_eq!(output.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let launch = step_line(&stdout, "[1/2] launch");
    assert!(
        launch.contains(" ok "),
        "the process itself serves: {launch}"
    );
    let preflight = step_line(&stdout, "[2/2] preflight");
    // C3 with the worker's last lifecycle event, its retirement, named.
    assert!(
        preflight.contains("FAIL")
            && preflight.contains("the observed process's worker is not ready")
            && preflight.contains("(the last generation retired: "),
        "{preflight}"
    );
}

/// Launches the observed process through a shell wrapper around the real binary (`body` runs
/// it, with `{exe}` for its path) and runs preflight; returns preflight's summary after stopping.
/// The wrapper stands in for a misconfigured or altered server the canary must refuse (C3).
async fn preflight_through_wrapper(body: &str) -> String {
    use patchdiff::canary::command::Command as Step;
    use patchdiff::canary::{Canary, CanaryOptions};
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("patchdiff-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexport PATCHDIFF_STATE_DIR={state}\n{body}\n",
            state = dir.path().join("state").display(),
            body = body.replace("{exe}", env!("CARGO_BIN_EXE_patchdiff")),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut canary = Canary::create(CanaryOptions {
        exe: wrapper,
        manifest: repo().join("assets/fixtures/manifest.json"),
        runs_root: dir.path().join("runs"),
        database_url: None,
        settings: patchdiff::config::Settings::from_env(),
        step_timeout: patchdiff::canary::steps::deadline::STEP_TIMEOUT,
    })
    .unwrap();
    let launch = canary
        .execute(&Step::parse("launch observed").unwrap())
        .await;
    assert!(launch.ok, "{}", launch.summary);
    let preflight = canary.execute(&Step::Preflight).await;
    assert!(!preflight.ok, "{}", preflight.summary);
    canary.execute(&Step::parse("stop").unwrap()).await;
    preflight.summary
}

#[tokio::test]
async fn preflight_refuses_an_observed_process_that_lists_more_than_the_six_tools() {
    // A real `patchdiff mcp` whose "observed" process is started with the full profile (the
    // wrapper swaps the profile): tools/list then has fifteen tools (the ten and the five replica tools), not the six.
    let summary = preflight_through_wrapper(
        "[ \"$PATCHDIFF_MCP_PROFILE\" = observed ] && export PATCHDIFF_MCP_PROFILE=full\nexec {exe} \"$@\"",
    )
    .await;
    assert!(
        summary.contains("15 tools")
            && summary.contains("patchdiff_audit")
            && summary.contains("expected exactly the six"),
        "{summary}"
    );
}

#[tokio::test]
async fn preflight_refuses_an_observed_process_whose_refusal_is_not_at_the_profile_boundary() {
    // A real observed `patchdiff mcp` whose answers pass through `sed`, which renames the
    // refusal's `data.code`: tools/list is still the six, the full-profile call is still a
    // JSON-RPC error, but not `PROFILE_BOUNDARY` (C3) — preflight must stop there, naming it.
    let summary = preflight_through_wrapper(
        "{exe} \"$@\" | sed -u 's/\"PROFILE_BOUNDARY\"/\"SOMETHING_ELSE\"/g'",
    )
    .await;
    assert!(
        summary.contains(
            "calling `patchdiff_init_target` on the observed process failed without a PROFILE_BOUNDARY refusal"
        ),
        "{summary}"
    );
}

#[test]
fn host_config_writes_a_hosts_document_to_a_new_file_and_never_over_one() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let script = dir.path().join("configs.canary");
    std::fs::write(
        &script,
        "host-config claude claude.mcp.json\nhost-config codex codex.toml\n",
    )
    .unwrap();
    let output = run_script(&runs, &script, &[], &[]);
    assert!(output.status.success(), "{output:?}");
    // Relative to the script's directory; exactly the host's file, private.
    let claude = dir.path().join("claude.mcp.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(&claude).unwrap()).unwrap();
    assert_eq!(doc["mcpServers"]["patchdiff"]["args"][0], "mcp");
    assert_eq!(
        std::fs::metadata(&claude).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let codex: toml::Table = std::fs::read_to_string(dir.path().join("codex.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(codex["mcp_servers"]["patchdiff"]["enabled_tools"].is_array());
    // A second write is refused and leaves the file as it was.
    std::fs::write(&claude, "mine\n").unwrap();
    let again = run_script(&runs, &script, &[], &[]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stdout).contains("writes a new file only"));
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), "mine\n");
}

#[tokio::test]
async fn inspect_names_the_target_whose_journal_no_longer_replays_to_its_saved_version() {
    use patchdiff::canary::command::Command as Step;
    let dir = tempfile::tempdir().unwrap();
    let mut canary = canary_after_the_demo_plan(dir.path()).await;

    // Tamper with one accepted edit of `chess` in the journal: one ASCII byte of its new text
    // changes, so replaying the journal no longer reproduces the hash the edit recorded (nor
    // the saved version), while the target's own row is untouched.
    let db = rusqlite::Connection::open(canary.database_path()).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let (entry_id, mut text): (i64, Vec<u8>) = db
        .query_row(
            "SELECT j.entry_id, j.inline_text FROM journal j JOIN targets t ON t.id = j.target_id \
             WHERE t.name = 'chess' AND j.kind = 'edit' AND j.inline_text IS NOT NULL \
               AND length(j.inline_text) > 0 \
             ORDER BY j.entry_id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("chess has an accepted edit with inline text");
    let at = text
        .iter()
        .position(u8::is_ascii_alphanumeric)
        .expect("an ASCII byte to change");
    text[at] = if text[at] == b'x' { b'y' } else { b'x' };
    let changed = db
        .execute(
            "UPDATE journal SET inline_text = ?1 WHERE entry_id = ?2",
            rusqlite::params![text, entry_id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);

    let inspect = canary.execute(&Step::Inspect).await;
    assert!(
        !inspect.ok,
        "an inconsistent journal fails inspect: {}",
        inspect.summary
    );
    assert!(
        inspect
            .summary
            .starts_with("SAVE/replay inconsistent: chess: "),
        "names the target: {}",
        inspect.summary
    );
    assert!(
        inspect.summary.contains("does not reproduce its hash")
            || inspect
                .summary
                .contains("does not match the replayed content"),
        "{}",
        inspect.summary
    );
    for row in &canary.targets {
        let expected = row.name != "chess";
        assert_eq!(row.replay_consistent, Some(expected), "{row:?}");
    }
    let report = canary.build_report().to_text();
    assert!(
        report.lines().any(
            |l| l.contains("chess") && l.contains("replay") || l.contains("does not reproduce")
        ),
        "{report}"
    );
    canary.execute(&Step::parse("stop").unwrap()).await;
}

/// Runs the demo plan on a fresh canary up to `export` (every target edited and saved).
async fn canary_after_the_demo_plan(dir: &Path) -> patchdiff::canary::Canary {
    use patchdiff::canary::command::Command as Step;
    use patchdiff::canary::{Canary, CanaryOptions};
    let mut canary = Canary::create(CanaryOptions {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_patchdiff")),
        manifest: repo().join("assets/fixtures/manifest.json"),
        runs_root: dir.join("runs"),
        database_url: None,
        settings: patchdiff::config::Settings::from_env(),
        step_timeout: patchdiff::canary::steps::deadline::STEP_TIMEOUT,
    })
    .unwrap();
    let plan = repo().join("assets/canary/demo.plan.jsonl");
    for line in [
        "init".to_owned(),
        "launch observed".to_owned(),
        "preflight".to_owned(),
        format!("agent {}", plan.display()),
        "export".to_owned(),
    ] {
        let step = canary.execute(&Step::parse(&line).unwrap()).await;
        assert!(step.ok, "{line}: {}", step.summary);
    }
    canary
}

#[tokio::test]
async fn inspect_counts_the_audit_and_names_each_target_whose_store_disagrees_with_replay() {
    use patchdiff::canary::command::Command as Step;
    // C5/K6: three more ways a store can disagree with its journal, one per target, each
    // changed in `store.sqlite` after the demo plan: calendar's last edit reaches past the
    // content, incidents' save entry records another hash, and worker-logs' own row claims
    // another hash at the same revision. limiter and chess are untouched and stay consistent.
    let dir = tempfile::tempdir().unwrap();
    let mut canary = canary_after_the_demo_plan(dir.path()).await;
    // C5 first on the untouched store: every target replays, and the audit summary counts the
    // bundled demo plan's submissions: 11 request keys, one of them rejected (`cal-1`).
    let clean = canary.execute(&Step::Inspect).await;
    assert!(clean.ok, "{}", clean.summary);
    assert_eq!(
        clean.summary,
        "SAVE/replay consistent for 5 targets · 11 attempts, 1 rejected · 0 worker errors"
    );
    // Two worker errors recorded against two targets (as W8 would): counted in the summary.
    let db = rusqlite::Connection::open(canary.database_path()).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    for (target, code) in [("calendar", "RESTART_LIMIT"), ("chess", "PROTOCOL")] {
        db.execute(
            "INSERT INTO worker_errors (target_id, code, message) \
             SELECT id, ?2, 'recorded by the test' FROM targets WHERE name = ?1",
            [target, code],
        )
        .unwrap();
    }
    let counted = canary.execute(&Step::Inspect).await;
    assert!(counted.ok, "{}", counted.summary);
    assert!(
        counted.summary.ends_with(" · 2 worker errors"),
        "{}",
        counted.summary
    );
    let zeros = "0".repeat(64);
    let (entry_id, edits): (i64, String) = db
        .query_row(
            "SELECT j.entry_id, j.edits FROM journal j JOIN targets t ON t.id = j.target_id \
             WHERE t.name = 'calendar' AND j.kind = 'edit' ORDER BY j.entry_id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("calendar has an accepted edit");
    // `[[start_byte, end_byte, new_len], …]`: the first edit now ends at byte 10,000,000.
    let mut shape: Vec<[u64; 3]> = serde_json::from_str(&edits).unwrap();
    shape[0][1] = 10_000_000;
    let start = shape[0][0];
    let changed = db
        .execute(
            "UPDATE journal SET edits = ?1 WHERE entry_id = ?2",
            rusqlite::params![serde_json::to_string(&shape).unwrap(), entry_id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let changed = db
        .execute(
            "UPDATE journal SET sha256 = ?1 WHERE kind = 'save' AND target_id = \
             (SELECT id FROM targets WHERE name = 'incidents')",
            [&zeros],
        )
        .unwrap();
    assert_eq!(changed, 1, "incidents was saved once");
    let changed = db
        .execute(
            "UPDATE targets SET sha256 = ?1 WHERE name = 'worker-logs'",
            [&zeros],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);

    let inspect = canary.execute(&Step::Inspect).await;
    assert!(!inspect.ok, "{}", inspect.summary);
    let summary = &inspect.summary;
    assert!(
        summary.starts_with("SAVE/replay inconsistent: calendar: revision "),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "operation range {start}..10000000 is out of bounds"
        )),
        "{summary}"
    );
    assert!(
        summary.contains("incidents: saved version 1 does not match the replayed content"),
        "{summary}"
    );
    assert!(
        summary.contains("worker-logs: replay ends at revision "),
        "{summary}"
    );
    for row in &canary.targets {
        let expected = matches!(row.name.as_str(), "chess" | "limiter");
        assert_eq!(row.replay_consistent, Some(expected), "{row:?}");
    }
    canary.execute(&Step::parse("stop").unwrap()).await;
}

/// No step waits without a deadline (C3, U5): with a real observed process that stopped
/// answering (SIGSTOP, as a closed laptop lid or a debugger stops it), `preflight` fails at its
/// step deadline counted from its start, naming the step and how to give more time, instead of
/// waiting out the 120 s each call may take.
#[tokio::test(flavor = "multi_thread")]
async fn a_preflight_against_a_stopped_observed_process_fails_at_its_step_deadline() {
    use patchdiff::canary::command::Command as Step;
    use patchdiff::canary::{Canary, CanaryOptions};
    let dir = tempfile::tempdir().unwrap();
    let deadline = std::time::Duration::from_secs(3);
    let mut canary = Canary::create(CanaryOptions {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_patchdiff")),
        manifest: repo().join("assets/fixtures/manifest.json"),
        runs_root: dir.path().join("runs"),
        database_url: None,
        settings: patchdiff::config::Settings::from_env(),
        step_timeout: deadline,
    })
    .unwrap();
    let launch = canary
        .execute(&Step::parse("launch observed").unwrap())
        .await;
    assert!(launch.ok, "{}", launch.summary);
    let pid = canary.observed.as_ref().unwrap().pid.unwrap();
    let signal = |name: &str| {
        let status = Command::new("kill")
            .args([name, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    // Stopped once the kernel says so (state `T`), not after a guess at how long that takes.
    let stopped = || patchdiff::canary::client::proc_state(u64::from(pid)).starts_with('T');
    let since = std::time::Instant::now();
    while !stopped() {
        assert!(since.elapsed().as_secs() < 10, "pid {pid} never stopped");
        tokio::task::yield_now().await;
    }

    let started = std::time::Instant::now();
    let preflight = canary.execute(&Step::Preflight).await;
    let took = started.elapsed();
    signal("-CONT");
    assert!(!preflight.ok, "{}", preflight.summary);
    assert!(
        preflight
            .summary
            .starts_with("`preflight` did not finish within its step deadline of 3 s"),
        "{}",
        preflight.summary
    );
    assert!(preflight.summary.contains("--step-timeout"));
    assert!(
        took >= deadline && took < patchdiff::canary::client::CALL_DEADLINE,
        "preflight took {took:?}"
    );
    canary.execute(&Step::parse("stop").unwrap()).await;
}

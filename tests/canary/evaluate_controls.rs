//! The evaluator's controls (SPEC V3, issue 10 item 3) through the real binary: a check that
//! cannot pass on the expected bytes, or that passes on the original, is the infrastructure's
//! fault (`infra_error`) in every report format — never the agent's `FAIL` — and carries the
//! check's own exit status and error text; `--repeat K` finds a flaky check; a check that
//! never ends is killed with everything it started at `--check-timeout` and fails the target.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// A copy of the bundled fixtures in `dir` whose `target` check command is replaced.
fn fixtures_with_check(dir: &Path, target: &str, command: &[&str]) -> PathBuf {
    let fixtures = dir.join("fixtures");
    copy_tree(&repo().join("assets/fixtures"), &fixtures);
    let path = fixtures.join("manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let entry = manifest["fixtures"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|f| f["target"] == target)
        .unwrap();
    entry["check"]["command"] = serde_json::json!(command);
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    path
}

/// Exports equal to the expected bytes: the agent did everything right.
fn perfect_exports(dir: &Path) -> PathBuf {
    let exports = dir.join("export");
    std::fs::create_dir_all(&exports).unwrap();
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(repo().join("assets/fixtures/manifest.json")).unwrap(),
    )
    .unwrap();
    for f in manifest["fixtures"].as_array().unwrap() {
        std::fs::copy(
            repo()
                .join("assets/fixtures")
                .join(f["expected"].as_str().unwrap()),
            exports.join(f["module_file"].as_str().unwrap()),
        )
        .unwrap();
    }
    exports
}

fn evaluate(manifest: &Path, exports: &Path, extra: &[&str]) -> (Output, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("evaluate")
        .arg("--manifest")
        .arg(manifest)
        .arg("--exports")
        .arg(exports)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, json)
}

fn target<'a>(evaluation: &'a Value, name: &str) -> &'a Value {
    evaluation["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

#[test]
fn a_check_failing_on_the_expected_bytes_is_infra_error_with_its_own_text() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import sys; sys.stderr.write('checker: no default toolchain is configured\\n'); sys.exit(3)";
    let manifest = fixtures_with_check(dir.path(), "limiter", &["python3", "-c", script]);
    let exports = perfect_exports(dir.path());
    let (output, evaluation) = evaluate(&manifest, &exports, &[]);
    assert!(!output.status.success());
    let limiter = target(&evaluation, "limiter");
    assert_eq!(limiter["status"], "infra_error", "{limiter:#}");
    assert_eq!(limiter["full_byte"], true);
    assert_eq!(limiter["check_exit"], "exit 3");
    assert!(
        limiter["check_output"]
            .as_str()
            .unwrap()
            .contains("checker: no default toolchain is configured"),
        "{limiter:#}"
    );
    assert_eq!(evaluation["infra_errors"], 1);
    // The other four are judged normally.
    assert_eq!(evaluation["passed"], 4, "{evaluation:#}");

    // The text report carries the same, beside the status.
    let text = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["evaluate", "--manifest"])
        .arg(&manifest)
        .arg("--exports")
        .arg(&exports)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text.lines().find(|l| l.starts_with("limiter")).unwrap();
    assert!(line.contains("infra_error"), "{text}");
    assert!(text.contains("limiter: check exit 3"), "{text}");
    assert!(
        text.contains("checker: no default toolchain is configured"),
        "{text}"
    );
}

#[test]
fn a_check_that_passes_on_the_original_is_infra_error() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = fixtures_with_check(dir.path(), "chess", &["true"]);
    let exports = perfect_exports(dir.path());
    let (_, evaluation) = evaluate(&manifest, &exports, &[]);
    let chess = target(&evaluation, "chess");
    assert_eq!(chess["status"], "infra_error", "{chess:#}");
    assert!(
        chess["notes"][0]
            .as_str()
            .unwrap()
            .contains("passes on the original bytes"),
        "{chess:#}"
    );
}

#[test]
fn repeat_finds_a_check_whose_verdicts_differ() {
    let dir = tempfile::tempdir().unwrap();
    // Fails on the original bytes (the original control) and otherwise fails only on the third
    // run that sees other bytes, counting in a file outside the scratch directory. The two
    // controls run side by side, so only the expected one counts: it is run 0 (pass), then
    // the export gets runs 1 (pass), 2 (fail), 3 (pass).
    let counter = dir.path().join("runs");
    let original = repo().join("assets/fixtures/calendar/original.js");
    let script = format!(
        "if cmp -s calendar.js {o}; then echo original; exit 1; fi; \
         n=$(cat {c} 2>/dev/null || echo 0); echo $((n + 1)) > {c}; echo run $n; [ $n -ne 2 ]",
        o = original.display(),
        c = counter.display()
    );
    let manifest = fixtures_with_check(dir.path(), "calendar", &["sh", "-c", &script]);
    let exports = perfect_exports(dir.path());
    let (_, evaluation) = evaluate(&manifest, &exports, &["--repeat", "3"]);
    let calendar = target(&evaluation, "calendar");
    assert_eq!(calendar["status"], "flaky", "{calendar:#}");
    assert_eq!(
        calendar["behavioral_runs"],
        serde_json::json!([true, false, true])
    );
    assert_eq!(calendar["check_exit"], "exit 1");
    assert!(calendar["check_output"].as_str().unwrap().contains("run 2"));
    assert_eq!(evaluation["flaky"], 1);
    assert_eq!(evaluation["repeat"], 3);
    // Every other target passes each of its three runs.
    assert_eq!(
        target(&evaluation, "chess")["behavioral_runs"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(evaluation["passed"], 4);
}

#[test]
fn a_canary_with_a_check_that_cannot_start_reports_infra_error_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = fixtures_with_check(
        dir.path(),
        "limiter",
        &["patchdiff-no-such-check-runner", "--test"],
    );
    let runs = dir.path().join("runs");
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(repo().join("assets/canary/demo.canary"))
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--manifest")
        .arg(&manifest)
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap();
    let console = String::from_utf8_lossy(&output.stdout);
    // A failed preflight stops the run before the agent acted: infra_abort, exit 3 (issue 21).
    assert_eq!(output.status.code(), Some(3), "{console}");
    let own_text = "No such file or directory";
    // The console: preflight stops the canary before the agent starts, naming the cause.
    let preflight = console
        .lines()
        .find(|l| l.contains(" preflight "))
        .unwrap_or_else(|| panic!("{console}"));
    assert!(preflight.contains("FAIL"), "{preflight}");
    assert!(preflight.contains("infra_error"), "{preflight}");
    assert!(preflight.contains("limiter"), "{preflight}");
    assert!(preflight.contains(own_text), "{preflight}");
    assert!(
        console
            .lines()
            .any(|l| l.contains(" agent ") && l.contains("skipped")),
        "{console}"
    );

    let run = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(run.join(name)).unwrap();

    let report: Value = serde_json::from_str(&read("report.json")).unwrap();
    let limiter = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "limiter")
        .unwrap();
    assert_eq!(limiter["status"], "infra_error", "{limiter:#}");
    assert!(
        limiter["check_exit"]
            .as_str()
            .unwrap()
            .starts_with("could not start")
    );
    assert!(
        limiter["check_output"].as_str().unwrap().contains(own_text),
        "{limiter:#}"
    );
    assert_eq!(report["passed"], false);

    let text = read("report.txt");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("limiter"))
        .unwrap();
    assert!(row.contains("infra_error"), "{text}");
    assert!(!row.contains("FAIL"), "the agent is not blamed: {row}");
    assert!(text.contains(own_text), "{text}");

    // Read back with a JUnit parser, as a CI system would.
    let junit = read("report.junit.xml");
    let parsed = quick_junit::Report::deserialize_from_str(&junit).expect("valid JUnit XML");
    let suite = &parsed.test_suites[0];
    assert_eq!(
        suite.errors, 2,
        "both checks of the one broken target: {junit}"
    );
    for class in ["canary.full_byte", "canary.behavioral"] {
        let case = suite
            .test_cases
            .iter()
            .find(|c| c.name.as_str() == "limiter" && c.classname.as_deref() == Some(class))
            .unwrap_or_else(|| panic!("no {class} case for limiter: {junit}"));
        match &case.status {
            quick_junit::TestCaseStatus::NonSuccess {
                kind: quick_junit::NonSuccessKind::Error,
                ty,
                description,
                ..
            } => {
                assert_eq!(ty.as_deref(), Some("infra_error"), "{junit}");
                let text = description.as_deref().unwrap_or_default();
                assert!(text.contains(own_text), "{class}: {text}");
            }
            other => panic!("{class} of limiter is {other:?}, not a JUnit error"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// C6 failure paths: the agent's own failures are judged as such.

/// The bundled manifest (authentic fixtures), for tests that change only the exports.
fn bundled_manifest() -> PathBuf {
    repo().join("assets/fixtures/manifest.json")
}

#[test]
fn an_export_whose_check_fails_is_a_behavioral_fail_in_every_report() {
    let dir = tempfile::tempdir().unwrap();
    let exports = perfect_exports(dir.path());
    // The agent changed nothing in `calendar`: its export is the original, which the check
    // rejects (that is the original control, which holds).
    std::fs::copy(
        repo().join("assets/fixtures/calendar/original.js"),
        exports.join("calendar.js"),
    )
    .unwrap();
    let (output, evaluation) = evaluate(&bundled_manifest(), &exports, &[]);
    assert!(!output.status.success(), "one target failed: exit non-zero");
    let calendar = target(&evaluation, "calendar");
    assert_eq!(calendar["status"], "fail", "{calendar:#}");
    assert_eq!(calendar["behavioral"], false, "{calendar:#}");
    assert_eq!(calendar["behavioral_runs"], serde_json::json!([false]));
    assert_eq!(calendar["full_byte"], false);
    assert!(calendar["check_exit"].is_string(), "{calendar:#}");
    assert_eq!(evaluation["passed"], 4, "{evaluation:#}");
    assert_eq!(
        evaluation["infra_errors"], 0,
        "the agent's failure, not the check's"
    );

    let text = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["evaluate", "--manifest"])
        .arg(bundled_manifest())
        .arg("--exports")
        .arg(&exports)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text.lines().find(|l| l.starts_with("calendar")).unwrap();
    assert!(line.contains("behavioral FAIL"), "{text}");
    assert!(line.contains("identical to the reference: no"), "{text}");
}

#[test]
fn a_missing_export_fails_that_target_only() {
    let dir = tempfile::tempdir().unwrap();
    let exports = perfect_exports(dir.path());
    std::fs::remove_file(exports.join("chess.py")).unwrap();
    let (output, evaluation) = evaluate(&bundled_manifest(), &exports, &[]);
    assert!(!output.status.success());
    let chess = target(&evaluation, "chess");
    assert_eq!(chess["status"], "fail", "{chess:#}");
    assert_eq!(chess["behavioral"], false);
    assert_eq!(chess["full_byte"], false);
    assert!(
        chess["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("no export at")),
        "{chess:#}"
    );
    assert_eq!(evaluation["passed"], 4, "{evaluation:#}");
}

#[test]
fn a_tampered_expected_file_stops_the_evaluation_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("fixtures");
    copy_tree(&repo().join("assets/fixtures"), &fixtures);
    let expected = fixtures.join("calendar/expected.js");
    let mut bytes = std::fs::read(&expected).unwrap();
    bytes.push(b'\n');
    std::fs::write(&expected, bytes).unwrap();
    let exports = perfect_exports(dir.path());
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["evaluate", "--manifest"])
        .arg(fixtures.join("manifest.json"))
        .arg("--exports")
        .arg(&exports)
        .arg("--json")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("calendar") && stderr.contains("expected.js"),
        "the tampered file is named: {stderr}"
    );
    let verdicts = String::from_utf8_lossy(&output.stdout);
    assert!(
        !verdicts.contains("\"status\":\"pass\"") && !verdicts.contains("\"status\": \"pass\""),
        "nothing is judged against unauthenticated bytes: {verdicts}"
    );
}

/// Waits (up to `within`) for process `pid`, which is not our child, to terminate, through a
/// pidfd that becomes readable when it does. True when it is gone or has terminated.
fn terminates_within(pid: u32, within: std::time::Duration) -> bool {
    // SAFETY: plain syscalls on an fd we own and close.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) as libc::c_int;
        if fd < 0 {
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ready = libc::poll(&mut poll, 1, within.as_millis() as libc::c_int);
        libc::close(fd);
        ready == 1
    }
}

#[test]
fn a_check_that_never_ends_is_killed_with_its_children_at_the_timeout_and_fails_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    std::fs::create_dir(&pids).unwrap();
    let expected = dir.path().join("fixtures/limiter/expected.rs");
    // Expected bytes pass, the original fails (the controls hold); an export carrying the
    // marker starts a grandchild and then waits for it for ten minutes.
    let script = format!(
        "if grep -q PATCHDIFF_HANG limiter.rs; then sleep 600 & echo $! > {pids}/grandchild; \
         echo $$ > {pids}/check; wait; fi; cmp -s limiter.rs {expected}",
        pids = pids.display(),
        expected = expected.display()
    );
    let manifest = fixtures_with_check(dir.path(), "limiter", &["sh", "-c", &script]);
    // Only this target: the other checks (node, python, rustc) need more than 1 s here.
    let mut only: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    only["fixtures"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["target"] == "limiter");
    std::fs::write(&manifest, serde_json::to_vec_pretty(&only).unwrap()).unwrap();
    let exports = perfect_exports(dir.path());
    let mut hanging = std::fs::read(exports.join("limiter.rs")).unwrap();
    hanging.extend_from_slice(b"// PATCHDIFF_HANG\n");
    std::fs::write(exports.join("limiter.rs"), hanging).unwrap();

    let started = std::time::Instant::now();
    let (output, evaluation) = evaluate(&manifest, &exports, &["--check-timeout", "1"]);
    let elapsed = started.elapsed();
    assert!(!output.status.success(), "one target failed: exit non-zero");
    let limiter = target(&evaluation, "limiter");
    assert_eq!(
        limiter["status"], "fail",
        "the agent's export, not the check: {limiter:#}"
    );
    assert_eq!(limiter["behavioral"], false, "{limiter:#}");
    assert_eq!(limiter["behavioral_runs"], serde_json::json!([false]));
    assert_eq!(limiter["check_exit"], "timed out after 1 s", "{limiter:#}");
    assert_eq!(
        limiter["controls"]["expected"]["passed"], true,
        "{limiter:#}"
    );
    assert_eq!(
        limiter["controls"]["original"]["passed"], false,
        "{limiter:#}"
    );
    assert!(
        limiter["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("timed out after 1 s")),
        "{limiter:#}"
    );
    assert_eq!(evaluation["passed"], 0, "{evaluation:#}");
    assert_eq!(evaluation["infra_errors"], 0, "{evaluation:#}");
    // The 600 s check was cut at the timeout, not waited for.
    assert!(
        elapsed < std::time::Duration::from_secs(60),
        "evaluation took {elapsed:?}"
    );
    // The check and the grandchild it started were killed (SIGKILL is delivered
    // asynchronously, so wait for it, bounded; left alone they would live 600 s).
    for name in ["check", "grandchild"] {
        let pid: u32 = std::fs::read_to_string(pids.join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            terminates_within(pid, std::time::Duration::from_secs(10)),
            "the {name} (pid {pid}) outlived the timeout"
        );
    }
}

#[test]
fn a_check_timeout_outside_one_second_to_one_hour_is_refused_naming_the_range() {
    for bad in ["0", "3601"] {
        let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
            .args(["evaluate", "--manifest"])
            .arg(bundled_manifest())
            .args(["--exports", "/nonexistent", "--check-timeout", bad])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("--check-timeout {bad}"))
                && stderr.contains("between 1 and 3600"),
            "{stderr}"
        );
    }
}

//! The console's `compare PLAN` step (gate 2, SPEC C7; issue 24 item 6), headless: a script
//! line runs `patchdiff compare run PLAN`'s code — the same gate, the same sealed `cmp-<id>/`,
//! the same member runs through the real Claude Code CLI against `scripted-model` on loopback
//! (the setup of `compare_runs.rs`, whose helpers these are) — prints one line per finished
//! run, then the same report. Size: an A/A plan of 5 runs per arm (the plan's minimum) at
//! concurrency 1, which curtails after 2 + 2 perfect runs, so four member runs in all.

use std::path::{Path, PathBuf};

use crate::compare_runs::{
    Model, comparison_dir, member_reports, one_at_a_time, patchdiff, plan, report_json, text,
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A console script in `dir` whose one line is `compare PLAN` (relative to the script).
fn compare_script(dir: &Path, plan: &Path) -> PathBuf {
    let script = dir.join("compare.canary");
    std::fs::write(
        &script,
        format!(
            "# gate 2 from the console\ncompare {}\n",
            plan.file_name().unwrap().to_string_lossy()
        ),
    )
    .unwrap();
    script
}

/// What is under the runs root (`r-*` run directories, `cmp-*` comparisons).
fn entries(runs: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(runs)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_compare_line_with_gate_2_closed_is_refused_before_anything_runs_saying_how_to_open_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = plan(
        dir.path(),
        "plan.toml",
        &["--runs", "5", "--aa", "--baseline", "demo"],
    );
    let script = compare_script(dir.path(), &path);
    let runs = dir.path().join("runs");
    for gate in [None, Some("closed")] {
        let out = patchdiff(dir.path(), None, gate)
            .arg("console")
            .arg("--script")
            .arg(&script)
            .arg("--runs-dir")
            .arg(&runs)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{}:2: `compare` refused", script.display()))
                && stderr.contains("gate 2 is closed")
                && stderr.contains("PATCHDIFF_GATE2=open in the environment"),
            "{stderr}"
        );
        assert!(!stderr.contains("C7"), "plain words, no spec ids: {stderr}");
        assert_eq!(entries(&runs), Vec::<String>::new(), "nothing ran");
    }
}

#[test]
fn a_compare_line_prints_one_line_per_run_then_the_report_compare_run_prints() {
    let _turn = one_at_a_time();
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let model = Model::start(
        dir.path(),
        &[
            "--plan",
            repo()
                .join("assets/canary/demo.plan.jsonl")
                .to_str()
                .unwrap(),
        ],
    );
    let a = crate::compare_runs::claude_script(dir.path(), "a.canary", "scripted-baseline");
    let path = plan(
        dir.path(),
        "aa.toml",
        &[
            "--runs",
            "5",
            "--aa",
            "--seed",
            "3",
            "--concurrency",
            "1",
            "--baseline",
            a.to_str().unwrap(),
        ],
    );
    let script = compare_script(dir.path(), &path);
    let runs = dir.path().join("runs");
    let out = patchdiff(dir.path(), Some(&model), Some("open"))
        .arg("console")
        .arg("--script")
        .arg(&script)
        .arg("--runs-dir")
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out),
        member_reports(&runs)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let cmp = comparison_dir(&runs);
    // The comparison has its own directory; the console made no run directory of its own.
    assert_eq!(
        entries(&runs),
        vec![cmp.file_name().unwrap().to_string_lossy().into_owned()],
        "{stdout}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("patchdiff compare · runs under")
            && lines[0].contains("no run directory"),
        "{stdout}"
    );
    // As `compare run`: the sealed directory first, then a line per finished run.
    assert!(
        lines[1].starts_with(&format!("  {} · plan ", cmp.display()))
            && lines[1].ends_with("sealed · gate 2 open (env)"),
        "{stdout}"
    );
    let report = report_json(&cmp);
    let counted = report["runs"].as_array().unwrap().len();
    assert_eq!(counted, 4, "curtailed after 2 + 2: {report:#}");
    let run_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("  [") && l.contains("/10] "))
        .collect();
    assert_eq!(
        run_lines.len(),
        counted,
        "one line per finished run: {stdout}"
    );
    assert!(
        stdout.contains("  curtailed: the decision is settled"),
        "{stdout}"
    );
    let step = lines
        .iter()
        .find(|l| l.starts_with("[1/1] compare"))
        .unwrap_or_else(|| panic!("no step line:\n{stdout}"));
    assert!(
        step.contains(" ok ")
            && step.contains(&format!(
                "comparison {} · UNCHANGED · 4 runs counted",
                cmp.file_name().unwrap().to_string_lossy()
            )),
        "{step}"
    );
    // Then the report, exactly as `compare run` wrote it, and as `compare report` recomputes
    // and prints it from the sealed member runs.
    let written = std::fs::read_to_string(cmp.join("report.txt")).unwrap();
    assert!(
        stdout.contains(&written),
        "the report.txt text is printed whole:\n{stdout}\n---\n{written}"
    );
    let recomputed = patchdiff(dir.path(), None, None)
        .args(["compare", "report"])
        .arg(&cmp)
        .output()
        .unwrap();
    assert_eq!(recomputed.status.code(), Some(0), "{}", text(&recomputed));
    assert_eq!(String::from_utf8_lossy(&recomputed.stdout), written);
    assert!(
        lines.last().unwrap().starts_with("UNCHANGED · comparison"),
        "{stdout}"
    );
    let verified = patchdiff(dir.path(), None, None)
        .arg("verify")
        .arg(&cmp)
        .output()
        .unwrap();
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
    eprintln!("compare step, 2 + 2 runs: {:?}", started.elapsed());
}

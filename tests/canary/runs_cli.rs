//! Past runs you can walk (U2, issue 27 item 5) through the real binary: `patchdiff runs
//! [list|show ID|compare A B|story ID TARGET] [--json]` over real run directories — the bundled
//! demo canary (5/5) and the bundled wrong agent (a FAIL), each a real headless run with real
//! MCP processes, worker, store and evaluator — plus a corrupt directory, and a view-only
//! console script that must leave no run directory behind and say its views succeeded.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `patchdiff console --script SCRIPT --runs-dir RUNS [extra…]` with a private state directory
/// outside the runs directory.
fn console_script(runs: &Path, state: &Path, script: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(script)
        .arg("--runs-dir")
        .arg(runs)
        .args(extra)
        .env("PATCHDIFF_STATE_DIR", state)
        .env_remove("PATCHDIFF_DATABASE_URL")
        .env_remove("NO_COLOR")
        .output()
        .expect("patchdiff console")
}

/// `patchdiff runs ARGS… --runs-dir RUNS`.
fn runs_cmd(runs: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("runs")
        .args(args)
        .arg("--runs-dir")
        .arg(runs)
        .output()
        .expect("patchdiff runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn both(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn entries(runs: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A runs directory holding two real past runs: the demo (passes 5/5) and the wrong agent
/// (fails a target), made once per test binary; tests only read it.
struct PastRuns {
    _dir: tempfile::TempDir,
    runs: PathBuf,
    state: PathBuf,
    demo: String,
    wrong: String,
}

fn past_runs() -> &'static PastRuns {
    static RUNS: OnceLock<PastRuns> = OnceLock::new();
    RUNS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (runs, state) = (dir.path().join("runs"), dir.path().join("state"));
        let mut ids = Vec::new();
        for (script, exit) in [("demo.canary", 0), ("wrong.canary", 1)] {
            // A run that stopped before the agent acted (exit 3, `infra_abort`: on a loaded
            // machine the worker can miss its startup readiness) judged nothing; like a
            // comparison's slot, it is retried, at most twice, and its directory removed.
            for attempt in 1..=3 {
                let before = if runs.exists() {
                    entries(&runs)
                } else {
                    Vec::new()
                };
                let out = console_script(
                    &runs,
                    &state,
                    &repo().join("assets/canary").join(script),
                    &[],
                );
                let new: Vec<String> = entries(&runs)
                    .into_iter()
                    .filter(|e| !before.contains(e))
                    .collect();
                assert_eq!(new.len(), 1, "{script} made {new:?}");
                if out.status.code() == Some(3) && attempt < 3 {
                    std::fs::remove_dir_all(runs.join(&new[0])).unwrap();
                    continue;
                }
                assert_eq!(out.status.code(), Some(exit), "{script}: {}", both(&out));
                ids.push(new[0].clone());
                break;
            }
        }
        PastRuns {
            runs,
            state,
            demo: ids[0].clone(),
            wrong: ids[1].clone(),
            _dir: dir,
        }
    })
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", both(out)))
}

#[test]
fn runs_json_prints_the_real_entries_of_past_runs() {
    let p = past_runs();
    let out = runs_cmd(&p.runs, &["--json"]);
    assert!(out.status.success(), "{}", both(&out));
    let list = json(&out);
    let entries = list["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{list:#}");
    let entry = |id: &str| entries.iter().find(|e| e["id"] == id).unwrap().clone();
    let demo = entry(&p.demo);
    assert_eq!(demo["kind"], "run");
    assert_eq!(demo["model"], "scripted-demo");
    assert_eq!(demo["verdict"], "passed");
    assert_eq!(
        (
            demo["targets_passed"].as_u64(),
            demo["targets_total"].as_u64()
        ),
        (Some(5), Some(5))
    );
    assert_eq!(demo["seal"], "sealed", "{demo:#}");
    assert_eq!(demo["rehearsal"], false);
    assert_eq!(demo["suite"], "bundled", "{demo:#}");
    assert_eq!(demo["suite_sha256"].as_str().unwrap().len(), 64, "{demo:#}");
    assert!(demo["started_ms"].as_f64().unwrap() > 1.7e12, "{demo:#}");
    let wrong = entry(&p.wrong);
    assert_eq!(wrong["verdict"], "failed", "{wrong:#}");
    assert!(wrong["targets_passed"].as_u64().unwrap() < 5, "{wrong:#}");
    // Newest first by default; `--verdict` and `--model` filter.
    assert_eq!(entries[0]["id"], p.wrong.as_str());
    let failed = json(&runs_cmd(
        &p.runs,
        &["list", "--json", "--verdict", "failed"],
    ));
    let ids: Vec<&str> = failed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [p.wrong.as_str()]);
    let none = runs_cmd(&p.runs, &["--model", "no-such-model"]);
    assert!(
        stdout(&none).starts_with("no matching runs under"),
        "{}",
        both(&none)
    );
    let bad = runs_cmd(&p.runs, &["--verdict", "great"]);
    assert_eq!(bad.status.code(), Some(2), "{}", both(&bad));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("accepted: passed, failed"),
        "{}",
        both(&bad)
    );
    // The text list: one line per run with its verdict, targets and seal.
    let text = stdout(&runs_cmd(&p.runs, &[]));
    let line = text.lines().find(|l| l.starts_with(&p.demo)).unwrap();
    for part in [
        "scripted-demo",
        "scripted",
        "bundled@",
        "PASSED",
        "5/5",
        "sealed",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
}

#[test]
fn a_view_only_script_session_leaves_no_run_directory_reports_success_and_json_holds_the_views() {
    let p = past_runs();
    let before = entries(&p.runs);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("views.canary");
    let prefix = &p.demo[..p.demo.len() - 2];
    std::fs::write(&script, format!("runs\nruns open {prefix}\n")).unwrap();
    let out = console_script(&p.runs, &p.state, &script, &[]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(
        entries(&p.runs),
        before,
        "a view-only session created something"
    );
    let text = stdout(&out);
    let last = text.lines().last().unwrap();
    assert!(last.starts_with("VIEWED · 2/2 views ok"), "{text}");
    assert!(!text.contains("steps ok"), "{text}");
    // `runs open` headless shows the past run with its verdicts.
    for target in ["calendar", "chess", "incidents", "worker-logs", "limiter"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(target) && l.contains(" pass ")),
            "{target}: {text}"
        );
    }
    // `--json` prints what the views showed, not an empty canary report.
    let out = console_script(&p.runs, &p.state, &script, &["--json"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(entries(&p.runs), before);
    let report = json(&out);
    assert_eq!(report["views_only"], true, "{report:#}");
    let listed = report["views"][0]["data"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{report:#}");
    assert!(
        listed
            .iter()
            .any(|e| e["id"] == p.demo.as_str() && e["verdict"] == "passed")
    );
    assert_eq!(
        report["views"][1]["data"]["targets"]
            .as_array()
            .unwrap()
            .len(),
        5,
        "{report:#}"
    );
}

#[test]
fn runs_show_of_a_past_demo_run_shows_its_five_verdicts_stories_steps_processes_and_evidence() {
    let p = past_runs();
    let out = runs_cmd(&p.runs, &["show", &p.demo]);
    assert!(out.status.success(), "{}", both(&out));
    let text = stdout(&out);
    let verdicts: Vec<&str> = ["calendar", "chess", "incidents", "worker-logs", "limiter"]
        .into_iter()
        .filter(|t| {
            text.lines().any(|l| {
                let mut cells = l.split_whitespace();
                cells.next() == Some(*t) && cells.next() == Some("pass")
            })
        })
        .collect();
    assert_eq!(verdicts.len(), 5, "{text}");
    assert!(text.contains("targets  5/5 pass"), "{text}");
    assert!(text.contains("stories  calendar, chess"), "{text}");
    assert!(text.contains("seal     sealed"), "{text}");
    // Processes as they ended, with the pids their records name.
    let observed = text
        .lines()
        .find(|l| l.trim_start().starts_with("observed ") && l.contains("pid "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!observed.contains("pid -"), "{observed}");
    assert!(text.contains("worker gen 1"), "{text}");
    for file in [
        "report.json",
        "manifest.seal",
        "observed.mcp.jsonl",
        "export/",
    ] {
        assert!(text.contains(file), "{file}: {text}");
    }
    let detail = json(&runs_cmd(&p.runs, &["show", &p.demo, "--json"]));
    assert_eq!(detail["targets"].as_array().unwrap().len(), 5, "{detail:#}");
    assert!(
        detail["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["verdict"] == "pass" && t["exported"] == true),
        "{detail:#}"
    );
    // A past run's story, from its own files (`runs open` in the console refused it).
    let story = runs_cmd(&p.runs, &["story", &p.wrong, "chess"]);
    assert!(story.status.success(), "{}", both(&story));
    let story = stdout(&story);
    assert!(story.starts_with("chess (python)"), "{story}");
    assert!(story.contains("submissions ("), "{story}");
    assert!(story.contains("diff: expected → exported"), "{story}");
    let unknown = runs_cmd(&p.runs, &["story", &p.wrong, "nosuch"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", both(&unknown));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("targets are: calendar"),
        "{}",
        both(&unknown)
    );
}

#[test]
fn run_ids_resolve_by_unique_prefix_and_ambiguity_or_absence_lists_candidates() {
    let p = past_runs();
    // A unique prefix (without `r-` too) opens the run.
    let unique = &p.demo[..p.demo.len() - 1];
    let out = runs_cmd(&p.runs, &["show", unique, "--json"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(json(&out)["summary"]["id"], p.demo.as_str());
    let bare = p.demo.strip_prefix("r-").unwrap();
    assert!(runs_cmd(&p.runs, &["show", bare]).status.success());
    // `r-` starts both runs: ambiguous, both named, nothing shown.
    let out = runs_cmd(&p.runs, &["show", "r-"]);
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ambiguous") && err.contains(&p.demo) && err.contains(&p.wrong),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", both(&out));
    // No match: the error lists the entries there.
    let out = runs_cmd(&p.runs, &["compare", "r-1999", &p.demo]);
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no run `r-1999`") && err.contains(&p.demo),
        "{err}"
    );
}

#[test]
fn runs_compare_sets_two_runs_side_by_side_with_verdicts_durations_and_tool_errors() {
    let p = past_runs();
    let out = runs_cmd(&p.runs, &["compare", &p.demo, &p.wrong]);
    assert!(out.status.success(), "{}", both(&out));
    let text = stdout(&out);
    assert!(text.starts_with(&format!("A {}", p.demo)), "{text}");
    let changed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("changed (1 run each — run a comparison to decide)"))
        .collect();
    assert!(!changed.is_empty(), "{text}");
    assert!(!text.contains("REGRESSED"), "{text}");
    for section in ["phase_active", "agent ", "total ", "tool errors"] {
        assert!(text.contains(section), "{section}: {text}");
    }
    let pair = json(&runs_cmd(
        &p.runs,
        &["compare", &p.demo, &p.wrong, "--json"],
    ));
    let targets = pair["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 5, "{pair:#}");
    assert!(
        targets.iter().any(|t| t["a"] == "pass" && t["b"] == "FAIL"),
        "{pair:#}"
    );
    assert!(pair["a_total_ms"].as_u64().unwrap() > 0, "{pair:#}");
    // The demo's plan makes one deliberately ambiguous submission: a tool error, counted by
    // its reason code from the wire log.
    assert!(
        pair["tool_errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "OLD_TEXT_AMBIGUOUS" && e["a"].as_u64() >= Some(1)),
        "{pair:#}"
    );
}

#[test]
fn a_corrupt_run_directory_is_listed_as_unreadable_beside_readable_runs() {
    let p = past_runs();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(runs.join("r-20260101-000000-1")).unwrap();
    std::fs::write(
        runs.join("r-20260101-000000-1/report.json"),
        b"{\"passed\": true, \"targets\": [",
    )
    .unwrap();
    std::fs::create_dir_all(runs.join("r-20260101-000000-2")).unwrap();
    let demo = runs.join(&p.demo);
    std::fs::create_dir_all(&demo).unwrap();
    for f in [
        "manifest.json",
        "report.json",
        "SHA256SUMS",
        "manifest.seal",
    ] {
        std::fs::copy(p.runs.join(&p.demo).join(f), demo.join(f)).unwrap();
    }
    let out = runs_cmd(&runs, &[]);
    assert!(out.status.success(), "{}", both(&out));
    let text = stdout(&out);
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id}: {text}"))
            .to_owned()
    };
    let torn = line("r-20260101-000000-1");
    assert!(
        torn.contains("UNREADABLE") && torn.contains("report.json"),
        "{torn}"
    );
    let empty = line("r-20260101-000000-2");
    assert!(empty.contains("UNREADABLE"), "{empty}");
    assert!(line(&p.demo).contains("PASSED"), "{text}");
    let list = json(&runs_cmd(&runs, &["--json", "--verdict", "unreadable"]));
    assert_eq!(list["entries"].as_array().unwrap().len(), 2, "{list:#}");
    let shown = runs_cmd(&runs, &["show", "r-20260101-000000-1"]);
    assert!(shown.status.success(), "{}", both(&shown));
    assert!(stdout(&shown).contains("problem  "), "{}", both(&shown));
}

#[test]
fn a_comparison_is_listed_with_its_verdict_and_shown_with_its_per_target_strips() {
    // A real A/A comparison of the scripted demo (gate 2 open, 5 + 5 sealed member runs, not
    // curtailed).
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let patchdiff = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_patchdiff"));
        cmd.env("PATCHDIFF_STATE_DIR", dir.path().join("state"))
            .env("PATCHDIFF_DATA_DIR", dir.path().join("data"))
            .env_remove("PATCHDIFF_DATABASE_URL")
            .env("PATCHDIFF_GATE2", "open");
        cmd
    };
    let plan = dir.path().join("aa.toml");
    let demo = repo().join("assets/canary/demo.canary");
    let out = patchdiff()
        .args([
            "compare",
            "plan",
            "--runs",
            "5",
            "--aa",
            "--concurrency",
            "2",
            // Every planned run, so the strips are full (an A/A comparison curtails otherwise).
            "--no-curtail",
            "--baseline",
        ])
        .arg(&demo)
        .arg("-o")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", both(&out));
    let out = patchdiff()
        .args(["compare", "run"])
        .arg(&plan)
        .arg("--runs-dir")
        .arg(&runs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let cmp = entries(&runs)
        .into_iter()
        .find(|e| e.starts_with("cmp-"))
        .unwrap();
    let list = json(&runs_cmd(&runs, &["--json"]));
    let entry = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == cmp.as_str())
        .unwrap_or_else(|| panic!("{list:#}"))
        .clone();
    assert_eq!(entry["kind"], "comparison");
    assert_eq!(entry["verdict"], "unchanged", "{entry:#}");
    assert_eq!(entry["members"], serde_json::json!([10, 10]), "{entry:#}");
    assert_eq!(entry["seal"], "sealed", "{entry:#}");
    let text = stdout(&runs_cmd(&runs, &[]));
    let line = text.lines().find(|l| l.starts_with(&cmp)).unwrap();
    assert!(
        line.contains("UNCHANGED") && line.contains("10/10 runs"),
        "{line}"
    );
    // `show` by prefix: the verdict line and one strip of five cells per arm per target.
    let shown = runs_cmd(&runs, &["show", &cmp[..8]]);
    assert!(shown.status.success(), "{}", both(&shown));
    let shown = stdout(&shown);
    let verdict = shown.lines().find(|l| l.starts_with("VERDICT  ")).unwrap();
    assert!(verdict.contains("UNCHANGED"), "{shown}");
    for target in ["calendar", "chess", "incidents", "worker-logs", "limiter"] {
        let row = shown
            .lines()
            .find(|l| l.starts_with(target))
            .unwrap_or_else(|| panic!("{target}: {shown}"));
        assert_eq!(row.matches("█████").count(), 2, "{row}");
    }
    // A member run opens by CMP/SLOT.
    let member = runs_cmd(&runs, &["show", &format!("{cmp}/B-03"), "--json"]);
    assert!(member.status.success(), "{}", both(&member));
    assert_eq!(json(&member)["summary"]["verdict"], "passed");
}

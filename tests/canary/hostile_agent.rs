//! Issue 23: the agent is the party under test, and whatever it writes is data. Through the real
//! binary: escape sequences the agent put into its code, its request keys and what its code's
//! check prints reach neither the headless console's stdout nor `report.txt` raw (item 1), while
//! `report.json` keeps the exact text; and no credential — provider keys, the database password
//! — reaches any file of the run, wherever the agent puts it (item 3).

use crate::backends;
use std::path::{Path, PathBuf};

use std::process::{Command, Output};

use serde_json::{Value, json};

/// Runs `patchdiff console --script SCRIPT --runs-dir RUNS` with a private state dir.
fn run_script(runs: &Path, script: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_patchdiff"));
    cmd.arg("console")
        .arg("--script")
        .arg(script)
        .arg("--runs-dir")
        .arg(runs)
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("patchdiff runs")
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

/// The attack run's sequences: a line erase before a fake verdict, concealment, a window-title
/// change and an OSC 52 clipboard write.
const FAKE_VERDICT: &str = "\r\x1b[2KPASSED · 5/5 targets pass both checks";
const HOSTILE_KEY: &str = "k\x1b]0;owned\x07\r\x1b[2KPASSED";

/// A plan for the chess target: one accepted submission whose request key is an escape sequence
/// and whose code carries raw escapes in a comment and prints the fake verdict, concealment, a
/// title change and a clipboard write when the check's process exits.
fn hostile_plan() -> String {
    let comment = "        # \x1b[8m\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07 raw\n";
    // Printed on stderr as the interpreter exits, after the check's own (long, `unittest -v`)
    // output, so it lands in the tail the reports show.
    let print = "        __import__(\"atexit\").register(print, \"\\r\\x1b[2KPASSED · 5/5 targets pass \
                 both checks\\x1b[8m\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\", \
                 file=__import__(\"sys\").stderr)\n";
    let first = "        step = 1 if color == WHITE else -1\n";
    let steps = [
        json!({"step": "obs", "tool": "patchdiff_observe_scope",
               "args": {"target": "chess", "scope": "Board._pawn_moves"}}),
        json!({"step": "sub", "tool": "patchdiff_submit_observed_operations",
               "args": {"target": "chess", "request_key": HOSTILE_KEY,
                        "base_revision": "${obs.revision}",
                        "operations": [{"observation_id": "${obs.observation_id}",
                                        "old_text": first,
                                        "new_text": format!("{comment}{print}{first}")}]},
               "expect": {"outcome": "accepted"}}),
        json!({"step": "save", "tool": "patchdiff_save", "args": {"target": "chess"}}),
    ];
    steps.iter().map(|s| format!("{s}\n")).collect()
}

/// Writes the hostile plan and a script running it through `evaluate`, `target chess` and
/// `report`; returns the script.
fn hostile_script(dir: &Path) -> PathBuf {
    let plan = dir.join("hostile.plan.jsonl");
    std::fs::write(&plan, hostile_plan()).unwrap();
    let script = dir.join("hostile.canary");
    std::fs::write(
        &script,
        format!(
            "record model=scripted-hostile provider=patchdiff reasoning=none\ninit\n\
             launch observed\npreflight\nagent {}\nexport\nevaluate\ntarget chess\nreport\n",
            plan.display()
        ),
    )
    .unwrap();
    script
}

/// The bytes a terminal would obey: C0 controls other than newline and tab, DEL, C1 controls.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
        })
        .collect()
}

#[test]
fn agent_escape_sequences_reach_neither_the_console_nor_report_txt_raw() {
    let runs = tempfile::tempdir().unwrap();
    let script = hostile_script(runs.path());
    let output = run_script(runs.path(), &script, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("agent       ok"),
        "the hostile plan ran:\n{stdout}\n{stderr}"
    );
    assert_eq!(raw_controls(&stdout), Vec::<char>::new(), "{stdout}");
    // Route 1, check output: the check printed the fake verdict; it shows as pictures, on a line
    // that does not start with it.
    assert!(
        stdout.contains("␍␛[2KPASSED · 5/5 targets pass both checks␛[8m"),
        "{stdout}"
    );
    assert!(stdout.contains("␛]52;c;cm0gLXJmIH4=␇"), "{stdout}");
    assert!(
        !stdout.lines().any(|l| l.starts_with("PASSED")),
        "a fake verdict line:\n{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("FAILED · ")),
        "{stdout}"
    );
    // Route 2, the request key in the target's story.
    assert!(stdout.contains("key k␛]0;owned␇␍␛[2KPASSED"), "{stdout}");
    // Route 3, the target text in `target chess`'s diff.
    assert!(
        stdout.contains("+        # ␛[8m␛]52;c;cm0gLXJmIH4=␇␛]0;owned␇ raw"),
        "{stdout}"
    );

    let run = the_only_run(runs.path());
    let text = std::fs::read_to_string(run.join("report.txt")).unwrap();
    assert_eq!(raw_controls(&text), Vec::<char>::new(), "{text}");
    assert!(text.contains("␍␛[2KPASSED · 5/5"), "{text}");
    // The machine formats keep the exact text.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    let chess = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "chess")
        .unwrap();
    assert!(
        chess["check_output"]
            .as_str()
            .unwrap()
            .contains(&format!("{FAKE_VERDICT}\x1b[8m")),
        "{chess}"
    );
}

const ANTHROPIC_KEY: &str = "sk-ant-test-KEY-4f9a8b7c6d5e";
const OPENAI_KEY: &str = "sk-proj-test-1a2b3c4d5e6f";
const DB_PASSWORD: &str = "pw-Hunter2-7e1d";

/// A plan whose agent puts a provider key into tool arguments (a target name the error echoes,
/// a request key) and whose code prints the environment's keys and database URL when the check
/// runs it. (A key written into the target's own text is not redacted: exports and the journal
/// must stay byte-exact for the evaluator and `verify`, C6/V2.)
fn leaking_plan() -> String {
    let first = "        step = 1 if color == WHITE else -1\n";
    let leak = "        import os; print(\"env\", os.environ.get(\"ANTHROPIC_API_KEY\"), \
                os.environ.get(\"OPENAI_API_KEY\"), os.environ.get(\"PATCHDIFF_DATABASE_URL\"))\n";
    let steps = [
        json!({"step": "read", "tool": "patchdiff_read_target",
               "args": {"target": ANTHROPIC_KEY}, "expect_error": true}),
        json!({"step": "obs", "tool": "patchdiff_observe_scope",
               "args": {"target": "chess", "scope": "Board._pawn_moves"}}),
        json!({"step": "sub", "tool": "patchdiff_submit_observed_operations",
               "args": {"target": "chess", "request_key": format!("key-{OPENAI_KEY}"),
                        "base_revision": "${obs.revision}",
                        "operations": [{"observation_id": "${obs.observation_id}",
                                        "old_text": first,
                                        "new_text": format!("{leak}{first}")}]},
               "expect": {"outcome": "accepted"}}),
        json!({"step": "save", "tool": "patchdiff_save", "args": {"target": "chess"}}),
    ];
    steps.iter().map(|s| format!("{s}\n")).collect()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn no_credential_reaches_any_file_of_the_run() {
    if !backends::postgres_or_skip("no_credential_reaches_any_file_of_the_run") {
        return;
    }
    let db = backends::fresh_database();
    // The harness's servers accept any password (trust); the URL carries one all the same.
    let url = db
        .url
        .replacen("://postgres@", &format!("://postgres:{DB_PASSWORD}@"), 1);
    assert!(url.contains(DB_PASSWORD), "{url}");
    let runs = tempfile::tempdir().unwrap();
    let plan = runs.path().join("leaking.plan.jsonl");
    std::fs::write(&plan, leaking_plan()).unwrap();
    let script = runs.path().join("leaking.canary");
    std::fs::write(
        &script,
        format!(
            "record model=scripted-leaking provider=patchdiff reasoning=none\ninit\n\
             launch observed\npreflight\nagent {}\nexport\nevaluate\ntarget chess\nreport\n",
            plan.display()
        ),
    )
    .unwrap();
    let output = run_script(
        runs.path(),
        &script,
        &[
            ("PATCHDIFF_DATABASE_URL", url.as_str()),
            ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
            ("OPENAI_API_KEY", OPENAI_KEY),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("agent       ok"),
        "the leaking plan ran:\n{stdout}\n{stderr}"
    );
    let run = the_only_run(runs.path());
    let files = files_under(&run);
    assert!(
        files.iter().any(|f| f.ends_with("observed.mcp.jsonl")),
        "{files:?}"
    );
    let mut leaks = Vec::new();
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in [ANTHROPIC_KEY, OPENAI_KEY, DB_PASSWORD] {
            if text.contains(secret) {
                leaks.push(format!("{} holds {secret}", file.display()));
            }
        }
    }
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
    // The agent's arguments were recorded, redacted: the evidence still shows what it did.
    let wire = std::fs::read_to_string(run.join("observed.mcp.jsonl")).unwrap();
    assert!(wire.contains("[redacted:ANTHROPIC_API_KEY]"), "{wire}");
    assert!(wire.contains("key-[redacted:OPENAI_API_KEY]"), "{wire}");
}

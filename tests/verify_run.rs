//! SPEC V1, V2 (issue 10 item 4): a canary run driven through the real console is sealed at
//! `report`; `patchdiff verify` accepts it untouched and, for one flipped byte in any file of
//! the run (and for one changed journal row in `store.sqlite`), exits non-zero naming the file.

mod backends;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One demo canary for all tests of this file, run once (the tests only read it and copy it).
fn sealed_run() -> &'static Path {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, run) = RUN.get_or_init(|| {
        let runs = tempfile::tempdir().unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
            .arg("console")
            .arg("--script")
            .arg(repo().join("assets/canary/demo.canary"))
            .arg("--runs-dir")
            .arg(runs.path())
            .env("PATCHDIFF_STATE_DIR", runs.path().join("state"))
            .env_remove("PATCHDIFF_DATABASE_URL")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let run = std::fs::read_dir(runs.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
            .unwrap();
        (runs, run)
    });
    run
}

fn verify(run: &Path, extra: &[&str]) -> (Output, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg(run)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, json)
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

/// A copy of the sealed run under the same directory name.
fn copy_of_run(scratch: &Path) -> PathBuf {
    let run = sealed_run();
    let copy = scratch.join(run.file_name().unwrap());
    copy_tree(run, &copy);
    copy
}

fn problem_files(report: &Value) -> Vec<String> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["file"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_untouched_run_verifies_including_a_fresh_evaluation() {
    let run = sealed_run();
    for name in ["SHA256SUMS", "manifest.seal"] {
        assert!(run.join(name).is_file(), "{name} missing");
    }
    let (output, report) = verify(run, &["--evaluate"]);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(report["ok"], true);
    let checks: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        checks,
        [
            "seal",
            "digest",
            "files",
            "chain",
            "fixtures",
            "journal",
            "evaluation"
        ]
    );
    // `sha256sum -c` agrees with the sums (the format is the standard one).
    let status = Command::new("sha256sum")
        .args(["--quiet", "-c", "SHA256SUMS"])
        .current_dir(run)
        .status();
    if let Ok(status) = status {
        assert!(status.success());
    }
}

#[test]
fn one_flipped_byte_in_any_file_of_the_run_is_named() {
    let run = sealed_run();
    let sums = std::fs::read_to_string(run.join("SHA256SUMS")).unwrap();
    let mut files: Vec<String> = sums
        .lines()
        .map(|l| l.split_once("  ").unwrap().1.to_owned())
        .collect();
    files.push("SHA256SUMS".into());
    files.push("manifest.seal".into());
    let mut flipped = 0;
    for rel in &files {
        let len = std::fs::metadata(run.join(rel)).unwrap().len();
        if len == 0 {
            continue; // nothing to flip (an empty stderr log); its digest is still checked
        }
        for third in [1, 2] {
            let scratch = tempfile::tempdir().unwrap();
            let copy = copy_of_run(scratch.path());
            let path = copy.join(rel);
            let mut bytes = std::fs::read(&path).unwrap();
            let at = (bytes.len() * third / 3).min(bytes.len() - 1);
            bytes[at] ^= 0x01;
            std::fs::write(&path, &bytes).unwrap();
            let (output, report) = verify(&copy, &[]);
            assert_eq!(output.status.code(), Some(1), "{rel}: {report:#}");
            assert_eq!(report["ok"], false);
            // The file that changed is named (the seal is named when the sums change, as well).
            assert!(
                problem_files(&report).contains(rel),
                "{rel} is not named: {report:#}"
            );
            // A chained log also names the line.
            if rel.ends_with(".jsonl") {
                let line = report["problems"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["check"] == "chain" && p["file"] == rel.as_str())
                    .and_then(|p| p["line"].as_u64())
                    .unwrap_or_else(|| panic!("{rel}: no chain problem with a line: {report:#}"));
                let expected = bytes[..at.min(bytes.len() - 1)]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count() as u64
                    + 1;
                assert_eq!(line, expected, "{rel}: {report:#}");
            }
        }
        flipped += 1;
    }
    assert!(
        flipped >= 15,
        "only {flipped} files were flipped: {files:?}"
    );
}

#[test]
fn a_changed_journal_row_fails_the_replay_against_the_exports() {
    let scratch = tempfile::tempdir().unwrap();
    let copy = copy_of_run(scratch.path());
    {
        let db = rusqlite::Connection::open(copy.join("store.sqlite")).unwrap();
        let (entry_id, mut text): (i64, Vec<u8>) = db
            .query_row(
                "SELECT entry_id, inline_text FROM journal WHERE kind = 'edit' \
                 AND length(inline_text) > 0 ORDER BY entry_id LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let i = text.iter().position(u8::is_ascii_alphabetic).unwrap();
        text[i] ^= 0x20; // one ASCII letter's case: still UTF-8, one byte different
        db.execute(
            "UPDATE journal SET inline_text = ?1 WHERE entry_id = ?2",
            rusqlite::params![text, entry_id],
        )
        .unwrap();
    }
    let (output, report) = verify(&copy, &[]);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    let journal: Vec<&Value> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["check"] == "journal")
        .collect();
    assert!(
        journal.iter().any(|p| p["file"] == "store.sqlite"),
        "the replay does not name the database: {report:#}"
    );
    assert!(problem_files(&report).contains(&"store.sqlite".to_owned()));
}

#[test]
fn an_archived_copy_under_another_name_still_verifies() {
    let scratch = tempfile::tempdir().unwrap();
    let archive = scratch.path().join("archived-run");
    copy_tree(sealed_run(), &archive);
    let (output, report) = verify(&archive, &[]);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
}

#[test]
fn a_file_added_after_the_seal_is_named() {
    let scratch = tempfile::tempdir().unwrap();
    let copy = copy_of_run(scratch.path());
    std::fs::write(copy.join("export/extra.js"), b"// planted\n").unwrap();
    let (output, report) = verify(&copy, &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(problem_files(&report).contains(&"export/extra.js".to_owned()));
}

/// A run re-sealed after its wire log was deleted (the sums and the
/// seal recomputed, so every digest holds) still fails, naming the missing log; a symlink
/// added to a run is named too.
#[test]
fn a_resealed_run_missing_its_wire_log_and_a_planted_symlink_are_named() {
    let scratch = tempfile::tempdir().unwrap();
    let copy = copy_of_run(scratch.path());
    std::fs::remove_file(copy.join("observed.mcp.jsonl")).unwrap();
    std::fs::remove_file(copy.join("SHA256SUMS")).unwrap();
    std::fs::remove_file(copy.join("manifest.seal")).unwrap();
    let run_id = copy.file_name().unwrap().to_string_lossy().into_owned();
    patchdiff::evidence::seal_run(&patchdiff::evidence::RunDir {
        run_id,
        path: copy.clone(),
    })
    .unwrap();
    let (output, report) = verify(&copy, &[]);
    assert_eq!(output.status.code(), Some(1));
    let missing: Vec<&Value> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["check"] == "files")
        .collect();
    assert_eq!(missing.len(), 1, "{report:#}");
    assert_eq!(missing[0]["file"], "observed.mcp.jsonl");
    assert!(
        missing[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("missing")
    );

    let copy = copy_of_run(&scratch.path().join("second"));
    std::os::unix::fs::symlink("/etc/passwd", copy.join("export/passwd")).unwrap();
    let (output, report) = verify(&copy, &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        report["problems"].as_array().unwrap().iter().any(|p| {
            p["check"] == "files"
                && p["file"] == "export/passwd"
                && p["message"].as_str().unwrap().starts_with("a symlink")
        }),
        "{report:#}"
    );
}

/// S1: a run on PostgreSQL has no `store.sqlite`; `verify` replays its
/// journal from the database the resolved settings name — here only the TOML config file names
/// it, so a verify reading the environment alone could not find it. Without that setting the
/// journal check fails saying what to set.
#[test]
fn a_postgres_run_verifies_from_the_database_its_config_file_names() {
    if !backends::postgres_or_skip(
        "a_postgres_run_verifies_from_the_database_its_config_file_names",
    ) {
        return;
    }
    let database = backends::fresh_database();
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("patchdiff.toml");
    std::fs::write(&config, format!("database_url = {:?}\n", database.url)).unwrap();
    let runs = scratch.path().join("runs");
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(repo().join("assets/canary/demo.canary"))
        .arg("--runs-dir")
        .arg(&runs)
        .env("PATCHDIFF_CONFIG", &config)
        .env("PATCHDIFF_STATE_DIR", scratch.path().join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap();
    let progress = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{progress}");
    assert!(progress.contains("PASSED · 5/5"), "{progress}");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .unwrap();
    assert!(!run.join("store.sqlite").exists(), "the run used SQLite");

    let verify_with = |config: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_patchdiff"));
        command
            .arg("verify")
            .arg(&run)
            .arg("--json")
            .env_remove("PATCHDIFF_DATABASE_URL")
            // A config file that sets nothing, so no platform default file is read.
            .env("PATCHDIFF_CONFIG", scratch.path().join("empty.toml"));
        if let Some(config) = config {
            command.env("PATCHDIFF_CONFIG", config);
        }
        let output = command.output().unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "verify printed no JSON ({e}): {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output.status.code(), report)
    };
    std::fs::write(scratch.path().join("empty.toml"), "").unwrap();

    let (code, report) = verify_with(Some(&config));
    assert_eq!(code, Some(0), "{report:#}");
    let journal = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "journal")
        .unwrap_or_else(|| panic!("no journal check: {report:#}"));
    assert_eq!(journal["ok"], true, "{report:#}");

    let (code, report) = verify_with(None);
    assert_eq!(code, Some(1), "{report:#}");
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report:#}");
    assert_eq!(problems[0]["check"], "journal");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("set PATCHDIFF_DATABASE_URL=postgres://"),
        "{report:#}"
    );
}

//! SPEC V1, V2 (issue 10 item 4): a canary run driven through the real console is sealed at
//! `report`; `patchdiff verify` accepts it untouched and, for one flipped byte in any file of
//! the run (and for one changed journal row in `store.sqlite`), exits non-zero naming the file.

use crate::backends;
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
            // No seal key there: this run is unsigned.
            .env("PATCHDIFF_CONFIG_DIR", runs.path().join("config"))
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
            "signature",
            "digest",
            "files",
            "chain",
            "fixtures",
            "store",
            "journal",
            "receipts",
            "evaluation"
        ]
    );
    // Unsigned, said plainly; the journal digests and the receipts were checked.
    let summary = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .unwrap()["summary"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(summary("signature"), "unsigned");
    assert!(
        summary("journal").ends_with("5 journal digests as sealed"),
        "{report:#}"
    );
    assert!(
        summary("store").contains("is the one manifest.json and journal.json record"),
        "{report:#}"
    );
    let receipts = summary("receipts");
    let checked: u32 = receipts.split(' ').next().unwrap().parse().unwrap();
    assert!(checked >= 10, "{receipts}");
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

/// Re-seals `copy` as someone holding no key would: the sums and the seal recomputed over
/// what the run now holds (a signature left in place is not touched).
fn reseal(copy: &Path) {
    std::fs::remove_file(copy.join("SHA256SUMS")).unwrap();
    std::fs::remove_file(copy.join("manifest.seal")).unwrap();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(copy.join("manifest.json")).unwrap()).unwrap();
    patchdiff::evidence::seal_run(&patchdiff::evidence::RunDir {
        run_id: manifest["run_id"].as_str().unwrap().to_owned(),
        path: copy.to_path_buf(),
    })
    .unwrap();
}

fn problems_of<'a>(report: &'a Value, check: &str) -> Vec<&'a Value> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["check"] == check)
        .collect()
}

/// Issue 22 item 7: a run re-sealed with every wire log, the transcript and the reports
/// deleted (so every digest holds) fails, naming each missing file — the report that listed
/// the steps is gone too, so the full-profile log is required by the manifest `init` wrote.
#[test]
fn a_resealed_run_without_its_wire_logs_transcript_and_reports_names_each() {
    let scratch = tempfile::tempdir().unwrap();
    let copy = copy_of_run(scratch.path());
    let deleted = [
        "full.mcp.jsonl",
        "observed.mcp.jsonl",
        "transcript.jsonl",
        "report.json",
        "report.txt",
        "report.junit.xml",
    ];
    // Another copy loses only one export: the report still records it exported.
    let second = copy_of_run(&scratch.path().join("second"));
    std::fs::remove_file(second.join("export/chess.py")).unwrap();
    reseal(&second);
    let (output, report) = verify(&second, &[]);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    let files = problems_of(&report, "files");
    assert_eq!(files.len(), 1, "{report:#}");
    assert_eq!(files[0]["file"], "export/chess.py");
    assert!(
        files[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("missing: report.json records `chess` exported"),
        "{report:#}"
    );
    for rel in deleted {
        std::fs::remove_file(copy.join(rel)).unwrap();
    }
    reseal(&copy);
    let (output, report) = verify(&copy, &[]);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    assert!(problems_of(&report, "digest").is_empty(), "{report:#}");
    let mut missing: Vec<&str> = problems_of(&report, "files")
        .iter()
        .filter(|p| p["message"].as_str().unwrap().starts_with("missing"))
        .map(|p| p["file"].as_str().unwrap())
        .collect();
    missing.sort();
    // Without report.json nothing says preflight ran, so the observed log is not required
    // by the steps; every other deleted file is.
    let mut expected: Vec<&str> = deleted
        .iter()
        .copied()
        .filter(|f| *f != "observed.mcp.jsonl")
        .collect();
    expected.sort();
    assert_eq!(missing, expected, "{report:#}");
}

/// `line` of a chained log with its `raw` JSON-RPC message changed by `edit`, and every
/// link after it recomputed (a forger re-chaining the log).
fn rewrite_wire_log(path: &Path, mut edit: impl FnMut(&mut Value) -> bool) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut prev = patchdiff::chain::CHAIN_GENESIS.to_owned();
    let mut changed_line = 0;
    for (i, line) in text.lines().enumerate() {
        let mut record: Value = serde_json::from_str(line).unwrap();
        record
            .as_object_mut()
            .unwrap()
            .remove(patchdiff::chain::CHAIN_FIELD);
        if changed_line == 0
            && let Some(raw) = record["raw"].as_str()
            && let Ok(mut message) = serde_json::from_str::<Value>(raw)
            && edit(&mut message)
        {
            record["raw"] = Value::String(message.to_string());
            changed_line = i + 1;
        }
        let written = patchdiff::chain::chained(&prev, &record.to_string());
        prev = patchdiff::chain::line_digest(written.trim_end().as_bytes());
        out.push_str(&written);
    }
    std::fs::write(path, out).unwrap();
    changed_line
}

/// Issue 22 item 7: a receipt in the wire log whose sha256 differs from the journal's (the
/// log re-chained and the run re-sealed, so chains and digests hold) is named with its file
/// and line.
#[test]
fn a_tampered_receipt_in_a_resealed_run_is_named() {
    let scratch = tempfile::tempdir().unwrap();
    let copy = copy_of_run(scratch.path());
    let forged = "0".repeat(64);
    let line = rewrite_wire_log(&copy.join("observed.mcp.jsonl"), |m| {
        let receipt = &mut m["result"]["structuredContent"];
        if receipt["outcome"] == "accepted" {
            receipt["sha256"] = Value::String(forged.clone());
            true
        } else {
            false
        }
    });
    assert!(line > 0, "no accepted receipt in the log");
    reseal(&copy);
    let (output, report) = verify(&copy, &[]);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    assert!(problems_of(&report, "chain").is_empty(), "{report:#}");
    assert!(problems_of(&report, "digest").is_empty(), "{report:#}");
    let receipts = problems_of(&report, "receipts");
    assert_eq!(receipts.len(), 1, "{report:#}");
    assert_eq!(receipts[0]["file"], "observed.mcp.jsonl");
    assert_eq!(receipts[0]["line"], line as u64);
    let message = receipts[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("SHA-256 {forged}")) && message.contains("the journal's edit"),
        "{message}"
    );
}

/// Issue 22 item 7: `report` signs the seal with the operator's key from `key new`; the run
/// verifies with its public key (the printed string, or a file holding it), fails with another
/// key, and once re-sealed (a planted file listed in new sums) fails with its own key too,
/// naming the re-seal even without one.
#[test]
fn a_signed_run_verifies_with_its_public_key_and_fails_with_another() {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("config");
    let key_new = |dir: &Path, force: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_patchdiff"));
        command
            .args(["key", "new"])
            .env("PATCHDIFF_CONFIG_DIR", dir);
        if force {
            command.arg("--force");
        }
        command.output().unwrap()
    };
    let made = key_new(&config, false);
    assert!(made.status.success(), "{made:?}");
    let public = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    assert!(public.starts_with("ed25519:"), "{public}");
    let key_file = config.join("seal-key.pem");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A second `key new` refuses to overwrite it.
    let again = key_new(&config, false);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let other = key_new(&scratch.path().join("other"), false);
    let other_public = String::from_utf8(other.stdout).unwrap().trim().to_owned();

    let runs = scratch.path().join("runs");
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(repo().join("assets/canary/demo.canary"))
        .arg("--runs-dir")
        .arg(&runs)
        .env("PATCHDIFF_STATE_DIR", scratch.path().join("state"))
        .env("PATCHDIFF_CONFIG_DIR", &config)
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap();
    let progress = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{progress}");
    assert!(progress.contains("signed by sha256:"), "{progress}");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .unwrap();
    let signature = |report: &Value| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "signature")
            .unwrap()["summary"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    let (output, report) = verify(&run, &[]);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert!(
        signature(&report).ends_with(", not checked (pass --key)"),
        "{report:#}"
    );
    let (output, report) = verify(&run, &["--key", &public]);
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert!(
        signature(&report).ends_with("signature holds"),
        "{report:#}"
    );
    let public_file = scratch.path().join("operator.pub");
    std::fs::write(&public_file, format!("{public}\n")).unwrap();
    let (output, _) = verify(&run, &["--key", public_file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));

    let (output, report) = verify(&run, &["--key", &other_public]);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    let problems = problems_of(&report, "signature");
    assert_eq!(problems.len(), 1, "{report:#}");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("no signature holds for key"),
        "{report:#}"
    );

    // Re-sealed with an extra file: every digest holds, the signature does not.
    let copy = scratch.path().join("copy").join(run.file_name().unwrap());
    copy_tree(&run, &copy);
    std::fs::write(copy.join("export/extra.js"), b"// planted\n").unwrap();
    reseal(&copy);
    for args in [vec![], vec!["--key", public.as_str()]] {
        let (output, report) = verify(&copy, &args);
        assert_eq!(output.status.code(), Some(1), "{report:#}");
        assert!(problems_of(&report, "digest").is_empty(), "{report:#}");
        let problems = problems_of(&report, "signature");
        assert!(
            problems[0]["message"]
                .as_str()
                .unwrap()
                .contains("re-sealed after it was signed"),
            "{report:#}"
        );
    }
    // A bad --key is a usage error naming what is accepted.
    let (output, _) = {
        let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
            .args(["verify", run.to_str().unwrap(), "--key", "ed25519:AAAA"])
            .output()
            .unwrap();
        (output, ())
    };
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("`ed25519:` followed by the base64"),
        "{output:?}"
    );
}

/// Runs the demo canary with its store on PostgreSQL at `url`; returns the run directory.
fn postgres_run(scratch: &Path, url: &str, name: &str) -> PathBuf {
    let dir = scratch.join(name);
    let runs = dir.join("runs");
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(repo().join("assets/canary/demo.canary"))
        .arg("--runs-dir")
        .arg(&runs)
        .env("PATCHDIFF_DATABASE_URL", url)
        .env("PATCHDIFF_STATE_DIR", dir.join("state"))
        .env("PATCHDIFF_CONFIG_DIR", dir.join("config"))
        .output()
        .unwrap();
    let progress = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{progress}");
    std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .unwrap()
}

fn verify_against(run: &Path, url: &str) -> (Option<i32>, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg(run)
        .arg("--json")
        .env("PATCHDIFF_DATABASE_URL", url)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), report)
}

/// Issue 22 item 7: a run on PostgreSQL verified against another run's database (with its own
/// journal, which replays cleanly against the same exports) fails at the store's identity,
/// naming the database and store id that differ; against its own it verifies, and the
/// manifest records the cluster and database without a secret.
#[test]
fn a_postgres_run_checked_against_another_runs_database_fails() {
    if !backends::postgres_or_skip("a_postgres_run_checked_against_another_runs_database_fails") {
        return;
    }
    let (a, b) = (backends::fresh_database(), backends::fresh_database());
    let scratch = tempfile::tempdir().unwrap();
    let run_a = postgres_run(scratch.path(), &a.url, "a");
    let _run_b = postgres_run(scratch.path(), &b.url, "b");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run_a.join("manifest.json")).unwrap()).unwrap();
    let identity = &manifest["configuration"]["store_identity"];
    assert_eq!(identity["backend"], "postgres", "{identity:#}");
    assert!(
        identity["store_id"].as_str().unwrap().len() == 32,
        "{identity:#}"
    );
    assert!(identity["database_oid"].is_u64(), "{identity:#}");
    assert!(
        !identity.to_string().contains("postgres://"),
        "{identity:#}"
    );

    let (code, report) = verify_against(&run_a, &a.url);
    assert_eq!(code, Some(0), "{report:#}");

    let (code, report) = verify_against(&run_a, &b.url);
    assert_eq!(code, Some(1), "{report:#}");
    let store = problems_of(&report, "store");
    assert_eq!(store.len(), 2, "manifest.json and journal.json: {report:#}");
    let message = store[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("not the run's database: database ")
            && message.contains("store id ")
            && message.contains(identity["store_id"].as_str().unwrap()),
        "{message}"
    );
}

/// Issue 22 item 7: a database made up afterwards with 15 journal entries instead of 20 fails.
/// A copy of the run's database (same store id, another name and oid) is named at the store's
/// identity; the run's own database with its last 5 entries gone keeps its identity and fails
/// at the journal digest the seal recorded, naming the target, the entry counts and both
/// digests.
#[test]
fn a_made_up_database_with_fewer_journal_entries_fails() {
    if !backends::postgres_or_skip("a_made_up_database_with_fewer_journal_entries_fails") {
        return;
    }
    let a = backends::fresh_database();
    let scratch = tempfile::tempdir().unwrap();
    let run = postgres_run(scratch.path(), &a.url, "a");
    let db_name = |url: &str| {
        url.rsplit('/')
            .next()
            .unwrap()
            .split('?')
            .next()
            .unwrap()
            .to_owned()
    };
    let drop_last_five = |url: &str| {
        assert_eq!(
            backends::psql(url, "SELECT count(*) FROM journal").unwrap(),
            "20"
        );
        backends::psql(
            url,
            "DELETE FROM journal WHERE entry_id IN \
             (SELECT entry_id FROM journal ORDER BY entry_id DESC LIMIT 5)",
        )
        .unwrap();
    };
    let copy = backends::fresh_database();
    let admin = backends::server().unwrap().admin_url();
    backends::psql(&admin, &format!("DROP DATABASE {}", db_name(&copy.url))).unwrap();
    backends::psql(
        &admin,
        &format!(
            "CREATE DATABASE {} TEMPLATE {}",
            db_name(&copy.url),
            db_name(&a.url)
        ),
    )
    .unwrap();
    drop_last_five(&copy.url);
    let (code, report) = verify_against(&run, &copy.url);
    assert_eq!(code, Some(1), "{report:#}");
    let store = problems_of(&report, "store");
    assert!(
        store
            .iter()
            .any(|p| p["message"].as_str().unwrap().contains("database oid ")),
        "{report:#}"
    );

    drop_last_five(&a.url);
    let (code, report) = verify_against(&run, &a.url);
    assert_eq!(code, Some(1), "{report:#}");
    assert!(problems_of(&report, "store").is_empty(), "{report:#}");
    let digests: Vec<&str> = problems_of(&report, "journal")
        .iter()
        .filter_map(|p| p["message"].as_str())
        .filter(|m| m.contains("not the journal the run sealed"))
        .collect();
    assert!(!digests.is_empty(), "{report:#}");
    let shortened: u64 = digests
        .iter()
        .map(|m| {
            let held: u64 = m
                .split("holds ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let sealed: u64 = m
                .split("recorded ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            sealed - held
        })
        .sum();
    assert_eq!(shortened, 5, "{digests:#?}");
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

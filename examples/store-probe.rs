//! store-probe: a second OS process for the store's cross-process tests (K3, K5).
//!
//! Not a user tool. `DB` is a SQLite file path or a `postgres://` URL (issue 15: the same
//! cross-process tests run on both backends). Each command opens the database, prints `READY`, and (where it races) waits
//! for one line on stdin before acting, so tests synchronize through pipes, never sleeps.
//!
//! ```text
//! store-probe stream DB TARGET START COUNT   submission i (i = START..START+COUNT) replaces
//!                                            "<<END>>" by "[i]<<END>>" at base_revision i,
//!                                            key "k{i}"; prints "ACK <receipt json>" after each
//! store-probe race-save DB TARGET            waits for GO, submits "a" -> "R" at base 0
//!                                            (key "replica"), saves; prints both results
//! store-probe saves DB TARGET N              waits for GO, saves N times; prints each result
//! store-probe stall-submit DB TARGET         submits "<<END>>" -> "[stalled]<<END>>" at the
//!                                            current revision (key "stalled") with a validator
//!                                            that prints "VALIDATING" and waits for GO; then
//!                                            prints the receipt
//! store-probe agent-side DB TARGET START COUNT RETRY_BASE
//!                                            the agent's writer (R2's SIGKILL races):
//!                                            submission i (i = START..COUNT, key "a{i}")
//!                                            replaces "<<A>>" by "[a{i}]<<A>>" at the current
//!                                            revision — at RETRY_BASE for i = START unless it
//!                                            is "-", so an unknown outcome is retried as the
//!                                            identical submission; prints "TRY i BASE" before
//!                                            and "ACK <receipt json>" after; saves after every
//!                                            fourth ("SAVE <save json>")
//! store-probe replica-side DB TARGET LEASE START COUNT CURSOR SHA RETRY
//!                                            the replica's writer: catches up from CURSOR
//!                                            (content SHA) through the lease's changes, then
//!                                            submission i (key "r{i}") replaces "<<R>>" by
//!                                            "[r{i}]<<R>>" at its cursor; RETRY "1" submits
//!                                            i = START at CURSOR/SHA without catching up;
//!                                            prints "TRY i CURSOR SHA" and "ACK <receipt>"
//! ```

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use patchdiff::store::replica::{ReplicaOperation, ReplicaSubmission};
use patchdiff::store::{OperationRequest, Submission, Validation, open_backend};

/// The lease clock: milliseconds since the Unix epoch (the test acquired the lease on it).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> Result<T, String> {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("argument {i} ({name}) missing or not valid"))
}

fn op(old: &str, new: &str) -> OperationRequest {
    OperationRequest {
        observation_id: None,
        old_text: old.to_owned(),
        new_text: new.to_owned(),
    }
}

fn wait_for_go() {
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

fn run(args: &[String]) -> Result<(), String> {
    let err = |e: patchdiff::store::StoreError| e.to_string();
    let (cmd, db, target) = match args {
        [cmd, db, target, ..] => (cmd.as_str(), Path::new(db), target.as_str()),
        _ => return Err("usage: store-probe stream|race-save|saves DB TARGET …".to_owned()),
    };
    let url = db.to_str().filter(|d| d.contains("://"));
    let store = open_backend(db, url).map_err(err)?;
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| -> Result<(), String> {
        writeln!(out, "{line}")
            .and_then(|_| out.flush())
            .map_err(|e| e.to_string())
    };
    say("READY".to_owned())?;
    match cmd {
        "stream" => {
            let start: u64 = args.get(3).and_then(|s| s.parse().ok()).ok_or("START")?;
            let count: u64 = args.get(4).and_then(|s| s.parse().ok()).ok_or("COUNT")?;
            for i in start..start + count {
                let s = Submission {
                    request_key: format!("k{i}"),
                    base_revision: i,
                    expected_sha256: None,
                    operations: vec![op("<<END>>", &format!("[{i}]<<END>>"))],
                };
                let r = store.submit(target, &s, false).map_err(err)?;
                say(format!(
                    "ACK {}",
                    serde_json::to_string(&r).map_err(|e| e.to_string())?
                ))?;
            }
        }
        "race-save" => {
            wait_for_go();
            let s = Submission {
                request_key: "replica".to_owned(),
                base_revision: 0,
                expected_sha256: None,
                operations: vec![op("a", "R")],
            };
            let r = store.submit(target, &s, false).map_err(err)?;
            say(format!(
                "RECEIPT {}",
                serde_json::to_string(&r).map_err(|e| e.to_string())?
            ))?;
            let saved = store.save(target).map_err(err)?;
            say(format!(
                "SAVE {}",
                serde_json::to_string(&saved).map_err(|e| e.to_string())?
            ))?;
        }
        "saves" => {
            let n: u64 = args.get(3).and_then(|s| s.parse().ok()).ok_or("N")?;
            wait_for_go();
            for _ in 0..n {
                let saved = store.save(target).map_err(err)?;
                say(format!(
                    "SAVE {}",
                    serde_json::to_string(&saved).map_err(|e| e.to_string())?
                ))?;
            }
        }
        "stall-submit" => {
            let base = store.read_target(target).map_err(err)?.revision;
            let s = Submission {
                request_key: "stalled".to_owned(),
                base_revision: base,
                expected_sha256: None,
                operations: vec![op("<<END>>", "[stalled]<<END>>")],
            };
            let stall = |_: &str, _: &str| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "VALIDATING").and_then(|_| out.flush());
                wait_for_go();
                Validation::Passed
            };
            let r = store
                .submit_validated(target, &s, false, &stall)
                .map_err(err)?;
            say(format!(
                "RECEIPT {}",
                serde_json::to_string(&r).map_err(|e| e.to_string())?
            ))?;
        }
        "agent-side" => {
            let start: u64 = arg(args, 3, "START")?;
            let count: u64 = arg(args, 4, "COUNT")?;
            let retry_base: Option<u64> = args.get(5).and_then(|s| s.parse().ok());
            for i in start..count {
                let base = match retry_base.filter(|_| i == start) {
                    Some(b) => b,
                    None => store.read_target(target).map_err(err)?.revision,
                };
                say(format!("TRY {i} {base}"))?;
                let s = Submission {
                    request_key: format!("a{i}"),
                    base_revision: base,
                    expected_sha256: None,
                    operations: vec![op("<<A>>", &format!("[a{i}]<<A>>"))],
                };
                let r = store.submit(target, &s, false).map_err(err)?;
                say(format!(
                    "ACK {}",
                    serde_json::to_string(&r).map_err(|e| e.to_string())?
                ))?;
                if i % 4 == 3 {
                    let saved = store.save(target).map_err(err)?;
                    say(format!(
                        "SAVE {}",
                        serde_json::to_string(&saved).map_err(|e| e.to_string())?
                    ))?;
                }
            }
        }
        "replica-side" => {
            let lease: String = arg(args, 3, "LEASE")?;
            let start: u64 = arg(args, 4, "START")?;
            let count: u64 = arg(args, 5, "COUNT")?;
            let mut cursor: String = arg(args, 6, "CURSOR")?;
            let mut sha: String = arg(args, 7, "SHA")?;
            let retry = args.get(8).is_some_and(|r| r == "1");
            for i in start..count {
                if !(retry && i == start) {
                    loop {
                        let page = store
                            .replica_changes(&lease, target, Some(&cursor), Some(50), &wall_ms)
                            .map_err(err)?;
                        for e in &page.entries {
                            (cursor, sha) = (e.cursor.clone(), e.sha256.clone());
                        }
                        if !page.has_more {
                            break;
                        }
                    }
                }
                say(format!("TRY {i} {cursor} {sha}"))?;
                let s = ReplicaSubmission {
                    target: target.to_owned(),
                    request_key: format!("r{i}"),
                    cursor: cursor.clone(),
                    expected_sha256: sha.clone(),
                    operations: vec![ReplicaOperation {
                        old_text: "<<R>>".to_owned(),
                        new_text: format!("[r{i}]<<R>>"),
                    }],
                };
                let r = store
                    .replica_submit(&lease, &s, &wall_ms, &|_, _| Validation::Passed, None)
                    .map_err(err)?;
                say(format!(
                    "ACK {}",
                    serde_json::to_string(&r).map_err(|e| e.to_string())?
                ))?;
            }
        }
        other => return Err(format!("unknown command {other:?}")),
    }
    say("DONE".to_owned())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("store-probe: {e}");
            ExitCode::FAILURE
        }
    }
}

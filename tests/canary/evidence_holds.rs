//! Issue 22 (items 1–3): evidence that holds. A sealed run is finished (a step after `report`
//! is refused, in scripts before anything runs and in the canary), two processes started from
//! one printed host configuration keep one honest chain, and a disk that is full for a moment
//! during the agent step gives a run that is not PASSED and a `verify` that names the missing
//! records. Real parts throughout: the real `patchdiff` binary and its `patchdiff mcp`
//! children, real SQLite files, and a real full filesystem (a small tmpfs mounted for the test,
//! see `TmpfsMount`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use patchdiff::canary::command::{Command as Step, Host};
use patchdiff::canary::{Canary, CanaryOptions};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn canary_in(runs_root: &Path, database_url: Option<String>) -> Canary {
    Canary::create(CanaryOptions {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_patchdiff")),
        manifest: repo().join("assets/fixtures/manifest.json"),
        runs_root: runs_root.to_path_buf(),
        database_url,
        settings: patchdiff::config::Settings::from_env(),
        step_timeout: patchdiff::canary::steps::deadline::STEP_TIMEOUT,
    })
    .unwrap()
}

/// `patchdiff verify RUN --json`: the report.
fn verify(run: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg(run)
        .arg("--json")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn problems(report: &Value) -> Vec<String> {
    report["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{} {}:{} {}",
                p["check"].as_str().unwrap_or(""),
                p["file"].as_str().unwrap_or(""),
                p["line"],
                p["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

async fn step(canary: &mut Canary, line: &str) -> patchdiff::canary::StepOutcome {
    canary.execute(&Step::parse(line).unwrap()).await
}

#[test]
fn a_script_step_after_report_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("sealed-then-more.canary");
    std::fs::write(&script, "init\nreport\ntarget chess\nlaunch\nstop\n").unwrap();
    let runs = dir.path().join("runs");
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["console", "--script"])
        .arg(&script)
        .arg("--runs-dir")
        .arg(&runs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(".canary:4: `launch` comes after `report` (line 2), which seals the run")
            && stderr.contains(".canary:5: `stop` comes after `report` (line 2)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(".canary:3:"),
        "a view may follow: {stderr}"
    );
    // Refused whole: no run was started.
    assert!(
        std::fs::read_dir(&runs).map_or(true, |mut d| d.next().is_none()),
        "a run directory was created"
    );
}

#[tokio::test]
async fn a_step_after_report_is_refused_and_the_sealed_run_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let mut canary = canary_in(&dir.path().join("runs"), None);
    let plan = repo().join("assets/canary/demo.plan.jsonl");
    for line in [
        "record model=scripted-demo provider=patchdiff reasoning=none".to_owned(),
        "init".to_owned(),
        "launch observed".to_owned(),
        "preflight".to_owned(),
        format!("agent {}", plan.display()),
        "export".to_owned(),
        "inspect".to_owned(),
        "evaluate".to_owned(),
        "report".to_owned(),
    ] {
        let outcome = step(&mut canary, &line).await;
        assert!(outcome.ok, "{line}: {}", outcome.summary);
    }
    let run = canary.run.path.clone();
    // The database was checkpointed and closed: no side file is left, none is sealed.
    for side in ["store.sqlite-wal", "store.sqlite-shm"] {
        assert!(!run.join(side).exists(), "{side} left in the sealed run");
    }
    let sums = std::fs::read_to_string(run.join("SHA256SUMS")).unwrap();
    assert!(!sums.contains("-shm") && !sums.contains("-wal"), "{sums}");
    for line in ["launch", "stop", "init", "export", "report"] {
        let outcome = step(&mut canary, line).await;
        assert!(!outcome.ok, "`{line}` ran on a sealed run");
        assert!(
            outcome.summary.contains("is sealed") && outcome.summary.contains("`new`"),
            "{}",
            outcome.summary
        );
    }
    // Nothing of it reached the run: no process, and the report is the sealed one.
    assert!(canary.observed.is_none() && canary.full.is_none());
    let report = verify(&run);
    assert_eq!(report["ok"], true, "{:#?}", problems(&report));
    // `patchdiff trace -o` refuses a destination inside the sealed run.
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("trace")
        .arg(&run)
        .arg("-o")
        .arg(run.join("trace.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("inside the sealed run"), "{stderr}");
    assert!(!run.join("trace.json").exists());
    assert_eq!(verify(&run)["ok"], true);
}

/// One `patchdiff mcp` started from a printed host configuration, spoken to line by line.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(server: &Value) -> Self {
        let mut cmd = Command::new(server["command"].as_str().unwrap());
        for a in server["args"].as_array().into_iter().flatten() {
            cmd.arg(a.as_str().unwrap());
        }
        cmd.env_clear();
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for (k, v) in server["env"].as_object().unwrap() {
            cmd.env(k, v.as_str().unwrap());
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its answer.
    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    fn close(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn two_processes_on_one_printed_configuration_keep_one_honest_chain() {
    let dir = tempfile::tempdir().unwrap();
    let mut canary = canary_in(&dir.path().join("runs"), None);
    assert!(step(&mut canary, "init").await.ok);
    let config = dir.path().join("mcp.json");
    let printed = canary
        .execute(&Step::HostConfig {
            host: Some(Host::Claude),
            file: Some(config.clone()),
        })
        .await;
    assert!(printed.ok, "{}", printed.summary);
    let config: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    let server = &config["mcpServers"]["patchdiff"];
    // E.g. an agent session plus the README's own `claude mcp list`: both alive at once, their
    // messages interleaved in the one wire log the configuration names.
    let mut a = Server::start(server);
    let mut b = Server::start(server);
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "evidence-holds", "version": "1"}});
    a.call(1, "initialize", init.clone());
    b.call(1, "initialize", init);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    a.send(&initialized);
    b.send(&initialized);
    for id in 2..8 {
        let (first, second) = if id % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let listed = first.call(id, "tools/list", json!({}));
        assert_eq!(listed["result"]["tools"].as_array().map(Vec::len), Some(6));
        let read = second.call(
            id,
            "tools/call",
            json!({"name": "patchdiff_read_target", "arguments": {"target": "chess"}}),
        );
        assert!(read["result"].is_object(), "{read}");
    }
    a.close();
    b.close();
    let wire = canary.run.wire_log("host-observed");
    let bytes = std::fs::read(&wire).unwrap();
    let audit = patchdiff::evidence::audit_log(&bytes);
    assert!(audit.complete(), "{audit:#?}");
    // Both processes' records are in it, each process's `seq` unbroken.
    let pids: std::collections::BTreeSet<u64> = String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["pid"].as_u64())
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    let report = step(&mut canary, "report").await;
    assert!(!report.ok, "nothing was evaluated: {}", report.summary);
    let verified = verify(&canary.run.path);
    assert_eq!(verified["ok"], true, "{:#?}", problems(&verified));
}

/// A small tmpfs mounted over a fresh directory, unmounted on drop. Used because a disk that is
/// full *for a moment* cannot be made with ordinary files: this is a real full filesystem
/// (`ENOSPC` from the kernel), filled with a filler file and freed by deleting it. Needs root
/// (`mount`); the test says so when it cannot mount.
struct TmpfsMount {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TmpfsMount {
    fn new(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs to make a real disk full for a moment and needs \
             root for `mount`: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { path, _dir: dir }
    }

    /// Fills the filesystem with `filler` until the kernel says `ENOSPC`.
    fn fill(&self, filler: &Path) {
        let mut f = std::fs::File::create(filler).unwrap();
        for chunk in [64 * 1024, 4096, 512, 64, 1] {
            let block = vec![0u8; chunk];
            while f.write_all(&block).is_ok() {}
        }
        assert_eq!(
            std::fs::write(self.path.join("probe"), b"x").map_err(|e| e.raw_os_error()),
            Err(Some(28)),
            "the disk is full"
        );
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).output();
    }
}

#[tokio::test]
async fn a_disk_full_for_a_moment_during_the_agent_step_is_named_and_the_run_does_not_pass() {
    let disk = TmpfsMount::new("16m");
    // The runs live on the small disk; the store (like the PostgreSQL) lives elsewhere,
    // so the edits keep being accepted while the evidence cannot be written.
    let elsewhere = tempfile::tempdir().unwrap();
    let database = elsewhere.path().join("pd.sqlite");
    let mut canary = canary_in(
        &disk.path.join("runs"),
        Some(format!("sqlite://{}", database.display())),
    );
    for line in [
        "record model=scripted-demo provider=patchdiff reasoning=none",
        "init",
        "launch observed",
        "preflight",
    ] {
        let outcome = step(&mut canary, line).await;
        assert!(outcome.ok, "{line}: {}", outcome.summary);
    }
    let filler = disk.path.join("filler");
    disk.fill(&filler);
    let plan = repo().join("assets/canary/demo.plan.jsonl");
    let agent = Step::parse(&format!("agent {}", plan.display())).unwrap();
    // Free the disk once the store shows two accepted submissions: synchronised on what the
    // observed process did, not on time.
    let free = async {
        let store = patchdiff::store::SqliteStore::open(&database).unwrap();
        use patchdiff::store::EditStore;
        loop {
            let accepted: u64 = store
                .list_targets()
                .unwrap()
                .iter()
                .map(|t| t.accepted)
                .sum();
            if accepted >= 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        std::fs::remove_file(&filler).unwrap();
    };
    let (outcome, ()) = tokio::join!(canary.execute(&agent), free);
    assert!(
        outcome.ok,
        "the agent step itself finishes: {}",
        outcome.summary
    );
    for line in ["export", "inspect", "evaluate"] {
        step(&mut canary, line).await;
    }
    let report = step(&mut canary, "report").await;
    assert!(
        !report.ok,
        "a run that lost evidence passed: {}",
        report.summary
    );
    assert!(
        report.summary.contains("evidence incomplete")
            && report.summary.contains("observed.mcp.jsonl")
            && report.summary.contains("missing"),
        "{}",
        report.summary
    );
    let text = std::fs::read_to_string(canary.run.report("txt")).unwrap();
    assert!(
        text.contains("FAILED") && text.contains("evidence incomplete"),
        "{text}"
    );
    let verified = verify(&canary.run.path);
    assert_eq!(verified["ok"], false);
    let found = problems(&verified);
    assert!(
        found.iter().any(|p| p.starts_with("gap observed.mcp.jsonl")
            && p.contains(" of pid ")
            && p.contains("missing (a failed write: No space left on device")),
        "{found:#?}"
    );
    // Only a real change is called a change: nothing here was edited.
    assert!(
        !found.iter().any(|p| p.contains("was changed")),
        "{found:#?}"
    );
}

#[tokio::test]
async fn after_a_failed_step_the_report_rows_come_from_the_store() {
    // Issue 22 item 5: the report read `ver 0 rev 0 acc/rej 0/0` after a failed agent step
    // although the store held saved versions and the submissions.
    let dir = tempfile::tempdir().unwrap();
    let mut canary = canary_in(&dir.path().join("runs"), None);
    let plan = repo().join("assets/canary/demo.plan.jsonl");
    for line in [
        "init".to_owned(),
        "launch observed".to_owned(),
        "preflight".to_owned(),
        format!("agent {}", plan.display()),
    ] {
        let outcome = step(&mut canary, &line).await;
        assert!(outcome.ok, "{line}: {}", outcome.summary);
    }
    let missing = dir.path().join("missing.plan.jsonl");
    let failed = step(&mut canary, &format!("agent {}", missing.display())).await;
    assert!(!failed.ok);
    let report = step(&mut canary, "report").await;
    assert!(!report.ok);
    let json: Value =
        serde_json::from_slice(&std::fs::read(canary.run.report("json")).unwrap()).unwrap();
    let targets = json["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 5);
    for t in targets {
        assert!(
            t["version"].as_u64() >= Some(1) && t["accepted"].as_u64() >= Some(1),
            "{t}"
        );
    }
    assert_eq!(verify(&canary.run.path)["ok"], true);
}

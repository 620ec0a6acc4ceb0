//! R1–R4 through `patchdiff replica sync DIR`, the reference replica integration, as the real
//! binary with real files and its own full-profile `patchdiff mcp` child: it mirrors leased
//! targets into DIR under escaped names, a file edit becomes a replica submission with a
//! receipt, the agent's edit comes back into the file, a binary write is refused naming the file
//! with nothing applied (R4), a change conflicting with the agent's is rejected and kept beside
//! the file, and the long-running mode syncs until SIGTERM, then releases its
//! lease and exits 0. On SQLite and PostgreSQL (`tests/backends`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::backends::{Backend, Scratch};
use crate::mcp::*;
use serde_json::{Value, json};

const CALC: &str =
    "function add(a, b) {\n  return a + b;\n}\n\nfunction sub(a, b) {\n  return a - b;\n}\n";
const HOSTILE: &str = "../escape/me.js";

fn env_on(b: Backend) -> (Scratch, TestEnv) {
    let scratch = Scratch::new(b);
    let env = TestEnv::with_database_url(scratch.postgres_url().map(str::to_owned));
    (scratch, env)
}

/// The environment of the sync process: the test world's, with strict observation off (an
/// agent's plain submission needs no observation then; replica submissions never do).
fn sync_vars(env: &TestEnv) -> BTreeMap<String, String> {
    let mut v = env.vars("full");
    v.insert("PATCHDIFF_STRICT_OBSERVATION_MODE".into(), "0".into());
    v
}

fn sync_command(env: &TestEnv, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(exe());
    cmd.args(["replica", "sync"])
        .arg(dir)
        .args(args)
        .env_clear();
    for k in ["PATH", "HOME", "LANG"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.envs(sync_vars(env));
    cmd
}

/// One `replica sync … --once --json` pass; its output.
fn sync_once(env: &TestEnv, dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--once", "--json"];
    all.extend_from_slice(args);
    sync_command(env, dir, &all)
        .output()
        .expect("run patchdiff replica sync")
}

/// The JSON event lines of a sync's stdout.
fn events(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn said(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Initializes `target` (a hostile name is fine: the fixture file gets a safe one).
async fn init(env: &TestEnv, full: &Mcp, n: usize, target: &str, content: &str) {
    let (fixture, sha) = env.fixture(&format!("fixture-{n}.js"), content);
    full.ok(
        "patchdiff_init_target",
        json!({"target": target, "fixture": fixture, "sha256": sha, "language": "javascript"}),
    )
    .await;
}

async fn content_of(full: &Mcp, target: &str) -> Value {
    full.ok("patchdiff_read_target", json!({"target": target}))
        .await
}

/// The agent's edit: a plain submission at the current revision (strict observation off).
async fn agent_edit(full: &Mcp, target: &str, key: &str, old: &str, new: &str) -> Value {
    let at = content_of(full, target).await;
    full.ok(
        "patchdiff_submit_observed_operations",
        json!({"target": target, "request_key": key, "base_revision": at["revision"],
               "operations": [{"old_text": old, "new_text": new}]}),
    )
    .await
}

fn poll_until(what: &str, deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lease_id_of(dir: &Path) -> String {
    let state = std::fs::read(dir.join(".patchdiff-sync/state.json")).expect("state file");
    let state: Value = serde_json::from_slice(&state).expect("state JSON");
    state["lease_id"].as_str().expect("lease id").to_owned()
}

async fn once_mode_mirrors_submits_catches_up_and_refuses_binary(b: Backend) {
    let (_scratch, env) = env_on(b);
    let full = Mcp::launch(&sync_vars(&env)).await;
    init(&env, &full, 1, "calc.js", CALC).await;
    init(&env, &full, 2, HOSTILE, "let x = 1;\n").await;
    let dir = env.path().join("mirror");

    // R1: lease both targets and mirror them, the hostile name escaped inside DIR.
    let out = sync_once(&env, &dir, &["--lease", "calc.js", "--lease", HOSTILE]);
    assert!(out.status.success(), "{}", said(&out));
    let calc = dir.join("calc.js");
    assert_eq!(std::fs::read_to_string(&calc).unwrap(), CALC);
    let escaped = dir.join("%2E.%2Fescape%2Fme.js");
    assert_eq!(std::fs::read_to_string(&escaped).unwrap(), "let x = 1;\n");
    assert!(!env.path().join("escape").exists(), "nothing outside DIR");
    let mirrored = events(&out.stdout);
    assert!(
        mirrored.iter().any(|e| e["event"] == "lease"),
        "{mirrored:?}"
    );
    let lease_id = lease_id_of(&dir);

    // R2: an edit in DIR becomes a replica submission with a receipt; the next pass resumes
    // the lease DIR keeps.
    let edited = CALC.replace("return a + b;", "return a + b + 0;");
    std::fs::write(&calc, &edited).unwrap();
    let out = sync_once(&env, &dir, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let evs = events(&out.stdout);
    assert!(
        evs.iter()
            .any(|e| e["event"] == "lease" && e["resumed"] == true && e["lease_id"] == lease_id),
        "{evs:?}"
    );
    let submitted: Vec<&Value> = evs.iter().filter(|e| e["event"] == "submitted").collect();
    assert_eq!(submitted.len(), 1, "{evs:?}");
    let receipt = &submitted[0]["receipt"];
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    assert_eq!(submitted[0]["target"], "calc.js");
    let key = receipt["request_key"].as_str().unwrap();
    assert!(key.starts_with("replica-sync-"), "{key}");
    let canonical = content_of(&full, "calc.js").await;
    assert_eq!(canonical["content"], edited.as_str());
    assert_eq!(canonical["revision"], receipt["revision"]);
    let journal = full
        .ok("patchdiff_replay", json!({"target": "calc.js"}))
        .await;
    let keys: Vec<&Value> = journal["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["request_key"])
        .collect();
    assert!(keys.contains(&&json!(key)), "{journal}");

    // R3: the agent's edit comes back into the file beside the replica's.
    let agent = agent_edit(
        &full,
        "calc.js",
        "agent-1",
        "return a - b;",
        "return b - a;",
    )
    .await;
    assert_eq!(agent["outcome"], "accepted", "{agent}");
    let out = sync_once(&env, &dir, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let both = edited.replace("return a - b;", "return b - a;");
    assert_eq!(std::fs::read_to_string(&calc).unwrap(), both);
    assert_eq!(content_of(&full, "calc.js").await["content"], both.as_str());

    // R4: a binary write is refused naming the file; nothing is applied or written over it.
    let before = content_of(&full, "calc.js").await;
    let binary = b"\x7fELF\x00\x01\xff\xfe".to_vec();
    std::fs::write(&calc, &binary).unwrap();
    let out = sync_once(&env, &dir, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let refused: Vec<Value> = events(&out.stdout)
        .into_iter()
        .filter(|e| e["event"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "{}", said(&out));
    assert_eq!(refused[0]["file"], calc.display().to_string());
    assert_eq!(refused[0]["target"], "calc.js");
    assert!(
        refused[0]["reason"].as_str().unwrap().contains("UTF-8"),
        "{refused:?}"
    );
    assert_eq!(
        content_of(&full, "calc.js").await,
        before,
        "nothing applied"
    );
    assert_eq!(std::fs::read(&calc).unwrap(), binary, "the file is left");
    // The text form names the file too.
    let out = sync_command(&env, &dir, &["--once"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{}: refused", calc.display())),
        "{text}"
    );

    // Restored text syncs again, under the same lease.
    std::fs::write(&calc, &both).unwrap();
    let out = sync_once(&env, &dir, &["--release"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(events(&out.stdout).iter().any(|e| e["event"] == "released"));
    assert_eq!(lease_id_of(&dir), lease_id);
    full.stop().await;
}

/// A store on `b` with `calc.js` (CALC), its full-profile MCP process, and `calc.js` leased and
/// mirrored into the directory `name` by one `--once` sync.
async fn calc_mirrored(b: Backend, name: &str) -> (Scratch, TestEnv, Mcp, PathBuf) {
    let (scratch, env) = env_on(b);
    let full = Mcp::launch(&sync_vars(&env)).await;
    init(&env, &full, 1, "calc.js", CALC).await;
    let dir = env.path().join(name);
    let out = sync_once(&env, &dir, &["--lease", "calc.js"]);
    assert!(out.status.success(), "{}", said(&out));
    (scratch, env, full, dir)
}

async fn an_unknown_outcome_is_retried_by_its_key_and_never_applied_twice(b: Backend) {
    let (_scratch, env, full, dir) = calc_mirrored(b, "mirror").await;
    // A sync that sent its submission and stopped before the answer: the submission is in the
    // state file, and the server applied it.
    let state_path = dir.join(".patchdiff-sync/state.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    let t = state["targets"][0].clone();
    let edited = CALC.replace("a + b", "b + a");
    let pending = json!({
        "request_key": "replica-sync-lost-answer",
        "cursor": t["cursor"], "expected_sha256": t["sha256"],
        "operations": [{"old_text": "return a + b;", "new_text": "return b + a;"}],
        "new_sha256": sha256_hex(edited.as_bytes()),
    });
    let mut submit = pending.clone();
    let obj = submit.as_object_mut().unwrap();
    obj.remove("new_sha256");
    obj.insert("lease_id".into(), state["lease_id"].clone());
    obj.insert("target".into(), json!("calc.js"));
    let applied = full.ok("patchdiff_replica_submit", submit).await;
    assert_eq!(applied["outcome"], "accepted");
    state["targets"][0]["pending"] = pending;
    std::fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
    std::fs::write(dir.join("calc.js"), &edited).unwrap();

    // R3: the next sync retries it by key and learns the stored receipt: applied once.
    let out = sync_once(&env, &dir, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let evs = events(&out.stdout);
    let submitted: Vec<&Value> = evs.iter().filter(|e| e["event"] == "submitted").collect();
    assert_eq!(submitted.len(), 1, "{evs:?}");
    assert_eq!(submitted[0]["receipt"], applied, "the stored receipt");
    let canonical = content_of(&full, "calc.js").await;
    assert_eq!(canonical["content"], edited.as_str());
    assert_eq!(canonical["revision"], applied["revision"], "applied once");
    assert_eq!(
        std::fs::read_to_string(dir.join("calc.js")).unwrap(),
        edited
    );
    full.stop().await;
}

async fn long_running_mode_syncs_until_sigterm_then_releases_its_lease(b: Backend) {
    let (_scratch, env) = env_on(b);
    let full = Mcp::launch(&sync_vars(&env)).await;
    init(&env, &full, 1, "calc.js", CALC).await;
    let dir = env.path().join("mirror");
    let log = env.path().join("sync.out");
    let mut child = sync_command(
        &env,
        &dir,
        &[
            "--lease",
            "calc.js",
            "--interval-ms",
            "100",
            "--ttl-ms",
            "2000",
            "--json",
        ],
    )
    .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
    .stderr(Stdio::from(
        std::fs::File::create(env.path().join("sync.err")).unwrap(),
    ))
    .spawn()
    .expect("start the sync");
    let calc: PathBuf = dir.join("calc.js");
    poll_until("the mirror", Duration::from_secs(60), || {
        std::fs::read_to_string(&calc).is_ok_and(|c| c == CALC)
    });
    // One sync per directory: a second one is refused while this one runs.
    let second = sync_once(&env, &dir, &[]);
    assert_eq!(second.status.code(), Some(1), "{}", said(&second));
    assert!(
        said(&second).contains("another `patchdiff replica sync` is syncing"),
        "{}",
        said(&second)
    );

    // R2: a file change reaches the canonical target while the sync runs.
    let edited = CALC.replace("return a + b;", "return a + b + 1;");
    std::fs::write(&calc, &edited).unwrap();
    let start = Instant::now();
    loop {
        if content_of(&full, "calc.js").await["content"] == edited.as_str() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the edit never reached the target"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // R3: the agent's edit reaches the file.
    agent_edit(
        &full,
        "calc.js",
        "agent-1",
        "return a - b;",
        "return a - b - 1;",
    )
    .await;
    let both = edited.replace("return a - b;", "return a - b - 1;");
    poll_until(
        "the agent's edit in the file",
        Duration::from_secs(60),
        || std::fs::read_to_string(&calc).is_ok_and(|c| c == both),
    );

    // R1: renewed before expiry, the 2 s lease outlives its first expiry: three renewals (at
    // least 2.7 s), then one more edit still goes through.
    let renewals = || {
        std::fs::read(&log)
            .map(|b| {
                events(&b)
                    .iter()
                    .filter(|e| e["event"] == "renewed")
                    .count()
            })
            .unwrap_or(0)
    };
    poll_until("three renewals", Duration::from_secs(60), || {
        renewals() >= 3
    });
    let last = both.replace("return a + b + 1;", "return a + b + 2;");
    std::fs::write(&calc, &last).unwrap();
    let start = Instant::now();
    while content_of(&full, "calc.js").await["content"] != last.as_str() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the edit after the renewals never reached the target"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // SIGTERM: the pass finishes, the lease is released, exit 0.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut status = None;
    poll_until("the sync's exit", Duration::from_secs(30), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let out = std::fs::read(&log).unwrap();
    assert_eq!(
        status.unwrap().code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert!(events(&out).iter().any(|e| e["event"] == "released"));
    let lease_id = lease_id_of(&dir);
    let renew = full
        .call(
            "patchdiff_replica_renew",
            json!({"lease_id": lease_id, "ttl_ms": 60000}),
        )
        .await
        .unwrap();
    let body = renew.structured_content.unwrap();
    assert_eq!(body["error"]["code"], "LEASE_RELEASED", "{body}");
    let again = full
        .ok(
            "patchdiff_replica_acquire",
            json!({"integration": "next", "targets": ["calc.js"], "ttl_ms": 60000}),
        )
        .await;
    assert_eq!(again["targets"][0]["content"], last.as_str());
    full.stop().await;
}

async fn a_conflicting_change_is_rejected_and_kept_beside_the_file(b: Backend) {
    let (_scratch, env, full, dir) = calc_mirrored(b, "mirror").await;
    let calc = dir.join("calc.js");
    // Both writers change the same expression: the replica's edit, transformed over the
    // agent's, conflicts with it (R2).
    let local = CALC.replace("a + b", "a * b");
    std::fs::write(&calc, &local).unwrap();
    let agent = agent_edit(
        &full,
        "calc.js",
        "agent-1",
        "return a + b;",
        "return a + b + 0;",
    )
    .await;
    assert_eq!(agent["outcome"], "accepted", "{agent}");
    let out = sync_once(&env, &dir, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let evs = events(&out.stdout);
    let submitted: Vec<&Value> = evs.iter().filter(|e| e["event"] == "submitted").collect();
    assert_eq!(submitted.len(), 1, "{evs:?}");
    assert_eq!(submitted[0]["receipt"]["outcome"], "rejected", "{evs:?}");
    // The agent's acknowledged edit stands; the local change is kept, not lost.
    let canonical = CALC.replace("return a + b;", "return a + b + 0;");
    assert_eq!(
        content_of(&full, "calc.js").await["content"],
        canonical.as_str()
    );
    assert_eq!(std::fs::read_to_string(&calc).unwrap(), canonical);
    assert_eq!(
        std::fs::read_to_string(dir.join("calc.js~rejected")).unwrap(),
        local
    );
    assert!(evs.iter().any(|e| e["event"] == "kept_aside"), "{evs:?}");
    full.stop().await;
}

async fn a_live_lease_is_taken_over_by_id_into_a_new_directory(b: Backend) {
    let (_scratch, env, full, first) = calc_mirrored(b, "first").await;
    let lease_id = lease_id_of(&first);
    agent_edit(
        &full,
        "calc.js",
        "agent-1",
        "return a - b;",
        "return b - a;",
    )
    .await;
    // R1: another directory takes the lease over by id and mirrors the current content.
    let second = env.path().join("second");
    let out = sync_once(&env, &second, &["--lease-id", &lease_id]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        events(&out.stdout)
            .iter()
            .any(|e| e["event"] == "lease" && e["taken_over"] == true),
        "{}",
        said(&out)
    );
    let now = CALC.replace("return a - b;", "return b - a;");
    assert_eq!(
        std::fs::read_to_string(second.join("calc.js")).unwrap(),
        now
    );
    assert_eq!(lease_id_of(&second), lease_id);
    // Its cursor is good: an edit there is submitted and accepted under the same lease.
    let edited = now.replace("return a + b;", "return a + b + 2;");
    std::fs::write(second.join("calc.js"), &edited).unwrap();
    let out = sync_once(&env, &second, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        content_of(&full, "calc.js").await["content"],
        edited.as_str()
    );
    // An unknown id is refused and nothing is mirrored.
    let third = env.path().join("third");
    let out = sync_once(&env, &third, &["--lease-id", "lease-unknown"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("UNKNOWN_LEASE"),
        "{}",
        said(&out)
    );
    assert!(!third.join("calc.js").exists());
    full.stop().await;
}

backend_tokio_tests!(
    once_mode_mirrors_submits_catches_up_and_refuses_binary,
    an_unknown_outcome_is_retried_by_its_key_and_never_applied_twice,
    a_conflicting_change_is_rejected_and_kept_beside_the_file,
    a_live_lease_is_taken_over_by_id_into_a_new_directory,
    long_running_mode_syncs_until_sigterm_then_releases_its_lease,
);

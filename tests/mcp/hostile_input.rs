//! Issue 12: hostile and broken input against the real `patchdiff mcp` binary — no foreign file
//! touched, fixtures are bounded regular files read off the async runtime, startup refuses what
//! it cannot honour. Each input here is one the attack run found.
//!
//! Some cases need root (a file owned by another user, a device node); they check their
//! precondition and say so when skipped.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::mcp::*;
use patchdiff::telemetry::Recorder;
use serde_json::{Value, json};

/// A guard against a hang, not a synchronization: each call below answers in milliseconds.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A text file that belongs to someone else: uid/gid 65534 (`nobody`), mode 0644.
fn foreign_file(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    nix::unistd::chown(
        path,
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .expect("chown");
}

/// Runs `patchdiff mcp` with `vars` and stdin closed; returns (exit code, stderr).
fn run_mcp(vars: &std::collections::BTreeMap<String, String>) -> (Option<i32>, String) {
    let out = std::process::Command::new(exe())
        .arg("mcp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(vars)
        .stdin(Stdio::null())
        .output()
        .expect("run patchdiff mcp");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn call_in_time(mcp: &Mcp, tool: &str, args: Value) -> rmcp::model::CallToolResult {
    tokio::time::timeout(ANSWER_WITHIN, mcp.call(tool, args))
        .await
        .unwrap_or_else(|_| panic!("{tool} got no answer within {ANSWER_WITHIN:?}"))
        .unwrap_or_else(|e| panic!("{tool}: JSON-RPC error {e:?}"))
}

fn error_code(r: &rmcp::model::CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected an isError result: {r:?}");
    r.structured_content.as_ref().expect("structured")["error"]["code"]
        .as_str()
        .expect("code")
        .to_owned()
}

fn error_message(r: &rmcp::model::CallToolResult) -> String {
    r.structured_content.as_ref().expect("structured")["error"]["message"]
        .as_str()
        .expect("message")
        .to_owned()
}

// ---- 1. never touch a file we do not own ----

#[test]
fn perf_events_through_a_symlink_leave_the_linked_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs.conf");
    std::fs::write(&theirs, "setting=1\n").unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.path().join("perf.jsonl");
    std::os::unix::fs::symlink(&theirs, &link).unwrap();
    let (rec, status) = Recorder::configure(Some(&link), Some("0"));
    assert!(!status.valid && !rec.is_recording());
    assert_eq!(status.invalid_reason.as_deref(), Some("symlink"));
    rec.record(patchdiff::telemetry::PerfEvent::point("worker_ready"));
    assert_eq!(mode(&theirs), 0o644);
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "setting=1\n");
}

#[test]
fn perf_events_naming_another_users_file_or_a_device_change_nothing() {
    if !is_root() {
        eprintln!("skipped: needs root to create another user's file and a device node");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign.jsonl");
    foreign_file(&foreign, "theirs\n");
    let (_, status) = Recorder::configure(Some(&foreign), Some("0"));
    assert_eq!(status.invalid_reason.as_deref(), Some("not_owned_by_us"));
    assert_eq!(mode(&foreign), 0o644);
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "theirs\n");
    assert_eq!(std::fs::metadata(&foreign).unwrap().uid(), 65534);

    // A private copy of /dev/null (char 1:3): as root it used to become 0600 and get JSON.
    let null = dir.path().join("null");
    nix::sys::stat::mknod(
        &null,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .expect("mknod");
    std::fs::set_permissions(&null, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (_, status) = Recorder::configure(Some(&null), None);
    assert_eq!(status.invalid_reason.as_deref(), Some("not_a_regular_file"));
    assert_eq!(mode(&null), 0o666);
}

#[tokio::test]
async fn invalid_telemetry_settings_print_one_warning_line_and_still_serve() {
    let env = TestEnv::new();
    let invalid_memory = env.path().join("invalid-memory.perf.jsonl");
    for (events, memory, says) in [
        ("relative/perf.jsonl", "1", "relative"),
        (env.path().to_str().unwrap(), "1", "directory"),
        (
            invalid_memory.to_str().unwrap(),
            "yes",
            "PATCHDIFF_PERF_MEMORY",
        ),
    ] {
        let stderr_path = env.path().join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut vars = env.vars("workspace");
        vars.insert("PATCHDIFF_PERF_EVENTS".into(), events.into());
        vars.insert("PATCHDIFF_PERF_MEMORY".into(), memory.into());
        let mcp = Mcp::launch_with_stderr(&vars, Stdio::from(stderr)).await;
        // Still serving: a domain error is an answer.
        let r = call_in_time(&mcp, "patchdiff_replay", json!({"target": "none"})).await;
        assert_eq!(error_code(&r), "UNKNOWN_TARGET");
        mcp.stop().await;
        let text = std::fs::read_to_string(&stderr_path).unwrap();
        let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "{events} {memory}: {text}");
        assert!(warnings[0].contains(says), "{warnings:?}");
    }
    // T2/T3: telemetry is invalid, so the events file holds the status receipt saying so and
    // nothing else; no memory file is created.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&invalid_memory)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0]
            .to_string()
            .contains("invalid_memory_configuration"),
        "{lines:?}"
    );
    assert!(!Path::new(&format!("{}.memory.jsonl", invalid_memory.display())).exists());
}

#[test]
fn a_database_url_naming_a_text_file_is_refused_before_any_change() {
    let env = TestEnv::new();
    let notes = env.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n").unwrap();
    std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut vars = env.vars("workspace");
    vars.insert(
        "PATCHDIFF_DATABASE_URL".into(),
        format!("sqlite://{}", notes.display()),
    );
    let (code, stderr) = run_mcp(&vars);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("notes.txt"), "{stderr}");
    assert_eq!(mode(&notes), 0o644, "refused only after a chmod: {stderr}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
}

#[test]
fn a_database_owned_by_another_user_is_refused_untouched() {
    if !is_root() {
        eprintln!("skipped: needs root to create another user's file");
        return;
    }
    let env = TestEnv::new();
    let theirs = env.path().join("theirs.sqlite");
    foreign_file(&theirs, "their text\n");
    let mut vars = env.vars("workspace");
    vars.insert(
        "PATCHDIFF_DATABASE_URL".into(),
        format!("sqlite://{}", theirs.display()),
    );
    let (code, stderr) = run_mcp(&vars);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("owned by uid 65534"), "{stderr}");
    assert_eq!(mode(&theirs), 0o644);
    // A symlink to our own file is refused too.
    let ours = env.path().join("ours.sqlite");
    std::fs::write(&ours, "").unwrap();
    let link = env.path().join("link.sqlite");
    std::os::unix::fs::symlink(&ours, &link).unwrap();
    vars.insert(
        "PATCHDIFF_DATABASE_URL".into(),
        format!("sqlite://{}", link.display()),
    );
    let (code, stderr) = run_mcp(&vars);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("symbolic link"), "{stderr}");
}

#[tokio::test]
async fn the_default_data_directory_is_created_0700() {
    let env = TestEnv::new();
    let mut vars = env.vars("workspace");
    vars.remove("PATCHDIFF_DATABASE_URL");
    let data = env.path().join("data/deeper");
    vars.insert("PATCHDIFF_DATA_DIR".into(), data.display().to_string());
    let mcp = Mcp::launch(&vars).await;
    mcp.stop().await;
    assert_eq!(mode(&env.path().join("data")), 0o700);
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("patchdiff.sqlite")), 0o600);
}

#[tokio::test]
async fn export_refuses_sidecar_names_and_the_stores_own_directory() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let full = Mcp::launch(&env.vars("full")).await;
    full.ok("patchdiff_save", json!({"target": "calendar"}))
        .await;
    let elsewhere = env.path().join("exports");
    for dest in [
        env.path().join("copy.js"),
        elsewhere.join("pd.sqlite-journal"),
        elsewhere.join("x-wal"),
        elsewhere.join("x-shm"),
    ] {
        let r = call_in_time(
            &full,
            "patchdiff_export_target",
            json!({"target": "calendar", "dest": dest}),
        )
        .await;
        assert_eq!(error_code(&r), "INVALID_DEST", "{}", dest.display());
        assert!(!dest.exists());
    }
    let dest = elsewhere.join("deep/calendar.js");
    full.ok(
        "patchdiff_export_target",
        json!({"target": "calendar", "dest": dest}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), CALENDAR_JS);
    assert_eq!(mode(&elsewhere), 0o700);
    assert_eq!(mode(&elsewhere.join("deep")), 0o700);
    full.stop().await;
}

// ---- 2. fixtures are regular, bounded files read off the async runtime ----

fn init_args(target: &str, fixture: impl AsRef<Path>) -> Value {
    json!({"target": target, "fixture": fixture.as_ref(), "sha256": "0".repeat(64), "language": "javascript"})
}

#[tokio::test]
async fn fifo_fixtures_are_refused_and_never_freeze_the_server() {
    let env = TestEnv::new();
    let fifo = env.path().join("fixture.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let full = Mcp::launch(&env.vars("full")).await;
    // 21 at once froze the whole server (blocking reads on 3 runtime threads).
    let calls = (0..21).map(|i| {
        let full = &full;
        let fifo = fifo.clone();
        async move {
            call_in_time(
                full,
                "patchdiff_init_target",
                init_args(&format!("t{i}"), fifo),
            )
            .await
        }
    });
    for r in futures::future::join_all(calls).await {
        assert_eq!(error_code(&r), "FIXTURE_UNREADABLE");
        assert!(error_message(&r).contains("FIFO"), "{}", error_message(&r));
    }
    let r = call_in_time(&full, "patchdiff_read_target", json!({"target": "t0"})).await;
    assert_eq!(error_code(&r), "UNKNOWN_TARGET");
    full.stop().await;
}

#[tokio::test]
async fn the_servers_own_stdin_is_not_a_fixture() {
    let env = TestEnv::new();
    let full = Mcp::launch(&env.vars("full")).await;
    for path in ["/dev/stdin", "/proc/self/fd/0"] {
        let r = call_in_time(&full, "patchdiff_init_target", init_args("t", path)).await;
        assert_eq!(error_code(&r), "FIXTURE_UNREADABLE", "{path}");
        // The next request is answered: the MCP stream was not swallowed.
        let r = call_in_time(&full, "patchdiff_read_target", json!({"target": "t"})).await;
        assert_eq!(error_code(&r), "UNKNOWN_TARGET", "{path}");
    }
    full.stop().await;
}

#[tokio::test]
async fn a_sparse_two_gigabyte_fixture_is_refused_by_size_not_read() {
    let env = TestEnv::new();
    let big = env.path().join("big.js");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2 * 1024 * 1024 * 1024)
        .unwrap();
    let full = Mcp::launch(&env.vars("full")).await;
    let r = call_in_time(&full, "patchdiff_init_target", init_args("big", &big)).await;
    assert_eq!(error_code(&r), "FIXTURE_UNREADABLE");
    assert!(
        error_message(&r).contains("over the limit"),
        "{}",
        error_message(&r)
    );
    // The server read nothing like 2 GB: its peak RSS stays far below it.
    let hwm = std::fs::read_to_string(format!("/proc/{}/status", full.pid))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
        .unwrap();
    let kb: u64 = hwm.trim_end_matches(" kB").trim().parse().unwrap();
    assert!(kb < 512 * 1024, "peak RSS {kb} kB");
    full.stop().await;
}

// ---- 4. no startup panics, no silent misconfiguration ----

#[test]
fn startup_refuses_out_of_range_timeouts_bad_node_and_literal_url_characters() {
    let env = TestEnv::new();
    let data_with_x = env.path().join("not-node");
    std::fs::write(&data_with_x, "just text\n").unwrap();
    std::fs::set_permissions(&data_with_x, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = env.database();
    let cases: Vec<(&str, String)> = vec![
        // Passed validation, then panicked in rusqlite's busy timeout (exit 101).
        ("PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS", "2147468648".into()),
        ("PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS", "86400001".into()),
        // Accepted as 0 ms: every discovery then failed.
        ("PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS", "0.5".into()),
        ("PATCHDIFF_NODE_BINARY", data_with_x.display().to_string()),
        (
            "PATCHDIFF_DATABASE_URL",
            format!("sqlite://{}#x", db.display()),
        ),
        (
            "PATCHDIFF_DATABASE_URL",
            format!("sqlite://{}%20x", db.display()),
        ),
        (
            "PATCHDIFF_DATABASE_URL",
            format!("sqlite://{}/../pd.sqlite", env.path().display()),
        ),
    ];
    for profile in ["observed", "workspace"] {
        for (var, value) in &cases {
            let mut vars = env.vars(profile);
            vars.insert((*var).into(), value.clone());
            let (code, stderr) = run_mcp(&vars);
            assert_ne!(code, Some(0), "{var}={value} started ({profile})");
            assert_ne!(code, Some(101), "{var}={value} panicked: {stderr}");
            assert!(
                stderr.contains(var) && stderr.contains("accepted"),
                "{var}={value}: {stderr}"
            );
        }
    }
    assert!(!PathBuf::from(format!("{}#x", db.display())).exists());
}

#[tokio::test]
async fn target_names_with_control_characters_are_refused() {
    let env = TestEnv::new();
    let (fixture, sha) = env.fixture("t.js", CALENDAR_JS);
    let full = Mcp::launch(&env.vars("full")).await;
    for name in ["a\u{0}b", "line\nbreak", "evil\u{202E}sj.txt", "del\u{7f}"] {
        let r = call_in_time(
            &full,
            "patchdiff_init_target",
            json!({"target": name, "fixture": fixture, "sha256": sha, "language": "javascript"}),
        )
        .await;
        assert_eq!(error_code(&r), "INVALID_INPUT", "{name:?}");
        assert!(error_message(&r).contains("control character"), "{name:?}");
    }
    full.stop().await;
}

#[tokio::test]
async fn find_occurrences_with_limit_zero_is_an_error_as_in_replay() {
    let env = TestEnv::new();
    env.init_target("calendar", CALENDAR_JS).await;
    let mcp = Mcp::launch(&env.vars("workspace")).await;
    let r = call_in_time(
        &mcp,
        "patchdiff_find_occurrences",
        json!({"target": "calendar", "text": "windows", "limit": 0}),
    )
    .await;
    assert_eq!(error_code(&r), "OUT_OF_RANGE");
    assert!(
        error_message(&r).contains("1..=1000"),
        "{}",
        error_message(&r)
    );
    let replay = call_in_time(
        &mcp,
        "patchdiff_replay",
        json!({"target": "calendar", "limit": 0}),
    )
    .await;
    assert_eq!(error_code(&replay), "OUT_OF_RANGE");
    mcp.stop().await;
}

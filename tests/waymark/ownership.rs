//! Process ownership and cleanup (SPEC W11–W13): an abruptly killed parent leaves no orphan,
//! stale generation roots are removed only when their owner is confirmed dead or its pid reused,
//! and owner guards nest.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{self, EventLog, PY};
use patchdiff::waymark::process::{ProcessIdentity, is_running};
use patchdiff::waymark::stale::{self, Manifest};
use patchdiff::waymark::{Language, Waymark, WaymarkMode, owner::OwnerGuard};

/// Starts `waymark-probe` (a real parent owning a resident worker, optionally a fault worker)
/// and returns it with its worker's pid once the worker is ready.
async fn launch_probe(work: &Path, fault: Option<&str>) -> (std::process::Child, u32) {
    let mut cmd = Command::new(util::example_binary("waymark-probe"));
    cmd.arg(work);
    if let Some(fault) = fault {
        cmd.args(["--fault", fault]);
    }
    let mut probe = cmd
        .env("PATCHDIFF_WAYMARK_DIR", util::script_dir())
        .env("PATCHDIFF_NODE_BINARY", util::node())
        .env_remove("PATCHDIFF_WAYMARK_MODE")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn waymark-probe");
    let stdout = probe.stdout.take().expect("probe stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("join")
    .expect("probe line");
    let child: u32 = line
        .trim()
        .strip_prefix("child ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected probe output {line:?}"));
    assert!(child > 0 && is_running(child));
    (probe, child)
}

fn kill_probe(mut probe: std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(probe.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 probe");
    probe.wait().expect("reap probe");
}

#[tokio::test]
async fn parent_sigkill_leaves_no_orphan_worker() {
    let work = tempfile::tempdir().expect("tempdir");
    let (probe, child) = launch_probe(work.path(), None).await;
    // The child runs in its own process group (W11), not the probe's.
    let child_pgid =
        nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(child as i32))).expect("child pgid");
    assert_eq!(child_pgid.as_raw(), child as i32);

    kill_probe(probe);
    // The stdin-reader guard makes the child exit once its stdin closes.
    util::wait_gone(child, Duration::from_secs(10)).await;

    // Its root now has a dead owner: a new owner's sweep removes it.
    assert_eq!(util::roots(work.path()).len(), 1);
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        EventLog::default().recorder(),
    );
    let report = waymark.sweep_stale_roots();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(report.removed[0].reason, "owner_dead");
    assert!(util::roots(work.path()).is_empty());
}

fn fake_root(work: &Path, name: &str, manifest: Option<&Manifest>) -> std::path::PathBuf {
    let root = work.join(format!("waymark-{name}"));
    stale::create_private_dir(&root.join("req")).expect("mkdir");
    std::fs::write(root.join("req/source"), "x").expect("file");
    if let Some(m) = manifest {
        stale::write_manifest(&root, m).expect("manifest");
    }
    root
}

/// W11: a worker whose main thread is busy (a long synchronous parse) never runs its stdin
/// guard; PR_SET_PDEATHSIG kills it with its parent. It used to outlive the parent.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn parent_sigkill_kills_a_worker_busy_on_its_main_thread() {
    let work = tempfile::tempdir().expect("tempdir");
    // TEST ONLY fault worker: reports ready, then spins synchronously forever.
    let (probe, child) = launch_probe(work.path(), Some("spin")).await;
    kill_probe(probe);
    util::wait_gone(child, Duration::from_secs(5)).await;
}

/// W11: a SIGSTOPped worker cannot read the end of its stdin; it used to stay forever once its
/// parent died.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn parent_sigkill_kills_a_stopped_worker() {
    let work = tempfile::tempdir().expect("tempdir");
    let (probe, child) = launch_probe(work.path(), None).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child as i32),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .expect("SIGSTOP worker");
    kill_probe(probe);
    util::wait_gone(child, Duration::from_secs(5)).await;
}

/// W12: a root is removed only on a valid manifest whose owner is dead or whose pid was reused.
#[tokio::test]
async fn stale_roots_dead_owner_and_reused_pid_are_removed_ambiguous_kept() {
    let work = tempfile::tempdir().expect("tempdir");
    let me = ProcessIdentity::current().expect("own identity");

    // A dead owner: a process that ran and was reaped.
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let gone_pid = gone.id();
    gone.wait().expect("reap");
    let manifest = |owner: ProcessIdentity| Manifest {
        format: stale::MANIFEST_FORMAT,
        generation: 1,
        owner,
        child: None,
        created_unix_ms: 0,
    };
    let dead = fake_root(
        work.path(),
        "dead",
        Some(&manifest(ProcessIdentity {
            pid: gone_pid,
            start_time: 1,
        })),
    );
    // A reused pid: a live pid (ours) with a different creation identity.
    let reused = fake_root(
        work.path(),
        "reused",
        Some(&manifest(ProcessIdentity {
            pid: me.pid,
            start_time: me.start_time.wrapping_add(7),
        })),
    );
    // Ambiguous: no manifest, an unparsable manifest, a live foreign owner.
    let missing = fake_root(work.path(), "missing", None);
    let invalid = fake_root(work.path(), "invalid", None);
    std::fs::write(invalid.join("manifest.json"), "{not json").expect("write");
    let parent = ProcessIdentity::of(std::os::unix::process::parent_id()).expect("parent");
    let alive = fake_root(work.path(), "alive", Some(&manifest(parent)));
    // Not ours at all: left alone and unreported.
    std::fs::create_dir(work.path().join("unrelated")).expect("mkdir");

    let log = EventLog::default();
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, work.path()),
        log.recorder(),
    );
    let report = waymark.sweep_stale_roots();
    let removed: Vec<_> = report
        .removed
        .iter()
        .map(|r| (r.path.clone(), r.reason.as_str()))
        .collect();
    assert_eq!(
        removed,
        vec![
            (dead.clone(), "owner_dead"),
            (reused.clone(), "owner_pid_reused")
        ]
    );
    assert!(!dead.exists() && !reused.exists());
    let kept: Vec<_> = report
        .kept
        .iter()
        .map(|r| (r.path.clone(), r.reason.clone()))
        .collect();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert_eq!(kept[0], (alive.clone(), "owner_alive".to_owned()));
    assert!(kept[1].0 == invalid && kept[1].1.starts_with("manifest_invalid"));
    assert_eq!(kept[2], (missing.clone(), "manifest_missing".to_owned()));
    assert!(missing.exists() && invalid.exists() && alive.exists());
    assert!(work.path().join("unrelated").exists());
    assert_eq!(waymark.status().stale_roots, Some(report));
    assert_eq!(log.named("worker_stale_roots").len(), 1);
}

#[tokio::test]
async fn nested_owner_guards_share_one_worker_and_the_last_release_cleans_up() {
    let work = tempfile::tempdir().expect("tempdir");
    let make = || {
        Ok(Waymark::new(
            util::config(WaymarkMode::Resident, work.path()),
            EventLog::default().recorder(),
        ))
    };
    let outer = OwnerGuard::acquire_with(make).expect("outer");
    let inner =
        OwnerGuard::acquire_with(|| panic!("nested guards share the owner")).expect("inner");
    inner
        .waymark()
        .discover(Language::Python, PY)
        .await
        .expect("discover");
    assert_eq!(outer.waymark().status().requests_served, 1, "same worker");
    let pid = outer.waymark().status().pid.expect("pid");
    let shared = patchdiff::waymark::owner::shared().expect("shared");
    assert_eq!(
        shared.status().pid,
        Some(pid),
        "shared() returns the guard's worker"
    );
    drop(shared);
    inner.release().await;
    assert!(is_running(pid), "the outer guard still owns it");
    outer.release().await;
    util::wait_gone(pid, Duration::from_secs(5)).await;
    assert!(util::roots(work.path()).is_empty());
}

#[tokio::test]
async fn the_lazy_singleton_cleans_up_its_worker_at_process_exit() {
    // W13: without a guard, `owner::shared()` builds a singleton whose worker is killed and whose
    // roots are removed by exit-time cleanup when the process exits normally.
    use std::io::Write;
    let work = tempfile::tempdir().expect("tempdir");
    let mut probe = Command::new(util::example_binary("waymark-probe"))
        .arg("--lazy")
        .env("PATCHDIFF_WAYMARK_DIR", util::script_dir())
        .env("PATCHDIFF_NODE_BINARY", util::node())
        .env("PATCHDIFF_WAYMARK_WORK_ROOT", work.path())
        .env_remove("PATCHDIFF_WAYMARK_MODE")
        .env_remove("PATCHDIFF_PERF_EVENTS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn waymark-probe");
    let stdout = probe.stdout.take().expect("probe stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("join")
    .expect("probe line");
    let child: u32 = line
        .trim()
        .strip_prefix("child ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected probe output {line:?}"));
    assert!(child > 0 && is_running(child));
    assert_eq!(util::roots(work.path()).len(), 1);
    // W9: the real child runs with old space capped at 768 MiB.
    let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).expect("child cmdline");
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(
        args.iter().any(|a| a == "--max-old-space-size=768"),
        "{args:?}"
    );
    writeln!(probe.stdin.take().expect("stdin"), "exit").expect("tell the probe to exit");
    assert!(probe.wait().expect("reap probe").success());
    // Exit-time cleanup killed the worker (no stdin-close grace needed) and removed its root.
    util::wait_gone(child, Duration::from_secs(5)).await;
    assert!(util::roots(work.path()).is_empty(), "roots left behind");
}

//! The real interactive console in tmux during a real agent host run (issue 27's "Done means",
//! SPEC U1, A1): `:agent claude` launches the pinned Claude Code CLI (`tests/tools`) against
//! `scripted-model` on loopback. TEST MODEL: it plays the demo plan up to its first save and then
//! never answers again (`--stall-after-saves 1`), so the step stays running for as long as the
//! test needs it — the only way to hold a real host mid-run on purpose.
//!
//! What the tests check against `/proc`: PROCESSES shows the host, the observed process the host
//! started and that process's worker, each with its real pid and parent; killing the host
//! (SIGKILL, from the test) turns WORKER to gone; `q` during the running step asks first, `n`
//! keeps the step running, `y` stops it and every process and seals nothing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tmux::{Tmux, alive, alive_pid, assert_cooked, command, have_tmux, processes};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pinned Claude Code CLI (or `PATCHDIFF_CLAUDE_BINARY`); missing is a failure: CI installs it.
fn claude() -> PathBuf {
    if let Some(p) = std::env::var_os("PATCHDIFF_CLAUDE_BINARY") {
        return PathBuf::from(p);
    }
    let p = repo().join("tests/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    assert!(
        p.is_file(),
        "the Claude Code CLI is missing: run `npm ci --prefix tests/tools` (or set PATCHDIFF_CLAUDE_BINARY)"
    );
    p
}

/// TEST MODEL: `scripted-model` playing the demo plan until its first save, then stalling;
/// killed on drop.
struct StallingModel {
    child: Child,
    url: String,
}

impl StallingModel {
    fn start(dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
            .arg("--plan")
            .arg(repo().join("assets/canary/demo.plan.jsonl"))
            .args(["--stall-after-saves", "1", "--requests"])
            .arg(dir.join("model-requests.jsonl"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("scripted-model starts");
        let mut url = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut url)
            .expect("scripted-model prints its address");
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        Self {
            child,
            url: url.trim().to_owned(),
        }
    }
}

impl Drop for StallingModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's parent and command line from `/proc`.
fn proc_parent(pid: u32) -> Option<u32> {
    processes()
        .into_iter()
        .find(|&(p, _, _)| p == pid)
        .map(|(_, ppid, _)| ppid)
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// The PROCESSES pane's column of a 200-column screen: each line up to where the pane beside it
/// starts (`││`), so a pid the WORKER pane names is not taken for a row.
fn left_column(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.split("││").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The PROCESSES pane's rows on the screen: the lines of its box (from its title to its
/// bottom border) in the left column, so neither a pid another pane names (WORKER beside it,
/// the EVIDENCE title below it) nor a TARGETS line is taken for a row.
fn process_rows(screen: &str) -> Vec<String> {
    left_column(screen)
        .lines()
        .skip_while(|l| !l.contains("PROCESSES"))
        .skip(1)
        .take_while(|l| !l.starts_with('└'))
        .map(|l| l.trim_start_matches('│').trim_end_matches('│').to_owned())
        .collect()
}

/// The word after `key` on a PROCESSES row (`pid`, `parent`): the row's column of that name.
fn column(row: &str, key: &str) -> Option<u32> {
    let words: Vec<&str> = row.split_whitespace().collect();
    let at = words.iter().position(|w| *w == key)?;
    words.get(at + 1)?.parse().ok()
}

/// The pid on the first PROCESSES row where `label` is followed (after spaces) by `pid N`.
fn pid_on_row(screen: &str, label: &str) -> Option<u32> {
    process_rows(screen).iter().find_map(|l| {
        let (_, rest) = l.split_once(label)?;
        rest.trim_start().strip_prefix("pid ")?;
        column(rest, "pid")
    })
}

/// Whether TARGETS shows the first target at version 1: the model has saved once and stalls.
fn saved_once(screen: &str) -> bool {
    left_column(screen).lines().any(|l| {
        let words: Vec<&str> = l.trim_start_matches('│').split_whitespace().collect();
        words.first() == Some(&"calendar") && words.get(1) == Some(&"1")
    })
}

/// The number after `parent ` on the row showing `pid`.
fn parent_on_row(screen: &str, pid: u32) -> Option<u32> {
    let rows = process_rows(screen);
    let row = rows.iter().find(|l| column(l, "pid") == Some(pid))?;
    column(row, "parent")
}

/// A real console in tmux (200×60) whose run has `:agent claude` running against the stalling
/// model, its PROCESSES pane showing the host, its observed process and that process's worker.
struct HostRun {
    dir: tempfile::TempDir,
    tmux: Tmux,
    _model: StallingModel,
    console: u32,
    host: u32,
    observed: u32,
    worker: u32,
    /// The screen once all three rows were shown.
    screen: String,
}

impl HostRun {
    fn start(socket: &str) -> Self {
        assert!(
            have_tmux(),
            "tmux is required for the console's end-to-end tests (apt-get install tmux; .ci/run does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let model = StallingModel::start(dir.path());
        let pidfile = dir.path().join("console.pid");
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_patchdiff"));
        let tmux = Tmux::session(socket, 200, 60);
        let line = format!(
            "sh -c 'echo $$ > {pid}; exec env -u PATCHDIFF_DATABASE_URL -u NO_COLOR \
             PATCHDIFF_STATE_DIR={state} PATCHDIFF_DATA_DIR={data} PATCHDIFF_CLAUDE_BINARY={claude} \
             ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY=sk-ant-test-console \
             {exe} console --runs-dir {runs} 2>/dev/null'; echo \"console exit\"\"ed $?\"; stty -a > {stty}",
            pid = pidfile.display(),
            state = dir.path().join("state").display(),
            data = dir.path().join("data").display(),
            claude = claude().display(),
            url = model.url,
            exe = exe.display(),
            runs = dir.path().join("runs").display(),
            stty = dir.path().join("stty.txt").display(),
        );
        tmux.keys(&[&line, "Enter"]);
        tmux.wait_for("the console", Duration::from_secs(10), |s| {
            s.contains("PROCESSES")
        });
        let console: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for line in [
            "record model=scripted-stall provider=anthropic reasoning=default",
            "init",
            "agent claude max_turns=50 timeout=600",
        ] {
            command(&tmux, line);
        }
        // The model has saved one target and stalls: the host, its observed process and the worker
        // all run, and every row has been sampled.
        let screen = tmux.wait_for(
            "the host, its observed process and its worker",
            Duration::from_secs(60),
            |s| {
                pid_on_row(s, "claude").is_some()
                    && pid_on_row(s, "host-observed").is_some()
                    && s.lines()
                        .any(|l| l.contains("worker gen 1 ") && l.contains("ready"))
                    && saved_once(s)
                    && !s.contains("not sampled yet")
            },
        );
        let host = pid_on_row(&screen, "claude").unwrap();
        let observed = pid_on_row(&screen, "host-observed").unwrap();
        let worker = pid_on_row(&screen, "worker gen 1 ").unwrap();
        Self {
            dir,
            tmux,
            _model: model,
            console,
            host,
            observed,
            worker,
            screen,
        }
    }

    /// The run directory the console made.
    fn run_dir(&self) -> PathBuf {
        let runs = self.dir.path().join("runs");
        let dirs: Vec<PathBuf> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs[0].clone()
    }
}

#[test]
fn during_a_host_run_processes_shows_the_host_its_observed_process_and_worker_as_proc_has_them() {
    let started = Instant::now();
    let run = HostRun::start("pd-host-procs");
    let screen = &run.screen;
    // The real pids, as `/proc` has them: the console started the host, the host started the
    // observed process (`patchdiff mcp`), and that process started the Node worker.
    assert_eq!(proc_parent(run.host), Some(run.console), "{screen}");
    assert_eq!(proc_parent(run.observed), Some(run.host), "{screen}");
    assert_eq!(proc_parent(run.worker), Some(run.observed), "{screen}");
    assert!(
        cmdline(run.observed).contains(" mcp"),
        "{}",
        cmdline(run.observed)
    );
    assert!(
        cmdline(run.worker).contains("waymark_worker"),
        "{}",
        cmdline(run.worker)
    );
    // The rows name those parents too.
    assert_eq!(
        parent_on_row(screen, run.observed),
        Some(run.host),
        "{screen}"
    );
    assert_eq!(
        parent_on_row(screen, run.worker),
        Some(run.observed),
        "{screen}"
    );
    // One row per process: no pid is listed twice.
    for pid in [run.host, run.observed, run.worker] {
        let rows = process_rows(screen)
            .iter()
            .filter(|l| column(l, "pid") == Some(pid))
            .count();
        assert_eq!(rows, 1, "pid {pid} on {rows} rows:\n{screen}");
    }
    run.tmux.keys(&["q"]);
    run.tmux
        .wait_for("the question", Duration::from_secs(10), |s| {
            s.contains("Quit? y/N")
        });
    run.tmux.keys(&["y"]);
    run.tmux
        .wait_for("the shell again", Duration::from_secs(20), |s| {
            s.contains("console exited")
        });
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn killing_the_host_turns_worker_to_gone_within_two_seconds() {
    let run = HostRun::start("pd-host-kill");
    // The WORKER pane's state word: `gen 1 · worker pid P · STATE · age …`.
    let worker_line = |s: &str| {
        let head = format!("worker pid {} · ", run.worker);
        s.lines().find_map(|l| {
            let (_, rest) = l.split_once(&head)?;
            Some(rest.split(" · ").next()?.to_owned())
        })
    };
    let before = worker_line(&run.screen).expect("the WORKER pane names the worker's pid");
    assert_eq!(before, "ready");
    // The host's whole process group (it has its own, A1): the observed process dies by SIGKILL
    // too and records no retirement, so only the process table can tell the worker is gone.
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(run.host as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let screen = run.tmux.wait_for(
        "WORKER to show the worker gone",
        Duration::from_secs(10),
        |s| worker_line(s).is_some_and(|l| l != "ready"),
    );
    let took = killed.elapsed();
    // And it is: the worker left the process table with its host (reaped, or a zombie until
    // its reaper gets to it).
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive_pid(run.worker)
        && !std::fs::read_to_string(format!("/proc/{}/stat", run.worker))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
    {
        assert!(Instant::now() < deadline, "the worker outlived its host");
        std::thread::sleep(Duration::from_millis(20));
    }
    let line = worker_line(&screen).unwrap();
    eprintln!("WORKER showed `{line}` {took:?} after the kill");
    assert!(
        line.starts_with("gone ("),
        "a worker killed without a retirement is shown gone, with how it ended: {line}"
    );
    assert!(
        took <= Duration::from_secs(2),
        "WORKER showed the worker gone {took:?} after the host was killed:\n{screen}"
    );
    // The step saw its host die: it failed, naming the signal.
    let screen = run
        .tmux
        .wait_for("the agent step to fail", Duration::from_secs(30), |s| {
            s.contains("agent FAIL")
        });
    assert!(screen.contains("SIGKILL"), "{screen}");
    crate::tmux::close_overlay(&run.tmux);
    run.tmux.keys(&["q"]);
    run.tmux
        .wait_for("the shell again", Duration::from_secs(20), |s| {
            s.contains("console exited")
        });
}

#[test]
fn q_during_a_host_step_asks_no_keeps_it_running_and_yes_stops_it_sealing_nothing() {
    let run = HostRun::start("pd-host-quit");
    let tmux = &run.tmux;
    let children: Vec<(u32, u64)> = processes()
        .into_iter()
        .filter(|&(p, _, _)| [run.host, run.observed, run.worker].contains(&p))
        .map(|(p, _, start)| (p, start))
        .collect();
    assert_eq!(children.len(), 3, "{children:?}");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the question", Duration::from_secs(10), |s| {
        s.contains("Quit? y/N")
    });
    assert!(screen.contains("`agent` is running"), "{screen}");
    tmux.keys(&["n"]);
    tmux.wait_for("the answer", Duration::from_secs(10), |s| {
        !s.contains("Quit? y/N") && s.contains("running agent")
    });
    // Still running: the console, the host and its processes, and the step.
    for &(pid, start) in &children {
        assert!(alive(pid, start), "{pid} stopped after answering no");
    }
    assert!(alive_pid(run.console));
    tmux.keys(&["q"]);
    tmux.wait_for("the question again", Duration::from_secs(10), |s| {
        s.contains("Quit? y/N")
    });
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("the shell again", Duration::from_secs(20), |s| {
        s.contains("console exited")
    });
    assert!(screen.contains("console exited 0"), "{screen}");
    assert_cooked(&run.dir.path().join("stty.txt"));
    // Every process of the step is gone with the console.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<_> = children.iter().filter(|&&(p, s)| alive(p, s)).collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive_pid(run.console));
    // Nothing was sealed or reported half-done: the run holds its evidence so far and no seal.
    let dir = run.run_dir();
    assert!(dir.join("manifest.json").is_file());
    for file in [
        "manifest.seal",
        "SHA256SUMS",
        "journal.json",
        "report.txt",
        "report.json",
        "SEAL.sig.json",
    ] {
        assert!(!dir.join(file).exists(), "{file} written by a quit");
    }
}

#[test]
fn during_a_host_run_evidence_shows_the_observed_process_the_host_started() {
    let run = HostRun::start("pd-host-evidence");
    // What only the host's observed process writes: the agent's submits (the demo plan's
    // `cal-3`, just before its save) are in its wire log and in no log of the console's own.
    let dir = run.run_dir();
    let host_log = std::fs::read_to_string(dir.join("host-observed.mcp.jsonl")).unwrap();
    assert!(
        host_log.contains("cal-3"),
        "no `cal-3` in the host's wire log"
    );
    for own in ["observed.mcp.jsonl", "full.mcp.jsonl"] {
        let text = std::fs::read_to_string(dir.join(own)).unwrap_or_default();
        assert!(!text.contains("cal-3"), "{own} holds the host's submit");
    }
    // EVIDENCE follows that process while the host runs, and its title says whose it is.
    let title = format!(
        "EVIDENCE · the observed process claude started, pid {}",
        run.observed
    );
    let screen = run.tmux.wait_for(
        "EVIDENCE to show the host's observed process",
        Duration::from_secs(20),
        |s| {
            s.contains(&title)
                && s.lines().any(|l| {
                    l.contains("patchdiff_submit_observed_operations")
                        && l.contains("request_key cal-2")
                })
        },
    );
    assert!(
        screen.contains("host-observed requests/results"),
        "{screen}"
    );
    // `o` still moves to another log: the title follows it.
    run.tmux.keys(&["Tab", "Tab", "Tab", "Tab"]);
    run.tmux
        .wait_for("EVIDENCE focused", Duration::from_secs(10), |s| {
            s.contains("▸ EVIDENCE")
        });
    run.tmux.keys(&["o"]);
    run.tmux
        .wait_for("the next log", Duration::from_secs(10), |s| {
            !s.contains(&title) && s.contains("worker stderr (observed)")
        });
    run.tmux.keys(&["q"]);
    run.tmux
        .wait_for("the question", Duration::from_secs(10), |s| {
            s.contains("Quit? y/N")
        });
    run.tmux.keys(&["y"]);
    run.tmux
        .wait_for("the shell again", Duration::from_secs(20), |s| {
            s.contains("console exited")
        });
}

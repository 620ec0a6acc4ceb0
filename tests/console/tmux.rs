//! End-to-end test of the real interactive console in tmux (SPEC U1, U4): start it at 200×60,
//! run `:init` and `:launch`, wait (polling with a deadline) until the worker shows ready, quit
//! with `q`, then check the terminal was restored (alternate screen left, `stty` sane) and that
//! no process the console started is still alive.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server of its own (`socket` plus this test process's pid) with one detached
    /// `w`×`h` session named `console` running `sh`.
    pub(crate) fn session(socket: &str, w: u16, h: u16) -> Self {
        let tmux = Tmux {
            socket: format!("{socket}-{}", std::process::id()),
        };
        let (w, h) = (w.to_string(), h.to_string());
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &w,
            "-y",
            &h,
            "-s",
            "console",
            "sh",
        ]);
        tmux
    }
    pub(crate) fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    pub(crate) fn capture(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "console"])
    }
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "console"];
        args.extend_from_slice(keys);
        self.run(&args);
    }
    /// Polls the screen until `pred` holds; panics with the screen after `limit`.
    pub(crate) fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.capture();
            if pred(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// (pid, ppid, starttime) of every process.
pub(crate) fn processes() -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // After the comm: state(0) ppid(1) … starttime(19).
        if let (Some(ppid), Some(start)) = (f.get(1), f.get(19)) {
            out.push((pid, ppid.parse().unwrap_or(0), start.parse().unwrap_or(0)));
        }
    }
    out
}

/// Every descendant of `root` with its start time.
fn descendants(root: u32) -> Vec<(u32, u64)> {
    let all = processes();
    let mut found = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid, start) in &all {
            if ppid == p {
                found.push((pid, start));
                frontier.push(pid);
            }
        }
    }
    found
}

pub(crate) fn alive(pid: u32, start: u64) -> bool {
    processes().iter().any(|&(p, _, s)| p == pid && s == start)
}

pub(crate) fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Waits for the `stty -a` the shell ran after the console exited and checks raw mode was left:
/// canonical input, echo, signals and output processing are back on.
pub(crate) fn assert_cooked(sttyfile: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let stty = loop {
        if let Ok(s) = std::fs::read_to_string(sttyfile)
            && !s.is_empty()
        {
            break s;
        }
        assert!(Instant::now() < deadline, "stty -a did not run");
        std::thread::sleep(Duration::from_millis(20));
    };
    let flags: Vec<&str> = stty
        .split(|c: char| c.is_whitespace() || c == ';')
        .collect();
    for flag in ["icanon", "echo", "isig", "opost"] {
        assert!(
            flags.contains(&flag),
            "terminal not restored ({flag}): {stty}"
        );
    }
}

#[test]
fn interactive_console_launches_shows_ready_worker_quits_and_restores_the_terminal() {
    assert!(
        have_tmux(),
        "tmux is required for the console's end-to-end tests (apt-get install tmux; .ci/run does)"
    );
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let pidfile = dir.path().join("console.pid");
    let sttyfile = dir.path().join("stty.txt");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_patchdiff"));
    let tmux = Tmux::session("pd-console-e2e", 200, 60);
    let line = format!(
        "sh -c 'echo $$ > {pid}; exec {exe} console --runs-dir {runs}'; echo \"console exit\"\"ed $?\"; stty -a > {stty}",
        pid = pidfile.display(),
        exe = exe.display(),
        runs = runs.display(),
        stty = sttyfile.display(),
    );
    tmux.keys(&[&line, "Enter"]);
    tmux.wait_for("the console", Duration::from_secs(10), |s| {
        s.contains("PROCESSES")
    });
    let console_pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "console", "#{alternate_on}"])
            .trim(),
        "1"
    );

    tmux.keys(&[":init", "Enter"]);
    let screen = tmux.wait_for("init to finish", Duration::from_secs(15), |s| {
        s.contains("✔ init ok") || s.contains("✖ init FAIL")
    });
    assert!(screen.contains("✔ init ok"), "{screen}");
    tmux.keys(&[":launch", "Enter"]);
    let screen = tmux.wait_for("the worker to be ready", Duration::from_secs(15), |s| {
        s.lines()
            .any(|l| l.contains("worker gen 1 ") && l.contains("ready"))
    });
    assert!(process_row(&screen, "observed").is_some(), "{screen}");

    // Everything the console started, down to the Node worker.
    let children = descendants(console_pid);
    assert!(
        children.len() >= 3,
        "expected full, observed and the worker under the console: {children:?}"
    );

    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the shell again", Duration::from_secs(15), |s| {
        s.contains("console exited")
    });
    assert!(screen.contains("console exited 0"), "{screen}");
    assert!(
        !screen.contains("PROCESSES"),
        "alternate screen not left:\n{screen}"
    );
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "console", "#{alternate_on}"])
            .trim(),
        "0"
    );
    // Raw mode left: canonical input and echo are back on.
    assert_cooked(&sttyfile);
    let left: Vec<_> = children.iter().filter(|&&(p, s)| alive(p, s)).collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(
        !alive_pid(console_pid),
        "the console itself is still running"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    let _ = Path::new(&runs);
}

pub(crate) fn alive_pid(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A real console in tmux with its processes launched and the worker ready, for the exit tests.
struct LaunchedConsole {
    _dir: tempfile::TempDir,
    /// Where the shell writes `stty -a` once the console has exited.
    sttyfile: PathBuf,
    tmux: Tmux,
    pid: u32,
    /// The console's descendants (pid, start time) once the worker was ready.
    children: Vec<(u32, u64)>,
}

impl LaunchedConsole {
    /// Starts `patchdiff console` (with `env` prefixed, e.g. `VAR=1`) in a tmux session named
    /// by `socket`, presses `l`, and polls until the worker shows ready.
    fn start(socket: &str, env: &str) -> Self {
        assert!(
            have_tmux(),
            "tmux is required for the console's end-to-end tests (apt-get install tmux; .ci/run does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let pidfile = dir.path().join("console.pid");
        let sttyfile = dir.path().join("stty.txt");
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_patchdiff"));
        let tmux = Tmux::session(socket, 120, 40);
        let line = format!(
            "sh -c 'echo $$ > {pid}; {env} exec {exe} console --runs-dir {runs} 2>/dev/null'; echo \"console exit\"\"ed $?\"; stty -a > {stty}",
            pid = pidfile.display(),
            exe = exe.display(),
            runs = runs.display(),
            stty = sttyfile.display(),
        );
        tmux.keys(&[&line, "Enter"]);
        tmux.wait_for("the console", Duration::from_secs(10), |s| {
            s.contains("PROCESSES")
        });
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        tmux.keys(&["l"]);
        tmux.wait_for("the worker to be ready", Duration::from_secs(15), |s| {
            s.lines()
                .any(|l| l.contains("worker gen 1 ") && l.contains("ready"))
        });
        let children = descendants(pid);
        assert!(children.len() >= 3, "{children:?}");
        Self {
            _dir: dir,
            sttyfile,
            tmux,
            pid,
            children,
        }
    }

    /// Waits for the shell to report the console's exit; checks the alternate screen and raw
    /// mode were left (`stty -a`) and that every child is gone within `grace` (zero: already
    /// gone). Returns the screen.
    fn assert_exited_clean(&self, grace: Duration) -> String {
        let screen = self
            .tmux
            .wait_for("the shell again", Duration::from_secs(15), |s| {
                s.contains("console exited")
            });
        assert!(
            !screen.contains("PROCESSES"),
            "alternate screen not left:\n{screen}"
        );
        assert_eq!(
            self.tmux
                .run(&["display", "-p", "-t", "console", "#{alternate_on}"])
                .trim(),
            "0"
        );
        assert_cooked(&self.sttyfile);
        let deadline = Instant::now() + grace;
        loop {
            let left: Vec<_> = self
                .children
                .iter()
                .filter(|&&(p, s)| alive(p, s))
                .collect();
            if left.is_empty() {
                return screen;
            }
            assert!(Instant::now() < deadline, "processes left behind: {left:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn sigterm_restores_the_terminal_and_stops_every_child() {
    let console = LaunchedConsole::start("pd-console-term", "");
    let status = Command::new("kill")
        .args(["-TERM", &console.pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The console stops its children before it exits.
    console.assert_exited_clean(Duration::ZERO);
}

/// Debug builds only (the trigger is compiled out of release builds).
#[cfg(debug_assertions)]
#[test]
fn a_panic_restores_the_terminal_and_stops_every_child() {
    let console = LaunchedConsole::start("pd-console-panic", "PATCHDIFF_CONSOLE_TEST_PANIC=1");
    console.tmux.keys(&["F12"]);
    // Children get SIGTERM from the panic hook and lose their stdin; they may outlive it briefly.
    let screen = console.assert_exited_clean(Duration::from_secs(10));
    assert!(screen.contains("console exited 101"), "{screen}");
}

/// The screen of a real console started with `env` (e.g. `NO_COLOR=1`), with tmux's escape
/// sequences kept (`capture-pane -e`), after it has drawn its panes; then the console quits.
fn screen_with_escapes(socket: &str, env: &str) -> String {
    assert!(
        have_tmux(),
        "tmux is required for the console's end-to-end tests (apt-get install tmux; .ci/run does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_patchdiff"));
    let tmux = Tmux::session(socket, 120, 40);
    let line = format!(
        "env -u NO_COLOR {env} {exe} console --runs-dir {runs} 2>/dev/null; echo \"console exit\"\"ed $?\"",
        exe = exe.display(),
        runs = runs.display(),
    );
    tmux.keys(&[&line, "Enter"]);
    tmux.wait_for("the console", Duration::from_secs(10), |s| {
        s.contains("PROCESSES") && s.contains("TARGETS")
    });
    let screen = tmux.run(&["capture-pane", "-e", "-p", "-t", "console"]);
    tmux.keys(&["q"]);
    tmux.wait_for("the shell again", Duration::from_secs(15), |s| {
        s.contains("console exited 0")
    });
    screen
}

/// SGR colour parameters (foreground/background, 8/16/256/RGB) in a captured screen.
fn colour_sequences(screen: &str) -> Vec<String> {
    let mut found = Vec::new();
    for seq in screen.split('\u{1b}').skip(1) {
        let Some(body) = seq.strip_prefix('[') else {
            continue;
        };
        let Some(end) = body.find('m') else { continue };
        let params = &body[..end];
        if params.split(';').any(|p| {
            p.parse::<u16>().is_ok_and(|n| {
                (30..=38).contains(&n) || (40..=48).contains(&n) || (90..=107).contains(&n)
            })
        }) {
            found.push(params.to_owned());
        }
    }
    found
}

/// The screen line showing the `full` process row, not running (selected when the console
/// starts).
fn selected_row(screen: &str) -> &str {
    process_row(screen, "full")
        .filter(|l| l.contains("not running"))
        .unwrap_or_else(|| panic!("no `full` row on:\n{screen}"))
}

/// The PROCESSES pane's row labelled `label` (the label, then its `pid` column).
pub(crate) fn process_row<'a>(screen: &'a str, label: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.windows(2).any(|w| w[0] == label && w[1] == "pid")
    })
}

#[test]
fn no_color_in_the_real_environment_leaves_the_console_without_colour() {
    // U4: the variable is read from the process environment of the real binary. In colour the
    // selected row is reversed; under NO_COLOR it is bold instead, with no colour anywhere.
    // (crossterm drops colour under NO_COLOR by itself, but a console that ignored the variable
    // would still ask for reverse + colour, and crossterm's empty colour sequence then resets the
    // row to plain — so the bold selection is the console's own doing.)
    let coloured = screen_with_escapes("pd-colour", "");
    assert!(
        !colour_sequences(&coloured).is_empty(),
        "without NO_COLOR the console draws in colour:\n{coloured}"
    );
    assert!(
        selected_row(&coloured).contains("\u{1b}[7m"),
        "{coloured:?}"
    );
    let plain = screen_with_escapes("pd-no-colour", "NO_COLOR=1");
    assert_eq!(
        colour_sequences(&plain),
        Vec::<String>::new(),
        "NO_COLOR=1 must leave no colour on screen"
    );
    let row = selected_row(&plain);
    assert!(
        row.contains("\u{1b}[1m") && !row.contains("\u{1b}[7m"),
        "under NO_COLOR the selection is bold, not reversed: {row:?}"
    );
}

/// A real interactive console in tmux at `w`×`h` with its runs under `runs`, not launched yet.
/// The shell reports the console's exit as `console exited N`.
fn open_console(socket: &str, runs: &Path, w: u16, h: u16) -> Tmux {
    assert!(
        have_tmux(),
        "tmux is required for the console's end-to-end tests (apt-get install tmux; .ci/run does)"
    );
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_patchdiff"));
    let tmux = Tmux::session(socket, w, h);
    let line = format!(
        "{exe} console --runs-dir {runs} 2>/dev/null; echo \"console exit\"\"ed $?\"",
        exe = exe.display(),
        runs = runs.display(),
    );
    tmux.keys(&[&line, "Enter"]);
    tmux.wait_for("the console", Duration::from_secs(10), |s| {
        s.contains("PROCESSES")
    });
    tmux
}

/// Types one `:` command line and presses Enter.
pub(crate) fn command(tmux: &Tmux, line: &str) {
    tmux.keys(&[":"]);
    // `-l`: the text literally (a `;` or a key name inside it stays text).
    tmux.run(&["send-keys", "-t", "console", "-l", line]);
    tmux.keys(&["Enter"]);
}

/// The pid shown on the processes pane's row for `kind` (`full`, `observed`), if running.
fn shown_pid(screen: &str, kind: &str) -> Option<u32> {
    let words: Vec<&str> = process_row(screen, kind)?.split_whitespace().collect();
    let at = words
        .windows(2)
        .position(|w| w[0] == kind && w[1] == "pid")?;
    words.get(at + 2)?.parse().ok()
}

/// Closes the overlay on screen, if any, and waits until it is gone (a key sent right after
/// Escape would arrive as Alt+key).
pub(crate) fn close_overlay(tmux: &Tmux) {
    if tmux.capture().contains("(Esc closes)") {
        tmux.keys(&["Escape"]);
        tmux.wait_for("the overlay to close", Duration::from_secs(10), |s| {
            !s.contains("(Esc closes)")
        });
    }
}

/// Closes any overlay, then quits with `q`.
fn quit(tmux: &Tmux) {
    close_overlay(tmux);
    tmux.keys(&["q"]);
    tmux.wait_for("the shell again", Duration::from_secs(20), |s| {
        s.contains("console exited")
    });
}

#[test]
fn restarting_one_process_from_the_processes_pane_gives_it_a_new_pid() {
    let console = LaunchedConsole::start("pd-restart-one", "");
    let tmux = &console.tmux;
    let screen = tmux.capture();
    let full = shown_pid(&screen, "full").expect("full runs");
    let observed = shown_pid(&screen, "observed").expect("observed runs");
    // Focus starts on PROCESSES with `full` selected: move to `observed`, restart it alone.
    tmux.keys(&["j"]);
    tmux.keys(&["R"]);
    let screen = tmux.wait_for(
        "observed to come back under a new pid",
        Duration::from_secs(20),
        |s| shown_pid(s, "observed").is_some_and(|p| p != observed),
    );
    // The other MCP process was left alone.
    assert_eq!(shown_pid(&screen, "full"), Some(full), "{screen}");
    // The step log (Enter on PROCESSES) shows the console said what R does before doing it.
    tmux.keys(&["Enter"]);
    let log = tmux.wait_for("the step log", Duration::from_secs(10), |s| {
        s.contains("step log (last")
    });
    assert!(
        log.contains(&format!(
            "restarting the observed process only (pid {observed})"
        )),
        "{log}"
    );
    close_overlay(tmux);
    assert!(!alive_pid(observed), "the old observed process is gone");
    // The new process's worker comes up as a new session (generation 1 of the new pid).
    tmux.wait_for("the new worker to be ready", Duration::from_secs(15), |s| {
        s.lines()
            .any(|l| l.contains("worker gen 1 ") && l.contains("ready"))
    });
    quit(tmux);
}

#[test]
fn after_the_wrong_canary_enter_on_a_target_opens_its_diff() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let tmux = open_console("pd-story", &runs, 200, 60);
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/canary/wrong.plan.jsonl");
    // The steps of assets/canary/wrong.canary, typed on the command line; they queue in order.
    for line in [
        "record model=scripted-wrong provider=patchdiff reasoning=none".to_owned(),
        "init".to_owned(),
        "launch observed".to_owned(),
        "preflight".to_owned(),
        format!("agent {}", plan.display()),
        "export".to_owned(),
        "inspect".to_owned(),
        "evaluate".to_owned(),
    ] {
        command(&tmux, &line);
    }
    let screen = tmux.wait_for("evaluate to finish", Duration::from_secs(90), |s| {
        s.contains("evaluate FAIL") || s.contains("evaluate ok")
    });
    assert!(screen.contains("evaluate FAIL"), "{screen}");
    // TARGETS: calendar, chess, … — select chess and press Enter.
    tmux.keys(&["Tab"]);
    tmux.keys(&["j"]);
    tmux.keys(&["Enter"]);
    // The story opens on the verdict and its named checks; the diffs follow below.
    let screen = tmux.wait_for("chess's story", Duration::from_secs(20), |s| {
        s.contains("verdict: FAIL")
    });
    assert!(screen.contains("chess (python)"), "{screen}");
    assert!(
        screen.contains("verdict: FAIL (behavioral) · identical to the reference: no"),
        "{screen}"
    );
    // The wrong edit tests attacks by the mover's own colour: page down to that diff line.
    let wrong_line = |s: &str| {
        s.lines()
            .any(|l| l.contains("+") && l.contains("color) for x in"))
    };
    let mut screen = screen;
    for _ in 0..20 {
        if wrong_line(&screen) {
            break;
        }
        tmux.keys(&["PageDown"]);
        let before = screen.clone();
        screen = tmux.wait_for("the story to scroll", Duration::from_secs(10), |s| {
            s != before
        });
    }
    assert!(wrong_line(&screen), "{screen}");
    quit(&tmux);
}

#[test]
fn a_past_run_opens_read_only_from_the_run_browser() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // A past run: the bundled wrong canary, headless (it fails on chess by design).
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["console", "--runs-dir"])
        .arg(&runs)
        .arg("--script")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/canary/wrong.canary"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let past = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("r-"))
        .expect("the headless run's directory");
    let tmux = open_console("pd-runs", &runs, 200, 60);
    command(&tmux, "runs");
    let screen = tmux.wait_for("the run browser", Duration::from_secs(20), |s| {
        s.contains(&past)
    });
    let row = screen.lines().find(|l| l.contains(&past)).unwrap();
    assert!(
        row.contains("scripted-wrong") && row.contains("FAILED") && row.contains("chess FAIL"),
        "{row}"
    );
    close_overlay(&tmux);
    command(&tmux, &format!("runs open {past}"));
    let screen = tmux.wait_for("the past run's panes", Duration::from_secs(20), |s| {
        // Its targets from its store, and its worker's history from its own perf events: the
        // generation it launched retired when `report` stopped the process.
        s.contains("opened past run")
            && s.lines()
                .any(|l| l.contains("│  chess") && l.contains("≠ init"))
            && s.lines()
                .any(|l| l.contains("retired worker pid") && l.contains("gen 1 shutdown"))
    });
    assert!(
        screen.lines().next().unwrap().contains(&past),
        "the header names the run shown:\n{screen}"
    );
    // Only the past run's process is shown: not the live console's own (unlaunched) ones.
    assert!(process_row(&screen, "full").is_none(), "{screen}");
    // The past run is read-only: a step refuses rather than act on it.
    command(&tmux, "export");
    tmux.wait_for("the refusal", Duration::from_secs(10), |s| {
        s.contains("read-only")
    });
    quit(&tmux);
}

/// `patchdiff verify RUN`: whether it printed `VERIFIED`, and its output.
fn verifies(run: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg(run)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success() && text.contains("VERIFIED"), text)
}

/// The run directories under `runs`, by whether they are sealed.
fn run_dirs(runs: &Path) -> Vec<(PathBuf, bool)> {
    let mut dirs: Vec<(PathBuf, bool)> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .map(|p| {
            let sealed = p.join("manifest.seal").exists();
            (p, sealed)
        })
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn a_run_sealed_in_the_interactive_console_verifies_refuses_more_steps_and_new_starts_the_next() {
    // Issue 22: the store poller kept the database open past the seal, so `SHA256SUMS` listed
    // SQLite's `-shm` and the run did not verify; steps after `report` were accepted.
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let tmux = open_console("pd-seal", &runs, 200, 60);
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/canary/wrong.plan.jsonl");
    for line in [
        "record model=x".to_owned(),
        "init".to_owned(),
        "launch".to_owned(),
        "preflight".to_owned(),
        format!("agent {}", plan.display()),
        "export".to_owned(),
        "inspect".to_owned(),
        "evaluate".to_owned(),
        "report".to_owned(),
    ] {
        command(&tmux, &line);
    }
    tmux.wait_for("report to finish", Duration::from_secs(120), |s| {
        s.contains("report FAIL") || s.contains("report ok")
    });
    // The header learns of the seal from the session, a frame or more after the step's line.
    tmux.wait_for(
        "the header to say the run is sealed",
        Duration::from_secs(10),
        |s| s.contains("sealed: `:new` starts the next run"),
    );
    command(&tmux, "launch");
    tmux.wait_for("the refusal", Duration::from_secs(10), |s| {
        s.contains("`launch` refused: run r-") && s.contains("is sealed")
    });
    command(&tmux, "new");
    tmux.wait_for("the next run", Duration::from_secs(10), |s| {
        s.contains("new run r-")
    });
    quit(&tmux);
    // The new run ran no step, so it made no directory (issue 27 item 5): only the sealed one.
    let dirs = run_dirs(&runs);
    assert_eq!(dirs.len(), 1, "the sealed run only: {dirs:?}");
    let sealed: Vec<&PathBuf> = dirs.iter().filter(|(_, s)| *s).map(|(p, _)| p).collect();
    assert_eq!(sealed.len(), 1, "{dirs:?}");
    let (ok, text) = verifies(sealed[0]);
    assert!(ok, "{text}");
    let sums = std::fs::read_to_string(sealed[0].join("SHA256SUMS")).unwrap();
    assert!(!sums.contains("-shm") && !sums.contains("-wal"), "{sums}");
}

#[test]
fn a_past_run_opened_then_the_console_killed_still_verifies() {
    // Issue 22: `runs open` created `store.sqlite-shm`/`-wal` inside the past run, and a console
    // killed while it was open left the run unverifiable for good.
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(["console", "--runs-dir"])
        .arg(&runs)
        .arg("--script")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/canary/wrong.canary"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (past, _) = run_dirs(&runs).remove(0);
    let (ok, text) = verifies(&past);
    assert!(ok, "before opening: {text}");
    let id = past.file_name().unwrap().to_string_lossy().into_owned();
    let pidfile = dir.path().join("console.pid");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_patchdiff"));
    let tmux = Tmux::session("pd-runs-kill", 200, 60);
    let line = format!(
        "sh -c 'echo $$ > {pid}; exec {exe} console --runs-dir {runs} 2>/dev/null'; echo \"console exit\"\"ed $?\"",
        pid = pidfile.display(),
        exe = exe.display(),
        runs = runs.display(),
    );
    tmux.keys(&[&line, "Enter"]);
    tmux.wait_for("the console", Duration::from_secs(10), |s| {
        s.contains("PROCESSES")
    });
    let console_pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    command(&tmux, &format!("runs open {id}"));
    // The past run's targets come from its store: the poller has it open now.
    tmux.wait_for("the past run's targets", Duration::from_secs(20), |s| {
        s.contains("opened past run")
            && s.lines()
                .any(|l| l.contains("│  chess") && l.contains("≠ init"))
    });
    Command::new("kill")
        .args(["-9", &console_pid.to_string()])
        .status()
        .unwrap();
    tmux.wait_for("the shell again", Duration::from_secs(15), |s| {
        s.contains("console exited")
    });
    for side in ["store.sqlite-shm", "store.sqlite-wal"] {
        assert!(!past.join(side).exists(), "{side} created in the past run");
    }
    let (ok, text) = verifies(&past);
    assert!(ok, "after runs open and kill -9: {text}");
}

#[test]
fn the_bottom_bar_shows_only_the_focused_panes_keys() {
    // Each pane's own keys, as its key table labels them in the bar (WORKER has none).
    const PANE_KEYS: &[(&str, &[&str])] = &[
        (
            "PROCESSES",
            &["R restart", "X stop", "K kill…", "E stderr", "⏎ step log"],
        ),
        ("TARGETS", &["⏎ story: verdicts, diffs"]),
        ("WORKER", &[]),
        ("PERF EVENTS", &["x hide/show kind in tail"]),
        (
            "EVIDENCE",
            &["/ search", "n/N next/prev match", "f follow", "o other log"],
        ),
    ];
    let runs = tempfile::tempdir().unwrap();
    let tmux = open_console("pd-bar-keys", runs.path(), 200, 50);
    let bar = |s: &str| {
        s.lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_owned()
    };
    // The focused pane's title is marked `▸`.
    let focused = |s: &str| {
        PANE_KEYS
            .iter()
            .find(|(name, _)| s.contains(&format!("▸ {name} ")))
            .map(|(name, _)| *name)
    };
    let drawn = |s: &str| bar(s).contains("? help, all keys");
    let mut seen = Vec::new();
    let mut screen = tmux.wait_for("the bar", Duration::from_secs(10), drawn);
    // Tab walks every pane (panes this test does not know are passed over).
    for _ in 0..PANE_KEYS.len() + 4 {
        if let Some(name) = focused(&screen) {
            let last = bar(&screen);
            assert!(last.contains("? help, all keys"), "{name}: {last}");
            for (pane, keys) in PANE_KEYS {
                for key in *keys {
                    assert_eq!(
                        last.contains(key),
                        *pane == name,
                        "{name} focused; `{key}` is {pane}'s key; bar: {last}"
                    );
                }
            }
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        if seen.len() == PANE_KEYS.len() {
            break;
        }
        let before = focused(&screen);
        tmux.keys(&["Tab"]);
        screen = tmux.wait_for("the focus to move", Duration::from_secs(10), |s| {
            drawn(s) && (focused(s) != before || before.is_none())
        });
    }
    assert_eq!(seen.len(), PANE_KEYS.len(), "panes focused: {seen:?}");
    quit(&tmux);
}

/// A past run directory as a run leaves it (manifest and report; no evidence needed to list
/// or open it).
fn fixture_run(runs: &Path, id: &str, started_ms: f64, chess: &str) {
    let dir = runs.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::json!({"run_id": id, "started_ms": started_ms,
                           "agent": {"model": "scripted-demo"}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("report.json"),
        serde_json::json!({"passed": chess == "pass", "targets": [
            {"name": "calendar", "status": "pass", "evaluated": true},
            {"name": "chess", "status": chess, "evaluated": true}]})
        .to_string(),
    )
    .unwrap();
}

/// The screen line the runs pane's cursor (`▶`) is on, and the row of run `id` (the line
/// that starts with it after the border, cursor and mark, not the header naming marked runs).
fn run_lines(screen: &str, id: &str) -> (Option<usize>, Option<usize>) {
    let lines: Vec<&str> = screen.lines().collect();
    (
        lines.iter().position(|l| l.contains('▶')),
        lines
            .iter()
            .position(|l| l.trim_start_matches(['│', '▶', '◆', ' ']).starts_with(id)),
    )
}

/// Moves the runs pane's cursor (`▶`) onto the row naming `id`: one `j` or `k` at a time,
/// each waited for until the cursor's line has moved (the header's clock changes the screen
/// every frame, so only the cursor's line tells a key was handled).
fn select_run(tmux: &Tmux, id: &str) {
    for _ in 0..6 {
        let (cursor, row) = run_lines(&tmux.capture(), id);
        let (Some(cursor), Some(row)) = (cursor, row) else {
            panic!("no cursor or no {id} on:\n{}", tmux.capture());
        };
        if cursor == row {
            return;
        }
        tmux.keys(&[if cursor < row { "j" } else { "k" }]);
        tmux.wait_for("the cursor to move", Duration::from_secs(10), |s| {
            run_lines(s, id).0 != Some(cursor)
        });
    }
    tmux.wait_for(
        &format!("the cursor on {id}"),
        Duration::from_secs(1),
        |s| {
            let (cursor, row) = run_lines(s, id);
            cursor.is_some() && cursor == row
        },
    );
}

/// U2: the runs pane of the real console — `:runs`, the cursor, Enter on a past run shows its
/// verdict, Esc returns to the live console, two marked runs compare.
#[test]
fn the_runs_pane_opens_a_past_run_returns_with_esc_and_compares_two_marked_runs() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let (older, newer) = ("r-20261129-121500-1111", "r-20261129-133000-2222");
    fixture_run(&runs, older, 1_796_040_900_000.0, "fail");
    fixture_run(&runs, newer, 1_796_045_400_000.0, "pass");
    let tmux = open_console("pd-runs-pane", &runs, 200, 60);
    command(&tmux, "runs");
    tmux.wait_for("the runs pane", Duration::from_secs(10), |s| {
        s.contains("RUNS ·") && s.contains(older) && s.contains(newer)
    });
    select_run(&tmux, older);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the past run opened", Duration::from_secs(10), |s| {
        s.contains(&format!("run {older} · FAILED"))
    });
    let chess = screen.lines().find(|l| l.contains("chess ")).unwrap();
    assert!(chess.contains("FAIL"), "{screen}");
    // Esc: back to the list, then to the live console, which never stopped.
    tmux.keys(&["Escape"]);
    tmux.wait_for("the list again", Duration::from_secs(10), |s| {
        s.contains("RUNS ·") && !s.contains(&format!("run {older} ·"))
    });
    tmux.keys(&["Escape"]);
    tmux.wait_for("the live console", Duration::from_secs(10), |s| {
        !s.contains("RUNS ·") && s.contains("PROCESSES") && s.contains("WORKER")
    });
    // `u` opens the list again; mark both runs and compare them.
    tmux.keys(&["u"]);
    tmux.wait_for("the runs pane", Duration::from_secs(10), |s| {
        s.contains("RUNS ·")
    });
    select_run(&tmux, older);
    tmux.keys(&["Space"]);
    tmux.wait_for("one mark", Duration::from_secs(10), |s| {
        s.contains("marked 1/2")
    });
    select_run(&tmux, newer);
    tmux.keys(&["Space"]);
    tmux.wait_for("two marks", Duration::from_secs(10), |s| {
        s.contains("marked 2/2")
    });
    tmux.keys(&["c"]);
    let screen = tmux.wait_for("the two runs compared", Duration::from_secs(10), |s| {
        s.contains(&format!("A {older} → B {newer}"))
    });
    assert!(
        screen
            .lines()
            .any(|l| l.contains("chess") && l.contains("changed (1 run each")),
        "{screen}"
    );
    tmux.keys(&["Escape"]);
    tmux.keys(&["Escape"]);
    tmux.wait_for("the live console", Duration::from_secs(10), |s| {
        !s.contains("RUNS ·")
    });
    quit(&tmux);
}

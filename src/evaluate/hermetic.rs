//! Hermetic check runs: each check in its own scratch directory (`work`, `home`, `tmp`) and
//! process group, with a cleared environment (`PATH`, a private `HOME` and `TMPDIR`,
//! `C.UTF-8`, and only the variables its manifest entry declares), killed with everything it
//! started at its timeout; its output tail is kept and parsed into named checks.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{
    CHECK_LOCALE, CHECK_OUTPUT_TAIL_BYTES, CheckRun, DEFAULT_CHECK_PATH, EvaluateError, checks,
};
use crate::fixtures::{Fixture, FixtureManifest};

/// A check's scratch directory: `work` (its cwd, holding the check's files and the subject),
/// `home` and `tmp` (its private `HOME` and `TMPDIR`).
pub(super) struct ScratchDirs {
    work: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

impl ScratchDirs {
    pub(super) fn create(root: &Path) -> std::io::Result<Self> {
        let dirs = Self {
            work: root.join("work"),
            home: root.join("home"),
            tmp: root.join("tmp"),
        };
        for d in [&dirs.work, &dirs.home, &dirs.tmp] {
            std::fs::create_dir(d)?;
        }
        Ok(dirs)
    }
}

/// The variables a check declares (`check.env`), resolved against the evaluator's environment:
/// `NAME` when set, else the `NAME=DEFAULT` default (`~/` = the evaluator's `HOME`).
pub(super) fn check_env(fixture: &Fixture) -> Vec<(String, std::ffi::OsString)> {
    let home = std::env::var_os("HOME");
    fixture
        .check
        .env_entries()
        .filter_map(|(name, default)| {
            let value = std::env::var_os(name).or_else(|| {
                let default = default?;
                match (default.strip_prefix("~/"), &home) {
                    (Some(rest), Some(home)) => Some(Path::new(home).join(rest).into_os_string()),
                    (Some(_), None) => None,
                    (None, _) => Some(default.into()),
                }
            })?;
            Some((name.to_owned(), value))
        })
        .collect()
}

/// Runs the check of `fixture` on `bytes` in a fresh scratch directory holding the check's
/// files plus `bytes` saved as the fixture's `module_file`. Failing to start the command is a
/// [`CheckRun`] with `started: false` and the OS error as its output, not an `Err`.
pub(super) async fn run_check_in_scratch(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    check_files: &[(String, Vec<u8>)],
    bytes: &[u8],
    check_timeout: Duration,
) -> Result<CheckRun, EvaluateError> {
    let scratch = tempfile::Builder::new()
        .prefix(&format!("patchdiff-eval-{}-", fixture.target))
        .tempdir()
        .map_err(EvaluateError::Scratch)?;
    let started = Instant::now();
    let mut run = match run_check(fixture, check_files, bytes, scratch.path(), check_timeout).await
    {
        Ok(run) => run,
        Err(e) => CheckRun {
            passed: false,
            exit: format!("could not start: {e}"),
            started: false,
            output: tail(
                &format!(
                    "patchdiff evaluate: the check `{}` could not start in {}: {e}\n",
                    fixture.check.command.join(" "),
                    manifest.resolve(&fixture.check.dir).display()
                ),
                CHECK_OUTPUT_TAIL_BYTES,
            ),
            ms: 0,
            checks: Vec::new(),
            checks_note: None,
        },
    };
    run.ms = started.elapsed().as_millis() as u64;
    Ok(run)
}

/// What a hermetic child printed and how it ended.
pub(super) struct ChildOutput {
    pub(super) exit: String,
    pub(super) passed: bool,
    /// stdout followed by stderr, whole (lossy UTF-8).
    pub(super) text: String,
    pub(super) timed_out: bool,
}

/// Runs `command` in `dirs.work` with the check's hermetic environment: the
/// environment cleared, then `PATH`, `HOME` = `dirs.home`, `TMPDIR` = `dirs.tmp`, `LANG` and
/// `LC_ALL` = [`CHECK_LOCALE`] and the declared variables. Its own process group, killed whole
/// at `timeout`; it dies with the evaluator (kill on drop, `PR_SET_PDEATHSIG`). `extra_file`:
/// read this file of the working directory after the run (a JUnit report).
pub(super) async fn run_hermetic(
    fixture: &Fixture,
    command: &[String],
    dirs: &ScratchDirs,
    timeout: Duration,
    extra_file: Option<&Path>,
) -> std::io::Result<(ChildOutput, Option<String>)> {
    use std::os::unix::process::ExitStatusExt;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty check command"))?;
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_CHECK_PATH.into());
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(&dirs.work)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &dirs.home)
        .env("TMPDIR", &dirs.tmp)
        .env("LANG", CHECK_LOCALE)
        .env("LC_ALL", CHECK_LOCALE)
        .envs(check_env(fixture))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout stops whatever the check started too
        // (`node --test` runs each test file in a child).
        .process_group(0)
        .kill_on_drop(true);
    crate::waymark::process::die_with_parent(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("`{program}`: {e}")))?;
    let group = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => out?,
        Err(_) => {
            // Dropping the wait killed the leader (kill_on_drop); the rest of its group goes too.
            if let Some(group) = group {
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
            let exit = format!("timed out after {} s", timeout.as_secs());
            return Ok((
                ChildOutput {
                    passed: false,
                    text: exit.clone(),
                    exit,
                    timed_out: true,
                },
                None,
            ));
        }
    };
    // Whatever the leader left running in its group goes with it.
    if let Some(group) = group {
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let exit = match (output.status.code(), output.status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "unknown exit".to_owned(),
    };
    let extra = extra_file.and_then(|rel| {
        crate::owned_fs::read_regular_bounded(&dirs.work.join(rel), 16 << 20)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    });
    Ok((
        ChildOutput {
            passed: output.status.success(),
            exit,
            text,
            timed_out: false,
        },
        extra,
    ))
}

/// Runs `fixture`'s check on `exported` in `scratch`: the check's files (authenticated by
/// [`FixtureManifest::check_files`]) are written there, then the export as `module_file`.
pub(super) async fn run_check(
    fixture: &Fixture,
    check_files: &[(String, Vec<u8>)],
    exported: &[u8],
    scratch: &Path,
    check_timeout: Duration,
) -> std::io::Result<CheckRun> {
    let dirs = ScratchDirs::create(scratch)?;
    for (name, bytes) in check_files {
        std::fs::write(dirs.work.join(name), bytes)?;
    }
    std::fs::write(dirs.work.join(&fixture.module_file), exported)?;
    let (out, junit) = run_hermetic(
        fixture,
        &fixture.check.command,
        &dirs,
        check_timeout,
        fixture.check.junit_file.as_deref(),
    )
    .await?;
    let parsed = match fixture.check.report {
        Some(_) if out.timed_out => checks::Parsed {
            checks: Vec::new(),
            note: Some("the check timed out; no named checks".to_owned()),
        },
        Some(report) => checks::parse(report, &out.text, junit.as_deref()),
        None => checks::Parsed::default(),
    };
    Ok(CheckRun {
        passed: out.passed,
        exit: out.exit,
        started: true,
        output: tail(&out.text, CHECK_OUTPUT_TAIL_BYTES),
        ms: 0,
        checks: parsed.checks,
        checks_note: parsed.note,
    })
}

/// The last `max` bytes of `text`, cut forward to a character boundary.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

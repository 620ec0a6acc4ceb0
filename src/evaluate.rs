//! The independent evaluator (SPEC C6, V3): compares exported bytes with the expected bytes
//! (full-byte) and runs each target's behavioral check command. It reads only the exported files
//! and the fixture manifest — never the database — so it can be run on its own
//! (`patchdiff evaluate`) by someone who trusts nothing else in the run.
//!
//! Before judging an export, each target's check is run as a *control* in the same environment:
//! on the fixture's expected bytes (it must pass) and on the original bytes (it must fail). A
//! control that does not hold means the check or its environment is broken (a missing toolchain,
//! a command that cannot start), so the target is [`Status::InfraError`] — never the agent's
//! [`Status::Fail`]. With `repeat` > 1 the check on the export runs that many times; verdicts that
//! differ make the target [`Status::Flaky`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::fixtures::{Fixture, FixtureManifest, read_pinned, sha256_hex};

/// Behavioral checks that run longer than this (120 s) are killed, with every process they
/// started (the check runs in its own process group), and count as failed runs; `patchdiff
/// evaluate --check-timeout SECONDS` changes it.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// Upper bound of `--check-timeout`, in seconds (one hour).
pub const MAX_CHECK_TIMEOUT_SECS: u64 = 3600;
/// Bytes of a check's combined output kept in the report (the tail): 4 KiB.
pub const CHECK_OUTPUT_TAIL_BYTES: usize = 4096;
/// Upper bound of `evaluate --repeat K`.
pub const MAX_REPEAT: u32 = 100;

/// A target's verdict class.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Full-byte equal and the check passed on every run, with both controls holding.
    Pass,
    /// The agent's export is wrong: bytes differ or the (working) check fails on it.
    Fail,
    /// The check or its environment is broken (a control did not hold, or the check could not
    /// start); says nothing about the agent.
    InfraError,
    /// Repeated runs of the check on the same bytes gave different verdicts.
    Flaky,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "FAIL",
            Self::InfraError => "infra_error",
            Self::Flaky => "flaky",
        }
    }
}

/// One run of a check command.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckRun {
    /// Exit status 0.
    pub passed: bool,
    /// `exit N`, `signal N`, `timed out after 120 s` or `could not start: <error>`.
    pub exit: String,
    /// Whether the command started at all.
    pub started: bool,
    /// The last [`CHECK_OUTPUT_TAIL_BYTES`] of stdout followed by stderr.
    pub output: String,
    pub ms: u64,
}

/// The two controls of one target (V3).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Controls {
    /// The check on the fixture's expected bytes; must pass.
    pub expected: CheckRun,
    /// The check on the fixture's original bytes; must fail.
    pub original: CheckRun,
}

impl Controls {
    /// Why the controls do not hold, with the run that shows it; `None` when they hold.
    pub fn failure(&self) -> Option<(String, &CheckRun)> {
        if !self.expected.passed {
            Some((
                format!(
                    "control failed: the check does not pass on the expected bytes ({})",
                    self.expected.exit
                ),
                &self.expected,
            ))
        } else if !self.original.started {
            Some((
                format!(
                    "control failed: the check did not run on the original bytes ({})",
                    self.original.exit
                ),
                &self.original,
            ))
        } else if self.original.passed {
            Some((
                "control failed: the check passes on the original bytes, so it cannot tell a \
                 solved target from an unsolved one"
                    .to_owned(),
                &self.original,
            ))
        } else {
            None
        }
    }
}

/// One target's verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetVerdict {
    pub name: String,
    pub status: Status,
    /// Exported bytes equal the expected bytes exactly.
    pub full_byte: bool,
    /// The behavioral check passed on the exported bytes on every run, with its controls holding.
    pub behavioral: bool,
    /// Verdict of each run of the check on the export (`--repeat`); empty when it did not run.
    pub behavioral_runs: Vec<bool>,
    /// SHA-256 of the exported file, or null when it was missing.
    pub exported_sha256: Option<String>,
    pub expected_sha256: String,
    /// Why the target is not `pass` (missing export, hash difference, control, exit status).
    pub notes: Vec<String>,
    /// Exit status of the run that explains a non-pass (a failed control, else the export's
    /// first failing run); null on pass.
    pub check_exit: Option<String>,
    /// Tail (≤ 4 KiB) of that run's stdout+stderr; for a pass, the last run's.
    pub check_output: String,
    pub check_ms: u64,
    /// The controls; null when they could not be prepared.
    pub controls: Option<Controls>,
}

impl TargetVerdict {
    /// Both checks passed (status `pass`).
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }
}

/// The evaluator's report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evaluation {
    pub targets: Vec<TargetVerdict>,
    pub passed: usize,
    pub total: usize,
    #[serde(default)]
    pub infra_errors: usize,
    #[serde(default)]
    pub flaky: usize,
    /// Runs of each check on the export (`--repeat`).
    #[serde(default = "one")]
    pub repeat: u32,
}

fn one() -> u32 {
    1
}

impl Evaluation {
    /// Every target passed both checks.
    pub fn all_passed(&self) -> bool {
        self.passed == self.total && self.total > 0
    }
}

/// The controls alone (`patchdiff evaluate --controls-only`), as the console's preflight runs
/// them before the agent starts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ControlReport {
    pub targets: Vec<TargetControls>,
    /// Every target's controls hold.
    pub hold: bool,
}

/// One target's controls.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetControls {
    pub name: String,
    pub hold: bool,
    /// Why not, when they do not hold.
    pub reason: Option<String>,
    /// Exit status of the run that shows it.
    pub check_exit: Option<String>,
    /// Its output tail (≤ 4 KiB).
    pub check_output: String,
    pub controls: Controls,
}

/// Errors that stop the evaluator before it can judge any target.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    #[error(transparent)]
    Manifest(#[from] crate::fixtures::FixtureError),
    #[error("export directory {0} does not exist or is not a directory")]
    NoExports(PathBuf),
    #[error("cannot prepare a scratch directory for the checks: {0}")]
    Scratch(std::io::Error),
    #[error("--repeat {0}: must be between 1 and {MAX_REPEAT}")]
    Repeat(u32),
    #[error(
        "--check-timeout {0}: must be a whole number of seconds between 1 and {MAX_CHECK_TIMEOUT_SECS}"
    )]
    CheckTimeout(u64),
}

/// Validates a `--check-timeout` in seconds: 1 to [`MAX_CHECK_TIMEOUT_SECS`] (3600), else
/// [`EvaluateError::CheckTimeout`].
pub fn check_timeout_from_secs(secs: u64) -> Result<Duration, EvaluateError> {
    if (1..=MAX_CHECK_TIMEOUT_SECS).contains(&secs) {
        Ok(Duration::from_secs(secs))
    } else {
        Err(EvaluateError::CheckTimeout(secs))
    }
}

/// Runs both controls of every fixture (expected bytes must pass, original must fail).
pub async fn evaluate_controls(manifest: &FixtureManifest) -> Result<ControlReport, EvaluateError> {
    evaluate_controls_with_timeout(manifest, CHECK_TIMEOUT).await
}

/// [`evaluate_controls`] with each check run killed after `check_timeout`.
pub async fn evaluate_controls_with_timeout(
    manifest: &FixtureManifest,
    check_timeout: Duration,
) -> Result<ControlReport, EvaluateError> {
    let mut targets = Vec::with_capacity(manifest.fixtures.len());
    for fixture in &manifest.fixtures {
        let controls = run_controls(manifest, fixture, check_timeout).await?;
        let failure = controls.failure().map(|(r, run)| (r, run.clone()));
        targets.push(TargetControls {
            name: fixture.target.clone(),
            hold: failure.is_none(),
            reason: failure.as_ref().map(|(r, _)| r.clone()),
            check_exit: failure.as_ref().map(|(_, run)| run.exit.clone()),
            check_output: failure
                .as_ref()
                .map(|(_, run)| run.output.clone())
                .unwrap_or_default(),
            controls,
        });
    }
    let hold = targets.iter().all(|t| t.hold);
    Ok(ControlReport { targets, hold })
}

async fn run_controls(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    check_timeout: Duration,
) -> Result<Controls, EvaluateError> {
    let expected = read_pinned(
        &fixture.target,
        &manifest.resolve(&fixture.expected),
        &fixture.expected_sha256,
    )?;
    let original = read_pinned(
        &fixture.target,
        &manifest.resolve(&fixture.original),
        &fixture.sha256,
    )?;
    Ok(Controls {
        expected: run_check_in_scratch(manifest, fixture, &expected, check_timeout).await?,
        original: run_check_in_scratch(manifest, fixture, &original, check_timeout).await?,
    })
}

/// Evaluates every fixture of `manifest` against `<exports>/<module_file>`, running each check on
/// the export `repeat` times (1 = once) after its controls.
///
/// Expected files are authenticated against the manifest's `expected_sha256` first; a tampered
/// expected file fails the run. A missing export fails that target only.
pub async fn evaluate(
    manifest: &FixtureManifest,
    exports: &Path,
    repeat: u32,
) -> Result<Evaluation, EvaluateError> {
    evaluate_with_timeout(manifest, exports, repeat, CHECK_TIMEOUT).await
}

/// [`evaluate`] with each check run (controls and export) killed after `check_timeout`; a run
/// that times out has `exit` = `timed out after N s` and fails.
pub async fn evaluate_with_timeout(
    manifest: &FixtureManifest,
    exports: &Path,
    repeat: u32,
    check_timeout: Duration,
) -> Result<Evaluation, EvaluateError> {
    if !(1..=MAX_REPEAT).contains(&repeat) {
        return Err(EvaluateError::Repeat(repeat));
    }
    if !exports.is_dir() {
        return Err(EvaluateError::NoExports(exports.to_path_buf()));
    }
    let mut targets = Vec::with_capacity(manifest.fixtures.len());
    for fixture in &manifest.fixtures {
        targets.push(evaluate_target(manifest, fixture, exports, repeat, check_timeout).await?);
    }
    let count = |s: Status| targets.iter().filter(|t| t.status == s).count();
    Ok(Evaluation {
        passed: count(Status::Pass),
        infra_errors: count(Status::InfraError),
        flaky: count(Status::Flaky),
        total: targets.len(),
        targets,
        repeat,
    })
}

/// One target's verdict (V3): the export against the expected bytes, the controls, then the
/// check `repeat` times on the export, each under `check_timeout`. Errors: the pinned expected
/// bytes cannot be read or a scratch directory cannot be prepared.
async fn evaluate_target(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    exports: &Path,
    repeat: u32,
    check_timeout: Duration,
) -> Result<TargetVerdict, EvaluateError> {
    let expected = read_pinned(
        &fixture.target,
        &manifest.resolve(&fixture.expected),
        &fixture.expected_sha256,
    )?;
    let started = Instant::now();
    let mut verdict = TargetVerdict {
        name: fixture.target.clone(),
        status: Status::Fail,
        full_byte: false,
        behavioral: false,
        behavioral_runs: Vec::new(),
        exported_sha256: None,
        expected_sha256: fixture.expected_sha256.clone(),
        notes: Vec::new(),
        check_exit: None,
        check_output: String::new(),
        check_ms: 0,
        controls: None,
    };
    let exported = compare_export(&mut verdict, &exports.join(&fixture.module_file), &expected);
    // V3: the controls come first; if they do not hold, the export is not judged at all.
    let controls = run_controls(manifest, fixture, check_timeout).await?;
    if let Some((reason, run)) = controls.failure() {
        verdict.status = Status::InfraError;
        verdict.notes.push(format!(
            "infra_error: {reason}; `{}` — the check or its environment is broken, the agent is \
             not judged",
            fixture.check.command.join(" ")
        ));
        verdict.check_exit = Some(run.exit.clone());
        verdict.check_output = run.output.clone();
        verdict.controls = Some(controls);
        verdict.check_ms = started.elapsed().as_millis() as u64;
        return Ok(verdict);
    }
    verdict.controls = Some(controls);
    if let Some(exported) = exported {
        let mut runs = Vec::with_capacity(repeat as usize);
        for _ in 0..repeat {
            runs.push(run_check_in_scratch(manifest, fixture, &exported, check_timeout).await?);
        }
        judge_runs(&mut verdict, &runs, &fixture.check.command.join(" "));
    }
    verdict.check_ms = started.elapsed().as_millis() as u64;
    Ok(verdict)
}

/// Reads the export at `path` into `verdict`: its SHA-256, whether it equals `expected` (else a
/// note with the first difference), or a note that it is missing. Returns the bytes.
fn compare_export(verdict: &mut TargetVerdict, path: &Path, expected: &[u8]) -> Option<Vec<u8>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            verdict
                .notes
                .push(format!("no export at {}: {e}", path.display()));
            return None;
        }
    };
    verdict.exported_sha256 = Some(sha256_hex(&bytes));
    verdict.full_byte = bytes == expected;
    if !verdict.full_byte {
        verdict.notes.push(first_difference(&bytes, expected));
    }
    Some(bytes)
}

/// The verdict from the check's runs on the export (controls held): `infra_error` when a run
/// could not start, `flaky` when runs disagree or the check failed on the expected bytes,
/// `fail` when it failed or the bytes differ, else `pass`. The output shown is the first
/// failing run's, else the last run's.
fn judge_runs(verdict: &mut TargetVerdict, runs: &[CheckRun], command: &str) {
    verdict.behavioral_runs = runs.iter().map(|r| r.passed).collect();
    let explaining = runs.iter().find(|r| !r.passed).or(runs.last());
    if let Some(run) = explaining {
        verdict.check_output = run.output.clone();
        if !run.passed {
            verdict.check_exit = Some(run.exit.clone());
        }
    }
    let exit = explaining.map_or("", |r| r.exit.as_str());
    let all_pass = runs.iter().all(|r| r.passed);
    let none_pass = runs.iter().all(|r| !r.passed);
    verdict.behavioral = all_pass;
    let (status, note) = if runs.iter().any(|r| !r.started) {
        (
            Status::InfraError,
            Some(format!(
                "infra_error: the check `{command}` could not start on the export ({exit}), \
                 though its controls ran"
            )),
        )
    } else if !all_pass && !none_pass {
        (
            Status::Flaky,
            Some(format!(
                "flaky: the check `{command}` passed {} of {} runs on the same bytes",
                runs.iter().filter(|r| r.passed).count(),
                runs.len()
            )),
        )
    } else if !all_pass && verdict.full_byte {
        // The bytes are the expected bytes, on which the control passed: the check, not the
        // export, changed its mind.
        (
            Status::Flaky,
            Some(format!(
                "flaky: the check `{command}` failed on bytes equal to the expected bytes, on \
                 which its control passed"
            )),
        )
    } else if !all_pass {
        (
            Status::Fail,
            Some(format!("behavioral check `{command}` failed ({exit})")),
        )
    } else if verdict.full_byte {
        (Status::Pass, None)
    } else {
        (Status::Fail, None)
    };
    verdict.status = status;
    verdict.notes.extend(note);
}

/// Runs the check of `fixture` on `bytes` in a fresh scratch directory holding the check's
/// files plus `bytes` saved as the fixture's `module_file`. Failing to start the command is a
/// [`CheckRun`] with `started: false` and the OS error as its output, not an `Err`.
async fn run_check_in_scratch(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    bytes: &[u8],
    check_timeout: Duration,
) -> Result<CheckRun, EvaluateError> {
    let scratch = tempfile::Builder::new()
        .prefix(&format!("patchdiff-eval-{}-", fixture.target))
        .tempdir()
        .map_err(EvaluateError::Scratch)?;
    let started = Instant::now();
    let mut run = match run_check(manifest, fixture, bytes, scratch.path(), check_timeout).await {
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
        },
    };
    run.ms = started.elapsed().as_millis() as u64;
    Ok(run)
}

async fn run_check(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    exported: &[u8],
    scratch: &Path,
    check_timeout: Duration,
) -> std::io::Result<CheckRun> {
    use std::os::unix::process::ExitStatusExt;
    let check_dir = manifest.resolve(&fixture.check.dir);
    for entry in std::fs::read_dir(&check_dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), scratch.join(entry.file_name()))?;
        }
    }
    std::fs::write(scratch.join(&fixture.module_file), exported)?;
    let (program, args) = fixture
        .check
        .command
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty check command"))?;
    let child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout stops whatever the check started too
        // (`node --test` runs each test file in a child).
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("`{program}`: {e}")))?;
    let group = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let output = match tokio::time::timeout(check_timeout, child.wait_with_output()).await {
        Ok(out) => out?,
        Err(_) => {
            // Dropping the wait killed the leader (kill_on_drop); the rest of its group goes too.
            if let Some(group) = group {
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
            let exit = format!("timed out after {} s", check_timeout.as_secs());
            return Ok(CheckRun {
                passed: false,
                output: exit.clone(),
                exit,
                started: true,
                ms: 0,
            });
        }
    };
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let exit = match (output.status.code(), output.status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "unknown exit".to_owned(),
    };
    Ok(CheckRun {
        passed: output.status.success(),
        exit,
        started: true,
        output: tail(&text, CHECK_OUTPUT_TAIL_BYTES),
        ms: 0,
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

/// One line of a check's output for one-line summaries: the first line mentioning an error
/// (rustup, rustc, node and python put the cause there), else the last non-empty line.
pub fn headline(output: &str) -> &str {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    lines
        .clone()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or_else(|| lines.next_back())
        .unwrap_or("")
}
/// Describes where two byte strings first differ, as `line L, byte B`.
fn first_difference(actual: &[u8], expected: &[u8]) -> String {
    let at = actual
        .iter()
        .zip(expected)
        .position(|(a, e)| a != e)
        .unwrap_or(actual.len().min(expected.len()));
    let line = expected[..at.min(expected.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    format!(
        "exported bytes differ from expected at byte {at} (line {line}); exported {} bytes, expected {}",
        actual.len(),
        expected.len()
    )
}

/// Renders the evaluation as text: one line per target, then, for every target that did not
/// pass, its check's exit status and output tail (≤ 4 KiB) indented.
pub fn render_text(evaluation: &Evaluation) -> String {
    let mut out = String::new();
    for t in &evaluation.targets {
        out.push_str(&format!(
            "{:<14} full-byte {:<4} behavioral {:<4} {:<11} {}\n",
            t.name,
            if t.full_byte { "pass" } else { "FAIL" },
            if t.behavioral { "pass" } else { "FAIL" },
            t.status.as_str(),
            t.notes.join("; ")
        ));
    }
    for t in evaluation.targets.iter().filter(|t| !t.passed()) {
        out.push_str(&check_detail(
            &t.name,
            t.check_exit.as_deref(),
            &t.check_output,
        ));
    }
    out.push_str(&format!(
        "{}/{} targets pass both checks",
        evaluation.passed, evaluation.total
    ));
    if evaluation.infra_errors > 0 {
        out.push_str(&format!(
            " · {} infra_error (the check environment, not the agent)",
            evaluation.infra_errors
        ));
    }
    if evaluation.flaky > 0 {
        out.push_str(&format!(" · {} flaky", evaluation.flaky));
    }
    out.push('\n');
    out
}

/// A non-passing check's exit status and output tail, indented, for text reports.
pub fn check_detail(name: &str, exit: Option<&str>, output: &str) -> String {
    let mut out = format!(
        "\n{name}: check {}; last {} KiB of its output:\n",
        exit.unwrap_or("did not run"),
        CHECK_OUTPUT_TAIL_BYTES / 1024
    );
    if output.trim().is_empty() {
        out.push_str("    (no output)\n");
    }
    for line in output.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_difference_names_line_and_byte() {
        let note = first_difference(b"a\nbX\n", b"a\nbc\n");
        assert!(note.contains("byte 3 (line 2)"), "{note}");
    }

    fn run(passed: bool, started: bool, exit: &str) -> CheckRun {
        CheckRun {
            passed,
            exit: exit.into(),
            started,
            output: format!("output of {exit}"),
            ms: 1,
        }
    }

    fn verdict(full_byte: bool) -> TargetVerdict {
        TargetVerdict {
            name: "t".into(),
            status: Status::Fail,
            full_byte,
            behavioral: false,
            behavioral_runs: Vec::new(),
            exported_sha256: None,
            expected_sha256: String::new(),
            notes: Vec::new(),
            check_exit: None,
            check_output: String::new(),
            check_ms: 0,
            controls: None,
        }
    }

    /// V3's verdict table over the check's runs on the export (controls held).
    #[test]
    fn judge_runs_decides_the_status_from_the_runs_and_the_bytes() {
        let ok = || run(true, true, "exit 0");
        let failed = || run(false, true, "exit 1");
        let unstarted = || run(false, false, "could not start: ENOENT");
        let cases = [
            (
                "all pass, same bytes",
                true,
                vec![ok(), ok()],
                Status::Pass,
                None,
                None,
            ),
            (
                "all pass, other bytes",
                false,
                vec![ok()],
                Status::Fail,
                None,
                None,
            ),
            (
                "all fail, other bytes",
                false,
                vec![failed(), failed()],
                Status::Fail,
                Some("behavioral check `node t.js` failed (exit 1)"),
                Some("exit 1"),
            ),
            (
                "fails on the expected bytes",
                true,
                vec![failed()],
                Status::Flaky,
                Some(
                    "flaky: the check `node t.js` failed on bytes equal to the expected bytes, on which its control passed",
                ),
                Some("exit 1"),
            ),
            (
                "runs disagree",
                false,
                vec![ok(), failed(), ok()],
                Status::Flaky,
                Some("flaky: the check `node t.js` passed 2 of 3 runs on the same bytes"),
                Some("exit 1"),
            ),
            (
                "could not start",
                false,
                vec![unstarted()],
                Status::InfraError,
                Some(
                    "infra_error: the check `node t.js` could not start on the export (could not start: ENOENT), though its controls ran",
                ),
                Some("could not start: ENOENT"),
            ),
        ];
        for (case, full_byte, runs, status, note, exit) in cases {
            let mut v = verdict(full_byte);
            judge_runs(&mut v, &runs, "node t.js");
            assert_eq!(v.status, status, "{case}");
            assert_eq!(v.notes.first().map(String::as_str), note, "{case}");
            assert_eq!(v.check_exit.as_deref(), exit, "{case}");
            let all_passed = matches!(case, "all pass, same bytes" | "all pass, other bytes");
            assert_eq!(v.behavioral, all_passed, "{case}");
            assert_eq!(v.behavioral_runs.len(), runs.len(), "{case}");
            // The output shown is the first failing run's, else the last run's.
            let shown = runs.iter().find(|r| !r.passed).or(runs.last()).unwrap();
            assert_eq!(v.check_output, shown.output, "{case}");
        }
    }

    #[test]
    fn tail_keeps_char_boundaries() {
        let s = "界界界";
        assert_eq!(tail(s, 4), "界");
    }
}

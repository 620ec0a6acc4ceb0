//! The independent evaluator (SPEC C6, V3): runs each target's behavioral check command on the
//! exported bytes and compares them with the expected bytes. It reads only the exported files
//! and the fixture manifest — never the database — so it can be run on its own
//! (`patchdiff evaluate`) by someone who trusts nothing else in the run.
//!
//! **Behaviour decides**: a target is [`Status::Pass`] when its check passes on
//! the export on every repeat with its controls holding. Whether the export is identical to the
//! reference bytes is reported beside it (`full_byte`, with the first difference), and decides
//! only where the run asks for it ([`Require::FullByte`]: `--require full-byte`, the canary's
//! `evaluate require=full-byte`) or the fixture does (`"require_full_byte": true`; every
//! fixture of a schema-1 manifest).
//!
//! Before judging an export, each target's check is run as a *control* in the same environment:
//! on the fixture's expected bytes (it must pass) and on the original bytes (it must fail). A
//! control that does not hold means the check or its environment is broken (a missing toolchain,
//! a command that cannot start), so the target is [`Status::InfraError`] — never the agent's
//! [`Status::Fail`]. Controls that hold are cached under their inputs' digest ([`cache`]).
//! With `repeat` > 1 the check on the export runs that many times; verdicts
//! that differ make the target [`Status::Flaky`].
//!
//! Every check runs hermetically: its own process group in a scratch
//! directory, a cleared environment (`PATH`, a private `HOME` and `TMPDIR`, `C.UTF-8`, and only
//! the variables its manifest entry declares), killed with everything it started at its
//! timeout and when the evaluator dies. Its output is parsed into named checks ([`checks`]).

pub mod cache;
pub mod checks;
mod controls;
mod hermetic;
mod render;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

pub use self::cache::{ControlCache, ControlSource};
pub use self::checks::NamedCheck;
use self::controls::controls_of;
pub use self::controls::{ControlReport, TargetControls, evaluate_controls};
use self::hermetic::run_check_in_scratch;
pub use self::hermetic::tail;
pub use self::render::{check_detail, headline, render_text, target_details, yes_no};
use crate::fixtures::{Fixture, FixtureManifest, read_pinned, sha256_hex};

/// Behavioral checks that run longer than this (120 s) are killed, with every process they
/// started (the check runs in its own process group), and count as failed runs; a fixture's
/// `check.timeout_s` changes it for that check, `patchdiff evaluate --check-timeout SECONDS`
/// (the canary's `evaluate check_timeout=S`) for every check.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// Upper bound of `--check-timeout`, in seconds (one hour).
pub const MAX_CHECK_TIMEOUT_SECS: u64 = 3600;
/// Bytes of a check's combined output kept in the report (the tail): 4 KiB.
pub const CHECK_OUTPUT_TAIL_BYTES: usize = 4096;
/// Upper bound of `evaluate --repeat K`.
pub const MAX_REPEAT: u32 = 100;
/// Upper bound of `--jobs` (checks of different targets run side by side).
pub const MAX_JOBS: usize = 16;
/// The locale every check runs under.
pub const CHECK_LOCALE: &str = "C.UTF-8";
/// `PATH` a check gets when the evaluator has none.
pub const DEFAULT_CHECK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Which rule decides a target's verdict.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum Require {
    /// The check on the export decides; identical bytes are reported beside it.
    #[default]
    #[serde(rename = "behavioral")]
    Behavioral,
    /// The export must also be byte-identical to the reference.
    #[serde(rename = "full-byte")]
    FullByte,
}

impl Require {
    /// `behavioral` or `full-byte`, as the command line and scripts spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Behavioral => "behavioral",
            Self::FullByte => "full-byte",
        }
    }
}

impl std::str::FromStr for Require {
    type Err = String;
    /// `behavioral` (also `behavioural`) or `full-byte`; anything else is refused naming both.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "behavioral" | "behavioural" => Ok(Self::Behavioral),
            "full-byte" => Ok(Self::FullByte),
            other => Err(format!(
                "`{other}` is not a rule: use `behavioral` (the check decides) or `full-byte` \
                 (the bytes must also equal the reference)"
            )),
        }
    }
}

/// A target's verdict class.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The check passed on every run with both controls holding (and, where full-byte is
    /// required, the bytes equal the reference).
    Pass,
    /// The agent's export is wrong: the (working) check fails on it, or full-byte is required
    /// and the bytes differ.
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
    /// Its named sub-tests, parsed from the whole output by the manifest's `check.report`
    ///; empty without one or when nothing parsed.
    #[serde(default)]
    pub checks: Vec<NamedCheck>,
    /// Why named checks are missing (unparseable output), if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_note: Option<String>,
}

impl CheckRun {
    /// Names of its named checks that failed, in order.
    pub fn failing_checks(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.clone())
            .collect()
    }
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

/// One repeat of the check on the export, as the reports list it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RepeatResult {
    pub passed: bool,
    pub exit: String,
    pub ms: u64,
    pub checks: Vec<NamedCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_note: Option<String>,
}

/// One target's verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetVerdict {
    pub name: String,
    pub status: Status,
    /// The rule that decided this target: the run's, or `full-byte` where the fixture requires
    /// it.
    #[serde(default)]
    pub require: Require,
    /// Identical to the reference: exported bytes equal the expected bytes exactly.
    pub full_byte: bool,
    /// Where the export first differs from the reference (`at byte B (line L)` …); null when
    /// identical or missing.
    #[serde(default)]
    pub first_difference: Option<String>,
    /// The behavioral check passed on the exported bytes on every run, with its controls holding.
    pub behavioral: bool,
    /// Verdict of each run of the check on the export (`--repeat`); empty when it did not run.
    pub behavioral_runs: Vec<bool>,
    /// Each run of the check on the export, with its named checks.
    #[serde(default)]
    pub repeats: Vec<RepeatResult>,
    /// The named checks of the run that explains the verdict (the first failing run, else the
    /// last); empty when the check declares no report or its output did not parse.
    #[serde(default)]
    pub checks: Vec<NamedCheck>,
    /// Names of the named checks that failed in any run on the export, in first-seen order.
    #[serde(default)]
    pub failing_checks: Vec<String>,
    /// Why there are no named checks, when the output could not be parsed.
    #[serde(default)]
    pub checks_note: Option<String>,
    /// SHA-256 of the exported file, or null when it was missing.
    pub exported_sha256: Option<String>,
    pub expected_sha256: String,
    /// Why the target is not `pass` (missing export, required bytes differ, control, exit status).
    pub notes: Vec<String>,
    /// Exit status of the run that explains a non-pass (a failed control, else the export's
    /// first failing run); null on pass.
    pub check_exit: Option<String>,
    /// Tail (≤ 4 KiB) of that run's stdout+stderr; for a pass, the last run's.
    pub check_output: String,
    pub check_ms: u64,
    /// The timeout each check run had, in seconds.
    #[serde(default)]
    pub check_timeout_s: u64,
    /// The controls; null when they could not be prepared.
    pub controls: Option<Controls>,
    /// Whether the controls were run now or reused from the cache, with their digest.
    #[serde(default)]
    pub controls_source: Option<ControlSource>,
}

impl TargetVerdict {
    /// The target passed (status `pass`).
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }
}

/// The evaluator's report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evaluation {
    /// The run's rule (`--require`); fixtures may require full-byte on their own.
    #[serde(default = "full_byte_rule")]
    pub require: Require,
    /// One sentence saying which rule decided, as the text report's header shows it.
    #[serde(default)]
    pub rule: String,
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
    /// Targets whose controls ran now / were reused from the cache.
    #[serde(default)]
    pub controls_run: usize,
    #[serde(default)]
    pub controls_reused: usize,
}

fn one() -> u32 {
    1
}

/// Reports written before the rule was recorded were judged by full-byte equality too.
fn full_byte_rule() -> Require {
    Require::FullByte
}

impl Evaluation {
    /// Every target passed.
    pub fn all_passed(&self) -> bool {
        self.passed == self.total && self.total > 0
    }
}

/// The header sentence: which rule decided, and which fixtures required full-byte on their own.
pub fn rule_sentence(require: Require, fixture_full_byte: &[String]) -> String {
    match require {
        Require::FullByte => "decided by: full-byte (the check must pass and the export must be \
                              identical to the reference)"
            .to_owned(),
        Require::Behavioral if fixture_full_byte.is_empty() => {
            "decided by: behaviour (the check on the export, controls held); identity with the \
             reference is reported beside it"
                .to_owned()
        }
        Require::Behavioral => format!(
            "decided by: behaviour (the check on the export, controls held); full-byte where the \
             manifest requires it ({}); identity with the reference is reported beside it",
            fixture_full_byte.join(", ")
        ),
    }
}

/// How one evaluation runs.
#[derive(Debug, Clone)]
pub struct EvaluateOptions {
    /// Runs of each check on the export, 1 to [`MAX_REPEAT`].
    pub repeat: u32,
    /// The run's rule.
    pub require: Require,
    /// Every check's timeout, overriding the fixtures' `check.timeout_s`; `None` = each
    /// fixture's, else [`CHECK_TIMEOUT`].
    pub check_timeout: Option<Duration>,
    /// Where controls are cached; `None` = no cache (always run).
    pub control_cache: Option<PathBuf>,
    /// Run the controls even when cached (and store the new result).
    pub fresh_controls: bool,
    /// Targets evaluated side by side, 1 to [`MAX_JOBS`].
    pub jobs: usize,
}

impl Default for EvaluateOptions {
    fn default() -> Self {
        Self {
            repeat: 1,
            require: Require::Behavioral,
            check_timeout: None,
            control_cache: None,
            fresh_controls: false,
            jobs: default_jobs(),
        }
    }
}

/// Targets evaluated side by side by default: the available parallelism, at most 4.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4)
}

impl EvaluateOptions {
    fn timeout_for(&self, fixture: &Fixture) -> Duration {
        self.check_timeout
            .or(fixture.check.timeout_s.map(Duration::from_secs))
            .unwrap_or(CHECK_TIMEOUT)
    }

    fn cache(&self) -> Option<ControlCache> {
        self.control_cache.as_ref().map(ControlCache::new)
    }
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
    #[error("--jobs {0}: must be between 1 and {MAX_JOBS}")]
    Jobs(usize),
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

/// Evaluates every fixture of `manifest` against `<exports>/<module_file>` (see
/// [`evaluate_with`]) with the default options and `repeat` runs on each export.
pub async fn evaluate(
    manifest: &FixtureManifest,
    exports: &Path,
    repeat: u32,
) -> Result<Evaluation, EvaluateError> {
    let options = EvaluateOptions {
        repeat,
        ..EvaluateOptions::default()
    };
    evaluate_with(manifest, exports, &options).await
}

/// Evaluates every fixture of `manifest` against `<exports>/<module_file>`: each target's
/// controls, then its check `options.repeat` times on the export, targets side by side
/// (`options.jobs`), in manifest order in the report.
///
/// Expected files are authenticated against the manifest's `expected_sha256` first; a tampered
/// expected file fails the run. A missing export fails that target only. Errors: `repeat` or
/// `jobs` out of range, no export directory, a pinned file unreadable or tampered, no scratch
/// directory.
pub async fn evaluate_with(
    manifest: &FixtureManifest,
    exports: &Path,
    options: &EvaluateOptions,
) -> Result<Evaluation, EvaluateError> {
    if !(1..=MAX_REPEAT).contains(&options.repeat) {
        return Err(EvaluateError::Repeat(options.repeat));
    }
    if !(1..=MAX_JOBS).contains(&options.jobs) {
        return Err(EvaluateError::Jobs(options.jobs));
    }
    if !exports.is_dir() {
        return Err(EvaluateError::NoExports(exports.to_path_buf()));
    }
    let results: Vec<Result<TargetVerdict, EvaluateError>> =
        // By index: a closure taking `&Fixture` gives a future the compiler cannot prove `Send`
        // for every lifetime, and the console runs a comparison — whose report verifies and may
        // re-evaluate member runs — on a task that must be `Send`.
        futures::stream::iter(0..manifest.fixtures.len())
            .map(|i| evaluate_target(manifest, &manifest.fixtures[i], exports, options))
            .buffered(options.jobs)
            .collect()
            .await;
    let targets = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let count = |s: Status| targets.iter().filter(|t| t.status == s).count();
    let source_count = |how: &str| {
        targets
            .iter()
            .filter(|t| t.controls_source.as_ref().is_some_and(|s| s.how == how))
            .count()
    };
    let fixture_full_byte: Vec<String> = manifest
        .fixtures
        .iter()
        .filter(|f| f.requires_full_byte())
        .map(|f| f.target.clone())
        .collect();
    Ok(Evaluation {
        require: options.require,
        rule: rule_sentence(options.require, &fixture_full_byte),
        passed: count(Status::Pass),
        infra_errors: count(Status::InfraError),
        flaky: count(Status::Flaky),
        total: targets.len(),
        controls_run: source_count("run"),
        controls_reused: source_count("reused"),
        targets,
        repeat: options.repeat,
    })
}

/// One target's verdict (V3): the export against the expected bytes, the controls, then the
/// check `repeat` times on the export. Errors: the pinned expected bytes cannot be read or a
/// scratch directory cannot be prepared.
async fn evaluate_target(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    exports: &Path,
    options: &EvaluateOptions,
) -> Result<TargetVerdict, EvaluateError> {
    let expected = read_pinned(
        &fixture.target,
        &manifest.resolve(&fixture.expected),
        &fixture.expected_sha256,
    )?;
    let started = Instant::now();
    let timeout = options.timeout_for(fixture);
    let require = if fixture.requires_full_byte() {
        Require::FullByte
    } else {
        options.require
    };
    let mut verdict = TargetVerdict {
        name: fixture.target.clone(),
        status: Status::Fail,
        require,
        full_byte: false,
        first_difference: None,
        behavioral: false,
        behavioral_runs: Vec::new(),
        repeats: Vec::new(),
        checks: Vec::new(),
        failing_checks: Vec::new(),
        checks_note: None,
        exported_sha256: None,
        expected_sha256: fixture.expected_sha256.clone(),
        notes: Vec::new(),
        check_exit: None,
        check_output: String::new(),
        check_ms: 0,
        check_timeout_s: timeout.as_secs(),
        controls: None,
        controls_source: None,
    };
    let exported = compare_export(&mut verdict, &exports.join(&fixture.module_file), &expected);
    // The check's files, authenticated against their pins (schema 3) before anything runs.
    let check_files = manifest.check_files(fixture)?;
    // V3: the controls come first; if they do not hold, the export is not judged at all.
    let (controls, source) = controls_of(manifest, fixture, &check_files, options).await?;
    verdict.controls_source = Some(source);
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
        let mut runs = Vec::with_capacity(options.repeat as usize);
        for _ in 0..options.repeat {
            runs.push(
                run_check_in_scratch(manifest, fixture, &check_files, &exported, timeout).await?,
            );
        }
        judge_runs(&mut verdict, &runs, &fixture.check.command.join(" "));
    }
    verdict.check_ms = started.elapsed().as_millis() as u64;
    Ok(verdict)
}

/// Reads the export at `path` into `verdict`: its SHA-256, whether it equals `expected` (else
/// its first difference), or a note that it is missing. Returns the bytes.
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
        verdict.first_difference = Some(first_difference(&bytes, expected));
    }
    Some(bytes)
}

/// The verdict from the check's runs on the export (controls held): `infra_error` when a run
/// could not start, `flaky` when runs disagree or the check failed on the expected bytes,
/// `fail` when it failed (or full-byte is required and the bytes differ), else `pass`. The
/// output and named checks shown are the first failing run's, else the last run's.
fn judge_runs(verdict: &mut TargetVerdict, runs: &[CheckRun], command: &str) {
    verdict.behavioral_runs = runs.iter().map(|r| r.passed).collect();
    verdict.repeats = runs
        .iter()
        .map(|r| RepeatResult {
            passed: r.passed,
            exit: r.exit.clone(),
            ms: r.ms,
            checks: r.checks.clone(),
            checks_note: r.checks_note.clone(),
        })
        .collect();
    for name in runs.iter().flat_map(CheckRun::failing_checks) {
        if !verdict.failing_checks.contains(&name) {
            verdict.failing_checks.push(name);
        }
    }
    let explaining = runs.iter().find(|r| !r.passed).or(runs.last());
    if let Some(run) = explaining {
        verdict.check_output = run.output.clone();
        verdict.checks = run.checks.clone();
        verdict.checks_note = run.checks_note.clone();
        if !run.passed {
            verdict.check_exit = Some(run.exit.clone());
        }
    }
    let exit = explaining.map_or("", |r| r.exit.as_str());
    let all_pass = runs.iter().all(|r| r.passed);
    let none_pass = runs.iter().all(|r| !r.passed);
    verdict.behavioral = all_pass;
    let failing = if verdict.failing_checks.is_empty() {
        String::new()
    } else {
        format!("; failing checks: {}", verdict.failing_checks.join(", "))
    };
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
                "flaky: the check `{command}` passed {} of {} runs on the same bytes{failing}",
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
            Some(format!(
                "behavioral check `{command}` failed ({exit}){failing}"
            )),
        )
    } else if verdict.full_byte || verdict.require == Require::Behavioral {
        (Status::Pass, None)
    } else {
        (
            Status::Fail,
            Some(format!(
                "full-byte required: {}",
                verdict
                    .first_difference
                    .as_deref()
                    .unwrap_or("bytes differ")
            )),
        )
    };
    verdict.status = status;
    verdict.notes.extend(note);
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
        "at byte {at} (line {line}); exported {} bytes, reference {}",
        actual.len(),
        expected.len()
    )
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
            checks: vec![NamedCheck {
                name: format!("sub of {exit}"),
                passed,
                duration_ms: None,
                message: None,
            }],
            checks_note: None,
        }
    }

    fn verdict(full_byte: bool, require: Require) -> TargetVerdict {
        TargetVerdict {
            name: "t".into(),
            status: Status::Fail,
            require,
            full_byte,
            first_difference: (!full_byte).then(|| "at byte 3 (line 2)".into()),
            behavioral: false,
            behavioral_runs: Vec::new(),
            repeats: Vec::new(),
            checks: Vec::new(),
            failing_checks: Vec::new(),
            checks_note: None,
            exported_sha256: None,
            expected_sha256: String::new(),
            notes: Vec::new(),
            check_exit: None,
            check_output: String::new(),
            check_ms: 0,
            check_timeout_s: 120,
            controls: None,
            controls_source: None,
        }
    }

    /// V3's verdict table over the check's runs on the export (controls held), under both
    /// rules: behaviour decides unless full-byte is required.
    #[test]
    fn judge_runs_decides_the_status_from_the_runs_the_bytes_and_the_rule() {
        use Require::{Behavioral, FullByte};
        let ok = || run(true, true, "exit 0");
        let failed = || run(false, true, "exit 1");
        let unstarted = || run(false, false, "could not start: ENOENT");
        let cases = [
            (
                "all pass, same bytes",
                Behavioral,
                true,
                vec![ok(), ok()],
                Status::Pass,
                None,
                None,
            ),
            (
                "all pass, other bytes, behaviour decides",
                Behavioral,
                false,
                vec![ok()],
                Status::Pass,
                None,
                None,
            ),
            (
                "all pass, other bytes, full-byte required",
                FullByte,
                false,
                vec![ok()],
                Status::Fail,
                Some("full-byte required: at byte 3 (line 2)"),
                None,
            ),
            (
                "all pass, same bytes, full-byte required",
                FullByte,
                true,
                vec![ok()],
                Status::Pass,
                None,
                None,
            ),
            (
                "all fail, other bytes",
                Behavioral,
                false,
                vec![failed(), failed()],
                Status::Fail,
                Some("behavioral check `node t.js` failed (exit 1); failing checks: sub of exit 1"),
                Some("exit 1"),
            ),
            (
                "fails on the expected bytes",
                FullByte,
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
                Behavioral,
                false,
                vec![ok(), failed(), ok()],
                Status::Flaky,
                Some(
                    "flaky: the check `node t.js` passed 2 of 3 runs on the same bytes; failing checks: sub of exit 1",
                ),
                Some("exit 1"),
            ),
            (
                "could not start",
                Behavioral,
                false,
                vec![unstarted()],
                Status::InfraError,
                Some(
                    "infra_error: the check `node t.js` could not start on the export (could not start: ENOENT), though its controls ran",
                ),
                Some("could not start: ENOENT"),
            ),
        ];
        for (case, require, full_byte, runs, status, note, exit) in cases {
            let mut v = verdict(full_byte, require);
            judge_runs(&mut v, &runs, "node t.js");
            assert_eq!(v.status, status, "{case}");
            assert_eq!(v.notes.first().map(String::as_str), note, "{case}");
            assert_eq!(v.check_exit.as_deref(), exit, "{case}");
            let all_passed = runs.iter().all(|r| r.passed);
            assert_eq!(v.behavioral, all_passed, "{case}");
            assert_eq!(v.behavioral_runs.len(), runs.len(), "{case}");
            assert_eq!(v.repeats.len(), runs.len(), "{case}");
            // The output and named checks shown are the first failing run's, else the last's.
            let shown = runs.iter().find(|r| !r.passed).or(runs.last()).unwrap();
            assert_eq!(v.check_output, shown.output, "{case}");
            assert_eq!(v.checks, shown.checks, "{case}");
        }
    }

    #[test]
    fn the_rule_is_parsed_by_name_and_anything_else_is_refused_naming_both() {
        assert_eq!("full-byte".parse::<Require>(), Ok(Require::FullByte));
        assert_eq!("behavioral".parse::<Require>(), Ok(Require::Behavioral));
        let err = "bytes".parse::<Require>().unwrap_err();
        assert!(err.contains("`bytes`") && err.contains("behavioral") && err.contains("full-byte"));
    }

    #[test]
    fn tail_keeps_char_boundaries() {
        let s = "界界界";
        assert_eq!(tail(s, 4), "界");
    }
}

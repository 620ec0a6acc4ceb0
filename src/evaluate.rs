//! The independent evaluator (SPEC C6): compares exported bytes with the expected bytes
//! (full-byte) and runs each target's behavioral check command. It reads only the exported files
//! and the fixture manifest — never the database — so it can be run on its own
//! (`patchdiff evaluate`) by someone who trusts nothing else in the run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::fixtures::{FixtureManifest, read_pinned, sha256_hex};

/// Behavioral checks that run longer than this are killed and count as failed.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// Bytes of a check's combined output kept in the report (the tail).
pub const CHECK_OUTPUT_TAIL_BYTES: usize = 4096;

/// One target's verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetVerdict {
    pub name: String,
    /// Exported bytes equal the expected bytes exactly.
    pub full_byte: bool,
    /// The behavioral check command exited 0 on the exported bytes.
    pub behavioral: bool,
    /// SHA-256 of the exported file, or null when it was missing.
    pub exported_sha256: Option<String>,
    pub expected_sha256: String,
    /// Why a check failed (missing export, hash difference, exit status), empty when both pass.
    pub notes: Vec<String>,
    /// Tail of the check's stdout+stderr.
    pub check_output: String,
    pub check_ms: u64,
}

impl TargetVerdict {
    /// Both checks passed.
    pub fn passed(&self) -> bool {
        self.full_byte && self.behavioral
    }
}

/// The evaluator's report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evaluation {
    pub targets: Vec<TargetVerdict>,
    pub passed: usize,
    pub total: usize,
}

impl Evaluation {
    /// Every target passed both checks.
    pub fn all_passed(&self) -> bool {
        self.passed == self.total && self.total > 0
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
}

/// Evaluates every fixture of `manifest` against `<exports>/<module_file>`.
///
/// Expected files are authenticated against the manifest's `expected_sha256` first; a tampered
/// expected file fails the run. A missing export fails that target only.
pub async fn evaluate(
    manifest: &FixtureManifest,
    exports: &Path,
) -> Result<Evaluation, EvaluateError> {
    if !exports.is_dir() {
        return Err(EvaluateError::NoExports(exports.to_path_buf()));
    }
    let mut targets = Vec::with_capacity(manifest.fixtures.len());
    for fixture in &manifest.fixtures {
        let expected = read_pinned(
            &fixture.target,
            &manifest.resolve(&fixture.expected),
            &fixture.expected_sha256,
        )?;
        let exported_path = exports.join(&fixture.module_file);
        let mut verdict = TargetVerdict {
            name: fixture.target.clone(),
            full_byte: false,
            behavioral: false,
            exported_sha256: None,
            expected_sha256: fixture.expected_sha256.clone(),
            notes: Vec::new(),
            check_output: String::new(),
            check_ms: 0,
        };
        let exported = match std::fs::read(&exported_path) {
            Ok(bytes) => bytes,
            Err(e) => {
                verdict
                    .notes
                    .push(format!("no export at {}: {e}", exported_path.display()));
                targets.push(verdict);
                continue;
            }
        };
        verdict.exported_sha256 = Some(sha256_hex(&exported));
        verdict.full_byte = exported == expected;
        if !verdict.full_byte {
            verdict.notes.push(first_difference(&exported, &expected));
        }
        let scratch = tempfile::Builder::new()
            .prefix(&format!("patchdiff-eval-{}-", fixture.target))
            .tempdir()
            .map_err(EvaluateError::Scratch)?;
        let started = Instant::now();
        match run_check(manifest, fixture, &exported, scratch.path()).await {
            Ok((ok, output)) => {
                verdict.behavioral = ok;
                verdict.check_output = output;
                if !ok {
                    verdict.notes.push(format!(
                        "behavioral check `{}` failed",
                        fixture.check.command.join(" ")
                    ));
                }
            }
            Err(e) => verdict
                .notes
                .push(format!("behavioral check could not run: {e}")),
        }
        verdict.check_ms = started.elapsed().as_millis() as u64;
        targets.push(verdict);
    }
    let passed = targets.iter().filter(|t| t.passed()).count();
    let total = targets.len();
    Ok(Evaluation {
        targets,
        passed,
        total,
    })
}

async fn run_check(
    manifest: &FixtureManifest,
    fixture: &crate::fixtures::Fixture,
    exported: &[u8],
    scratch: &Path,
) -> std::io::Result<(bool, String)> {
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
        .kill_on_drop(true)
        .spawn()?;
    let output = match tokio::time::timeout(CHECK_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => out?,
        Err(_) => {
            return Ok((
                false,
                format!("timed out after {} s", CHECK_TIMEOUT.as_secs()),
            ));
        }
    };
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok((
        output.status.success(),
        tail(&text, CHECK_OUTPUT_TAIL_BYTES),
    ))
}

fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
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

/// Renders the evaluation as text lines, one per target.
pub fn render_text(evaluation: &Evaluation) -> String {
    let mut out = String::new();
    for t in &evaluation.targets {
        out.push_str(&format!(
            "{:<14} full-byte {:<4} behavioral {:<4} {}\n",
            t.name,
            if t.full_byte { "pass" } else { "FAIL" },
            if t.behavioral { "pass" } else { "FAIL" },
            t.notes.join("; ")
        ));
    }
    out.push_str(&format!(
        "{}/{} targets pass both checks\n",
        evaluation.passed, evaluation.total
    ));
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

    #[test]
    fn tail_keeps_char_boundaries() {
        let s = "界界界";
        assert_eq!(tail(s, 4), "界");
    }
}

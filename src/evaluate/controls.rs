//! The controls alone (V3): each target's check run on the expected bytes (it must pass) and on
//! the original bytes (it must fail), before any export is judged — what `patchdiff evaluate
//! --controls-only` and the console's preflight run. Controls that hold are cached ([`super::cache`]).

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::hermetic::{ScratchDirs, check_env, run_check_in_scratch, run_hermetic};
use super::{ControlSource, Controls, EvaluateError, EvaluateOptions, MAX_JOBS, cache};
use crate::fixtures::{Fixture, FixtureManifest, read_pinned, sha256_hex};

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
    /// Run now or reused from the cache, with the digest.
    #[serde(default)]
    pub source: Option<ControlSource>,
}

/// Runs both controls of every fixture (expected bytes must pass, original must fail), reusing
/// cached controls unless `options.fresh_controls`; targets side by side (`options.jobs`).
pub async fn evaluate_controls(
    manifest: &FixtureManifest,
    options: &EvaluateOptions,
) -> Result<ControlReport, EvaluateError> {
    if !(1..=MAX_JOBS).contains(&options.jobs) {
        return Err(EvaluateError::Jobs(options.jobs));
    }
    let results: Vec<Result<(Controls, ControlSource), EvaluateError>> =
        futures::stream::iter(manifest.fixtures.iter())
            .map(|fixture| async move {
                let check_files = manifest.check_files(fixture)?;
                controls_of(manifest, fixture, &check_files, options).await
            })
            .buffered(options.jobs)
            .collect()
            .await;
    let mut targets = Vec::with_capacity(manifest.fixtures.len());
    for (fixture, result) in manifest.fixtures.iter().zip(results) {
        let (controls, source) = result?;
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
            source: Some(source),
        });
    }
    let hold = targets.iter().all(|t| t.hold);
    Ok(ControlReport { targets, hold })
}

/// The controls of one fixture: from the cache when an entry for their digest holds (and
/// `fresh_controls` is off), else run now and, when they hold, stored.
pub(super) async fn controls_of(
    manifest: &FixtureManifest,
    fixture: &Fixture,
    check_files: &[(String, Vec<u8>)],
    options: &EvaluateOptions,
) -> Result<(Controls, ControlSource), EvaluateError> {
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
    let timeout = options.timeout_for(fixture);
    let cache = options.cache();
    let mut note = None;
    let digest = match &cache {
        Some(_) => {
            match control_digest(fixture, check_files, &expected, &original, timeout).await {
                Ok(d) => Some(d),
                Err(e) => {
                    note = Some(format!("no control digest ({e}); controls run"));
                    None
                }
            }
        }
        None => None,
    };
    if let (Some(cache), Some(digest), false) = (&cache, &digest, options.fresh_controls)
        && let Some(controls) = cache.load(digest, &fixture.target)
    {
        return Ok((
            controls,
            ControlSource {
                how: "reused".into(),
                digest: Some(digest.clone()),
                note: None,
            },
        ));
    }
    let (ran_expected, ran_original) = futures::join!(
        run_check_in_scratch(manifest, fixture, check_files, &expected, timeout),
        run_check_in_scratch(manifest, fixture, check_files, &original, timeout),
    );
    let controls = Controls {
        expected: ran_expected?,
        original: ran_original?,
    };
    if let (Some(cache), Some(digest)) = (&cache, &digest)
        && controls.failure().is_none()
        && let Err(e) = cache.store(digest, &fixture.target, &controls)
    {
        note = Some(format!(
            "controls not cached: cannot write {}: {e}",
            cache.dir.display()
        ));
    }
    Ok((
        controls,
        ControlSource {
            how: "run".into(),
            digest,
            note,
        },
    ))
}

/// The control digest of `fixture` (see [`cache`]): its bytes, check files, command, declared
/// environment (values hashed) and the toolchain command's output in the check's environment.
pub(super) async fn control_digest(
    fixture: &Fixture,
    check_files: &[(String, Vec<u8>)],
    expected: &[u8],
    original: &[u8],
    timeout: Duration,
) -> std::io::Result<String> {
    let check_files = check_files
        .iter()
        .map(|(name, bytes)| (name.clone(), sha256_hex(bytes)))
        .collect();
    let toolchain = fixture.check.toolchain_command();
    let toolchain_output = toolchain_output(fixture, &toolchain, timeout).await?;
    let env = check_env(fixture)
        .into_iter()
        .map(|(k, v)| (k, sha256_hex(v.as_encoded_bytes())))
        .collect();
    Ok(cache::DigestInputs {
        format: cache::CACHE_FORMAT,
        target: &fixture.target,
        module_file: &fixture.module_file,
        expected_sha256: sha256_hex(expected),
        original_sha256: sha256_hex(original),
        check_files,
        command: &fixture.check.command,
        env,
        report: fixture.check.report.map(|r| r.as_str()),
        toolchain: &toolchain,
        toolchain_output,
    }
    .digest())
}

/// A toolchain command and the declared variables' values it runs with.
type ToolchainKey = (Vec<String>, Vec<(String, std::ffi::OsString)>);

/// What one toolchain command printed in one check environment (`EXIT OUTPUT`), asked once per
/// evaluator process: targets whose checks share a toolchain and declared environment (the demo
/// suite's two Node and two Python checks) share the answer instead of each starting the
/// toolchain again for its digest. The key is exactly what the answer depends on — the command
/// and the declared variables' values; the scratch `HOME`/`TMPDIR` differ per run and a
/// `--version` does not read them. Errors: the scratch directory cannot be created.
async fn toolchain_output(
    fixture: &Fixture,
    toolchain: &[String],
    timeout: Duration,
) -> std::io::Result<String> {
    static ASKED: std::sync::OnceLock<
        std::sync::Mutex<HashMap<ToolchainKey, Arc<tokio::sync::OnceCell<String>>>>,
    > = std::sync::OnceLock::new();
    let key = (toolchain.to_vec(), check_env(fixture));
    let cell = ASKED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default()
        .clone();
    cell.get_or_try_init(|| async {
        let scratch = tempfile::Builder::new()
            .prefix(&format!("patchdiff-toolchain-{}-", fixture.target))
            .tempdir()?;
        let dirs = ScratchDirs::create(scratch.path())?;
        Ok(
            match run_hermetic(fixture, toolchain, &dirs, timeout, None).await {
                Ok((out, _)) => format!("{} {}", out.exit, out.text),
                Err(e) => format!("could not start: {e}"),
            },
        )
    })
    .await
    .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(target: &str, toolchain: &[String], env: &[&str]) -> Fixture {
        serde_json::from_value(serde_json::json!({
            "target": target, "language": "python", "module_file": "m.py",
            "original": "o.py", "sha256": "00", "expected": "e.py", "expected_sha256": "00",
            "task": "t.md",
            "check": {"command": ["sh"], "dir": "check", "toolchain": toolchain, "env": env},
        }))
        .expect("a fixture")
    }

    #[tokio::test]
    async fn checks_sharing_a_toolchain_and_environment_ask_it_once_another_environment_again() {
        let dir = tempfile::tempdir().unwrap();
        let asked = dir.path().join("asked");
        // The toolchain command counts its runs in a file of this test's own (the memo is
        // process-wide; this command line is this test's alone).
        let toolchain: Vec<String> = [
            "sh".to_owned(),
            "-c".to_owned(),
            format!("echo run >> '{}'; echo toolchain 1.0", asked.display()),
        ]
        .into();
        let runs = || {
            std::fs::read_to_string(&asked)
                .unwrap_or_default()
                .lines()
                .count()
        };
        let timeout = Duration::from_secs(60);
        let (first, second) = (fixture("a", &toolchain, &[]), fixture("b", &toolchain, &[]));
        let (a, b) = futures::join!(
            toolchain_output(&first, &toolchain, timeout),
            toolchain_output(&second, &toolchain, timeout),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.contains("toolchain 1.0"), "{a}");
        assert_eq!(a, b);
        assert_eq!(runs(), 1, "two targets, one toolchain run");
        let other = fixture("c", &toolchain, &["PD_TOOLCHAIN_MEMO_TEST=declared"]);
        toolchain_output(&other, &toolchain, timeout).await.unwrap();
        assert_eq!(runs(), 2, "another declared environment asks again");
    }
}

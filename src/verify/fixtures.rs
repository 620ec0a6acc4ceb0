//! The run's suite (V2): the run manifest's initial targets and the fixture files against
//! the fixture manifest's pins.

use std::path::{Path, PathBuf};

use super::{Ctx, VerifyOptions};
use crate::evidence::run_dir::MANIFEST_FILE;
use crate::evidence::{RunManifest, file_digest};
use crate::fixtures::{Fixture, FixtureManifest, read_pinned};

/// The run manifest's initial targets against the fixture manifest's pinned hashes, and the
/// fixture files against their pins. Returns the authenticated manifest.
pub(super) fn check_fixtures(ctx: &mut Ctx, options: &VerifyOptions) -> Option<FixtureManifest> {
    let before = ctx.problems.len();
    let run_manifest = read_run_manifest(ctx);
    let Some(path) = options
        .manifest
        .clone()
        .or_else(|| run_suite_manifest(&ctx.root, run_manifest.as_ref()))
    else {
        ctx.done("fixtures", before, "no fixture manifest".into());
        return None;
    };
    let shown = path.display().to_string();
    if options.manifest.is_none()
        && let Some(pinned) = run_manifest
            .as_ref()
            .and_then(|m| m.configuration["fixture_manifest_sha256"].as_str())
    {
        match file_digest(&path) {
            Ok(d) if d == pinned => {}
            Ok(d) => ctx.problem(
                "fixtures",
                &shown,
                None,
                format!("the fixture manifest's SHA-256 is {d}, the run recorded {pinned}"),
            ),
            Err(e) => ctx.problem("fixtures", &shown, None, format!("cannot read: {e}")),
        }
    }
    let fixtures = match FixtureManifest::load(&path) {
        Ok(f) => f,
        Err(e) => {
            ctx.problem("fixtures", &shown, None, e.to_string());
            ctx.done("fixtures", before, shown);
            return None;
        }
    };
    for f in &fixtures.fixtures {
        check_fixture_files(ctx, &fixtures, f);
        if let Some(m) = &run_manifest {
            check_initial_target(ctx, m, f);
        }
    }
    ctx.done(
        "fixtures",
        before,
        format!("{} fixtures pinned by {shown}", fixtures.fixtures.len()),
    );
    Some(fixtures)
}

/// The fixture manifest a run is verified against: the run's own copy of its suite
/// (`suite/manifest.json`, which `init` writes; the run manifest records it relative to the
/// run), so a run verifies wherever it is moved; a run from before the copy existed records
/// the absolute path of the manifest it used.
fn run_suite_manifest(root: &Path, run: Option<&RunManifest>) -> Option<PathBuf> {
    let copy = root
        .join(crate::fixtures::RUN_SUITE_DIR)
        .join("manifest.json");
    let recorded = run.and_then(|m| m.configuration["fixture_manifest"].as_str());
    match recorded.map(PathBuf::from) {
        Some(p) if p.is_relative() => Some(root.join(p)),
        Some(p) if !copy.exists() => Some(p),
        _ => copy.exists().then_some(copy),
    }
}

/// The run's `manifest.json`, or `None` with a problem saying why it could not be read.
fn read_run_manifest(ctx: &mut Ctx) -> Option<RunManifest> {
    let parsed = std::fs::read(ctx.run.manifest())
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("not a run manifest: {e}")));
    parsed
        .map_err(|message| ctx.problem("fixtures", MANIFEST_FILE, None, message))
        .ok()
}

/// Every file a fixture's evaluation and brief depend on against its pin (schema 3: original,
/// expected, task and each check file; older schemas: original and expected), and the check
/// directory holding only its pinned files; each problem names the file, relative to the run
/// when the suite is the run's copy.
fn check_fixture_files(ctx: &mut Ctx, fixtures: &FixtureManifest, f: &Fixture) {
    let shown = |p: &Path| {
        let p = fixtures.resolve(p);
        p.strip_prefix(&ctx.root)
            .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
    };
    let mut found = Vec::new();
    match fixtures.pinned_files(f) {
        Ok(files) => {
            for pinned in files {
                if let Some(pin) = &pinned.sha256
                    && let Err(e) = read_pinned(&f.target, &fixtures.resolve(&pinned.path), pin)
                {
                    found.push((shown(&pinned.path), e.to_string()));
                }
            }
        }
        Err(e) => found.push((shown(&f.check.dir), e.to_string())),
    }
    if let Err(e @ crate::fixtures::FixtureError::CheckFiles { .. }) = fixtures.check_files(f) {
        found.push((shown(&f.check.dir), e.to_string()));
    }
    for (file, message) in found {
        ctx.problem("fixtures", &file, None, message);
    }
}

/// The run's initial bytes of a fixture's target against the fixture's pin.
fn check_initial_target(ctx: &mut Ctx, run: &RunManifest, f: &Fixture) {
    match run.initial_targets.iter().find(|t| t.target == f.target) {
        Some(t) if t.sha256 == f.sha256 => {}
        Some(t) => ctx.problem(
            "fixtures",
            MANIFEST_FILE,
            None,
            format!(
                "target `{}` started from {}, but the fixture manifest pins {}",
                f.target, t.sha256, f.sha256
            ),
        ),
        None => ctx.problem(
            "fixtures",
            MANIFEST_FILE,
            None,
            format!("target `{}` is missing from initial_targets", f.target),
        ),
    }
}

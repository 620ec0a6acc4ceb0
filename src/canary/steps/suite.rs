//! `suite PATH`: the fixture suite a run uses, chosen before `init` (which copies it into the
//! run).

use std::path::{Path, PathBuf};

use super::super::error::StepError;
use crate::fixtures::FixtureManifest;

/// Loads the suite at `path`: a suite directory (its `manifest.json`) or a manifest file.
/// Returns the manifest and its path. Errors: a manifest that does not load, naming the file
/// and the field.
pub fn load(path: &Path) -> Result<(FixtureManifest, PathBuf), StepError> {
    let manifest_path = if path.is_dir() {
        path.join("manifest.json")
    } else {
        path.to_path_buf()
    };
    let manifest = FixtureManifest::load(&manifest_path).map_err(anyhow::Error::from)?;
    Ok((manifest, manifest_path))
}

/// The step's summary: `N targets (a, b, …) · PATH`.
pub fn summary(manifest: &FixtureManifest, manifest_path: &Path) -> String {
    format!(
        "{} targets ({}) · {}",
        manifest.fixtures.len(),
        manifest
            .fixtures
            .iter()
            .map(|f| f.target.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        manifest_path.display()
    )
}

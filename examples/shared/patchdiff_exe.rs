//! The `patchdiff` binary a bench example drives, found the way `cargo run --example` lays
//! out its build: the example is `target/<profile>/examples/NAME`, the binary
//! `target/<profile>/patchdiff`. `cargo run --example` builds only the example, so when run by
//! cargo (`CARGO` is set) the binary is built first with the same profile — a stale or missing
//! one would measure the wrong code or stop the bench.

use std::path::PathBuf;

/// `target/<profile>/patchdiff`, built first when cargo runs the example. Errors name the
/// command to run.
pub fn patchdiff_exe() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    // target/<profile>/examples/NAME → target/<profile>
    let profile_dir = me
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "examples"))
        .and_then(|d| d.parent())
        .or_else(|| me.parent())
        .ok_or_else(|| anyhow::anyhow!("cannot tell the build directory of {}", me.display()))?
        .to_path_buf();
    let release = profile_dir.file_name().is_some_and(|p| p == "release");
    if let Some(cargo) = std::env::var_os("CARGO") {
        let mut build = std::process::Command::new(cargo);
        build.current_dir(env!("CARGO_MANIFEST_DIR")).args([
            "build",
            "--quiet",
            "--bin",
            "patchdiff",
        ]);
        if release {
            build.arg("--release");
        }
        let status = build.status()?;
        if !status.success() {
            anyhow::bail!("building the patchdiff binary failed ({status})");
        }
    }
    let exe = profile_dir.join("patchdiff");
    if !exe.is_file() {
        anyhow::bail!(
            "{} not found: build it first (cargo build{} --bin patchdiff)",
            exe.display(),
            if release { " --release" } else { "" }
        );
    }
    Ok(exe)
}

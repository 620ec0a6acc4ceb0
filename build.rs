//! Embeds the source SHA the binary was built from (SPEC E1: the run manifest records the
//! executed source SHA) as `PATCHDIFF_BUILD_SHA` (the commit checked out when the build ran). An explicit `PATCHDIFF_BUILD_SHA` in the build environment wins (release
//! builds from a tarball); without git and without it, nothing is embedded.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PATCHDIFF_BUILD_SHA");
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(sha) = std::env::var("PATCHDIFF_BUILD_SHA") {
        println!("cargo:rustc-env=PATCHDIFF_BUILD_SHA={sha}");
        return;
    }
    let Some(sha) = git(&["rev-parse", "HEAD"]) else {
        return;
    };
    // Rebuild when HEAD moves (a commit, a checkout). Uncommitted edits are not tracked here
    // (that would rebuild on every `git add`); the SHA names the commit the build started from.
    if let Some(p) = git(&["rev-parse", "--git-path", "HEAD"])
        && Path::new(&p).exists()
    {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &head_ref])
        && Path::new(&p).exists()
    {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rustc-env=PATCHDIFF_BUILD_SHA={sha}");
}

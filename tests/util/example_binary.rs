//! Locating the helper processes the tests spawn. `store-probe` and `waymark-probe` are examples,
//! not binaries, so `cargo install` does not ship them (issue 14 item 7); cargo gives tests no
//! `CARGO_BIN_EXE_*` path for examples, so this builds the example with the cargo that runs the
//! tests (a no-op when `--all-targets` already built it) and returns its path.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// `target/<profile>/examples/<name>`, built (once per test binary and name) before it is
/// returned. Panics with the cargo command to run when the build fails.
pub fn example_binary(name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binaries live in target/<profile>/deps")
        .to_path_buf();
    let path = profile_dir.join("examples").join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(crate::checkout())
            .args(["build", "--quiet", "--example", name]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let status = build.status();
        assert!(
            matches!(status, Ok(s) if s.success()) || path.is_file(),
            "example `{name}` could not be built ({status:?}); run `cargo build --example {name}`"
        );
        built.push(name.to_string());
    }
    path
}

//! The console binary's own refusals (U4): conditions it must refuse cleanly, before creating
//! a run directory or starting any child.

use std::process::{Command, Stdio};

#[test]
fn the_interactive_console_without_a_terminal_refuses_before_creating_anything() {
    // `patchdiff console < /dev/null` used to panic inside crossterm and leave an empty run
    // directory behind.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("PATCHDIFF_CONFIG_DIR", dir.path().join("config"))
        .env("PATCHDIFF_DATA_DIR", dir.path().join("data"))
        .env("PATCHDIFF_STATE_DIR", dir.path().join("state"))
        .stdin(Stdio::null())
        .output()
        .expect("run patchdiff console");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stdin is not a terminal") && stderr.contains("--script"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !dir.path().join("data/runs").exists(),
        "no run directory is created"
    );
}

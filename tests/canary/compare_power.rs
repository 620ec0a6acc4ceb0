//! `patchdiff compare power` through the real binary (issue 24 item 7): the power table for any
//! N, as text and JSON, with no gate needed, and refusals for runs or alpha out of range.

use std::process::{Command, Output};

fn patchdiff(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("PATCHDIFF_CONFIG_DIR", dir.path().join("config"))
        .env("PATCHDIFF_DATA_DIR", dir.path().join("data"))
        .env("PATCHDIFF_STATE_DIR", dir.path().join("state"))
        .output()
        .expect("run patchdiff")
}

#[test]
fn compare_power_prints_what_ten_runs_can_detect() {
    let out = patchdiff(&["compare", "power", "--runs", "10"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "What 10 runs per arm can detect",
        "baseline  10/10  flagged at ≤ 6/10",
        "baseline   9/10  flagged at ≤ 4/10",
        "48 pp (true rate ≈ 52 %)",
        "≤ 3 failures over both arms cannot be flagged",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn compare_power_json_carries_the_same_figures() {
    let out = patchdiff(&[
        "compare", "power", "--runs", "20", "--alpha", "0.05", "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["runs"], 20);
    assert_eq!(json["test"], "one-sided Fisher exact");
    // GATE2 §3.3: N = 20, 1.00 → 0.80 is flagged with probability 0.370; MDD 31 pp from 100 %.
    let power = json["power"][0]["drops"][1]["power"].as_f64().unwrap();
    assert!((power - 0.370).abs() < 0.0005, "{power}");
    let mdd = json["power"][0]["mdd80_pp"].as_f64().unwrap();
    assert_eq!(mdd.round(), 31.0);
}

#[test]
fn compare_power_refuses_out_of_range_designs() {
    let out = patchdiff(&["compare", "power", "--runs", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("runs per arm 1: accepted are 2 to 200"),
        "{stderr}"
    );
    let out = patchdiff(&["compare", "power", "--alpha", "0.7"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alpha 0.7: accepted is a level above 0"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

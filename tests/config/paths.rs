//! SPEC P1, P4 end to end through the real `patchdiff mcp`: with no `PATCHDIFF_*` path set, the
//! database and the Waymark working roots go to the platform directories (XDG on Linux, else
//! `~/.local/share` and `~/.local/state`), the config file is read from the platform config
//! directory without `PATCHDIFF_CONFIG`, its settings take effect (profile, database, perf
//! events), and the environment wins over the file.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::mcp::*;
use serde_json::json;

/// M2: the observed profile's six tools, sorted.
const OBSERVED_SIX: [&str; 6] = [
    "patchdiff_find_occurrences",
    "patchdiff_observe_scope",
    "patchdiff_read_target",
    "patchdiff_replay",
    "patchdiff_save",
    "patchdiff_submit_observed_operations",
];

/// An environment with only a private `HOME` (and, with `xdg`, the XDG base directories under
/// `root/xdg`) and the Waymark scripts; no `PATCHDIFF_*` path, database or config variable.
fn platform_env(root: &Path, xdg: bool) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    vars.insert("HOME".into(), root.join("home").display().to_string());
    if xdg {
        for (var, dir) in [
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_DATA_HOME", "data"),
            ("XDG_STATE_HOME", "state"),
        ] {
            vars.insert(var.into(), root.join("xdg").join(dir).display().to_string());
        }
    }
    vars.insert(
        "PATCHDIFF_WAYMARK_DIR".into(),
        waymark_dir().display().to_string(),
    );
    vars
}

/// Initializes `calendar` and observes a structural scope, which needs the resident worker and
/// so its working root.
async fn init_and_observe(mcp: &Mcp, root: &Path) {
    let fixture = root.join("calendar.fixture.js");
    std::fs::write(&fixture, CALENDAR_JS).unwrap();
    mcp.ok(
        "patchdiff_init_target",
        json!({"target": "calendar", "fixture": fixture, "sha256": sha256_hex(CALENDAR_JS.as_bytes()),
               "language": "javascript"}),
    )
    .await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "calendar", "scope": "Calendar.count"}),
        )
        .await;
    assert_eq!(obs["scope"]["name"], "Calendar.count", "{obs}");
}

#[tokio::test]
async fn with_xdg_directories_set_the_database_and_worker_roots_live_under_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut vars = platform_env(root, true);
    vars.insert("PATCHDIFF_MCP_PROFILE".into(), "full".into());
    let mcp = Mcp::launch(&vars).await;
    init_and_observe(&mcp, root).await;
    assert!(
        root.join("xdg/data/patchdiff/patchdiff.sqlite").is_file(),
        "P4: the embedded database is in $XDG_DATA_HOME/patchdiff"
    );
    assert!(
        root.join("xdg/state/patchdiff/waymark").is_dir(),
        "P4: the worker's working roots are in $XDG_STATE_HOME/patchdiff"
    );
    mcp.stop().await;
    assert!(
        !root.join("home/.local").exists(),
        "nothing under ~/.local when XDG says otherwise"
    );
}

#[tokio::test]
async fn without_xdg_variables_the_platform_defaults_under_home_are_used() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut vars = platform_env(root, false);
    vars.insert("PATCHDIFF_MCP_PROFILE".into(), "full".into());
    let mcp = Mcp::launch(&vars).await;
    init_and_observe(&mcp, root).await;
    assert!(
        root.join("home/.local/share/patchdiff/patchdiff.sqlite")
            .is_file()
    );
    assert!(root.join("home/.local/state/patchdiff/waymark").is_dir());
    mcp.stop().await;
}

#[tokio::test]
async fn the_config_file_in_the_platform_config_directory_takes_effect_and_the_environment_wins() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let database = root.join("from-file.sqlite");
    let events = root.join("from-file.perf.jsonl");
    let config = root.join("xdg/config/patchdiff");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("patchdiff.toml"),
        format!(
            "mcp_profile = \"full\"\ndatabase_url = \"sqlite://{}\"\nperf_events = \"{}\"\n",
            database.display(),
            events.display()
        ),
    )
    .unwrap();

    // The file alone: the full profile (not the default observed one), its database, its
    // perf-events file (0600, T1).
    let full = Mcp::launch(&platform_env(root, true)).await;
    let names = full.tool_names().await;
    assert!(
        names.iter().any(|n| n == "patchdiff_init_target"),
        "mcp_profile from the file: {names:?}"
    );
    init_and_observe(&full, root).await;
    full.stop().await;
    assert!(database.is_file(), "database_url from the file");
    assert!(
        !root.join("xdg/data/patchdiff/patchdiff.sqlite").exists(),
        "the default database is not used when the file names one"
    );
    let mode = std::fs::metadata(&events).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "perf_events from the file");
    assert!(
        std::fs::read_to_string(&events).unwrap().lines().count() > 1,
        "the process recorded events there"
    );

    // The environment wins over the file (P1): the observed profile's six tools, on the
    // database the file still names.
    let mut vars = platform_env(root, true);
    vars.insert("PATCHDIFF_MCP_PROFILE".into(), "observed".into());
    let observed = Mcp::launch(&vars).await;
    assert_eq!(observed.tool_names().await, OBSERVED_SIX);
    let t = observed
        .ok("patchdiff_read_target", json!({"target": "calendar"}))
        .await;
    assert_eq!(t["content"], CALENDAR_JS, "{t}");
    observed.stop().await;
}

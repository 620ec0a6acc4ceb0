//! The run record (SPEC E1): what the run manifest states about the software
//! and configuration that produced the run — every process's resolved configuration, the Node
//! binary and its `--version`, the parser engine and grammar versions pinned by the Waymark
//! lockfile, and the console's own version and build.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::config::Settings;
use crate::waymark::WaymarkConfig;

/// A process environment as the manifest shows it: `PATCHDIFF_DATABASE_URL` without its
/// password (a run directory is shared; a credential must not be).
pub fn redacted_env(env: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    env.into_iter()
        .map(|(k, v)| {
            let v = if k == crate::store::DATABASE_URL_VARIABLE {
                crate::store::redact_database_url(&v)
            } else {
                v
            };
            (k, v)
        })
        .collect()
}

/// Resolved configuration of one process from the environment the canary gives it: profile,
/// Waymark mode, limits, database, perf and evidence paths, or the configuration error the
/// process itself would refuse to start with (P2).
pub fn process_record(env: &[(String, String)], settings: &Settings) -> Value {
    let vars: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // Issue 15: the store's backend, and its URL never with a password.
    let database_url = vars
        .get(crate::store::DATABASE_URL_VARIABLE)
        .map(|u| crate::store::redact_database_url(u));
    let backend = match &database_url {
        Some(u) if crate::store::is_postgres_url(u) => "postgres",
        _ => "sqlite",
    };
    let mut shown = vars.clone();
    if let Some(u) = &database_url {
        shown.insert(crate::store::DATABASE_URL_VARIABLE, u.as_str());
    }
    let lookup = |name: &str| -> Option<std::ffi::OsString> {
        vars.get(name)
            .map(|v| (*v).into())
            .or_else(|| settings.lookup(name))
    };
    let waymark = WaymarkConfig::from_lookup(
        WaymarkConfig::default_script_dir(settings),
        std::env::temp_dir(),
        lookup,
    );
    let waymark = match waymark {
        Ok(c) => json!({
            "mode": c.mode,
            "node_binary": c.node_binary,
            "script_dir": c.script_dir,
            "active_timeout_ms": c.active_timeout.as_millis() as u64,
            "limits": c.limits,
            "worker_stderr_log": c.stderr_log,
        }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    json!({
        "environment": shown,
        "profile": vars.get(crate::config::Key::McpProfile.variable()),
        "store_backend": backend,
        "database_url": database_url,
        "perf_events": vars.get(crate::config::Key::PerfEvents.variable()),
        "wire_log": vars.get(crate::config::Key::EvidenceWireLog.variable()),
        "waymark": waymark,
    })
}

/// The Node binary a process would run (resolved as the worker resolves it) and what its
/// `--version` prints.
pub fn node_record(env: &[(String, String)], settings: &Settings) -> Value {
    let vars: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lookup = |name: &str| -> Option<std::ffi::OsString> {
        vars.get(name)
            .map(|v| (*v).into())
            .or_else(|| settings.lookup(name))
    };
    match WaymarkConfig::from_lookup(
        WaymarkConfig::default_script_dir(settings),
        std::env::temp_dir(),
        lookup,
    ) {
        Ok(c) => {
            let version = std::process::Command::new(&c.node_binary)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .output()
                .map(|o| {
                    if o.status.success() {
                        String::from_utf8_lossy(&o.stdout).trim().to_owned()
                    } else {
                        format!("--version failed: {}", o.status)
                    }
                })
                .unwrap_or_else(|e| format!("--version could not run: {e}"));
            json!({ "path": c.node_binary, "version": version })
        }
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// The engine and grammar versions pinned by `<script_dir>/package-lock.json` (every
/// `web-tree-sitter` and `tree-sitter-*` package, nested ones included), with the lockfile's
/// SHA-256.
pub fn waymark_packages(script_dir: &Path) -> Value {
    let path = script_dir.join("package-lock.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => return json!({ "lockfile": path, "error": e.to_string() }),
    };
    let lock: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return json!({ "lockfile": path, "error": e.to_string() }),
    };
    let mut packages = BTreeMap::new();
    if let Some(map) = lock["packages"].as_object() {
        for (key, entry) in map {
            let name = key.rsplit("node_modules/").next().unwrap_or(key);
            if name == "web-tree-sitter" || name.starts_with("tree-sitter-") {
                packages.insert(
                    key.clone(),
                    json!({
                        "version": entry["version"],
                        "integrity": entry["integrity"],
                    }),
                );
            }
        }
    }
    json!({
        "lockfile": path,
        "lockfile_sha256": crate::fixtures::sha256_hex(&bytes),
        "packages": packages,
    })
}

/// This console: package version, the build's source SHA and where that came from.
pub fn console_record() -> Value {
    let (sha, origin) = crate::evidence::source_sha();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "build_sha": crate::config::BUILD_SHA,
        "source_sha": sha,
        "source_sha_origin": origin,
        "executable": std::env::current_exe().ok(),
        "pid": std::process::id(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockfile_versions_include_the_engine_and_every_grammar() {
        let record = waymark_packages(&WaymarkConfig::default_script_dir(&Settings::from_lookup(
            |_| None,
        )));
        let packages = record["packages"].as_object().unwrap();
        assert_eq!(
            packages["node_modules/web-tree-sitter"]["version"],
            "0.25.10"
        );
        assert!(packages.contains_key("node_modules/tree-sitter-rust"));
        assert_eq!(record["lockfile_sha256"].as_str().unwrap().len(), 64);
    }
}

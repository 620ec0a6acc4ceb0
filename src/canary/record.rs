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
/// password (a run directory is shared; a credential must not be), and every other credential
/// this process's redactor knows replaced (the provider keys an observed process is given so it
/// can redact them).
pub fn redacted_env(env: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    let redactor = crate::redact::process();
    env.into_iter()
        .map(|(k, v)| {
            let v = if k == crate::store::DATABASE_URL_VARIABLE {
                crate::store::redact_database_url(&v)
            } else if crate::redact::is_secret_name(&k) {
                format!("[redacted:{k}]")
            } else {
                redactor.redact(&v).into_owned()
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
    // The store's backend, and its URL never with a password.
    let database_url = vars
        .get(crate::store::DATABASE_URL_VARIABLE)
        .map(|u| crate::store::redact_database_url(u));
    let backend = match &database_url {
        Some(u) if crate::store::is_postgres_url(u) => "postgres",
        _ => "sqlite",
    };
    // No credential in the manifest (the database password, provider keys).
    let shown = redacted_env(env.iter().cloned());
    let lookup = |name: &str| -> Option<std::ffi::OsString> {
        vars.get(name)
            .map(|v| (*v).into())
            .or_else(|| settings.lookup(name))
    };
    let waymark = WaymarkConfig::default_script_dir(settings)
        .and_then(|dir| WaymarkConfig::from_lookup(dir, std::env::temp_dir(), lookup));
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
    match WaymarkConfig::default_script_dir(settings)
        .and_then(|dir| WaymarkConfig::from_lookup(dir, std::env::temp_dir(), lookup))
    {
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
        let record = waymark_packages(
            &WaymarkConfig::default_script_dir(&Settings::from_lookup(|_| None)).unwrap(),
        );
        let packages = record["packages"].as_object().unwrap();
        assert_eq!(
            packages["node_modules/web-tree-sitter"]["version"],
            "0.25.10"
        );
        assert!(packages.contains_key("node_modules/tree-sitter-rust"));
        assert_eq!(record["lockfile_sha256"].as_str().unwrap().len(), 64);
    }
}

/// Where the agent's provider requests go, never a secret: for each provider
/// `*_BASE_URL` variable in `env` (e.g. `ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`), its
/// `variable`, the URL's `host` (no scheme, credentials, path or query), `port` when given,
/// and `loopback` (`localhost`, `*.localhost`, or a loopback IP address). Sorted by variable.
pub fn provider_endpoints(env: &[(String, String)]) -> Value {
    let mut endpoints: Vec<Value> = env
        .iter()
        .filter(|(k, _)| k.ends_with("_BASE_URL"))
        .filter_map(|(k, v)| {
            let (host, port) = url_host(v)?;
            Some(json!({
                "variable": k,
                "host": host,
                "port": port,
                "loopback": is_loopback_host(&host),
            }))
        })
        .collect();
    endpoints.sort_by(|a, b| a["variable"].as_str().cmp(&b["variable"].as_str()));
    Value::Array(endpoints)
}

/// The host (lowercase, IPv6 without brackets) and port of a URL, or `None` when it has none.
fn url_host(url: &str) -> Option<(String, Option<u16>)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    Some((host.to_ascii_lowercase(), port.and_then(|p| p.parse().ok())))
}

/// `localhost`, `*.localhost`, or a loopback address (127.0.0.0/8, ::1).
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a run manifest's `configuration.provider_endpoints` names a loopback endpoint: the
/// run is a rehearsal (a scripted model on this machine), never a real model run.
pub fn is_rehearsal(manifest: &Value) -> bool {
    manifest["configuration"]["provider_endpoints"]
        .as_array()
        .is_some_and(|e| e.iter().any(|e| e["loopback"] == true))
}

#[cfg(test)]
mod endpoint_tests {
    use super::*;

    #[test]
    fn endpoints_record_host_and_loopback_and_never_credentials() {
        let env = [
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:43211"),
            (
                "OPENAI_BASE_URL",
                "https://user:s3cret@api.example.com/v1?key=abc",
            ),
            ("ANTHROPIC_API_KEY", "sk-ant-xyz"),
            ("CODEX_BASE_URL", "http://[::1]:9/v1"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let e = provider_endpoints(&env);
        assert_eq!(
            e,
            json!([
                {"variable": "ANTHROPIC_BASE_URL", "host": "127.0.0.1", "port": 43211, "loopback": true},
                {"variable": "CODEX_BASE_URL", "host": "::1", "port": 9, "loopback": true},
                {"variable": "OPENAI_BASE_URL", "host": "api.example.com", "port": null, "loopback": false},
            ])
        );
        let text = e.to_string();
        assert!(!text.contains("s3cret") && !text.contains("abc") && !text.contains("sk-ant"));
        assert!(is_rehearsal(
            &json!({"configuration": {"provider_endpoints": e}})
        ));
        assert!(!is_rehearsal(
            &json!({"configuration": {"provider_endpoints": [
            {"variable": "OPENAI_BASE_URL", "host": "api.example.com", "loopback": false}]}})
        ));
        assert!(is_loopback_host("localhost") && is_loopback_host("127.8.0.1"));
        assert!(!is_loopback_host("10.0.0.1") && !is_loopback_host("localhost.example.com"));
    }
}

//! `patchdiff doctor`: can this installation run a canary? One line per
//! check — `ok`, `FAIL` (with what to do) or `skip` (optional, or not checkable because a check
//! it needs failed) — and exit 0 only when no check fails.
//!
//! Checks, in order: `node` (the trusted Node executable, P1: path, `--version`, executable);
//! `bundle` (the worker and fixtures this binary carries, unpacked and digest-verified, or
//! `PATCHDIFF_WAYMARK_DIR`); `worker` (a resident generation started to readiness in a private
//! work root, then one discovery per grammar, each timed; stopped and reaped after); `database`
//! (the store URL reachable and writable, changing nothing in an existing SQLite file);
//! `data dir` / `state dir` / `runs dir` (exist or can be created, writable); `claude` /
//! `codex` (each agent host CLI found and its `--version`; absent is `skip`: only `agent HOST`
//! needs it); `fixtures` (the bundled suite authenticates, C1); `controls` (the evaluator's
//! controls hold on it, V3).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{Key, Settings};
use crate::waymark::{Language, ScopeQuery, Waymark, WaymarkConfig, WaymarkMode};

/// Exit code when a check fails.
pub const EXIT_FAILED: i32 = 1;

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Fail,
    /// Optional and absent, or not checkable because a check it depends on failed.
    Skip,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Fail => "FAIL",
            Self::Skip => "skip",
        }
    }
}

/// One check's line.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    /// What was found (paths, versions, times in ms).
    pub detail: String,
    /// What to do when it failed.
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            verdict: Verdict::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            verdict: Verdict::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn skip(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            verdict: Verdict::Skip,
            detail: detail.into(),
            fix: None,
        }
    }

    /// `ok   node       /usr/bin/node v20.19.2`, with ` → do: …` after a failure.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{:<4} {:<10} {}",
            self.verdict.label(),
            self.name,
            self.detail
        );
        if let Some(fix) = &self.fix {
            line.push_str(" → ");
            line.push_str(fix);
        }
        line
    }
}

/// The whole report (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// No check failed.
    pub ok: bool,
    pub checks: Vec<Check>,
}

/// Runs every check and prints the report (text, or JSON with `json`); returns the exit code:
/// 0 when no check failed, [`EXIT_FAILED`] otherwise.
pub async fn run(settings: &Settings, json: bool) -> i32 {
    let report = diagnose(settings).await;
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("patchdiff doctor: {e}"),
        }
    } else {
        for check in &report.checks {
            println!("{}", check.line());
        }
        println!(
            "{}",
            if report.ok {
                "patchdiff doctor: this installation can run a canary"
            } else {
                "patchdiff doctor: fix the FAIL lines above"
            }
        );
    }
    if report.ok { 0 } else { EXIT_FAILED }
}

/// Runs every check (see the module doc).
pub async fn diagnose(settings: &Settings) -> Report {
    let mut checks = Vec::new();
    let node = check_node(settings).await;
    let node_ok = node.verdict == Verdict::Ok;
    checks.push(node);
    let (bundle, script_dir) = check_bundle(settings);
    checks.push(bundle);
    checks.push(match (&script_dir, node_ok) {
        (_, false) => Check::skip("worker", "needs Node (see the node line)"),
        (None, true) => Check::skip("worker", "needs the worker directory (see the bundle line)"),
        (Some(dir), true) => check_worker(settings, dir).await,
    });
    checks.push(check_database(settings).await);
    let paths = &settings.paths;
    checks.push(check_dir("data dir", &paths.data_dir, Key::DataDir));
    checks.push(check_dir("state dir", &paths.state_dir, Key::StateDir));
    checks.push(check_dir("runs dir", &paths.runs_root(), Key::DataDir));
    for host in [
        crate::canary::command::Host::Claude,
        crate::canary::command::Host::Codex,
        crate::canary::command::Host::Gemini,
        crate::canary::command::Host::Opencode,
    ] {
        checks.push(check_host(host, settings).await);
    }
    let (fixtures, manifest) = check_fixtures();
    checks.push(fixtures);
    checks.push(match (manifest, node_ok) {
        (None, _) => Check::skip(
            "controls",
            "needs the fixture suite (see the fixtures line)",
        ),
        (Some(_), false) => Check::skip("controls", "needs Node (see the node line)"),
        (Some(m), true) => check_controls(&m).await,
    });
    let ok = checks.iter().all(|c| c.verdict != Verdict::Fail);
    Report { ok, checks }
}

async fn check_node(settings: &Settings) -> Check {
    let node = match crate::waymark::config::resolve_node_binary(
        settings.get(Key::NodeBinary),
        settings.get(Key::SearchPath),
    ) {
        Ok(path) => path,
        Err(e) => {
            let detail = if settings.get(Key::NodeBinary).is_some() {
                e.to_string()
            } else {
                "Node not found: no `node` on PATH".to_owned()
            };
            return Check::fail(
                "node",
                detail,
                "install Node 18 or newer, or set PATCHDIFF_NODE_BINARY to its absolute path",
            );
        }
    };
    let run = tokio::process::Command::new(&node)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(20), run).await {
        Ok(Ok(out)) if out.status.success() => Check::ok(
            "node",
            format!(
                "{} {} (executable)",
                node.display(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        ),
        Ok(Ok(out)) => Check::fail(
            "node",
            format!("{} --version exited {}", node.display(), out.status),
            "set PATCHDIFF_NODE_BINARY to a working Node executable",
        ),
        Ok(Err(e)) => Check::fail(
            "node",
            format!("{} cannot be run: {e}", node.display()),
            "set PATCHDIFF_NODE_BINARY to a working Node executable",
        ),
        Err(_) => Check::fail(
            "node",
            format!("{} --version did not answer in 20 s", node.display()),
            "set PATCHDIFF_NODE_BINARY to a working Node executable",
        ),
    }
}

/// The worker directory in force: `PATCHDIFF_WAYMARK_DIR` (checked for the entry script), or
/// the bundle (unpacked and verified).
fn check_bundle(settings: &Settings) -> (Check, Option<PathBuf>) {
    if let Some(dir) = settings.path(Key::WaymarkDir) {
        let script = dir.join("waymark_worker.mjs");
        return if script.is_file() {
            (
                Check::ok(
                    "bundle",
                    format!("{}={}", Key::WaymarkDir.variable(), dir.display()),
                ),
                Some(dir),
            )
        } else {
            (
                Check::fail(
                    "bundle",
                    format!(
                        "{}={}: no waymark_worker.mjs there",
                        Key::WaymarkDir.variable(),
                        dir.display()
                    ),
                    "unset PATCHDIFF_WAYMARK_DIR to use the worker this binary carries, or \
                     point it at integrations/waymark after `npm ci` there",
                ),
                None,
            )
        };
    }
    match crate::assets::Bundle::get() {
        Err(e) => (
            Check::fail(
                "bundle",
                e.to_string(),
                "see the message; then run doctor again",
            ),
            None,
        ),
        Ok(bundle) => {
            let how = match bundle.provenance() {
                crate::assets::Provenance::Verified => "verified".to_owned(),
                crate::assets::Provenance::Unpacked => "unpacked now".to_owned(),
                crate::assets::Provenance::Replaced => format!(
                    "re-created (the cached copy was bad: {})",
                    bundle.replaced_because().unwrap_or("?")
                ),
            };
            let detail = format!(
                "{} {how} ({} files)",
                bundle.root().display(),
                crate::assets::FILES.len()
            );
            match bundle.waymark_dir() {
                Ok(dir) => (Check::ok("bundle", detail), Some(dir)),
                Err(e) => (
                    Check::fail(
                        "bundle",
                        format!("{detail}; {e}"),
                        "set PATCHDIFF_WAYMARK_DIR, or rebuild after `npm ci --prefix \
                         integrations/waymark`",
                    ),
                    None,
                ),
            }
        }
    }
}

/// A small sample per language the worker must parse (first parse per grammar warms it up).
fn sample(language: Language) -> &'static str {
    match language {
        Language::JavaScript | Language::Jsx => "function doctor() { return 1; }\n",
        Language::TypeScript | Language::Tsx => "function doctor(): number { return 1; }\n",
        Language::Python => "def doctor():\n    return 1\n",
        Language::Rust => "fn doctor() -> u32 { 1 }\n",
        Language::Go => "package doctor\n\nfunc Doctor() int { return 1 }\n",
        Language::Java => "class Doctor { int check() { return 1; } }\n",
        Language::C => "int doctor(void) { return 1; }\n",
        Language::Cpp => "namespace doctor { int check() { return 1; } }\n",
        Language::CSharp => "class Doctor { int Check() { return 1; } }\n",
        Language::Ruby => "def doctor\n  1\nend\n",
        Language::Php => "<?php\nfunction doctor(): int { return 1; }\n",
    }
}

/// Starts a resident generation in a private work root, to readiness, then one discovery per
/// grammar; the generation is shut down (reaped, its root removed) before returning.
async fn check_worker(settings: &Settings, script_dir: &Path) -> Check {
    let fix = "run with PATCHDIFF_LOG=debug to see the worker's stderr; check Node's version \
               (18 or newer) and that the worker directory is complete";
    let work_root = match tempfile::Builder::new()
        .prefix("patchdiff-doctor-")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            return Check::fail(
                "worker",
                format!("cannot create a work root: {e}"),
                "make the temp directory writable",
            );
        }
    };
    let config = match WaymarkConfig::from_settings(
        settings,
        script_dir.to_path_buf(),
        work_root.path().to_path_buf(),
    ) {
        Ok(mut c) => {
            c.mode = WaymarkMode::Resident;
            c
        }
        Err(e) => return Check::fail("worker", e.to_string(), "fix the setting it names"),
    };
    let waymark = Waymark::new(config, crate::telemetry::Recorder::disabled());
    let started = Instant::now();
    let result = async {
        waymark.prewarm().await.map_err(|e| e.to_string())?;
        let ready_ms = started.elapsed().as_millis();
        let mut timings = Vec::new();
        for language in Language::ALL {
            let t = Instant::now();
            waymark
                .discover_query(language, sample(language), &ScopeQuery::Summary)
                .await
                .map_err(|e| format!("{}: {e}", language.as_str()))?;
            timings.push(format!(
                "{} {} ms",
                language.as_str(),
                t.elapsed().as_millis()
            ));
        }
        Ok::<_, String>(format!("ready in {ready_ms} ms · {}", timings.join(" · ")))
    }
    .await;
    waymark.shutdown().await;
    match result {
        Ok(detail) => Check::ok("worker", detail),
        Err(e) => Check::fail("worker", e, fix),
    }
}

/// The store URL reachable and writable. SQLite: an existing file takes a write lock that is
/// released at once (`BEGIN IMMEDIATE; ROLLBACK`, nothing changes); a missing one needs a
/// writable directory. PostgreSQL: connects (and migrates, as every process does).
async fn check_database(settings: &Settings) -> Check {
    let fix_url = "set PATCHDIFF_DATABASE_URL to sqlite:///ABSOLUTE/PATH or postgres://…, or \
                   unset it for the default file";
    let url = match settings.text(Key::DatabaseUrl) {
        Ok(u) => u.map(str::to_owned),
        Err(e) => return Check::fail("database", e.to_string(), fix_url),
    };
    if let Some(url) = url.as_deref().filter(|u| crate::store::is_postgres_url(u)) {
        let shown = crate::store::redact_database_url(url);
        let owned = url.to_owned();
        let connected =
            tokio::task::spawn_blocking(move || crate::store::PostgresStore::connect(&owned)).await;
        return match connected {
            Ok(Ok(_)) => Check::ok("database", format!("{shown} reachable and writable")),
            Ok(Err(e)) => Check::fail(
                "database",
                format!("{shown}: {e}"),
                "start the server, or check the URL, its user's rights and its password",
            ),
            Err(e) => Check::fail("database", format!("{shown}: {e}"), fix_url),
        };
    }
    let path = match url.as_deref() {
        Some(u) => match crate::config::parse_database_url(u) {
            Ok(p) => p,
            Err(e) => return Check::fail("database", e.to_string(), fix_url),
        },
        None => settings.paths.default_database(),
    };
    let shown = format!("sqlite://{}", path.display());
    if path.exists() {
        let probe = path.clone();
        let writable = tokio::task::spawn_blocking(move || -> rusqlite::Result<()> {
            let conn = rusqlite::Connection::open_with_flags(
                &probe,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE,
            )?;
            conn.busy_timeout(Duration::from_secs(5))?;
            conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;")
        })
        .await;
        match writable {
            Ok(Ok(())) => Check::ok("database", format!("{shown} writable")),
            Ok(Err(e)) => Check::fail(
                "database",
                format!("{shown}: {e}"),
                "make the file (and its directory) writable by this user, or choose another \
                 PATCHDIFF_DATABASE_URL",
            ),
            Err(e) => Check::fail("database", format!("{shown}: {e}"), fix_url),
        }
    } else {
        match path.parent().map(writable_dir) {
            Some(Ok(())) => Check::ok(
                "database",
                format!("{shown} (created on first use; its directory is writable)"),
            ),
            Some(Err(e)) => Check::fail("database", format!("{shown}: {e}"), fix_url),
            None => Check::fail("database", format!("{shown}: no directory"), fix_url),
        }
    }
}

/// `dir` exists or can be created (0700), and a file can be created in it.
fn writable_dir(dir: &Path) -> std::io::Result<()> {
    crate::owned_fs::create_private_dir(dir)?;
    tempfile::tempfile_in(dir).map(drop)
}

fn check_dir(name: &'static str, dir: &Path, key: Key) -> Check {
    match writable_dir(dir) {
        Ok(()) => Check::ok(name, format!("{} writable", dir.display())),
        Err(e) => Check::fail(
            name,
            format!("{}: {e}", dir.display()),
            format!(
                "make it writable by this user, or set {} to another directory",
                key.variable()
            ),
        ),
    }
}

async fn check_host(host: crate::canary::command::Host, settings: &Settings) -> Check {
    let name = host.as_str();
    let name: &'static str = match name {
        "claude" => "claude",
        "codex" => "codex",
        "gemini" => "gemini",
        "opencode" => "opencode",
        _ => "host",
    };
    match crate::canary::host::resolve_binary(host, settings) {
        Ok(binary) => Check::ok(
            name,
            format!(
                "{} {}",
                binary.display(),
                crate::canary::host::host_version(&binary).await
            ),
        ),
        // Set but wrong is a failure; simply absent is optional (only `agent HOST` needs it).
        Err(e) if settings.get(host.binary_key()).is_some() => Check::fail(
            name,
            e.to_string(),
            format!("fix or unset {}", host.binary_variable()),
        ),
        Err(e) => Check::skip(name, format!("{e} (needed only for `agent {name}`)")),
    }
}

/// The bundled suite authenticates (C1): every original's pinned SHA-256.
fn check_fixtures() -> (Check, Option<crate::fixtures::FixtureManifest>) {
    let fix = "the bundled suite is compiled in: a failure here means the cache is being \
               tampered with or the binary is damaged; reinstall it";
    let path = match crate::fixtures::bundled_manifest_path() {
        Ok(p) => p,
        Err(e) => return (Check::fail("fixtures", e.to_string(), fix), None),
    };
    let manifest = match crate::fixtures::FixtureManifest::load(&path) {
        Ok(m) => m,
        Err(e) => return (Check::fail("fixtures", e.to_string(), fix), None),
    };
    match manifest.authenticate_all() {
        Ok(files) => (
            Check::ok(
                "fixtures",
                format!(
                    "{} targets authenticated, {files} pinned files ({})",
                    manifest.fixtures.len(),
                    path.display()
                ),
            ),
            Some(manifest),
        ),
        Err(e) => (Check::fail("fixtures", e.to_string(), fix), None),
    }
}

/// V3 on the bundled suite: each check passes on the expected bytes and fails on the original.
async fn check_controls(manifest: &crate::fixtures::FixtureManifest) -> Check {
    let started = Instant::now();
    match crate::evaluate::evaluate_controls(manifest, &crate::evaluate::EvaluateOptions::default())
        .await
    {
        Ok(report) if report.hold => Check::ok(
            "controls",
            format!(
                "{} checks' controls hold ({} ms)",
                report.targets.len(),
                started.elapsed().as_millis()
            ),
        ),
        Ok(report) => {
            let broken: Vec<String> = report
                .targets
                .iter()
                .filter(|t| !t.hold)
                .map(|t| {
                    format!(
                        "{}: {} ({})",
                        t.name,
                        t.reason.as_deref().unwrap_or("control failed"),
                        t.check_output.lines().last().unwrap_or("").trim()
                    )
                })
                .collect();
            Check::fail(
                "controls",
                broken.join("; "),
                "install the toolchain each failing check runs (node, python3, rustc) on PATH",
            )
        }
        Err(e) => Check::fail("controls", e.to_string(), "see the message"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_says_what_to_do_on_its_one_line() {
        let line = Check::fail("node", "Node not found: no `node` on PATH", "install Node").line();
        assert_eq!(
            line,
            "FAIL node       Node not found: no `node` on PATH → install Node"
        );
        assert!(!line.contains('\n'));
    }

    #[tokio::test]
    async fn without_node_on_path_the_node_check_fails_and_the_worker_is_skipped() {
        let empty = tempfile::tempdir().unwrap();
        let settings = Settings::from_lookup(|name| {
            (name == "PATH").then(|| empty.path().as_os_str().to_owned())
        });
        let node = check_node(&settings).await;
        assert_eq!(node.verdict, Verdict::Fail);
        assert!(node.detail.contains("Node not found"), "{}", node.detail);
    }
}

//! Issue 26: an installed binary works outside the checkout. The real binary is copied into an
//! empty directory and run in a private mount namespace (`unshare -m`) where a tmpfs hides the
//! checkout, with a private `HOME` (so the bundle cache is fresh) and a `PATH` holding only the
//! toolchains the bundled checks run (node, python3, rustc) and `/usr/bin:/bin`. It must run the
//! demo canary to `PASSED 5/5` with no flag and no variable; with the cache tampered with and
//! partly removed it must re-create it. `patchdiff doctor` without Node says so in one line; a
//! worker directory that does not exist fails preflight at once, with the spawn error's cause.
//!
//! Hiding the checkout needs root and `unshare` (this machine's CI runs as root): without them
//! the relocation test says `SKIPPED`, and under `CI=true` fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_patchdiff");
const CHECKOUT: &str = env!("CARGO_MANIFEST_DIR");

/// The directory of the real executable `program --flag` names (through version managers'
/// shims): the toolchains the bundled fixtures' checks run.
fn real_tool_dir(program: &str) -> PathBuf {
    let out = match program {
        "python3" => Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output(),
        "rustc" => Command::new("rustc").args(["--print", "sysroot"]).output(),
        _ => Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output(),
    }
    .unwrap_or_else(|e| panic!("{program} is needed by the bundled checks: {e}"));
    assert!(out.status.success(), "{program} not found");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    match program {
        "rustc" => path.join("bin"),
        _ => path.parent().unwrap().to_path_buf(),
    }
}

/// `PATH` with only the checks' toolchains and the system directories (no checkout path).
fn minimal_path() -> String {
    let mut dirs: Vec<String> = ["node", "python3", "rustc"]
        .into_iter()
        .map(|p| real_tool_dir(p).display().to_string())
        .collect();
    dirs.extend(["/usr/bin".to_owned(), "/bin".to_owned()]);
    for d in &dirs {
        assert!(!d.starts_with(CHECKOUT), "{d} is inside the checkout");
    }
    dirs.join(":")
}

/// Whether this process may hide the checkout (root and a working `unshare -m`).
fn can_hide_checkout() -> bool {
    nix::unistd::geteuid().is_root()
        && Command::new("unshare")
            .args(["-m", "--propagation", "private", "true"])
            .status()
            .is_ok_and(|s| s.success())
}

/// A copied binary in an otherwise empty directory, with a private home and working directory.
struct Installed {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    home: PathBuf,
    work: PathBuf,
}

impl Installed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin/patchdiff");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::copy(EXE, &bin).unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        Self {
            _dir: dir,
            bin,
            home,
            work,
        }
    }

    /// Runs the copied binary with `args`, the checkout hidden under a tmpfs in a private mount
    /// namespace (the shell first proves it is gone), cwd in the empty work directory, and an
    /// environment of only `PATH` and `HOME`.
    fn run_hidden(&self, args: &[&str]) -> Output {
        let script = r#"mount -t tmpfs none "$1" && test ! -e "$1/Cargo.toml" || { echo "checkout still visible" >&2; exit 97; }
cd "$2" && bin="$3" && shift 3 && exec "$bin" "$@""#;
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
            .arg(CHECKOUT)
            .arg(&self.work)
            .arg(&self.bin)
            .args(args)
            .env_clear()
            .env("PATH", minimal_path())
            .env("HOME", &self.home)
            .output()
            .expect("unshare runs")
    }

    /// The one unpacked bundle under the private home's cache.
    fn bundle_dir(&self) -> PathBuf {
        let cache = self.home.join(".cache/patchdiff");
        let bundles: Vec<PathBuf> = std::fs::read_dir(&cache)
            .unwrap_or_else(|e| panic!("{}: {e}", cache.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(bundles.len(), 1, "{bundles:?}");
        bundles.into_iter().next().unwrap()
    }
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_passed(output: &Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(output));
    assert!(
        stdout.contains("PASSED · 5/5 targets pass"),
        "{}",
        text(output)
    );
}

#[test]
fn the_copied_binary_runs_the_bundled_demo_with_the_checkout_hidden_and_recreates_a_bad_cache() {
    if !can_hide_checkout() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must be able to hide the checkout (root + unshare -m)"
        );
        eprintln!("SKIPPED: hiding the checkout needs root and unshare -m");
        return;
    }
    let installed = Installed::new();
    let first = installed.run_hidden(&["console", "--script", "demo"]);
    assert_passed(&first);
    let bundle = installed.bundle_dir();
    // The demo's plan came from the bundle, not from the (hidden) checkout.
    assert!(
        String::from_utf8_lossy(&first.stdout)
            .contains(&bundle.join("canary/demo.plan.jsonl").display().to_string()),
        "{}",
        text(&first)
    );

    // Tamper with the worker's core and remove a grammar (a partial cache): neither may be
    // used; the next start re-creates the tree and the demo passes again.
    let core = bundle.join("waymark/discovery_core.mjs");
    let grammar = bundle.join("waymark/node_modules/tree-sitter-python/tree-sitter-python.wasm");
    let mut tampered = std::fs::read(&core).unwrap();
    tampered.extend_from_slice(b"\nthrow new Error('tampered');\n");
    std::fs::write(&core, &tampered).unwrap();
    std::fs::remove_file(&grammar).unwrap();
    let second = installed.run_hidden(&["console", "--script", "demo"]);
    assert_passed(&second);
    assert_eq!(
        std::fs::read(&core).unwrap(),
        std::fs::read(Path::new(CHECKOUT).join("integrations/waymark/discovery_core.mjs")).unwrap(),
        "the tampered worker core is re-created from the binary"
    );
    assert_eq!(
        std::fs::read(&grammar).unwrap(),
        std::fs::read(
            Path::new(CHECKOUT).join(
                "integrations/waymark/node_modules/tree-sitter-python/tree-sitter-python.wasm"
            )
        )
        .unwrap(),
        "the removed grammar is re-created"
    );
}

#[test]
fn doctor_without_node_on_path_says_so_in_one_line_and_exits_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let output = Command::new(EXE)
        .arg("doctor")
        .env_clear()
        .env("PATH", empty_path.path())
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failures: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failures.len(), 1, "{}", text(&output));
    assert!(
        failures[0].starts_with("FAIL node")
            && failures[0].contains("Node not found")
            && failures[0].contains("PATCHDIFF_NODE_BINARY"),
        "{}",
        failures[0]
    );
    // What needs Node is skipped, not reported as a second failure.
    assert!(
        stdout.contains("skip worker") && stdout.contains("skip controls"),
        "{stdout}"
    );
}

#[test]
fn doctor_json_reports_every_check_and_holds_with_node() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(EXE)
        .args(["doctor", "--json"])
        .env_clear()
        .env("PATH", minimal_path())
        .env("HOME", home.path())
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "node",
            "bundle",
            "worker",
            "database",
            "data dir",
            "state dir",
            "runs dir",
            "claude",
            "codex",
            "gemini",
            "opencode",
            "fixtures",
            "controls"
        ]
    );
    for check in report["checks"].as_array().unwrap() {
        assert_ne!(check["verdict"], "fail", "{check}");
    }
    // Each grammar was timed in the worker check.
    let worker = report["checks"][2]["detail"].as_str().unwrap();
    for language in ["javascript", "typescript", "tsx", "python", "rust", "go"] {
        assert!(worker.contains(&format!("{language} ")), "{worker}");
    }
    assert_eq!(report["ok"], true);
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn a_missing_worker_directory_fails_preflight_at_once_with_the_spawn_cause() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("launch.canary");
    std::fs::write(&script, "launch observed\npreflight\n").unwrap();
    let missing = dir.path().join("no-such-waymark");
    let output = Command::new(EXE)
        .args(["console", "--script"])
        .arg(&script)
        .arg("--runs-dir")
        .arg(dir.path().join("runs"))
        .env("PATCHDIFF_STATE_DIR", dir.path().join("state"))
        .env("PATCHDIFF_WAYMARK_DIR", &missing)
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap();
    // A failed preflight stops the run before any agent acted: infra_abort, exit 3.
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let preflight = stdout
        .lines()
        .find(|l| l.contains("[2/2] preflight"))
        .unwrap_or_else(|| panic!("{}", text(&output)));
    // The cause, as the supervisor saw it, not a readiness timeout.
    assert!(
        preflight.contains("FAIL")
            && preflight.contains("WAYMARK_WORKER_SPAWN")
            && preflight.contains("No such file")
            && !preflight.contains("after 10 s"),
        "{preflight}"
    );
}

#[test]
fn the_printed_host_configuration_carries_an_explicit_worker_directory() {
    let dir = tempfile::tempdir().unwrap();
    let waymark = Path::new(CHECKOUT).join("integrations/waymark");
    let output = Command::new(EXE)
        .args(["mcp", "--print-host-config", "claude"])
        .env_clear()
        .env("PATH", minimal_path())
        .env("HOME", dir.path())
        .env("PATCHDIFF_WAYMARK_DIR", &waymark)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json_start = stdout.find('{').unwrap_or_else(|| panic!("{stdout}"));
    // The configuration is the first JSON value; the host's notes may follow it.
    let config: serde_json::Value = serde_json::Deserializer::from_str(&stdout[json_start..])
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no JSON: {stdout}"))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let env = &config["mcpServers"]["patchdiff"]["env"];
    assert_eq!(
        env["PATCHDIFF_WAYMARK_DIR"].as_str(),
        Some(waymark.to_str().unwrap()),
        "{config}"
    );
}

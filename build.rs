//! Build-time facts the binary carries so it runs anywhere (issue 26):
//!
//! - `PATCHDIFF_BUILD_SHA`: the source SHA the binary was built from (SPEC E1: the run manifest
//!   records the executed source SHA), the commit checked out when the build ran. An explicit
//!   `PATCHDIFF_BUILD_SHA` in the build environment wins (release builds from a tarball);
//!   without git and without it, nothing is embedded.
//! - `$OUT_DIR/embedded_assets.rs`: an `include_bytes!` table of the files an installed binary
//!   needs beside Node (read by `src/assets.rs`): the Waymark worker's scripts, the engine files
//!   the worker actually loads (web-tree-sitter's ES module and runtime wasm, and every grammar
//!   `.wasm` that `discovery_core.mjs` names — about 19 MB, not the whole `node_modules`), the
//!   bundled fixture suite (`assets/fixtures`) and canary scripts (`assets/canary`), each with
//!   its SHA-256 (hex) and whether it is executable. Without `integrations/waymark/node_modules`
//!   the build still succeeds, says so in a `cargo:warning`, and the binary needs
//!   `PATCHDIFF_WAYMARK_DIR`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    embed_build_sha();
    embed_assets();
}

fn embed_build_sha() {
    println!("cargo:rerun-if-env-changed=PATCHDIFF_BUILD_SHA");
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

/// One file to embed: where it is now and its path inside the bundle (`/`-separated).
struct Entry {
    source: PathBuf,
    bundle_path: String,
}

/// The worker's own scripts (not `test-fixtures/`, which only tests use).
const WAYMARK_FILES: &[&str] = &[
    "discovery_core.mjs",
    "waymark_worker.mjs",
    "waymark_oneshot.mjs",
    "worker_protocol.mjs",
    "package.json",
    "package-lock.json",
];

/// What `import { … } from "web-tree-sitter"` loads: the ES module, which fetches
/// `tree-sitter.wasm` beside itself (`new URL("tree-sitter.wasm", import.meta.url)`), and the
/// package manifest Node's resolver reads for its `exports`.
const ENGINE_FILES: &[&str] = &[
    "web-tree-sitter/package.json",
    "web-tree-sitter/tree-sitter.js",
    "web-tree-sitter/tree-sitter.wasm",
    "web-tree-sitter/LICENSE",
];

fn embed_assets() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let waymark = root.join("integrations/waymark");
    let mut entries = Vec::new();
    for name in WAYMARK_FILES {
        let source = waymark.join(name);
        println!("cargo:rerun-if-changed={}", source.display());
        entries.push(Entry {
            source,
            bundle_path: format!("waymark/{name}"),
        });
    }
    let engine = engine_files(&waymark);
    let engine_embedded = match &engine {
        Ok(files) => {
            for rel in files {
                let source = waymark.join("node_modules").join(rel);
                println!("cargo:rerun-if-changed={}", source.display());
                entries.push(Entry {
                    source,
                    bundle_path: format!("waymark/node_modules/{rel}"),
                });
            }
            true
        }
        Err(missing) => {
            println!(
                "cargo:warning=the Waymark engine is not embedded ({missing}): run \
                 `npm ci --prefix integrations/waymark` before building, or this binary will \
                 need PATCHDIFF_WAYMARK_DIR naming a worker directory with its node_modules"
            );
            println!(
                "cargo:rerun-if-changed={}",
                waymark.join("node_modules").display()
            );
            false
        }
    };
    for (dir, prefix) in [("assets/fixtures", "fixtures"), ("assets/canary", "canary")] {
        let dir = root.join(dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        walk(&dir, prefix, &mut entries);
    }
    entries.sort_by(|a, b| a.bundle_path.cmp(&b.bundle_path));

    let mut table = String::new();
    let mut set = Sha256::new();
    for e in &entries {
        let bytes = std::fs::read(&e.source)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", e.source.display()));
        let sha = hex(&Sha256::digest(&bytes));
        let executable = is_executable(&e.source);
        set.update(format!("{} {} {sha}\n", e.bundle_path, u8::from(executable)).as_bytes());
        writeln!(
            table,
            "    EmbeddedFile {{ path: {:?}, executable: {executable}, sha256: {sha:?}, bytes: include_bytes!({:?}) }},",
            e.bundle_path,
            e.source.display().to_string()
        )
        .unwrap();
    }
    let digest = hex(&set.finalize());
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let code = format!(
        "/// SHA-256 (hex) over every embedded file's bundle path, mode and digest.\n\
         pub const BUNDLE_DIGEST: &str = {digest:?};\n\
         /// Whether the engine files (`node_modules`) were present at build time.\n\
         pub const ENGINE_EMBEDDED: bool = {engine_embedded};\n\
         /// Every embedded file, sorted by bundle path.\n\
         pub static FILES: &[EmbeddedFile] = &[\n{table}];\n"
    );
    std::fs::write(out.join("embedded_assets.rs"), code).expect("write embedded_assets.rs");
}

/// The engine files under `node_modules` the worker loads: [`ENGINE_FILES`] plus each grammar
/// `.wasm` named in `discovery_core.mjs`'s language table (quoted `tree-sitter-*/…​.wasm`
/// literals) with its package's `package.json` and `LICENSE`. `Err` names the first missing one.
fn engine_files(waymark: &Path) -> Result<Vec<String>, String> {
    let core = std::fs::read_to_string(waymark.join("discovery_core.mjs"))
        .map_err(|e| format!("cannot read discovery_core.mjs: {e}"))?;
    let mut files: Vec<String> = ENGINE_FILES.iter().map(|s| (*s).to_owned()).collect();
    for literal in core.split('"').skip(1).step_by(2) {
        if literal.starts_with("tree-sitter-")
            && literal.ends_with(".wasm")
            && let Some((package, _)) = literal.split_once('/')
        {
            files.push(literal.to_owned());
            files.push(format!("{package}/package.json"));
            files.push(format!("{package}/LICENSE"));
        }
    }
    files.sort();
    files.dedup();
    let modules = waymark.join("node_modules");
    if !modules.is_dir() {
        return Err(format!("{} is missing", modules.display()));
    }
    // A package without a LICENSE file is fine; a missing wasm or manifest is not.
    files.retain(|f| !f.ends_with("/LICENSE") || modules.join(f).is_file());
    match files.iter().find(|f| !modules.join(f).is_file()) {
        Some(missing) => Err(format!("{} is missing", modules.join(missing).display())),
        None => Ok(files),
    }
}

/// Every regular file under `dir` (recursively, sorted), skipping caches a local run leaves
/// (`__pycache__`, `node_modules`, `target`, `*.pyc`) and dotfiles.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<Entry>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        panic!("cannot read {}", dir.display());
    };
    let mut names: Vec<_> = read.filter_map(Result::ok).collect();
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.')
            || name.ends_with(".pyc")
            || matches!(name.as_str(), "__pycache__" | "node_modules" | "target")
        {
            continue;
        }
        let path = entry.path();
        let bundle_path = format!("{prefix}/{name}");
        if path.is_dir() {
            walk(&path, &bundle_path, out);
        } else if path.is_file() {
            out.push(Entry {
                source: path,
                bundle_path,
            });
        }
    }
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

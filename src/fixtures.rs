//! The fixture manifest: authenticated original bytes, expected results, tasks and behavioral
//! check commands for the canary's targets (SPEC C1, C6).
//!
//! The manifest is JSON (`assets/fixtures/manifest.json`); every path in it is relative to the
//! manifest's own directory. Both the canary (to authenticate fixtures before init) and the
//! independent evaluator (to find expected bytes and checks) read it; neither trusts a file whose
//! SHA-256 differs from the pinned one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The directory of a run that holds its copy of the suite (`<run>/suite/manifest.json`).
pub const RUN_SUITE_DIR: &str = "suite";

/// Newest manifest schema this build reads and `patchdiff suite pin` writes. Schema 3 pins every
/// file a target's evaluation and brief depend on: `task_sha256` and `check.files` (each file of
/// the check directory with its SHA-256), and every path stays inside the suite directory.
/// Schemas 1 and 2 still load and mean what they meant: only `original` and `expected` are
/// pinned (the task and the check files are read as they are, unauthenticated); schema 1 has
/// no `require_full_byte`, `report`, `junit_file`, `env`, `timeout_s` or `toolchain`, and every
/// fixture of it requires full-byte equality.
pub const MANIFEST_SCHEMA: u32 = 3;
/// Oldest manifest schema this build reads.
pub const MANIFEST_SCHEMA_MIN: u32 = 1;
/// Upper bound of a fixture's `check.timeout_s`, in seconds (one hour), as `--check-timeout`.
pub const MAX_FIXTURE_CHECK_TIMEOUT_SECS: u64 = 3600;

/// The whole manifest file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FixtureManifest {
    pub schema: u32,
    pub fixtures: Vec<Fixture>,
    /// Directory the manifest was read from; paths resolve against it. Not serialized.
    #[serde(skip)]
    pub base: PathBuf,
    /// The manifest file's bytes as read (what a run's copy of the suite holds). Not serialized.
    #[serde(skip)]
    pub raw: Vec<u8>,
}

/// One target's fixture entry. Unknown fields are refused, naming them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Target name used in every MCP call (e.g. `calendar`).
    pub target: String,
    /// Language name understood by the Waymark worker (`javascript`, `python`, `rust`, …).
    pub language: String,
    /// File name the behavioral check imports the target as (e.g. `calendar.js`).
    pub module_file: String,
    /// Original bytes given to the agent, relative to the manifest directory.
    pub original: PathBuf,
    /// SHA-256 (lowercase hex) pinned for `original` (C1).
    pub sha256: String,
    /// Byte-exact expected result.
    pub expected: PathBuf,
    /// SHA-256 pinned for `expected`.
    pub expected_sha256: String,
    /// The task text an agent is given.
    pub task: PathBuf,
    /// Schema 3 (required there): SHA-256 pinned for `task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_sha256: Option<String>,
    /// The behavioral check (C6).
    pub check: CheckSpec,
    /// Schema 2: the export must also equal `expected` byte for byte to pass.
    /// Absent means behaviour alone decides; in a schema-1 manifest every fixture is `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_full_byte: Option<bool>,
}

impl Fixture {
    /// Whether this fixture requires full-byte equality (schema 1: always).
    pub fn requires_full_byte(&self) -> bool {
        self.require_full_byte.unwrap_or(false)
    }
}

/// How a check reports its sub-tests (schema 2), parsed into named checks.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CheckReport {
    /// Test Anything Protocol on stdout (`node --test --test-reporter=tap`).
    Tap,
    /// A JUnit XML file the check writes (`junit_file`, relative to its working directory).
    Junit,
    /// Python `unittest -v` (its per-test lines on stderr).
    Unittest,
    /// Rust's libtest (`test NAME ... ok`).
    Libtest,
}

impl CheckReport {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tap => "tap",
            Self::Junit => "junit",
            Self::Unittest => "unittest",
            Self::Libtest => "libtest",
        }
    }
}

/// A behavioral check: `command` runs with cwd = a fresh directory holding the files of `dir`
/// plus the exported target saved as `module_file`. Exit status 0 means pass.
///
/// The check runs hermetically: a cleared environment holding only `PATH`,
/// a private `HOME` and `TMPDIR` in its scratch directory, `LANG`/`LC_ALL` = `C.UTF-8`, and the
/// variables `env` names. Unknown fields are refused, naming them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    pub command: Vec<String>,
    pub dir: PathBuf,
    /// Schema 2: how the check reports its named sub-tests; absent = exit status only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<CheckReport>,
    /// Schema 2, with `report: "junit"`: the JUnit XML file the check writes, relative to its
    /// working directory (no `..`, not absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit_file: Option<PathBuf>,
    /// Schema 2: environment variables the check is given, each `NAME` (the evaluator's value,
    /// left out when unset) or `NAME=DEFAULT` (DEFAULT when the evaluator has none; a leading
    /// `~/` is the evaluator's `HOME`), e.g. `"RUSTUP_HOME=~/.rustup"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Schema 2: this check's timeout in seconds (1 to 3600); `--check-timeout` (or the
    /// canary's `evaluate check_timeout=S`) overrides it; absent = 120 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Schema 2: the command whose output identifies the toolchain for the control cache
    ///; absent = `[command[0], "--version"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<Vec<String>>,
    /// Schema 3 (required there): every regular file of `dir` — the files the evaluator copies
    /// beside the export — by file name, with its pinned SHA-256. The directory must hold
    /// exactly these files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<std::collections::BTreeMap<String, String>>,
}

impl CheckSpec {
    /// The declared environment as `(name, default)` pairs; see [`CheckSpec::env`].
    pub fn env_entries(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.env.iter().map(|e| match e.split_once('=') {
            Some((name, default)) => (name, Some(default)),
            None => (e.as_str(), None),
        })
    }

    /// The toolchain identification command (see [`CheckSpec::toolchain`]).
    pub fn toolchain_command(&self) -> Vec<String> {
        match &self.toolchain {
            Some(c) if !c.is_empty() => c.clone(),
            _ => vec![
                self.command.first().cloned().unwrap_or_default(),
                "--version".to_owned(),
            ],
        }
    }
}

/// A variable name a check may declare: `[A-Za-z_][A-Za-z0-9_]*`.
fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a fixture's schema-2 fields are not valid, if they are not.
fn check_schema2_fields(schema: u32, f: &Fixture) -> Result<(), String> {
    let c = &f.check;
    let uses_schema2 = f.require_full_byte.is_some()
        || c.report.is_some()
        || c.junit_file.is_some()
        || !c.env.is_empty()
        || c.timeout_s.is_some()
        || c.toolchain.is_some();
    if schema < 2 && uses_schema2 {
        return Err(format!(
            "target `{}`: require_full_byte, check.report, check.junit_file, check.env, \
             check.timeout_s and check.toolchain need \"schema\": 2",
            f.target
        ));
    }
    match (c.report, &c.junit_file) {
        (Some(CheckReport::Junit), None) => {
            return Err(format!(
                "target `{}`: check.report \"junit\" needs check.junit_file (the file the \
                 check writes, relative to its directory)",
                f.target
            ));
        }
        (Some(CheckReport::Junit), Some(file)) => {
            let relative = file.is_relative()
                && file
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !relative {
                return Err(format!(
                    "target `{}`: check.junit_file `{}` must be a relative path without `..`",
                    f.target,
                    file.display()
                ));
            }
        }
        (_, Some(_)) => {
            return Err(format!(
                "target `{}`: check.junit_file is only read with check.report \"junit\"",
                f.target
            ));
        }
        _ => {}
    }
    for (name, _) in c.env_entries() {
        if !valid_env_name(name) {
            return Err(format!(
                "target `{}`: check.env entry `{name}` is not a variable name \
                 (NAME or NAME=DEFAULT, NAME of letters, digits and `_`)",
                f.target
            ));
        }
    }
    if let Some(secs) = c.timeout_s
        && !(1..=MAX_FIXTURE_CHECK_TIMEOUT_SECS).contains(&secs)
    {
        return Err(format!(
            "target `{}`: check.timeout_s {secs} must be between 1 and \
             {MAX_FIXTURE_CHECK_TIMEOUT_SECS} seconds",
            f.target
        ));
    }
    check_schema3_fields(schema, f)?;
    if c.toolchain.as_ref().is_some_and(Vec::is_empty) {
        return Err(format!(
            "target `{}`: check.toolchain is empty (give a command, e.g. [\"rustc\", \"--version\"])",
            f.target
        ));
    }
    Ok(())
}

/// Whether `h` is a 64-digit hex SHA-256.
fn is_sha256_hex(h: &str) -> bool {
    h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `path` is relative and stays inside its base (only plain components, no `..`).
pub fn is_inside_relative(path: &Path) -> bool {
    path.components().next().is_some()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Why a fixture's schema-3 pins are not valid, if they are not: schema 3 requires
/// `task_sha256` and `check.files`, each a hex SHA-256 of a plain file name, and paths inside
/// the suite directory; older schemas may not use them.
fn check_schema3_fields(schema: u32, f: &Fixture) -> Result<(), String> {
    let t = &f.target;
    if schema < 3 {
        if f.task_sha256.is_some() || f.check.files.is_some() {
            return Err(format!(
                "target `{t}`: task_sha256 and check.files need \"schema\": 3"
            ));
        }
        return Ok(());
    }
    let task = f.task_sha256.as_deref().ok_or_else(|| {
        format!("target `{t}`: schema 3 pins the task: task_sha256 is missing (run `patchdiff suite pin DIR`)")
    })?;
    if !is_sha256_hex(task) {
        return Err(format!(
            "target `{t}`: task_sha256 `{task}` is not a 64-digit hex SHA-256"
        ));
    }
    let files = f.check.files.as_ref().ok_or_else(|| {
        format!("target `{t}`: schema 3 pins the check: check.files is missing (run `patchdiff suite pin DIR`)")
    })?;
    for (name, h) in files {
        let plain = !name.is_empty()
            && !name.contains('/')
            && name != "."
            && name != ".."
            && name.as_str() != f.module_file;
        if !plain {
            return Err(format!(
                "target `{t}`: check.files entry `{name}` is not a plain file name of the check \
                 directory (no `/`, not `.`/`..`, not the module file `{}`)",
                f.module_file
            ));
        }
        if !is_sha256_hex(h) {
            return Err(format!(
                "target `{t}`: check.files `{name}`: `{h}` is not a 64-digit hex SHA-256"
            ));
        }
    }
    for (field, path) in [
        ("original", &f.original),
        ("expected", &f.expected),
        ("task", &f.task),
        ("check.dir", &f.check.dir),
    ] {
        if !is_inside_relative(path) {
            return Err(format!(
                "target `{t}`: {field} `{}` must be a relative path inside the suite directory \
                 (no `..`, not absolute), so the suite can be copied into a run",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Errors reading or authenticating fixtures.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot read fixture manifest {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("fixture manifest {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("fixture `{target}`: cannot read {path}: {source}")]
    Missing {
        target: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "fixture `{target}`: {path} has SHA-256 {actual}, but the manifest pins {expected}; \
         refusing to initialize anything"
    )]
    HashMismatch {
        target: String,
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("fixture `{target}`: the check directory {dir} {problem}")]
    CheckFiles {
        target: String,
        dir: PathBuf,
        problem: String,
    },
    #[error("cannot copy the fixture suite into {dest}: {message}")]
    Copy { dest: PathBuf, message: String },
}

/// One file a fixture's evaluation or brief depends on, as [`FixtureManifest::pinned_files`]
/// lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedFile {
    /// Which field pins it: `original`, `expected`, `task` or `check`.
    pub role: &'static str,
    /// Path relative to the manifest's directory.
    pub path: PathBuf,
    /// The pinned SHA-256 (lowercase hex); `None` for a file an older schema does not pin.
    pub sha256: Option<String>,
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl FixtureManifest {
    /// Reads and validates a manifest: schema version (1 or 2), non-empty unique target names,
    /// hex hashes, the schema-2 check fields (`report` with its `junit_file`, `env` names,
    /// `timeout_s` in 1..=3600). A schema-1 manifest loads with every fixture requiring
    /// full-byte equality. Errors: [`FixtureError::Read`], [`FixtureError::Invalid`] naming the
    /// target and field.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        let raw = std::fs::read(path).map_err(|source| FixtureError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |message: String| FixtureError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut manifest: FixtureManifest =
            serde_json::from_slice(&raw).map_err(|e| invalid(e.to_string()))?;
        manifest.raw = raw;
        if !(MANIFEST_SCHEMA_MIN..=MANIFEST_SCHEMA).contains(&manifest.schema) {
            return Err(invalid(format!(
                "schema {} is not supported (this build reads schemas {MANIFEST_SCHEMA_MIN} \
                 to {MANIFEST_SCHEMA})",
                manifest.schema
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &manifest.fixtures {
            if f.target.is_empty() || !seen.insert(f.target.clone()) {
                return Err(invalid(format!(
                    "target name `{}` is empty or repeated",
                    f.target
                )));
            }
            for h in [&f.sha256, &f.expected_sha256] {
                if !is_sha256_hex(h) {
                    return Err(invalid(format!(
                        "target `{}`: `{h}` is not a 64-digit hex SHA-256",
                        f.target
                    )));
                }
            }
            if f.check.command.is_empty() {
                return Err(invalid(format!(
                    "target `{}`: empty check command",
                    f.target
                )));
            }
            check_schema2_fields(manifest.schema, f).map_err(invalid)?;
        }
        if manifest.schema == 1 {
            // Schema 1 judged every target by its bytes too.
            for f in &mut manifest.fixtures {
                f.require_full_byte = Some(true);
            }
        }
        manifest.base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(manifest)
    }

    /// Resolves a manifest-relative path.
    pub fn resolve(&self, rel: &Path) -> PathBuf {
        self.base.join(rel)
    }

    /// Looks up a fixture by target name.
    pub fn fixture(&self, target: &str) -> Option<&Fixture> {
        self.fixtures.iter().find(|f| f.target == target)
    }

    /// Every file `f`'s evaluation and brief depend on: original, expected, task and each file
    /// of the check directory (schema 3: the pinned ones; older schemas: the directory's regular
    /// files as they are now, unpinned, and the task unpinned). Errors: the check directory of
    /// an older schema cannot be listed.
    pub fn pinned_files(&self, f: &Fixture) -> Result<Vec<PinnedFile>, FixtureError> {
        let mut files = vec![
            PinnedFile {
                role: "original",
                path: f.original.clone(),
                sha256: Some(f.sha256.clone()),
            },
            PinnedFile {
                role: "expected",
                path: f.expected.clone(),
                sha256: Some(f.expected_sha256.clone()),
            },
            PinnedFile {
                role: "task",
                path: f.task.clone(),
                sha256: f.task_sha256.clone(),
            },
        ];
        match &f.check.files {
            Some(pins) => files.extend(pins.iter().map(|(name, h)| PinnedFile {
                role: "check",
                path: f.check.dir.join(name),
                sha256: Some(h.clone()),
            })),
            None => {
                for name in list_regular_files(&self.resolve(&f.check.dir)).map_err(|e| {
                    FixtureError::CheckFiles {
                        target: f.target.clone(),
                        dir: self.resolve(&f.check.dir),
                        problem: format!("cannot be listed: {e}"),
                    }
                })? {
                    files.push(PinnedFile {
                        role: "check",
                        path: f.check.dir.join(name),
                        sha256: None,
                    });
                }
            }
        }
        Ok(files)
    }

    /// The files of `f`'s check directory the evaluator copies beside the export, as
    /// `(file name, bytes)` sorted by name. Schema 3: the directory must hold exactly the
    /// pinned `check.files`, each with its pinned SHA-256 — an added, missing or changed file
    /// is refused, naming it. Older schemas: every regular file, unauthenticated. Blocking.
    pub fn check_files(&self, f: &Fixture) -> Result<Vec<(String, Vec<u8>)>, FixtureError> {
        let dir = self.resolve(&f.check.dir);
        let listed = list_regular_files(&dir).map_err(|e| FixtureError::CheckFiles {
            target: f.target.clone(),
            dir: dir.clone(),
            problem: format!("cannot be listed: {e}"),
        })?;
        let Some(pins) = &f.check.files else {
            return listed
                .into_iter()
                .map(|name| {
                    let path = dir.join(&name);
                    std::fs::read(&path).map(|b| (name, b)).map_err(|source| {
                        FixtureError::Missing {
                            target: f.target.clone(),
                            path,
                            source,
                        }
                    })
                })
                .collect();
        };
        if let Some(extra) = listed.iter().find(|n| !pins.contains_key(n.as_str())) {
            return Err(FixtureError::CheckFiles {
                target: f.target.clone(),
                dir,
                problem: format!(
                    "holds `{extra}`, which the manifest does not pin (check.files); re-pin the \
                     suite with `patchdiff suite pin` if it belongs there"
                ),
            });
        }
        pins.iter()
            .map(|(name, h)| Ok((name.clone(), read_pinned(&f.target, &dir.join(name), h)?)))
            .collect()
    }

    /// Copies the authenticated suite — the manifest's own bytes as `manifest.json` and every
    /// file of [`FixtureManifest::pinned_files`], each checked against its pin as it is read —
    /// into `dest` (created, 0700; files 0600, created exclusively), keeping the manifest's
    /// relative layout, so a run carries what its evaluation and brief depend on and verifies on any machine.
    /// Returns the copy's manifest path. Errors: a pin that does not hold (nothing more is
    /// copied), a path outside the suite directory, or a write that fails.
    pub fn copy_into(&self, dest: &Path) -> Result<PathBuf, FixtureError> {
        let copy_err = |message: String| FixtureError::Copy {
            dest: dest.to_path_buf(),
            message,
        };
        // Read and authenticate everything first: a suite that does not hold copies nothing.
        let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        for f in &self.fixtures {
            for pinned in self.pinned_files(f)? {
                if !is_inside_relative(&pinned.path) {
                    return Err(copy_err(format!(
                        "target `{}`: {} `{}` is outside the suite directory",
                        f.target,
                        pinned.role,
                        pinned.path.display()
                    )));
                }
                let path = self.resolve(&pinned.path);
                let bytes = match &pinned.sha256 {
                    Some(h) => read_pinned(&f.target, &path, h)?,
                    None => {
                        let cap = crate::kernel::MAX_CONTENT_BYTES as u64;
                        crate::owned_fs::read_regular_bounded(&path, cap).map_err(|source| {
                            FixtureError::Missing {
                                target: f.target.clone(),
                                path: path.clone(),
                                source,
                            }
                        })?
                    }
                };
                if !files.iter().any(|(p, _)| *p == pinned.path) {
                    files.push((pinned.path, bytes));
                }
            }
        }
        crate::owned_fs::create_private_dir(dest).map_err(|e| copy_err(e.to_string()))?;
        let manifest = dest.join("manifest.json");
        files.push((PathBuf::from("manifest.json"), self.raw.clone()));
        for (rel, bytes) in &files {
            let path = dest.join(rel);
            if let Some(parent) = path.parent() {
                crate::owned_fs::create_private_dir(parent)
                    .map_err(|e| copy_err(format!("{}: {e}", parent.display())))?;
            }
            crate::owned_fs::write_new_private(&path, bytes)
                .map_err(|e| copy_err(format!("{}: {e}", rel.display())))?;
        }
        Ok(manifest)
    }

    /// Checks every pin of the suite — each file of [`FixtureManifest::pinned_files`] that has
    /// one, and each check directory holding exactly its pinned files — and returns how many
    /// files it authenticated. The first failure is returned, naming target and file. Blocking.
    pub fn authenticate_all(&self) -> Result<usize, FixtureError> {
        let mut n = 0;
        for f in &self.fixtures {
            for p in self.pinned_files(f)? {
                if let Some(h) = &p.sha256 {
                    read_pinned(&f.target, &self.resolve(&p.path), h)?;
                    n += 1;
                }
            }
            self.check_files(f)?;
        }
        Ok(n)
    }

    /// C1: reads every original and checks it against its pinned SHA-256. Either all fixtures
    /// authenticate and their bytes are returned in manifest order, or the first failure is
    /// returned naming the target — so nothing is initialized from a partly valid set.
    pub fn authenticate_originals(&self) -> Result<Vec<(Fixture, Vec<u8>)>, FixtureError> {
        self.fixtures
            .iter()
            .map(|f| {
                let path = self.resolve(&f.original);
                let bytes = read_pinned(&f.target, &path, &f.sha256)?;
                Ok((f.clone(), bytes))
            })
            .collect()
    }
}

/// Reads `path` — a regular file of at most the content cap (K1: 256 MiB; a FIFO, device or
/// larger file is refused without blocking or reading it whole, see
/// [`crate::owned_fs::read_regular_bounded`]) — and checks its SHA-256 against `expected`
/// (lowercase hex). Blocking.
pub fn read_pinned(target: &str, path: &Path, expected: &str) -> Result<Vec<u8>, FixtureError> {
    let cap = crate::kernel::MAX_CONTENT_BYTES as u64;
    let bytes = crate::owned_fs::read_regular_bounded(path, cap).map_err(|source| {
        FixtureError::Missing {
            target: target.to_owned(),
            path: path.to_path_buf(),
            source,
        }
    })?;
    let actual = sha256_hex(&bytes);
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(FixtureError::HashMismatch {
            target: target.to_owned(),
            path: path.to_path_buf(),
            expected: expected.to_owned(),
            actual,
        });
    }
    Ok(bytes)
}

/// The names of the regular files directly in `dir` (dotfiles too, as the evaluator copies
/// them), sorted. Symlinks and subdirectories are not listed.
pub fn list_regular_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The bundled fixture suite's manifest, the default suite: `fixtures/manifest.json`
/// in the bundle the binary carries, unpacked and verified in the cache (`crate::assets`) —
/// never a path of the build machine. Errors when the bundle cannot be unpacked.
pub fn bundled_manifest_path() -> Result<PathBuf, crate::assets::AssetError> {
    crate::assets::Bundle::get().map(|b| b.fixture_manifest())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_manifest(dir: &Path, original: &[u8], pinned: &str) -> PathBuf {
        std::fs::create_dir_all(dir.join("t")).unwrap();
        std::fs::write(dir.join("t/original.js"), original).unwrap();
        let manifest = serde_json::json!({
            "schema": 1,
            "fixtures": [{
                "target": "t", "language": "javascript", "module_file": "t.js",
                "original": "t/original.js", "sha256": pinned,
                "expected": "t/expected.js", "expected_sha256": pinned,
                "task": "t/TASK.md", "check": {"command": ["true"], "dir": "t"}
            }]
        });
        let path = dir.join("manifest.json");
        std::fs::write(&path, manifest.to_string()).unwrap();
        path
    }

    #[test]
    fn a_pinned_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("original.js");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = read_pinned("t", &fifo, &"0".repeat(64)).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
    }

    #[test]
    fn authenticate_accepts_pinned_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_manifest(dir.path(), b"let x = 1;\n", &sha256_hex(b"let x = 1;\n"));
        let manifest = FixtureManifest::load(&path).unwrap();
        let fixtures = manifest.authenticate_originals().unwrap();
        assert_eq!(fixtures[0].1, b"let x = 1;\n");
    }

    #[test]
    fn authenticate_refuses_a_mismatch_by_target_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_manifest(dir.path(), b"tampered\n", &sha256_hex(b"original\n"));
        let manifest = FixtureManifest::load(&path).unwrap();
        let err = manifest.authenticate_originals().unwrap_err();
        assert!(matches!(err, FixtureError::HashMismatch { ref target, .. } if target == "t"));
        assert!(err.to_string().contains("fixture `t`"), "{err}");
    }

    /// C1: the run's copy of the suite holds every pinned file, authenticated as it is read.
    #[test]
    fn a_suite_is_copied_with_every_pinned_file_and_a_tampered_one_copies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("suite");
        crate::suite::new_suite(&suite).unwrap();
        let manifest = FixtureManifest::load(&suite.join("manifest.json")).unwrap();
        let copy = dir.path().join("run/suite");
        let copied = manifest.copy_into(&copy).unwrap();
        assert_eq!(
            std::fs::read(&copied).unwrap(),
            std::fs::read(suite.join("manifest.json")).unwrap()
        );
        let loaded = FixtureManifest::load(&copied).unwrap();
        assert_eq!(loaded.authenticate_all().unwrap(), 4);
        for rel in [
            "example/original.py",
            "example/expected.py",
            "example/TASK.md",
            "example/check/test_example.py",
        ] {
            assert_eq!(
                std::fs::read(copy.join(rel)).unwrap(),
                std::fs::read(suite.join(rel)).unwrap(),
                "{rel}"
            );
        }
        // A weakened check in the source: refused by name, and no copy is made.
        std::fs::write(
            suite.join("example/check/test_example.py"),
            "import unittest\n",
        )
        .unwrap();
        let elsewhere = dir.path().join("run2/suite");
        let err = manifest.copy_into(&elsewhere).unwrap_err().to_string();
        assert!(
            err.contains("test_example.py") && err.contains("the manifest pins"),
            "{err}"
        );
        assert!(!elsewhere.exists());
    }

    #[test]
    fn schema_3_refuses_a_path_outside_the_suite_and_older_schemas_refuse_its_fields() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("suite");
        crate::suite::new_suite(&suite).unwrap();
        let path = suite.join("manifest.json");
        let pinned: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let mut outside = pinned.clone();
        outside["fixtures"][0]["task"] = "../TASK.md".into();
        std::fs::write(&path, outside.to_string()).unwrap();
        let err = FixtureManifest::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("task `../TASK.md` must be a relative path inside"),
            "{err}"
        );
        let mut older = pinned.clone();
        older["schema"] = 2.into();
        std::fs::write(&path, older.to_string()).unwrap();
        let err = FixtureManifest::load(&path).unwrap_err().to_string();
        assert!(err.contains("need \"schema\": 3"), "{err}");
        let mut unpinned = pinned;
        unpinned["fixtures"][0]
            .as_object_mut()
            .unwrap()
            .remove("task_sha256");
        std::fs::write(&path, unpinned.to_string()).unwrap();
        let err = FixtureManifest::load(&path).unwrap_err().to_string();
        assert!(err.contains("task_sha256 is missing"), "{err}");
    }

    #[test]
    fn load_rejects_a_malformed_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_manifest(dir.path(), b"x", "not-a-hash");
        let err = FixtureManifest::load(&path).unwrap_err();
        assert!(err.to_string().contains("not a 64-digit hex"), "{err}");
    }
}

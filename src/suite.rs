//! Operators' own fixture suites: `patchdiff suite new|add|pin|check`, so a suite of one's own
//! is authored and pinned by the binary, never by copying and editing a script.
//!
//! A suite is a directory holding `manifest.json` (schema [`MANIFEST_SCHEMA`]) and, per target,
//! `<target>/original.<ext>`, `<target>/expected.<ext>`, `<target>/TASK.md` and
//! `<target>/check/` (the files the evaluator copies beside the export). `pin` writes the
//! manifest's digests from the files — every file the evaluation and brief depend on — so no
//! digest is ever typed by hand; `check` authenticates the suite, runs the evaluator's controls
//! (V3: each check passes on `expected`, fails on `original`) and lists the scopes discovery
//! finds in each original, the names an agent's plan may use. A canary names its suite with
//! `suite PATH` before `init` (or `console --manifest`), and `init` copies it into the run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::Settings;
use crate::fixtures::{FixtureManifest, MANIFEST_SCHEMA, is_inside_relative, list_regular_files};
use crate::waymark::{Language, Waymark, WaymarkConfig, WaymarkMode};

/// What `suite add` is given for one target.
#[derive(Debug, Clone)]
pub struct NewTarget {
    /// Target name (`[A-Za-z0-9_-]`, 1 to 64 characters), also its directory in the suite.
    pub name: String,
    /// A language the Waymark worker parses ([`Language`]).
    pub language: String,
    /// The original file; its bytes are copied to `<name>/original.<ext>`.
    pub original: PathBuf,
    /// The expected file (`<name>/expected.<ext>`).
    pub expected: PathBuf,
    /// The task text (`<name>/TASK.md`).
    pub task: PathBuf,
    /// Files copied into `<name>/check/` (the check's tests and helpers).
    pub check_files: Vec<PathBuf>,
    /// The check's argv, run in the check's scratch directory.
    pub check: Vec<String>,
    /// The file name the check imports the export as; default: the original's file name.
    pub module_file: Option<String>,
    /// `check.report` (`tap`, `junit`, `unittest`, `libtest`).
    pub report: Option<String>,
    /// `check.env` entries (`NAME` or `NAME=DEFAULT`).
    pub env: Vec<String>,
    /// `check.toolchain`: the command identifying the toolchain for the control cache.
    pub toolchain: Option<Vec<String>>,
}

/// Errors of the `suite` commands; each names the file, target or field and what is accepted.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Fixture(#[from] crate::fixtures::FixtureError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SuiteError + '_ {
    move |source| SuiteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The file extension a language's files get in a suite.
fn extension(language: Language) -> &'static str {
    match language {
        Language::JavaScript => "js",
        Language::Jsx => "jsx",
        Language::TypeScript => "ts",
        Language::Tsx => "tsx",
        Language::Python => "py",
        Language::Rust => "rs",
        Language::Go => "go",
        Language::Java => "java",
        Language::C => "c",
        Language::Cpp => "cpp",
        Language::CSharp => "cs",
        Language::Ruby => "rb",
        Language::Php => "php",
    }
}

/// A target name: 1 to 64 of `[A-Za-z0-9_-]`, not starting with `-`.
fn valid_target_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("manifest.json")
}

/// `patchdiff suite new DIR`: a new suite directory (must not exist, or be empty) with one
/// example target (`example`, Python, checked by `unittest`), pinned. Returns what was made.
pub fn new_suite(dir: &Path) -> Result<String, SuiteError> {
    if dir.exists() && std::fs::read_dir(dir).map_err(io(dir))?.next().is_some() {
        return Err(SuiteError::Usage(format!(
            "{} exists and is not empty; `suite new` makes a new suite (use `suite add` to add \
             a target to an existing one)",
            dir.display()
        )));
    }
    let t = dir.join("example");
    std::fs::create_dir_all(t.join("check")).map_err(io(&t))?;
    let files: [(&str, &str); 4] = [
        ("original.py", EXAMPLE_ORIGINAL),
        ("expected.py", EXAMPLE_EXPECTED),
        ("TASK.md", EXAMPLE_TASK),
        ("check/test_example.py", EXAMPLE_CHECK),
    ];
    for (rel, text) in files {
        std::fs::write(t.join(rel), text).map_err(io(&t.join(rel)))?;
    }
    let manifest = json!({
        "schema": MANIFEST_SCHEMA,
        "fixtures": [{
            "target": "example",
            "language": "python",
            "module_file": "example.py",
            "original": "example/original.py",
            "sha256": "",
            "expected": "example/expected.py",
            "expected_sha256": "",
            "task": "example/TASK.md",
            "check": {
                "command": ["python3", "-m", "unittest", "-v"],
                "report": "unittest",
                "dir": "example/check",
            },
        }],
    });
    write_pinned(dir, manifest)?;
    Ok(format!(
        "new suite {} with one target `example` (python, unittest) · pinned {}",
        dir.display(),
        manifest_path(dir).display()
    ))
}

/// `patchdiff suite add DIR NAME …`: copies the target's files into `DIR/NAME/` and adds its
/// entry to the manifest (creating the suite when `DIR` has no manifest), then re-pins the
/// whole suite. Refuses, changing nothing: a bad name or language (naming the accepted ones),
/// a target that exists, an empty check command, a missing input file, a check file named like
/// the module file.
pub fn add_target(dir: &Path, t: &NewTarget) -> Result<String, SuiteError> {
    if !valid_target_name(&t.name) {
        return Err(SuiteError::Usage(format!(
            "target name `{}`: use 1 to 64 letters, digits, `_` or `-` (it is also the \
             target's directory in the suite)",
            t.name
        )));
    }
    let language: Language = t
        .language
        .parse()
        .map_err(|e: crate::waymark::UnknownLanguage| SuiteError::Usage(e.to_string()))?;
    if t.check.is_empty() {
        return Err(SuiteError::Usage(
            "--check needs the check's command, e.g. --check python3 -m unittest -v".into(),
        ));
    }
    let mut manifest = if manifest_path(dir).exists() {
        read_manifest_json(dir)?
    } else {
        json!({ "schema": MANIFEST_SCHEMA, "fixtures": [] })
    };
    let fixtures = manifest["fixtures"].as_array_mut().ok_or_else(|| {
        SuiteError::Usage(format!(
            "{}: no `fixtures` list",
            manifest_path(dir).display()
        ))
    })?;
    if fixtures.iter().any(|f| f["target"] == t.name.as_str()) || dir.join(&t.name).exists() {
        return Err(SuiteError::Usage(format!(
            "target `{}` already exists in {}",
            t.name,
            dir.display()
        )));
    }
    let module_file = match &t.module_file {
        Some(m) => m.clone(),
        None => t
            .original
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| SuiteError::Usage("--original needs a file name".into()))?,
    };
    if !is_inside_relative(Path::new(&module_file)) || module_file.contains('/') {
        return Err(SuiteError::Usage(format!(
            "--module-file `{module_file}` must be a plain file name"
        )));
    }
    // Read every input first: a missing file changes nothing.
    let read = |p: &Path| std::fs::read(p).map_err(io(p));
    let original = read(&t.original)?;
    let expected = read(&t.expected)?;
    let task = read(&t.task)?;
    let mut check_files = BTreeMap::new();
    for f in &t.check_files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                SuiteError::Usage(format!("--check-file {}: no file name", f.display()))
            })?;
        if name == module_file {
            return Err(SuiteError::Usage(format!(
                "--check-file {}: the check directory cannot hold a file named like the module \
                 file `{module_file}` (the export is saved under that name)",
                f.display()
            )));
        }
        check_files.insert(name, read(f)?);
    }
    let ext = extension(language);
    let base = dir.join(&t.name);
    std::fs::create_dir_all(base.join("check")).map_err(io(&base))?;
    let original_rel = format!("{}/original.{ext}", t.name);
    let expected_rel = format!("{}/expected.{ext}", t.name);
    let task_rel = format!("{}/TASK.md", t.name);
    for (rel, bytes) in [
        (&original_rel, &original),
        (&expected_rel, &expected),
        (&task_rel, &task),
    ] {
        std::fs::write(dir.join(rel), bytes).map_err(io(&dir.join(rel)))?;
    }
    for (name, bytes) in &check_files {
        let p = base.join("check").join(name);
        std::fs::write(&p, bytes).map_err(io(&p))?;
    }
    let mut check = json!({
        "command": t.check,
        "dir": format!("{}/check", t.name),
    });
    if let Some(r) = &t.report {
        check["report"] = json!(r);
    }
    if !t.env.is_empty() {
        check["env"] = json!(t.env);
    }
    if let Some(tc) = &t.toolchain {
        check["toolchain"] = json!(tc);
    }
    fixtures.push(json!({
        "target": t.name,
        "language": language.as_str(),
        "module_file": module_file,
        "original": original_rel,
        "sha256": "",
        "expected": expected_rel,
        "expected_sha256": "",
        "task": task_rel,
        "check": check,
    }));
    if let Err(e) = write_pinned(dir, manifest) {
        // Nothing of a refused target stays behind.
        let _ = std::fs::remove_dir_all(&base);
        return Err(e);
    }
    Ok(format!(
        "added `{}` ({}, module file {module_file}, {} check files) · pinned {}",
        t.name,
        language.as_str(),
        check_files.len(),
        manifest_path(dir).display()
    ))
}

fn read_manifest_json(dir: &Path) -> Result<Value, SuiteError> {
    let path = manifest_path(dir);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| SuiteError::Usage(format!("{}: not JSON: {e}", path.display())))
}

/// `patchdiff suite pin DIR`: rewrites `DIR/manifest.json` as schema [`MANIFEST_SCHEMA`] with
/// the SHA-256 of every file the evaluation and brief depend on (original, expected, task,
/// each file of the check directory), computed from the files. The new manifest is validated
/// before it replaces the old one (written beside it, then renamed: never half-written).
pub fn pin(dir: &Path) -> Result<String, SuiteError> {
    let manifest = read_manifest_json(dir)?;
    let count = write_pinned(dir, manifest)?;
    Ok(format!(
        "pinned {count} files of {} targets in {}",
        read_manifest_json(dir)?["fixtures"]
            .as_array()
            .map_or(0, Vec::len),
        manifest_path(dir).display()
    ))
}

/// Fills in every pin of `manifest` from the files under `dir`, validates it and writes it as
/// `dir/manifest.json` (atomically). Returns how many files it pinned.
fn write_pinned(dir: &Path, mut manifest: Value) -> Result<usize, SuiteError> {
    let hash = |rel: &str| -> Result<String, SuiteError> {
        if !is_inside_relative(Path::new(rel)) {
            return Err(SuiteError::Usage(format!(
                "`{rel}` must be a relative path inside the suite directory (no `..`)"
            )));
        }
        let p = dir.join(rel);
        let cap = crate::kernel::MAX_CONTENT_BYTES as u64;
        let bytes = crate::owned_fs::read_regular_bounded(&p, cap).map_err(io(&p))?;
        Ok(crate::fixtures::sha256_hex(&bytes))
    };
    manifest["schema"] = json!(MANIFEST_SCHEMA);
    let mut count = 0;
    let fixtures = manifest["fixtures"]
        .as_array_mut()
        .ok_or_else(|| SuiteError::Usage("the manifest has no `fixtures` list".into()))?;
    for f in fixtures.iter_mut() {
        let target = f["target"].as_str().unwrap_or("?").to_owned();
        let field = |f: &Value, name: &str| -> Result<String, SuiteError> {
            f[name]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| SuiteError::Usage(format!("target `{target}`: `{name}` is missing")))
        };
        f["sha256"] = json!(hash(&field(f, "original")?)?);
        f["expected_sha256"] = json!(hash(&field(f, "expected")?)?);
        f["task_sha256"] = json!(hash(&field(f, "task")?)?);
        let check_dir = f["check"]["dir"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                SuiteError::Usage(format!("target `{target}`: `check.dir` is missing"))
            })?;
        let mut files = serde_json::Map::new();
        let listed =
            list_regular_files(&dir.join(&check_dir)).map_err(io(&dir.join(&check_dir)))?;
        for name in listed {
            files.insert(name.clone(), json!(hash(&format!("{check_dir}/{name}"))?));
        }
        count += 3 + files.len();
        f["check"]["files"] = Value::Object(files);
        if let Some(lang) = f["language"].as_str()
            && let Err(e) = lang.parse::<Language>()
        {
            return Err(SuiteError::Usage(format!("target `{target}`: {e}")));
        }
    }
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| SuiteError::Usage(e.to_string()))?
        + "\n";
    let tmp = tempfile::Builder::new()
        .prefix(".manifest.json.")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    std::fs::write(tmp.path(), &text).map_err(io(tmp.path()))?;
    // Validated as the evaluator and `init` will read it before it replaces anything, and
    // written back in the manifest's own field order (target, language, … check).
    let loaded = FixtureManifest::load(tmp.path())?;
    let text =
        serde_json::to_string_pretty(&loaded).map_err(|e| SuiteError::Usage(e.to_string()))? + "\n";
    std::fs::write(tmp.path(), &text).map_err(io(tmp.path()))?;
    FixtureManifest::load(tmp.path())?;
    tmp.persist(manifest_path(dir))
        .map_err(|e| SuiteError::Io {
            path: manifest_path(dir),
            source: e.error,
        })?;
    Ok(count)
}

/// What `suite check` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SuiteCheck {
    /// The suite authenticates (every pin holds) and every language parses.
    pub ok: bool,
    /// One line per finding, `ok …` or `FAIL …`, then the scope lists.
    pub lines: Vec<String>,
}

/// `patchdiff suite check DIR`: authenticates every pinned file, runs the evaluator's controls
/// (fresh, uncached: each check must pass on `expected` and fail on `original`, V3) and lists
/// the scopes the real Waymark worker (a resident generation in a private work root, stopped
/// after) discovers in each original — `kind name lines a–b`, the names a plan's
/// `observe_scope` may use. `ok` only when everything holds.
pub async fn check(dir: &Path, settings: &Settings) -> Result<SuiteCheck, SuiteError> {
    let manifest = FixtureManifest::load(&manifest_path(dir))?;
    let mut lines = Vec::new();
    let mut ok = true;
    if manifest.schema < MANIFEST_SCHEMA {
        ok = false;
        lines.push(format!(
            "FAIL schema {}: the task and check files are not pinned; run `patchdiff suite pin {}`",
            manifest.schema,
            dir.display()
        ));
    }
    let authenticated = {
        let m = manifest.clone();
        tokio::task::spawn_blocking(move || m.authenticate_all())
            .await
            .map_err(|e| SuiteError::Usage(format!("authentication task failed: {e}")))?
    };
    match authenticated {
        Ok(n) => lines.push(format!(
            "ok   authenticated: {n} pinned files of {} targets",
            manifest.fixtures.len()
        )),
        Err(e) => {
            lines.push(format!("FAIL authenticated: {e}"));
            return Ok(SuiteCheck { ok: false, lines });
        }
    }
    let options = crate::evaluate::EvaluateOptions {
        fresh_controls: true,
        ..Default::default()
    };
    match crate::evaluate::evaluate_controls(&manifest, &options).await {
        Ok(report) => {
            for t in &report.targets {
                if t.hold {
                    lines.push(format!(
                        "ok   controls {}: the check passes on expected, fails on original",
                        t.name
                    ));
                } else {
                    ok = false;
                    lines.push(format!(
                        "FAIL controls {}: {} ({}): {}",
                        t.name,
                        t.reason.as_deref().unwrap_or("do not hold"),
                        t.check_exit.as_deref().unwrap_or("-"),
                        crate::display::visible(crate::evaluate::headline(&t.check_output))
                    ));
                }
            }
        }
        Err(e) => {
            ok = false;
            lines.push(format!("FAIL controls: {e}"));
        }
    }
    match scopes(&manifest, settings).await {
        Ok(found) => {
            for (target, result) in found {
                match result {
                    Ok(list) => {
                        lines.push(format!("ok   scopes {target}: {} found", list.len()));
                        lines.extend(list.into_iter().map(|s| format!("       {s}")));
                    }
                    Err(e) => {
                        ok = false;
                        lines.push(format!("FAIL scopes {target}: {e}"));
                    }
                }
            }
        }
        Err(e) => {
            ok = false;
            lines.push(format!("FAIL scopes: {e}"));
        }
    }
    Ok(SuiteCheck { ok, lines })
}

/// Scope lines of one target's original, or why there are none.
type TargetScopes = (String, Result<Vec<String>, String>);

/// Discovers every original's scopes with one resident worker generation (started in a private
/// work root, shut down and reaped before returning).
async fn scopes(
    manifest: &FixtureManifest,
    settings: &Settings,
) -> Result<Vec<TargetScopes>, String> {
    let script_dir = WaymarkConfig::default_script_dir(settings).map_err(|e| e.to_string())?;
    let work_root = tempfile::Builder::new()
        .prefix("patchdiff-suite-check-")
        .tempdir()
        .map_err(|e| format!("cannot create a work root: {e}"))?;
    let mut config =
        WaymarkConfig::from_settings(settings, script_dir, work_root.path().to_path_buf())
            .map_err(|e| e.to_string())?;
    config.mode = WaymarkMode::Resident;
    let waymark = Waymark::new(config, crate::telemetry::Recorder::disabled());
    let mut out = Vec::new();
    for f in &manifest.fixtures {
        let result = async {
            let language: Language = f.language.parse().map_err(|e| format!("{e}"))?;
            let bytes =
                crate::fixtures::read_pinned(&f.target, &manifest.resolve(&f.original), &f.sha256)
                    .map_err(|e| e.to_string())?;
            let source =
                String::from_utf8(bytes).map_err(|_| "the original is not UTF-8".to_owned())?;
            let found = waymark
                .discover(language, &source)
                .await
                .map_err(|e| e.to_string())?;
            let mut list: Vec<String> = found
                .scopes
                .iter()
                .map(|s| {
                    format!(
                        "{} {} lines {}–{}",
                        s.kind, s.name, s.start_line, s.end_line
                    )
                })
                .collect();
            if found.has_error {
                list.push("(the original has syntax errors; scopes are those that parsed)".into());
            }
            Ok::<_, String>(list)
        }
        .await;
        out.push((f.target.clone(), result));
    }
    waymark.shutdown().await;
    Ok(out)
}

const EXAMPLE_ORIGINAL: &str = "\
def clamp(value, low, high):
    \"\"\"Returns value limited to the closed range [low, high].\"\"\"
    if value < low:
        return low
    if value > high:
        return value
    return value
";

const EXAMPLE_EXPECTED: &str = "\
def clamp(value, low, high):
    \"\"\"Returns value limited to the closed range [low, high].\"\"\"
    if value < low:
        return low
    if value > high:
        return high
    return value
";

const EXAMPLE_TASK: &str = "\
# example

`clamp(value, low, high)` in `example.py` should limit `value` to the closed range
`[low, high]`, but values above `high` come back unchanged. Fix `clamp` so that they come back
as `high`. Change nothing else.
";

const EXAMPLE_CHECK: &str = "\
import unittest

from example import clamp


class ClampTest(unittest.TestCase):
    def test_inside_the_range_is_unchanged(self):
        self.assertEqual(clamp(5, 0, 10), 5)

    def test_below_is_low(self):
        self.assertEqual(clamp(-3, 0, 10), 0)

    def test_above_is_high(self):
        self.assertEqual(clamp(42, 0, 10), 10)


if __name__ == \"__main__\":
    unittest.main()
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_suite_is_pinned_schema_3_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("s");
        new_suite(&suite).unwrap();
        let m = FixtureManifest::load(&suite.join("manifest.json")).unwrap();
        assert_eq!(m.schema, MANIFEST_SCHEMA);
        let f = &m.fixtures[0];
        assert_eq!(
            f.task_sha256.as_deref(),
            Some(crate::fixtures::sha256_hex(EXAMPLE_TASK.as_bytes()).as_str())
        );
        assert_eq!(
            f.check.files.as_ref().unwrap().keys().collect::<Vec<_>>(),
            vec!["test_example.py"]
        );
        // A second `new` on it is refused, naming it.
        let err = new_suite(&suite).unwrap_err().to_string();
        assert!(err.contains("not empty"), "{err}");
    }

    #[test]
    fn add_refuses_a_bad_language_naming_the_accepted_ones_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("s");
        new_suite(&suite).unwrap();
        let before = std::fs::read(suite.join("manifest.json")).unwrap();
        let f = dir.path().join("x.cob");
        std::fs::write(&f, "x").unwrap();
        let t = NewTarget {
            name: "ledger".into(),
            language: "cobol".into(),
            original: f.clone(),
            expected: f.clone(),
            task: f.clone(),
            check_files: vec![],
            check: vec!["true".into()],
            module_file: None,
            report: None,
            env: vec![],
            toolchain: None,
        };
        let err = add_target(&suite, &t).unwrap_err().to_string();
        assert!(
            err.contains("\"cobol\"") && err.contains("typescript"),
            "{err}"
        );
        assert_eq!(std::fs::read(suite.join("manifest.json")).unwrap(), before);
        assert!(!suite.join("ledger").exists());
    }

    #[test]
    fn pin_names_a_changed_check_file_and_repinning_accepts_it() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("s");
        new_suite(&suite).unwrap();
        let check = suite.join("example/check/test_example.py");
        std::fs::write(&check, "import unittest\n").unwrap();
        let m = FixtureManifest::load(&suite.join("manifest.json")).unwrap();
        let err = m.check_files(&m.fixtures[0]).unwrap_err().to_string();
        assert!(err.contains("test_example.py"), "{err}");
        // An added file is refused too, naming it.
        std::fs::write(suite.join("example/check/conftest.py"), "").unwrap();
        let err = m.check_files(&m.fixtures[0]).unwrap_err().to_string();
        assert!(err.contains("conftest.py"), "{err}");
        pin(&suite).unwrap();
        let m = FixtureManifest::load(&suite.join("manifest.json")).unwrap();
        assert_eq!(m.check_files(&m.fixtures[0]).unwrap().len(), 2);
    }
}

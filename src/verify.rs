//! `patchdiff verify RUN_DIR` (SPEC V1, V2): re-checks a sealed run from its files alone —
//! the seal, every file's digest in `SHA256SUMS`, the hash chain of every chained evidence log,
//! the fixture hashes against the fixture manifest, that replaying the journal in `store.sqlite`
//! from the authenticated fixture bytes reproduces every export byte for byte, and (with
//! `--evaluate`) that a fresh evaluation gives the verdicts the report states.
//!
//! Verify never writes into the run: the database is copied to a scratch directory before it is
//! opened. Every problem names the file (and the line, when one can be named).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::evidence::{
    RunManifest, SEAL_FILE, SUMS_FILE, audit_file, audit_log, evidence_files, file_digest,
    seal_text,
};
use crate::fixtures::{Fixture, FixtureManifest, read_pinned, sha256_hex};
use crate::store::{EditStore, JournalKind, PostgresStore, SqliteStore};

/// What to check beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The fixture manifest; default: the one the run manifest records.
    pub manifest: Option<PathBuf>,
    /// Re-run the evaluator on the exports and compare verdicts with `report.json`.
    pub evaluate: bool,
    /// The configured database URL (`PATCHDIFF_DATABASE_URL` from the resolved
    /// [`crate::config::Settings`]): a run without `store.sqlite` replays its journal from it
    /// when it is `postgres://…`/`postgresql://…`; anything else is not used.
    pub database_url: Option<String>,
    /// `--key`: the operator's public key; the run's seal signature must hold for it. `None`:
    /// the signature (if any) is named, not checked.
    pub key: Option<crate::seal::PublicKey>,
}

/// One problem found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Problem {
    /// Which check found it: `seal`, `signature`, `digest`, `files`, `chain` (also `torn`,
    /// `gap`), `fixtures`, `store`, `journal`, `receipts`, `evaluation`.
    pub check: &'static str,
    /// Path relative to the run directory (or the fixture file's path).
    pub file: String,
    /// 1-based line, when the problem is on one line.
    pub line: Option<usize>,
    pub message: String,
}

/// One check that ran, with what it covered.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Checked {
    pub check: &'static str,
    pub ok: bool,
    pub summary: String,
}

/// The verification result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VerifyReport {
    pub run_dir: String,
    /// Every check ran and found nothing.
    pub ok: bool,
    pub checks: Vec<Checked>,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Text rendering: one line per check, then one per problem.
    pub fn to_text(&self) -> String {
        let mut out = format!("patchdiff verify {}\n", self.run_dir);
        for c in &self.checks {
            out.push_str(&format!(
                "  {:<4} {:<10} {}\n",
                if c.ok { "ok" } else { "FAIL" },
                c.check,
                c.summary
            ));
        }
        for p in &self.problems {
            let at = match p.line {
                Some(l) => format!("{}:{l}", p.file),
                None => p.file.clone(),
            };
            out.push_str(&format!("  {} {at}: {}\n", p.check, p.message));
        }
        out.push_str(if self.ok {
            "VERIFIED: every check holds\n"
        } else {
            "NOT VERIFIED\n"
        });
        out
    }
}

struct Ctx {
    root: PathBuf,
    problems: Vec<Problem>,
    checks: Vec<Checked>,
}

impl Ctx {
    fn problem(&mut self, check: &'static str, file: &str, line: Option<usize>, message: String) {
        self.problems.push(Problem {
            check,
            file: file.to_owned(),
            line,
            message,
        });
    }

    /// Records a check's summary; it failed if it added problems since `before`.
    fn done(&mut self, check: &'static str, before: usize, summary: String) {
        self.checks.push(Checked {
            check,
            ok: self.problems.len() == before,
            summary,
        });
    }
}

/// Verifies the run directory `root`. Errors only when `root` is not a directory.
pub async fn verify(root: &Path, options: &VerifyOptions) -> Result<VerifyReport, String> {
    if !root.is_dir() {
        return Err(format!("{} is not a run directory", root.display()));
    }
    let mut ctx = Ctx {
        root: root.to_path_buf(),
        problems: Vec::new(),
        checks: Vec::new(),
    };
    check_seal(&mut ctx);
    check_signature(&mut ctx, options.key.as_ref());
    check_digests(&mut ctx);
    check_files(&mut ctx);
    check_chains(&mut ctx);
    let manifest = check_fixtures(&mut ctx, options);
    if let Some(fixtures) = &manifest {
        check_journal(&mut ctx, fixtures, options.database_url.as_deref());
        if options.evaluate {
            check_evaluation(&mut ctx, fixtures).await;
        }
    }
    Ok(VerifyReport {
        run_dir: root.display().to_string(),
        ok: ctx.problems.is_empty(),
        checks: ctx.checks,
        problems: ctx.problems,
    })
}

/// The run id: the run manifest's (so an archived copy under another directory name still
/// verifies), else the directory's name.
fn run_id_of(root: &Path) -> String {
    if let Some(id) = std::fs::read(root.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["run_id"].as_str().map(str::to_owned))
    {
        return id;
    }
    root.canonicalize()
        .unwrap_or_else(|_| root.to_path_buf())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The seal must be exactly what the current `SHA256SUMS` and `manifest.json` give.
fn check_seal(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let found = match std::fs::read(ctx.root.join(SEAL_FILE)) {
        Ok(b) => b,
        Err(e) => {
            ctx.problem(
                "seal",
                SEAL_FILE,
                None,
                format!("cannot read the seal ({e}); a run is sealed by its `report` step"),
            );
            ctx.done("seal", before, "no seal".into());
            return;
        }
    };
    let sums = file_digest(&ctx.root.join(SUMS_FILE)).unwrap_or_default();
    let manifest = file_digest(&ctx.root.join("manifest.json")).ok();
    let expected = seal_text(&run_id_of(&ctx.root), manifest.as_deref(), &sums);
    if found != expected.as_bytes() {
        let found = String::from_utf8_lossy(&found).into_owned();
        // Name the sealed file whose digest moved, then the seal itself.
        for (name, now) in [
            (SUMS_FILE, Some(sums.as_str())),
            ("manifest.json", manifest.as_deref()),
        ] {
            let prefix = format!("SHA256 ({name}) = ");
            let recorded = found.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
            if let (Some(recorded), Some(now)) = (recorded, now)
                && recorded != now
            {
                ctx.problem(
                    "seal",
                    name,
                    None,
                    format!(
                        "SHA-256 is {now}, the seal records {recorded}: {name} (or the seal) \
                         changed after sealing"
                    ),
                );
            }
        }
        let (n, want, got) = first_different_line(&expected, &found);
        ctx.problem(
            "seal",
            SEAL_FILE,
            Some(n),
            format!(
                "the seal does not match the run: expected `{want}`, found `{got}` (the sums, \
                 the manifest or the seal changed)"
            ),
        );
    }
    ctx.done("seal", before, format!("{SEAL_FILE} binds {SUMS_FILE}"));
}

/// The operator's signature over the seal ([`crate::seal`]): with `key`, it must hold for
/// that key; without, the summary says plainly `unsigned` or who signed it, not checked.
fn check_signature(ctx: &mut Ctx, key: Option<&crate::seal::PublicKey>) {
    use crate::seal::{SIGNATURE_FILE, SignatureStatus};
    let before = ctx.problems.len();
    let summary = match crate::seal::check_signature(&ctx.root, key) {
        SignatureStatus::Unsigned => "unsigned".to_owned(),
        SignatureStatus::NotChecked { key_id } => {
            format!("signed by {key_id}, not checked (pass --key)")
        }
        SignatureStatus::Verified { key_id } => format!("signed by {key_id}, signature holds"),
        SignatureStatus::Failed(why) => {
            ctx.problem("signature", SIGNATURE_FILE, None, why);
            "signature does not hold".to_owned()
        }
    };
    ctx.done("signature", before, summary);
}

fn first_different_line<'a>(expected: &'a str, found: &'a str) -> (usize, &'a str, &'a str) {
    let mut e = expected.split('\n');
    let mut f = found.split('\n');
    let mut n = 1;
    loop {
        match (e.next(), f.next()) {
            (Some(a), Some(b)) if a == b => n += 1,
            (a, b) => return (n, a.unwrap_or("<end>"), b.unwrap_or("<end>")),
        }
    }
}

/// Every listed file exists with its digest; no file is unlisted.
fn check_digests(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let text = match std::fs::read(ctx.root.join(SUMS_FILE)) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            ctx.problem("digest", SUMS_FILE, None, format!("cannot read: {e}"));
            ctx.done("digest", before, "no digests".into());
            return;
        }
    };
    let mut listed = std::collections::BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let parsed = line.split_once("  ").filter(|(hex, rel)| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                && !rel.is_empty()
        });
        let Some((want, rel)) = parsed else {
            ctx.problem(
                "digest",
                SUMS_FILE,
                Some(i + 1),
                format!("not a `<sha256>  <path>` line: {line:?}"),
            );
            continue;
        };
        listed.insert(rel.to_owned());
        if rel.split('/').any(|c| c == ".." || c.is_empty()) {
            ctx.problem(
                "digest",
                SUMS_FILE,
                Some(i + 1),
                format!("path `{rel}` leaves the run directory"),
            );
            continue;
        }
        match file_digest(&ctx.root.join(rel)) {
            Ok(got) if got == want => {}
            Ok(got) => ctx.problem(
                "digest",
                rel,
                None,
                format!(
                    "SHA-256 is {got}, but {SUMS_FILE} line {} records {want}",
                    i + 1
                ),
            ),
            Err(e) => ctx.problem(
                "digest",
                rel,
                None,
                format!(
                    "listed in {SUMS_FILE} line {} but cannot be read: {e}",
                    i + 1
                ),
            ),
        }
    }
    match evidence_files(&ctx.root) {
        Ok(files) => {
            for rel in files.iter().filter(|f| !listed.contains(*f)) {
                ctx.problem(
                    "digest",
                    rel,
                    None,
                    format!("not listed in {SUMS_FILE}: added after the run was sealed"),
                );
            }
        }
        Err(e) => ctx.problem("digest", ".", None, format!("cannot list the run: {e}")),
    }
    ctx.done(
        "digest",
        before,
        format!("{} files against {SUMS_FILE}", listed.len()),
    );
}

/// The files a sealed run must hold, whatever `SHA256SUMS` lists —
/// the manifest, the seal, the sums, the reports and the transcript, the wire log of each
/// process a successful step used (`init` → `full.mcp.jsonl`, also when only the manifest
/// `init` wrote says so; `preflight` → `observed.mcp.jsonl`) as `report.json`'s steps say, and
/// the journal binding when the manifest records the store's identity — and no symlink or
/// other non-regular entry anywhere in it.
/// A re-sealed run with a deleted log is named here.
fn check_files(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let mut required: Vec<&str> = vec![
        "manifest.json",
        SUMS_FILE,
        SEAL_FILE,
        "report.json",
        "report.txt",
        "report.junit.xml",
        "transcript.jsonl",
    ];
    let report: Value = std::fs::read(ctx.root.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let ran = |name: &str| {
        report["steps"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["command"] == name && s["ok"] == true))
    };
    // The manifest is written by `init`: a run that holds one initialized its targets through
    // the full-profile process even when its report is gone; one that records its store's
    // identity was sealed with its journal binding.
    let manifest: Value = std::fs::read(ctx.root.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    if ran("init")
        || manifest["initial_targets"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    {
        required.push("full.mcp.jsonl");
    }
    if manifest["configuration"]["store_identity"]["store_id"].is_string() {
        required.push(crate::seal::JOURNAL_FILE);
    }
    if ran("preflight") {
        required.push("observed.mcp.jsonl");
    }
    for rel in &required {
        match std::fs::symlink_metadata(ctx.root.join(rel)) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => {} // named below as a non-regular entry
            Err(_) => ctx.problem(
                "files",
                rel,
                None,
                "missing: a sealed run must hold it (deleted after the run, even if the sums \
                 were recomputed)"
                    .into(),
            ),
        }
    }
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, &'static str)>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if kind.is_dir() {
                walk(root, &path, out);
            } else if kind.is_symlink() {
                out.push((rel, "a symlink"));
            } else if !kind.is_file() {
                out.push((rel, "not a regular file"));
            }
        }
    }
    let mut odd = Vec::new();
    walk(&ctx.root, &ctx.root, &mut odd);
    for (rel, what) in odd {
        ctx.problem(
            "files",
            &rel,
            None,
            format!("{what}: a run holds only regular files and directories"),
        );
    }
    ctx.done(
        "files",
        before,
        format!("{} required files, no symlinks", required.len()),
    );
}

pub use crate::evidence::is_chained;

/// Checks the chain of one log's bytes; returns the number of lines, or the first problem
/// (1-based line and why): a change, a torn line or a gap ([`audit_log`] tells them apart).
pub fn check_chain(bytes: &[u8]) -> Result<usize, (usize, String)> {
    let audit = audit_log(bytes);
    if let Some(changed) = audit.changed {
        return Err(changed);
    }
    if let Some(&n) = audit.torn.first() {
        return Err((n, torn_message(n, audit.lines)));
    }
    if let Some(gap) = audit.gaps.first() {
        return Err((gap.line, gap.describe()));
    }
    Ok(audit.lines)
}

fn torn_message(n: usize, lines: usize) -> String {
    if n == lines {
        format!("line {n} is torn: the last write was cut short (no newline); not a change")
    } else {
        format!(
            "line {n} is torn: a write was cut short and the next append ended it; not a change"
        )
    }
}

/// Every chained log: its links (a broken one is a change), its torn lines and its gaps
/// (records a failed write lost, or a jump in a process's `seq`), each named as such.
fn check_chains(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let files: Vec<String> = evidence_files(&ctx.root)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| is_chained(f))
        .collect();
    let mut lines = 0;
    let mut gaps = 0;
    for rel in &files {
        // Streamed line by line: memory does not grow with the log.
        match audit_file(&ctx.root.join(rel)) {
            Ok(audit) => {
                lines += audit.lines;
                if let Some((line, message)) = audit.changed.clone() {
                    ctx.problem("chain", rel, Some(line), message);
                }
                for &n in &audit.torn {
                    ctx.problem("torn", rel, Some(n), torn_message(n, audit.lines));
                }
                for gap in &audit.gaps {
                    gaps += 1;
                    ctx.problem("gap", rel, Some(gap.line), gap.describe());
                }
            }
            Err(e) => ctx.problem("chain", rel, None, format!("cannot read: {e}")),
        }
    }
    ctx.done(
        "chain",
        before,
        format!("{} chained logs, {lines} lines, {gaps} gaps", files.len()),
    );
}

/// The run manifest's initial targets against the fixture manifest's pinned hashes, and the
/// fixture files against their pins. Returns the authenticated manifest.
fn check_fixtures(ctx: &mut Ctx, options: &VerifyOptions) -> Option<FixtureManifest> {
    let before = ctx.problems.len();
    let run_manifest = read_run_manifest(ctx);
    let Some(path) = options
        .manifest
        .clone()
        .or_else(|| run_suite_manifest(&ctx.root, run_manifest.as_ref()))
    else {
        ctx.done("fixtures", before, "no fixture manifest".into());
        return None;
    };
    let shown = path.display().to_string();
    if options.manifest.is_none()
        && let Some(pinned) = run_manifest
            .as_ref()
            .and_then(|m| m.configuration["fixture_manifest_sha256"].as_str())
    {
        match file_digest(&path) {
            Ok(d) if d == pinned => {}
            Ok(d) => ctx.problem(
                "fixtures",
                &shown,
                None,
                format!("the fixture manifest's SHA-256 is {d}, the run recorded {pinned}"),
            ),
            Err(e) => ctx.problem("fixtures", &shown, None, format!("cannot read: {e}")),
        }
    }
    let fixtures = match FixtureManifest::load(&path) {
        Ok(f) => f,
        Err(e) => {
            ctx.problem("fixtures", &shown, None, e.to_string());
            ctx.done("fixtures", before, shown);
            return None;
        }
    };
    for f in &fixtures.fixtures {
        check_fixture_files(ctx, &fixtures, f);
        if let Some(m) = &run_manifest {
            check_initial_target(ctx, m, f);
        }
    }
    ctx.done(
        "fixtures",
        before,
        format!("{} fixtures pinned by {shown}", fixtures.fixtures.len()),
    );
    Some(fixtures)
}

/// The fixture manifest a run is verified against: the run's own copy of its suite
/// (`suite/manifest.json`, which `init` writes; the run manifest records it relative to the
/// run), so a run verifies wherever it is moved; a run from before the copy existed records
/// the absolute path of the manifest it used.
fn run_suite_manifest(root: &Path, run: Option<&RunManifest>) -> Option<PathBuf> {
    let copy = root
        .join(crate::fixtures::RUN_SUITE_DIR)
        .join("manifest.json");
    let recorded = run.and_then(|m| m.configuration["fixture_manifest"].as_str());
    match recorded.map(PathBuf::from) {
        Some(p) if p.is_relative() => Some(root.join(p)),
        Some(p) if !copy.exists() => Some(p),
        _ => copy.exists().then_some(copy),
    }
}

/// The run's `manifest.json`, or `None` with a problem saying why it could not be read.
fn read_run_manifest(ctx: &mut Ctx) -> Option<RunManifest> {
    let parsed = std::fs::read(ctx.root.join("manifest.json"))
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("not a run manifest: {e}")));
    parsed
        .map_err(|message| ctx.problem("fixtures", "manifest.json", None, message))
        .ok()
}

/// Every file a fixture's evaluation and brief depend on against its pin (schema 3: original,
/// expected, task and each check file; older schemas: original and expected), and the check
/// directory holding only its pinned files; each problem names the file, relative to the run
/// when the suite is the run's copy.
fn check_fixture_files(ctx: &mut Ctx, fixtures: &FixtureManifest, f: &Fixture) {
    let shown = |p: &Path| {
        let p = fixtures.resolve(p);
        p.strip_prefix(&ctx.root)
            .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
    };
    let mut found = Vec::new();
    match fixtures.pinned_files(f) {
        Ok(files) => {
            for pinned in files {
                if let Some(pin) = &pinned.sha256
                    && let Err(e) = read_pinned(&f.target, &fixtures.resolve(&pinned.path), pin)
                {
                    found.push((shown(&pinned.path), e.to_string()));
                }
            }
        }
        Err(e) => found.push((shown(&f.check.dir), e.to_string())),
    }
    if let Err(e @ crate::fixtures::FixtureError::CheckFiles { .. }) = fixtures.check_files(f) {
        found.push((shown(&f.check.dir), e.to_string()));
    }
    for (file, message) in found {
        ctx.problem("fixtures", &file, None, message);
    }
}

/// The run's initial bytes of a fixture's target against the fixture's pin.
fn check_initial_target(ctx: &mut Ctx, run: &RunManifest, f: &Fixture) {
    match run.initial_targets.iter().find(|t| t.target == f.target) {
        Some(t) if t.sha256 == f.sha256 => {}
        Some(t) => ctx.problem(
            "fixtures",
            "manifest.json",
            None,
            format!(
                "target `{}` started from {}, but the fixture manifest pins {}",
                f.target, t.sha256, f.sha256
            ),
        ),
        None => ctx.problem(
            "fixtures",
            "manifest.json",
            None,
            format!("target `{}` is missing from initial_targets", f.target),
        ),
    }
}

/// What replaying one target's journal found, kept for the receipts check: each edit by
/// request key, each save by version.
#[derive(Default)]
struct JournalIndex {
    /// request key → (revision, sha256, attempt id).
    edits: std::collections::HashMap<String, (u64, String, Option<String>)>,
    /// version → (revision, sha256).
    saves: std::collections::HashMap<u64, (u64, String)>,
}

/// The run's database: a scratch copy of `store.sqlite` (verify never writes into the run),
/// or the PostgreSQL database `database_url` names. `None` with a problem when there is none.
fn open_run_store(
    ctx: &mut Ctx,
    database_url: Option<&str>,
    before: usize,
) -> Option<(Box<dyn EditStore>, String, Option<tempfile::TempDir>)> {
    const DB: &str = "store.sqlite";
    let db = ctx.root.join(DB);
    if !db.is_file() {
        // A run on PostgreSQL replays from the database PATCHDIFF_DATABASE_URL names.
        match database_url.filter(|u| crate::store::is_postgres_url(u)) {
            Some(url) => match PostgresStore::connect(url) {
                Ok(store) => {
                    let source = store.redacted_url().to_owned();
                    return Some((Box::new(store), source, None));
                }
                Err(e) => {
                    ctx.problem("journal", DB, None, format!("cannot open: {e}"));
                    ctx.done("journal", before, "unreadable database".into());
                }
            },
            None => {
                ctx.problem(
                    "journal",
                    DB,
                    None,
                    "the run has no store.sqlite; a run on PostgreSQL replays from its database: \
                     set PATCHDIFF_DATABASE_URL=postgres://… and verify again"
                        .into(),
                );
                ctx.done("journal", before, "no database".into());
            }
        }
        return None;
    }
    // Open a copy: verifying must not write into the run (SQLite creates -wal/-shm files).
    let scratch = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            ctx.problem("journal", DB, None, format!("no scratch directory: {e}"));
            return None;
        }
    };
    let copy = scratch.path().join(DB);
    // The seal checkpoints the database, so its WAL is empty or gone; SQLite's side
    // files are not sealed, so a WAL holding frames is something written after the seal and is
    // never replayed.
    let wal = ctx.root.join(format!("{DB}-wal"));
    if let Ok(m) = std::fs::symlink_metadata(&wal)
        && m.len() > 0
    {
        ctx.problem(
            "journal",
            &format!("{DB}-wal"),
            None,
            format!(
                "holds {} bytes of database writes the seal does not cover (the run's database \
                 was written after `report` checkpointed it); they are not replayed",
                m.len()
            ),
        );
    }
    if let Err(e) = std::fs::copy(&db, &copy) {
        ctx.problem("journal", DB, None, format!("cannot copy: {e}"));
        return None;
    }
    match SqliteStore::open(&copy) {
        Ok(s) => Some((Box::new(s), DB.to_owned(), Some(scratch))),
        Err(e) => {
            ctx.problem("journal", DB, None, format!("cannot open: {e}"));
            ctx.done("journal", before, "unreadable database".into());
            None
        }
    }
}

/// Replays each target's journal from its authenticated fixture bytes: every edit must
/// reproduce its recorded hash, every save the content at its revision, and the last saved
/// version must equal the export byte for byte. Before that, the database must be the run's
/// (`store`: its identity against the one the manifest and the seal's journal binding
/// record); after it, each target's journal digest must be the one the seal recorded, and
/// every acknowledged receipt in the wire logs must be in the journal (`receipts`).
fn check_journal(ctx: &mut Ctx, fixtures: &FixtureManifest, database_url: Option<&str>) {
    let before = ctx.problems.len();
    let Some((store, source, _scratch)) = open_run_store(ctx, database_url, before) else {
        return;
    };
    let binding = check_store_identity(ctx, store.as_ref(), &source);
    let before = ctx.problems.len();
    let indexes = replay_all(ctx, fixtures, store.as_ref(), &source, binding.as_ref());
    ctx.done("journal", before, indexes.1);
    check_receipts(ctx, &indexes.0);
}

/// The database at hand against the identity the run recorded: in `manifest.json`
/// (`configuration.store_identity`, at `init`) and in [`crate::seal::JOURNAL_FILE`] (at the
/// seal). Returns the journal binding when the run has one. A run from before either was
/// recorded is said to be unbound, not failed.
fn check_store_identity(
    ctx: &mut Ctx,
    store: &dyn EditStore,
    source: &str,
) -> Option<crate::seal::JournalBinding> {
    use crate::seal::{JOURNAL_FILE, JournalBinding};
    use crate::store::StoreIdentity;
    let before = ctx.problems.len();
    let found = match store.identity() {
        Ok(i) => i,
        Err(e) => {
            ctx.problem(
                "store",
                source,
                None,
                format!("cannot read its identity: {e}"),
            );
            ctx.done("store", before, "identity unreadable".into());
            return None;
        }
    };
    let recorded_at_init: Option<StoreIdentity> = std::fs::read(ctx.root.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| serde_json::from_value(m["configuration"]["store_identity"].clone()).ok());
    let binding = match JournalBinding::read(&ctx.root) {
        Ok(b) => b,
        Err(e) => {
            ctx.problem("store", JOURNAL_FILE, None, e);
            None
        }
    };
    let mut compared = Vec::new();
    for (file, recorded) in [
        ("manifest.json", recorded_at_init.as_ref()),
        (JOURNAL_FILE, binding.as_ref().map(|b| &b.store)),
    ] {
        let Some(recorded) = recorded else { continue };
        compared.push(file);
        let differences = recorded.differences(&found);
        if !differences.is_empty() {
            ctx.problem(
                "store",
                source,
                None,
                format!(
                    "not the run's database: {} — {file} records {} database {:?}; verify \
                     against the database the run used",
                    differences.join(", "),
                    recorded.backend,
                    recorded.database
                ),
            );
        }
    }
    let summary = if compared.is_empty() {
        format!(
            "{} database {:?}: the run records no store identity (sealed before runs were \
             bound to their database)",
            found.backend, found.database
        )
    } else {
        format!(
            "{} database {:?} store id {} is the one {} record{}",
            found.backend,
            found.database,
            found.store_id.as_deref().unwrap_or("-"),
            compared.join(" and "),
            if compared.len() == 1 { "s" } else { "" }
        )
    };
    ctx.done("store", before, summary);
    binding
}

/// Replays every fixture's target from `store` (`source` names it in problems), compares
/// the last saved version with the export and each journal's digest with the one `binding`
/// recorded at the seal. Returns each target's index and the check's summary.
fn replay_all(
    ctx: &mut Ctx,
    fixtures: &FixtureManifest,
    store: &dyn EditStore,
    source: &str,
    binding: Option<&crate::seal::JournalBinding>,
) -> (std::collections::HashMap<String, JournalIndex>, String) {
    let mut entries_total = 0;
    let mut exports = 0;
    let mut digests = 0;
    let mut indexes = std::collections::HashMap::new();
    let report: Value = std::fs::read(ctx.root.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    for f in &fixtures.fixtures {
        let original = match std::fs::read(fixtures.resolve(&f.original)) {
            Ok(b) => b,
            Err(_) => continue, // reported by the fixtures check
        };
        let mut hasher = crate::store::JournalHasher::default();
        let mut index = JournalIndex::default();
        match replay_target(store, &f.target, &original, &mut hasher, &mut index) {
            Ok((saved, n)) => {
                entries_total += n;
                let digest = hasher.finish(&f.target);
                if let Some(sealed) =
                    binding.and_then(|b| b.targets.iter().find(|d| d.target == f.target))
                {
                    digests += 1;
                    if sealed != &digest {
                        ctx.problem(
                            "journal",
                            source,
                            None,
                            format!(
                                "target `{}`: the journal holds {} entries (SHA-256 {}), the \
                                 seal recorded {} entries (SHA-256 {}) in {}: not the journal \
                                 the run sealed",
                                f.target,
                                digest.entries,
                                digest.sha256,
                                sealed.entries,
                                sealed.sha256,
                                crate::seal::JOURNAL_FILE
                            ),
                        );
                    }
                } else if binding.is_some() {
                    ctx.problem(
                        "journal",
                        crate::seal::JOURNAL_FILE,
                        None,
                        format!("records no journal digest for target `{}`", f.target),
                    );
                }
                indexes.insert(f.target.clone(), index);
                let rel = format!("export/{}", f.module_file);
                match std::fs::read(ctx.root.join(&rel)) {
                    Ok(exported) if exported == saved => exports += 1,
                    Ok(exported) => ctx.problem(
                        "journal",
                        &rel,
                        None,
                        format!(
                            "replaying `{}`'s journal gives {} bytes (SHA-256 {}), the export \
                             holds {} bytes (SHA-256 {})",
                            f.target,
                            saved.len(),
                            sha256_hex(&saved),
                            exported.len(),
                            sha256_hex(&exported)
                        ),
                    ),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        // Not exported is fine; exported and then gone is not.
                        if let Some(sha) = exported_sha256(&report, &f.target) {
                            ctx.problem(
                                "files",
                                &rel,
                                None,
                                format!(
                                    "missing: report.json records `{}` exported with SHA-256 \
                                     {sha} (deleted after the run, even if the sums were \
                                     recomputed)",
                                    f.target
                                ),
                            );
                        }
                    }
                    Err(e) => ctx.problem("journal", &rel, None, format!("cannot read: {e}")),
                }
            }
            Err(message) => ctx.problem(
                "journal",
                source,
                None,
                format!("target `{}`: {message}", f.target),
            ),
        }
    }
    let sealed = if binding.is_some() {
        format!(" · {digests} journal digests as sealed")
    } else {
        " · no journal digests sealed".to_owned()
    };
    (
        indexes,
        format!(
            "{entries_total} journal entries replayed · {exports} exports reproduced byte for \
             byte{sealed}"
        ),
    )
}

/// The SHA-256 `report.json` records for `target`'s export, if it was exported.
fn exported_sha256(report: &Value, target: &str) -> Option<String> {
    report["targets"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == target)?["exported_sha256"]
        .as_str()
        .map(str::to_owned)
}

/// Replays one target; returns the content of its last saved version (the initial bytes when
/// never saved) and the number of entries. Each entry goes into `hasher` and `index`.
fn replay_target(
    store: &dyn EditStore,
    target: &str,
    original: &[u8],
    hasher: &mut crate::store::JournalHasher,
    index: &mut JournalIndex,
) -> Result<(Vec<u8>, usize), String> {
    let mut content = original.to_vec();
    let mut saved = original.to_vec();
    let mut revision = 0u64;
    let mut after: Option<String> = None;
    let mut count = 0;
    loop {
        let page = store
            .replay(target, after.as_deref(), Some(500))
            .map_err(|e| format!("replay failed: {e}"))?;
        for entry in &page.entries {
            count += 1;
            hasher.add(entry);
            match entry.kind {
                JournalKind::Init => {
                    if entry.sha256 != sha256_hex(original) {
                        return Err(format!(
                            "the init entry records {}, not the fixture's {}",
                            entry.sha256,
                            sha256_hex(original)
                        ));
                    }
                }
                JournalKind::Edit => {
                    if entry.revision != revision + 1 {
                        return Err(format!(
                            "edit for revision {} follows revision {revision}",
                            entry.revision
                        ));
                    }
                    let mut ops = entry.operations.clone();
                    ops.sort_by_key(|o| std::cmp::Reverse(o.start_byte));
                    for op in ops {
                        if op.start_byte > op.end_byte || op.end_byte > content.len() {
                            return Err(format!(
                                "revision {}: operation {}..{} is out of bounds",
                                entry.revision, op.start_byte, op.end_byte
                            ));
                        }
                        content.splice(op.start_byte..op.end_byte, op.new_text.bytes());
                    }
                    revision = entry.revision;
                    if entry.sha256 != sha256_hex(&content) {
                        return Err(format!(
                            "replaying revision {revision} gives SHA-256 {}, the journal records {}",
                            sha256_hex(&content),
                            entry.sha256
                        ));
                    }
                    if let Some(key) = &entry.request_key {
                        index.edits.insert(
                            key.clone(),
                            (
                                entry.revision,
                                entry.sha256.clone(),
                                entry.attempt_id.clone(),
                            ),
                        );
                    }
                }
                JournalKind::Save => {
                    if entry.revision != revision || entry.sha256 != sha256_hex(&content) {
                        return Err(format!(
                            "version {} (revision {}) does not match the replayed content at \
                             revision {revision}",
                            entry.version, entry.revision
                        ));
                    }
                    index
                        .saves
                        .insert(entry.version, (entry.revision, entry.sha256.clone()));
                    saved.clone_from(&content);
                }
            }
        }
        match page.next_cursor {
            Some(c) if page.has_more => after = Some(c),
            _ => break,
        }
    }
    Ok((saved, count))
}

/// One acknowledged receipt in a wire log: a submission's (`outcome` accepted or rejected)
/// or a save's.
struct WireReceipt {
    line: usize,
    pid: u32,
    tool: String,
    receipt: Value,
}

/// Every acknowledged receipt in the run's wire logs (`*.mcp.jsonl`, streamed line by line;
/// requests paired with results by (process, id)) against the journal: an accepted
/// submission's request key must be a journal edit with the same revision, sha256 and
/// attempt id; a rejected one's must not be; a save's version must be a journal save with the
/// same revision and sha256. A receipt for a target the journal does not hold is named too.
fn check_receipts(ctx: &mut Ctx, indexes: &std::collections::HashMap<String, JournalIndex>) {
    const SUBMIT: &str = "patchdiff_submit_observed_operations";
    const SAVE: &str = "patchdiff_save";
    let before = ctx.problems.len();
    let logs: Vec<String> = evidence_files(&ctx.root)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.ends_with(".mcp.jsonl"))
        .collect();
    let mut checked = 0;
    for rel in &logs {
        let Ok(messages) = crate::evidence::wire_log_messages(&ctx.root.join(rel)) else {
            continue; // named by the chain check
        };
        let pairs = crate::evidence::pair_requests(
            messages,
            |m| {
                let tool = m.message["params"]["name"].as_str()?;
                (m.message["method"] == "tools/call" && (tool == SUBMIT || tool == SAVE))
                    .then(|| tool.to_owned())
            },
            |tool, reply| WireReceipt {
                line: reply.line,
                pid: reply.pid,
                tool: tool.clone(),
                receipt: reply.message["result"]["structuredContent"].clone(),
            },
        );
        for r in pairs.into_iter().filter_map(|(_, reply)| reply) {
            if let Some(problem) = receipt_problem(&r, indexes) {
                ctx.problem("receipts", rel, Some(r.line), problem);
            }
            checked += 1;
        }
    }
    ctx.done(
        "receipts",
        before,
        format!(
            "{checked} acknowledged receipts in {} wire logs against the journal",
            logs.len()
        ),
    );
}

/// Why receipt `r` is not what the journal holds, or `None` when it is (or it acknowledges
/// nothing: an error result carries no receipt).
fn receipt_problem(
    r: &WireReceipt,
    indexes: &std::collections::HashMap<String, JournalIndex>,
) -> Option<String> {
    let s = &r.receipt;
    let target = s["target"].as_str()?;
    let revision = s["revision"].as_u64();
    let sha256 = s["sha256"].as_str();
    let Some(index) = indexes.get(target) else {
        return Some(format!(
            "a receipt of pid {} for target `{target}`, which the journal does not hold",
            r.pid
        ));
    };
    if r.tool == "patchdiff_save" {
        let version = s["version"].as_u64()?;
        return match index.saves.get(&version) {
            Some((rev, sha)) if Some(*rev) == revision && Some(sha.as_str()) == sha256 => None,
            Some((rev, sha)) => Some(format!(
                "the save receipt of `{target}` version {version} (pid {}) acknowledges revision \
                 {} SHA-256 {}; the journal's save records revision {rev} SHA-256 {sha}",
                r.pid,
                revision.map_or("?".into(), |v| v.to_string()),
                sha256.unwrap_or("?"),
            )),
            None => Some(format!(
                "the save receipt of `{target}` version {version} (pid {}) is not in the journal",
                r.pid
            )),
        };
    }
    let key = s["request_key"].as_str()?;
    let attempt = s["attempt_id"].as_str();
    match (s["outcome"].as_str()?, index.edits.get(key)) {
        ("accepted", Some((rev, sha, id)))
            if Some(*rev) == revision
                && Some(sha.as_str()) == sha256
                && (attempt.is_none() || id.as_deref() == attempt) =>
        {
            None
        }
        ("accepted", Some((rev, sha, id))) => Some(format!(
            "the receipt of request key `{}` on `{target}` (pid {}) acknowledges revision {} \
             SHA-256 {} attempt {}; the journal's edit records revision {rev} SHA-256 {sha} \
             attempt {}",
            crate::display::visible_inline(key),
            r.pid,
            revision.map_or("?".into(), |v| v.to_string()),
            sha256.unwrap_or("?"),
            attempt.unwrap_or("?"),
            id.as_deref().unwrap_or("?"),
        )),
        ("accepted", None) => Some(format!(
            "the receipt of request key `{}` on `{target}` (pid {}) acknowledges revision {} \
             SHA-256 {}, but the journal holds no edit under that key",
            crate::display::visible_inline(key),
            r.pid,
            revision.map_or("?".into(), |v| v.to_string()),
            sha256.unwrap_or("?"),
        )),
        ("rejected", Some((rev, _, _))) => Some(format!(
            "the receipt of request key `{}` on `{target}` (pid {}) says rejected, but the \
             journal holds an edit under that key (revision {rev})",
            crate::display::visible_inline(key),
            r.pid
        )),
        _ => None,
    }
}

/// Re-runs the evaluator on the exports and compares each target's verdict with `report.json`.
async fn check_evaluation(ctx: &mut Ctx, fixtures: &FixtureManifest) {
    let before = ctx.problems.len();
    let report: Value = match std::fs::read(ctx.root.join("report.json"))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            ctx.problem("evaluation", "report.json", None, e);
            ctx.done("evaluation", before, "no report".into());
            return;
        }
    };
    // A run that stopped before the agent acted judged nothing: there is no verdict to
    // reproduce (and often no export).
    if report["outcome"] == "infra_abort" {
        ctx.done(
            "evaluation",
            before,
            "nothing judged (infra_abort): nothing to re-evaluate".into(),
        );
        return;
    }
    // The rule the run was judged by; reports from before it was recorded used
    // full-byte.
    let options = crate::evaluate::EvaluateOptions {
        require: report["require"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or(crate::evaluate::Require::FullByte),
        ..Default::default()
    };
    let evaluation =
        match crate::evaluate::evaluate_with(fixtures, &ctx.root.join("export"), &options).await {
            Ok(e) => e,
            Err(e) => {
                ctx.problem("evaluation", "export", None, e.to_string());
                ctx.done("evaluation", before, "evaluator failed".into());
                return;
            }
        };
    for t in &evaluation.targets {
        let stated = report["targets"]
            .as_array()
            .and_then(|ts| ts.iter().find(|r| r["name"] == t.name.as_str()))
            .map(|r| r["status"].clone())
            .unwrap_or(Value::Null);
        let fresh = serde_json::to_value(t.status).unwrap_or(Value::Null);
        if stated != fresh {
            ctx.problem(
                "evaluation",
                "report.json",
                None,
                format!(
                    "target `{}`: the report states {stated}, a fresh evaluation gives {fresh}",
                    t.name
                ),
            );
        }
    }
    ctx.done(
        "evaluation",
        before,
        format!(
            "{}/{} pass on re-evaluation",
            evaluation.passed, evaluation.total
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::CHAIN_FIELD;

    #[test]
    fn a_gap_a_torn_line_and_a_change_are_named_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.mcp.jsonl");
        let log = crate::evidence::WireLog::open(&path).unwrap();
        for _ in 0..3 {
            log.record(crate::evidence::Direction::Request, b"{\"id\":1}");
        }
        let full = std::fs::read(&path).unwrap();
        assert_eq!(check_chain(&full), Ok(3));
        // Removing record 1 and re-chaining (a writer that lost it) is a gap, not a change.
        let text = String::from_utf8(full.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut rechained = String::new();
        let mut prev = crate::chain::CHAIN_GENESIS.to_owned();
        for l in [lines[0], lines[2]] {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove(crate::chain::CHAIN_FIELD);
            let line = crate::chain::chained(&prev, &v.to_string());
            prev = crate::chain::line_digest(line.trim_end().as_bytes());
            rechained.push_str(&line);
        }
        let pid = std::process::id();
        let (line, message) = check_chain(rechained.as_bytes()).unwrap_err();
        assert_eq!(line, 2);
        assert!(
            message.starts_with(&format!(
                "record 1 of pid {pid} missing (the sequence jumps"
            )),
            "{message}"
        );
        // A cut-short last line is torn.
        let (line, message) = check_chain(&full[..full.len() - 10]).unwrap_err();
        assert_eq!(line, 3);
        assert!(message.contains("is torn"), "{message}");
    }

    #[test]
    fn a_changed_line_breaks_the_chain_at_that_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let log = crate::evidence::JsonlLog::open(&path).unwrap();
        for n in 0..4 {
            log.append(&serde_json::json!({ "n": n })).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(check_chain(&bytes), Ok(4));
        let text = String::from_utf8(bytes).unwrap();
        let changed = text.replacen("\"n\":1", "\"n\":7", 1);
        let (line, message) = check_chain(changed.as_bytes()).unwrap_err();
        assert_eq!(line, 2, "{message}");
        // A changed link names its own line, not the one before.
        let third = text.lines().nth(2).unwrap();
        let link_at = third.find(CHAIN_FIELD).unwrap() + CHAIN_FIELD.len() + 3;
        let mut bytes = text.clone().into_bytes();
        let offset = text.find(third).unwrap() + link_at;
        bytes[offset] = if bytes[offset] == b'a' { b'b' } else { b'a' };
        let (line, message) = check_chain(&bytes).unwrap_err();
        assert_eq!(line, 3, "{message}");
    }
}

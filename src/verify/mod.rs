//! `patchdiff verify RUN_DIR` (SPEC V1, V2): re-checks a sealed run from its files alone —
//! the seal, every file's digest in `SHA256SUMS`, the hash chain of every chained evidence log,
//! the fixture hashes against the fixture manifest, that replaying the journal in `store.sqlite`
//! from the authenticated fixture bytes reproduces every export byte for byte, and (with
//! `--evaluate`) that a fresh evaluation gives the verdicts the report states.
//!
//! Verify never writes into the run: the database is copied to a scratch directory before it is
//! opened. Every problem names the file (and the line, when one can be named).
//!
//! One file per check family: [`seal`] (seal, signature, digests), [`files`] (required files,
//! chains), [`fixtures`], [`store`] (the run's database and its identity), [`journal`] (the
//! replay, through the one journal replayer [`replay`]), [`receipts`], [`evaluation`].

mod evaluation;
mod files;
mod fixtures;
mod journal;
mod receipts;
pub mod replay;
mod seal;
mod store;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::evidence::RunDir;

use self::evaluation::check_evaluation;
use self::files::{check_chains, check_files};
use self::fixtures::check_fixtures;
use self::seal::{check_digests, check_seal, check_signature};
use self::store::check_journal;

pub use self::files::{check_chain, is_chained};

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
    /// The run's files by name ([`RunDir`], from `root`).
    run: RunDir,
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
        run: RunDir::at(root),
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
    if let Some(id) = std::fs::read(root.join(crate::evidence::run_dir::MANIFEST_FILE))
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

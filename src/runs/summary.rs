//! What one index entry is (U2): [`RunSummary`] and its verdict, kind and seal state, with the
//! small readers every kind of entry shares (a file that may be absent, typed JSON, a seal's
//! digests, a suite's name) and the words a list shows (dates, verdicts). A leaf module: the
//! run reader, the comparison reader, the detail view and the pair all import it and it
//! imports none of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What an index entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// One canary run (`r-*`).
    Run,
    /// A gate-2 comparison (`cmp-*`, gate 2).
    Comparison,
}

/// An entry's verdict: a run's outcome, a comparison's verdict kind, or why it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunVerdict {
    /// Every step succeeded and every target passed.
    Passed,
    /// A step or a target did not pass.
    Failed,
    /// The run stopped before the agent acted: nothing judged.
    InfraAbort,
    /// No report (the run is unfinished, or was interrupted before `report`).
    NoReport,
    /// A comparison: nothing moved beyond what its design can tell apart.
    Unchanged,
    /// A comparison: an improvement test rejected, nothing regressed.
    Improved,
    /// A comparison: a target, the run level or a critical invariant regressed.
    Regressed,
    /// A comparison: evidence integrity failed.
    Invalid,
    /// A comparison: budget or time ran out.
    Incomplete,
    /// The directory's files cannot be read back (the entry's `problem` says why).
    Unreadable,
}

impl RunVerdict {
    /// Every verdict, in the order `--verdict` lists them.
    pub const ALL: [RunVerdict; 10] = [
        Self::Passed,
        Self::Failed,
        Self::InfraAbort,
        Self::NoReport,
        Self::Unchanged,
        Self::Improved,
        Self::Regressed,
        Self::Invalid,
        Self::Incomplete,
        Self::Unreadable,
    ];

    /// The filter word (`passed`, `infra_abort`, `no_report`, …), as `--json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::InfraAbort => "infra_abort",
            Self::NoReport => "no_report",
            Self::Unchanged => "unchanged",
            Self::Improved => "improved",
            Self::Regressed => "regressed",
            Self::Invalid => "invalid",
            Self::Incomplete => "incomplete",
            Self::Unreadable => "unreadable",
        }
    }

    /// The word a list shows: `PASSED`, `FAILED`, `INFRA_ABORT`, `no report`, a comparison's
    /// `UNCHANGED`…, `UNREADABLE`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Passed => "PASSED",
            Self::Failed => "FAILED",
            Self::InfraAbort => "INFRA_ABORT",
            Self::NoReport => "no report",
            Self::Unchanged => "UNCHANGED",
            Self::Improved => "IMPROVED",
            Self::Regressed => "REGRESSED",
            Self::Invalid => "INVALID",
            Self::Incomplete => "INCOMPLETE",
            Self::Unreadable => "UNREADABLE",
        }
    }
}

impl std::str::FromStr for RunVerdict {
    type Err = String;

    /// Parses a filter word, case-insensitively (`-` and `_` alike). Errors name the value and
    /// every accepted word.
    fn from_str(s: &str) -> Result<Self, String> {
        let want = s.trim().to_ascii_lowercase().replace('-', "_");
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == want)
            .ok_or_else(|| {
                format!(
                    "unknown verdict `{}`; accepted: {}",
                    crate::display::visible_inline(s),
                    Self::ALL.map(Self::as_str).join(", ")
                )
            })
    }
}

/// Whether an entry's seal still binds its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SealState {
    /// No seal: the run was never sealed (unfinished or interrupted).
    Unsealed,
    /// The seal's digests match the files it names (`manifest.json` and `SHA256SUMS`; a
    /// comparison's `SHA256SUMS`). The full check of every file is `patchdiff verify`.
    Sealed,
    /// The seal names digests its files no longer have, or cannot be parsed.
    Broken,
}

impl SealState {
    /// `unsealed`, `sealed`, `SEAL BROKEN`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Unsealed => "unsealed",
            Self::Sealed => "sealed",
            Self::Broken => "SEAL BROKEN",
        }
    }
}

/// What a run or comparison directory says about itself (one index entry).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    /// The directory's name (`r-…`, `cmp-…`).
    pub id: String,
    /// Run or comparison.
    pub kind: EntryKind,
    pub path: PathBuf,
    /// Unix ms the run started (from its manifest; a comparison: its first member run, else
    /// when its plan was sealed), 0 when unknown.
    pub started_ms: f64,
    /// The recorded model (a comparison: `A → B` when the arms differ), when known.
    pub model: Option<String>,
    /// The agent host (`claude`, `codex`); `None` for a scripted agent or an unknown one.
    pub host: Option<String>,
    /// The suite's name: its directory's name (`bundled` for the suite shipped in the
    /// binary's bundle), when the manifest records where it came from.
    pub suite: Option<String>,
    /// SHA-256 of the suite's fixture manifest (lowercase hex), when recorded.
    pub suite_sha256: Option<String>,
    /// The entry's verdict.
    pub verdict: RunVerdict,
    /// `Some(true)` passed, `Some(false)` failed, `None` no report.
    pub passed: Option<bool>,
    /// Target name → verdict (`pass`, `FAIL`, `infra_error`, `flaky`, `infra_abort` — the run
    /// stopped before the agent acted, nothing judged — or `-`, not evaluated). A
    /// comparison's: `REGRESSED`, `IMPROVED` or `unchanged` per target.
    pub verdicts: BTreeMap<String, String>,
    /// `report.json`'s `outcome` (`passed`, `failed`, `infra_abort`), when it has one.
    pub outcome: Option<String>,
    /// Targets that passed, of the targets the report lists (a run; 0 of 0 without a report).
    pub targets_passed: usize,
    pub targets_total: usize,
    /// A comparison's member runs counted, of the runs its plan asks for (both arms).
    pub members: Option<(usize, usize)>,
    /// The manifest records a loopback provider endpoint — a rehearsal.
    pub rehearsal: bool,
    /// Whether the seal binds the files it names.
    pub seal: SealState,
    /// The run's seal is signed (`SEAL.sig.json` is present; `verify --key` checks it).
    pub signed: bool,
    /// Why the entry is unreadable or its seal broken; `None` otherwise.
    pub problem: Option<String>,
}

impl RunSummary {
    /// The entry for a directory that cannot be read back.
    pub(super) fn unreadable(path: &Path, kind: EntryKind, problem: String) -> Self {
        Self {
            id: dir_name(path),
            kind,
            path: path.to_owned(),
            started_ms: 0.0,
            model: None,
            host: None,
            suite: None,
            suite_sha256: None,
            verdict: RunVerdict::Unreadable,
            passed: None,
            verdicts: BTreeMap::new(),
            outcome: None,
            targets_passed: 0,
            targets_total: 0,
            members: None,
            rehearsal: false,
            seal: SealState::Unsealed,
            signed: false,
            problem: Some(problem),
        }
    }

    /// The host column: the agent host, or `scripted` when none was recorded.
    pub fn host_label(&self) -> &str {
        self.host.as_deref().unwrap_or("scripted")
    }
}

pub(super) fn dir_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Reads `dir/name`: `Ok(None)` when absent, an error naming the file otherwise.
pub(super) fn read_file(dir: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(dir.join(name)) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

pub(super) fn parse<'a, T: Deserialize<'a>>(name: &str, bytes: &'a [u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("{name}: not the JSON a run writes ({e})"))
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest a seal file records for `file` (`SHA256 (file) = hex`).
pub(super) fn sealed_digest<'a>(seal: &'a str, file: &str) -> Option<&'a str> {
    let prefix = format!("SHA256 ({file}) = ");
    seal.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(str::trim)
}

/// Whether `seal` (a seal file's text) binds each `(file name, bytes)`; a problem names the
/// file whose digest differs.
pub(super) fn seal_state(
    seal: Option<&[u8]>,
    files: &[(&str, Option<&[u8]>)],
) -> (SealState, Option<String>) {
    let Some(seal) = seal else {
        return (SealState::Unsealed, None);
    };
    let text = String::from_utf8_lossy(seal);
    for (name, bytes) in files {
        let Some(recorded) = sealed_digest(&text, name) else {
            continue;
        };
        match bytes {
            None => {
                return (
                    SealState::Broken,
                    Some(format!("the seal binds {name}, which is missing")),
                );
            }
            Some(b) if sha256_hex(b) != recorded => {
                return (
                    SealState::Broken,
                    Some(format!("{name} differs from the digest its seal records")),
                );
            }
            Some(_) => {}
        }
    }
    if files
        .iter()
        .all(|(name, _)| sealed_digest(&text, name).is_none())
    {
        return (
            SealState::Broken,
            Some("the seal names none of the files it should bind".to_owned()),
        );
    }
    (SealState::Sealed, None)
}

/// The suite's name from where its manifest came from: the directory holding it, `bundled`
/// for the bundle's own suite.
pub(super) fn suite_name(source: &str) -> String {
    let path = Path::new(source);
    let dir = if path.extension().is_some_and(|e| e == "json") {
        path.parent().unwrap_or(path)
    } else {
        path
    };
    let bundled = dir
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n.to_string_lossy().starts_with("bundle-"));
    if bundled {
        "bundled".to_owned()
    } else {
        dir.file_name()
            .map_or_else(|| source.to_owned(), |n| n.to_string_lossy().into_owned())
    }
}

/// The entry kind a directory name implies: `r-*` a run, `cmp-*` a comparison.
pub fn kind_of(name: &str) -> Option<EntryKind> {
    if name.starts_with("r-") {
        Some(EntryKind::Run)
    } else if name.starts_with("cmp-") {
        Some(EntryKind::Comparison)
    } else {
        None
    }
}

/// The verdict's label, with ` (rehearsal)` for a loopback-endpoint run.
pub(crate) fn verdict_word(r: &RunSummary) -> String {
    let word = r.verdict.label();
    if r.rehearsal {
        format!("{word} (rehearsal)")
    } else {
        word.to_owned()
    }
}

/// `YYYY-MM-DD HH:MM` (UTC) of a Unix ms time, `-` for 0.
pub fn date(ms: f64) -> String {
    if ms <= 0.0 || !ms.is_finite() {
        return "-".into();
    }
    let secs = (ms / 1000.0) as i64;
    let (y, m, d) = crate::canary::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

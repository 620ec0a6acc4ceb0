//! The run index (U2): every past run directory (`r-*`) and comparison
//! directory (`cmp-*`) under a runs root, each summarized from its own files — `manifest.json`,
//! `report.json`, the seal — and never written. A directory that cannot be read back is an
//! entry too, marked [`RunVerdict::Unreadable`] with the reason; listing never fails on one.
//!
//! Only the few fields a summary needs are deserialized (typed, everything else skipped), so
//! listing 1,000 runs stays within the 100 ms the console's runs pane allows
//! (`cargo run --release --example runs-bench` measures it).

use std::path::{Path, PathBuf};

pub use super::comparison::read_comparison;
pub use super::run::read_run;
use super::summary::dir_name;
pub use super::summary::{EntryKind, RunSummary, RunVerdict, SealState, kind_of};

/// Reads one entry by its kind; a directory that cannot be read back is an
/// [`RunVerdict::Unreadable`] entry naming why.
pub fn read_entry(path: &Path, kind: EntryKind) -> RunSummary {
    let read = match kind {
        EntryKind::Run => read_run(path),
        EntryKind::Comparison => read_comparison(path),
    };
    read.unwrap_or_else(|problem| {
        // The entry names its directory; the problem need not repeat it.
        let prefix = format!("{}: ", path.display());
        let problem = problem
            .strip_prefix(&prefix)
            .map_or(problem.clone(), str::to_owned);
        RunSummary::unreadable(path, kind, problem)
    })
}

/// The entry directories under `root`: `r-*` and `cmp-*` directories (symlinks are not
/// followed), with their kind. A missing root has none.
pub fn entry_dirs(root: &Path) -> Vec<(PathBuf, EntryKind)> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let kind = kind_of(&e.file_name().to_string_lossy())?;
            Some((e.path(), kind))
        })
        .collect()
}

/// How [`query`] orders entries; each sort breaks ties newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Newest first (the default).
    #[default]
    Newest,
    /// Oldest first.
    Oldest,
    /// By model, A to Z.
    Model,
    /// By host, A to Z (`scripted` for none).
    Host,
    /// By verdict, in [`RunVerdict::ALL`] order.
    Verdict,
}

impl std::str::FromStr for SortKey {
    type Err = String;

    /// `newest`, `oldest`, `model`, `host`, `verdict`; errors name the value and the accepted.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "newest" | "time" | "date" => Ok(Self::Newest),
            "oldest" => Ok(Self::Oldest),
            "model" => Ok(Self::Model),
            "host" => Ok(Self::Host),
            "verdict" => Ok(Self::Verdict),
            _ => Err(format!(
                "unknown sort `{}`; accepted: newest, oldest, model, host, verdict",
                crate::display::visible_inline(s)
            )),
        }
    }
}

/// Which entries [`query`] keeps. Text filters match case-insensitively on a part of the
/// value (`--model sonnet`); `suite` matches the suite's name or a prefix of its digest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub model: Option<String>,
    /// Matched against [`RunSummary::host_label`] (`scripted` for none).
    pub host: Option<String>,
    pub suite: Option<String>,
    pub verdict: Option<RunVerdict>,
    /// `Some(true)` only rehearsals, `Some(false)` only runs against a real provider.
    pub rehearsal: Option<bool>,
    /// Only runs, or only comparisons.
    pub kind: Option<EntryKind>,
}

fn contains_ci(value: Option<&str>, part: &str) -> bool {
    value.is_some_and(|v| v.to_lowercase().contains(&part.to_lowercase()))
}

impl RunFilter {
    /// Whether `run` passes every filter set.
    pub fn matches(&self, run: &RunSummary) -> bool {
        self.model
            .as_deref()
            .is_none_or(|m| contains_ci(run.model.as_deref(), m))
            && self
                .host
                .as_deref()
                .is_none_or(|h| contains_ci(Some(run.host_label()), h))
            && self.suite.as_deref().is_none_or(|s| {
                contains_ci(run.suite.as_deref(), s)
                    || run
                        .suite_sha256
                        .as_deref()
                        .is_some_and(|d| d.starts_with(&s.to_ascii_lowercase()))
            })
            && self.verdict.is_none_or(|v| run.verdict == v)
            && self.rehearsal.is_none_or(|r| run.rehearsal == r)
            && self.kind.is_none_or(|k| run.kind == k)
    }
}

/// Sorts `runs` by `key`, ties newest first, then by id.
pub fn sort(runs: &mut [RunSummary], key: SortKey) {
    let newest = |a: &RunSummary, b: &RunSummary| {
        b.started_ms
            .total_cmp(&a.started_ms)
            .then_with(|| b.id.cmp(&a.id))
    };
    let text = |v: Option<&str>| v.map(str::to_lowercase);
    runs.sort_by(|a, b| match key {
        SortKey::Newest => newest(a, b),
        SortKey::Oldest => newest(b, a),
        // Unknown models sort last.
        SortKey::Model => match (text(a.model.as_deref()), text(b.model.as_deref())) {
            (Some(x), Some(y)) => x.cmp(&y),
            (x, y) => y.is_none().cmp(&x.is_none()).reverse(),
        }
        .then_with(|| newest(a, b)),
        SortKey::Host => text(Some(a.host_label()))
            .cmp(&text(Some(b.host_label())))
            .then_with(|| newest(a, b)),
        SortKey::Verdict => a.verdict.cmp(&b.verdict).then_with(|| newest(a, b)),
    });
}

/// Every entry under `root` — runs and comparisons, unreadable ones included — newest first.
/// Reads only; never fails (an unreadable root has no entries).
pub fn index(root: &Path) -> Vec<RunSummary> {
    let mut runs: Vec<RunSummary> = entry_dirs(root)
        .into_iter()
        .map(|(path, kind)| read_entry(&path, kind))
        .collect();
    sort(&mut runs, SortKey::Newest);
    runs
}

/// The entries under `root` that pass `filter`, ordered by `key`.
pub fn query(root: &Path, filter: &RunFilter, key: SortKey) -> Vec<RunSummary> {
    let mut runs: Vec<RunSummary> = entry_dirs(root)
        .into_iter()
        .map(|(path, kind)| read_entry(&path, kind))
        .filter(|r| filter.matches(r))
        .collect();
    sort(&mut runs, key);
    runs
}

/// How many candidates an ambiguous or unknown id's error lists.
pub const CANDIDATES_LISTED: usize = 10;

/// Finds the entry `id` names under `root`: an exact directory name, a unique prefix of one
/// (with or without its `r-`/`cmp-`), `CMP/SLOT` for a comparison's member run in that slot
/// (its last attempt), or a path (absolute, or holding a `/`, that is a directory). Errors: no
/// entry matches (listing the newest), or several do (listing them) — at most
/// [`CANDIDATES_LISTED`] each.
pub fn resolve(root: &Path, id: &str) -> Result<PathBuf, String> {
    let shown = crate::display::visible_inline(id);
    if id.is_empty() {
        return Err("an empty run id; give a run's id (or a unique prefix of it)".to_owned());
    }
    let as_path = Path::new(id);
    if as_path.is_absolute() || id.contains('/') {
        if as_path.is_dir() {
            return Ok(as_path.to_owned());
        }
        // `cmp-…/A-01`: a comparison's member run.
        if let Some((cmp, slot)) = id.split_once('/')
            && !slot.contains('/')
            && let Ok(dir) = resolve(root, cmp)
            && kind_of(&dir_name(&dir)) == Some(EntryKind::Comparison)
        {
            let slot_dir = dir.join("runs").join(slot);
            let mut attempts: Vec<PathBuf> = entry_dirs(&slot_dir)
                .into_iter()
                .filter(|(_, k)| *k == EntryKind::Run)
                .map(|(p, _)| p)
                .collect();
            attempts.sort();
            return attempts.pop().ok_or_else(|| {
                format!(
                    "comparison {} has no run in slot `{}`",
                    dir_name(&dir),
                    crate::display::visible_inline(slot)
                )
            });
        }
        return Err(format!("{shown}: no such run directory"));
    }
    let entries = entry_dirs(root);
    if let Some((path, _)) = entries.iter().find(|(p, _)| dir_name(p) == id) {
        return Ok(path.clone());
    }
    let mut matching: Vec<&PathBuf> = entries
        .iter()
        .map(|(p, _)| p)
        .filter(|p| {
            let name = dir_name(p);
            let bare = name
                .strip_prefix("r-")
                .or_else(|| name.strip_prefix("cmp-"))
                .unwrap_or(&name);
            name.starts_with(id) || bare.starts_with(id)
        })
        .collect();
    matching.sort();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let mut newest: Vec<String> = entries.iter().map(|(p, _)| dir_name(p)).collect();
            newest.sort_by(|a, b| b.cmp(a));
            Err(if newest.is_empty() {
                format!("no run `{shown}`: {} holds no runs", root.display())
            } else {
                format!(
                    "no run `{shown}` under {}; {} entries there, e.g. {}",
                    root.display(),
                    newest.len(),
                    list(&newest)
                )
            })
        }
        many => Err(format!(
            "`{shown}` is ambiguous: it starts {} entries under {}: {} (give more of the id)",
            many.len(),
            root.display(),
            list(&many.iter().map(|p| dir_name(p)).collect::<Vec<_>>())
        )),
    }
}

fn list(names: &[String]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(CANDIDATES_LISTED)
        .map(|n| crate::display::visible_inline(n).into_owned())
        .collect();
    let more = names.len().saturating_sub(CANDIDATES_LISTED);
    if more > 0 {
        format!("{} … and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::summary::sha256_hex;
    use serde_json::json;

    fn write(dir: &Path, name: &str, value: &serde_json::Value) -> Vec<u8> {
        std::fs::create_dir_all(dir).unwrap();
        let bytes = serde_json::to_vec(value).unwrap();
        std::fs::write(dir.join(name), &bytes).unwrap();
        bytes
    }

    /// A run with a manifest, a report and (when `sealed`) a seal binding both files.
    fn run(root: &Path, id: &str, started: f64, model: &str, passed: bool, sealed: bool) {
        let dir = root.join(id);
        let manifest = write(
            &dir,
            "manifest.json",
            &json!({"run_id": id, "started_ms": started, "agent": {"model": model},
                    "configuration": {"fixture_manifest_source": "/s/my-suite/manifest.json",
                                      "fixture_manifest_sha256": "ab12cd34ef"}}),
        );
        write(
            &dir,
            "report.json",
            &json!({"passed": passed, "outcome": if passed {"passed"} else {"failed"},
                    "targets": [{"name": "chess", "status": if passed {"pass"} else {"fail"}},
                                {"name": "limiter", "status": "pass"}]}),
        );
        if sealed {
            std::fs::write(dir.join("SHA256SUMS"), b"sums\n").unwrap();
            std::fs::write(
                dir.join("manifest.seal"),
                crate::evidence::seal_text(
                    id,
                    Some(&sha256_hex(&manifest)),
                    &sha256_hex(b"sums\n"),
                ),
            )
            .unwrap();
        }
    }

    #[test]
    fn a_summary_carries_suite_verdict_targets_and_seal_from_the_runs_own_files() {
        let root = tempfile::tempdir().unwrap();
        run(root.path(), "r-1", 5.0, "m-1", false, true);
        let s = read_run(&root.path().join("r-1")).unwrap();
        assert_eq!(s.verdict, RunVerdict::Failed);
        assert_eq!((s.targets_passed, s.targets_total), (1, 2));
        assert_eq!(s.suite.as_deref(), Some("my-suite"));
        assert_eq!(s.suite_sha256.as_deref(), Some("ab12cd34ef"));
        assert_eq!(s.seal, SealState::Sealed, "{s:?}");
        // A byte changed after sealing breaks the seal, and the entry says which file.
        let path = root.path().join("r-1/manifest.json");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(b' ');
        std::fs::write(&path, bytes).unwrap();
        let s = read_run(&root.path().join("r-1")).unwrap();
        assert_eq!(s.seal, SealState::Broken);
        assert!(s.problem.unwrap().contains("manifest.json"));
    }

    #[test]
    fn corrupt_and_empty_run_directories_are_listed_as_unreadable_never_skipped() {
        let root = tempfile::tempdir().unwrap();
        run(root.path(), "r-good", 5.0, "m", true, false);
        std::fs::create_dir(root.path().join("r-empty")).unwrap();
        std::fs::create_dir(root.path().join("r-torn")).unwrap();
        std::fs::write(
            root.path().join("r-torn/manifest.json"),
            b"{\"run_id\": \"r-to",
        )
        .unwrap();
        std::fs::create_dir(root.path().join("r-typed")).unwrap();
        std::fs::write(
            root.path().join("r-typed/report.json"),
            b"{\"passed\": \"yes\"}",
        )
        .unwrap();
        std::fs::create_dir(root.path().join("cmp-nothing")).unwrap();
        let runs = index(root.path());
        assert_eq!(runs.len(), 5, "{runs:?}");
        for id in ["r-empty", "r-torn", "r-typed", "cmp-nothing"] {
            let r = runs.iter().find(|r| r.id == id).unwrap();
            assert_eq!(r.verdict, RunVerdict::Unreadable, "{r:?}");
            assert!(r.problem.is_some(), "{r:?}");
        }
        let torn = runs.iter().find(|r| r.id == "r-torn").unwrap();
        assert!(
            torn.problem.as_deref().unwrap().contains("manifest.json"),
            "{torn:?}"
        );
    }

    #[test]
    fn entries_filter_by_model_host_suite_verdict_and_rehearsal_and_sort_by_each() {
        let root = tempfile::tempdir().unwrap();
        run(root.path(), "r-a", 1.0, "claude-sonnet-4-5", true, false);
        run(root.path(), "r-b", 2.0, "gpt-5", false, false);
        run(root.path(), "r-c", 3.0, "claude-opus-4-1", false, false);
        let ids = |f: &RunFilter, key: SortKey| -> Vec<String> {
            query(root.path(), f, key)
                .into_iter()
                .map(|r| r.id)
                .collect()
        };
        let all = RunFilter::default();
        assert_eq!(ids(&all, SortKey::Newest), ["r-c", "r-b", "r-a"]);
        assert_eq!(ids(&all, SortKey::Oldest), ["r-a", "r-b", "r-c"]);
        assert_eq!(ids(&all, SortKey::Model), ["r-c", "r-a", "r-b"]);
        assert_eq!(ids(&all, SortKey::Verdict), ["r-a", "r-c", "r-b"]);
        let f = RunFilter {
            model: Some("CLAUDE".into()),
            ..Default::default()
        };
        assert_eq!(ids(&f, SortKey::Newest), ["r-c", "r-a"]);
        let f = RunFilter {
            verdict: Some("failed".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(ids(&f, SortKey::Newest), ["r-c", "r-b"]);
        let f = RunFilter {
            host: Some("scripted".into()),
            suite: Some("ab12".into()),
            rehearsal: Some(false),
            ..Default::default()
        };
        assert_eq!(ids(&f, SortKey::Newest).len(), 3);
        let f = RunFilter {
            rehearsal: Some(true),
            ..Default::default()
        };
        assert!(ids(&f, SortKey::Newest).is_empty());
        let e = "nope".parse::<RunVerdict>().unwrap_err();
        assert!(e.contains("`nope`") && e.contains("infra_abort"), "{e}");
    }

    #[test]
    fn an_id_resolves_by_unique_prefix_and_an_ambiguous_or_unknown_one_lists_candidates() {
        let root = tempfile::tempdir().unwrap();
        run(root.path(), "r-20261201-101010-1", 1.0, "m", true, false);
        run(root.path(), "r-20261201-101010-2", 2.0, "m", true, false);
        run(root.path(), "r-20261202-090000-3", 3.0, "m", true, false);
        let found = |id: &str| resolve(root.path(), id).map(|p| dir_name(&p));
        assert_eq!(found("r-20261202").unwrap(), "r-20261202-090000-3");
        assert_eq!(found("20261202").unwrap(), "r-20261202-090000-3");
        assert_eq!(found("r-20261201-101010-2").unwrap(), "r-20261201-101010-2");
        let e = found("r-20261201").unwrap_err();
        assert!(
            e.contains("ambiguous")
                && e.contains("r-20261201-101010-1")
                && e.contains("r-20261201-101010-2"),
            "{e}"
        );
        let e = found("r-1999").unwrap_err();
        assert!(
            e.contains("no run `r-1999`") && e.contains("r-20261202-090000-3"),
            "{e}"
        );
        let e = found("\u{1b}[2J").unwrap_err();
        assert!(!e.contains('\u{1b}'), "{e}");
    }
}

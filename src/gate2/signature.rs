//! Failure signatures (GATE2 §4.9): a failing target's export is clustered
//! with every other export that differs from the reference *in the same way* — the same lines
//! removed and inserted, wherever they sit — so "castling rook colour in A-03 B-02 B-07" is one
//! row, named "new in B" when no baseline run shows it. Deterministic: no model writes the
//! triage.
//!
//! A signature's id is the first 6 hex digits of the SHA-256 of its changed lines (`-` removed,
//! `+` inserted, in order, line numbers and unchanged context left out); its summary is the
//! first change, each side cut to [`SUMMARY_CHARS`] characters.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// Characters of each side of the first change a summary keeps.
pub const SUMMARY_CHARS: usize = 48;

/// One export's difference from its reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffSignature {
    /// 6 hex digits.
    pub id: String,
    /// The first change, e.g. `` `return a` → `return b` `` (or "identical to the reference").
    pub summary: String,
}

fn cut(line: &str) -> String {
    let line = line.trim();
    if line.chars().count() > SUMMARY_CHARS {
        let head: String = line.chars().take(SUMMARY_CHARS).collect();
        format!("{head}…")
    } else {
        line.to_owned()
    }
}

/// The signature of `exported` against `reference` (both text; invalid UTF-8 compared lossily).
pub fn diff_signature(exported: &str, reference: &str) -> DiffSignature {
    use sha2::{Digest, Sha256};
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_lines(reference, exported);
    let mut hasher = Sha256::new();
    let (mut removed, mut inserted) = (None, None);
    // `any`: a change was seen; `first_done`: the first run of changes ended (the summary
    // describes only it).
    let (mut any, mut first_done) = (false, false);
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            ChangeTag::Equal => {
                first_done |= any;
                continue;
            }
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
        };
        any = true;
        hasher.update([sign as u8]);
        hasher.update(change.value().as_bytes());
        hasher.update([0]);
        if !first_done {
            let slot = if sign == '-' {
                &mut removed
            } else {
                &mut inserted
            };
            if slot.is_none() {
                *slot = Some(cut(change.value()));
            }
        }
    }
    let summary = match (any, removed, inserted) {
        (false, ..) => "identical to the reference".to_owned(),
        (_, Some(r), Some(i)) => format!("`{r}` → `{i}`"),
        (_, Some(r), None) => format!("removed `{r}`"),
        (_, None, Some(i)) => format!("inserted `{i}`"),
        (_, None, None) => "identical to the reference".to_owned(),
    };
    DiffSignature {
        id: hex::encode(hasher.finalize())[..6].to_owned(),
        summary,
    }
}

/// The signature of each named target's export in the sealed run `run` against its
/// reference, from the run's own authenticated suite copy (`suite/manifest.json`: the
/// fixture's `module_file` under `export/`, its `expected` under `suite/`). Targets whose files
/// cannot be read are left out.
pub fn run_signatures(run: &Path, targets: &[&str]) -> BTreeMap<String, DiffSignature> {
    let mut out = BTreeMap::new();
    let Ok(bytes) = std::fs::read(run.join("suite/manifest.json")) else {
        return out;
    };
    let Ok(manifest) = serde_json::from_slice::<Value>(&bytes) else {
        return out;
    };
    for fixture in manifest["fixtures"].as_array().into_iter().flatten() {
        let Some(name) = fixture["target"].as_str() else {
            continue;
        };
        if !targets.contains(&name) {
            continue;
        }
        let (Some(module), Some(expected)) = (
            fixture["module_file"].as_str(),
            fixture["expected"].as_str(),
        ) else {
            continue;
        };
        // Names from the sealed manifest; stay inside the run directory.
        if [module, expected]
            .iter()
            .any(|p| Path::new(p).is_absolute() || p.split('/').any(|c| c == ".."))
        {
            continue;
        }
        let (Ok(exported), Ok(reference)) = (
            std::fs::read(run.join("export").join(module)),
            std::fs::read(run.join("suite").join(expected)),
        ) else {
            continue;
        };
        out.insert(
            name.to_owned(),
            diff_signature(
                &String::from_utf8_lossy(&exported),
                &String::from_utf8_lossy(&reference),
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_change_at_other_lines_has_the_same_signature_and_another_change_does_not() {
        let reference = "a\nb\nc\nd\n";
        let here = diff_signature("a\nB\nc\nd\n", reference);
        let shifted = diff_signature("a\nB\nc\nd\n", "a\nb\nc\nd\n");
        assert_eq!(here, shifted);
        assert_eq!(here.summary, "`b` → `B`");
        assert_eq!(here.id.len(), 6);
        let other = diff_signature("a\nb\nC\nd\n", reference);
        assert_ne!(here.id, other.id);
        // The same edit in a longer file with other unchanged lines around it: same cluster.
        let padded = diff_signature("x\na\nB\nc\nd\ny\n", "x\na\nb\nc\nd\ny\n");
        assert_eq!(padded.id, here.id);
        assert_eq!(
            diff_signature(reference, reference).summary,
            "identical to the reference"
        );
    }
}

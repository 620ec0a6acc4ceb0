//! `docs/requirements.md` against the code (cheap: reads files, starts nothing).
//!
//! Every requirement id `src/` cites has an entry there, and every entry lists tests that exist
//! and that name the id themselves: in the test's name, its doc comment or its body, or in the
//! header (`//!`) of the test file holding it. So an id cannot drift out of the document, and
//! the document cannot claim a test pins what the test never mentions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The letters of the requirement families (P, W, K, M, T, E, C, A, V, S, U, R).
const FAMILIES: &str = "PWKMTECAVSUR";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files under `dir`, skipping installed tool trees.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "node_modules") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The requirement ids in `text`: a family letter and one or two digits (no leading zero),
/// standing alone (not part of a longer word, nor a path segment like `IpAddr::V4`). A range
/// (`C1–C7`, `K3-K8`) cites every id in it.
fn ids_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let single = single_ids_in(text);
    for (at, id) in &single {
        out.insert(id.clone());
        let rest = &text[at + id.len()..];
        let Some(rest) = rest.strip_prefix('–').or_else(|| rest.strip_prefix('-')) else {
            continue;
        };
        if let Some((_, last)) = single
            .iter()
            .find(|(a, _)| text.len() - a == rest.len())
            .filter(|(_, last)| last.as_bytes()[0] == id.as_bytes()[0])
        {
            let (from, to): (u32, u32) = (id[1..].parse().unwrap(), last[1..].parse().unwrap());
            out.extend((from..=to).map(|n| format!("{}{n}", &id[..1])));
        }
    }
    out
}

/// [`ids_in`] without ranges: each id with its byte offset.
fn single_ids_in(text: &str) -> Vec<(usize, String)> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        if !FAMILIES.as_bytes().contains(&b)
            || (i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == b':'))
        {
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .count();
        let end = i + 1 + digits;
        if (1..=2).contains(&digits)
            && bytes[i + 1] != b'0'
            && bytes.get(end).is_none_or(|&n| !word(n))
        {
            out.push((i, text[i..end].to_owned()));
        }
    }
    out
}

/// Test functions by name, each with the text that may name its requirements.
fn tests_and_their_text() -> BTreeMap<String, String> {
    let mut tests: BTreeMap<String, String> = BTreeMap::new();
    for file in rust_files(&root().join("src"))
        .into_iter()
        .chain(rust_files(&root().join("tests")))
    {
        let text = std::fs::read_to_string(&file).expect("read source");
        let lines: Vec<&str> = text.lines().collect();
        let header: String = if file.starts_with(root().join("tests")) {
            lines
                .iter()
                .filter(|l| l.starts_with("//!"))
                .copied()
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            String::new()
        };
        // Functions registered through `backend_tests!(a, b, …)` are tests too.
        let mut registered = BTreeSet::new();
        for (at, m) in text
            .match_indices("backend_tests!(")
            .chain(text.match_indices("backend_tokio_tests!("))
        {
            let list = &text[at + m.len()..];
            let list = &list[..list.find(')').unwrap_or(list.len())];
            registered.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned),
            );
        }
        for (j, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let Some(name) = fn_name(trimmed) else {
                continue;
            };
            let mut start = j;
            while start > 0 {
                let above = lines[start - 1].trim_start();
                if above.starts_with("///") || above.starts_with("#[") {
                    start -= 1;
                } else {
                    break;
                }
            }
            let attributed = lines[start..j].iter().any(|l| {
                let l = l.trim_start();
                l.starts_with("#[test]") || l.starts_with("#[tokio::test")
            });
            if !attributed && !registered.contains(name) {
                continue;
            }
            let close = format!("{indent}}}");
            let end = lines[j..]
                .iter()
                .position(|l| l.trim_end() == close)
                .map_or(lines.len(), |k| j + k + 1);
            let mut region = lines[start..end].join("\n");
            region.push('\n');
            region.push_str(&header);
            tests
                .entry(name.to_owned())
                .and_modify(|t| {
                    t.push('\n');
                    t.push_str(&region);
                })
                .or_insert(region);
        }
    }
    tests
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line;
    for prefix in ["pub(crate) ", "pub ", "async "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// One entry of the document: its id and the tests it says pin it.
struct Entry {
    id: String,
    tests: Vec<String>,
}

/// Entries are `### ID — title` headings; the `Pinned by:` paragraph under each names its
/// tests in backticks.
fn document() -> Vec<Entry> {
    let path = root().join("docs/requirements.md");
    let text = std::fs::read_to_string(&path).expect("read docs/requirements.md");
    let mut entries = Vec::new();
    for section in text.split("\n### ").skip(1) {
        let id = section
            .split_whitespace()
            .next()
            .expect("a heading")
            .to_owned();
        let pinned = section
            .find("Pinned by:")
            .map(|at| {
                let rest = &section[at..];
                let end = rest.find("\n\n").unwrap_or(rest.len());
                rest[..end]
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        entries.push(Entry { id, tests: pinned });
    }
    entries
}

#[test]
fn every_requirement_id_src_cites_has_an_entry() {
    let documented: BTreeSet<String> = document().into_iter().map(|e| e.id).collect();
    let mut missing = BTreeMap::new();
    for file in rust_files(&root().join("src")) {
        let text = std::fs::read_to_string(&file).expect("read source");
        for id in ids_in(&text).difference(&documented) {
            missing.entry(id.clone()).or_insert_with(|| {
                file.strip_prefix(root())
                    .unwrap_or(&file)
                    .display()
                    .to_string()
            });
        }
    }
    assert!(
        missing.is_empty(),
        "cited in src/ but not in docs/requirements.md (id: first file): {missing:?}"
    );
}

#[test]
fn every_entry_lists_tests_that_exist_and_name_its_id() {
    let tests = tests_and_their_text();
    let entries = document();
    assert!(entries.len() >= 50, "only {} entries", entries.len());
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in &entries {
        if !seen.insert(entry.id.clone()) {
            problems.push(format!("{}: listed twice", entry.id));
        }
        if ids_in(&entry.id) != BTreeSet::from([entry.id.clone()]) {
            problems.push(format!("{}: not a requirement id", entry.id));
        }
        if entry.tests.is_empty() {
            problems.push(format!("{}: no `Pinned by:` tests", entry.id));
        }
        for test in &entry.tests {
            match tests.get(test) {
                None => problems.push(format!("{}: no test named `{test}`", entry.id)),
                Some(text) if !ids_in(text).contains(&entry.id) => {
                    problems.push(format!("{}: `{test}` does not name {}", entry.id, entry.id))
                }
                Some(_) => {}
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/requirements.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn ids_are_told_apart_from_other_words() {
    assert_eq!(
        ids_in("W7: 250 ms; K6, A3 (P1–P4) IpAddr::V4 F12 W07 KW3 W123 C7, M2-M3, U1–K2."),
        [
            "A3", "C7", "K2", "K6", "M2", "M3", "P1", "P2", "P3", "P4", "U1", "W7"
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    );
}

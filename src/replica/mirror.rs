//! The pure parts of `patchdiff replica sync` (R2–R4): a target's file name in the mirror
//! directory, the text-only check, a file change turned into replica operations, a journal
//! entry applied to the mirror, request keys, and the state the mirror keeps in its directory.
//! No I/O here; `replica::sync` does it.

use serde::{Deserialize, Serialize};
use similar::{DiffTag, TextDiff};

use crate::kernel::{
    JournalEntry, JournalKind, MAX_OPERATIONS, TextEdit, apply_edits, find_all, sha256_hex,
};
use crate::store::apply_journal_operations;
use crate::store::replica::ReplicaOperation;

/// The directory inside the mirror directory holding the sync's own files (its state, the MCP
/// child's stderr and wire log, temporary files). No target's file name starts with `.`, so no
/// target maps to it.
pub const STATE_DIR: &str = ".patchdiff-sync";

/// The sync's state file inside [`STATE_DIR`].
pub const STATE_FILE: &str = "state.json";

/// Longest file name [`file_name`] returns before its suffix (200 bytes; with
/// [`REJECTED_SUFFIX`] or [`UNSYNCED_SUFFIX`] it stays below the usual 255-byte limit).
pub const MAX_FILE_NAME_BYTES: usize = 200;

/// Appended to a file name for the copy of a local change the target rejected (R2).
pub const REJECTED_SUFFIX: &str = "~rejected";

/// Appended to a file name for the copy of a local change that could not be anchored to a
/// canonical state (written while its earlier change was being submitted, with the other
/// writer's edits in between).
pub const UNSYNCED_SUFFIX: &str = "~unsynced";

/// R4: the file name that mirrors `target` in the mirror directory. A target name is hostile
/// data: every byte but ASCII letters, digits, `_`, `-` and a `.` that is not the first byte is
/// written `%XX` (uppercase hex), so the name has no `/`, no NUL, is never `.`, `..` or hidden,
/// and never absolute. The escaping is injective; a name longer than
/// [`MAX_FILE_NAME_BYTES`] is cut (never inside an escape) and ends `%~` + 16 hex digits of the
/// target name's SHA-256 (`%~` is never an escape, so it cannot collide with an uncut name).
/// `~` is always escaped, so no target's file ends in [`REJECTED_SUFFIX`] or [`UNSYNCED_SUFFIX`].
pub fn file_name(target: &str) -> String {
    let mut out = String::with_capacity(target.len());
    for (i, b) in target.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() <= MAX_FILE_NAME_BYTES {
        return out;
    }
    let digest = sha256_hex(target);
    let mut cut = MAX_FILE_NAME_BYTES - 18;
    // Never inside `%XX`: back up to the `%` if one of the two bytes before the cut is one.
    for back in 1..=2 {
        if out.as_bytes()[cut - back] == b'%' {
            cut -= back;
            break;
        }
    }
    format!("{}%~{}", &out[..cut], &digest[..16])
}

/// R4: two targets whose files would be one file on a case-insensitive file system (their
/// [`file_name`]s equal ignoring ASCII case), as `(first, second)`; `None` when all differ.
pub fn colliding_names(targets: &[String]) -> Option<(String, String)> {
    let mut seen: std::collections::HashMap<String, &String> = std::collections::HashMap::new();
    for t in targets {
        if let Some(first) = seen.insert(file_name(t).to_ascii_lowercase(), t) {
            return Some((first.clone(), t.clone()));
        }
    }
    None
}

/// R4: `bytes` as text, or why they are not: not UTF-8 (naming the offset of the first invalid
/// byte) or binary (a NUL byte, naming its offset). The caller names the file.
pub fn text_of(bytes: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (an invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(format!("binary content (a NUL byte at offset {at})"));
    }
    Ok(text)
}

/// One changed stretch of the base: bytes `[start, end)` become `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Core {
    start: usize,
    end: usize,
    new_text: String,
}

/// Byte offsets of the starts of `text`'s lines (as `similar` splits them, each line keeping
/// its `\n`), then `text.len()`.
fn line_starts(text: &str) -> Vec<usize> {
    let mut out = vec![0];
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        at += line.len();
        out.push(at);
    }
    if text.is_empty() {
        out.push(0);
    }
    out
}

/// Narrows `core` by the text its old and new sides share at both ends (at char boundaries).
fn trim(base: &str, core: &mut Core) {
    let old = &base[core.start..core.end];
    let prefix: usize = old
        .chars()
        .zip(core.new_text.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    let (old, new) = (&old[prefix..], &core.new_text[prefix..]);
    let suffix: usize = old
        .chars()
        .rev()
        .zip(new.chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    let new_text = new[..new.len() - suffix].to_owned();
    core.end -= suffix;
    core.start += prefix;
    core.new_text = new_text;
}

/// `[a, b)` grown to the line boundaries around it, at least one byte each way where there is
/// one: from the start of the line holding byte `a - 1` to the end (after its `\n`) of the line
/// holding byte `b`.
fn grow(base: &str, a: usize, b: usize) -> (usize, usize) {
    let start = if a == 0 {
        0
    } else {
        base[..a - 1].rfind('\n').map_or(0, |i| i + 1)
    };
    let end = if b >= base.len() {
        base.len()
    } else {
        base[b..].find('\n').map_or(base.len(), |i| b + i + 1)
    };
    (start, end)
}

/// A group of cores replaced by one operation: `[start, end)` of the base, unique in it.
struct Group {
    start: usize,
    end: usize,
    cores: Vec<Core>,
}

impl Group {
    fn operation(&self, base: &str) -> ReplicaOperation {
        let mut new_text = String::new();
        let mut at = self.start;
        for c in &self.cores {
            new_text.push_str(&base[at..c.start]);
            new_text.push_str(&c.new_text);
            at = c.end;
        }
        new_text.push_str(&base[at..self.end]);
        ReplicaOperation {
            old_text: base[self.start..self.end].to_owned(),
            new_text,
        }
    }
}

/// R2: the replica operations that turn `base` (the content at the mirror's cursor) into
/// `new` (the file): one per changed stretch of lines (a line diff), each narrowed to the bytes
/// that changed and then widened line by line until its `old_text` occurs exactly once in
/// `base` (as the kernel requires of an operation naming no observation); stretches whose
/// widened ranges touch or overlap are one operation, and more than
/// [`MAX_OPERATIONS`] (64) become one. Empty when `base == new`.
///
/// Errors: `base` is empty (an operation replaces an `old_text`, and an empty target has none).
pub fn operations(base: &str, new: &str) -> Result<Vec<ReplicaOperation>, String> {
    if base == new {
        return Ok(Vec::new());
    }
    if base.is_empty() {
        return Err(
            "the target is empty: a replica operation replaces an old_text, and an empty \
                    target has none; initialize the target with content first"
                .to_owned(),
        );
    }
    let (old_starts, new_starts) = (line_starts(base), line_starts(new));
    let diff = TextDiff::from_lines(base, new);
    let mut cores: Vec<Core> = Vec::new();
    for op in diff.ops() {
        if op.tag() == DiffTag::Equal {
            continue;
        }
        let (o, n) = (op.old_range(), op.new_range());
        let (start, end) = (old_starts[o.start], old_starts[o.end]);
        let text = &new[new_starts[n.start]..new_starts[n.end]];
        match cores.last_mut() {
            Some(last) if last.end == start => {
                last.end = end;
                last.new_text.push_str(text);
            }
            _ => cores.push(Core {
                start,
                end,
                new_text: text.to_owned(),
            }),
        }
    }
    let mut widened: Vec<Group> = Vec::new();
    for mut core in cores {
        trim(base, &mut core);
        let (mut a, mut b) = (core.start, core.end);
        while a == b || find_all(base, &base[a..b]).len() != 1 {
            (a, b) = grow(base, a, b);
        }
        widened.push(Group {
            start: a,
            end: b,
            cores: vec![core],
        });
    }
    // Touching or overlapping ranges are one operation (a superstring of a unique text is
    // unique): the usual interval merge, by start.
    widened.sort_by_key(|g| g.start);
    let mut groups: Vec<Group> = Vec::new();
    for g in widened {
        match groups.last_mut() {
            Some(last) if g.start <= last.end => {
                last.end = last.end.max(g.end);
                last.cores.extend(g.cores);
                last.cores.sort_by_key(|c| c.start);
            }
            _ => groups.push(g),
        }
    }
    if groups.len() > MAX_OPERATIONS {
        let cores = groups.drain(..).flat_map(|g| g.cores).collect::<Vec<_>>();
        let (start, end) = (cores[0].start, cores[cores.len() - 1].end);
        let (mut a, mut b) = (start, end);
        while find_all(base, &base[a..b]).len() != 1 {
            (a, b) = grow(base, a, b);
        }
        groups.push(Group {
            start: a,
            end: b,
            cores,
        });
    }
    let ops: Vec<ReplicaOperation> = groups.iter().map(|g| g.operation(base)).collect();
    // The operations must rebuild `new` exactly, or nothing is sent.
    let edits: Vec<TextEdit> = groups
        .iter()
        .zip(&ops)
        .map(|(g, o)| TextEdit {
            start: g.start,
            end: g.end,
            new_text: o.new_text.clone(),
        })
        .collect();
    match apply_edits(base, &edits) {
        Ok(rebuilt) if rebuilt == new => Ok(ops),
        _ => Err("the change could not be expressed as replica operations".to_owned()),
    }
}

/// R3: `content` after the journal entry `entry` of a leased target: an edit's operations
/// applied, a save's unchanged; the result must hash to the entry's `sha256`. Errors: an `init`
/// entry (a re-init invalidates a lease, so one inside it is a protocol error), operations that
/// do not apply, or a digest that differs (the mirror is not the canonical content).
pub fn apply_entry(content: &str, entry: &JournalEntry) -> Result<String, String> {
    let next = match entry.kind {
        JournalKind::Edit => {
            apply_journal_operations(content, &entry.operations).map_err(|e| e.to_string())?
        }
        JournalKind::Save => content.to_owned(),
        JournalKind::Init => {
            return Err(format!(
                "an init entry at revision {} inside a lease",
                entry.revision
            ));
        }
    };
    if sha256_hex(&next) != entry.sha256 {
        return Err(format!(
            "the mirror does not hash to the journal's sha256 at revision {}",
            entry.revision
        ));
    }
    Ok(next)
}

/// K4/R3: the request key of the submission turning the content at `cursor` of `target` into
/// content hashing to `new_sha256` under `lease_id`: `replica-sync-` + 40 hex digits of a
/// SHA-256 over those four, so the same change retried (after a lost answer, a reconnect or a
/// restart of the sync) carries the same key and is answered with the stored receipt.
pub fn request_key(lease_id: &str, target: &str, cursor: &str, new_sha256: &str) -> String {
    let digest = sha256_hex(format!("{lease_id}\n{target}\n{cursor}\n{new_sha256}"));
    format!("replica-sync-{}", &digest[..40])
}

/// A submission sent and not yet settled: recorded before it is sent, so a sync that stops
/// without its answer retries it by key when it starts again (R3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub request_key: String,
    pub cursor: String,
    pub expected_sha256: String,
    pub operations: Vec<ReplicaOperation>,
    /// SHA-256 of the file content the operations produce from the cursor's content.
    pub new_sha256: String,
}

/// One mirrored target: its file and the canonical state the file was written from (content
/// at `cursor`; a local change is the difference from `content`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetState {
    pub target: String,
    /// The file's name in the mirror directory ([`file_name`]).
    pub file: String,
    pub cursor: String,
    pub sha256: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// The mirror directory's state file ([`STATE_DIR`]/[`STATE_FILE`]): the lease it mirrors and
/// each target's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncState {
    pub lease_id: String,
    pub integration: String,
    /// Milliseconds since the Unix epoch, as the server's lease says.
    pub expires_at_ms: u64,
    pub targets: Vec<TargetState>,
}

impl SyncState {
    /// The leased targets' names, in lease order.
    pub fn target_names(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.target.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(base: &str, ops: &[ReplicaOperation]) -> String {
        let mut edits = Vec::new();
        for o in ops {
            let hits = find_all(base, &o.old_text);
            assert_eq!(hits.len(), 1, "old_text {:?} must occur once", o.old_text);
            edits.push(TextEdit {
                start: hits[0],
                end: hits[0] + o.old_text.len(),
                new_text: o.new_text.clone(),
            });
        }
        edits.sort_by_key(|e| e.start);
        apply_edits(base, &edits).expect("non-overlapping")
    }

    /// R4: a target name is hostile; its file stays one plain name inside DIR.
    #[test]
    fn r4_file_names_escape_hostile_target_names_so_no_path_leaves_the_directory() {
        assert_eq!(file_name("calc.py"), "calc.py");
        assert_eq!(file_name("src/lib.rs"), "src%2Flib.rs");
        // Only a leading `.` is escaped; with every `/` escaped a `..` inside is just text.
        assert_eq!(file_name("../../etc/passwd"), "%2E.%2F..%2Fetc%2Fpasswd");
        assert_eq!(file_name("/abs"), "%2Fabs");
        assert_eq!(file_name("."), "%2E");
        assert_eq!(file_name(".."), "%2E.");
        assert_eq!(file_name(".hidden"), "%2Ehidden");
        assert_eq!(file_name("a%2Fb"), "a%252Fb", "a literal % is escaped too");
        assert_eq!(file_name("x~rejected"), "x%7Erejected");
        assert_eq!(file_name("nul\0bell\x07"), "nul%00bell%07");
        assert_eq!(file_name("ж"), "%D0%B6");
        for hostile in [
            "../x",
            "/etc/x",
            "a/../../b",
            "\u{202e}txt.exe",
            "a\nb",
            "con",
            "-rf",
        ] {
            let f = file_name(hostile);
            assert!(!f.contains('/') && !f.contains('\0') && !f.starts_with('.'));
            let p = std::path::Path::new(&f);
            assert_eq!(p.components().count(), 1, "{f}");
            assert!(p.is_relative());
        }
    }

    /// R4: names past 200 bytes are cut with a digest and stay distinct.
    #[test]
    fn r4_long_names_are_cut_outside_an_escape_and_stay_distinct() {
        let a = "ж".repeat(128); // 256 bytes, 768 escaped
        let b = format!("{}x", "ж".repeat(127));
        let (fa, fb) = (file_name(&a), file_name(&b));
        assert!(fa.len() <= MAX_FILE_NAME_BYTES && fb.len() <= MAX_FILE_NAME_BYTES);
        assert_ne!(fa, fb);
        assert!(fa.contains("%~"));
        let head = fa.split("%~").next().unwrap();
        assert!(head.ends_with("%D0%B6"), "never cut inside %XX: {head}");
        assert!((fa.len() + REJECTED_SUFFIX.len()) < 255);
    }

    /// R4: two targets never share a file, also on a case-insensitive file system.
    #[test]
    fn r4_names_equal_ignoring_case_collide() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(colliding_names(&names(&["a.py", "b.py"])), None);
        assert_eq!(
            colliding_names(&names(&["A.py", "a.py"])),
            Some(("A.py".into(), "a.py".into()))
        );
    }

    /// R4: text only — not UTF-8, or a NUL byte, is refused with the reason.
    #[test]
    fn r4_only_utf8_text_without_nul_is_accepted() {
        assert_eq!(text_of(b"fn main() {}\n"), Ok("fn main() {}\n"));
        assert_eq!(text_of("ж\n".as_bytes()), Ok("ж\n"));
        let bad = text_of(b"ab\xff\xfe").unwrap_err();
        assert!(
            bad.contains("not UTF-8") && bad.contains("offset 2"),
            "{bad}"
        );
        let nul = text_of(b"PNG\0\x01").unwrap_err();
        assert!(nul.contains("binary") && nul.contains("offset 3"), "{nul}");
    }

    #[test]
    fn r2_a_one_character_change_is_one_unique_operation() {
        let base = "let a = 2;\nlet b = 2;\n";
        let new = "let a = 2;\nlet b = 3;\n";
        let ops = operations(base, new).unwrap();
        assert_eq!(ops.len(), 1);
        // "2" occurs twice, so the operation widens to its line.
        assert_eq!(ops[0].old_text, "let b = 2;\n");
        assert_eq!(ops[0].new_text, "let b = 3;\n");
        assert_eq!(apply(base, &ops), new);
    }

    #[test]
    fn r2_distant_changes_are_separate_operations_and_insertions_anchor_on_a_neighbour() {
        let base: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let new = base
            .replace("line 2\n", "line two\n")
            .replace("line 15\n", "line 15\ninserted\n");
        let ops = operations(&base, &new).unwrap();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert_eq!(apply(&base, &ops), new);
        assert!(ops.iter().all(|o| !o.old_text.is_empty()));
        // Appending at the end, deleting everything but one line, and an empty result.
        for new in [
            format!("{base}tail\n"),
            "line 3\n".to_owned(),
            String::new(),
            base.replace('\n', "\r\n"),
        ] {
            let ops = operations(&base, &new).unwrap();
            assert_eq!(apply(&base, &ops), new);
        }
        assert!(operations(&base, &base).unwrap().is_empty());
    }

    #[test]
    fn r2_repetitive_content_widens_until_unique_and_many_changes_fit_the_limit() {
        let base = "x\n".repeat(10) + "end\n";
        let new = "x\n".repeat(9) + "y\nend\n";
        let ops = operations(&base, &new).unwrap();
        assert_eq!(apply(&base, &ops), new);
        let base: String = (0..400).map(|i| format!("{i}\n\n\n")).collect();
        let new: String = (0..400).map(|i| format!("{i}!\n\n\n")).collect();
        let ops = operations(&base, &new).unwrap();
        assert!(ops.len() <= MAX_OPERATIONS);
        assert_eq!(apply(&base, &ops), new);
    }

    #[test]
    fn r2_an_empty_target_cannot_take_an_operation() {
        assert!(operations("", "x").unwrap_err().contains("empty"));
    }

    #[test]
    fn r3_entries_apply_and_are_checked_against_their_digest() {
        use crate::kernel::JournalOperation;
        let entry = |ops: Vec<JournalOperation>, sha: &str| JournalEntry {
            cursor: "5".into(),
            kind: JournalKind::Edit,
            revision: 2,
            version: 0,
            request_key: Some("k".into()),
            attempt_id: None,
            sha256: sha.into(),
            operations: ops,
        };
        let op = JournalOperation {
            start_byte: 0,
            end_byte: 1,
            new_text: "b".into(),
        };
        let good = entry(vec![op.clone()], &sha256_hex("bc"));
        assert_eq!(apply_entry("ac", &good).unwrap(), "bc");
        let wrong = entry(vec![op], &sha256_hex("zz"));
        assert!(apply_entry("ac", &wrong).unwrap_err().contains("sha256"));
        let save = JournalEntry {
            kind: JournalKind::Save,
            operations: vec![],
            ..entry(vec![], &sha256_hex("ac"))
        };
        assert_eq!(apply_entry("ac", &save).unwrap(), "ac");
    }

    #[test]
    fn r3_the_same_change_gets_the_same_request_key() {
        let k = request_key("lease-1", "t", "7", "abc");
        assert_eq!(k, request_key("lease-1", "t", "7", "abc"));
        assert_ne!(k, request_key("lease-1", "t", "8", "abc"));
        assert!(k.len() <= crate::kernel::MAX_REQUEST_KEY_BYTES);
    }
}

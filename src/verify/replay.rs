//! The one journal replayer (K6): a target's content rebuilt from its fixture bytes by applying
//! journal entries in order, checking every entry on the way. `verify` replays a sealed run's
//! database through it ([`super::journal`]), the canary's `inspect` replays the full process's
//! `patchdiff_replay` pages through it (`canary::steps::inspect`), so both hold a journal to the
//! same rules and name a broken one the same way.

use serde_json::Value;

use crate::fixtures::sha256_hex;
use crate::store::{JournalEntry, JournalKind, JournalOperation};

/// Why a journal does not replay ([`JournalReplay::apply`], [`JournalReplay::ends_at`]). The
/// displayed text is what `inspect`'s summary and `verify`'s problems say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The `init` entry's hash is not the fixture bytes'.
    #[error("the journal's init entry does not match the fixture bytes")]
    InitMismatch,
    /// An edit's revision is not the one after the replayed revision (skipped or repeated).
    #[error("journal edit for revision {revision} follows revision {after}")]
    RevisionOutOfOrder { revision: u64, after: u64 },
    /// An operation's byte range is reversed or passes the content's end (`start <= end <=
    /// length` is required; an empty range at the end is an insertion).
    #[error("revision {revision}: operation range {start}..{end} is out of bounds")]
    OutOfBounds {
        revision: u64,
        start: usize,
        end: usize,
    },
    /// Applying an edit does not give the hash the journal records for it.
    #[error("replay of revision {revision} does not reproduce its hash")]
    EditHash { revision: u64 },
    /// A save's revision or hash is not the replayed content's.
    #[error("saved version {version} does not match the replayed content at revision {revision}")]
    SaveMismatch { version: u64, revision: u64 },
    /// An entry whose kind is not `init`, `edit` or `save`.
    #[error("unknown journal entry kind `{0}`")]
    UnknownKind(String),
    /// The replay ends at another revision or content than the target's current state.
    #[error("replay ends at revision {replayed} but the target is at revision {}", or_null(.current))]
    EndRevision { replayed: u64, current: Option<u64> },
    /// The journal's saves are not the target's version.
    #[error("the journal has {saves} saves but the target is at version {}", or_null(.version))]
    EndVersion { saves: u64, version: Option<u64> },
}

fn or_null(n: &Option<u64>) -> String {
    n.map_or_else(|| "null".to_owned(), |n| n.to_string())
}

/// A target's content replayed so far: start with [`JournalReplay::new`] on the fixture bytes,
/// [`JournalReplay::apply`] each entry in journal order, then compare the end with
/// [`JournalReplay::ends_at`]. Memory: the content plus the last saved version's copy.
#[derive(Debug, Clone)]
pub struct JournalReplay {
    original_sha256: String,
    content: Vec<u8>,
    saved: Vec<u8>,
    revision: u64,
    saves: u64,
}

impl JournalReplay {
    /// A replay at revision 0 on `original` (the authenticated fixture bytes).
    pub fn new(original: &[u8]) -> Self {
        Self {
            original_sha256: sha256_hex(original),
            content: original.to_vec(),
            saved: original.to_vec(),
            revision: 0,
            saves: 0,
        }
    }

    /// The content at the replayed revision.
    pub fn content(&self) -> &[u8] {
        &self.content
    }

    /// The content of the last saved version (the fixture bytes when never saved).
    pub fn saved(&self) -> &[u8] {
        &self.saved
    }

    /// The revision replayed so far.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The saves replayed so far.
    pub fn saves(&self) -> u64 {
        self.saves
    }

    /// Applies one entry: `init` must carry the fixture's hash; an `edit` must be the next
    /// revision, its operations in bounds (applied last range first, so earlier offsets hold)
    /// and its hash the result's; a `save` must be at the replayed revision with its content's
    /// hash. Errors: the first rule the entry breaks; the replay is then not to be continued.
    pub fn apply(&mut self, entry: &JournalEntry) -> Result<(), ReplayError> {
        match entry.kind {
            JournalKind::Init => {
                if entry.sha256 != self.original_sha256 {
                    return Err(ReplayError::InitMismatch);
                }
            }
            JournalKind::Edit => {
                if entry.revision != self.revision.wrapping_add(1) {
                    return Err(ReplayError::RevisionOutOfOrder {
                        revision: entry.revision,
                        after: self.revision,
                    });
                }
                self.apply_operations(entry.revision, &entry.operations)?;
                self.revision = entry.revision;
                if sha256_hex(&self.content) != entry.sha256 {
                    return Err(ReplayError::EditHash {
                        revision: self.revision,
                    });
                }
            }
            JournalKind::Save => {
                self.saves += 1;
                if entry.revision != self.revision || sha256_hex(&self.content) != entry.sha256 {
                    return Err(ReplayError::SaveMismatch {
                        version: entry.version,
                        revision: self.revision,
                    });
                }
                self.saved.clone_from(&self.content);
            }
        }
        Ok(())
    }

    fn apply_operations(
        &mut self,
        revision: u64,
        operations: &[JournalOperation],
    ) -> Result<(), ReplayError> {
        let mut ops: Vec<&JournalOperation> = operations.iter().collect();
        ops.sort_by_key(|o| std::cmp::Reverse(o.start_byte));
        for op in ops {
            let (start, end) = (op.start_byte, op.end_byte);
            if start > end || end > self.content.len() {
                return Err(ReplayError::OutOfBounds {
                    revision,
                    start,
                    end,
                });
            }
            self.content.splice(start..end, op.new_text.bytes());
        }
        Ok(())
    }

    /// The replay's end against a target's current state: its revision and hash must be the
    /// replayed content's, its version the number of saves. `None` fields (a state that does
    /// not say) never match.
    pub fn ends_at(
        &self,
        revision: Option<u64>,
        sha256: Option<&str>,
        version: Option<u64>,
    ) -> Result<(), ReplayError> {
        if revision != Some(self.revision) || sha256 != Some(sha256_hex(&self.content).as_str()) {
            return Err(ReplayError::EndRevision {
                replayed: self.revision,
                current: revision,
            });
        }
        if version != Some(self.saves) {
            return Err(ReplayError::EndVersion {
                saves: self.saves,
                version,
            });
        }
        Ok(())
    }
}

/// A journal entry as a `patchdiff_replay` result carries it (JSON), read leniently: a missing
/// number is 0 (a missing revision `u64::MAX`, which no replay follows), missing operations
/// none. Errors: a kind that is not `init`, `edit` or `save` ([`ReplayError::UnknownKind`]).
pub fn entry_from_json(entry: &Value) -> Result<JournalEntry, ReplayError> {
    let kind = match entry["kind"].as_str().unwrap_or_default() {
        "init" => JournalKind::Init,
        "edit" => JournalKind::Edit,
        "save" => JournalKind::Save,
        other => return Err(ReplayError::UnknownKind(other.to_owned())),
    };
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let offset = |v: &Value| usize::try_from(v.as_u64().unwrap_or(0)).unwrap_or(usize::MAX);
    Ok(JournalEntry {
        cursor: text(&entry["cursor"]).unwrap_or_default(),
        kind,
        revision: entry["revision"].as_u64().unwrap_or(u64::MAX),
        version: entry["version"].as_u64().unwrap_or(0),
        request_key: text(&entry["request_key"]),
        attempt_id: text(&entry["attempt_id"]),
        sha256: text(&entry["sha256"]).unwrap_or_default(),
        operations: entry["operations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|op| JournalOperation {
                start_byte: offset(&op["start_byte"]),
                end_byte: offset(&op["end_byte"]),
                new_text: text(&op["new_text"]).unwrap_or_default(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(replay: &mut JournalReplay, entry: &Value) -> Result<(), String> {
        entry_from_json(entry)
            .and_then(|e| replay.apply(&e))
            .map_err(|e| e.to_string())
    }

    fn ends(replay: &JournalReplay, current: &Value) -> Result<(), String> {
        replay
            .ends_at(
                current["revision"].as_u64(),
                current["sha256"].as_str(),
                current["version"].as_u64(),
            )
            .map_err(|e| e.to_string())
    }

    /// K6: a journal replays from the fixture bytes to the target's state; a skipped revision,
    /// an edit or save whose hash the replay does not reproduce, or a mismatched end is named.
    #[test]
    fn a_replayed_journal_reproduces_each_hash_and_names_the_first_that_does_not() {
        let original = b"let a = 1;\n";
        let edit = |revision: u64, content: &[u8]| {
            json!({"kind": "edit", "revision": revision, "sha256": sha256_hex(content),
                   "operations": [{"start_byte": 8, "end_byte": 9, "new_text": "2"}]})
        };
        let edited = b"let a = 2;\n";
        let init = json!({"kind": "init", "revision": 0, "sha256": sha256_hex(original)});
        let save =
            json!({"kind": "save", "revision": 1, "version": 1, "sha256": sha256_hex(edited)});
        let current = json!({"revision": 1, "version": 1, "sha256": sha256_hex(edited)});

        let mut replayed = JournalReplay::new(original);
        for entry in [&init, &edit(1, edited), &save] {
            apply(&mut replayed, entry).unwrap();
        }
        assert_eq!(replayed.content(), edited);
        ends(&replayed, &current).unwrap();

        let cases = [
            (
                vec![json!({"kind": "init", "revision": 0, "sha256": sha256_hex(b"other")})],
                "the journal's init entry does not match the fixture bytes",
            ),
            (
                vec![init.clone(), edit(2, edited)],
                "journal edit for revision 2 follows revision 0",
            ),
            (
                vec![init.clone(), edit(1, b"something else")],
                "replay of revision 1 does not reproduce its hash",
            ),
            (
                vec![
                    init.clone(),
                    json!({"kind": "save", "revision": 0, "version": 1, "sha256": "00"}),
                ],
                "saved version 1 does not match the replayed content at revision 0",
            ),
            (
                vec![
                    init.clone(),
                    json!({"kind": "edit", "revision": 1, "sha256": "00",
                    "operations": [{"start_byte": 5, "end_byte": 99, "new_text": ""}]}),
                ],
                "revision 1: operation range 5..99 is out of bounds",
            ),
            (
                vec![json!({"kind": "rename"})],
                "unknown journal entry kind `rename`",
            ),
        ];
        for (entries, expected) in cases {
            let mut replayed = JournalReplay::new(original);
            let err = entries
                .iter()
                .map(|e| apply(&mut replayed, e))
                .find_map(Result::err)
                .unwrap_or_else(|| panic!("no error for {entries:?}"));
            assert_eq!(err, expected);
        }
        let behind = JournalReplay::new(original);
        assert_eq!(
            ends(&behind, &current).unwrap_err(),
            "replay ends at revision 0 but the target is at revision 1"
        );
    }

    #[test]
    fn replayed_edits_may_insert_and_reach_the_end_but_not_reverse_or_pass_it() {
        // "let a = 1;\n" is 11 bytes. One step inserts at 0 (an empty range) and replaces
        // bytes 10..11 (the last one); K6 replays both, applied from the end backwards.
        let original = b"let a = 1;\n";
        let step = |ops: Value, content: &[u8]| json!({"kind": "edit", "revision": 1, "sha256": sha256_hex(content), "operations": ops});
        let mut replayed = JournalReplay::new(original);
        let both = json!([
            {"start_byte": 0, "end_byte": 0, "new_text": "// x\n"},
            {"start_byte": 10, "end_byte": 11, "new_text": "\n\n"},
        ]);
        apply(&mut replayed, &step(both, b"// x\nlet a = 1;\n\n"))
            .expect("an insertion and an edit ending at the content's end replay");
        assert_eq!(replayed.content(), b"// x\nlet a = 1;\n\n");
        for (start, end) in [(5, 4), (11, 12)] {
            let mut replayed = JournalReplay::new(original);
            let op = json!([{"start_byte": start, "end_byte": end, "new_text": ""}]);
            assert_eq!(
                apply(&mut replayed, &step(op, b"")).unwrap_err(),
                format!("revision 1: operation range {start}..{end} is out of bounds")
            );
        }
    }

    /// The bounds both replays used to keep apart, held once: an edit must be exactly the next
    /// revision (not repeated, not skipped), and a range may neither reverse nor pass the
    /// content's end — also when another operation of the same edit would have grown the
    /// content far enough (ranges are offsets into the revision before the edit).
    #[test]
    fn an_edit_repeated_or_ranged_past_the_revision_before_it_is_refused() {
        let original = b"abc";
        let edit = |revision: u64, ops: Value, content: &[u8]| {
            entry_from_json(&json!({"kind": "edit", "revision": revision,
                "sha256": sha256_hex(content), "operations": ops}))
            .unwrap()
        };
        let mut replay = JournalReplay::new(original);
        let grow = json!([{"start_byte": 3, "end_byte": 3, "new_text": "def"}]);
        replay.apply(&edit(1, grow.clone(), b"abcdef")).unwrap();
        assert_eq!(
            replay.apply(&edit(1, grow, b"abcdefdef")).unwrap_err(),
            ReplayError::RevisionOutOfOrder {
                revision: 1,
                after: 1
            }
        );
        let mut replay = JournalReplay::new(original);
        let both = json!([
            {"start_byte": 0, "end_byte": 0, "new_text": "xyz"},
            {"start_byte": 3, "end_byte": 5, "new_text": ""},
        ]);
        assert_eq!(
            replay.apply(&edit(1, both, b"xyzabc")).unwrap_err(),
            ReplayError::OutOfBounds {
                revision: 1,
                start: 3,
                end: 5
            }
        );
        assert_eq!(replay.saved(), original, "a refused edit saves nothing");
    }

    /// A save keeps the content at its revision, and the end is compared with the target's
    /// revision, hash and version; a state that does not say is not a match.
    #[test]
    fn saves_are_kept_and_the_end_must_name_revision_hash_and_version() {
        let original = b"abc";
        let edited = b"abd";
        let mut replay = JournalReplay::new(original);
        for entry in [
            json!({"kind": "init", "revision": 0, "sha256": sha256_hex(original)}),
            json!({"kind": "save", "revision": 0, "version": 1, "sha256": sha256_hex(original)}),
            json!({"kind": "edit", "revision": 1, "sha256": sha256_hex(edited),
                   "operations": [{"start_byte": 2, "end_byte": 3, "new_text": "d"}]}),
        ] {
            apply(&mut replay, &entry).unwrap();
        }
        assert_eq!(
            (replay.saved(), replay.content()),
            (&original[..], &edited[..])
        );
        assert_eq!((replay.revision(), replay.saves()), (1, 1));
        let sha = sha256_hex(edited);
        replay.ends_at(Some(1), Some(&sha), Some(1)).unwrap();
        assert_eq!(
            replay
                .ends_at(Some(1), Some(&sha), Some(2))
                .unwrap_err()
                .to_string(),
            "the journal has 1 saves but the target is at version 2"
        );
        assert_eq!(
            replay
                .ends_at(None, Some(&sha), Some(1))
                .unwrap_err()
                .to_string(),
            "replay ends at revision 1 but the target is at revision null"
        );
        assert!(replay.ends_at(Some(1), Some("00"), Some(1)).is_err());
    }
}

//! The runs pane's list (SPEC U2): every entry of the run index held once, the rows shown
//! under the operator's sort and filter, the cursor over them and the two runs marked for a
//! comparison. Pure: it is given the index's entries and does no I/O, so sorting, filtering and
//! marking are unit-tested without a runs directory.

use crate::runs::{EntryKind, RunFilter, RunSummary, SortKey, index::sort};

/// How many runs can be marked at once: a comparison takes two.
pub const MARKS: usize = 2;

/// The sort keys in the order the sort key cycles through them.
pub const SORTS: [SortKey; 5] = [
    SortKey::Newest,
    SortKey::Oldest,
    SortKey::Model,
    SortKey::Host,
    SortKey::Verdict,
];

/// The word a sort key is shown as (`newest`, `oldest`, `model`, `host`, `verdict`).
pub fn sort_word(key: SortKey) -> &'static str {
    match key {
        SortKey::Newest => "newest",
        SortKey::Oldest => "oldest",
        SortKey::Model => "model",
        SortKey::Host => "host",
        SortKey::Verdict => "verdict",
    }
}

/// The filter words the filter line accepts, in the order its error lists them.
pub const FILTER_KEYS: &str =
    "model=, host=, suite=, verdict=, rehearsal=yes|no, kind=run|comparison";

/// Parses the filter line: space-separated `key=value` words (`model=sonnet verdict=failed`);
/// an empty line is no filter. Text values match a part of the field, case-insensitively
/// ([`RunFilter`]). Errors name the word that is wrong and what is accepted; nothing of a bad
/// line is applied.
pub fn parse_filter(line: &str) -> Result<RunFilter, String> {
    use crate::display::visible_inline;
    let mut filter = RunFilter::default();
    for word in line.split_whitespace() {
        let Some((key, value)) = word.split_once('=').filter(|(_, v)| !v.is_empty()) else {
            return Err(format!(
                "filter word `{}` is not key=value; accepted: {FILTER_KEYS}",
                visible_inline(word)
            ));
        };
        match key.to_ascii_lowercase().as_str() {
            "model" => filter.model = Some(value.to_owned()),
            "host" => filter.host = Some(value.to_owned()),
            "suite" => filter.suite = Some(value.to_owned()),
            "verdict" => filter.verdict = Some(value.parse()?),
            "rehearsal" => {
                filter.rehearsal = Some(match value.to_ascii_lowercase().as_str() {
                    "yes" | "true" | "1" => true,
                    "no" | "false" | "0" => false,
                    _ => {
                        return Err(format!(
                            "rehearsal=`{}`: accepted yes or no",
                            visible_inline(value)
                        ));
                    }
                })
            }
            "kind" => {
                filter.kind = Some(match value.to_ascii_lowercase().as_str() {
                    "run" | "runs" => EntryKind::Run,
                    "comparison" | "comparisons" | "cmp" => EntryKind::Comparison,
                    _ => {
                        return Err(format!(
                            "kind=`{}`: accepted run or comparison",
                            visible_inline(value)
                        ));
                    }
                })
            }
            _ => {
                return Err(format!(
                    "unknown filter `{}`; accepted: {FILTER_KEYS}",
                    visible_inline(key)
                ));
            }
        }
    }
    Ok(filter)
}

/// What marking an entry did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marked {
    /// The entry is now marked (`dropped`: the oldest mark it replaced, when two were marked).
    On { dropped: Option<String> },
    /// The entry was marked and no longer is.
    Off,
    /// A comparison entry cannot be paired with a run: open it instead.
    NotARun,
}

/// The list: every entry, the rows shown, the cursor and the marks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunList {
    /// Every entry of the index, as read when the pane opened.
    pub all: Vec<RunSummary>,
    /// Indexes into `all` of the rows shown, in the sort's order.
    pub shown: Vec<usize>,
    pub sort: SortKey,
    pub filter: RunFilter,
    /// The filter line as typed (shown in the pane's header).
    pub filter_text: String,
    /// The selected row (an index into `shown`).
    pub cursor: usize,
    /// Ids of the marked runs, oldest mark first (at most [`MARKS`]).
    pub marked: Vec<String>,
}

impl RunList {
    /// A list of `entries`, newest first, nothing filtered or marked.
    pub fn new(entries: Vec<RunSummary>) -> Self {
        let mut list = Self {
            all: entries,
            ..Self::default()
        };
        list.refresh();
        list
    }

    /// Re-sorts `all` and recomputes the rows shown; the cursor stays on the same entry when it
    /// is still shown, and within the rows otherwise.
    fn refresh(&mut self) {
        let selected = self.selected().map(|r| r.id.clone());
        sort(&mut self.all, self.sort);
        self.shown = (0..self.all.len())
            .filter(|&i| self.filter.matches(&self.all[i]))
            .collect();
        self.cursor = selected
            .and_then(|id| self.shown.iter().position(|&i| self.all[i].id == id))
            .unwrap_or(self.cursor)
            .min(self.shown.len().saturating_sub(1));
    }

    /// The rows shown, in order.
    pub fn rows(&self) -> impl Iterator<Item = &RunSummary> {
        self.shown.iter().map(|&i| &self.all[i])
    }

    /// The entry under the cursor.
    pub fn selected(&self) -> Option<&RunSummary> {
        self.shown.get(self.cursor).map(|&i| &self.all[i])
    }

    /// Moves the cursor by `by` rows, staying on a shown row.
    pub fn move_by(&mut self, by: isize) {
        let last = self.shown.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(by).min(last);
    }

    /// The next sort key of [`SORTS`]; returns it.
    pub fn cycle_sort(&mut self) -> SortKey {
        let at = SORTS.iter().position(|k| *k == self.sort).unwrap_or(0);
        self.sort = SORTS[(at + 1) % SORTS.len()];
        self.refresh();
        self.sort
    }

    /// Applies a filter line ([`parse_filter`]); on an error nothing changes.
    pub fn set_filter(&mut self, line: &str) -> Result<(), String> {
        self.filter = parse_filter(line)?;
        self.filter_text = line.trim().to_owned();
        self.refresh();
        Ok(())
    }

    /// Marks or unmarks the entry under the cursor. Only runs are marked (a comparison is
    /// opened, not paired); a third mark drops the oldest, so two stay marked.
    pub fn toggle_mark(&mut self) -> Option<Marked> {
        let entry = self.selected()?;
        if entry.kind != EntryKind::Run {
            return Some(Marked::NotARun);
        }
        let id = entry.id.clone();
        if let Some(at) = self.marked.iter().position(|m| *m == id) {
            self.marked.remove(at);
            return Some(Marked::Off);
        }
        let dropped = (self.marked.len() >= MARKS).then(|| self.marked.remove(0));
        self.marked.push(id);
        Some(Marked::On { dropped })
    }

    /// Whether the entry `id` is marked.
    pub fn is_marked(&self, id: &str) -> bool {
        self.marked.iter().any(|m| m == id)
    }

    /// The two marked runs, oldest mark first (A, then B), when exactly two are marked and
    /// both are still in the index.
    pub fn pair(&self) -> Option<(&RunSummary, &RunSummary)> {
        let [a, b] = self.marked.as_slice() else {
            return None;
        };
        let find = |id: &String| self.all.iter().find(|r| &r.id == id);
        Some((find(a)?, find(b)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::{RunVerdict, SealState};
    use std::collections::BTreeMap;

    fn entry(id: &str, started: f64, model: &str, verdict: RunVerdict) -> RunSummary {
        RunSummary {
            id: id.into(),
            kind: if id.starts_with("cmp-") {
                EntryKind::Comparison
            } else {
                EntryKind::Run
            },
            path: id.into(),
            started_ms: started,
            model: Some(model.into()),
            host: None,
            suite: None,
            suite_sha256: None,
            verdict,
            passed: None,
            verdicts: BTreeMap::new(),
            outcome: None,
            targets_passed: 0,
            targets_total: 0,
            members: None,
            rehearsal: id.ends_with("-rehearsal"),
            seal: SealState::Unsealed,
            signed: false,
            problem: None,
        }
    }

    fn list() -> RunList {
        RunList::new(vec![
            entry("r-a", 1.0, "claude-sonnet-4-5", RunVerdict::Passed),
            entry("r-b", 3.0, "gpt-5", RunVerdict::Failed),
            entry("r-c-rehearsal", 2.0, "claude-opus-4-1", RunVerdict::Failed),
            entry("cmp-x", 4.0, "a → b", RunVerdict::Unchanged),
        ])
    }

    fn ids(l: &RunList) -> Vec<&str> {
        l.rows().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn the_list_opens_newest_first_and_the_sort_key_cycles_through_every_order() {
        let mut l = list();
        assert_eq!(ids(&l), ["cmp-x", "r-b", "r-c-rehearsal", "r-a"]);
        assert_eq!(l.cycle_sort(), SortKey::Oldest);
        assert_eq!(ids(&l), ["r-a", "r-c-rehearsal", "r-b", "cmp-x"]);
        assert_eq!(l.cycle_sort(), SortKey::Model);
        assert_eq!(ids(&l), ["cmp-x", "r-c-rehearsal", "r-a", "r-b"]);
        assert_eq!(l.cycle_sort(), SortKey::Host);
        assert_eq!(l.cycle_sort(), SortKey::Verdict);
        assert_eq!(ids(&l), ["r-a", "r-b", "r-c-rehearsal", "cmp-x"]);
        assert_eq!(l.cycle_sort(), SortKey::Newest, "the cycle comes round");
    }

    #[test]
    fn the_cursor_follows_its_entry_through_a_sort_and_stays_on_a_shown_row() {
        let mut l = list();
        l.move_by(1);
        assert_eq!(l.selected().unwrap().id, "r-b");
        l.cycle_sort();
        assert_eq!(l.selected().unwrap().id, "r-b", "same entry after the sort");
        l.move_by(100);
        assert_eq!(l.selected().unwrap().id, "cmp-x", "clamped to the last row");
        l.move_by(-100);
        assert_eq!(l.cursor, 0);
        l.set_filter("model=gpt").unwrap();
        assert_eq!(ids(&l), ["r-b"]);
        assert_eq!(l.cursor, 0);
        l.set_filter("model=nothing-like-it").unwrap();
        assert!(l.selected().is_none());
        l.move_by(1);
        assert_eq!(l.cursor, 0);
    }

    #[test]
    fn the_filter_line_filters_by_model_verdict_rehearsal_and_kind_and_refuses_bad_words() {
        let mut l = list();
        l.set_filter("model=CLAUDE verdict=failed").unwrap();
        assert_eq!(ids(&l), ["r-c-rehearsal"]);
        l.set_filter("rehearsal=no kind=run").unwrap();
        assert_eq!(ids(&l), ["r-b", "r-a"]);
        l.set_filter("kind=comparison").unwrap();
        assert_eq!(ids(&l), ["cmp-x"]);
        l.set_filter("host=scripted").unwrap();
        assert_eq!(ids(&l).len(), 4);
        l.set_filter("").unwrap();
        assert_eq!(ids(&l).len(), 4);
        // A bad line names what is wrong and what is accepted, and changes nothing.
        l.set_filter("verdict=failed").unwrap();
        for (bad, says) in [
            ("colour=red", "unknown filter `colour`"),
            ("model", "not key=value"),
            ("verdict=great", "unknown verdict `great`"),
            ("rehearsal=maybe", "accepted yes or no"),
            ("kind=pod", "accepted run or comparison"),
        ] {
            let e = l.set_filter(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert_eq!(ids(&l), ["r-b", "r-c-rehearsal"], "{bad} changed nothing");
            assert_eq!(l.filter_text, "verdict=failed");
        }
        let e = parse_filter("colour=red").unwrap_err();
        assert!(
            e.contains("model=") && e.contains("kind=run|comparison"),
            "{e}"
        );
        let hostile = parse_filter("model=\u{1b}[2J").unwrap();
        assert_eq!(hostile.model.as_deref(), Some("\u{1b}[2J"));
        assert!(!parse_filter("\u{1b}[2J").unwrap_err().contains('\u{1b}'));
    }

    #[test]
    fn two_marked_runs_make_a_pair_a_third_mark_drops_the_oldest_and_comparisons_are_not_marked() {
        let mut l = list();
        assert_eq!(
            l.toggle_mark(),
            Some(Marked::NotARun),
            "cmp-x is a comparison"
        );
        assert!(l.pair().is_none());
        l.move_by(1);
        assert_eq!(l.toggle_mark(), Some(Marked::On { dropped: None }));
        assert!(l.pair().is_none(), "one mark is no pair");
        l.move_by(1);
        l.toggle_mark();
        let (a, b) = l.pair().unwrap();
        assert_eq!((a.id.as_str(), b.id.as_str()), ("r-b", "r-c-rehearsal"));
        l.move_by(1);
        assert_eq!(
            l.toggle_mark(),
            Some(Marked::On {
                dropped: Some("r-b".into())
            })
        );
        let (a, b) = l.pair().unwrap();
        assert_eq!((a.id.as_str(), b.id.as_str()), ("r-c-rehearsal", "r-a"));
        assert_eq!(l.toggle_mark(), Some(Marked::Off));
        assert!(!l.is_marked("r-a") && l.is_marked("r-c-rehearsal"));
        // Marks survive a sort and a filter that hides them.
        l.toggle_mark();
        l.cycle_sort();
        l.set_filter("model=gpt").unwrap();
        assert!(l.pair().is_some());
    }
}

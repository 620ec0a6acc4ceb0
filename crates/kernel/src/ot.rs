//! Operational transform over byte-range replacements (SPEC K3, K6).
//!
//! A *step* is one accepted submission: a set of non-overlapping replacements, all expressed in
//! the UTF-8 byte coordinates of the content *before* the step. Ranges from an older revision
//! are carried forward over each intervening step with [`transform_range`]: a range entirely
//! before or after every edit of the step moves by the length change of the edits before it;
//! a range that overlaps an edit is a conflict (never merged). Touching ranges do not overlap.
//! An empty range (insertion point) at the same offset as another insertion is placed after
//! it (the earlier accepted step wins the tie).

use serde::{Deserialize, Serialize};

use super::KernelError;

/// Shape of one replacement of a step: bytes `[start, end)` of the pre-step content became
/// `new_len` bytes. Enough to transform ranges; the text itself is not needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditShape {
    pub start: usize,
    pub end: usize,
    pub new_len: usize,
}

/// One replacement with its text: bytes `[start, end)` (UTF-8, pre-step coordinates) become
/// `new_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextEdit {
    pub start: usize,
    pub end: usize,
    pub new_text: String,
}

impl TextEdit {
    /// The shape of this edit (for transforms).
    pub fn shape(&self) -> EditShape {
        EditShape {
            start: self.start,
            end: self.end,
            new_len: self.new_text.len(),
        }
    }
}

/// Why a range could not be carried over a step: it overlaps the step's edit `edit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict {
    pub edit: EditShape,
}

fn overlaps(s: usize, e: usize, edit: &EditShape) -> bool {
    if s == e {
        // Insertion point: conflicts only when strictly inside the edited range.
        edit.start < s && s < edit.end
    } else if edit.start == edit.end {
        s < edit.start && edit.start < e
    } else {
        edit.start < e && s < edit.end
    }
}

/// Carries byte range `[start, end)` over one step (`edits`, pre-step coordinates, any order).
///
/// Returns the range in post-step coordinates, or the first edit it overlaps.
pub fn transform_range(
    start: usize,
    end: usize,
    edits: &[EditShape],
) -> Result<(usize, usize), Conflict> {
    let mut delta: isize = 0;
    for edit in edits {
        if overlaps(start, end, edit) {
            return Err(Conflict { edit: *edit });
        }
        if edit.end <= start {
            delta += edit.new_len as isize - (edit.end - edit.start) as isize;
        }
    }
    Ok((
        (start as isize + delta) as usize,
        (end as isize + delta) as usize,
    ))
}

/// Carries a range over several steps in order (oldest first).
pub fn transform_range_over(
    start: usize,
    end: usize,
    steps: &[Vec<EditShape>],
) -> Result<(usize, usize), (usize, Conflict)> {
    let (mut s, mut e) = (start, end);
    for (i, step) in steps.iter().enumerate() {
        (s, e) = transform_range(s, e, step).map_err(|c| (i, c))?;
    }
    Ok((s, e))
}

/// Maps a scope `[start, end)` over one step leniently: edits inside the scope grow or shrink
/// it; an edit crossing a boundary pulls that boundary to the edit's outer edge. Returns the new
/// range and whether any edit touched the scope's interior (then its text may have changed).
pub fn map_scope(start: usize, end: usize, edits: &[EditShape]) -> ((usize, usize), bool) {
    let touched = edits.iter().any(|e| overlaps(start, end, e));
    let s = map_point(start, edits, false);
    let e = map_point(end, edits, start < end).max(s);
    ((s, e), touched)
}

/// Maps offset `p` over one step. A point strictly inside an edited range moves to the edit's
/// start (`end_side == false`) or to the end of its new text (`end_side == true`). An insertion
/// exactly at `p` lands before `p` unless `end_side` (then the text lands after the point).
fn map_point(p: usize, edits: &[EditShape], end_side: bool) -> usize {
    let mut delta: isize = 0;
    let mut inside: Option<usize> = None;
    for e in edits {
        let change = e.new_len as isize - (e.end - e.start) as isize;
        if e.start == e.end && e.start == p {
            if !end_side {
                delta += change;
            }
        } else if e.end <= p {
            delta += change;
        } else if e.start < p {
            inside = Some(if end_side {
                e.start + e.new_len
            } else {
                e.start
            });
        }
    }
    match inside {
        // `delta` only counts edits entirely before the containing edit, which starts before p.
        Some(q) => (q as isize + delta) as usize,
        None => (p as isize + delta) as usize,
    }
}

/// Applies one step to `content`. The edits must be on character boundaries, inside the
/// content, and pairwise non-overlapping (any order).
///
/// Errors: `OUT_OF_RANGE` / `NOT_CHAR_BOUNDARY` for bad offsets, `OVERLAPPING_OPERATIONS` for
/// overlapping edits.
pub fn apply_edits(content: &str, edits: &[TextEdit]) -> Result<String, KernelError> {
    let mut order: Vec<&TextEdit> = edits.iter().collect();
    order.sort_by_key(|e| (e.start, e.end));
    let mut last_end = 0usize;
    let mut prev_was_insert_at: Option<usize> = None;
    for e in &order {
        super::position::check_range(content, e.start, e.end)?;
        if e.start < last_end || prev_was_insert_at == Some(e.start) && e.start == e.end {
            return Err(KernelError::new(
                super::KernelCode::OverlappingOperations,
                format!(
                    "edit at bytes {}..{} overlaps another edit of the same step",
                    e.start, e.end
                ),
            ));
        }
        last_end = e.end;
        prev_was_insert_at = (e.start == e.end).then_some(e.start);
    }
    let grow: usize = order.iter().map(|e| e.new_text.len()).sum();
    let mut out = String::with_capacity(content.len() + grow);
    let mut at = 0;
    for e in order {
        out.push_str(&content[at..e.start]);
        out.push_str(&e.new_text);
        at = e.end;
    }
    out.push_str(&content[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(start: usize, end: usize, new_len: usize) -> EditShape {
        EditShape {
            start,
            end,
            new_len,
        }
    }

    #[test]
    fn range_after_an_edit_shifts_by_its_length_change() {
        assert_eq!(transform_range(5, 7, &[shape(0, 1, 3)]), Ok((7, 9)));
        assert_eq!(transform_range(5, 7, &[shape(7, 9, 0)]), Ok((5, 7)));
    }

    #[test]
    fn touching_ranges_do_not_conflict_but_overlapping_ones_do() {
        assert_eq!(transform_range(2, 4, &[shape(0, 2, 1)]), Ok((1, 3)));
        assert!(transform_range(2, 4, &[shape(3, 5, 1)]).is_err());
        assert!(transform_range(2, 4, &[shape(3, 3, 1)]).is_err());
        assert_eq!(transform_range(2, 4, &[shape(2, 2, 1)]), Ok((3, 5)));
        assert_eq!(transform_range(2, 4, &[shape(4, 4, 1)]), Ok((2, 4)));
    }

    #[test]
    fn scope_grows_with_an_edit_inside_and_is_marked_touched() {
        assert_eq!(map_scope(2, 8, &[shape(3, 4, 5)]), ((2, 12), true));
        assert_eq!(map_scope(2, 8, &[shape(0, 1, 0)]), ((1, 7), false));
    }

    #[test]
    fn apply_edits_rejects_overlap() {
        let edits = vec![
            TextEdit {
                start: 0,
                end: 2,
                new_text: "x".into(),
            },
            TextEdit {
                start: 1,
                end: 3,
                new_text: "y".into(),
            },
        ];
        assert_eq!(
            apply_edits("abcd", &edits).unwrap_err().code.as_str(),
            "OVERLAPPING_OPERATIONS"
        );
    }
}

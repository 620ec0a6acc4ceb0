//! Property tests of the pure kernel: operational-transform convergence (K3) and position
//! round trips between UTF-8 bytes and UTF-16 units on non-ASCII text (K1).

use patchdiff_kernel::{
    EditShape, TextEdit, apply_edits, byte_to_utf16, find_all, line_range_to_bytes, position_of,
    transform_range, utf16_to_byte,
};
use proptest::prelude::*;

/// Pieces mixing ASCII, CJK, astral emoji, combining marks, a ZWJ sequence and CRLF/LF.
const PIECES: &[&str] = &[
    "a",
    "bc",
    " ",
    "界",
    "世界",
    "😀",
    "e\u{301}",
    "👩\u{200d}👩\u{200d}👧",
    "\r\n",
    "\n",
    "ß",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|v| v.concat())
}

/// Char-boundary offsets of `s` (including `s.len()`).
fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices().map(|(i, _)| i).chain([s.len()]).collect()
}

/// A step: non-overlapping, non-empty ranges on character boundaries, chosen from `seeds`.
fn step_from(content: &str, seeds: &[(u16, u16, u8)]) -> Vec<TextEdit> {
    let b = boundaries(content);
    if b.len() < 2 {
        return Vec::new();
    }
    let mut ranges: Vec<(usize, usize, u8)> = Vec::new();
    for &(s, len, t) in seeds {
        let si = s as usize % (b.len() - 1);
        let ei = (si + 1 + len as usize % 4).min(b.len() - 1);
        let (start, end) = (b[si], b[ei]);
        if ranges.iter().all(|&(a, z, _)| end <= a || start >= z) {
            ranges.push((start, end, t));
        }
    }
    ranges
        .into_iter()
        .map(|(start, end, t)| TextEdit {
            start,
            end,
            new_text: PIECES[t as usize % PIECES.len()].repeat(t as usize % 3),
        })
        .collect()
}

fn shapes(step: &[TextEdit]) -> Vec<EditShape> {
    step.iter().map(TextEdit::shape).collect()
}

/// Carries every edit of `step` over `over`; None on any conflict.
fn transform_step(step: &[TextEdit], over: &[TextEdit]) -> Option<Vec<TextEdit>> {
    let over = shapes(over);
    step.iter()
        .map(|e| {
            transform_range(e.start, e.end, &over)
                .ok()
                .map(|(start, end)| TextEdit {
                    start,
                    end,
                    new_text: e.new_text.clone(),
                })
        })
        .collect()
}

type Seeds = Vec<(u16, u16, u8)>;

fn seeds() -> impl Strategy<Value = Seeds> {
    prop::collection::vec(any::<(u16, u16, u8)>(), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Writer A accepts steps A1..Ak; writer B's step was made on the stale base. Both paths of
    /// the OT diamond end in the same content: apply A then B transformed over A equals apply B
    /// then A transformed over B — unless they overlap, and then both directions conflict.
    #[test]
    fn two_writers_on_a_stale_base_converge(
        base in text(),
        a_seeds in prop::collection::vec(seeds(), 1..4),
        b_seeds in seeds(),
    ) {
        let b_step = step_from(&base, &b_seeds);
        // Left path: A1..Ak, then B carried over each.
        let mut left = base.clone();
        let mut a_steps = Vec::new();
        for s in &a_seeds {
            let step = step_from(&left, s);
            left = apply_edits(&left, &step).unwrap();
            a_steps.push(step);
        }
        let mut b_over = Some(b_step.clone());
        for a in &a_steps {
            b_over = b_over.and_then(|b| transform_step(&b, a));
        }
        // Right path: B, then each A_i carried over B (itself carried over A1..A(i-1)).
        let mut right = apply_edits(&base, &b_step).unwrap();
        let mut b_cur = Some(b_step.clone());
        let mut right_ok = true;
        for a in &a_steps {
            let Some(b) = b_cur.clone() else { right_ok = false; break };
            match transform_step(a, &b) {
                Some(a_over) => right = apply_edits(&right, &a_over).unwrap(),
                None => { right_ok = false; break }
            }
            b_cur = transform_step(&b, a);
        }
        let right_ok = right_ok && b_cur.is_some();
        prop_assert_eq!(b_over.is_some(), right_ok, "conflict detection must be symmetric");
        if let Some(b_over) = b_over {
            left = apply_edits(&left, &b_over).unwrap();
            prop_assert_eq!(left, right);
        }
    }

    /// A range carried over a step still covers the same text (when it does not conflict).
    #[test]
    fn transformed_range_still_covers_the_same_text(base in text(), a in seeds(), b in seeds()) {
        let step = step_from(&base, &a);
        let after = apply_edits(&base, &step).unwrap();
        for e in step_from(&base, &b) {
            if let Ok((s, t)) = transform_range(e.start, e.end, &shapes(&step)) {
                prop_assert_eq!(&after[s..t], &base[e.start..e.end]);
            }
        }
    }

    /// Byte ↔ UTF-16 conversions round-trip on every character boundary and refuse the inside
    /// of characters (bytes) and of surrogate pairs (UTF-16 units).
    #[test]
    fn positions_round_trip_between_bytes_and_utf16(s in text()) {
        for byte in 0..=s.len() {
            match byte_to_utf16(&s, byte) {
                Some(u) => {
                    prop_assert!(s.is_char_boundary(byte));
                    prop_assert_eq!(u, s[..byte].encode_utf16().count());
                    prop_assert_eq!(utf16_to_byte(&s, u), Some(byte));
                    let p = position_of(&s, byte).unwrap();
                    let line_start = s[..byte].rfind('\n').map_or(0, |i| i + 1);
                    prop_assert_eq!(p.line, 1 + s[..byte].matches('\n').count());
                    prop_assert_eq!(p.column_utf8, byte - line_start);
                    prop_assert_eq!(p.column_utf16, s[line_start..byte].encode_utf16().count());
                }
                None => {
                    prop_assert!(!s.is_char_boundary(byte));
                    prop_assert!(position_of(&s, byte).is_err());
                }
            }
        }
        let units = s.encode_utf16().count();
        for u in 0..=units + 1 {
            match utf16_to_byte(&s, u) {
                Some(b) => prop_assert_eq!(byte_to_utf16(&s, b), Some(u)),
                None => prop_assert!(
                    u > units || (0..=s.len()).all(|b| byte_to_utf16(&s, b) != Some(u))
                ),
            }
        }
    }

    /// Line ranges cover whole lines: concatenating every single-line range gives the content.
    #[test]
    fn single_line_ranges_tile_the_content(s in text()) {
        let lines = 1 + s.matches('\n').count();
        let mut rebuilt = String::new();
        for l in 1..=lines {
            let (a, b) = line_range_to_bytes(&s, l, l).unwrap();
            rebuilt.push_str(&s[a..b]);
            prop_assert_eq!(position_of(&s, a).unwrap().line, l);
        }
        prop_assert_eq!(rebuilt, s.clone());
        prop_assert!(line_range_to_bytes(&s, 1, lines + 1).is_err());
    }

    /// `find_all` reports exactly the offsets where the needle matches, overlaps included.
    #[test]
    fn find_all_matches_every_offset(s in text(), n in text()) {
        let needle: String = n.chars().take(2).collect();
        let hits = find_all(&s, &needle);
        if needle.is_empty() {
            prop_assert!(hits.is_empty());
        } else {
            let expected: Vec<usize> = (0..s.len())
                .filter(|&i| s.is_char_boundary(i) && s[i..].starts_with(&needle))
                .collect();
            prop_assert_eq!(hits, expected);
        }
    }
}

//! Positions in target content (SPEC K1): byte offsets, 1-based lines, and columns in both UTF-8
//! bytes and UTF-16 code units, plus occurrence search and line-range conversion.
//!
//! Lines end at `\n`; a `\r` before it belongs to the line it ends (so CRLF files count the same
//! lines as LF files). A lone `\r` does not end a line.

use serde::{Deserialize, Serialize};

use super::KernelError;

/// A position in target content (K1).
///
/// `byte` is a UTF-8 byte offset from the start of the content; `line` is 1-based;
/// `column_utf8` is the 0-based byte offset from the start of the line; `column_utf16` is the
/// 0-based offset from the start of the line in UTF-16 code units (what JavaScript hosts count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub byte: usize,
    pub line: usize,
    pub column_utf8: usize,
    pub column_utf16: usize,
}

/// The position of UTF-8 byte offset `byte` in `content` (K1).
///
/// `byte == content.len()` is valid (the end of the content).
///
/// Errors: `OUT_OF_RANGE` when `byte > content.len()`, `NOT_CHAR_BOUNDARY` when `byte` falls
/// inside a multi-byte character.
pub fn position_of(content: &str, byte: usize) -> Result<Position, KernelError> {
    check_offset(content, byte, "byte offset")?;
    let before = &content.as_bytes()[..byte];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    Ok(Position {
        byte,
        line,
        column_utf8: byte - line_start,
        column_utf16: utf16_len(&content[line_start..byte]),
    })
}

/// UTF-16 code units in `s`.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Converts an offset in UTF-16 code units (from the start of `content`) to a UTF-8 byte offset.
///
/// Returns `None` when `utf16` is past the end or splits a surrogate pair (a character outside
/// the Basic Multilingual Plane, e.g. most emoji, is two UTF-16 units).
pub fn utf16_to_byte(content: &str, utf16: usize) -> Option<usize> {
    let mut units = 0usize;
    for (byte, ch) in content.char_indices() {
        if units == utf16 {
            return Some(byte);
        }
        units += ch.len_utf16();
        if units > utf16 {
            return None;
        }
    }
    (units == utf16).then_some(content.len())
}

/// Converts a UTF-8 byte offset to an offset in UTF-16 code units from the start of `content`.
///
/// Returns `None` when `byte` is past the end or inside a multi-byte character.
pub fn byte_to_utf16(content: &str, byte: usize) -> Option<usize> {
    if byte > content.len() || !content.is_char_boundary(byte) {
        return None;
    }
    Some(utf16_len(&content[..byte]))
}

/// Byte starts of every occurrence of `needle` in `haystack`, in increasing order, *including
/// overlapping ones* (`find_all("aaa", "aa") == [0, 1]`), so "occurs exactly once" means exactly
/// one possible match. An empty needle has no occurrences (empty vector).
pub fn find_all(haystack: &str, needle: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let Some(first) = needle.chars().next() else {
        return out;
    };
    let step = first.len_utf8();
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        out.push(from + i);
        from += i + step;
    }
    out
}

/// Number of lines in `content`: one more than the number of `\n` (so the empty content has one
/// empty line, and a trailing newline starts a final empty line).
pub fn line_count(content: &str) -> usize {
    1 + content.bytes().filter(|&b| b == b'\n').count()
}

/// The UTF-8 byte range `[start, end)` covering 1-based inclusive lines `start_line..=end_line`,
/// including the final line's terminator (`\n` or `\r\n`) when it has one.
///
/// Errors: `OUT_OF_RANGE` when `start_line` is 0, `start_line > end_line`, or `end_line` exceeds
/// [`line_count`].
pub fn line_range_to_bytes(
    content: &str,
    start_line: usize,
    end_line: usize,
) -> Result<(usize, usize), KernelError> {
    let lines = line_count(content);
    if start_line == 0 || start_line > end_line || end_line > lines {
        return Err(KernelError::out_of_range(format!(
            "line range {start_line}..={end_line} is invalid: lines are 1-based and inclusive, and this content has {lines} lines"
        )));
    }
    let bytes = content.as_bytes();
    // `start` becomes the offset of line `start_line` when the scan reaches it (line 1 is at 0).
    let mut line = 1;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            if line == end_line {
                return Ok((start, i + 1));
            }
            line += 1;
            if line == start_line {
                start = i + 1;
            }
        }
    }
    Ok((start, content.len()))
}

/// 1-based line of the last byte of `[start, end)` (the start line for an empty range).
pub fn last_line_of(content: &str, start: usize, end: usize) -> Result<usize, KernelError> {
    check_range(content, start, end)?;
    let last = if end > start { end - 1 } else { start };
    Ok(1 + content.as_bytes()[..last]
        .iter()
        .filter(|&&b| b == b'\n')
        .count())
}

/// Checks that `offset` is within `content` and on a character boundary.
pub fn check_offset(content: &str, offset: usize, what: &str) -> Result<(), KernelError> {
    if offset > content.len() {
        return Err(KernelError::out_of_range(format!(
            "{what} {offset} is past the end of the content ({} bytes)",
            content.len()
        )));
    }
    if !content.is_char_boundary(offset) {
        return Err(KernelError::not_char_boundary(format!(
            "{what} {offset} falls inside a multi-byte UTF-8 character; offsets are UTF-8 bytes"
        )));
    }
    Ok(())
}

/// Checks that `[start, end)` is an ordered byte range on character boundaries inside `content`.
pub fn check_range(content: &str, start: usize, end: usize) -> Result<(), KernelError> {
    if start > end {
        return Err(KernelError::out_of_range(format!(
            "byte range {start}..{end} is reversed: start must not exceed end"
        )));
    }
    check_offset(content, start, "start byte")?;
    check_offset(content, end, "end byte")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_utf16_columns_for_astral_characters() {
        let s = "a\n😀b";
        let p = position_of(s, 6).unwrap();
        assert_eq!((p.line, p.column_utf8, p.column_utf16), (2, 4, 2));
    }

    #[test]
    fn position_rejects_offsets_inside_characters_and_past_the_end() {
        assert_eq!(
            position_of("界", 1).unwrap_err().code.as_str(),
            "NOT_CHAR_BOUNDARY"
        );
        assert_eq!(
            position_of("ab", 3).unwrap_err().code.as_str(),
            "OUT_OF_RANGE"
        );
    }

    #[test]
    fn utf16_offset_inside_surrogate_pair_has_no_byte() {
        assert_eq!(utf16_to_byte("😀", 1), None);
        assert_eq!(utf16_to_byte("😀", 2), Some(4));
        assert_eq!(utf16_to_byte("😀", 3), None);
    }

    #[test]
    fn find_all_reports_overlapping_occurrences() {
        assert_eq!(find_all("aaa", "aa"), vec![0, 1]);
        assert_eq!(find_all("界a界", "界"), vec![0, 4]);
        assert!(find_all("abc", "").is_empty());
    }

    #[test]
    fn line_range_includes_final_terminator() {
        let s = "one\r\ntwo\nthree";
        assert_eq!(line_range_to_bytes(s, 1, 1).unwrap(), (0, 5));
        assert_eq!(line_range_to_bytes(s, 2, 3).unwrap(), (5, s.len()));
        assert_eq!(line_range_to_bytes(s, 3, 3).unwrap(), (9, s.len()));
        assert!(line_range_to_bytes(s, 0, 1).is_err());
        assert!(line_range_to_bytes(s, 2, 1).is_err());
        assert!(line_range_to_bytes(s, 1, 4).is_err());
        assert_eq!(line_range_to_bytes("a\n", 2, 2).unwrap(), (2, 2));
    }
}

//! Naming a near miss (K2): why an `old_text` that does not occur in its scope was not found,
//! and the line endings a new text is written with.
//!
//! An agent told only "copy the exact text" goes in circles when the text *is* there but
//! somewhere else, or differs only in line endings, whitespace or one level of escaping. Each
//! of those is named here, with where it is. Pure functions over `&str`; offsets are UTF-8
//! bytes, lines 1-based.

use std::borrow::Cow;

/// The line endings a text uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEndings {
    /// No line break at all.
    None,
    /// Only `\n`.
    Lf,
    /// Only `\r\n`.
    Crlf,
    /// Both `\n` and `\r\n`.
    Mixed,
}

impl LineEndings {
    /// The line endings of `text`.
    pub fn of(text: &str) -> Self {
        let bytes = text.as_bytes();
        let (mut lf, mut crlf) = (false, false);
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                if i > 0 && bytes[i - 1] == b'\r' {
                    crlf = true;
                } else {
                    lf = true;
                }
            }
        }
        match (lf, crlf) {
            (false, false) => Self::None,
            (true, false) => Self::Lf,
            (false, true) => Self::Crlf,
            (true, true) => Self::Mixed,
        }
    }

    /// How the spec's messages name them: `LF`, `CRLF`, `mixed` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lf => "LF",
            Self::Crlf => "CRLF",
            Self::Mixed => "mixed",
        }
    }
}

/// `text` with every line break written as `target` writes them (`Lf` or `Crlf`); any other
/// `target` (a mixed or break-less target) leaves `text` as it is. Borrowed when unchanged.
pub fn with_line_endings(text: &str, target: LineEndings) -> Cow<'_, str> {
    match (target, LineEndings::of(text)) {
        (LineEndings::Crlf, LineEndings::Lf | LineEndings::Mixed) => {
            Cow::Owned(text.replace("\r\n", "\n").replace('\n', "\r\n"))
        }
        (LineEndings::Lf, LineEndings::Crlf | LineEndings::Mixed) => {
            Cow::Owned(text.replace("\r\n", "\n"))
        }
        _ => Cow::Borrowed(text),
    }
}

/// The 1-based line of byte `offset` in `content`.
pub fn line_of(content: &str, offset: usize) -> usize {
    1 + content.as_bytes()[..offset.min(content.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Why `old_text` does not occur in `scope` (the bytes `scope_start..scope_start + scope.len()`
/// of `content`), when the reason is a near miss; `None` when it is simply not there. In order:
/// the exact text elsewhere in `content` (outside the scope), other line endings, whitespace
/// only, one level of escaping (`\n`, `\t`, `\"`, `\\` written out, or the reverse).
pub fn explain_not_found(
    content: &str,
    scope_start: usize,
    scope: &str,
    old_text: &str,
) -> Option<String> {
    if old_text.is_empty() {
        return None;
    }
    let scope_lines = (
        line_of(content, scope_start),
        line_of(content, scope_start + scope.len().saturating_sub(1)),
    );
    let elsewhere = crate::position::find_all(content, old_text);
    if let Some(&first) = elsewhere.first() {
        let more = match elsewhere.len() {
            1 => String::new(),
            n => format!(" (and {} more places)", n - 1),
        };
        return Some(format!(
            "it occurs elsewhere in the target: at line {} (bytes {}–{}){more}, outside this scope (lines {}–{}); observe the scope that contains it (find_occurrences names it) and use that observation",
            line_of(content, first),
            first,
            first + old_text.len(),
            scope_lines.0,
            scope_lines.1
        ));
    }
    let scope_endings = LineEndings::of(scope);
    let old_endings = LineEndings::of(old_text);
    // Also when both are mixed: the scope's lines around the text may still be uniform.
    if old_endings != LineEndings::None {
        for target in [LineEndings::Crlf, LineEndings::Lf] {
            let converted = with_line_endings(old_text, target);
            if converted != old_text
                && let Some(&at) = crate::position::find_all(scope, &converted).first()
            {
                return Some(format!(
                    "its line endings differ: old_text uses {} but the scope uses {} — it matches at line {} with {} line endings; send the text exactly as read_target returns it (\\r\\n included)",
                    old_endings.as_str(),
                    scope_endings.as_str(),
                    line_of(content, scope_start + at),
                    target.as_str()
                ));
            }
        }
    }
    if let Some((at, end)) = find_ignoring_whitespace(scope, old_text) {
        return Some(format!(
            "it differs only in whitespace (spaces, tabs, line breaks or trailing whitespace) from the text at line {}: {:?}; copy that text exactly",
            line_of(content, scope_start + at),
            crate::snippet(&scope[at..end], 80)
        ));
    }
    let unescaped = "escape sequences (such as \\n or \\\") where the scope has the characters they stand for; send the characters themselves (one level of escaping less)";
    let escaped = "characters where the scope has escape sequences for them (such as \\n or \\\" written out in a string literal); send the escape sequences as the source spells them";
    for (converted, what) in [
        (unescape(old_text), unescaped),
        (escape(old_text, false), escaped),
        (escape(old_text, true), escaped),
    ] {
        if let Some(converted) = converted
            && let Some(&at) = crate::position::find_all(scope, &converted).first()
        {
            return Some(format!(
                "old_text has {what}: it matches at line {} that way",
                line_of(content, scope_start + at)
            ));
        }
    }
    None
}

/// The byte range of `scope` that equals `needle` once all whitespace is removed from both
/// (the first such range), when `needle` has non-whitespace characters.
fn find_ignoring_whitespace(scope: &str, needle: &str) -> Option<(usize, usize)> {
    let squeezed_needle: String = needle.chars().filter(|c| !c.is_whitespace()).collect();
    if squeezed_needle.is_empty() {
        return None;
    }
    // The scope without whitespace, and for each of its bytes the byte it came from.
    let mut squeezed = String::with_capacity(scope.len());
    let mut origin = Vec::with_capacity(scope.len());
    for (i, c) in scope.char_indices().filter(|(_, c)| !c.is_whitespace()) {
        squeezed.push(c);
        origin.extend((0..c.len_utf8()).map(|k| i + k));
    }
    let at = squeezed.find(&squeezed_needle)?;
    // Every byte maps to its own, so the range ends one past the last byte's origin (slicing
    // the scope there is safe: that byte ends its character).
    let end = origin[at + squeezed_needle.len() - 1] + 1;
    Some((origin[at], end))
}

/// `text` with one level of backslash escapes resolved (`\n`, `\r`, `\t`, `\"`, `\'`, `\\`),
/// when it has any.
fn unescape(text: &str) -> Option<String> {
    if !text.contains('\\') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    let mut changed = false;
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let resolved = match chars.next() {
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('"') => '"',
            Some('\'') => '\'',
            Some('\\') => '\\',
            Some(other) => {
                out.push('\\');
                out.push(other);
                continue;
            }
            None => {
                out.push('\\');
                break;
            }
        };
        changed = true;
        out.push(resolved);
    }
    changed.then_some(out)
}

/// `text` with line breaks and tabs — and with `quotes`, also double quotes and backslashes —
/// written as escape sequences, when that changes it.
fn escape(text: &str, quotes: bool) -> Option<String> {
    let special: &[char] = if quotes {
        &['\n', '\r', '\t', '"', '\\']
    } else {
        &['\n', '\r', '\t']
    };
    if !text.contains(special) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '"' if quotes => out.push_str("\\\""),
            '\\' if quotes => out.push_str("\\\\"),
            other => out.push(other),
        }
    }
    Some(out)
}

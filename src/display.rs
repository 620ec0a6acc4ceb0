//! Text shown to a person: the agent is the party under test, so every byte it
//! wrote — its code, request keys, what its code's checks print, the errors that echo it — is
//! data, never a terminal instruction. [`visible`] is the one function that turns such text into
//! something a terminal shows as written: control characters become visible pictures, so no
//! escape sequence (cursor moves, `ESC[2K` line erases, `ESC[8m` concealment, OSC title changes,
//! OSC 52 clipboard writes) reaches a terminal raw.
//!
//! Used by everything that prints for people: the headless console's progress stream
//! ([`VisibleWriter`]), `report.txt`, a target's story (check output, submissions with their
//! request keys and reasons, diffs), the interactive console's step summaries and story, and the
//! text output of `patchdiff verify|evaluate`. Machine formats (`report.json`, JUnit, wire logs)
//! keep the exact text, escaped as their format requires, and never pass through here.

use std::borrow::Cow;
use std::io::Write;

/// Whether `c` is rendered as a picture or escape by [`visible`]: C0 controls other than `\n`
/// and `\t`, DEL, C1 controls (U+0080–U+009F, which some terminals obey as 8-bit CSI/OSC), the
/// Unicode line/paragraph separators and the bidirectional embedding, override and isolate
/// controls (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F/U+061C: "Trojan Source" reordering).
pub fn needs_picture(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{2028}' | '\u{2029}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        '\u{200e}' | '\u{200f}' | '\u{061c}' => true,
        _ => false,
    }
}

/// `text` as a terminal may show it: each character for which [`needs_picture`] holds is
/// replaced — C0 controls by their Unicode control picture (ESC → `␛` U+241B, CR → `␍` U+240D,
/// BEL → `␇` U+2407, NUL → `␀` U+2400), DEL by `␡` (U+2421), everything else by `\u{XXXX}`.
/// Newlines and tabs stay: they are the structure of reports, diffs and check output. Borrows
/// when there is nothing to replace. Never fails; the result holds no character for which
/// [`needs_picture`] is true.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_picture) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push_visible(&mut out, c);
    }
    Cow::Owned(out)
}

/// Like [`visible`], for a value shown inside one line (a request key, a target name, an error
/// message in a table cell): newlines and tabs become pictures too (`␊` U+240A, `␉` U+2409), so
/// the value cannot start a line of its own and fake one.
pub fn visible_inline(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c == '\n' || c == '\t' || needs_picture(c))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push('\u{240a}'),
            '\t' => out.push('\u{2409}'),
            c => push_visible(&mut out, c),
        }
    }
    Cow::Owned(out)
}

fn push_visible(out: &mut String, c: char) {
    if !needs_picture(c) {
        out.push(c);
        return;
    }
    match c as u32 {
        // U+2400..U+241F: SYMBOL FOR NULL .. SYMBOL FOR UNIT SEPARATOR, in C0 order.
        n @ 0..=0x1f => out.push(char::from_u32(0x2400 + n).unwrap_or('\u{fffd}')),
        0x7f => out.push('\u{2421}'),
        n => out.push_str(&format!("\\u{{{n:04X}}}")),
    }
}

/// A writer for a person's terminal: every complete line written through it is passed through
/// [`visible`] before it reaches `inner`; an unfinished line waits in a buffer until its newline,
/// [`Write::flush`] or drop, so a control sequence split across writes is still caught. Bytes
/// that are not UTF-8 are shown as U+FFFD.
pub struct VisibleWriter<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> VisibleWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, upto: usize) -> std::io::Result<()> {
        let bytes: Vec<u8> = self.pending.drain(..upto).collect();
        let text = String::from_utf8_lossy(&bytes);
        self.inner.write_all(visible(&text).as_bytes())
    }
}

impl<W: Write> Write for VisibleWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(last) = self.pending.iter().rposition(|&b| b == b'\n') {
            self.emit(last + 1)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let n = self.pending.len();
        self.emit(n)?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for VisibleWriter<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The escapes the attack run used: a line erase before a fake verdict, concealment, a
    /// window-title change and an OSC 52 clipboard write.
    const HOSTILE: &str = "\r\x1b[2KPASSED · 5/5 targets pass both checks\n\x1b[8mFAILED\x1b[0m\n\
                           \x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x1b\\\u{9b}31m\u{202e}txt.exe";

    #[test]
    fn visible_leaves_no_control_character_and_keeps_lines_and_tabs() {
        let shown = visible(HOSTILE);
        assert!(!shown.chars().any(needs_picture), "{shown}");
        assert!(!shown.contains('\x1b') && !shown.contains('\r') && !shown.contains('\x07'));
        assert_eq!(
            shown,
            "␍␛[2KPASSED · 5/5 targets pass both checks\n␛[8mFAILED␛[0m\n\
             ␛]0;owned␇␛]52;c;cm0gLXJmIH4=␛\\\\u{009B}31m\\u{202E}txt.exe"
        );
        assert_eq!(visible("a\tb\nc"), "a\tb\nc");
        assert!(matches!(visible("plain · text"), Cow::Borrowed(_)));
        assert_eq!(visible("\u{0}\u{7f}"), "␀␡");
    }

    #[test]
    fn visible_inline_keeps_a_value_on_its_line() {
        assert_eq!(visible_inline("k-1\nPASSED\tx\x1b"), "k-1␊PASSED␉x␛");
        assert!(matches!(visible_inline("k-1"), Cow::Borrowed(_)));
    }

    #[test]
    fn visible_writer_catches_a_sequence_split_across_writes() {
        let mut out = Vec::new();
        {
            let mut w = VisibleWriter::new(&mut out);
            w.write_all(b"step ok \x1b").unwrap();
            w.write_all(b"[2K").unwrap();
            w.write_all(b"PASSED\nnext \xc2").unwrap();
            w.write_all(b"\x9b1m").unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "step ok ␛[2KPASSED\nnext \\u{009B}1m");
    }
}

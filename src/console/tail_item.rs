//! What tailing a JSONL file yields (SPEC T, E): each line, or why one could not be read. A
//! leaf module, so the tailer and the monitor that ingests its items share these types without
//! importing each other.

/// Longest event line accepted (bytes); longer lines count as malformed.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// What one poll yields per line: the line, or why a line could not be read (counted as
/// malformed downstream by the monitor's `ingest_item`, never fatal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailItem {
    /// A complete line, without its newline (or a `\r` before it).
    Line(String),
    /// A line longer than [`MAX_LINE_BYTES`], skipped up to its newline.
    Oversize,
    /// A line that is not UTF-8, skipped.
    NotUtf8,
}

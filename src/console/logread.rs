//! Reading append-only logs by byte offset (SPEC E1, U2): forward from a line start, backward
//! from an offset (the tail of a log of any size without reading it all), and bounded searches.
//! Only the evidence viewer uses it; no state is kept here.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// Bytes read per backward step.
const BACK_CHUNK: u64 = 64 * 1024;
/// Longest line the viewer reads whole (bytes); longer lines are cut (the file is untouched).
pub const MAX_VIEW_LINE: usize = 4 * 1024 * 1024;

/// One line of a log and where it starts (byte offset).
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub offset: u64,
    /// Bytes the line occupies in the file, newline included (the text may be cut or have
    /// invalid UTF-8 replaced, so its length can differ).
    pub len: u64,
    pub text: String,
}

impl LogLine {
    /// Offset of the next line.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

fn cut(bytes: &[u8]) -> String {
    let b = &bytes[..bytes.len().min(MAX_VIEW_LINE)];
    String::from_utf8_lossy(b).into_owned()
}

/// Reads up to `max_lines` complete lines starting at byte `from` (which must be a line start)
/// that satisfy `keep`, scanning at most `max_scan` bytes. A trailing line without its newline
/// (still being written) is not returned.
pub fn read_forward(
    path: &Path,
    from: u64,
    max_lines: usize,
    max_scan: u64,
    mut keep: impl FnMut(&str) -> bool,
) -> std::io::Result<Vec<LogLine>> {
    let mut out = Vec::new();
    let file = File::open(path)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    reader.seek(SeekFrom::Start(from))?;
    let mut offset = from;
    let mut buf = Vec::new();
    while out.len() < max_lines && offset - from < max_scan {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_VIEW_LINE as u64 * 4)
            .read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            break;
        }
        let text = cut(&buf[..n - 1]);
        if keep(&text) {
            out.push(LogLine {
                offset,
                len: n as u64,
                text,
            });
        }
        offset += n as u64;
    }
    Ok(out)
}

// Long because: one backward scan whose chunk size, partial-line and position state interlock
// on every pass; split, that state would travel between the pieces.
/// Reads up to `max_lines` complete lines that end at or before byte `before`, newest last,
/// that satisfy `keep`, scanning at most `max_scan` bytes backwards. When `before` falls inside
/// a line (e.g. the file's end while a line is being written) that partial line is skipped.
pub fn read_backward(
    path: &Path,
    before: u64,
    max_lines: usize,
    max_scan: u64,
    mut keep: impl FnMut(&str) -> bool,
) -> std::io::Result<Vec<LogLine>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut pos = before.min(len);
    let mut newest_first = Vec::new();
    let mut scanned = 0u64;
    let mut chunk = BACK_CHUNK;
    let mut first = true;
    while pos > 0 && newest_first.len() < max_lines && scanned < max_scan {
        let start = pos.saturating_sub(chunk);
        let mut data = vec![0u8; (pos - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut data)?;
        scanned += data.len() as u64;
        // `end` is the index just past the bytes still to split.
        let mut end = data.len();
        if first {
            first = false;
            if data.last() != Some(&b'\n') {
                // Partial trailing line: drop it.
                match data.iter().rposition(|&b| b == b'\n') {
                    Some(i) => end = i + 1,
                    None if start == 0 => break,
                    None => {
                        chunk = chunk.saturating_mul(2);
                        first = true;
                        continue;
                    }
                }
            }
        }
        // data[..end] ends with '\n'; split lines from the end.
        let mut emitted_any = false;
        let mut done = false;
        loop {
            let body_end = end - 1; // index of the terminating '\n'
            match data[..body_end].iter().rposition(|&b| b == b'\n') {
                Some(i) => {
                    let text = cut(&data[i + 1..body_end]);
                    emitted_any = true;
                    if keep(&text) {
                        newest_first.push(LogLine {
                            offset: start + i as u64 + 1,
                            len: (body_end - i) as u64,
                            text,
                        });
                    }
                    end = i + 1;
                    if newest_first.len() >= max_lines {
                        done = true;
                        break;
                    }
                }
                None if start == 0 => {
                    let text = cut(&data[..body_end]);
                    if keep(&text) {
                        newest_first.push(LogLine {
                            offset: 0,
                            len: body_end as u64 + 1,
                            text,
                        });
                    }
                    end = 0;
                    done = true;
                    break;
                }
                None => break,
            }
        }
        pos = start + end as u64;
        if done {
            break;
        }
        if !emitted_any {
            if chunk >= MAX_VIEW_LINE as u64 * 4 {
                // A single enormous line: skip over it.
                pos = start;
                chunk = BACK_CHUNK;
            } else {
                chunk = chunk.saturating_mul(2);
            }
        } else {
            chunk = BACK_CHUNK;
        }
    }
    newest_first.reverse();
    Ok(newest_first)
}

/// Offset of the first line at or after `from` containing `needle` (case-insensitive ASCII),
/// scanning at most `max_scan` bytes.
pub fn search_forward(
    path: &Path,
    from: u64,
    needle: &str,
    max_scan: u64,
) -> std::io::Result<Option<u64>> {
    let needle = needle.to_ascii_lowercase();
    let file = File::open(path)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    reader.seek(SeekFrom::Start(from))?;
    let mut offset = from;
    let mut buf = Vec::new();
    while offset - from < max_scan {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        let hay = String::from_utf8_lossy(&buf);
        if hay.to_ascii_lowercase().contains(&needle) {
            return Ok(Some(offset));
        }
        offset += n as u64;
    }
    Ok(None)
}

/// Line-start offsets of every line holding `needle` (ASCII case-insensitive), scanning at
/// most `max_scan` bytes and keeping at most `max_matches`.
pub fn find_matches(
    path: &Path,
    needle: &str,
    max_scan: u64,
    max_matches: usize,
) -> std::io::Result<Vec<u64>> {
    let needle = needle.to_ascii_lowercase();
    let mut reader = BufReader::with_capacity(256 * 1024, File::open(path)?);
    let mut out = Vec::new();
    let mut offset = 0u64;
    let mut line = Vec::new();
    while offset < max_scan && out.len() < max_matches {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break; // end, or a line still being written
        }
        if String::from_utf8_lossy(&line)
            .to_ascii_lowercase()
            .contains(&needle)
        {
            out.push(offset);
        }
        offset += n as u64;
    }
    Ok(out)
}

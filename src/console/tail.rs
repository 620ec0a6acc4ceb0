//! Incremental JSONL tailing by byte offset (SPEC T, E): reads only what was appended since the
//! last poll, keeps a bounded partial line, and starts over when a file is truncated or
//! replaced. Used for perf-event and memory files (the console and attach mode alike).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::state::MAX_LINE_BYTES;

/// Marker passed for a line longer than [`MAX_LINE_BYTES`]; it is not JSON, so it counts as
/// malformed downstream.
pub const OVERSIZE_LINE: &str = "\u{1}oversize line";

/// Follows one append-only JSONL file.
#[derive(Debug)]
pub struct JsonlTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// Discarding the rest of an oversize line.
    skipping: bool,
    #[cfg(unix)]
    inode: Option<u64>,
}

impl JsonlTail {
    /// Tails `path` from its start. The file need not exist yet.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: 0,
            partial: Vec::new(),
            skipping: false,
            #[cfg(unix)]
            inode: None,
        }
    }

    /// Tails `path` from its current end (only lines appended later are seen).
    pub fn from_end(path: &Path) -> Self {
        let mut t = Self::new(path);
        if let Ok(meta) = std::fs::metadata(path) {
            t.offset = meta.len();
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                t.inode = Some(meta.ino());
            }
        }
        t
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads at most `max_bytes` of newly appended data and calls `line` for each complete line
    /// (without the newline; invalid UTF-8 replaced). Returns the bytes read. A missing file reads
    /// as empty; a shrunk or replaced file is re-read from its start.
    pub fn poll(&mut self, max_bytes: usize, mut line: impl FnMut(&str)) -> std::io::Result<usize> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if self.inode.is_some_and(|i| i != meta.ino()) {
                self.restart();
            }
            self.inode = Some(meta.ino());
        }
        if meta.len() < self.offset {
            self.restart();
        }
        if meta.len() == self.offset {
            return Ok(0);
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let want = (meta.len() - self.offset).min(max_bytes as u64) as usize;
        let mut buf = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match file.read(&mut buf[got..])? {
                0 => break,
                n => got += n,
            }
        }
        buf.truncate(got);
        self.offset += got as u64;
        let mut start = 0;
        for (i, &b) in buf.iter().enumerate() {
            if b != b'\n' {
                continue;
            }
            let piece = &buf[start..i];
            start = i + 1;
            if self.skipping {
                self.skipping = false;
                self.partial.clear();
                continue;
            }
            if self.partial.len() + piece.len() > MAX_LINE_BYTES {
                self.partial.clear();
                line(OVERSIZE_LINE);
            } else if self.partial.is_empty() {
                line(&String::from_utf8_lossy(piece));
            } else {
                self.partial.extend_from_slice(piece);
                let whole = std::mem::take(&mut self.partial);
                line(&String::from_utf8_lossy(&whole));
            }
        }
        if !self.skipping {
            self.partial.extend_from_slice(&buf[start..]);
            if self.partial.len() > MAX_LINE_BYTES {
                self.partial.clear();
                self.skipping = true;
                line(OVERSIZE_LINE);
            }
        }
        Ok(got)
    }

    fn restart(&mut self) {
        self.offset = 0;
        self.partial.clear();
        self.skipping = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(t: &mut JsonlTail) -> Vec<String> {
        let mut out = Vec::new();
        t.poll(1 << 20, |l| out.push(l.to_owned())).unwrap();
        out
    }

    #[test]
    fn reads_only_appended_complete_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        let mut t = JsonlTail::new(&path);
        assert!(lines(&mut t).is_empty(), "missing file reads as empty");
        let mut f = File::create(&path).unwrap();
        write!(f, "a\nb\npar").unwrap();
        assert_eq!(lines(&mut t), vec!["a", "b"]);
        writeln!(f, "tial").unwrap();
        assert_eq!(lines(&mut t), vec!["partial"]);
        assert!(lines(&mut t).is_empty());
    }

    #[test]
    fn truncated_file_is_read_again_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        std::fs::write(&path, "one\ntwo\n").unwrap();
        let mut t = JsonlTail::new(&path);
        assert_eq!(lines(&mut t).len(), 2);
        std::fs::write(&path, "x\n").unwrap();
        assert_eq!(lines(&mut t), vec!["x"]);
    }

    #[test]
    fn oversize_line_is_reported_once_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        let big = "y".repeat(MAX_LINE_BYTES + 10);
        std::fs::write(&path, format!("{big}\nok\n")).unwrap();
        let mut t = JsonlTail::new(&path);
        let mut out = Vec::new();
        // Small reads force the line to span polls.
        for _ in 0..200 {
            t.poll(4096, |l| out.push(l.to_owned())).unwrap();
        }
        assert_eq!(out, vec![OVERSIZE_LINE.to_owned(), "ok".to_owned()]);
    }

    #[test]
    fn from_end_skips_existing_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        let mut t = JsonlTail::from_end(&path);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "new").unwrap();
        assert_eq!(lines(&mut t), vec!["new"]);
    }
}

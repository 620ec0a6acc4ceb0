//! Incremental JSONL tailing by byte offset (SPEC T, E): reads only what was appended since the
//! last poll and starts over when a file is truncated or replaced. Lines are split by
//! `tokio_util`'s [`LinesCodec`] with a maximum length, which keeps the partial line between polls
//! and discards the rest of an over-long one. Used for perf-event and memory files (the console
//! and attach mode alike).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

pub use super::tail_item::{MAX_LINE_BYTES, TailItem};

/// Follows one append-only JSONL file.
#[derive(Debug)]
pub struct JsonlTail {
    path: PathBuf,
    offset: u64,
    /// Bytes read but not yet split into lines (a partial line, at most [`MAX_LINE_BYTES`]).
    pending: BytesMut,
    /// Splits lines; it remembers where it stopped searching and whether it is discarding the
    /// rest of an over-long line.
    lines: LinesCodec,
    #[cfg(unix)]
    inode: Option<u64>,
}

impl JsonlTail {
    /// Tails `path` from its start. The file need not exist yet.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: 0,
            pending: BytesMut::new(),
            lines: LinesCodec::new_with_max_length(MAX_LINE_BYTES),
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

    /// Reads at most `max_bytes` of newly appended data and calls `line` with each complete line
    /// as [`TailItem::Line`] (without the newline or a `\r` before it; the codec's own `String`,
    /// not copied again). Returns the bytes read. A missing file reads as empty; a shrunk or
    /// replaced file is re-read from its start. A line longer than [`MAX_LINE_BYTES`] is reported
    /// once as [`TailItem::Oversize`] and skipped up to its newline; a line that is not UTF-8 is
    /// reported as [`TailItem::NotUtf8`]; reading continues at the next line either way.
    pub fn poll(
        &mut self,
        max_bytes: usize,
        mut line: impl FnMut(TailItem),
    ) -> std::io::Result<usize> {
        let Some(mut buf) = self.read_appended(max_bytes)? else {
            return Ok(0);
        };
        let got = buf.len() - self.pending.len();
        loop {
            match self.lines.decode(&mut buf) {
                Ok(Some(l)) => line(TailItem::Line(l)),
                Ok(None) => break,
                Err(LinesCodecError::MaxLineLengthExceeded) => line(TailItem::Oversize),
                Err(LinesCodecError::Io(_)) => line(TailItem::NotUtf8),
            }
        }
        // Only the partial line is kept between polls (a copy of at most MAX_LINE_BYTES); the
        // read's buffer is freed now, so the console holds one read at a time.
        self.pending = BytesMut::from(&buf[..]);
        Ok(got)
    }

    /// A new buffer holding `pending` followed by at most `max_bytes` of what was written
    /// since the last read (`None`: nothing new).
    fn read_appended(&mut self, max_bytes: usize) -> std::io::Result<Option<BytesMut>> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
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
            return Ok(None);
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let want = (meta.len() - self.offset).min(max_bytes as u64) as usize;
        let before = self.pending.len();
        let mut buf = BytesMut::zeroed(before + want);
        buf[..before].copy_from_slice(&self.pending);
        let mut got = 0;
        while got < want {
            match file.read(&mut buf[before + got..])? {
                0 => break,
                n => got += n,
            }
        }
        buf.truncate(before + got);
        self.offset += got as u64;
        Ok(Some(buf))
    }

    fn restart(&mut self) {
        self.offset = 0;
        self.pending.clear();
        self.lines = LinesCodec::new_with_max_length(MAX_LINE_BYTES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file `e.jsonl` holding `content` in a fresh directory (kept while the guard lives).
    fn file_with(content: impl AsRef<[u8]>) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    /// A poll's items as text: a line as it is, `<oversize>` / `<not utf-8>` for the others.
    fn shown(item: TailItem) -> String {
        match item {
            TailItem::Line(l) => l,
            TailItem::Oversize => "<oversize>".to_owned(),
            TailItem::NotUtf8 => "<not utf-8>".to_owned(),
        }
    }

    fn lines(t: &mut JsonlTail) -> Vec<String> {
        let mut out = Vec::new();
        t.poll(1 << 20, |l| out.push(shown(l))).unwrap();
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
        let (_dir, path) = file_with("one\ntwo\n");
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
            t.poll(4096, |l| out.push(l)).unwrap();
        }
        assert_eq!(
            out,
            vec![TailItem::Oversize, TailItem::Line("ok".to_owned())]
        );
    }

    #[test]
    fn an_oversize_line_in_the_middle_is_skipped_and_the_next_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        // 64 KiB is the longest line accepted; one byte more is skipped, one byte less is not.
        let longest = "a".repeat(65_536);
        let over = "b".repeat(65_537);
        std::fs::write(&path, format!("first\n{over}\n{longest}\nlast\n")).unwrap();
        let mut t = JsonlTail::new(&path);
        let mut out = Vec::new();
        // One read of everything, then again with reads that cut the long lines.
        t.poll(1 << 20, |l| out.push(shown(l))).unwrap();
        assert_eq!(
            out.len(),
            4,
            "{:?}",
            out.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(
            (
                out[0].as_str(),
                out[1].as_str(),
                out[2].len(),
                out[3].as_str()
            ),
            ("first", "<oversize>", 65_536, "last")
        );
        let mut small = JsonlTail::new(&path);
        let mut again = Vec::new();
        while small.poll(1000, |l| again.push(shown(l))).unwrap() > 0 {}
        assert_eq!(again, out, "the same lines whatever the read size");
    }

    #[test]
    fn a_line_that_is_not_utf8_is_reported_and_reading_continues() {
        let (_dir, path) = file_with(b"one\n\xff\xfe\ntwo\n");
        let mut t = JsonlTail::new(&path);
        assert_eq!(lines(&mut t), vec!["one", "<not utf-8>", "two"]);
    }

    #[test]
    fn from_end_skips_existing_lines() {
        let (_dir, path) = file_with("old\n");
        let mut t = JsonlTail::from_end(&path);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "new").unwrap();
        assert_eq!(lines(&mut t), vec!["new"]);
    }
}

//! The hash chain of append-only JSONL logs (V1): each line carries the SHA-256 (hex) of the
//! line before it. Used by `evidence` (wire logs, transcripts) and `telemetry` (perf events,
//! memory samples); it uses nothing of the crate, so neither needs the other for it.

use std::fs::File;
use std::path::Path;

/// Chain value of a log's first line: 64 zeros (V1).
pub const CHAIN_GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The field each evidence JSONL line carries: the SHA-256 (hex) of the previous line's bytes,
/// newline excluded, or [`CHAIN_GENESIS`] on the first line (V1).
pub const CHAIN_FIELD: &str = "prev_sha256";

/// SHA-256 (hex) of one log line's bytes, newline excluded: the next line's [`CHAIN_FIELD`].
pub fn line_digest(line: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(line))
}

/// The chain value to continue a log with: the digest of its last line, or the genesis value
/// for an empty or missing file. Reads backwards from the end, so it costs one line, not the
/// file.
pub(crate) fn chain_tail(file: &mut File) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(CHAIN_GENESIS.to_owned());
    }
    // The last line: everything after the last newline that precedes the final byte.
    let mut tail: Vec<u8> = Vec::new();
    let mut pos = len;
    let mut first = true;
    loop {
        let step = pos.min(64 * 1024);
        pos -= step;
        let mut chunk = vec![0u8; step as usize];
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(&mut chunk)?;
        if first {
            first = false;
            if chunk.last() == Some(&b'\n') {
                chunk.pop();
            }
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        if let Some(nl) = tail.iter().rposition(|&b| b == b'\n') {
            tail.drain(..=nl);
            break;
        }
        if pos == 0 {
            break;
        }
    }
    Ok(line_digest(&tail))
}

/// The chain value to continue the log at `path` with (its last line's digest, or
/// [`CHAIN_GENESIS`] when it is empty or missing).
pub fn chain_tail_of(path: &Path) -> std::io::Result<String> {
    match File::open(path) {
        Ok(mut f) => chain_tail(&mut f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CHAIN_GENESIS.to_owned()),
        Err(e) => Err(e),
    }
}

//! Chunked blobs (K7): a byte string stored as ordered rows of at most
//! [`CHUNK_PAYLOAD_BYTES`](super::CHUNK_PAYLOAD_BYTES) payload each, so no row exceeds
//! [`RECORD_BOUND_BYTES`](super::RECORD_BOUND_BYTES) with its framing.

use rusqlite::{Connection, params};

use super::{CHUNK_PAYLOAD_BYTES, ErrorCode, StoreError};

/// Which chunk table.
#[derive(Clone, Copy)]
pub enum ChunkTable {
    Snapshot,
    Journal,
}

impl ChunkTable {
    fn insert_sql(self) -> &'static str {
        match self {
            ChunkTable::Snapshot => {
                "INSERT INTO snapshot_chunks (snapshot_id, seq, data) VALUES (?1, ?2, ?3)"
            }
            ChunkTable::Journal => {
                "INSERT INTO journal_chunks (entry_id, seq, data) VALUES (?1, ?2, ?3)"
            }
        }
    }
    fn select_sql(self) -> &'static str {
        match self {
            ChunkTable::Snapshot => {
                "SELECT data FROM snapshot_chunks WHERE snapshot_id = ?1 ORDER BY seq"
            }
            ChunkTable::Journal => {
                "SELECT data FROM journal_chunks WHERE entry_id = ?1 ORDER BY seq"
            }
        }
    }
}

/// Writes `bytes` as chunks of `owner`; returns the number of chunk rows.
pub fn write(
    conn: &Connection,
    table: ChunkTable,
    owner: i64,
    bytes: &[u8],
) -> Result<i64, StoreError> {
    let mut stmt = conn.prepare_cached(table.insert_sql())?;
    let mut n = 0i64;
    for chunk in bytes.chunks(CHUNK_PAYLOAD_BYTES) {
        stmt.execute(params![owner, n, chunk])?;
        n += 1;
    }
    Ok(n)
}

/// Reads `owner`'s chunks back; `expected_len` and `chunk_count` are checked.
pub fn read(
    conn: &Connection,
    table: ChunkTable,
    owner: i64,
    expected_len: usize,
    chunk_count: i64,
) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(expected_len);
    let mut stmt = conn.prepare_cached(table.select_sql())?;
    let mut rows = stmt.query(params![owner])?;
    let mut n = 0i64;
    while let Some(row) = rows.next()? {
        let data = row
            .get_ref(0)?
            .as_blob()
            .map_err(|e| StoreError::storage("chunk", e))?;
        out.extend_from_slice(data);
        n += 1;
    }
    if out.len() != expected_len || n != chunk_count {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!(
                "stored record {owner} is damaged: {n} chunks / {} bytes where {chunk_count} / {expected_len} were written",
                out.len()
            ),
        ));
    }
    Ok(out)
}

//! Row-level SQL of the SQLite store: one target's rows (targets, snapshots and their chunks,
//! journal, observations, attempts) read and written on a connection, and content rebuilds.

use super::*;

pub(super) fn target_row_opt(
    conn: &Connection,
    name: &str,
) -> Result<Option<TargetRow>, StoreError> {
    let sql = format!("SELECT {TARGET_COLS} FROM targets WHERE name = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(params![name], |r| {
            Ok(TargetRow {
                id: r.get(0)?,
                name: r.get(1)?,
                language: r.get(2)?,
                incarnation: r.get(3)?,
                version: r.get::<_, i64>(4)? as u64,
                revision: r.get::<_, i64>(5)? as u64,
                sha256: r.get(6)?,
                initial_sha256: r.get(7)?,
                saved_revision: r.get::<_, i64>(8)? as u64,
                edits_since_snapshot: r.get::<_, i64>(9)? as u64,
                bytes_since_snapshot: r.get::<_, i64>(10)? as u64,
            })
        })
        .optional()?)
}

pub(super) fn target_row(conn: &Connection, name: &str) -> Result<TargetRow, StoreError> {
    target_row_opt(conn, name)?.ok_or_else(|| StoreError::unknown_target(name))
}

/// An entry's concatenated text: inline in the journal row, or from its chunk rows (K7).
pub(super) fn load_entry_text(
    conn: &Connection,
    entry_id: i64,
    inline: Option<Vec<u8>>,
    text_len: usize,
    chunk_count: i64,
) -> Result<String, StoreError> {
    let bytes = match inline {
        Some(b) if b.len() == text_len => b,
        Some(_) => {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!("journal entry {entry_id} has a damaged inline text"),
            ));
        }
        None if text_len == 0 => Vec::new(),
        None => chunks::read(conn, ChunkTable::Journal, entry_id, text_len, chunk_count)?,
    };
    utf8(bytes, "journal text")
}

/// Edit shapes of the steps producing revisions `(from, to]`, oldest first.
pub(super) fn load_steps(
    conn: &Connection,
    target_id: i64,
    from: u64,
    to: u64,
) -> Result<Vec<Vec<EditShape>>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT edits FROM journal WHERE target_id = ?1 AND kind = 'edit' \
         AND revision > ?2 AND revision <= ?3 ORDER BY revision",
    )?;
    let rows = stmt.query_map(params![target_id, i(from), i(to)], |r| {
        r.get::<_, String>(0)
    })?;
    let mut steps = Vec::new();
    for row in rows {
        steps.push(decode_edits(&row?)?);
    }
    if steps.len() as u64 != to - from {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!("journal is missing edits between revisions {from} and {to}"),
        ));
    }
    Ok(steps)
}

pub(super) fn write_snapshot(
    conn: &Connection,
    target_id: i64,
    revision: u64,
    content: &str,
    sha256: &str,
) -> Result<i64, StoreError> {
    let chunk_count = content.len().div_ceil(CHUNK_PAYLOAD_BYTES) as i64;
    conn.prepare_cached(
        "INSERT INTO snapshots (target_id, revision, sha256, byte_len, chunk_count) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        target_id,
        i(revision),
        sha256,
        content.len() as i64,
        chunk_count
    ])?;
    let id = conn.last_insert_rowid();
    chunks::write(conn, ChunkTable::Snapshot, id, content.as_bytes())?;
    Ok(id)
}

pub(super) fn read_snapshot(
    conn: &Connection,
    snapshot_id: i64,
) -> Result<(u64, String), StoreError> {
    let (revision, sha, len, n): (i64, String, i64, i64) = conn
        .prepare_cached(
            "SELECT revision, sha256, byte_len, chunk_count FROM snapshots WHERE id = ?1",
        )?
        .query_row(params![snapshot_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
    let content = utf8(
        chunks::read(conn, ChunkTable::Snapshot, snapshot_id, len as usize, n)?,
        "snapshot",
    )?;
    if sha256_hex(&content) != sha {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!("snapshot {snapshot_id} does not match its recorded SHA-256"),
        ));
    }
    Ok((revision as u64, content))
}

/// K6/K7: writes one journal entry; text over [`INLINE_TEXT_BYTES`] goes to chunk rows.
pub(super) fn insert_journal(
    conn: &Connection,
    target_id: i64,
    e: &shared::JournalRow<'_>,
) -> Result<i64, StoreError> {
    let text = shared::joined_text(e.edits);
    let inline = text.len() <= INLINE_TEXT_BYTES;
    let chunk_count = if inline {
        0
    } else {
        text.len().div_ceil(CHUNK_PAYLOAD_BYTES) as i64
    };
    conn.prepare_cached(
        "INSERT INTO journal (target_id, kind, revision, version, attempt_id, request_key, \
         sha256, edits, text_len, chunk_count, inline_text) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        target_id,
        e.kind,
        i(e.revision),
        i(e.version),
        e.attempt_id,
        e.request_key,
        e.sha256,
        encode_edits(e.edits),
        text.len() as i64,
        chunk_count,
        inline.then_some(text.as_bytes())
    ])?;
    let id = conn.last_insert_rowid();
    if !inline {
        chunks::write(conn, ChunkTable::Journal, id, text.as_bytes())?;
    }
    Ok(id)
}

/// Content of target `t` at `revision`: from the cache, or the latest snapshot at or before
/// it (or a cached earlier revision, whichever is newer) with later journal edits applied.
// Alike PostgreSQL's content_at but for its synchronous I/O; the decisions are `shared`'s.
pub(super) fn content_at(
    conn: &Connection,
    cached: Option<&Cached>,
    t: &TargetRow,
    revision: u64,
) -> Result<String, StoreError> {
    let cached = shared::usable_cache(cached, t, revision);
    if let Some(c) = cached.filter(|c| c.revision == revision) {
        return Ok(c.content.to_string());
    }
    let snap: Option<(i64, u64)> = conn
        .prepare_cached(
            "SELECT id, revision FROM snapshots WHERE target_id = ?1 AND revision <= ?2 \
             ORDER BY revision DESC, id DESC LIMIT 1",
        )?
        .query_row(params![t.id, i(revision)], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
        })
        .optional()?;
    let (at, content) = match shared::rebuild_from(&t.name, revision, snap, cached)? {
        shared::RebuildFrom::Cached(at, content) => (at, content),
        shared::RebuildFrom::Snapshot(id) => read_snapshot(conn, id)?,
    };
    if at == revision {
        return Ok(content);
    }
    let mut stmt = conn.prepare_cached(
        "SELECT entry_id, revision, sha256, edits, text_len, chunk_count, inline_text FROM journal \
         WHERE target_id = ?1 AND kind = 'edit' AND revision > ?2 AND revision <= ?3 \
         ORDER BY revision",
    )?;
    let mut rows = stmt.query(params![t.id, i(at), i(revision)])?;
    let mut edits = Vec::new();
    while let Some(r) = rows.next()? {
        let (entry_id, rev, sha256, edits_json, text_len, n): (i64, i64, String, String, i64, i64) = (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        );
        let inline: Option<Vec<u8>> = r.get(6)?;
        edits.push(
            load_entry_text(conn, entry_id, inline, text_len as usize, n).map(|text| EditRow {
                revision: rev as u64,
                sha256,
                edits: edits_json,
                text,
            }),
        );
    }
    shared::rebuild(&t.name, at, content, revision, edits)
}

/// Times a submission plans again when a re-init moved its target before commit.
pub(super) const COMMIT_ATTEMPTS: usize = 3;

/// What a submission's read phase found: a stored receipt (K4), or a decided plan.
pub(super) enum Planned {
    Recovered(Receipt),
    Plan {
        target: TargetRow,
        plan: Plan,
        current: Arc<str>,
    },
}

pub(super) fn delete_history(conn: &Connection, target_id: i64) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM snapshot_chunks WHERE snapshot_id IN (SELECT id FROM snapshots WHERE target_id = ?1)",
        "DELETE FROM snapshots WHERE target_id = ?1",
        "DELETE FROM journal_chunks WHERE entry_id IN (SELECT entry_id FROM journal WHERE target_id = ?1)",
        "DELETE FROM journal WHERE target_id = ?1",
        "DELETE FROM versions WHERE target_id = ?1",
        "DELETE FROM observations WHERE target_id = ?1",
        "DELETE FROM attempts WHERE target_id = ?1",
        "DELETE FROM worker_errors WHERE target_id = ?1",
    ] {
        conn.execute(sql, params![target_id])?;
    }
    Ok(())
}

pub(super) fn lookup_receipt(
    conn: &Connection,
    target_id: i64,
    target: &str,
    request_key: &str,
    submission_sha256: &str,
) -> Result<Option<Receipt>, StoreError> {
    let row: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT submission_sha256, receipt FROM attempts WHERE target_id = ?1 AND request_key = ?2",
        )?
        .query_row(params![target_id, request_key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    shared::recovered(row, target, request_key, submission_sha256)
}

pub(super) fn load_observation(
    conn: &Connection,
    target_id: i64,
    target: &str,
    id: &str,
) -> Result<ObservationRecord, StoreError> {
    conn.prepare_cached(
        "SELECT revision, kind, name, start_byte, end_byte, start_line, end_line, sha256 \
         FROM observations WHERE observation_id = ?1 AND target_id = ?2",
    )?
    .query_row(params![id, target_id], |r| {
        Ok(ObservationRecord {
            observation_id: id.to_owned(),
            revision: r.get::<_, i64>(0)? as u64,
            scope: ObservedScope {
                kind: r.get(1)?,
                name: r.get(2)?,
                start_byte: r.get::<_, i64>(3)? as usize,
                end_byte: r.get::<_, i64>(4)? as usize,
                start_line: r.get::<_, i64>(5)? as usize,
                end_line: r.get::<_, i64>(6)? as usize,
            },
            sha256: r.get(7)?,
        })
    })
    .optional()?
    .ok_or_else(|| shared::unknown_observation(target, id))
}

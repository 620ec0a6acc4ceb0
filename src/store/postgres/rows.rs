//! Row-level SQL of the PostgreSQL store: reading and writing one target's rows inside a
//! transaction (targets, snapshots, journal, observations, attempts), and content rebuilds.

use super::*;

pub(super) fn u(r: &Row, idx: usize) -> u64 {
    r.get::<_, i64>(idx) as u64
}

pub(super) fn target_from(r: &Row) -> TargetRow {
    TargetRow {
        id: r.get(0),
        name: r.get(1),
        language: r.get(2),
        incarnation: r.get(3),
        version: u(r, 4),
        revision: u(r, 5),
        sha256: r.get(6),
        initial_sha256: r.get(7),
        saved_revision: u(r, 8),
        edits_since_snapshot: u(r, 9),
        bytes_since_snapshot: u(r, 10),
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => StoreError::storage(
                "database error",
                format!("{} ({})", db.message(), db.code().code()),
            ),
            None => StoreError::storage("database error", e),
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        StoreError::storage("getting a database connection", e)
    }
}

/// `url` with any password (in the user info or a `password=` parameter) replaced by `***`.
pub fn redact_database_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |p| rest + p);
        if let Some(at) = out[rest..authority_end].rfind('@')
            && let Some(colon) = out[rest..rest + at].find(':')
        {
            out.replace_range(rest + colon + 1..rest + at, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

/// K5: the advisory lock key of target `name` (first 8 bytes of a SHA-256 of the name): two
/// names sharing a key only serialize with each other, which is safe.
pub(super) fn target_lock_key(name: &str) -> i64 {
    let digest = sha256_hex(format!("patchdiff-target:{name}"));
    i64::from_str_radix(&digest[..15], 16).unwrap_or(0)
}

pub(super) async fn target_row_opt(
    tx: &impl GenericClient,
    name: &str,
    suffix: &str,
) -> Result<Option<TargetRow>, StoreError> {
    let sql = format!("SELECT {TARGET_COLS} FROM targets WHERE name = $1{suffix}");
    let stmt = tx.prepare_cached(&sql).await?;
    Ok(tx
        .query_opt(&stmt, &[&name])
        .await?
        .as_ref()
        .map(target_from))
}

pub(super) async fn target_row(
    tx: &impl GenericClient,
    name: &str,
) -> Result<TargetRow, StoreError> {
    target_row_opt(tx, name, "")
        .await?
        .ok_or_else(|| StoreError::unknown_target(name))
}

/// The target row locked against concurrent writes (`FOR UPDATE`) or commits (`FOR SHARE`).
pub(super) async fn target_row_locked(
    tx: &impl GenericClient,
    name: &str,
    mode: &str,
) -> Result<TargetRow, StoreError> {
    target_row_opt(tx, name, &format!(" FOR {mode}"))
        .await?
        .ok_or_else(|| StoreError::unknown_target(name))
}

pub(super) async fn lookup_receipt(
    tx: &impl GenericClient,
    target_id: i64,
    target: &str,
    request_key: &str,
    submission_sha256: &str,
) -> Result<Option<Receipt>, StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT submission_sha256, receipt FROM attempts WHERE target_id = $1 AND request_key = $2",
        )
        .await?;
    let row = tx
        .query_opt(&stmt, &[&target_id, &request_key.as_bytes()])
        .await?
        .map(|r| (r.get(0), r.get(1)));
    shared::recovered(row, target, request_key, submission_sha256)
}

pub(super) async fn summary_counts(
    tx: &impl GenericClient,
    target_id: i64,
) -> Result<(u64, u64, u64), StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT \
             (SELECT count(*) FROM attempts WHERE target_id = $1 AND outcome = 'accepted'), \
             (SELECT count(*) FROM attempts WHERE target_id = $1 AND outcome = 'rejected'), \
             (SELECT count(*) FROM observations WHERE target_id = $1)",
        )
        .await?;
    let r = tx.query_one(&stmt, &[&target_id]).await?;
    Ok((u(&r, 0), u(&r, 1), u(&r, 2)))
}

pub(super) async fn write_snapshot(
    tx: &impl GenericClient,
    target_id: i64,
    revision: u64,
    content: &str,
    sha256: &str,
) -> Result<i64, StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO snapshots (target_id, revision, sha256, content) VALUES ($1, $2, $3, $4) \
             RETURNING id",
        )
        .await?;
    let r = tx
        .query_one(
            &stmt,
            &[&target_id, &i(revision), &sha256, &content.as_bytes()],
        )
        .await?;
    Ok(r.get(0))
}

pub(super) async fn read_snapshot(
    tx: &impl GenericClient,
    snapshot_id: i64,
) -> Result<(u64, String), StoreError> {
    let stmt = tx
        .prepare_cached("SELECT revision, sha256, content FROM snapshots WHERE id = $1")
        .await?;
    let r = tx.query_one(&stmt, &[&snapshot_id]).await?;
    let (sha, content): (String, Vec<u8>) = (r.get(1), r.get(2));
    let content = utf8(content, "snapshot")?;
    if sha256_hex(&content) != sha {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!("snapshot {snapshot_id} does not match its recorded SHA-256"),
        ));
    }
    Ok((u(&r, 0), content))
}

/// K6: writes one journal entry, its text in one `bytea` row.
pub(super) async fn insert_journal(
    tx: &impl GenericClient,
    target_id: i64,
    e: &shared::JournalRow<'_>,
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO journal (target_id, kind, revision, version, attempt_id, request_key, \
             sha256, edits, text) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .await?;
    let text = shared::joined_text(e.edits);
    tx.execute(
        &stmt,
        &[
            &target_id,
            &e.kind,
            &i(e.revision),
            &i(e.version),
            &e.attempt_id,
            &e.request_key.map(str::as_bytes),
            &e.sha256,
            &shared::encode_edits(e.edits),
            &text.as_bytes(),
        ],
    )
    .await?;
    Ok(())
}

/// K5: the target's serialization boundary, `pg_advisory_xact_lock` keyed by its name, held
/// until the transaction ends (waits up to the session's lock timeout).
pub(super) async fn lock_target(tx: &impl GenericClient, name: &str) -> Result<(), StoreError> {
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&target_lock_key(name)],
    )
    .await?;
    Ok(())
}

/// K4: records an attempt with its receipt JSON, stored byte for byte as returned.
pub(super) async fn insert_attempt(
    tx: &impl GenericClient,
    target_id: i64,
    submission_sha: &str,
    receipt: &Receipt,
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO attempts (attempt_id, target_id, request_key, submission_sha256, \
             outcome, revision, reason_codes, receipt) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &receipt.attempt_id,
            &target_id,
            &receipt.request_key.as_bytes(),
            &submission_sha,
            &receipt.outcome.as_str(),
            &i(receipt.revision),
            &serde_json::to_string(&receipt.reason_codes).unwrap_or_default(),
            &shared::receipt_json(receipt)?,
        ],
    )
    .await?;
    Ok(())
}

/// Edit shapes of the steps producing revisions `(from, to]`, oldest first.
pub(super) async fn load_steps(
    tx: &impl GenericClient,
    target_id: i64,
    from: u64,
    to: u64,
) -> Result<Vec<Vec<EditShape>>, StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT edits FROM journal WHERE target_id = $1 AND kind = 'edit' \
             AND revision > $2 AND revision <= $3 ORDER BY revision",
        )
        .await?;
    let rows = tx.query(&stmt, &[&target_id, &i(from), &i(to)]).await?;
    let steps = rows
        .iter()
        .map(|r| shared::decode_edits(r.get(0)))
        .collect::<Result<Vec<_>, _>>()?;
    if steps.len() as u64 != to - from {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!("journal is missing edits between revisions {from} and {to}"),
        ));
    }
    Ok(steps)
}

pub(super) async fn load_observation(
    tx: &impl GenericClient,
    target_id: i64,
    target: &str,
    id: &str,
) -> Result<ObservationRecord, StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT revision, kind, name, start_byte, end_byte, start_line, end_line, sha256 \
             FROM observations WHERE observation_id = $1 AND target_id = $2",
        )
        .await?;
    let r = tx
        .query_opt(&stmt, &[&id, &target_id])
        .await?
        .ok_or_else(|| shared::unknown_observation(target, id))?;
    observation_from(&r, id.to_owned(), 0)
}

/// An observation from `r`'s columns from `at` on: revision, kind, name, start and end byte,
/// start and end line, SHA-256.
pub(super) fn observation_from(
    r: &Row,
    observation_id: String,
    at: usize,
) -> Result<ObservationRecord, StoreError> {
    let name: Option<Vec<u8>> = r.get(at + 2);
    Ok(ObservationRecord {
        observation_id,
        revision: u(r, at),
        scope: ObservedScope {
            kind: utf8(r.get(at + 1), "observation kind")?,
            name: name.map(|n| utf8(n, "observation name")).transpose()?,
            start_byte: u(r, at + 3) as usize,
            end_byte: u(r, at + 4) as usize,
            start_line: u(r, at + 5) as usize,
            end_line: u(r, at + 6) as usize,
        },
        sha256: r.get(at + 7),
    })
}

/// Content of target `t` at `revision`: cached, or the latest snapshot at or before it (or a
/// cached earlier revision, whichever is newer) with later journal edits applied.
// Alike SQLite's content_at but for its async I/O; the decisions are `shared`'s.
pub(super) async fn content_at(
    tx: &impl GenericClient,
    cached: Option<&Cached>,
    t: &TargetRow,
    revision: u64,
) -> Result<String, StoreError> {
    let cached = shared::usable_cache(cached, t, revision);
    if let Some(c) = cached.filter(|c| c.revision == revision) {
        return Ok(c.content.to_string());
    }
    let stmt = tx
        .prepare_cached(
            "SELECT id, revision FROM snapshots WHERE target_id = $1 AND revision <= $2 \
             ORDER BY revision DESC, id DESC LIMIT 1",
        )
        .await?;
    let snap: Option<(i64, u64)> = tx
        .query_opt(&stmt, &[&t.id, &i(revision)])
        .await?
        .map(|r| (r.get(0), u(&r, 1)));
    let (at, content) = match shared::rebuild_from(&t.name, revision, snap, cached)? {
        shared::RebuildFrom::Cached(at, content) => (at, content),
        shared::RebuildFrom::Snapshot(id) => read_snapshot(tx, id).await?,
    };
    if at == revision {
        return Ok(content);
    }
    let stmt = tx
        .prepare_cached(
            "SELECT revision, sha256, edits, text FROM journal WHERE target_id = $1 \
             AND kind = 'edit' AND revision > $2 AND revision <= $3 ORDER BY revision",
        )
        .await?;
    let rows = tx.query(&stmt, &[&t.id, &i(at), &i(revision)]).await?;
    let edits = rows.into_iter().map(|r| {
        Ok(EditRow {
            revision: u(&r, 0),
            sha256: r.get(1),
            edits: r.get(2),
            text: utf8(r.get(3), "journal text")?,
        })
    });
    shared::rebuild(&t.name, at, content, revision, edits)
}

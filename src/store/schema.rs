//! Versioned schema migrations (tracked in `PRAGMA user_version`).
//!
//! Migration N brings the schema from version N-1 to N inside one `BEGIN IMMEDIATE`
//! transaction, so concurrent openers (several processes) apply each migration exactly once.
//! A database newer than this build refuses to open (`STORAGE`) rather than guess.

use rusqlite::{Connection, TransactionBehavior};

use super::{ErrorCode, StoreError};

/// Schema version this build writes.
pub const SCHEMA_VERSION: i64 = 4;

const MIGRATIONS: &[&str] = &[
    // 1: targets, content snapshots, journal, versions, observations, attempts, worker errors.
    r#"
    CREATE TABLE targets (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        language TEXT NOT NULL,
        incarnation TEXT NOT NULL,          -- new on every init: keys in-process content caches
        version INTEGER NOT NULL,
        revision INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        byte_len INTEGER NOT NULL,
        initial_sha256 TEXT NOT NULL,
        saved_revision INTEGER NOT NULL,
        edits_since_snapshot INTEGER NOT NULL,
        bytes_since_snapshot INTEGER NOT NULL
    );
    -- Full content at a revision, split into chunk rows (K7).
    CREATE TABLE snapshots (
        id INTEGER PRIMARY KEY,
        target_id INTEGER NOT NULL,
        revision INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        byte_len INTEGER NOT NULL,
        chunk_count INTEGER NOT NULL
    );
    CREATE INDEX snapshots_by_revision ON snapshots(target_id, revision);
    CREATE TABLE snapshot_chunks (
        snapshot_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (snapshot_id, seq)
    ) WITHOUT ROWID;
    -- The ordered journal (K6). entry_id is the replay cursor; AUTOINCREMENT never reuses one.
    -- edits: JSON [[start_byte, end_byte, new_len], ...] in pre-entry coordinates; the
    -- concatenated new texts live in journal_chunks.
    CREATE TABLE journal (
        entry_id INTEGER PRIMARY KEY AUTOINCREMENT,
        target_id INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('init', 'edit', 'save')),
        revision INTEGER NOT NULL,
        version INTEGER NOT NULL,
        attempt_id TEXT,
        request_key TEXT,
        sha256 TEXT NOT NULL,
        edits TEXT NOT NULL,
        text_len INTEGER NOT NULL,
        chunk_count INTEGER NOT NULL
    );
    CREATE INDEX journal_by_target ON journal(target_id, entry_id);
    -- An edit produces exactly one revision: it can never be journalled (or replayed) twice.
    CREATE UNIQUE INDEX journal_one_edit_per_revision ON journal(target_id, revision)
        WHERE kind = 'edit';
    CREATE TABLE journal_chunks (
        entry_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (entry_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE versions (
        target_id INTEGER NOT NULL,
        version INTEGER NOT NULL,
        revision INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        snapshot_id INTEGER NOT NULL,
        PRIMARY KEY (target_id, version)
    );
    CREATE TABLE observations (
        observation_id TEXT PRIMARY KEY,
        target_id INTEGER NOT NULL,
        revision INTEGER NOT NULL,
        kind TEXT NOT NULL,
        name TEXT,
        start_byte INTEGER NOT NULL,
        end_byte INTEGER NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        sha256 TEXT NOT NULL
    );
    CREATE INDEX observations_by_target ON observations(target_id);
    -- One row per attempt (accepted or rejected) with its serialized receipt (K4).
    CREATE TABLE attempts (
        attempt_id TEXT PRIMARY KEY,
        target_id INTEGER NOT NULL,
        request_key TEXT NOT NULL,
        submission_sha256 TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('accepted', 'rejected')),
        revision INTEGER NOT NULL,
        reason_codes TEXT NOT NULL,
        receipt TEXT NOT NULL,
        UNIQUE (target_id, request_key)
    );
    CREATE TABLE worker_errors (
        id INTEGER PRIMARY KEY,
        target_id INTEGER NOT NULL,
        code TEXT NOT NULL,
        message TEXT NOT NULL
    );
    CREATE INDEX worker_errors_by_target ON worker_errors(target_id);
    "#,
    // 2: journal text up to INLINE_TEXT_BYTES lives in the journal row itself (NULL: in
    // journal_chunks), so replay reads a page with one query.
    r#"
    ALTER TABLE journal ADD COLUMN inline_text BLOB;
    "#,
    // 3: the store's identity — a random id drawn once, when the schema is created, so a run
    // can tell its own database from another (never a secret).
    r#"
    CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
    "#,
    // 4: replica leases (R1): one row per lease, one per leased target pinned to the target's
    // incarnation (a re-init invalidates the lease) and the checkpoint's cursor.
    r#"
    CREATE TABLE replica_leases (
        lease_id TEXT PRIMARY KEY,
        integration TEXT NOT NULL,
        granted_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        released_at_ms INTEGER
    );
    CREATE TABLE replica_lease_targets (
        lease_id TEXT NOT NULL REFERENCES replica_leases(lease_id),
        target_id INTEGER NOT NULL,
        target_name TEXT NOT NULL,
        incarnation TEXT NOT NULL,
        checkpoint_cursor INTEGER NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (lease_id, target_id)
    );
    "#,
];

/// Brings `conn`'s schema to [`SCHEMA_VERSION`].
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    debug_assert_eq!(MIGRATIONS.len() as i64, SCHEMA_VERSION);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!(
                "database schema version {current} is newer than this build supports ({SCHEMA_VERSION}); use a newer patchdiff"
            ),
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}

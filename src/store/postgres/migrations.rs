//! PostgreSQL schema migrations, versioned in `schema_migrations` and applied under an
//! advisory lock so concurrent `connect`s apply each once.

use super::*;

/// Schema version this build writes (`schema_migrations`).
pub const PG_SCHEMA_VERSION: i32 = 2;
/// Advisory lock key serializing migrations across concurrent `connect`s.
const MIGRATION_LOCK_KEY: i64 = 0x7061_7463_6864_6966; // "patchdif"

const MIGRATIONS: &[&str] = &[
    // 1: targets, snapshots, journal, versions, observations, attempts, worker errors.
    r#"
    CREATE TABLE targets (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        language TEXT NOT NULL,
        incarnation TEXT NOT NULL,
        version BIGINT NOT NULL,
        revision BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        byte_len BIGINT NOT NULL,
        initial_sha256 TEXT NOT NULL,
        saved_revision BIGINT NOT NULL,
        edits_since_snapshot BIGINT NOT NULL,
        bytes_since_snapshot BIGINT NOT NULL
    );
    CREATE TABLE snapshots (
        id BIGSERIAL PRIMARY KEY,
        target_id BIGINT NOT NULL REFERENCES targets(id),
        revision BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        content BYTEA NOT NULL
    );
    CREATE INDEX snapshots_by_revision ON snapshots(target_id, revision);
    CREATE TABLE journal (
        entry_id BIGSERIAL PRIMARY KEY,
        target_id BIGINT NOT NULL REFERENCES targets(id),
        kind TEXT NOT NULL CHECK (kind IN ('init', 'edit', 'save')),
        revision BIGINT NOT NULL,
        version BIGINT NOT NULL,
        attempt_id TEXT,
        request_key BYTEA,
        sha256 TEXT NOT NULL,
        edits TEXT NOT NULL,
        text BYTEA NOT NULL
    );
    CREATE INDEX journal_by_target ON journal(target_id, entry_id);
    CREATE UNIQUE INDEX journal_one_edit_per_revision ON journal(target_id, revision)
        WHERE kind = 'edit';
    CREATE TABLE versions (
        target_id BIGINT NOT NULL REFERENCES targets(id),
        version BIGINT NOT NULL,
        revision BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        snapshot_id BIGINT NOT NULL REFERENCES snapshots(id),
        PRIMARY KEY (target_id, version)
    );
    CREATE TABLE observations (
        observation_id TEXT PRIMARY KEY,
        target_id BIGINT NOT NULL REFERENCES targets(id),
        revision BIGINT NOT NULL,
        kind BYTEA NOT NULL,
        name BYTEA,
        start_byte BIGINT NOT NULL,
        end_byte BIGINT NOT NULL,
        start_line BIGINT NOT NULL,
        end_line BIGINT NOT NULL,
        sha256 TEXT NOT NULL
    );
    CREATE INDEX observations_by_target ON observations(target_id);
    CREATE TABLE attempts (
        attempt_id TEXT PRIMARY KEY,
        target_id BIGINT NOT NULL REFERENCES targets(id),
        request_key BYTEA NOT NULL,
        submission_sha256 TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('accepted', 'rejected')),
        revision BIGINT NOT NULL,
        reason_codes TEXT NOT NULL,
        receipt TEXT NOT NULL,
        UNIQUE (target_id, request_key)
    );
    CREATE TABLE worker_errors (
        id BIGSERIAL PRIMARY KEY,
        target_id BIGINT NOT NULL REFERENCES targets(id),
        code BYTEA NOT NULL,
        message BYTEA NOT NULL
    );
    CREATE INDEX worker_errors_by_target ON worker_errors(target_id);
    "#,
    // 2: the store's identity — a random id drawn once, when the schema is created, so a run
    // can tell its own database from another (never a secret).
    r#"
    CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    INSERT INTO store_meta (key, value)
        VALUES ('store_id', replace(gen_random_uuid()::text, '-', ''));
    "#,
];

impl PostgresStore {
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version INTEGER PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
        )
        .await?;
        let current: i32 = tx
            .query_one(
                "SELECT coalesce(max(version), 0) FROM schema_migrations",
                &[],
            )
            .await?
            .get(0);
        if current > PG_SCHEMA_VERSION {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!(
                    "database schema version {current} is newer than this build supports ({PG_SCHEMA_VERSION}); use a newer patchdiff"
                ),
            ));
        }
        for (n, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            tx.batch_execute(sql).await?;
            tx.execute(
                "INSERT INTO schema_migrations (version) VALUES ($1)",
                &[&(n as i32 + 1)],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

}

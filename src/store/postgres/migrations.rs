//! PostgreSQL schema migrations, versioned in `schema_migrations` and applied under an
//! advisory lock so concurrent `connect`s apply each once.

use super::*;

/// Schema version this build writes (`schema_migrations`).
pub const PG_SCHEMA_VERSION: i32 = 6;
/// Advisory lock key serializing migrations across concurrent `connect`s.
pub(super) const MIGRATION_LOCK_KEY: i64 = 0x7061_7463_6864_6966; // "patchdif"

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
    // 3: a submission's boundary and its commit as server-side functions, so each is one
    // round trip (`pipeline.rs`); every check they make is the one the client made before, with
    // the same errors (raised as SQLSTATE `PD001`/`PD002`, mapped back in `pipeline.rs`).
    r#"
    CREATE FUNCTION patchdiff_enter_submission(p_name TEXT, p_request_key BYTEA, p_lock_key BIGINT)
    RETURNS TABLE (target_id BIGINT, submission_sha256 TEXT, receipt TEXT, locked BOOLEAN)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
        tid BIGINT;
    BEGIN
        SELECT t.id INTO tid FROM targets t WHERE t.name = p_name;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        -- K4: an identical retry is answered before, and without, the boundary.
        RETURN QUERY SELECT tid, a.submission_sha256, a.receipt, false FROM attempts a
            WHERE a.target_id = tid AND a.request_key = p_request_key;
        IF FOUND THEN
            RETURN;
        END IF;
        -- K5: the target's boundary, held until the transaction ends.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        -- Another writer may have used the key before we took the boundary (a new statement:
        -- a new snapshot, which sees every commit made while we waited).
        RETURN QUERY SELECT tid, a.submission_sha256, a.receipt, true FROM attempts a
            WHERE a.target_id = tid AND a.request_key = p_request_key;
        IF FOUND THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT tid, NULL::TEXT, NULL::TEXT, true;
    END
    $fn$;

    CREATE FUNCTION patchdiff_commit_attempt(
        p_target_id BIGINT, p_incarnation TEXT, p_revision BIGINT, p_version BIGINT,
        p_edits_since BIGINT, p_bytes_since BIGINT,
        p_attempt_id TEXT, p_request_key BYTEA, p_submission_sha256 TEXT, p_outcome TEXT,
        p_attempt_revision BIGINT, p_reason_codes TEXT, p_receipt TEXT,
        p_sha256 TEXT, p_byte_len BIGINT, p_new_edits_since BIGINT, p_new_bytes_since BIGINT,
        p_edits TEXT, p_text BYTEA, p_snapshot BYTEA)
    RETURNS VOID
    LANGUAGE plpgsql AS $fn$
    DECLARE
        r RECORD;
    BEGIN
        SELECT incarnation, revision, version, edits_since_snapshot, bytes_since_snapshot
            INTO r FROM targets WHERE id = p_target_id FOR UPDATE;
        IF NOT FOUND OR r.incarnation <> p_incarnation OR r.revision <> p_revision THEN
            RAISE EXCEPTION 'target moved while the submission was being decided'
                USING ERRCODE = 'PD001';
        END IF;
        IF p_sha256 IS NOT NULL THEN
            IF r.version <> p_version OR r.edits_since_snapshot <> p_edits_since
                OR r.bytes_since_snapshot <> p_bytes_since THEN
                -- A save between the plan and the commit: the client decides again.
                RAISE EXCEPTION 'target saved while the submission was being decided'
                    USING ERRCODE = 'PD002';
            END IF;
            INSERT INTO journal (target_id, kind, revision, version, attempt_id, request_key,
                sha256, edits, text)
                VALUES (p_target_id, 'edit', p_revision + 1, p_version, p_attempt_id,
                    p_request_key, p_sha256, p_edits, p_text);
            IF p_snapshot IS NOT NULL THEN
                INSERT INTO snapshots (target_id, revision, sha256, content)
                    VALUES (p_target_id, p_revision + 1, p_sha256, p_snapshot);
            END IF;
            UPDATE targets SET revision = p_revision + 1, sha256 = p_sha256,
                byte_len = p_byte_len, edits_since_snapshot = p_new_edits_since,
                bytes_since_snapshot = p_new_bytes_since
                WHERE id = p_target_id;
        END IF;
        INSERT INTO attempts (attempt_id, target_id, request_key, submission_sha256, outcome,
            revision, reason_codes, receipt)
            VALUES (p_attempt_id, p_target_id, p_request_key, p_submission_sha256, p_outcome,
                p_attempt_revision, p_reason_codes, p_receipt);
    END
    $fn$;
    "#,
    // 4: a submission the client could plan from what it already holds (its last view of the
    // target's row and content) as one round trip (`one_trip.rs`): recovery, the boundary,
    // recovery again, the check that the row is still the one the plan was made from, and
    // migration 3's commit. Nothing is written unless the status is `committed`.
    r#"
    CREATE FUNCTION patchdiff_submit_one(
        p_name TEXT, p_lock_key BIGINT,
        p_target_id BIGINT, p_incarnation TEXT, p_revision BIGINT, p_version BIGINT,
        p_edits_since BIGINT, p_bytes_since BIGINT,
        p_attempt_id TEXT, p_request_key BYTEA, p_submission_sha256 TEXT, p_outcome TEXT,
        p_attempt_revision BIGINT, p_reason_codes TEXT, p_receipt TEXT,
        p_sha256 TEXT, p_byte_len BIGINT, p_new_edits_since BIGINT, p_new_bytes_since BIGINT,
        p_edits TEXT, p_text BYTEA, p_snapshot BYTEA)
    RETURNS TABLE (status TEXT, submission_sha256 TEXT, receipt TEXT)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
        tid BIGINT;
        r RECORD;
    BEGIN
        SELECT t.id INTO tid FROM targets t WHERE t.name = p_name;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'unknown'::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        -- K4: an identical retry is answered before, and without, the boundary.
        RETURN QUERY SELECT 'recovered'::TEXT, a.submission_sha256, a.receipt FROM attempts a
            WHERE a.target_id = tid AND a.request_key = p_request_key;
        IF FOUND THEN
            RETURN;
        END IF;
        IF tid <> p_target_id THEN
            RETURN QUERY SELECT 'stale'::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        -- K5: the target's boundary, held until the transaction ends.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        RETURN QUERY SELECT 'recovered'::TEXT, a.submission_sha256, a.receipt FROM attempts a
            WHERE a.target_id = tid AND a.request_key = p_request_key;
        IF FOUND THEN
            RETURN;
        END IF;
        SELECT incarnation, revision, version, edits_since_snapshot, bytes_since_snapshot
            INTO r FROM targets WHERE id = tid FOR UPDATE;
        IF r.incarnation <> p_incarnation OR r.revision <> p_revision
            OR r.version <> p_version OR r.edits_since_snapshot <> p_edits_since
            OR r.bytes_since_snapshot <> p_bytes_since THEN
            -- Another writer moved the target since the client's view: plan again.
            RETURN QUERY SELECT 'stale'::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        PERFORM patchdiff_commit_attempt(p_target_id, p_incarnation, p_revision, p_version,
            p_edits_since, p_bytes_since, p_attempt_id, p_request_key, p_submission_sha256,
            p_outcome, p_attempt_revision, p_reason_codes, p_receipt, p_sha256, p_byte_len,
            p_new_edits_since, p_new_bytes_since, p_edits, p_text, p_snapshot);
        RETURN QUERY SELECT 'committed'::TEXT, NULL::TEXT, NULL::TEXT;
    END
    $fn$;
    "#,
    // 5: replica leases (R1): one row per lease, one per leased target pinned to the target's
    // incarnation (a re-init invalidates the lease) and the checkpoint's cursor.
    r#"
    CREATE TABLE replica_leases (
        lease_id TEXT PRIMARY KEY,
        integration TEXT NOT NULL,
        granted_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        released_at_ms BIGINT
    );
    CREATE TABLE replica_lease_targets (
        lease_id TEXT NOT NULL REFERENCES replica_leases(lease_id),
        target_id BIGINT NOT NULL,
        target_name TEXT NOT NULL,
        incarnation TEXT NOT NULL,
        checkpoint_cursor BIGINT NOT NULL,
        position BIGINT NOT NULL,
        PRIMARY KEY (lease_id, target_id)
    );
    "#,
    // 6: the one-trip submission waits for nothing, so it can run as one statement in its own
    // implicit transaction (no BEGIN, session limits or COMMIT messages: `one_trip.rs`): a
    // target whose boundary or row another writer holds is `stale`, and the submission takes
    // the two-trip path, which waits under its own limits. Otherwise as migration 4.
    r#"
    CREATE OR REPLACE FUNCTION patchdiff_submit_one(
        p_name TEXT, p_lock_key BIGINT,
        p_target_id BIGINT, p_incarnation TEXT, p_revision BIGINT, p_version BIGINT,
        p_edits_since BIGINT, p_bytes_since BIGINT,
        p_attempt_id TEXT, p_request_key BYTEA, p_submission_sha256 TEXT, p_outcome TEXT,
        p_attempt_revision BIGINT, p_reason_codes TEXT, p_receipt TEXT,
        p_sha256 TEXT, p_byte_len BIGINT, p_new_edits_since BIGINT, p_new_bytes_since BIGINT,
        p_edits TEXT, p_text BYTEA, p_snapshot BYTEA)
    RETURNS TABLE (status TEXT, submission_sha256 TEXT, receipt TEXT)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
        tid BIGINT;
        r RECORD;
    BEGIN
        SELECT t.id INTO tid FROM targets t WHERE t.name = p_name;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'unknown'::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        -- K4: an identical retry is answered before, and without, the boundary.
        RETURN QUERY SELECT 'recovered'::TEXT, a.submission_sha256, a.receipt FROM attempts a
            WHERE a.target_id = tid AND a.request_key = p_request_key;
        IF FOUND THEN
            RETURN;
        END IF;
        -- K5: the target's boundary, held until the transaction ends; held by another
        -- writer, the row is about to move: plan again on the path that waits.
        IF tid <> p_target_id OR NOT pg_try_advisory_xact_lock(p_lock_key) THEN
            RETURN QUERY SELECT 'stale'::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        RETURN QUERY SELECT 'recovered'::TEXT, a.submission_sha256, a.receipt FROM attempts a
            WHERE a.target_id = tid AND a.request_key = p_request_key;
        IF FOUND THEN
            RETURN;
        END IF;
        SELECT incarnation, revision, version, edits_since_snapshot, bytes_since_snapshot
            INTO r FROM targets WHERE id = tid FOR UPDATE SKIP LOCKED;
        IF NOT FOUND OR r.incarnation <> p_incarnation OR r.revision <> p_revision
            OR r.version <> p_version OR r.edits_since_snapshot <> p_edits_since
            OR r.bytes_since_snapshot <> p_bytes_since THEN
            -- Another writer holds or moved the target since the client's view: plan again.
            RETURN QUERY SELECT 'stale'::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        PERFORM patchdiff_commit_attempt(p_target_id, p_incarnation, p_revision, p_version,
            p_edits_since, p_bytes_since, p_attempt_id, p_request_key, p_submission_sha256,
            p_outcome, p_attempt_revision, p_reason_codes, p_receipt, p_sha256, p_byte_len,
            p_new_edits_since, p_new_bytes_since, p_edits, p_text, p_snapshot);
        RETURN QUERY SELECT 'committed'::TEXT, NULL::TEXT, NULL::TEXT;
    END
    $fn$;
    "#,
];

impl PostgresStore {
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
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

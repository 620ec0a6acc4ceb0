//! PostgreSQL implementation of [`EditStore`] (S1; K3–K8) for many agents on many
//! machines sharing targets.
//!
//! Driver and pool: `tokio-postgres` + `deadpool-postgres` (at most [`POOL_MAX_CONNECTIONS`]
//! connections, TLS not configured: use a loopback or otherwise trusted network). The trait is
//! synchronous; a `PostgresStore` owns a small tokio runtime (2 workers) that drives its
//! connections, and each method runs its future to completion on the calling thread with that
//! runtime entered, so it may be called from plain threads and `spawn_blocking` threads alike
//! (from inside an async task it works but blocks that task's worker thread: don't).
//!
//! K5, one serialization boundary per target across processes and machines: a submission's
//! transaction takes `pg_advisory_xact_lock(key(target))` and holds it from planning through
//! validation to commit; `init_target` takes the same lock. Saves, observations and the commit
//! itself lock only the target's row (`FOR UPDATE`/`FOR SHARE`) for a short write, so nothing
//! waits for another target, and reads never wait at all. A killed writer's connection closes,
//! its transaction rolls back and the lock is released by the server.
//!
//! Rows are TOAST-friendly (content and journal text as `bytea`, one row each; no K7 chunking),
//! revisions are `BIGINT`, and each attempt's receipt is stored as the exact JSON text returned
//! (K4). Content is rebuilt from the latest snapshot plus journal edits exactly as
//! [`super::SqliteStore`] does, with the same in-process cache keyed by (incarnation,
//! revision). Migrations are versioned in `schema_migrations` and applied under an advisory
//! lock, so concurrent `connect`s apply each once.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Transaction};
use tokio_postgres::{IsolationLevel, NoTls, Row, error::SqlState};

use super::shared::{
    self, Cached, ContentCache, EditRow, PlanRead, ReplayRow, TARGET_COLS, TargetRow, i,
    submission_sha256, utf8,
};
use super::*;
use crate::kernel::{EditShape, ObservationRecord, sha256_hex, validate_submission};

/// Connections the pool opens at most per `PostgresStore` (per process): 16.
pub const POOL_MAX_CONNECTIONS: usize = 16;
/// How long connecting to the server may take before `connect` fails: 10 s. Also how long a
/// call waits for a free pooled connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

// Every call to the server has a deadline, derived from the documented
// ceilings. The numbers, and why:
//
// - a statement that waits for no lock (reads, inserts, the commit) needs at most
//   [`STATEMENT_BUDGET`] (5 s: whole-content reads of the largest target, 32 MiB, take well
//   under a second on the networks this backend is for);
// - a write waits for its target's boundary (`pg_advisory_xact_lock`) or a row lock at most
//   `lock_timeout` = the busy timeout ([`BUSY_TIMEOUT_MS`], 10 s by default; MCP processes set
//   it above the outer discovery allowance, W6: 28 s by default, so a submission queued behind
//   another's validation waits for it);
// - a write transaction is idle on the server only while its caller validates the planned
//   content under the boundary, which W6 bounds by the outer discovery allowance, itself below
//   the busy timeout.
//
// Hence, on the server (so a frozen *client* releases what it holds):
//   `statement_timeout` = STATEMENT_BUDGET for reads, lock_timeout + STATEMENT_BUDGET in writes
//   (a lock wait ends as a lock wait, `LOCK_NOT_AVAILABLE`, before the statement timeout);
//   `idle_in_transaction_session_timeout` = lock_timeout + STATEMENT_BUDGET;
// and on the client (so a frozen *server* — SIGSTOP, a hung host — cannot hang a call; a
// stopped server's kernel still acknowledges TCP, so only a client-side deadline sees it):
//   read call  ≤ CONNECT_TIMEOUT + STATEMENT_BUDGET                       (15 s by default);
//   write call ≤ CONNECT_TIMEOUT + 2 × lock_timeout + STATEMENT_BUDGET    (35 s by default:
//                connection, boundary wait, validation under it, statements and commit);
// and TCP keepalive probes after [`KEEPALIVE_IDLE`] of silence, every [`KEEPALIVE_INTERVAL`],
// [`KEEPALIVE_RETRIES`] times, so a vanished host is noticed within 10 s of silence.

/// The longest one statement that waits for no lock may run: 5 s.
pub const STATEMENT_BUDGET: Duration = Duration::from_secs(5);
/// TCP keepalive: first probe after 5 s of silence.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// TCP keepalive: probe interval, 1 s.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// TCP keepalive: unanswered probes before the connection is dropped, 5.
pub const KEEPALIVE_RETRIES: u32 = 5;

/// Which deadline a call runs under (see the derivation above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// Waits for no lock: `CONNECT_TIMEOUT + STATEMENT_BUDGET`.
    Read,
    /// May wait for a lock and hold it through validation:
    /// `CONNECT_TIMEOUT + 2 × lock_timeout + STATEMENT_BUDGET`.
    Write,
}
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

/// PostgreSQL-backed [`EditStore`]. `Send + Sync`; share it behind an `Arc`.
pub struct PostgresStore {
    /// Drives the pool's connections; shut down in the background on drop (never blocks).
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    /// The URL with its password replaced by `***` (for errors, manifests and evidence).
    redacted_url: String,
    cache: ContentCache,
    /// How long a write waits for a target's boundary or row lock (milliseconds).
    lock_timeout_ms: AtomicU64,
}

fn u(r: &Row, idx: usize) -> u64 {
    r.get::<_, i64>(idx) as u64
}

fn target_from(r: &Row) -> TargetRow {
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
fn target_lock_key(name: &str) -> i64 {
    let digest = sha256_hex(format!("patchdiff-target:{name}"));
    i64::from_str_radix(&digest[..15], 16).unwrap_or(0)
}

async fn target_row_opt(
    tx: &Transaction<'_>,
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

async fn target_row(tx: &Transaction<'_>, name: &str) -> Result<TargetRow, StoreError> {
    target_row_opt(tx, name, "")
        .await?
        .ok_or_else(|| StoreError::unknown_target(name))
}

/// The target row locked against concurrent writes (`FOR UPDATE`) or commits (`FOR SHARE`).
async fn target_row_locked(
    tx: &Transaction<'_>,
    name: &str,
    mode: &str,
) -> Result<TargetRow, StoreError> {
    target_row_opt(tx, name, &format!(" FOR {mode}"))
        .await?
        .ok_or_else(|| StoreError::unknown_target(name))
}

async fn lookup_receipt(
    tx: &Transaction<'_>,
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

async fn summary_counts(
    tx: &Transaction<'_>,
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

async fn write_snapshot(
    tx: &Transaction<'_>,
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

async fn read_snapshot(
    tx: &Transaction<'_>,
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
async fn insert_journal(
    tx: &Transaction<'_>,
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
async fn lock_target(tx: &Transaction<'_>, name: &str) -> Result<(), StoreError> {
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&target_lock_key(name)],
    )
    .await?;
    Ok(())
}

/// K4: records an attempt with its receipt JSON, stored byte for byte as returned.
async fn insert_attempt(
    tx: &Transaction<'_>,
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
async fn load_steps(
    tx: &Transaction<'_>,
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

async fn load_observation(
    tx: &Transaction<'_>,
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
    let name: Option<Vec<u8>> = r.get(2);
    Ok(ObservationRecord {
        observation_id: id.to_owned(),
        revision: u(&r, 0),
        scope: ObservedScope {
            kind: utf8(r.get(1), "observation kind")?,
            name: name.map(|n| utf8(n, "observation name")).transpose()?,
            start_byte: u(&r, 3) as usize,
            end_byte: u(&r, 4) as usize,
            start_line: u(&r, 5) as usize,
            end_line: u(&r, 6) as usize,
        },
        sha256: r.get(7),
    })
}

/// Content of target `t` at `revision`: cached, or the latest snapshot at or before it (or a
/// cached earlier revision, whichever is newer) with later journal edits applied.
// Alike SQLite's content_at but for its async I/O; the decisions are `shared`'s.
async fn content_at(
    tx: &Transaction<'_>,
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

impl PostgresStore {
    /// Connects to the PostgreSQL database at `url` (`postgres://` or `postgresql://`, or any
    /// form `tokio-postgres` accepts), checks the connection within [`CONNECT_TIMEOUT`] and
    /// applies pending migrations (`schema_migrations`, under an advisory lock: concurrent
    /// connects are safe and idempotent).
    ///
    /// Errors: `STORAGE` naming the URL with its password redacted (unparseable URL, server
    /// unreachable, authentication refused, schema newer than this build).
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let redacted_url = redact_database_url(url);
        let ctx = format!("connecting to PostgreSQL at {redacted_url}");
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| {
            StoreError::new(
                ErrorCode::Storage,
                format!(
                    "{ctx}: not a PostgreSQL URL ({e}); use postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
                ),
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // Session defaults on the server and TCP keepalive (see the
        // derivation at `STATEMENT_BUDGET`); writes set their own per transaction.
        let mut options = config.get_options().unwrap_or_default().to_owned();
        options.push_str(&format!(
            " -c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            STATEMENT_BUDGET.as_millis(),
            u128::from(BUSY_TIMEOUT_MS) + STATEMENT_BUDGET.as_millis()
        ));
        config
            .options(options.trim_start())
            .keepalives(true)
            .keepalives_idle(KEEPALIVE_IDLE)
            .keepalives_interval(KEEPALIVE_INTERVAL)
            .keepalives_retries(KEEPALIVE_RETRIES);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("patchdiff-pg")
            .enable_all()
            .build()
            .map_err(|e| StoreError::storage(&ctx, e))?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = {
            let _entered = runtime.enter();
            Pool::builder(manager)
                .max_size(POOL_MAX_CONNECTIONS)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .create_timeout(Some(CONNECT_TIMEOUT))
                .wait_timeout(Some(CONNECT_TIMEOUT))
                .recycle_timeout(Some(STATEMENT_BUDGET))
                .build()
                .map_err(|e| StoreError::storage(&ctx, e))?
        };
        let store = Self {
            runtime: Some(runtime),
            pool,
            redacted_url,
            cache: ContentCache::default(),
            lock_timeout_ms: BUSY_TIMEOUT_MS.into(),
        };
        store
            .run(Call::Write, store.migrate())
            .map_err(|e| StoreError::new(e.code, format!("{ctx}: {}", e.message)))?;
        Ok(store)
    }

    /// The URL this store connected to, password replaced by `***`.
    pub fn redacted_url(&self) -> &str {
        &self.redacted_url
    }

    /// Runs `fut` to completion on the calling thread with the store's runtime entered (its
    /// workers drive the connections), within the deadline of its kind of [`Call`].
    /// Past it: `STORAGE` saying the server did not answer in time; the transaction is
    /// abandoned (the server rolls it back, or commits it whole if its `COMMIT` had already
    /// arrived — never half), so a retry with the same request key is always safe.
    fn run<T>(
        &self,
        call: Call,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let runtime = self.runtime.as_ref().expect("runtime lives until drop");
        let _entered = runtime.enter();
        let deadline = self.deadline(call);
        futures::executor::block_on(async {
            match tokio::time::timeout(deadline, fut).await {
                Ok(result) => result,
                Err(_) => Err(StoreError::new(
                    ErrorCode::Storage,
                    format!(
                        "PostgreSQL at {} did not answer within {} ms (the {} deadline: connect \
                         {} ms + {}); nothing was acknowledged — retry the same request: an edit \
                         that did commit is returned by its request key",
                        self.redacted_url,
                        deadline.as_millis(),
                        match call {
                            Call::Read => "read",
                            Call::Write => "write",
                        },
                        CONNECT_TIMEOUT.as_millis(),
                        match call {
                            Call::Read => format!("statement {} ms", STATEMENT_BUDGET.as_millis()),
                            Call::Write => format!(
                                "2 × lock wait {} ms + statement {} ms",
                                self.lock_timeout(),
                                STATEMENT_BUDGET.as_millis()
                            ),
                        }
                    ),
                )),
            }
        })
    }

    /// The client-side deadline of a [`Call`] (derivation at [`STATEMENT_BUDGET`]).
    fn deadline(&self, call: Call) -> Duration {
        match call {
            Call::Read => CONNECT_TIMEOUT + STATEMENT_BUDGET,
            Call::Write => {
                CONNECT_TIMEOUT + 2 * Duration::from_millis(self.lock_timeout()) + STATEMENT_BUDGET
            }
        }
    }

    async fn client(&self) -> Result<Object, StoreError> {
        Ok(self.pool.get().await?)
    }

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

    /// Sets how long a write waits for its target's boundary (another submission of the same
    /// target validating) or row lock (default [`BUSY_TIMEOUT_MS`]); see
    /// [`super::SqliteStore::set_busy_timeout`]. Clamped to `i32::MAX` ms (PostgreSQL's limit).
    pub fn set_busy_timeout(&self, timeout: Duration) {
        let ms = timeout.as_millis().min(i32::MAX as u128) as u64;
        self.lock_timeout_ms.store(ms, Ordering::Relaxed);
    }

    fn lock_timeout(&self) -> u64 {
        self.lock_timeout_ms.load(Ordering::Relaxed).max(1)
    }

    /// A write transaction whose lock waits end after the busy timeout.
    async fn write_tx<'c>(&self, client: &'c mut Object) -> Result<Transaction<'c>, StoreError> {
        let tx = client.transaction().await?;
        // A lock wait ends as a lock wait, before the statement timeout; the
        // transaction idles only while its caller validates (≤ the lock wait, W6).
        let lock = self.lock_timeout();
        let bound = u128::from(lock) + STATEMENT_BUDGET.as_millis();
        tx.batch_execute(&format!(
            "SET LOCAL lock_timeout = {lock}; SET LOCAL statement_timeout = {bound}; \
             SET LOCAL idle_in_transaction_session_timeout = {bound}"
        ))
        .await?;
        Ok(tx)
    }

    /// A read-only transaction on one consistent snapshot (never waits for a writer).
    async fn read_tx<'c>(client: &'c mut Object) -> Result<Transaction<'c>, StoreError> {
        Ok(client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?)
    }

    /// `STORAGE` naming the busy target when a lock wait ran out, else the error as is.
    fn busy(&self, name: &str, e: StoreError) -> StoreError {
        if e.message.contains(SqlState::LOCK_NOT_AVAILABLE.code()) {
            StoreError::new(
                ErrorCode::Storage,
                format!(
                    "target {name} stayed busy for {} ms (another submission of it is being validated); nothing was changed, retry the same request",
                    self.lock_timeout()
                ),
            )
        } else {
            e
        }
    }

    async fn current_content(
        &self,
        tx: &Transaction<'_>,
        t: &TargetRow,
    ) -> Result<Arc<str>, StoreError> {
        let cached = self.cache.get(t);
        if let Some(c) = cached.as_ref().filter(|c| c.revision == t.revision) {
            return Ok(c.content.clone());
        }
        let content: Arc<str> = content_at(tx, cached.as_ref(), t, t.revision).await?.into();
        self.cache
            .remember(t.id, &t.incarnation, t.revision, content.clone());
        Ok(content)
    }

    async fn recover(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
    ) -> Result<Option<Receipt>, StoreError> {
        let mut client = self.client().await?;
        let tx = Self::read_tx(&mut client).await?;
        let t = target_row(&tx, name).await?;
        lookup_receipt(&tx, t.id, name, &submission.request_key, submission_sha).await
    }

    /// K3: everything a plan is made from, read inside the target's boundary.
    async fn plan_read(
        &self,
        tx: &Transaction<'_>,
        name: &str,
        submission: &Submission,
    ) -> Result<PlanRead, StoreError> {
        let t = target_row(tx, name).await?;
        let base = submission.base_revision;
        shared::check_base(name, base, t.revision)?;
        let mut observations = HashMap::new();
        for id in shared::observation_ids(submission) {
            let o = load_observation(tx, t.id, name, id).await?;
            observations.insert(id.to_owned(), o);
        }
        let steps_from = shared::steps_from(&observations, base);
        let steps = load_steps(tx, t.id, steps_from, t.revision).await?;
        let current = self.current_content(tx, &t).await?;
        let base_content = if base == t.revision {
            None
        } else {
            Some(content_at(tx, self.cache.get(&t).as_ref(), &t, base).await?)
        };
        // The read SQLite's plan makes too, here inside the submission's transaction.
        Ok(PlanRead {
            target: t,
            observations,
            steps_from,
            steps,
            current,
            base_content,
        })
    }

    /// K3–K5, W7: one submission inside its target's boundary: recovery again under the lock,
    /// planning, validation, and the commit of the decided attempt.
    async fn submit_locked(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        strict: bool,
        validator: Validator<'_>,
    ) -> Result<Receipt, StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        lock_target(&tx, name).await?;
        let t = target_row(&tx, name).await?;
        // Another writer may have used the key before we took the boundary.
        if let Some(r) =
            lookup_receipt(&tx, t.id, name, &submission.request_key, submission_sha).await?
        {
            return Ok(r);
        }
        let read = self.plan_read(&tx, name, submission).await?;
        let plan = read.plan(name, submission, strict);
        let (plan, warnings) =
            shared::decide_validation(plan, &read.target.language, &read.current, validator)?;
        let t = target_row_locked(&tx, name, "UPDATE").await?;
        if t.incarnation != read.target.incarnation || t.revision != read.target.revision {
            // Only a writer ignoring the boundary could move the target: refuse, record nothing.
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!(
                    "target {name} moved while this submission was being decided; nothing was recorded, read the target and submit again"
                ),
            ));
        }
        let (receipt, applied) = shared::decided_receipt(&t, submission, plan, warnings);
        if let Some(a) = &applied {
            self.apply_edit(&tx, &t, a).await?;
        }
        insert_attempt(&tx, t.id, submission_sha, &receipt).await?;
        tx.commit().await?;
        if let Some(a) = applied {
            self.cache
                .remember(t.id, &t.incarnation, a.revision, a.new_content.into());
        }
        Ok(receipt)
    }

    /// K3: journals an accepted edit, snapshots when due and moves the target row.
    async fn apply_edit(
        &self,
        tx: &Transaction<'_>,
        t: &TargetRow,
        a: &shared::Applied,
    ) -> Result<(), StoreError> {
        insert_journal(tx, t.id, &shared::JournalRow::edit(t, a)).await?;
        let row = t.after_edit(a);
        if row.snapshot {
            write_snapshot(tx, t.id, a.revision, &a.new_content, &a.sha256).await?;
        }
        let stmt = tx
            .prepare_cached(
                "UPDATE targets SET revision = $2, sha256 = $3, byte_len = $4, \
                 edits_since_snapshot = $5, bytes_since_snapshot = $6 WHERE id = $1",
            )
            .await?;
        tx.execute(
            &stmt,
            &[
                &t.id,
                &i(a.revision),
                &a.sha256,
                &(a.new_content.len() as i64),
                &i(row.since_edits),
                &i(row.since_bytes),
            ],
        )
        .await?;
        Ok(())
    }

    async fn init_async(
        &self,
        name: &str,
        language: &str,
        text: &str,
        actual: &str,
        reset: bool,
    ) -> Result<(i64, String), StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        // The same boundary as submissions: a re-init never lands inside a submission.
        lock_target(&tx, name).await?;
        let incarnation = uuid::Uuid::new_v4().to_string();
        let byte_len = text.len() as i64;
        let id = match target_row_opt(&tx, name, " FOR UPDATE").await? {
            Some(t) => {
                t.check_fresh(summary_counts(&tx, t.id).await?, reset)?;
                for sql in [
                    "DELETE FROM versions WHERE target_id = $1",
                    "DELETE FROM snapshots WHERE target_id = $1",
                    "DELETE FROM journal WHERE target_id = $1",
                    "DELETE FROM observations WHERE target_id = $1",
                    "DELETE FROM attempts WHERE target_id = $1",
                    "DELETE FROM worker_errors WHERE target_id = $1",
                ] {
                    tx.execute(sql, &[&t.id]).await?;
                }
                tx.execute(
                    "UPDATE targets SET language = $2, incarnation = $3, version = 0, \
                     revision = 0, sha256 = $4, byte_len = $5, initial_sha256 = $4, \
                     saved_revision = 0, edits_since_snapshot = 0, bytes_since_snapshot = 0 \
                     WHERE id = $1",
                    &[&t.id, &language, &incarnation, &actual, &byte_len],
                )
                .await?;
                t.id
            }
            None => tx
                .query_one(
                    "INSERT INTO targets (name, language, incarnation, version, revision, \
                     sha256, byte_len, initial_sha256, saved_revision, edits_since_snapshot, \
                     bytes_since_snapshot) VALUES ($1, $2, $3, 0, 0, $4, $5, $4, 0, 0, 0) \
                     RETURNING id",
                    &[&name, &language, &incarnation, &actual, &byte_len],
                )
                .await?
                .get(0),
        };
        let snap = write_snapshot(&tx, id, 0, text, actual).await?;
        tx.execute(
            "INSERT INTO versions (target_id, version, revision, sha256, snapshot_id) \
             VALUES ($1, 0, 0, $2, $3)",
            &[&id, &actual, &snap],
        )
        .await?;
        insert_journal(&tx, id, &shared::JournalRow::init(actual)).await?;
        tx.commit().await?;
        Ok((id, incarnation))
    }

    async fn read_version(
        tx: &Transaction<'_>,
        t: &TargetRow,
        version: u64,
    ) -> Result<SavedContent, StoreError> {
        let stmt = tx
            .prepare_cached(
                "SELECT revision, sha256, snapshot_id FROM versions WHERE target_id = $1 AND version = $2",
            )
            .await?;
        let Some(r) = tx.query_opt(&stmt, &[&t.id, &i(version)]).await? else {
            return Err(shared::no_such_version(&t.name, version, t.version));
        };
        let (_, content) = read_snapshot(tx, r.get(2)).await?;
        Ok(SavedContent {
            target: t.name.clone(),
            version,
            revision: u(&r, 0),
            sha256: r.get(1),
            content,
        })
    }

    async fn save_async(&self, name: &str) -> Result<SaveResult, StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        let t = target_row_locked(&tx, name, "UPDATE").await?;
        let existing: Option<i64> = tx
            .query_opt(
                "SELECT id FROM snapshots WHERE target_id = $1 AND revision = $2 \
                 ORDER BY id DESC LIMIT 1",
                &[&t.id, &i(t.revision)],
            )
            .await?
            .map(|r| r.get(0));
        let (snapshot_id, fresh) = match existing {
            Some(id) => (id, false),
            None => {
                let content = self.current_content(&tx, &t).await?;
                (
                    write_snapshot(&tx, t.id, t.revision, &content, &t.sha256).await?,
                    true,
                )
            }
        };
        let version = t.version + 1;
        tx.execute(
            "INSERT INTO versions (target_id, version, revision, sha256, snapshot_id) \
             VALUES ($1, $2, $3, $4, $5)",
            &[&t.id, &i(version), &i(t.revision), &t.sha256, &snapshot_id],
        )
        .await?;
        insert_journal(&tx, t.id, &shared::JournalRow::save(&t, version)).await?;
        let reset_since = if fresh {
            ", edits_since_snapshot = 0, bytes_since_snapshot = 0"
        } else {
            ""
        };
        tx.execute(
            &format!(
                "UPDATE targets SET version = $2, saved_revision = $3{reset_since} WHERE id = $1"
            ),
            &[&t.id, &i(version), &i(t.revision)],
        )
        .await?;
        tx.commit().await?;
        Ok(t.saved_as(version))
    }

    async fn observe_async(
        &self,
        name: &str,
        at_revision: u64,
        range: ObserveRange,
    ) -> Result<Observation, StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        // FOR SHARE: no commit of this target moves the revision until this one is recorded.
        let t = target_row_locked(&tx, name, "SHARE").await?;
        shared::check_observed_revision(name, at_revision, t.revision)?;
        let content = self.current_content(&tx, &t).await?;
        let o = shared::observation(name, &content, t.revision, range)?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO observations (observation_id, target_id, revision, kind, name, \
                 start_byte, end_byte, start_line, end_line, sha256) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .await?;
        tx.execute(
            &stmt,
            &[
                &o.observation_id,
                &t.id,
                &i(t.revision),
                &o.scope.kind.as_bytes(),
                &o.scope.name.as_deref().map(str::as_bytes),
                &(o.scope.start_byte as i64),
                &(o.scope.end_byte as i64),
                &(o.scope.start_line as i64),
                &(o.scope.end_line as i64),
                &o.sha256,
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(o)
    }

    async fn replay_async(
        &self,
        name: &str,
        after: Option<&str>,
        after_id: i64,
        limit: u32,
    ) -> Result<ReplayPage, StoreError> {
        let mut client = self.client().await?;
        let tx = Self::read_tx(&mut client).await?;
        let t = target_row(&tx, name).await?;
        let stmt = tx
            .prepare_cached(
                "SELECT entry_id, kind, revision, version, attempt_id, request_key, sha256, \
                 edits, text FROM journal WHERE target_id = $1 AND entry_id > $2 \
                 ORDER BY entry_id LIMIT $3",
            )
            .await?;
        let rows = tx
            .query(&stmt, &[&t.id, &after_id, &(limit as i64 + 1)])
            .await?
            .into_iter()
            .map(|r| {
                let text: Vec<u8> = r.get(8);
                let key: Option<Vec<u8>> = r.get(5);
                Ok(ReplayRow {
                    entry_id: r.get(0),
                    kind: r.get(1),
                    revision: r.get(2),
                    version: r.get(3),
                    attempt_id: r.get(4),
                    request_key: key.map(|k| utf8(k, "request key")).transpose()?,
                    sha256: r.get(6),
                    edits: r.get(7),
                    text_len: text.len(),
                    text,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        shared::replay_page(rows, limit, after, |_, text, _| utf8(text, "journal text"))
    }

    async fn audit_async(&self, name: &str) -> Result<Audit, StoreError> {
        let mut client = self.client().await?;
        let tx = Self::read_tx(&mut client).await?;
        let t = target_row(&tx, name).await?;
        let (accepted, rejected, observations) = summary_counts(&tx, t.id).await?;
        let rejections = shared::count_rejections(
            tx.query(
                "SELECT reason_codes FROM attempts WHERE target_id = $1 AND outcome = 'rejected'",
                &[&t.id],
            )
            .await?
            .iter()
            .map(|r| r.get::<_, String>(0)),
        );
        let mut worker_errors = BTreeMap::new();
        for r in tx
            .query(
                "SELECT code, count(*) FROM worker_errors WHERE target_id = $1 GROUP BY code",
                &[&t.id],
            )
            .await?
        {
            worker_errors.insert(utf8(r.get(0), "worker error code")?, u(&r, 1));
        }
        Ok(t.into_audit(accepted, rejected, observations, rejections, worker_errors))
    }

    async fn list_async(&self) -> Result<Vec<TargetSummary>, StoreError> {
        let mut client = self.client().await?;
        let tx = Self::read_tx(&mut client).await?;
        let rows = tx
            .query(
                &format!(
                    "SELECT {TARGET_COLS}, \
                     (SELECT count(*) FROM attempts a WHERE a.target_id = t.id AND a.outcome = 'accepted'), \
                     (SELECT count(*) FROM attempts a WHERE a.target_id = t.id AND a.outcome = 'rejected'), \
                     (SELECT count(*) FROM observations o WHERE o.target_id = t.id) \
                     FROM targets t ORDER BY name COLLATE \"C\""
                ),
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| target_from(r).into_summary((u(r, 11), u(r, 12), u(r, 13))))
            .collect())
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Never blocks (a store may be dropped inside an async task).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.redacted_url)
            .finish_non_exhaustive()
    }
}

// Each signature here is the trait's, repeated as Rust requires (so is SqliteStore's); the
// checks a method opens with are `shared`'s, the rest runs this backend's async I/O.
impl EditStore for PostgresStore {
    fn init_target(
        &self,
        name: &str,
        language: &str,
        content: &[u8],
        expected_sha256: &str,
        reset: bool,
    ) -> Result<TargetState, StoreError> {
        let (text, actual) = shared::check_init(name, language, content, expected_sha256)?;
        let (id, incarnation) = self
            .run(
                Call::Write,
                self.init_async(name, language, text, &actual, reset),
            )
            .map_err(|e| self.busy(name, e))?;
        self.cache.reset(id, incarnation, text.into());
        Ok(shared::initial_state(name, language, text, actual))
    }

    fn read_target(&self, name: &str) -> Result<TargetState, StoreError> {
        self.run(Call::Read, async {
            let mut client = self.client().await?;
            let tx = Self::read_tx(&mut client).await?;
            let t = target_row(&tx, name).await?;
            let content = self.current_content(&tx, &t).await?.to_string();
            Ok(t.into_state(content))
        })
    }

    fn observe(
        &self,
        name: &str,
        at_revision: u64,
        range: ObserveRange,
    ) -> Result<Observation, StoreError> {
        shared::check_observe(&range)?;
        self.run(Call::Write, self.observe_async(name, at_revision, range))
            .map_err(|e| self.busy(name, e))
    }

    fn submit_validated(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
        validator: Validator<'_>,
    ) -> Result<Receipt, StoreError> {
        let submission_sha = submission_sha256(submission)?;
        // K4 first: recovery needs no lock, no validation and no discovery.
        if let Some(r) = self.run(Call::Read, self.recover(name, submission, &submission_sha))? {
            return Ok(r);
        }
        validate_submission(submission)?;
        self.run(
            Call::Write,
            self.submit_locked(name, submission, &submission_sha, strict, validator),
        )
        .map_err(|e| self.busy(name, e))
    }

    fn recover_receipt(
        &self,
        name: &str,
        submission: &Submission,
    ) -> Result<Option<Receipt>, StoreError> {
        let submission_sha = submission_sha256(submission)?;
        self.run(Call::Read, self.recover(name, submission, &submission_sha))
    }

    fn stored_receipt(&self, name: &str, request_key: &str) -> Result<Option<String>, StoreError> {
        self.run(Call::Read, async {
            let mut client = self.client().await?;
            let tx = Self::read_tx(&mut client).await?;
            let t = target_row(&tx, name).await?;
            Ok(tx
                .query_opt(
                    "SELECT receipt FROM attempts WHERE target_id = $1 AND request_key = $2",
                    &[&t.id, &request_key.as_bytes()],
                )
                .await?
                .map(|r| r.get(0)))
        })
    }

    fn save(&self, name: &str) -> Result<SaveResult, StoreError> {
        self.run(Call::Write, self.save_async(name))
            .map_err(|e| self.busy(name, e))
    }

    fn saved(&self, name: &str) -> Result<SavedContent, StoreError> {
        self.run(Call::Read, async {
            let mut client = self.client().await?;
            let tx = Self::read_tx(&mut client).await?;
            let t = target_row(&tx, name).await?;
            Self::read_version(&tx, &t, t.version).await
        })
    }

    fn saved_version(&self, name: &str, version: u64) -> Result<SavedContent, StoreError> {
        self.run(Call::Read, async {
            let mut client = self.client().await?;
            let tx = Self::read_tx(&mut client).await?;
            let t = target_row(&tx, name).await?;
            Self::read_version(&tx, &t, version).await
        })
    }

    fn replay(
        &self,
        name: &str,
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<ReplayPage, StoreError> {
        let (after_id, limit) = shared::replay_args(after, limit)?;
        self.run(Call::Read, self.replay_async(name, after, after_id, limit))
    }

    fn audit(&self, name: &str) -> Result<Audit, StoreError> {
        self.run(Call::Read, self.audit_async(name))
    }

    fn record_worker_error(&self, name: &str, code: &str, message: &str) -> Result<(), StoreError> {
        let message = shared::check_worker_error(code, message)?;
        self.run(Call::Write, async {
            let mut client = self.client().await?;
            let tx = self.write_tx(&mut client).await?;
            let t = target_row(&tx, name).await?;
            tx.execute(
                "INSERT INTO worker_errors (target_id, code, message) VALUES ($1, $2, $3)",
                &[&t.id, &code.as_bytes(), &message.as_bytes()],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn list_targets(&self) -> Result<Vec<TargetSummary>, StoreError> {
        self.run(Call::Read, self.list_async())
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), StoreError> {
        PostgresStore::set_busy_timeout(self, timeout);
        Ok(())
    }

    fn backend(&self) -> StoreBackend {
        StoreBackend::Postgres {
            redacted_url: self.redacted_url.clone(),
        }
    }

    fn identity(&self) -> Result<StoreIdentity, StoreError> {
        self.run(Call::Read, async {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT current_database()::text, d.oid::bigint, \
                            (SELECT value FROM store_meta WHERE key = 'store_id') \
                     FROM pg_database d WHERE d.datname = current_database()",
                    &[],
                )
                .await?;
            // `pg_control_system()` needs superuser or pg_monitor-like rights by default; a
            // role without them still has the database's oid and the store id.
            let system_identifier = client
                .query_one(
                    "SELECT system_identifier::text FROM pg_control_system()",
                    &[],
                )
                .await
                .ok()
                .map(|r| r.get::<_, String>(0));
            Ok(StoreIdentity {
                backend: "postgres".into(),
                database: row.get(0),
                store_id: row.get(2),
                system_identifier,
                database_oid: u32::try_from(row.get::<_, i64>(1)).ok(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_passwords_in_user_info_and_parameters() {
        assert_eq!(
            redact_database_url("postgres://pd:s3cret@db.example:5432/pd"),
            "postgres://pd:***@db.example:5432/pd"
        );
        assert_eq!(
            redact_database_url("postgresql://pd@127.0.0.1/pd?password=s3cret&sslmode=disable"),
            "postgresql://pd@127.0.0.1/pd?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_database_url("postgres://127.0.0.1:55432/postgres"),
            "postgres://127.0.0.1:55432/postgres"
        );
    }

    #[test]
    fn connect_errors_name_the_url_without_its_password() {
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        let e = PostgresStore::connect("postgres://pd:s3cret@127.0.0.1:1/pd").unwrap_err();
        assert_eq!(e.code, ErrorCode::Storage);
        assert!(
            e.message.contains("postgres://pd:***@127.0.0.1:1/pd"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("s3cret"), "{}", e.message);
    }

    #[test]
    fn open_backend_refuses_other_schemes_naming_the_value_and_what_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let err = match open_backend(&dir.path().join("pd.sqlite"), Some("mysql://u:pw@h/db")) {
            Err(e) => e,
            Ok(_) => panic!("mysql:// must be refused"),
        };
        assert_eq!(err.code, ErrorCode::InvalidInput);
        assert!(
            err.message.contains("\"mysql://u:***@h/db\""),
            "{}",
            err.message
        );
        assert!(err.message.contains("postgres://"), "{}", err.message);
        assert!(
            err.message.contains("sqlite:///absolute/path"),
            "{}",
            err.message
        );
        assert!(!err.message.contains("pw@"), "{}", err.message);
        // None: the SQLite file at the path.
        let s = open_backend(&dir.path().join("pd.sqlite"), None).unwrap();
        assert!(matches!(s.backend(), StoreBackend::Sqlite { .. }));
    }

    #[test]
    fn target_lock_keys_differ_per_target_and_are_stable() {
        assert_ne!(target_lock_key("a"), target_lock_key("b"));
        assert_eq!(target_lock_key("a"), target_lock_key("a"));
    }
}

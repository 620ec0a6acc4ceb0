//! SQLite implementation of [`EditStore`] (K3–K7).
//!
//! Two connections per `SqliteStore`, each behind its own mutex (so the store is `Send + Sync`):
//! a writer and a read-only reader, so a read never queues behind a write in this process. The
//! database runs in WAL mode with `synchronous = FULL` (a commit is durable once acknowledged)
//! and a busy timeout of [`BUSY_TIMEOUT_MS`]. Every write is a short `BEGIN IMMEDIATE`
//! transaction. A submission's serialization boundary is its *target's* lock
//! ([`super::target_lock`]), held across processes from planning through validation to commit;
//! validation runs outside every database lock and mutex, so targets never wait on each other
//! (K5, W7). Reads run in one read transaction, so they see a committed, consistent state —
//! never a view missing an acknowledged edit.
//!
//! Content is stored as chunked snapshots (at init, at every save, and periodically) plus the
//! journal of accepted edits; the current content is the latest snapshot with later edits
//! applied. An in-process cache keyed by (target incarnation, revision) avoids rebuilding it;
//! a revision's content never changes, so the cache is safe across processes.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::chunks::{self, ChunkTable};
use super::schema;
use super::shared::{
    self, Cached, ContentCache, EditRow, PlanRead, ReplayRow, TARGET_COLS, TargetRow, decode_edits,
    encode_edits, i, lock, submission_sha256, utf8,
};
use super::target_lock::TargetLocks;
use super::*;
use crate::kernel::{EditShape, ObservationRecord, Plan, sha256_hex, validate_submission};

/// How commits reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous = FULL`: an acknowledged commit survives process kill and power loss (K3).
    #[default]
    Full,
    /// `synchronous = OFF`: survives a process kill but not an OS crash. For bulk-loading
    /// benches and tests only; never for a serving process.
    NoSync,
}

/// SQLite-backed [`EditStore`]. `Send + Sync`; share it behind an `Arc`.
pub struct SqliteStore {
    /// The connection for write transactions (kept short: never held across validation).
    writer: Mutex<Connection>,
    /// A `query_only` connection for reads, so a read never waits for a write in this process.
    reader: Mutex<Connection>,
    /// Current content per target id, valid while (incarnation, revision) match the row.
    cache: ContentCache,
    /// K5: the per-target boundary submissions hold through validation.
    target_locks: TargetLocks,
    /// How long a submission waits for its target's lock (milliseconds).
    lock_timeout_ms: std::sync::atomic::AtomicU64,
    path: PathBuf,
}

mod replica;
mod rows;
mod seal;
mod submit;

use rows::*;
pub use seal::checkpoint_for_seal;
use seal::immutable_uri;

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, enables WAL, `synchronous = FULL` and
    /// the busy timeout, and applies pending migrations.
    ///
    /// Errors: `STORAGE` (cannot open, not a database, schema newer than this build).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::Full)
    }

    /// [`open`](Self::open) with an explicit [`Durability`]; only benches and bulk loaders use
    /// anything but [`Durability::Full`].
    pub fn open_with(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let ctx = format!("opening database {}", path.display());
        let mut conn = Connection::open(path).map_err(|e| StoreError::storage(&ctx, e))?;
        conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
            .map_err(|e| StoreError::storage(&ctx, e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| StoreError::storage(&ctx, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!("{ctx}: could not enable WAL (journal_mode is {mode})"),
            ));
        }
        let synchronous = match durability {
            Durability::Full => "FULL",
            Durability::NoSync => "OFF",
        };
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(|e| StoreError::storage(&ctx, e))?;
        schema::migrate(&mut conn)?;
        let reader = Connection::open(path).map_err(|e| StoreError::storage(&ctx, e))?;
        reader
            .busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
            .map_err(|e| StoreError::storage(&ctx, e))?;
        reader
            .pragma_update(None, "query_only", true)
            .map_err(|e| StoreError::storage(&ctx, e))?;
        Ok(Self {
            writer: Mutex::new(conn),
            reader: Mutex::new(reader),
            cache: ContentCache::default(),
            target_locks: TargetLocks::new(path),
            lock_timeout_ms: BUSY_TIMEOUT_MS.into(),
            path: path.to_owned(),
        })
    }

    /// Opens the database at `path` truly read-only (a past, sealed run): SQLite's
    /// `immutable=1` URI with `SQLITE_OPEN_READ_ONLY`, so nothing is created or changed beside
    /// it (no `-wal`, no `-shm`, no lock files) and every write fails. No migration runs; a
    /// schema this build cannot read fails on the first query.
    ///
    /// Errors: `STORAGE` when the file is missing or cannot be opened.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        use rusqlite::OpenFlags;
        let ctx = format!("opening database {} read-only", path.display());
        if !path.is_file() {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!("{ctx}: no such database file"),
            ));
        }
        let uri = immutable_uri(path);
        let open = || {
            Connection::open_with_flags(
                &uri,
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| StoreError::storage(&ctx, e))
        };
        Ok(Self {
            writer: Mutex::new(open()?),
            reader: Mutex::new(open()?),
            cache: ContentCache::default(),
            target_locks: TargetLocks::new(path),
            lock_timeout_ms: BUSY_TIMEOUT_MS.into(),
            path: path.to_owned(),
        })
    }

    /// The database file this store uses.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets how long a write waits for another connection's write lock, and a submission for
    /// its target's lock (default [`BUSY_TIMEOUT_MS`]). Write transactions are short; the target
    /// lock is held through a submission's validation, so a server that validates (W7) sets this
    /// above its outer discovery allowance (W6: active + 13 s), so a submission queued behind
    /// another submission *of the same target* waits for it instead of failing.
    ///
    /// Clamped to `i32::MAX` milliseconds (about 24.8 days), SQLite's own ceiling.
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<(), StoreError> {
        let timeout = timeout.min(Duration::from_millis(i32::MAX as u64));
        self.lock_timeout_ms.store(
            timeout.as_millis().min(u64::MAX as u128) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        lock(&self.reader).busy_timeout(timeout)?;
        Ok(lock(&self.writer).busy_timeout(timeout)?)
    }

    /// Runs `f` with the writer connection (its write transactions must stay short).
    fn with_writer<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        f(&mut lock(&self.writer))
    }

    /// Runs `f` with the read-only connection; it never waits for this process's writer.
    fn with_reader<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        f(&mut lock(&self.reader))
    }

    /// Target `t`'s current content: cached, or rebuilt (and then cached).
    fn current_content(&self, conn: &Connection, t: &TargetRow) -> Result<Arc<str>, StoreError> {
        let cached = self.cache.get(t);
        if let Some(c) = cached.as_ref().filter(|c| c.revision == t.revision) {
            return Ok(c.content.clone());
        }
        let content: Arc<str> = content_at(conn, cached.as_ref(), t, t.revision)?.into();
        self.cache
            .remember(t.id, &t.incarnation, t.revision, content.clone());
        Ok(content)
    }

    fn summary_counts(conn: &Connection, target_id: i64) -> Result<(u64, u64, u64), StoreError> {
        Ok(conn
            .prepare_cached(
                "SELECT \
                 (SELECT count(*) FROM attempts WHERE target_id = ?1 AND outcome = 'accepted'), \
                 (SELECT count(*) FROM attempts WHERE target_id = ?1 AND outcome = 'rejected'), \
                 (SELECT count(*) FROM observations WHERE target_id = ?1)",
            )?
            .query_row(params![target_id], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                ))
            })?)
    }

    fn read_version(
        conn: &Connection,
        t: &TargetRow,
        version: u64,
    ) -> Result<SavedContent, StoreError> {
        let row: Option<(i64, String, i64)> = conn
            .prepare_cached(
                "SELECT revision, sha256, snapshot_id FROM versions WHERE target_id = ?1 AND version = ?2",
            )?
            .query_row(params![t.id, i(version)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let Some((revision, sha256, snapshot_id)) = row else {
            return Err(shared::no_such_version(&t.name, version, t.version));
        };
        let (_, content) = read_snapshot(conn, snapshot_id)?;
        Ok(SavedContent {
            target: t.name.clone(),
            version,
            revision: revision as u64,
            sha256,
            content,
        })
    }
}

// Each signature here is the trait's, repeated as Rust requires (so is PostgresStore's); the
// checks a method opens with are `shared`'s, the rest is SQLite I/O.
impl EditStore for SqliteStore {
    fn init_target(
        &self,
        name: &str,
        language: &str,
        content: &[u8],
        expected_sha256: &str,
        reset: bool,
    ) -> Result<TargetState, StoreError> {
        let (text, actual) = shared::check_init(name, language, content, expected_sha256)?;
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let incarnation = uuid::Uuid::new_v4().to_string();
            let id = match target_row_opt(&tx, name)? {
                Some(t) => {
                    t.check_fresh(Self::summary_counts(&tx, t.id)?, reset)?;
                    delete_history(&tx, t.id)?;
                    tx.execute(
                        "UPDATE targets SET language = ?2, incarnation = ?3, version = 0, \
                         revision = 0, sha256 = ?4, byte_len = ?5, initial_sha256 = ?4, \
                         saved_revision = 0, edits_since_snapshot = 0, bytes_since_snapshot = 0 \
                         WHERE id = ?1",
                        params![t.id, language, incarnation, actual, text.len() as i64],
                    )?;
                    t.id
                }
                None => {
                    tx.execute(
                        "INSERT INTO targets (name, language, incarnation, version, revision, \
                         sha256, byte_len, initial_sha256, saved_revision, edits_since_snapshot, \
                         bytes_since_snapshot) VALUES (?1, ?2, ?3, 0, 0, ?4, ?5, ?4, 0, 0, 0)",
                        params![name, language, incarnation, actual, text.len() as i64],
                    )?;
                    tx.last_insert_rowid()
                }
            };
            let snap = write_snapshot(&tx, id, 0, text, &actual)?;
            tx.execute(
                "INSERT INTO versions (target_id, version, revision, sha256, snapshot_id) \
                 VALUES (?1, 0, 0, ?2, ?3)",
                params![id, actual, snap],
            )?;
            insert_journal(&tx, id, &shared::JournalRow::init(&actual))?;
            tx.commit()?;
            self.cache.reset(id, incarnation, text.into());
            Ok(shared::initial_state(name, language, text, actual))
        })
    }

    fn read_target(&self, name: &str) -> Result<TargetState, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let content = self.current_content(&tx, &t)?.to_string();
            tx.finish()?;
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
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let t = target_row(&tx, name)?;
            shared::check_observed_revision(name, at_revision, t.revision)?;
            let content = self.current_content(&tx, &t)?;
            let o = shared::observation(name, &content, t.revision, range)?;
            tx.prepare_cached(
                "INSERT INTO observations (observation_id, target_id, revision, kind, name, \
                 start_byte, end_byte, start_line, end_line, sha256) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                o.observation_id,
                t.id,
                i(t.revision),
                o.scope.kind,
                o.scope.name,
                o.scope.start_byte as i64,
                o.scope.end_byte as i64,
                o.scope.start_line as i64,
                o.scope.end_line as i64,
                o.sha256
            ])?;
            tx.commit()?;
            Ok(o)
        })
    }

    fn submit_validated(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
        validator: Validator<'_>,
    ) -> Result<Receipt, StoreError> {
        self.submit_with(name, submission, strict, validator, None)
    }

    fn recover_receipt(
        &self,
        name: &str,
        submission: &Submission,
    ) -> Result<Option<Receipt>, StoreError> {
        let submission_sha = submission_sha256(submission)?;
        self.with_reader(|conn| {
            let t = target_row(conn, name)?;
            lookup_receipt(conn, t.id, name, &submission.request_key, &submission_sha)
        })
    }

    fn stored_receipt(&self, name: &str, request_key: &str) -> Result<Option<String>, StoreError> {
        self.with_reader(|conn| {
            let t = target_row(conn, name)?;
            Ok(conn
                .prepare_cached(
                    "SELECT receipt FROM attempts WHERE target_id = ?1 AND request_key = ?2",
                )?
                .query_row(params![t.id, request_key], |r| r.get(0))
                .optional()?)
        })
    }

    fn save(&self, name: &str) -> Result<SaveResult, StoreError> {
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let t = target_row(&tx, name)?;
            let existing: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM snapshots WHERE target_id = ?1 AND revision = ?2 \
                     ORDER BY id DESC LIMIT 1",
                )?
                .query_row(params![t.id, i(t.revision)], |r| r.get(0))
                .optional()?;
            let mut fresh_snapshot = false;
            let snapshot_id = match existing {
                Some(id) => id,
                None => {
                    let content = self.current_content(&tx, &t)?;
                    fresh_snapshot = true;
                    write_snapshot(&tx, t.id, t.revision, &content, &t.sha256)?
                }
            };
            let version = t.version + 1;
            tx.prepare_cached(
                "INSERT INTO versions (target_id, version, revision, sha256, snapshot_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                t.id,
                i(version),
                i(t.revision),
                t.sha256,
                snapshot_id
            ])?;
            insert_journal(&tx, t.id, &shared::JournalRow::save(&t, version))?;
            if fresh_snapshot {
                tx.execute(
                    "UPDATE targets SET version = ?2, saved_revision = ?3, \
                     edits_since_snapshot = 0, bytes_since_snapshot = 0 WHERE id = ?1",
                    params![t.id, i(version), i(t.revision)],
                )?;
            } else {
                tx.execute(
                    "UPDATE targets SET version = ?2, saved_revision = ?3 WHERE id = ?1",
                    params![t.id, i(version), i(t.revision)],
                )?;
            }
            tx.commit()?;
            Ok(t.saved_as(version))
        })
    }

    fn saved(&self, name: &str) -> Result<SavedContent, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let saved = Self::read_version(&tx, &t, t.version)?;
            tx.finish()?;
            Ok(saved)
        })
    }

    fn saved_version(&self, name: &str, version: u64) -> Result<SavedContent, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let saved = Self::read_version(&tx, &t, version)?;
            tx.finish()?;
            Ok(saved)
        })
    }

    fn replay(
        &self,
        name: &str,
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<ReplayPage, StoreError> {
        let (after_id, limit) = shared::replay_args(after, limit)?;
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let rows: Vec<ReplayRow<(Option<Vec<u8>>, i64)>> = tx
                .prepare_cached(
                    "SELECT entry_id, kind, revision, version, attempt_id, request_key, sha256, \
                     edits, text_len, chunk_count, inline_text FROM journal \
                     WHERE target_id = ?1 AND entry_id > ?2 ORDER BY entry_id LIMIT ?3",
                )?
                .query_map(params![t.id, after_id, limit as i64 + 1], |r| {
                    Ok(ReplayRow {
                        entry_id: r.get(0)?,
                        kind: r.get(1)?,
                        revision: r.get(2)?,
                        version: r.get(3)?,
                        attempt_id: r.get(4)?,
                        request_key: r.get(5)?,
                        sha256: r.get(6)?,
                        edits: r.get(7)?,
                        text_len: r.get::<_, i64>(8)? as usize,
                        text: (r.get(10)?, r.get(9)?),
                    })
                })?
                .collect::<Result<_, _>>()?;
            let page = shared::replay_page(rows, limit, after, |id, (inline, n), len| {
                load_entry_text(&tx, id, inline, len, n)
            })?;
            tx.finish()?;
            Ok(page)
        })
    }

    fn audit(&self, name: &str) -> Result<Audit, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let (accepted, rejected, observations) = Self::summary_counts(&tx, t.id)?;
            let rejections = shared::count_rejections(
                tx.prepare_cached(
                    "SELECT reason_codes FROM attempts WHERE target_id = ?1 AND outcome = 'rejected'",
                )?
                .query_map(params![t.id], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?,
            );
            let mut worker_errors = BTreeMap::new();
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT code, count(*) FROM worker_errors WHERE target_id = ?1 GROUP BY code",
                )?;
                let rows = stmt.query_map(params![t.id], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                })?;
                for row in rows {
                    let (code, n) = row?;
                    worker_errors.insert(code, n as u64);
                }
            }
            tx.finish()?;
            Ok(t.into_audit(accepted, rejected, observations, rejections, worker_errors))
        })
    }

    fn record_worker_error(&self, name: &str, code: &str, message: &str) -> Result<(), StoreError> {
        let message = shared::check_worker_error(code, message)?;
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let t = target_row(&tx, name)?;
            tx.execute(
                "INSERT INTO worker_errors (target_id, code, message) VALUES (?1, ?2, ?3)",
                params![t.id, code, message],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    fn list_targets(&self) -> Result<Vec<TargetSummary>, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let names: Vec<String> = tx
                .prepare_cached("SELECT name FROM targets ORDER BY name")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                let t = target_row(&tx, &name)?;
                let counts = Self::summary_counts(&tx, t.id)?;
                out.push(t.into_summary(counts));
            }
            tx.finish()?;
            Ok(out)
        })
    }

    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), StoreError> {
        SqliteStore::set_busy_timeout(self, timeout)
    }

    fn backend(&self) -> StoreBackend {
        StoreBackend::Sqlite {
            path: self.path.clone(),
        }
    }

    fn replica_acquire(
        &self,
        request: &replica::LeaseRequest,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Checkpoint, StoreError> {
        self.acquire(request, clock)
    }

    fn replica_renew(
        &self,
        lease_id: &str,
        ttl_ms: u64,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Lease, StoreError> {
        self.end_or_renew(lease_id, Some(ttl_ms), clock)
    }

    fn replica_release(
        &self,
        lease_id: &str,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Lease, StoreError> {
        self.end_or_renew(lease_id, None, clock)
    }

    fn replica_submit(
        &self,
        lease_id: &str,
        submission: &replica::ReplicaSubmission,
        clock: replica::Clock<'_>,
        validator: Validator<'_>,
        seam: Option<replica::Seam<'_>>,
    ) -> Result<Receipt, StoreError> {
        self.replica_submit_sqlite(lease_id, submission, clock, validator, seam)
    }

    fn replica_changes(
        &self,
        lease_id: &str,
        target: &str,
        after: Option<&str>,
        limit: Option<u32>,
        clock: replica::Clock<'_>,
    ) -> Result<ReplayPage, StoreError> {
        self.replica_changes_sqlite(lease_id, target, after, limit, clock)
    }

    fn identity(&self) -> Result<StoreIdentity, StoreError> {
        let store_id = self.with_reader(|conn| {
            // A read-only view of a database from before store ids has no `store_meta`.
            let has_meta: bool = conn
                .prepare_cached(
                    "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'store_meta'",
                )?
                .query_row([], |r| r.get(0))?;
            if !has_meta {
                return Ok(None);
            }
            Ok(conn
                .prepare_cached("SELECT value FROM store_meta WHERE key = 'store_id'")?
                .query_row([], |r| r.get::<_, String>(0))
                .optional()?)
        })?;
        Ok(StoreIdentity {
            backend: "sqlite".into(),
            database: self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            store_id,
            system_identifier: None,
            database_oid: None,
        })
    }
}

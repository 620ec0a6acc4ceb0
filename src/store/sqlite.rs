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
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::chunks::{self, ChunkTable};
use super::schema;
use super::target_lock::TargetLocks;
use super::*;
use crate::kernel::position::{check_range, last_line_of};
use crate::kernel::{
    EditShape, MAX_NAME_BYTES, ObservationRecord, Plan, PlanInput, Rejection, TextEdit,
    apply_edits, plan_submission, position_of, sha256_hex, validate_submission,
};

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
    cache: Mutex<HashMap<i64, Cached>>,
    /// K5: the per-target boundary submissions hold through validation.
    target_locks: TargetLocks,
    /// How long a submission waits for its target's lock (milliseconds).
    lock_timeout_ms: std::sync::atomic::AtomicU64,
    path: PathBuf,
}

#[derive(Clone)]
struct Cached {
    incarnation: String,
    revision: u64,
    content: Arc<str>,
}

/// One `journal` row as read by replay.
struct JournalRow {
    entry_id: i64,
    kind: String,
    revision: i64,
    version: i64,
    attempt_id: Option<String>,
    request_key: Option<String>,
    sha256: String,
    edits: String,
    text_len: i64,
    chunk_count: i64,
    inline_text: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
struct TargetRow {
    id: i64,
    name: String,
    language: String,
    incarnation: String,
    version: u64,
    revision: u64,
    sha256: String,
    initial_sha256: String,
    saved_revision: u64,
    edits_since_snapshot: u64,
    bytes_since_snapshot: u64,
}

const TARGET_COLS: &str = "id, name, language, incarnation, version, revision, sha256, \
     initial_sha256, saved_revision, edits_since_snapshot, bytes_since_snapshot";

fn i(v: u64) -> i64 {
    v as i64
}

fn target_row_opt(conn: &Connection, name: &str) -> Result<Option<TargetRow>, StoreError> {
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

fn target_row(conn: &Connection, name: &str) -> Result<TargetRow, StoreError> {
    target_row_opt(conn, name)?.ok_or_else(|| StoreError::unknown_target(name))
}

fn decode_edits(json: &str) -> Result<Vec<EditShape>, StoreError> {
    let raw: Vec<[usize; 3]> =
        serde_json::from_str(json).map_err(|e| StoreError::storage("journal edits", e))?;
    Ok(raw
        .into_iter()
        .map(|[start, end, new_len]| EditShape {
            start,
            end,
            new_len,
        })
        .collect())
}

fn encode_edits(edits: &[TextEdit]) -> String {
    let raw: Vec<[usize; 3]> = edits
        .iter()
        .map(|e| [e.start, e.end, e.new_text.len()])
        .collect();
    serde_json::to_string(&raw).unwrap_or_else(|_| "[]".to_owned())
}

fn utf8(bytes: Vec<u8>, what: &str) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|e| StoreError::storage(what, e))
}

/// Splits an entry's concatenated text into its edits' texts.
fn split_text(shapes: &[EditShape], text: &str) -> Result<Vec<TextEdit>, StoreError> {
    let mut at = 0;
    let mut out = Vec::with_capacity(shapes.len());
    for s in shapes {
        let t = text.get(at..at + s.new_len).ok_or_else(|| {
            StoreError::new(ErrorCode::Storage, "journal text does not match its edits")
        })?;
        out.push(TextEdit {
            start: s.start,
            end: s.end,
            new_text: t.to_owned(),
        });
        at += s.new_len;
    }
    Ok(out)
}

/// An entry's concatenated text: inline in the journal row, or from its chunk rows (K7).
fn load_entry_text(
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
fn load_steps(
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

fn write_snapshot(
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

fn read_snapshot(conn: &Connection, snapshot_id: i64) -> Result<(u64, String), StoreError> {
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

#[allow(clippy::too_many_arguments)]
fn insert_journal(
    conn: &Connection,
    target_id: i64,
    kind: &str,
    revision: u64,
    version: u64,
    attempt_id: Option<&str>,
    request_key: Option<&str>,
    sha256: &str,
    edits: &[TextEdit],
) -> Result<i64, StoreError> {
    let text: String = edits.iter().map(|e| e.new_text.as_str()).collect();
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
        kind,
        i(revision),
        i(version),
        attempt_id,
        request_key,
        sha256,
        encode_edits(edits),
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
fn content_at(
    conn: &Connection,
    cached: Option<&Cached>,
    t: &TargetRow,
    revision: u64,
) -> Result<String, StoreError> {
    let cached = cached.filter(|c| c.incarnation == t.incarnation && c.revision <= revision);
    if let Some(c) = cached.filter(|c| c.revision == revision) {
        return Ok(c.content.to_string());
    }
    let snap: Option<(i64, i64)> = conn
        .prepare_cached(
            "SELECT id, revision FROM snapshots WHERE target_id = ?1 AND revision <= ?2 \
             ORDER BY revision DESC, id DESC LIMIT 1",
        )?
        .query_row(params![t.id, i(revision)], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (mut at, mut content) = match (snap, cached) {
        (_, Some(c)) if snap.is_none_or(|(_, r)| r as u64 <= c.revision) => {
            (c.revision, c.content.to_string())
        }
        (Some((id, _)), _) => read_snapshot(conn, id)?,
        (None, _) => {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!(
                    "target {} has no snapshot at or before revision {revision}",
                    t.name
                ),
            ));
        }
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
    let mut last_sha = String::new();
    while let Some(r) = rows.next()? {
        let (entry_id, rev, sha, edits, text_len, n): (i64, i64, String, String, i64, i64) = (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        );
        let inline: Option<Vec<u8>> = r.get(6)?;
        if rev as u64 != at + 1 {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!("journal of {} skips from revision {at} to {rev}", t.name),
            ));
        }
        let text = load_entry_text(conn, entry_id, inline, text_len as usize, n)?;
        let edits = split_text(&decode_edits(&edits)?, &text)?;
        content = apply_edits(&content, &edits)
            .map_err(|e| StoreError::storage("replaying the journal", e))?;
        at = rev as u64;
        last_sha = sha;
    }
    if at != revision || sha256_hex(&content) != last_sha {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!(
                "rebuilding {} at revision {revision} did not reproduce its recorded SHA-256",
                t.name
            ),
        ));
    }
    Ok(content)
}

/// Times a submission plans again when a re-init moved its target before commit.
const COMMIT_ATTEMPTS: usize = 3;

/// What a submission's read phase found: a stored receipt (K4), or a decided plan.
enum Planned {
    Recovered(Receipt),
    Plan {
        target: TargetRow,
        plan: Plan,
        current: Arc<str>,
    },
}

/// The consistent read a plan is made from.
struct PlanRead {
    target: TargetRow,
    observations: HashMap<String, ObservationRecord>,
    steps_from: u64,
    steps: Vec<Vec<EditShape>>,
    current: Arc<str>,
    base_content: Option<String>,
}

fn validation_unavailable(code: &str, message: &str) -> StoreError {
    StoreError::new(
        ErrorCode::ValidationUnavailable,
        format!("{code}: {message}; nothing was recorded, submit again with the same request_key"),
    )
}

/// Locks a mutex, recovering from poisoning (a panicking holder leaves no partial state: every
/// change is inside a SQLite transaction).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Names are shown in logs, the console and audits: 1..=256 bytes, without control characters
/// (NUL, newline, DEL, C1) or the invisible bidirectional controls that reorder text (U+061C,
/// U+200E/F, U+202A–U+202E, U+2066–U+2069).
fn check_name(what: &str, value: &str) -> Result<(), StoreError> {
    if value.is_empty() || value.len() > MAX_NAME_BYTES {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            format!(
                "{what} must be 1..={MAX_NAME_BYTES} bytes (got {})",
                value.len()
            ),
        ));
    }
    let bidi = |c: char| matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if let Some(c) = value.chars().find(|&c| c.is_control() || bidi(c)) {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            format!(
                "{what} {value:?} holds the control character U+{:04X}; use printable characters only",
                c as u32
            ),
        ));
    }
    Ok(())
}

fn delete_history(conn: &Connection, target_id: i64) -> Result<(), StoreError> {
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

fn lookup_receipt(
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
    match row {
        None => Ok(None),
        Some((sha, receipt)) if sha == submission_sha256 => Ok(Some(
            serde_json::from_str(&receipt).map_err(|e| StoreError::storage("stored receipt", e))?,
        )),
        Some(_) => Err(StoreError::new(
            ErrorCode::RequestKeyConflict,
            format!(
                "request_key {request_key:?} was already used on target {target} for a different submission; use a new request_key for new content (an identical retry returns the original receipt)"
            ),
        )),
    }
}

/// K4: identity of a submission's content (SHA-256 of its canonical JSON, key included).
fn submission_sha256(submission: &Submission) -> Result<String, StoreError> {
    Ok(sha256_hex(
        serde_json::to_vec(submission).map_err(|e| StoreError::storage("submission", e))?,
    ))
}

fn load_observation(
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
    .ok_or_else(|| {
        StoreError::new(
            ErrorCode::UnknownObservation,
            format!(
                "observation {id:?} does not exist for target {target}; observe the scope first and use the observation_id it returns"
            ),
        )
    })
}

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
            cache: Mutex::new(HashMap::new()),
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

    /// The cached content of target `t`, if any (any revision of its incarnation).
    fn cached(&self, t: &TargetRow) -> Option<Cached> {
        lock(&self.cache)
            .get(&t.id)
            .filter(|c| c.incarnation == t.incarnation)
            .cloned()
    }

    /// Remembers `content` as target `id`'s content at `revision` unless a newer one is cached.
    fn remember(&self, id: i64, incarnation: &str, revision: u64, content: Arc<str>) {
        let mut cache = lock(&self.cache);
        let newer = cache
            .get(&id)
            .is_some_and(|c| c.incarnation == incarnation && c.revision > revision);
        if !newer {
            cache.insert(
                id,
                Cached {
                    incarnation: incarnation.to_owned(),
                    revision,
                    content,
                },
            );
        }
    }

    /// Target `t`'s current content: cached, or rebuilt (and then cached).
    fn current_content(&self, conn: &Connection, t: &TargetRow) -> Result<Arc<str>, StoreError> {
        let cached = self.cached(t);
        if let Some(c) = cached.as_ref().filter(|c| c.revision == t.revision) {
            return Ok(c.content.clone());
        }
        let content: Arc<str> = content_at(conn, cached.as_ref(), t, t.revision)?.into();
        self.remember(t.id, &t.incarnation, t.revision, content.clone());
        Ok(content)
    }

    /// K3: plans a submission against one consistent read of the target (the reader
    /// connection); the kernel's planning itself runs outside every lock.
    fn plan(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        strict: bool,
    ) -> Result<Planned, StoreError> {
        let read = self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            // Another writer may have used the key before we took the boundary.
            if let Some(r) =
                lookup_receipt(&tx, t.id, name, &submission.request_key, submission_sha)?
            {
                return Ok(Err(r));
            }
            let base = submission.base_revision;
            if base > t.revision {
                return Err(StoreError::new(
                    ErrorCode::OutOfRange,
                    format!(
                        "base_revision {base} is ahead of target {name}'s current revision {}; read the target and use its revision",
                        t.revision
                    ),
                ));
            }
            let mut observations = HashMap::new();
            for op in &submission.operations {
                if let Some(id) = &op.observation_id
                    && !observations.contains_key(id)
                {
                    let o = load_observation(&tx, t.id, name, id)?;
                    observations.insert(id.clone(), o);
                }
            }
            let steps_from = observations
                .values()
                .map(|o: &ObservationRecord| o.revision)
                .chain([base])
                .min()
                .unwrap_or(base);
            let steps = load_steps(&tx, t.id, steps_from, t.revision)?;
            let current = self.current_content(&tx, &t)?;
            let base_content = if base == t.revision {
                None
            } else {
                Some(content_at(&tx, self.cached(&t).as_ref(), &t, base)?)
            };
            tx.finish()?;
            Ok(Ok(PlanRead {
                target: t,
                observations,
                steps_from,
                steps,
                current,
                base_content,
            }))
        })?;
        let r = match read {
            Err(receipt) => return Ok(Planned::Recovered(receipt)),
            Ok(r) => r,
        };
        let plan = plan_submission(&PlanInput {
            target: name,
            submission,
            strict,
            base_content: r.base_content.as_deref().unwrap_or(&r.current),
            current_content: &r.current,
            current_revision: r.target.revision,
            steps_from: r.steps_from,
            steps: &r.steps,
            observations: &r.observations,
        });
        Ok(Planned::Plan {
            target: r.target,
            plan,
            current: r.current,
        })
    }

    /// K3/K4: records one decided attempt in a short write transaction. `None` when the target
    /// is no longer at the planned revision and incarnation (only a writer outside the target
    /// boundary — a re-init — can do that): the caller plans again.
    fn commit_attempt(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        planned: &TargetRow,
        plan: Plan,
        warnings: Vec<String>,
    ) -> Result<Option<Receipt>, StoreError> {
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let t = target_row(&tx, name)?;
            if let Some(r) =
                lookup_receipt(&tx, t.id, name, &submission.request_key, submission_sha)?
            {
                return Ok(Some(r));
            }
            if t.incarnation != planned.incarnation || t.revision != planned.revision {
                return Ok(None);
            }
            let attempt_id = uuid::Uuid::new_v4().to_string();
            let mut receipt = Receipt {
                target: name.to_owned(),
                request_key: submission.request_key.clone(),
                attempt_id: attempt_id.clone(),
                outcome: Outcome::Rejected,
                base_revision: submission.base_revision,
                revision: t.revision,
                sha256: t.sha256.clone(),
                corrections: Vec::new(),
                reasons: Vec::new(),
                reason_codes: Vec::new(),
                warnings: Vec::new(),
            };
            let mut new_cache = None;
            match plan {
                Plan::Accept {
                    edits,
                    new_content,
                    corrections,
                } => {
                    let revision = t.revision + 1;
                    let sha = sha256_hex(&new_content);
                    insert_journal(
                        &tx,
                        t.id,
                        "edit",
                        revision,
                        t.version,
                        Some(&attempt_id),
                        Some(&submission.request_key),
                        &sha,
                        &edits,
                    )?;
                    let text_bytes: u64 = edits.iter().map(|e| e.new_text.len() as u64 + 32).sum();
                    let mut since_edits = t.edits_since_snapshot + 1;
                    let mut since_bytes = t.bytes_since_snapshot + text_bytes;
                    if since_edits >= SNAPSHOT_EVERY_EDITS
                        || since_bytes >= (new_content.len() as u64).max(SNAPSHOT_MIN_BYTES)
                    {
                        write_snapshot(&tx, t.id, revision, &new_content, &sha)?;
                        since_edits = 0;
                        since_bytes = 0;
                    }
                    tx.prepare_cached(
                        "UPDATE targets SET revision = ?2, sha256 = ?3, byte_len = ?4, \
                         edits_since_snapshot = ?5, bytes_since_snapshot = ?6 WHERE id = ?1",
                    )?
                    .execute(params![
                        t.id,
                        i(revision),
                        sha,
                        new_content.len() as i64,
                        i(since_edits),
                        i(since_bytes)
                    ])?;
                    receipt.outcome = Outcome::Accepted;
                    receipt.revision = revision;
                    receipt.sha256 = sha;
                    receipt.corrections = corrections;
                    receipt.warnings = warnings;
                    new_cache = Some((revision, new_content));
                }
                Plan::Reject { reasons } => {
                    for r in reasons {
                        receipt.reason_codes.push(r.code.to_owned());
                        receipt.reasons.push(r.message);
                    }
                }
            }
            let json =
                serde_json::to_string(&receipt).map_err(|e| StoreError::storage("receipt", e))?;
            tx.prepare_cached(
                "INSERT INTO attempts (attempt_id, target_id, request_key, submission_sha256, \
                 outcome, revision, reason_codes, receipt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                attempt_id,
                t.id,
                submission.request_key,
                submission_sha,
                receipt.outcome.as_str(),
                i(receipt.revision),
                serde_json::to_string(&receipt.reason_codes).unwrap_or_default(),
                json
            ])?;
            tx.commit()?;
            if let Some((revision, content)) = new_cache {
                self.remember(t.id, &t.incarnation, revision, content.into());
            }
            Ok(Some(receipt))
        })
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
            return Err(StoreError::new(
                ErrorCode::OutOfRange,
                format!(
                    "target {} has no version {version}; its versions are 0..={}",
                    t.name, t.version
                ),
            ));
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

impl EditStore for SqliteStore {
    fn init_target(
        &self,
        name: &str,
        language: &str,
        content: &[u8],
        expected_sha256: &str,
        reset: bool,
    ) -> Result<TargetState, StoreError> {
        check_name("target name", name)?;
        check_name("language", language)?;
        if expected_sha256.len() != 64 || !expected_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::new(
                ErrorCode::InvalidInput,
                format!(
                    "expected sha256 for target {name} must be 64 hex digits (got {:?})",
                    crate::kernel::snippet(expected_sha256, 80)
                ),
            ));
        }
        let text = std::str::from_utf8(content).map_err(|e| {
            StoreError::new(
                ErrorCode::InvalidUtf8,
                format!(
                    "fixture for target {name} is not valid UTF-8 (first bad byte at offset {}); targets are UTF-8 text",
                    e.valid_up_to()
                ),
            )
        })?;
        let actual = sha256_hex(content);
        if !actual.eq_ignore_ascii_case(expected_sha256) {
            return Err(StoreError::new(
                ErrorCode::FixtureHashMismatch,
                format!(
                    "fixture for target {name} hashes to {actual}, not the expected {}; the fixture is not the authenticated one — refusing target {name}",
                    expected_sha256.to_ascii_lowercase()
                ),
            ));
        }
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let incarnation = uuid::Uuid::new_v4().to_string();
            let id = match target_row_opt(&tx, name)? {
                Some(t) => {
                    let (accepted, rejected, observations) = Self::summary_counts(&tx, t.id)?;
                    let history = accepted + rejected + observations + t.version + t.revision;
                    if history > 0 && !reset {
                        return Err(StoreError::new(
                            ErrorCode::TargetNotFresh,
                            format!(
                                "target {name} is not fresh (version {}, revision {}, {} attempts, {observations} observations); pass reset to wipe its history, or use another name",
                                t.version,
                                t.revision,
                                accepted + rejected
                            ),
                        ));
                    }
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
            insert_journal(&tx, id, "init", 0, 0, None, None, &actual, &[])?;
            tx.commit()?;
            lock(&self.cache).insert(
                id,
                Cached {
                    incarnation,
                    revision: 0,
                    content: text.into(),
                },
            );
            Ok(TargetState {
                name: name.to_owned(),
                language: language.to_owned(),
                version: 0,
                revision: 0,
                sha256: actual.clone(),
                content: text.to_owned(),
                initial_sha256: actual,
                saved_revision: 0,
            })
        })
    }

    fn read_target(&self, name: &str) -> Result<TargetState, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let content = self.current_content(&tx, &t)?.to_string();
            tx.finish()?;
            Ok(TargetState {
                name: t.name,
                language: t.language,
                version: t.version,
                revision: t.revision,
                sha256: t.sha256,
                content,
                initial_sha256: t.initial_sha256,
                saved_revision: t.saved_revision,
            })
        })
    }

    fn observe(
        &self,
        name: &str,
        at_revision: u64,
        range: ObserveRange,
    ) -> Result<Observation, StoreError> {
        if range.kind.is_empty() || range.kind.len() > 1024 {
            return Err(StoreError::new(
                ErrorCode::InvalidInput,
                "scope kind must be 1..=1024 bytes (e.g. \"method\" or \"lines\")",
            ));
        }
        if range.name.as_ref().is_some_and(|n| n.len() > 1024) {
            return Err(StoreError::new(
                ErrorCode::InvalidInput,
                "scope name must be at most 1024 bytes",
            ));
        }
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let t = target_row(&tx, name)?;
            if at_revision != t.revision {
                return Err(StoreError::new(
                    ErrorCode::RevisionMoved,
                    format!(
                        "target {name} is at revision {}, not {at_revision}; read it again, rerun discovery on that content and observe again",
                        t.revision
                    ),
                ));
            }
            let content = self.current_content(&tx, &t)?;
            let content: &str = &content;
            check_range(content, range.start_byte, range.end_byte).map_err(|e| {
                StoreError::new(
                    ErrorCode::OutOfRange,
                    format!("scope of target {name}: {}", e.message),
                )
            })?;
            let text = content[range.start_byte..range.end_byte].to_owned();
            let start_line = position_of(content, range.start_byte)?.line;
            let end_line = last_line_of(content, range.start_byte, range.end_byte)?;
            let sha256 = sha256_hex(&text);
            let observation_id = uuid::Uuid::new_v4().to_string();
            tx.prepare_cached(
                "INSERT INTO observations (observation_id, target_id, revision, kind, name, \
                 start_byte, end_byte, start_line, end_line, sha256) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                observation_id,
                t.id,
                i(t.revision),
                range.kind,
                range.name,
                range.start_byte as i64,
                range.end_byte as i64,
                start_line as i64,
                end_line as i64,
                sha256
            ])?;
            tx.commit()?;
            Ok(Observation {
                observation_id,
                revision: t.revision,
                scope: ObservedScope {
                    kind: range.kind,
                    name: range.name,
                    start_byte: range.start_byte,
                    end_byte: range.end_byte,
                    start_line,
                    end_line,
                },
                sha256,
                text,
            })
        })
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
        if let Some(r) = self.with_reader(|conn| {
            let t = target_row(conn, name)?;
            lookup_receipt(conn, t.id, name, &submission.request_key, &submission_sha)
        })? {
            return Ok(r);
        }
        validate_submission(submission)?;
        // K5: the target's boundary, held through planning, validation and commit (also against
        // other processes). Other targets' submissions, saves and reads never wait for it.
        let timeout = Duration::from_millis(
            self.lock_timeout_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        let _boundary = self.target_locks.acquire(name, timeout)?;
        for _ in 0..COMMIT_ATTEMPTS {
            let (t, plan, current) = match self.plan(name, submission, &submission_sha, strict)? {
                Planned::Recovered(r) => return Ok(r),
                Planned::Plan {
                    target,
                    plan,
                    current,
                } => (target, plan, current),
            };
            // W7/W8: validate what an accepted plan would produce, outside every database lock.
            let mut warnings = Vec::new();
            let plan = match plan {
                Plan::Accept {
                    ref new_content, ..
                } => {
                    match validator(&t.language, new_content) {
                        Validation::Passed => plan,
                        Validation::PassedWithSyntaxErrors => {
                            // A warning only when the edit introduced them.
                            if validator(&t.language, &current) == Validation::Passed {
                                warnings.push(format!(
                                    "SYNTAX_ERRORS_INTRODUCED: the accepted edit leaves the {} with syntax errors the base revision did not have; read the target and fix them",
                                    t.language
                                ));
                            }
                            plan
                        }
                        Validation::Failed { code, message } => {
                            // Never blame an edit for a condition its base already had.
                            match validator(&t.language, &current) {
                                Validation::Failed {
                                    code: base_code, ..
                                } if base_code == code => plan,
                                Validation::Unavailable { code, message } => {
                                    return Err(validation_unavailable(&code, &message));
                                }
                                _ => Plan::Reject {
                                    reasons: vec![Rejection {
                                        code: crate::kernel::RejectionCode::ValidationFailed,
                                        message: format!(
                                            "the edited {} no longer passes discovery ({code}: {message}); nothing was applied",
                                            t.language
                                        ),
                                    }],
                                },
                            }
                        }
                        Validation::Unavailable { code, message } => {
                            return Err(validation_unavailable(&code, &message));
                        }
                    }
                }
                reject => reject,
            };
            if let Some(receipt) =
                self.commit_attempt(name, submission, &submission_sha, &t, plan, warnings)?
            {
                return Ok(receipt);
            }
        }
        Err(StoreError::new(
            ErrorCode::Storage,
            format!(
                "target {name} was re-initialized while this submission was being decided ({COMMIT_ATTEMPTS} times); nothing was recorded, read the target and submit again"
            ),
        ))
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
            insert_journal(
                &tx,
                t.id,
                "save",
                t.revision,
                version,
                None,
                None,
                &t.sha256,
                &[],
            )?;
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
            Ok(SaveResult {
                target: t.name,
                version,
                revision: t.revision,
                sha256: t.sha256,
            })
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
        let limit = limit.unwrap_or(REPLAY_DEFAULT_LIMIT);
        if limit == 0 || limit > REPLAY_MAX_LIMIT {
            return Err(StoreError::new(
                ErrorCode::OutOfRange,
                format!("limit must be 1..={REPLAY_MAX_LIMIT} entries (got {limit})"),
            ));
        }
        let after_id: i64 = match after {
            None => 0,
            Some(c) => c.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
                StoreError::new(
                    ErrorCode::InvalidCursor,
                    format!(
                        "cursor {:?} was not issued by replay; pass a next_cursor or an entry's cursor, or omit it to start from the beginning",
                        crate::kernel::snippet(c, 80)
                    ),
                )
            })?,
        };
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let rows: Vec<JournalRow> = tx
                .prepare_cached(
                    "SELECT entry_id, kind, revision, version, attempt_id, request_key, sha256, \
                     edits, text_len, chunk_count, inline_text FROM journal \
                     WHERE target_id = ?1 AND entry_id > ?2 ORDER BY entry_id LIMIT ?3",
                )?
                .query_map(params![t.id, after_id, limit as i64 + 1], |r| {
                    Ok(JournalRow {
                        entry_id: r.get(0)?,
                        kind: r.get(1)?,
                        revision: r.get(2)?,
                        version: r.get(3)?,
                        attempt_id: r.get(4)?,
                        request_key: r.get(5)?,
                        sha256: r.get(6)?,
                        edits: r.get(7)?,
                        text_len: r.get(8)?,
                        chunk_count: r.get(9)?,
                        inline_text: r.get(10)?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            let mut entries = Vec::new();
            let mut text_bytes = 0usize;
            let mut has_more = false;
            for (n, row) in rows.into_iter().enumerate() {
                let JournalRow {
                    entry_id,
                    kind,
                    revision,
                    version,
                    attempt_id,
                    request_key,
                    sha256,
                    edits,
                    text_len,
                    chunk_count,
                    inline_text,
                } = row;
                if n as u32 == limit
                    || (!entries.is_empty()
                        && text_bytes + text_len as usize > REPLAY_PAGE_TEXT_BYTES)
                {
                    has_more = true;
                    break;
                }
                let kind = match kind.as_str() {
                    "init" => JournalKind::Init,
                    "edit" => JournalKind::Edit,
                    _ => JournalKind::Save,
                };
                let operations = if kind == JournalKind::Edit {
                    let text = load_entry_text(
                        &tx,
                        entry_id,
                        inline_text,
                        text_len as usize,
                        chunk_count,
                    )?;
                    split_text(&decode_edits(&edits)?, &text)?
                        .into_iter()
                        .map(|e| JournalOperation {
                            start_byte: e.start,
                            end_byte: e.end,
                            new_text: e.new_text,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                text_bytes += text_len as usize;
                entries.push(JournalEntry {
                    cursor: entry_id.to_string(),
                    kind,
                    revision: revision as u64,
                    version: version as u64,
                    request_key,
                    attempt_id,
                    sha256,
                    operations,
                });
            }
            tx.finish()?;
            let next_cursor = entries
                .last()
                .map(|e| e.cursor.clone())
                .or_else(|| after.map(str::to_owned));
            Ok(ReplayPage {
                entries,
                next_cursor,
                has_more,
            })
        })
    }

    fn audit(&self, name: &str) -> Result<Audit, StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let t = target_row(&tx, name)?;
            let (accepted, rejected, observations) = Self::summary_counts(&tx, t.id)?;
            let mut rejections = BTreeMap::new();
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT reason_codes FROM attempts WHERE target_id = ?1 AND outcome = 'rejected'",
                )?;
                let rows = stmt.query_map(params![t.id], |r| r.get::<_, String>(0))?;
                for row in rows {
                    let codes: Vec<String> = serde_json::from_str(&row?).unwrap_or_default();
                    for c in codes {
                        *rejections.entry(c).or_insert(0u64) += 1;
                    }
                }
            }
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
            Ok(Audit {
                target: t.name,
                version: t.version,
                revision: t.revision,
                sha256: t.sha256,
                initial_sha256: t.initial_sha256,
                attempts: AttemptCounts {
                    total: accepted + rejected,
                    accepted,
                    rejected,
                },
                receipts: accepted + rejected,
                saves: t.version,
                observations,
                rejections,
                worker_errors,
            })
        })
    }

    fn record_worker_error(&self, name: &str, code: &str, message: &str) -> Result<(), StoreError> {
        if code.is_empty() || code.len() > 128 {
            return Err(StoreError::new(
                ErrorCode::InvalidInput,
                "worker error code must be 1..=128 bytes (e.g. WAYMARK_WORKER_QUEUE_FULL)",
            ));
        }
        let message = crate::kernel::snippet(message, MAX_WORKER_ERROR_MESSAGE_BYTES);
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
                let (accepted, rejected, observations) = Self::summary_counts(&tx, t.id)?;
                out.push(TargetSummary {
                    name: t.name,
                    language: t.language,
                    version: t.version,
                    revision: t.revision,
                    sha256: t.sha256,
                    initial_sha256: t.initial_sha256,
                    accepted,
                    rejected,
                    observations,
                });
            }
            tx.finish()?;
            Ok(out)
        })
    }
}

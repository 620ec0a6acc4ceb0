//! Store: the [`EditStore`] contract and its two backends, SQLite and PostgreSQL (SPEC K3–K8).
//!
//! [`EditStore`] is the backend-neutral interface; [`SqliteStore`] (the embedded default) and
//! [`PostgresStore`] (many processes on many machines, S1) implement it, sharing their
//! decisions through `shared`; [`open_backend`] picks one from `PATCHDIFF_DATABASE_URL`
//! as resolved by `config::Settings`. SQLite: Every write is a short `BEGIN IMMEDIATE` transaction on a WAL
//! database with a busy timeout; a submission additionally holds its target's lock (a per-target
//! file lock, also across OS processes sharing the file) from planning through validation to
//! commit, so submissions of one target pass one serialization boundary while other targets
//! never wait for it (K5). Acceptance commits the journal entry, the new revision and the receipt
//! together before returning (K3). Large content and journal text are split into chunk rows of
//! at most [`RECORD_BOUND_BYTES`] including framing (K7).

mod chunks;
mod postgres;
pub mod replica;
mod schema;
mod shared;
mod sqlite;
mod target_lock;

pub use crate::kernel::types::*;
pub use postgres::{
    CONNECT_TIMEOUT, PG_SCHEMA_VERSION, POOL_MAX_CONNECTIONS, PhaseFigures, PostgresStore,
    STATEMENT_BUDGET, SubmissionPhase, SubmissionProfile, redact_database_url,
};
pub use sqlite::{Durability, SqliteStore, checkpoint_for_seal};

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::kernel::{KernelCode, KernelError};

/// K7: no stored row exceeds this many bytes (512 KiB), framing included. Content snapshots and
/// journal text are split into chunk rows of at most [`CHUNK_PAYLOAD_BYTES`] of payload.
pub const RECORD_BOUND_BYTES: usize = 512 * 1024;
/// K7: bytes reserved for a chunk row's framing (keys, SQLite record header): 1 KiB.
pub const RECORD_FRAMING_RESERVE_BYTES: usize = 1024;
/// K7: payload bytes per chunk row (`RECORD_BOUND_BYTES - RECORD_FRAMING_RESERVE_BYTES`).
pub const CHUNK_PAYLOAD_BYTES: usize = RECORD_BOUND_BYTES - RECORD_FRAMING_RESERVE_BYTES;
/// K7: journal text (an entry's concatenated `new_text`s) of at most this many bytes (256 KiB)
/// is stored inline in its journal row, whose other columns stay under 8 KiB (≤ 64 operations,
/// 256-byte request key), so the row stays under [`RECORD_BOUND_BYTES`]; longer text is split
/// into chunk rows.
pub const INLINE_TEXT_BYTES: usize = 256 * 1024;
/// K6: replay page size when `limit` is not given.
pub const REPLAY_DEFAULT_LIMIT: u32 = 100;
/// K6: largest replay page (entries); a larger `limit` is `OUT_OF_RANGE`.
pub const REPLAY_MAX_LIMIT: u32 = 1000;
/// K6: a replay page stops adding entries once it carries this many bytes of `new_text`
/// (8 MiB); a single larger entry is still returned alone.
pub const REPLAY_PAGE_TEXT_BYTES: usize = 8 * 1024 * 1024;
/// K5: how long a writer waits for another writer's transaction (also another process's) before
/// failing with `STORAGE` (busy): 10 000 ms.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;
/// A content snapshot is written after this many accepted edits without one (bounds the work a
/// cold reader does to rebuild the current content).
pub const SNAPSHOT_EVERY_EDITS: u64 = 1024;
/// … or once journal text since the last snapshot exceeds max(content length, this) bytes
/// (1 MiB), so snapshots cost amortized O(1) per journal byte.
pub const SNAPSHOT_MIN_BYTES: u64 = 1024 * 1024;
/// Worker error messages are stored truncated to this many bytes (4 KiB).
pub const MAX_WORKER_ERROR_MESSAGE_BYTES: usize = 4096;

/// Stable error codes of the store (K8). `as_str()` gives the wire spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// No target has that name.
    UnknownTarget,
    /// Fixture bytes are not valid UTF-8 (C1).
    InvalidUtf8,
    /// Fixture bytes do not hash to the expected SHA-256 (C1).
    FixtureHashMismatch,
    /// Init without reset on a target that has attempts, observations or saves (C1).
    TargetNotFresh,
    /// A request key reused with different submission content (K4).
    RequestKeyConflict,
    /// `observe` named a revision that is no longer current.
    RevisionMoved,
    /// An operation names an observation that does not exist for this target.
    UnknownObservation,
    /// More than [`crate::kernel::MAX_OPERATIONS`] operations.
    TooManyOperations,
    /// Offsets, line ranges, revisions or limits outside what exists / is allowed.
    OutOfRange,
    /// Other malformed input (empty request key or old_text, bad names, bad hash syntax).
    InvalidInput,
    /// Operations carry more than [`crate::kernel::MAX_SUBMISSION_TEXT_BYTES`] of text.
    SubmissionTooLarge,
    /// A replay cursor that this store did not issue.
    InvalidCursor,
    /// A submission JSON document that does not parse.
    MalformedJson,
    /// The database failed (I/O, busy beyond the timeout, corruption, newer schema).
    Storage,
    /// W7/W8: the post-edit validator could not run (a worker error such as
    /// `WAYMARK_WORKER_NOT_READY`); the transaction rolled back and no attempt was recorded.
    ValidationUnavailable,
    /// R1: no lease has that id.
    UnknownLease,
    /// R1: the lease expired (on the caller's clock); nothing was applied.
    LeaseExpired,
    /// R1: the lease was released; nothing was applied.
    LeaseReleased,
    /// R1: a leased target was re-initialized after the lease was granted.
    LeaseInvalidated,
    /// R1: the lease does not cover that target.
    TargetNotLeased,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownTarget => "UNKNOWN_TARGET",
            ErrorCode::ValidationUnavailable => "VALIDATION_UNAVAILABLE",
            ErrorCode::InvalidUtf8 => "INVALID_UTF8",
            ErrorCode::FixtureHashMismatch => "FIXTURE_HASH_MISMATCH",
            ErrorCode::TargetNotFresh => "TARGET_NOT_FRESH",
            ErrorCode::RequestKeyConflict => "REQUEST_KEY_CONFLICT",
            ErrorCode::RevisionMoved => "REVISION_MOVED",
            ErrorCode::UnknownObservation => "UNKNOWN_OBSERVATION",
            ErrorCode::TooManyOperations => "TOO_MANY_OPERATIONS",
            ErrorCode::OutOfRange => "OUT_OF_RANGE",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::SubmissionTooLarge => "SUBMISSION_TOO_LARGE",
            ErrorCode::InvalidCursor => "INVALID_CURSOR",
            ErrorCode::MalformedJson => "MALFORMED_JSON",
            ErrorCode::Storage => "STORAGE",
            ErrorCode::UnknownLease => "UNKNOWN_LEASE",
            ErrorCode::LeaseExpired => "LEASE_EXPIRED",
            ErrorCode::LeaseReleased => "LEASE_RELEASED",
            ErrorCode::LeaseInvalidated => "LEASE_INVALIDATED",
            ErrorCode::TargetNotLeased => "TARGET_NOT_LEASED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A store error: a stable [`ErrorCode`] and a message that tells an agent how to recover.
/// Returning one means nothing was changed (K8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct StoreError {
    pub code: ErrorCode,
    pub message: String,
}

impl StoreError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    pub(crate) fn unknown_target(name: &str) -> Self {
        Self::new(
            ErrorCode::UnknownTarget,
            format!(
                "no target named {name:?}; list the targets or initialize it from its fixture first"
            ),
        )
    }
    pub(crate) fn storage(context: &str, e: impl fmt::Display) -> Self {
        Self::new(
            ErrorCode::Storage,
            format!("{context}: {e}; nothing was changed, retry the same request"),
        )
    }
}

impl From<KernelError> for StoreError {
    fn from(e: KernelError) -> Self {
        let code = match e.code {
            KernelCode::TooManyOperations => ErrorCode::TooManyOperations,
            KernelCode::SubmissionTooLarge => ErrorCode::SubmissionTooLarge,
            KernelCode::OutOfRange | KernelCode::NotCharBoundary => ErrorCode::OutOfRange,
            KernelCode::InvalidInput | KernelCode::OverlappingOperations => ErrorCode::InvalidInput,
        };
        Self::new(code, e.message)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::storage("database error", e)
    }
}

/// Parses a submission from JSON (K8: malformed JSON is `MALFORMED_JSON`, naming the problem).
pub fn parse_submission(json: &str) -> Result<Submission, StoreError> {
    serde_json::from_str(json).map_err(|e| {
        StoreError::new(
            ErrorCode::MalformedJson,
            format!(
                "submission is not valid JSON of shape {{request_key, base_revision, expected_sha256?, operations: [{{observation_id?, old_text, new_text}}]}}: {e}"
            ),
        )
    })
}

/// A post-edit validator's verdict (W7, W8); see [`EditStore::submit_validated`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validation {
    /// The new content validated: commit the attempt as accepted.
    Passed,
    /// The new content validated but has syntax errors (the parser's `has_error`): commit as
    /// accepted; the receipt warns when the base content parsed cleanly (the edit introduced
    /// them).
    PassedWithSyntaxErrors,
    /// A domain result (parse failure, output over 2 MiB, active timeout): the attempt is
    /// recorded as rejected with reason code `VALIDATION_FAILED` and this message.
    Failed { code: String, message: String },
    /// The validator could not run (a worker error): roll back, record nothing.
    Unavailable { code: String, message: String },
}

/// A post-edit validator: `(language, content) -> Validation`. It runs while the submission
/// holds its target's boundary (but no database lock), so it must be bounded (W7: at most
/// 250 ms waiting for a ready worker). When the edited content fails, the store also validates
/// the base content: a failure the base already had (same code) is not the edit's fault.
pub type Validator<'a> = &'a (dyn Fn(&str, &str) -> Validation + Sync);

/// The variable selecting the store (P1): `postgres://…`/`postgresql://…` for PostgreSQL,
/// `sqlite:///absolute/path` (or unset: the default file) for SQLite.
pub const DATABASE_URL_VARIABLE: &str = crate::config::Key::DatabaseUrl.variable();

/// Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Opens the store a process should use: `database_url` `Some("postgres://…" |
/// "postgresql://…")` connects a [`PostgresStore`]; `Some("sqlite:///abs/path")` opens that
/// SQLite file; `None` opens the SQLite file at `database_path`.
///
/// Errors: `INVALID_INPUT` for any other value (naming it, passwords redacted, and what is
/// accepted); `STORAGE` when the database cannot be opened or reached.
pub fn open_backend(
    database_path: &Path,
    database_url: Option<&str>,
) -> Result<Arc<dyn EditStore>, StoreError> {
    match database_url {
        None => Ok(Arc::new(SqliteStore::open(database_path)?)),
        Some(url) if is_postgres_url(url) => Ok(Arc::new(PostgresStore::connect(url)?)),
        Some(url) if url.starts_with("sqlite://") => {
            let path = crate::config::parse_database_url(url)
                .map_err(|e| StoreError::new(ErrorCode::InvalidInput, e.to_string()))?;
            Ok(Arc::new(SqliteStore::open(&path)?))
        }
        Some(url) => Err(StoreError::new(
            ErrorCode::InvalidInput,
            format!(
                "{DATABASE_URL_VARIABLE} {:?} names no supported database; accepted: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (or postgresql://…) for PostgreSQL, sqlite:///absolute/path for SQLite, or unset for the default SQLite file",
                redact_database_url(url)
            ),
        )),
    }
}

/// Which backend a store is, for run manifests and evidence (never carries a password).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
pub enum StoreBackend {
    /// A SQLite file.
    Sqlite { path: PathBuf },
    /// A PostgreSQL database; the URL with its password replaced by `***`.
    Postgres { redacted_url: String },
}

/// The edit store (K1–K8), implemented by [`SqliteStore`] and [`PostgresStore`] with the same
/// contract, error codes and stored receipt bytes. Every method is atomic: on `Err` nothing
/// changed. Methods block: call them from plain or `spawn_blocking` threads.
pub trait EditStore: Send + Sync {
    /// C1/K8: installs `content` as target `name` at version 0, revision 0.
    ///
    /// Errors: `INVALID_UTF8` (names the target and the first bad byte), `FIXTURE_HASH_MISMATCH`
    /// (names the target, expected and actual hashes), `TARGET_NOT_FRESH` (the target has
    /// attempts, observations or saves and `reset` is false), `INVALID_INPUT` (empty/oversize
    /// name or language, malformed hash). `reset` wipes the target's whole history.
    fn init_target(
        &self,
        name: &str,
        language: &str,
        content: &[u8],
        expected_sha256: &str,
        reset: bool,
    ) -> Result<TargetState, StoreError>;

    /// K1: the current accepted revision. Errors: `UNKNOWN_TARGET`.
    fn read_target(&self, name: &str) -> Result<TargetState, StoreError>;

    /// K2: records that the caller saw `range` of the content at `at_revision`.
    ///
    /// Errors: `REVISION_MOVED` (`at_revision` is not current: read and discover again),
    /// `OUT_OF_RANGE` (bytes past the end, reversed, or inside a character), `INVALID_INPUT`
    /// (empty kind, kind/name over 1024 bytes), `UNKNOWN_TARGET`.
    fn observe(
        &self,
        name: &str,
        at_revision: u64,
        range: ObserveRange,
    ) -> Result<Observation, StoreError>;

    /// K3/K4: decides and records one attempt; returns its receipt (accepted or rejected).
    ///
    /// A retry with the same `request_key` and identical submission returns the stored receipt
    /// (byte-identical JSON) before anything else is checked. Errors (nothing recorded):
    /// `REQUEST_KEY_CONFLICT`, `INVALID_INPUT`, `TOO_MANY_OPERATIONS`, `SUBMISSION_TOO_LARGE`,
    /// `OUT_OF_RANGE` (base_revision ahead of current), `UNKNOWN_OBSERVATION`, `UNKNOWN_TARGET`,
    /// `STORAGE`.
    fn submit(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
    ) -> Result<Receipt, StoreError> {
        self.submit_validated(name, submission, strict, &|_, _| Validation::Passed)
    }

    /// [`EditStore::submit`] with a post-edit validator (W7, W8) that runs inside the target's
    /// serialization boundary, after the kernel accepted the plan and before anything commits.
    /// It receives the target's language and the content the accepted edits would produce.
    /// [`Validation::Failed`] records a failed validation attempt (a rejected receipt with
    /// reason code `VALIDATION_FAILED`); [`Validation::Unavailable`] rolls back and returns
    /// `VALIDATION_UNAVAILABLE`, recording nothing. Request-key recovery runs first and never
    /// calls the validator.
    fn submit_validated(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
        validator: Validator<'_>,
    ) -> Result<Receipt, StoreError>;

    /// K4/W7: request-key recovery on its own, for callers that want it before doing any other
    /// work (discovery, locking): `Some(receipt)` for an identical retry (the stored receipt),
    /// `None` when the key is unused on this target. Request keys are scoped per target.
    ///
    /// Errors: `REQUEST_KEY_CONFLICT` (key used for different content), `UNKNOWN_TARGET`.
    fn recover_receipt(
        &self,
        name: &str,
        submission: &Submission,
    ) -> Result<Option<Receipt>, StoreError>;

    /// K4: the stored receipt JSON for `request_key`, if that key was used on this target.
    fn stored_receipt(&self, name: &str, request_key: &str) -> Result<Option<String>, StoreError>;

    /// K6: makes the current revision version `version + 1`. Errors: `UNKNOWN_TARGET`.
    fn save(&self, name: &str) -> Result<SaveResult, StoreError>;

    /// The latest saved version's bytes (version 0 = fixture bytes). Errors: `UNKNOWN_TARGET`.
    fn saved(&self, name: &str) -> Result<SavedContent, StoreError>;

    /// A given saved version's bytes. Errors: `UNKNOWN_TARGET`, `OUT_OF_RANGE` (no such version).
    fn saved_version(&self, name: &str, version: u64) -> Result<SavedContent, StoreError>;

    /// K6: journal entries after cursor `after` (None = from the start, which is the `init`
    /// entry), at most `limit` (default [`REPLAY_DEFAULT_LIMIT`], 1..=[`REPLAY_MAX_LIMIT`]) and
    /// about [`REPLAY_PAGE_TEXT_BYTES`] of text. `next_cursor` is the last returned entry's
    /// cursor (or `after` when the page is empty).
    ///
    /// Errors: `INVALID_CURSOR`, `OUT_OF_RANGE` (limit 0 or over the maximum), `UNKNOWN_TARGET`.
    fn replay(
        &self,
        name: &str,
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<ReplayPage, StoreError>;

    /// C5: attempt, receipt, save, rejection and worker-error counts. Errors: `UNKNOWN_TARGET`.
    fn audit(&self, name: &str) -> Result<Audit, StoreError>;

    /// W8: records a worker error against a target (message truncated to
    /// [`MAX_WORKER_ERROR_MESSAGE_BYTES`]). Errors: `UNKNOWN_TARGET`, `INVALID_INPUT` (empty code).
    fn record_worker_error(&self, name: &str, code: &str, message: &str) -> Result<(), StoreError>;

    /// All targets, by name.
    fn list_targets(&self) -> Result<Vec<TargetSummary>, StoreError>;

    /// K5: how long a write waits for its target's boundary (another submission of that target
    /// validating) or a lock (default [`BUSY_TIMEOUT_MS`]). Errors: `STORAGE`.
    fn set_busy_timeout(&self, timeout: Duration) -> Result<(), StoreError>;

    /// Which backend this is (SQLite file path, or PostgreSQL URL without its password).
    fn backend(&self) -> StoreBackend;

    /// Who this database is ([`StoreIdentity`]: backend, database name, the random store id
    /// its schema was created with, and on PostgreSQL the cluster's `system_identifier` and
    /// the database's oid) — never a secret. A run records it so `verify` can refuse a
    /// database that is not the run's. Errors: `STORAGE`.
    fn identity(&self) -> Result<StoreIdentity, StoreError>;

    /// R1: grants `request.integration` a lease over `request.targets` until `clock() +
    /// ttl_ms` and returns it with the targets' checkpoint (content and replay cursor of one
    /// consistent moment). Only the trusted full profile calls it.
    ///
    /// Errors: `INVALID_INPUT` (integration, duplicate or too many targets), `OUT_OF_RANGE`
    /// (ttl), `UNKNOWN_TARGET`, `STORAGE`; nothing is granted on error.
    fn replica_acquire(
        &self,
        request: &replica::LeaseRequest,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Checkpoint, StoreError>;

    /// R1: moves a live lease's expiry to `clock() + ttl_ms`. Errors: `UNKNOWN_LEASE`,
    /// `LEASE_EXPIRED`, `LEASE_RELEASED`, `LEASE_INVALIDATED`, `OUT_OF_RANGE` (ttl), `STORAGE`.
    fn replica_renew(
        &self,
        lease_id: &str,
        ttl_ms: u64,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Lease, StoreError>;

    /// R1: ends a live lease; every later call with it is refused (`LEASE_RELEASED`).
    /// Errors: `UNKNOWN_LEASE`, `LEASE_EXPIRED`, `LEASE_RELEASED`, `STORAGE`.
    fn replica_release(
        &self,
        lease_id: &str,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Lease, StoreError>;

    /// R2: one replica submission, decided as an agent's (K3, K4: same receipts, request keys
    /// and conflict rules, strict observation off) at the revision of its cursor, through the
    /// target's one boundary (K5); the lease is checked first and again inside the commit's
    /// transaction. `seam` is called at each [`replica::ReplicaPoint`] (tests hold it there).
    ///
    /// Errors (nothing recorded): the lease's (`UNKNOWN_LEASE`, `LEASE_EXPIRED`,
    /// `LEASE_RELEASED`, `LEASE_INVALIDATED`, `TARGET_NOT_LEASED`), `INVALID_CURSOR`, and those
    /// of [`EditStore::submit_validated`].
    fn replica_submit(
        &self,
        lease_id: &str,
        submission: &replica::ReplicaSubmission,
        clock: replica::Clock<'_>,
        validator: Validator<'_>,
        seam: Option<replica::Seam<'_>>,
    ) -> Result<Receipt, StoreError>;

    /// R3: the target's journal after `after` (default: the lease's checkpoint cursor; never
    /// before it), in pages as [`EditStore::replay`]'s, while the lease is live.
    ///
    /// Errors: the lease's, `INVALID_CURSOR`, `OUT_OF_RANGE` (limit), `STORAGE`.
    fn replica_changes(
        &self,
        lease_id: &str,
        target: &str,
        after: Option<&str>,
        limit: Option<u32>,
        clock: replica::Clock<'_>,
    ) -> Result<ReplayPage, StoreError>;
}

/// Who a database is, as a run manifest records it and `verify` compares it (never a secret:
/// no URL, no user, no password). Two databases with equal `store_id`s are one database (or a
/// copy of one); `store_id` is `None` only for a read-only view of a database created before
/// store ids existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StoreIdentity {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// SQLite: the file's name (the run directory may move); PostgreSQL: `current_database()`.
    pub database: String,
    /// 32 lowercase hex digits drawn at random when the schema was created (the `store_meta`
    /// row `store_id`).
    pub store_id: Option<String>,
    /// PostgreSQL: `pg_control_system().system_identifier` (which cluster), when the role may
    /// read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_identifier: Option<String>,
    /// PostgreSQL: the database's oid in `pg_database` (a database dropped and made again
    /// under the same name gets another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_oid: Option<u32>,
}

impl StoreIdentity {
    /// How `other` (the database at hand) differs from `self` (what the run recorded): one
    /// phrase per differing field, e.g. `store id 1f… (the run recorded 9a…)`; empty when
    /// they are the same database. A field either side does not know is not compared.
    pub fn differences(&self, other: &StoreIdentity) -> Vec<String> {
        let mut out = Vec::new();
        let mut field = |name: &str, recorded: Option<String>, found: Option<String>| {
            if let (Some(r), Some(f)) = (recorded, found)
                && r != f
            {
                out.push(format!("{name} {f} (the run recorded {r})"));
            }
        };
        field(
            "backend",
            Some(self.backend.clone()),
            Some(other.backend.clone()),
        );
        field(
            "database",
            Some(self.database.clone()),
            Some(other.database.clone()),
        );
        field("store id", self.store_id.clone(), other.store_id.clone());
        field(
            "cluster system_identifier",
            self.system_identifier.clone(),
            other.system_identifier.clone(),
        );
        field(
            "database oid",
            self.database_oid.map(|o| o.to_string()),
            other.database_oid.map(|o| o.to_string()),
        );
        out
    }
}

/// A target's journal digest: how many entries and the SHA-256 over them, in journal order
/// ([`JournalHasher`] defines it). The seal records one per target; `verify` recomputes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct JournalDigest {
    pub target: String,
    pub entries: u64,
    /// Lowercase hex SHA-256.
    pub sha256: String,
}

/// The one definition of a journal's digest: SHA-256 over each entry in replay order, written
/// as the compact JSON object `{"kind","revision","version","request_key","attempt_id",
/// "sha256","operations"}` (the entry without its backend-specific `cursor`) followed by `\n`.
#[derive(Default)]
pub struct JournalHasher {
    hasher: sha2::Sha256,
    entries: u64,
}

impl JournalHasher {
    /// Adds the next entry.
    pub fn add(&mut self, entry: &JournalEntry) {
        use sha2::Digest;
        #[derive(Serialize)]
        struct Hashed<'a> {
            kind: JournalKind,
            revision: u64,
            version: u64,
            request_key: &'a Option<String>,
            attempt_id: &'a Option<String>,
            sha256: &'a str,
            operations: &'a [JournalOperation],
        }
        let line = serde_json::to_vec(&Hashed {
            kind: entry.kind,
            revision: entry.revision,
            version: entry.version,
            request_key: &entry.request_key,
            attempt_id: &entry.attempt_id,
            sha256: &entry.sha256,
            operations: &entry.operations,
        })
        .expect("journal entries serialize");
        self.hasher.update(&line);
        self.hasher.update(b"\n");
        self.entries += 1;
    }

    /// The digest of the entries added, for `target`.
    pub fn finish(self, target: &str) -> JournalDigest {
        use sha2::Digest;
        JournalDigest {
            target: target.to_owned(),
            entries: self.entries,
            sha256: hex::encode(self.hasher.finalize()),
        }
    }
}

/// K6: `content` with one journal entry's operations applied — byte offsets into the content
/// before the entry, as replay gives them — which is how a replica's mirror, an audit or a bench
/// follows a target through its journal. Errors: the kernel's, when an operation does not apply
/// to `content` (it is not the content the entry was made on).
pub fn apply_journal_operations(
    content: &str,
    operations: &[JournalOperation],
) -> Result<String, KernelError> {
    let edits: Vec<crate::kernel::TextEdit> = operations
        .iter()
        .map(|o| crate::kernel::TextEdit {
            start: o.start_byte,
            end: o.end_byte,
            new_text: o.new_text.clone(),
        })
        .collect();
    crate::kernel::apply_edits(content, &edits)
}

/// Reads `target`'s whole journal from `store` (pages of [`REPLAY_MAX_LIMIT`]) into its
/// [`JournalDigest`]. Errors: those of [`EditStore::replay`].
pub fn journal_digest(store: &dyn EditStore, target: &str) -> Result<JournalDigest, StoreError> {
    let mut hasher = JournalHasher::default();
    let mut after: Option<String> = None;
    loop {
        let page = store.replay(target, after.as_deref(), Some(REPLAY_MAX_LIMIT))?;
        page.entries.iter().for_each(|e| hasher.add(e));
        match page.next_cursor {
            Some(c) if page.has_more => after = Some(c),
            _ => return Ok(hasher.finish(target)),
        }
    }
}

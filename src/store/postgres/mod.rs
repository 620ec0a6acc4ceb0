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

use deadpool_postgres::{
    GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Transaction,
};
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
// - a statement that waits for no lock (reads, inserts, the commit, and the one-trip
//   submission, which tries the boundary and skips a locked row: `one_trip.rs`) needs at most
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

mod migrations;
mod one_trip;
mod ops;
mod pipeline;
mod profile;
mod replica;
mod rows;
mod submit;

pub use migrations::PG_SCHEMA_VERSION;
pub use profile::{PhaseFigures, SubmissionPhase, SubmissionProfile};
pub use rows::redact_database_url;
use rows::*;

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
    /// Target ids by name, learned from reads, so the pipelined plan read can ask for the
    /// journal since the cached revision before it has read the target's row.
    target_ids: std::sync::Mutex<HashMap<String, i64>>,
    /// The row each target had after this process's last commit of it, by name (the one-trip
    /// path plans from it; the server checks it).
    hints: std::sync::Mutex<HashMap<String, one_trip::RowHint>>,
    /// Round trips and time per submission phase ([`PostgresStore::submission_profile`]).
    profile: profile::Profiler,
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
            target_ids: Default::default(),
            hints: Default::default(),
            profile: Default::default(),
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

    /// Round trips and time per phase of the submissions this store made since it connected
    /// or [`PostgresStore::reset_submission_profile`] (where a submission's time goes;
    /// the backend bench prints it). Counting is always on: it costs two clock reads per round
    /// trip.
    pub fn submission_profile(&self) -> SubmissionProfile {
        self.profile.snapshot()
    }

    /// Starts [`PostgresStore::submission_profile`]'s counts again from zero.
    pub fn reset_submission_profile(&self) {
        self.profile.reset()
    }

    /// The cached content of target `name` (by the id a read learned), if any.
    fn cached_by_name(&self, name: &str) -> Option<Cached> {
        let id = *shared::lock(&self.target_ids).get(name)?;
        self.cache.get_by_id(id)
    }

    fn remember_id(&self, name: &str, id: i64) {
        let mut ids = shared::lock(&self.target_ids);
        if ids.get(name) != Some(&id) {
            ids.insert(name.to_owned(), id);
        }
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
        tx: &impl GenericClient,
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

    /// K3–K5 with no validator: one round trip when this process's view of the target is
    /// current (`one_trip.rs`), else the two-trip path of `submit_validated`.
    fn submit(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
    ) -> Result<Receipt, StoreError> {
        if validate_submission(submission).is_ok() {
            let submission_sha = submission_sha256(submission)?;
            let one = self.run(
                Call::Write,
                self.submit_one_trip(name, submission, &submission_sha, strict),
            );
            match one {
                Ok(None) => {}
                done => {
                    self.profile.submitted();
                    return done
                        .map(|r| r.expect("a receipt"))
                        .map_err(|e| self.busy(name, e));
                }
            }
        }
        self.submit_validated(name, submission, strict, &|_, _| Validation::Passed)
    }

    fn submit_validated(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
        validator: Validator<'_>,
    ) -> Result<Receipt, StoreError> {
        let submission_sha = submission_sha256(submission)?;
        let outcome = match validate_submission(submission) {
            // K4 first: recovery needs no lock, no validation and no discovery, so a retry of
            // a recorded key is answered even before the submission's shape is checked.
            Err(invalid) => {
                match self.run(Call::Read, self.recover(name, submission, &submission_sha)) {
                    Ok(Some(r)) => Ok(r),
                    Ok(None) => Err(invalid.into()),
                    Err(e) => Err(e),
                }
            }
            // The pipelined path makes the same recovery first (before the boundary).
            Ok(()) => match self.run(
                Call::Write,
                self.submit_pipelined(name, submission, &submission_sha, strict, validator),
            ) {
                Ok(pipeline::Pipelined::Done(r)) => Ok(*r),
                // A save moved the row's counters between plan and commit: decide again with
                // the row re-read under the commit's lock.
                Ok(pipeline::Pipelined::SavedMeanwhile) => self.run(
                    Call::Write,
                    self.submit_locked(name, submission, &submission_sha, strict, validator, None),
                ),
                Err(e) => Err(e),
            },
        };
        self.profile.submitted();
        outcome.map_err(|e| self.busy(name, e))
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

    fn replica_acquire(
        &self,
        request: &replica::LeaseRequest,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Checkpoint, StoreError> {
        replica::check_lease_request(request)?;
        self.run(Call::Write, self.acquire_async(request, clock))
    }

    fn replica_renew(
        &self,
        lease_id: &str,
        ttl_ms: u64,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Lease, StoreError> {
        replica::check_ttl(ttl_ms)?;
        self.run(
            Call::Write,
            self.end_or_renew_async(lease_id, Some(ttl_ms), clock),
        )
    }

    fn replica_release(
        &self,
        lease_id: &str,
        clock: replica::Clock<'_>,
    ) -> Result<replica::Lease, StoreError> {
        self.run(Call::Write, self.end_or_renew_async(lease_id, None, clock))
    }

    fn replica_submit(
        &self,
        lease_id: &str,
        submission: &replica::ReplicaSubmission,
        clock: replica::Clock<'_>,
        validator: Validator<'_>,
        seam: Option<replica::Seam<'_>>,
    ) -> Result<Receipt, StoreError> {
        self.replica_submit_pg(lease_id, submission, clock, validator, seam)
    }

    fn replica_changes(
        &self,
        lease_id: &str,
        target: &str,
        after: Option<&str>,
        limit: Option<u32>,
        clock: replica::Clock<'_>,
    ) -> Result<ReplayPage, StoreError> {
        self.replica_changes_pg(lease_id, target, after, limit, clock)
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

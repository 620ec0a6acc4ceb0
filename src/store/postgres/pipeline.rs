//! A submission in two round trips (K3–K5, W7): the decisions are the ones `submit.rs` makes,
//! the I/O is pipelined.
//!
//! 1. *Boundary and plan read*, pipelined on one connection: `BEGIN` with the transaction's
//!    lock and statement limits; `patchdiff_enter_submission` (migration 3: request-key
//!    recovery, then — only for an unused key — `pg_advisory_xact_lock` and recovery again
//!    under it); the target row; the named observations; the transform steps; and, when this
//!    process caches an earlier revision of the target, the journal since it. Statements after
//!    the lock run on fresh snapshots (READ COMMITTED), so they see every commit made before
//!    the boundary was granted, as the separate reads did.
//! 2. Validation runs here, holding the boundary, with no round trip.
//! 3. *Commit*, pipelined: `patchdiff_commit_attempt` (locks the row, checks that the target did
//!    not move, writes journal, snapshot when due, row and attempt) and `COMMIT`, whose answer
//!    waits for the WAL flush (`synchronous_commit = on`). When the function fails the
//!    transaction is aborted and the pipelined `COMMIT` only ends it: nothing is recorded.
//!
//! A save between the plan and the commit changes the row's version and snapshot counters the
//! journal entry is decided from; the function then refuses (`PD002`), nothing is recorded, and
//! the submission runs again on the statement-per-read path of `submit.rs`, which re-reads the
//! row under `FOR UPDATE` — the outcome is the one that path would have given. A read the plan
//! needs that the pipeline did not carry (a cold cache, a base older than the cached revision)
//! is made with `rows.rs`'s reads, in the same transaction.
//!
//! A transaction opened here is owned by [`OpenTx`]: ended with `COMMIT` or `ROLLBACK`, the
//! connection goes back to the pool; abandoned (a deadline, a panic) the connection is closed
//! instead, and the server rolls the transaction back and releases the boundary.

use tokio_postgres::types::ToSql;

use super::profile::SubmissionPhase;
use super::*;

pub(super) type Param<'a> = &'a (dyn ToSql + Sync);

/// SQLSTATE `patchdiff_commit_attempt` raises when the target's incarnation or revision moved.
const TARGET_MOVED: &str = "PD001";
/// SQLSTATE it raises when a save changed the row's version or snapshot counters.
const TARGET_SAVED: &str = "PD002";

const ENTER_SQL: &str = "SELECT target_id, submission_sha256, receipt, locked \
     FROM patchdiff_enter_submission($1, $2, $3)";
const OBSERVATIONS_SQL: &str = "SELECT o.observation_id, o.revision, o.kind, o.name, \
     o.start_byte, o.end_byte, o.start_line, o.end_line, o.sha256 \
     FROM observations o JOIN targets t ON o.target_id = t.id \
     WHERE t.name = $1 AND o.observation_id = ANY($2)";
const STEPS_SQL: &str = "SELECT j.revision, j.edits FROM journal j JOIN targets t \
     ON j.target_id = t.id WHERE t.name = $1 AND j.kind = 'edit' \
     AND j.revision > LEAST($2::BIGINT, (SELECT min(o.revision) FROM observations o \
         WHERE o.target_id = t.id AND o.observation_id = ANY($3))) \
     AND j.revision <= t.revision ORDER BY j.revision";
/// The journal after a cached revision `$3` of incarnation `$2`, at most 64 entries (past that
/// the snapshot path of `rows.rs` is cheaper).
const SINCE_CACHED_SQL: &str = "SELECT j.revision, j.sha256, j.edits, j.text FROM journal j \
     JOIN targets t ON j.target_id = t.id WHERE t.name = $1 AND t.incarnation = $2 \
     AND j.kind = 'edit' AND j.revision > $3 AND j.revision <= t.revision \
     AND t.revision - $3 <= 64 ORDER BY j.revision";
const COMMIT_ATTEMPT_SQL: &str = "SELECT patchdiff_commit_attempt($1, $2, $3, $4, $5, $6, $7, \
     $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)";

/// What the pipelined submission decided: a receipt, or "decide again on the careful path".
pub(super) enum Pipelined {
    Done(Box<Receipt>),
    SavedMeanwhile,
}

/// A connection inside a transaction this module began (see the module docs).
struct OpenTx {
    client: Option<Object>,
}

impl OpenTx {
    fn client(&self) -> &Object {
        self.client.as_ref().expect("present until finished")
    }

    /// The transaction ended (`result` of its `COMMIT`/`ROLLBACK`): the connection goes back
    /// to the pool when it ended cleanly, else it is closed.
    fn finish(mut self, ended_cleanly: bool) {
        if let Some(c) = self.client.take()
            && !ended_cleanly
        {
            drop(Object::take(c));
        }
    }
}

impl Drop for OpenTx {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            // Abandoned mid-transaction: close the connection, the server rolls back.
            drop(Object::take(c));
        }
    }
}

/// The database error's SQLSTATE, if the error came from the server.
fn sqlstate(e: &tokio_postgres::Error) -> Option<&str> {
    e.as_db_error().map(|d| d.code().code())
}

/// `patchdiff_commit_attempt`'s parameters (migration 3; `patchdiff_submit_one` takes the same
/// after its own two): the row the plan was decided on, the attempt, and an accepted edit's
/// journal entry, new row counters and snapshot when due (all `NULL` for a rejected attempt).
pub(super) struct CommitArgs<'a> {
    t: &'a TargetRow,
    revision: i64,
    version: i64,
    edits_since: i64,
    bytes_since: i64,
    receipt: &'a Receipt,
    key: &'a [u8],
    submission_sha: &'a str,
    attempt_revision: i64,
    reason_codes: String,
    receipt_text: &'a str,
    sha256: Option<&'a str>,
    byte_len: Option<i64>,
    since_edits: Option<i64>,
    since_bytes: Option<i64>,
    edits: Option<String>,
    text: Option<Vec<u8>>,
    outcome: &'static str,
    snapshot: Option<&'a [u8]>,
}

impl<'a> CommitArgs<'a> {
    pub(super) fn new(
        t: &'a TargetRow,
        submission_sha: &'a str,
        receipt: &'a Receipt,
        receipt_text: &'a str,
        applied: Option<&'a shared::Applied>,
    ) -> Self {
        let edited = applied.map(|a| (a, t.after_edit(a)));
        CommitArgs {
            t,
            revision: i(t.revision),
            version: i(t.version),
            edits_since: i(t.edits_since_snapshot),
            bytes_since: i(t.bytes_since_snapshot),
            receipt,
            key: receipt.request_key.as_bytes(),
            submission_sha,
            attempt_revision: i(receipt.revision),
            reason_codes: serde_json::to_string(&receipt.reason_codes).unwrap_or_default(),
            receipt_text,
            sha256: applied.map(|a| a.sha256.as_str()),
            byte_len: applied.map(|a| a.new_content.len() as i64),
            since_edits: edited.as_ref().map(|(_, row)| i(row.since_edits)),
            since_bytes: edited.as_ref().map(|(_, row)| i(row.since_bytes)),
            edits: applied.map(|a| shared::encode_edits(&a.edits)),
            text: applied.map(|a| shared::joined_text(&a.edits).into_bytes()),
            outcome: receipt.outcome.as_str(),
            snapshot: edited
                .as_ref()
                .filter(|(_, row)| row.snapshot)
                .map(|(a, _)| a.new_content.as_bytes()),
        }
    }

    /// The 20 parameters, in the functions' order.
    pub(super) fn params(&self) -> [Param<'_>; 20] {
        [
            &self.t.id,
            &self.t.incarnation,
            &self.revision,
            &self.version,
            &self.edits_since,
            &self.bytes_since,
            &self.receipt.attempt_id,
            &self.key,
            &self.submission_sha,
            &self.outcome,
            &self.attempt_revision,
            &self.reason_codes,
            &self.receipt_text,
            &self.sha256,
            &self.byte_len,
            &self.since_edits,
            &self.since_bytes,
            &self.edits,
            &self.text,
            &self.snapshot,
        ]
    }
}

impl PostgresStore {
    /// `ROLLBACK` of a transaction that recorded nothing, then `result`.
    async fn roll_back<T>(
        &self,
        tx: OpenTx,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let ended = self
            .profile
            .round_trip(
                SubmissionPhase::Rollback,
                tx.client().batch_execute("ROLLBACK"),
            )
            .await;
        tx.finish(ended.is_ok());
        result
    }

    /// K3–K5, W7: one submission in two round trips (module docs). The caller has checked the
    /// submission's shape (`validate_submission`).
    pub(super) async fn submit_pipelined(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        strict: bool,
        validator: Validator<'_>,
    ) -> Result<Pipelined, StoreError> {
        let client = self.client().await?;
        let target_sql = format!("SELECT {TARGET_COLS} FROM targets WHERE name = $1");
        let (enter, target, observations, steps, since) = futures::try_join!(
            client.prepare_cached(ENTER_SQL),
            client.prepare_cached(&target_sql),
            client.prepare_cached(OBSERVATIONS_SQL),
            client.prepare_cached(STEPS_SQL),
            client.prepare_cached(SINCE_CACHED_SQL),
        )?;
        let lock = self.lock_timeout();
        let bound = u128::from(lock) + STATEMENT_BUDGET.as_millis();
        let begin = format!(
            "BEGIN; SET LOCAL lock_timeout = {lock}; SET LOCAL statement_timeout = {bound}; \
             SET LOCAL idle_in_transaction_session_timeout = {bound}"
        );
        let ids: Vec<&str> = shared::observation_ids(submission);
        let base = i(submission.base_revision);
        let cached = self.cached_by_name(name);
        let (cached_incarnation, cached_revision) =
            cached.as_ref().map_or((String::new(), -1), |c| {
                (c.incarnation.clone(), i(c.revision))
            });
        let key = submission.request_key.as_bytes();
        let lock_key = target_lock_key(name);
        let tx = OpenTx {
            client: Some(client),
        };
        let c = tx.client();
        let enter_params: [Param; 3] = [&name, &key, &lock_key];
        let target_params: [Param; 1] = [&name];
        let observation_params: [Param; 2] = [&name, &ids];
        let step_params: [Param; 3] = [&name, &base, &ids];
        let since_params: [Param; 3] = [&name, &cached_incarnation, &cached_revision];
        let pipelined = self
            .profile
            .round_trip(
                SubmissionPhase::Lock,
                futures::future::join(
                    futures::future::join3(
                        c.batch_execute(&begin),
                        c.query(&enter, &enter_params),
                        c.query_opt(&target, &target_params),
                    ),
                    futures::future::join3(
                        c.query(&observations, &observation_params),
                        c.query(&steps, &step_params),
                        c.query(&since, &since_params),
                    ),
                ),
            )
            .await;
        let ((begun, entered, target), (observations, steps, since)) = pipelined;
        if let Err(e) = begun {
            // No transaction to end (or an unknown one): never reuse this connection.
            tx.finish(false);
            return Err(e.into());
        }
        let read = (|| -> Result<_, StoreError> {
            let entered = entered?;
            Ok((entered, target?, observations?, steps?, since?))
        })();
        let (entered, target, observations, steps, since) = match read {
            Ok(r) => r,
            Err(e) => return self.roll_back(tx, Err(e)).await,
        };
        // K4: what recovery decided (before or under the boundary).
        let Some(entered) = entered.first() else {
            return self
                .roll_back(tx, Err(StoreError::unknown_target(name)))
                .await;
        };
        let stored: Option<(String, String)> = entered
            .get::<_, Option<String>>(1)
            .map(|sha| (sha, entered.get(2)));
        match shared::recovered(stored, name, &submission.request_key, submission_sha) {
            Ok(Some(r)) => return self.roll_back(tx, Ok(Pipelined::Done(Box::new(r)))).await,
            Ok(None) => {}
            Err(e) => return self.roll_back(tx, Err(e)).await,
        }
        let planned = self
            .plan_from_pipeline(
                tx.client(),
                name,
                submission,
                target,
                observations,
                steps,
                since,
                cached,
            )
            .await;
        let read = match planned {
            Ok(r) => r,
            Err(e) => return self.roll_back(tx, Err(e)).await,
        };
        let plan = read.plan(name, submission, strict);
        let t0 = std::time::Instant::now();
        let validated =
            shared::decide_validation(plan, &read.target.language, &read.current, validator);
        self.profile
            .add(SubmissionPhase::Validation, 0, t0.elapsed());
        let (plan, warnings) = match validated {
            Ok(v) => v,
            Err(e) => return self.roll_back(tx, Err(e)).await,
        };
        let t = &read.target;
        let (receipt, applied) = shared::decided_receipt(t, submission, plan, warnings);
        self.commit_attempt(tx, t, submission_sha, receipt, applied)
            .await
    }

    /// The plan's read from the pipeline's rows, with any read it did not carry made now.
    #[allow(clippy::too_many_arguments)]
    async fn plan_from_pipeline(
        &self,
        c: &Object,
        name: &str,
        submission: &Submission,
        target: Option<Row>,
        observation_rows: Vec<Row>,
        step_rows: Vec<Row>,
        since: Vec<Row>,
        cached: Option<Cached>,
    ) -> Result<PlanRead, StoreError> {
        let t = target
            .as_ref()
            .map(target_from)
            .ok_or_else(|| StoreError::unknown_target(name))?;
        let base = submission.base_revision;
        shared::check_base(name, base, t.revision)?;
        let mut loaded: HashMap<String, ObservationRecord> = observation_rows
            .iter()
            .map(|r| Ok((r.get::<_, String>(0), observation_from(r, r.get(0), 1)?)))
            .collect::<Result<_, StoreError>>()?;
        let mut observations = HashMap::new();
        for id in shared::observation_ids(submission) {
            let o = loaded
                .remove(id)
                .ok_or_else(|| shared::unknown_observation(name, id))?;
            observations.insert(id.to_owned(), o);
        }
        let steps_from = shared::steps_from(&observations, base);
        let steps = step_rows
            .iter()
            .filter(|r| u(r, 0) > steps_from)
            .map(|r| shared::decode_edits(r.get(1)))
            .collect::<Result<Vec<_>, _>>()?;
        if steps.len() as u64 != t.revision - steps_from {
            return Err(StoreError::new(
                ErrorCode::Storage,
                format!(
                    "journal is missing edits between revisions {steps_from} and {}",
                    t.revision
                ),
            ));
        }
        self.remember_id(name, t.id);
        let cached = shared::usable_cache(cached.as_ref(), &t, t.revision).cloned();
        // The contents at the cached revision, at each revision the pipeline carried.
        let rebuilt = |to: u64| -> Option<Result<String, StoreError>> {
            let c = cached.as_ref()?;
            if to < c.revision {
                return None;
            }
            if to == c.revision {
                return Some(Ok(c.content.to_string()));
            }
            if since.len() as u64 != t.revision - c.revision {
                return None;
            }
            let rows = since.iter().filter(|r| u(r, 0) <= to).map(|r| {
                Ok(EditRow {
                    revision: u(r, 0),
                    sha256: r.get(1),
                    edits: r.get(2),
                    text: utf8(r.get(3), "journal text")?,
                })
            });
            Some(shared::rebuild(
                name,
                c.revision,
                c.content.to_string(),
                to,
                rows,
            ))
        };
        let current: Arc<str> = match rebuilt(t.revision) {
            Some(content) => {
                let content: Arc<str> = content?.into();
                self.cache
                    .remember(t.id, &t.incarnation, t.revision, content.clone());
                content
            }
            None => {
                self.profile
                    .round_trip(SubmissionPhase::PlanRead, self.current_content(c, &t))
                    .await?
            }
        };
        let base_content = if base == t.revision {
            None
        } else {
            Some(match rebuilt(base) {
                Some(content) => content?,
                None => {
                    self.profile
                        .round_trip(
                            SubmissionPhase::PlanRead,
                            content_at(c, self.cache.get(&t).as_ref(), &t, base),
                        )
                        .await?
                }
            })
        };
        Ok(PlanRead {
            target: t,
            observations,
            steps_from,
            steps,
            current,
            base_content,
        })
    }

    /// K3/K4: the decided attempt's writes and `COMMIT`, pipelined (module docs).
    async fn commit_attempt(
        &self,
        tx: OpenTx,
        t: &TargetRow,
        submission_sha: &str,
        receipt: Receipt,
        applied: Option<shared::Applied>,
    ) -> Result<Pipelined, StoreError> {
        let receipt_text = match shared::receipt_json(&receipt) {
            Ok(text) => text,
            Err(e) => return self.roll_back(tx, Err(e)).await,
        };
        let stmt = match tx.client().prepare_cached(COMMIT_ATTEMPT_SQL).await {
            Ok(s) => s,
            Err(e) => return self.roll_back(tx, Err(e.into())).await,
        };
        let args = CommitArgs::new(t, submission_sha, &receipt, &receipt_text, applied.as_ref());
        let params = args.params();
        let c = tx.client();
        let (written, committed) = self
            .profile
            .round_trip(
                SubmissionPhase::Commit,
                futures::future::join(c.execute(&stmt, &params), c.batch_execute("COMMIT")),
            )
            .await;
        let outcome = match written {
            Ok(_) => match &committed {
                Ok(()) => Ok(()),
                Err(e) => Err(StoreError::storage("committing the attempt", e)),
            },
            Err(e) if sqlstate(&e) == Some(TARGET_SAVED) => {
                tx.finish(committed.is_ok());
                return Ok(Pipelined::SavedMeanwhile);
            }
            Err(e) if sqlstate(&e) == Some(TARGET_MOVED) => Err(StoreError::new(
                ErrorCode::Storage,
                format!(
                    "target {} moved while this submission was being decided; nothing was recorded, read the target and submit again",
                    t.name
                ),
            )),
            Err(e) => Err(e.into()),
        };
        tx.finish(committed.is_ok());
        outcome?;
        self.committed(t, applied);
        Ok(Pipelined::Done(Box::new(receipt)))
    }
}

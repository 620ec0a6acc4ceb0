//! The submission path of the SQLite store (K3–K5, W7; R2): the plan's consistent read, the
//! target's boundary through validation, and the commit of the decided attempt — for an
//! agent's submission and, with a [`ReplicaGuard`](super::replica::ReplicaGuard), a replica's.

use super::*;

impl SqliteStore {
    /// K3: plans a submission against one consistent read of the target (the reader
    /// connection); the kernel's planning itself runs outside every lock.
    pub(super) fn plan(
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
            shared::check_base(name, base, t.revision)?;
            let mut observations = HashMap::new();
            for id in shared::observation_ids(submission) {
                observations.insert(id.to_owned(), load_observation(&tx, t.id, name, id)?);
            }
            let steps_from = shared::steps_from(&observations, base);
            let steps = load_steps(&tx, t.id, steps_from, t.revision)?;
            let current = self.current_content(&tx, &t)?;
            let base_content = if base == t.revision {
                None
            } else {
                Some(content_at(&tx, self.cache.get(&t).as_ref(), &t, base)?)
            };
            tx.finish()?;
            // The read PostgreSQL's plan_read makes too, here on the reader connection.
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
        let plan = r.plan(name, submission, strict);
        Ok(Planned::Plan {
            target: r.target,
            plan,
            current: r.current,
        })
    }

    /// K3/K4: records one decided attempt in a short write transaction. `None` when the target
    /// is no longer at the planned revision and incarnation (only a writer outside the target
    /// boundary — a re-init — can do that): the caller plans again.
    pub(super) fn commit_attempt(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        planned: &TargetRow,
        (plan, warnings): (Plan, Vec<String>),
        guard: Option<&replica::ReplicaGuard<'_>>,
    ) -> Result<Option<Receipt>, StoreError> {
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let t = target_row(&tx, name)?;
            // R1: the lease is checked where the commit serializes with release and renewal.
            if let Some(g) = guard {
                replica::check_lease_for(&tx, g.lease_id, &t, (g.clock)())?;
            }
            if let Some(r) =
                lookup_receipt(&tx, t.id, name, &submission.request_key, submission_sha)?
            {
                return Ok(Some(r));
            }
            if t.incarnation != planned.incarnation || t.revision != planned.revision {
                return Ok(None);
            }
            let (receipt, applied) = shared::decided_receipt(&t, submission, plan, warnings);
            if let Some(a) = &applied {
                Self::apply_edit(&tx, &t, a)?;
            }
            tx.prepare_cached(
                "INSERT INTO attempts (attempt_id, target_id, request_key, submission_sha256, \
                 outcome, revision, reason_codes, receipt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                receipt.attempt_id,
                t.id,
                submission.request_key,
                submission_sha,
                receipt.outcome.as_str(),
                i(receipt.revision),
                serde_json::to_string(&receipt.reason_codes).unwrap_or_default(),
                shared::receipt_json(&receipt)?
            ])?;
            tx.commit()?;
            if let Some(a) = applied {
                self.cache
                    .remember(t.id, &t.incarnation, a.revision, a.new_content.into());
            }
            Ok(Some(receipt))
        })
    }

    /// K3: journals an accepted edit, snapshots when due and moves the target row.
    fn apply_edit(conn: &Connection, t: &TargetRow, a: &shared::Applied) -> Result<(), StoreError> {
        insert_journal(conn, t.id, &shared::JournalRow::edit(t, a))?;
        let row = t.after_edit(a);
        if row.snapshot {
            write_snapshot(conn, t.id, a.revision, &a.new_content, &a.sha256)?;
        }
        conn.prepare_cached(
            "UPDATE targets SET revision = ?2, sha256 = ?3, byte_len = ?4, \
             edits_since_snapshot = ?5, bytes_since_snapshot = ?6 WHERE id = ?1",
        )?
        .execute(params![
            t.id,
            i(a.revision),
            a.sha256,
            a.new_content.len() as i64,
            i(row.since_edits),
            i(row.since_bytes)
        ])?;
        Ok(())
    }

    /// K3–K5: [`EditStore::submit_validated`], and with `guard` a replica's submission (R2):
    /// its lease is checked again inside the commit's transaction and its seam is called.
    pub(super) fn submit_with(
        &self,
        name: &str,
        submission: &Submission,
        strict: bool,
        validator: Validator<'_>,
        guard: Option<&replica::ReplicaGuard<'_>>,
    ) -> Result<Receipt, StoreError> {
        let submission_sha = submission_sha256(submission)?;
        // K4 first: recovery needs no lock, no validation and no discovery.
        if let Some(r) = self.with_reader(|conn| {
            let t = target_row(conn, name)?;
            lookup_receipt(conn, t.id, name, &submission.request_key, &submission_sha)
        })? {
            return Ok(r);
        }
        guard.inspect(|g| g.at(replica::ReplicaPoint::Recovered));
        validate_submission(submission)?;
        // K5: the target's boundary, held through planning, validation and commit (also against
        // other processes). Other targets' submissions, saves and reads never wait for it.
        let timeout = Duration::from_millis(
            self.lock_timeout_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        let _boundary = self.target_locks.acquire(name, timeout)?;
        guard.inspect(|g| g.at(replica::ReplicaPoint::BoundaryHeld));
        for _ in 0..COMMIT_ATTEMPTS {
            let (t, plan, current) = match self.plan(name, submission, &submission_sha, strict)? {
                Planned::Recovered(r) => return Ok(r),
                Planned::Plan {
                    target,
                    plan,
                    current,
                } => (target, plan, current),
            };
            guard.inspect(|g| g.at(replica::ReplicaPoint::Planned));
            // W7/W8: validate what an accepted plan would produce, outside every database lock.
            let (plan, warnings) =
                shared::decide_validation(plan, &t.language, &current, validator)?;
            guard.inspect(|g| g.at(replica::ReplicaPoint::BeforeCommit));
            if let Some(receipt) = self.commit_attempt(
                name,
                submission,
                &submission_sha,
                &t,
                (plan, warnings),
                guard,
            )? {
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
}

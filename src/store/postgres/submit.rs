//! The submission path of the PostgreSQL store (K3–K5, W7): request-key recovery, the plan's
//! reads inside the target's boundary, validation and the commit — for an agent's submission
//! and, with a `ReplicaGuard`, a replica's (R2).

use super::*;

impl PostgresStore {
    /// K4: request-key recovery in one statement (one round trip, one snapshot: no explicit
    /// transaction), `UNKNOWN_TARGET` when there is no such target.
    pub(super) async fn recover(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
    ) -> Result<Option<Receipt>, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT a.submission_sha256, a.receipt FROM targets t LEFT JOIN attempts a \
                 ON a.target_id = t.id AND a.request_key = $2 WHERE t.name = $1",
            )
            .await?;
        let row = self
            .profile
            .round_trip(
                super::profile::SubmissionPhase::Recovery,
                client.query_opt(&stmt, &[&name, &submission.request_key.as_bytes()]),
            )
            .await?
            .ok_or_else(|| StoreError::unknown_target(name))?;
        let stored = row
            .get::<_, Option<String>>(0)
            .map(|sha| (sha, row.get::<_, String>(1)));
        shared::recovered(stored, name, &submission.request_key, submission_sha)
    }

    /// K3: everything a plan is made from, read inside the target's boundary.
    pub(super) async fn plan_read(
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
    pub(super) async fn submit_locked(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        strict: bool,
        validator: Validator<'_>,
        guard: Option<&replica::ReplicaGuard<'_>>,
    ) -> Result<Receipt, StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        lock_target(&tx, name).await?;
        guard.inspect(|g| g.at(replica::ReplicaPoint::BoundaryHeld));
        let t = target_row(&tx, name).await?;
        // Another writer may have used the key before we took the boundary.
        if let Some(r) =
            lookup_receipt(&tx, t.id, name, &submission.request_key, submission_sha).await?
        {
            return Ok(r);
        }
        let read = self.plan_read(&tx, name, submission).await?;
        let plan = read.plan(name, submission, strict);
        guard.inspect(|g| g.at(replica::ReplicaPoint::Planned));
        let (plan, warnings) =
            shared::decide_validation(plan, &read.target.language, &read.current, validator)?;
        guard.inspect(|g| g.at(replica::ReplicaPoint::BeforeCommit));
        let t = target_row_locked(&tx, name, "UPDATE").await?;
        // R1: the lease row is held FOR SHARE until the commit, so a release or renewal waits
        // for it (and a commit after a release is impossible).
        if let Some(g) = guard {
            replica::check_lease_for(&tx, g.lease_id, &t, (g.clock)()).await?;
        }
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
    pub(super) async fn apply_edit(
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
}

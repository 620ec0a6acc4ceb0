//! Replica leases on PostgreSQL (R1–R3): lease rows, the checkpoint read (target rows held
//! `FOR SHARE`, so no commit lands inside it), and the lease check a replica submission repeats
//! inside its commit's transaction with the lease row held `FOR SHARE` (release and renewal
//! update it, so they wait for the commit).

pub(super) use crate::store::replica::*;

use super::*;

async fn lease_row(
    tx: &impl GenericClient,
    lease_id: &str,
    suffix: &str,
) -> Result<Option<LeaseRow>, StoreError> {
    let sql = format!(
        "SELECT lease_id, integration, granted_at_ms, expires_at_ms, released_at_ms \
         FROM replica_leases WHERE lease_id = $1{suffix}"
    );
    let stmt = tx.prepare_cached(&sql).await?;
    Ok(tx.query_opt(&stmt, &[&lease_id]).await?.map(|r| LeaseRow {
        lease_id: r.get(0),
        integration: r.get(1),
        granted_at_ms: u(&r, 2),
        expires_at_ms: u(&r, 3),
        released_at_ms: r.get::<_, Option<i64>>(4).map(|v| v as u64),
    }))
}

async fn lease_targets(
    tx: &impl GenericClient,
    lease_id: &str,
) -> Result<Vec<LeaseTargetRow>, StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT target_name, incarnation, checkpoint_cursor FROM replica_lease_targets \
             WHERE lease_id = $1 ORDER BY position",
        )
        .await?;
    Ok(tx
        .query(&stmt, &[&lease_id])
        .await?
        .into_iter()
        .map(|r| LeaseTargetRow {
            target_name: r.get(0),
            incarnation: r.get(1),
            checkpoint_cursor: r.get(2),
        })
        .collect())
}

/// R1: the live lease (held `FOR SHARE` until the transaction ends) and its row for `t`.
pub(super) async fn check_lease_for(
    tx: &impl GenericClient,
    lease_id: &str,
    t: &TargetRow,
    now_ms: u64,
) -> Result<LeaseTargetRow, StoreError> {
    let row = lease_row(tx, lease_id, " FOR SHARE").await?;
    check_live(lease_id, row.as_ref(), now_ms)?;
    let leased = lease_targets(tx, lease_id)
        .await?
        .into_iter()
        .find(|lt| lt.target_name == t.name);
    check_target(lease_id, &t.name, leased.as_ref(), Some(&t.incarnation))?;
    Ok(leased.expect("checked"))
}

impl PostgresStore {
    pub(super) async fn acquire_async(
        &self,
        request: &LeaseRequest,
        clock: Clock<'_>,
    ) -> Result<Checkpoint, StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        let lease_id = new_lease_id();
        let mut rows = Vec::new();
        for name in &request.targets {
            // FOR SHARE: a commit of this target waits until the checkpoint is taken.
            rows.push(target_row_locked(&tx, name, "SHARE").await?);
        }
        let now = clock();
        let expires = now.saturating_add(request.ttl_ms);
        tx.execute(
            "INSERT INTO replica_leases (lease_id, integration, granted_at_ms, expires_at_ms) \
             VALUES ($1, $2, $3, $4)",
            &[&lease_id, &request.integration, &i(now), &i(expires)],
        )
        .await?;
        let mut targets = Vec::new();
        for (position, t) in rows.into_iter().enumerate() {
            let cursor: i64 = tx
                .query_one(
                    "SELECT MAX(entry_id) FROM journal WHERE target_id = $1",
                    &[&t.id],
                )
                .await?
                .get(0);
            let content = self.current_content(&tx, &t).await?.to_string();
            tx.execute(
                "INSERT INTO replica_lease_targets (lease_id, target_id, target_name, \
                 incarnation, checkpoint_cursor, position) VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &lease_id,
                    &t.id,
                    &t.name,
                    &t.incarnation,
                    &cursor,
                    &(position as i64),
                ],
            )
            .await?;
            targets.push(CheckpointTarget {
                name: t.name,
                language: t.language,
                version: t.version,
                revision: t.revision,
                sha256: t.sha256,
                content,
                cursor: cursor.to_string(),
            });
        }
        tx.commit().await?;
        Ok(Checkpoint {
            lease: Lease {
                lease_id,
                integration: request.integration.clone(),
                granted_at_ms: now,
                expires_at_ms: expires,
                released_at_ms: None,
                targets: request.targets.clone(),
            },
            targets,
        })
    }

    /// R1: renew (`Some(ttl)`) or release (`None`) a live lease in one write transaction.
    pub(super) async fn end_or_renew_async(
        &self,
        lease_id: &str,
        ttl_ms: Option<u64>,
        clock: Clock<'_>,
    ) -> Result<Lease, StoreError> {
        let mut client = self.client().await?;
        let tx = self.write_tx(&mut client).await?;
        let row = lease_row(&tx, lease_id, " FOR UPDATE").await?;
        let now = clock();
        check_live(lease_id, row.as_ref(), now)?;
        let mut row = row.expect("checked");
        let leased = lease_targets(&tx, lease_id).await?;
        match ttl_ms {
            Some(ttl) => {
                for lt in &leased {
                    let t = target_row_opt(&tx, &lt.target_name, "").await?;
                    if t.map(|t| t.incarnation) != Some(lt.incarnation.clone()) {
                        return Err(invalidated(lease_id, &lt.target_name));
                    }
                }
                row.expires_at_ms = now.saturating_add(ttl);
                tx.execute(
                    "UPDATE replica_leases SET expires_at_ms = $2 WHERE lease_id = $1",
                    &[&lease_id, &i(row.expires_at_ms)],
                )
                .await?;
            }
            None => {
                row.released_at_ms = Some(now);
                tx.execute(
                    "UPDATE replica_leases SET released_at_ms = $2 WHERE lease_id = $1",
                    &[&lease_id, &i(now)],
                )
                .await?;
            }
        }
        tx.commit().await?;
        Ok(row.into_lease(leased.into_iter().map(|lt| lt.target_name).collect()))
    }

    /// R1/R2: the lease check and the entry and revision of `cursor` (default: the
    /// checkpoint's), in one read transaction.
    pub(super) async fn replica_base_async(
        &self,
        lease_id: &str,
        target: &str,
        cursor: Option<&str>,
        now_ms: u64,
    ) -> Result<(i64, u64), StoreError> {
        let mut client = self.client().await?;
        let tx = Self::read_tx(&mut client).await?;
        check_live(
            lease_id,
            lease_row(&tx, lease_id, "").await?.as_ref(),
            now_ms,
        )?;
        let leased = lease_targets(&tx, lease_id)
            .await?
            .into_iter()
            .find(|lt| lt.target_name == target);
        let t = target_row_opt(&tx, target, "").await?;
        check_target(
            lease_id,
            target,
            leased.as_ref(),
            t.as_ref().map(|t| t.incarnation.as_str()),
        )?;
        let (leased, t) = (leased.expect("checked"), t.expect("checked"));
        let entry = match cursor {
            Some(c) => cursor_entry(c, &leased)?,
            None => leased.checkpoint_cursor,
        };
        let revision = tx
            .query_opt(
                "SELECT revision FROM journal WHERE target_id = $1 AND entry_id = $2",
                &[&t.id, &entry],
            )
            .await?
            .map(|r| u(&r, 0))
            .ok_or_else(|| unknown_cursor(cursor.unwrap_or_default(), target))?;
        Ok((entry, revision))
    }

    pub(super) fn replica_submit_pg(
        &self,
        lease_id: &str,
        submission: &ReplicaSubmission,
        clock: Clock<'_>,
        validator: Validator<'_>,
        seam: Option<Seam<'_>>,
    ) -> Result<Receipt, StoreError> {
        check_submission(submission)?;
        let name = submission.target.as_str();
        let (_, base) = self.run(
            Call::Read,
            self.replica_base_async(lease_id, name, Some(&submission.cursor), clock()),
        )?;
        let guard = ReplicaGuard {
            lease_id,
            clock,
            seam,
        };
        guard.at(ReplicaPoint::LeaseChecked);
        let plain = submission.to_submission(base);
        let submission_sha = submission_sha256(&plain)?;
        if let Some(r) = self.run(Call::Read, self.recover(name, &plain, &submission_sha))? {
            return Ok(r);
        }
        guard.at(ReplicaPoint::Recovered);
        validate_submission(&plain)?;
        let outcome = self.run(
            Call::Write,
            self.submit_locked(
                name,
                &plain,
                &submission_sha,
                false,
                validator,
                Some(&guard),
            ),
        );
        self.profile.submitted();
        outcome.map_err(|e| self.busy(name, e))
    }

    pub(super) fn replica_changes_pg(
        &self,
        lease_id: &str,
        target: &str,
        after: Option<&str>,
        limit: Option<u32>,
        clock: Clock<'_>,
    ) -> Result<ReplayPage, StoreError> {
        let (entry, _) = self.run(
            Call::Read,
            self.replica_base_async(lease_id, target, after, clock()),
        )?;
        let page = self.replay(target, Some(&entry.to_string()), limit)?;
        // A re-init between the check and the read would show another incarnation's journal.
        self.run(
            Call::Read,
            self.replica_base_async(lease_id, target, after, clock()),
        )?;
        Ok(page)
    }
}

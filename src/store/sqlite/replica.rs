//! Replica leases on SQLite (R1–R3): lease rows, the checkpoint read, and the lease check a
//! replica submission repeats inside its commit's `BEGIN IMMEDIATE` transaction (which
//! serializes it with release and renewal, also across processes).

pub(super) use crate::store::replica::*;

use super::*;

fn lease_row(conn: &Connection, lease_id: &str) -> Result<Option<LeaseRow>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT lease_id, integration, granted_at_ms, expires_at_ms, released_at_ms \
             FROM replica_leases WHERE lease_id = ?1",
        )?
        .query_row(params![lease_id], |r| {
            Ok(LeaseRow {
                lease_id: r.get(0)?,
                integration: r.get(1)?,
                granted_at_ms: r.get::<_, i64>(2)? as u64,
                expires_at_ms: r.get::<_, i64>(3)? as u64,
                released_at_ms: r.get::<_, Option<i64>>(4)?.map(|v| v as u64),
            })
        })
        .optional()?)
}

fn lease_targets(conn: &Connection, lease_id: &str) -> Result<Vec<LeaseTargetRow>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT target_name, incarnation, checkpoint_cursor FROM replica_lease_targets \
         WHERE lease_id = ?1 ORDER BY position",
    )?;
    let rows = stmt
        .query_map(params![lease_id], |r| {
            Ok(LeaseTargetRow {
                target_name: r.get(0)?,
                incarnation: r.get(1)?,
                checkpoint_cursor: r.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// R1: the live lease and its row for target `t` (checked against `t`'s incarnation).
pub(super) fn check_lease_for(
    conn: &Connection,
    lease_id: &str,
    t: &TargetRow,
    now_ms: u64,
) -> Result<LeaseTargetRow, StoreError> {
    check_live(lease_id, lease_row(conn, lease_id)?.as_ref(), now_ms)?;
    let leased = lease_targets(conn, lease_id)?
        .into_iter()
        .find(|lt| lt.target_name == t.name);
    check_target(lease_id, &t.name, leased.as_ref(), Some(&t.incarnation))?;
    Ok(leased.expect("checked"))
}

/// R1: the lease live, and every leased target still at its leased incarnation.
fn check_whole_lease(
    conn: &Connection,
    lease_id: &str,
    now_ms: u64,
) -> Result<LeaseRow, StoreError> {
    let row = lease_row(conn, lease_id)?;
    check_live(lease_id, row.as_ref(), now_ms)?;
    for lt in lease_targets(conn, lease_id)? {
        let now = target_row_opt(conn, &lt.target_name)?;
        if now.map(|t| t.incarnation) != Some(lt.incarnation.clone()) {
            return Err(invalidated(lease_id, &lt.target_name));
        }
    }
    Ok(row.expect("checked"))
}

fn names(conn: &Connection, lease_id: &str) -> Result<Vec<String>, StoreError> {
    Ok(lease_targets(conn, lease_id)?
        .into_iter()
        .map(|lt| lt.target_name)
        .collect())
}

/// The revision of target `t` at journal entry `entry` (`None`: not an entry of `t`).
fn revision_at(conn: &Connection, t: &TargetRow, entry: i64) -> Result<Option<u64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT revision FROM journal WHERE target_id = ?1 AND entry_id = ?2")?
        .query_row(params![t.id, entry], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|v| v as u64))
}

impl SqliteStore {
    pub(super) fn acquire(
        &self,
        request: &LeaseRequest,
        clock: Clock<'_>,
    ) -> Result<Checkpoint, StoreError> {
        check_lease_request(request)?;
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = clock();
            let lease_id = new_lease_id();
            let expires = now.saturating_add(request.ttl_ms);
            tx.execute(
                "INSERT INTO replica_leases (lease_id, integration, granted_at_ms, expires_at_ms) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![lease_id, request.integration, i(now), i(expires)],
            )?;
            let mut targets = Vec::new();
            for (position, name) in request.targets.iter().enumerate() {
                let t = target_row(&tx, name)?;
                let cursor: i64 = tx
                    .prepare_cached("SELECT MAX(entry_id) FROM journal WHERE target_id = ?1")?
                    .query_row(params![t.id], |r| r.get(0))?;
                let content = self.current_content(&tx, &t)?.to_string();
                tx.execute(
                    "INSERT INTO replica_lease_targets (lease_id, target_id, target_name, \
                     incarnation, checkpoint_cursor, position) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        lease_id,
                        t.id,
                        t.name,
                        t.incarnation,
                        cursor,
                        position as i64
                    ],
                )?;
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
            tx.commit()?;
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
        })
    }

    /// R1: renew (`Some(ttl)`) or release (`None`) a live lease in one write transaction.
    pub(super) fn end_or_renew(
        &self,
        lease_id: &str,
        ttl_ms: Option<u64>,
        clock: Clock<'_>,
    ) -> Result<Lease, StoreError> {
        if let Some(ttl) = ttl_ms {
            check_ttl(ttl)?;
        }
        self.with_writer(|conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = clock();
            let mut row = match ttl_ms {
                Some(_) => check_whole_lease(&tx, lease_id, now)?,
                None => {
                    let row = lease_row(&tx, lease_id)?;
                    check_live(lease_id, row.as_ref(), now)?;
                    row.expect("checked")
                }
            };
            match ttl_ms {
                Some(ttl) => {
                    row.expires_at_ms = now.saturating_add(ttl);
                    tx.execute(
                        "UPDATE replica_leases SET expires_at_ms = ?2 WHERE lease_id = ?1",
                        params![lease_id, i(row.expires_at_ms)],
                    )?;
                }
                None => {
                    row.released_at_ms = Some(now);
                    tx.execute(
                        "UPDATE replica_leases SET released_at_ms = ?2 WHERE lease_id = ?1",
                        params![lease_id, i(now)],
                    )?;
                }
            }
            let targets = names(&tx, lease_id)?;
            tx.commit()?;
            Ok(row.into_lease(targets))
        })
    }

    /// R1/R2: the lease check and the cursor's revision, on the reader.
    fn replica_base(
        &self,
        lease_id: &str,
        target: &str,
        cursor: Option<&str>,
        now_ms: u64,
    ) -> Result<(LeaseTargetRow, i64, u64), StoreError> {
        self.with_reader(|conn| {
            let tx = conn.transaction()?;
            let lease = lease_row(&tx, lease_id)?;
            check_live(lease_id, lease.as_ref(), now_ms)?;
            let leased = lease_targets(&tx, lease_id)?
                .into_iter()
                .find(|lt| lt.target_name == target);
            let t = target_row_opt(&tx, target)?;
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
            let revision = revision_at(&tx, &t, entry)?
                .ok_or_else(|| unknown_cursor(cursor.unwrap_or_default(), target))?;
            tx.finish()?;
            Ok((leased, entry, revision))
        })
    }

    pub(super) fn replica_submit_sqlite(
        &self,
        lease_id: &str,
        submission: &ReplicaSubmission,
        clock: Clock<'_>,
        validator: Validator<'_>,
        seam: Option<Seam<'_>>,
    ) -> Result<Receipt, StoreError> {
        check_submission(submission)?;
        let (_, _, base) = self.replica_base(
            lease_id,
            &submission.target,
            Some(&submission.cursor),
            clock(),
        )?;
        let guard = ReplicaGuard {
            lease_id,
            clock,
            seam,
        };
        guard.at(ReplicaPoint::LeaseChecked);
        self.submit_with(
            &submission.target,
            &submission.to_submission(base),
            false,
            validator,
            Some(&guard),
        )
    }

    pub(super) fn replica_changes_sqlite(
        &self,
        lease_id: &str,
        target: &str,
        after: Option<&str>,
        limit: Option<u32>,
        clock: Clock<'_>,
    ) -> Result<ReplayPage, StoreError> {
        let (_, entry, _) = self.replica_base(lease_id, target, after, clock())?;
        let page = self.replay(target, Some(&entry.to_string()), limit)?;
        // A re-init between the check and the read would show another incarnation's journal.
        self.replica_base(lease_id, target, after, clock())?;
        Ok(page)
    }
}

//! The PostgreSQL store's other operations: init, saves, observations, replay, audit, list.

use super::*;

impl PostgresStore {
    pub(super) async fn init_async(
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

    pub(super) async fn read_version(
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

    pub(super) async fn save_async(&self, name: &str) -> Result<SaveResult, StoreError> {
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

    pub(super) async fn observe_async(
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

    /// K6: one replay page in one statement (one round trip, one snapshot): the target row
    /// joined with its journal after the cursor, so an unknown target is told from an empty
    /// page.
    pub(super) async fn replay_async(
        &self,
        name: &str,
        after: Option<&str>,
        after_id: i64,
        limit: u32,
    ) -> Result<ReplayPage, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT j.entry_id, j.kind, j.revision, j.version, j.attempt_id, j.request_key, \
                 j.sha256, j.edits, j.text FROM targets t LEFT JOIN LATERAL ( \
                     SELECT * FROM journal WHERE target_id = t.id AND entry_id > $2 \
                     ORDER BY entry_id LIMIT $3) j ON true \
                 WHERE t.name = $1 ORDER BY j.entry_id",
            )
            .await?;
        let rows = client
            .query(&stmt, &[&name, &after_id, &(limit as i64 + 1)])
            .await?;
        if rows.is_empty() {
            return Err(StoreError::unknown_target(name));
        }
        let rows = rows
            .into_iter()
            // A target with no entry after the cursor: one row of NULLs.
            .filter(|r| r.get::<_, Option<i64>>(0).is_some())
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

    pub(super) async fn audit_async(&self, name: &str) -> Result<Audit, StoreError> {
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

    pub(super) async fn list_async(&self) -> Result<Vec<TargetSummary>, StoreError> {
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

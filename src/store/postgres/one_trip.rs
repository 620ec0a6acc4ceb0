//! A submission in one round trip (K3–K5) when the client can plan it from what it already
//! holds and no validator has to run between the plan and the commit ([`EditStore::submit`]).
//!
//! After each commit this process knows the target's row and content as the commit left them
//! (its *row hint*, with the content in the shared [`ContentCache`]). A next submission on a
//! current base that names no observation is planned from that view before anything is sent;
//! then one statement, `patchdiff_submit_one` (migration 6) in its own implicit transaction,
//! does on the server and in this order: request-key recovery (K4, before and again under the
//! boundary), the target's boundary (K5, `pg_try_advisory_xact_lock`), the check that the
//! target's row is still the hinted one (incarnation, revision, version, snapshot counters:
//! the whole input of the plan), and migration 3's commit of the decided attempt. The
//! statement's answer ends with `ReadyForQuery`, which the server sends only after the implicit
//! transaction committed and its WAL was flushed (`synchronous_commit = on`), as on the
//! two-trip path; `query_opt` returns only then.
//!
//! The statement waits for no lock — a boundary or row another writer holds makes it *stale* —
//! so the session's `statement_timeout` ([`STATEMENT_BUDGET`]) bounds it, as it bounds a read,
//! and no transaction outlives it: an error leaves the connection idle, not mid-transaction.
//! Sending `BEGIN` with the transaction's limits and `COMMIT` around it (migration 4's way)
//! cost the server 0.4 ms of CPU per submission, measured by `cargo bench --bench backends`.
//!
//! Outcomes are the two-trip path's: the plan is the kernel's over the same content, revision
//! and steps (none: the base is the hinted revision), and it is committed only if, under the
//! boundary, the row is still the one it was made from — else (*stale*: another writer, a save,
//! a reset, or the boundary held) nothing is written, the implicit transaction commits empty
//! (no WAL flush), and the submission runs on the two-trip path of `pipeline.rs`, which waits
//! for the boundary under its limits. A target that was stale backs off:
//! its next one-trip tries are skipped (1, 2, 4 … at most [`MAX_BACKOFF`] submissions), so a
//! contended target pays the wasted trip rarely. Submissions with a validator
//! (`submit_validated`) never take this path: their validator runs under the boundary.

use super::pipeline::{CommitArgs, Param};
use super::profile::SubmissionPhase;
use super::*;

/// One-trip attempts skipped at most after a stale one: 32 submissions.
pub const MAX_BACKOFF: u32 = 32;

const SUBMIT_ONE_SQL: &str = "SELECT status, submission_sha256, receipt FROM \
     patchdiff_submit_one($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
     $16, $17, $18, $19, $20, $21, $22)";

/// What this process last knew of a target's row, and how contended one-trip tries were.
#[derive(Default)]
pub(super) struct RowHint {
    row: Option<TargetRow>,
    /// One-trip opportunities still to skip.
    skip: u32,
    /// The next skip after a stale try (doubles up to [`MAX_BACKOFF`]).
    backoff: u32,
}

impl PostgresStore {
    /// Remembers `row` as target `row.name`'s row after this process's commit.
    pub(super) fn hint_row(&self, row: TargetRow) {
        let mut hints = shared::lock(&self.hints);
        let name = row.name.clone();
        hints.entry(name).or_default().row = Some(row);
    }

    /// The hinted row for a one-trip try of `name`, `None` while backing off.
    fn hinted(&self, name: &str) -> Option<TargetRow> {
        let mut hints = shared::lock(&self.hints);
        let h = hints.get_mut(name)?;
        if h.skip > 0 {
            h.skip -= 1;
            return None;
        }
        h.row.clone()
    }

    fn one_trip_result(&self, name: &str, stale: bool) {
        let mut hints = shared::lock(&self.hints);
        let h = hints.entry(name.to_owned()).or_default();
        if stale {
            h.row = None;
            h.backoff = (h.backoff * 2).clamp(1, MAX_BACKOFF);
            h.skip = h.backoff;
        } else {
            h.backoff = 0;
        }
    }

    /// K3–K5: `submission` in one round trip (module docs), or `None` when it must take the
    /// two-trip path (no usable hint, a stale hint, observations to read, a stale base). The
    /// caller has checked the submission's shape.
    pub(super) async fn submit_one_trip(
        &self,
        name: &str,
        submission: &Submission,
        submission_sha: &str,
        strict: bool,
    ) -> Result<Option<Receipt>, StoreError> {
        if !shared::observation_ids(submission).is_empty() {
            return Ok(None);
        }
        let Some(t) = self.hinted(name) else {
            return Ok(None);
        };
        let cached = self.cache.get(&t).filter(|c| c.revision == t.revision);
        let Some(cached) = cached else {
            return Ok(None);
        };
        if submission.base_revision != t.revision {
            return Ok(None);
        }
        let read = PlanRead {
            target: t,
            observations: HashMap::new(),
            steps_from: submission.base_revision,
            steps: Vec::new(),
            current: cached.content,
            base_content: None,
        };
        let plan = read.plan(name, submission, strict);
        let t = &read.target;
        let (receipt, applied) = shared::decided_receipt(t, submission, plan, Vec::new());
        let receipt_text = shared::receipt_json(&receipt)?;
        let args = CommitArgs::new(t, submission_sha, &receipt, &receipt_text, applied.as_ref());
        let lock_key = target_lock_key(name);
        let mut params: Vec<Param> = vec![&name, &lock_key];
        params.extend(args.params());

        let client = self.client().await?;
        let stmt = client.prepare_cached(SUBMIT_ONE_SQL).await?;
        let row = self
            .profile
            .round_trip(SubmissionPhase::OneTrip, client.query_opt(&stmt, &params))
            .await?;
        let Some(row) = row else {
            return Err(StoreError::storage(
                "submitting in one trip",
                "patchdiff_submit_one returned no row",
            ));
        };
        let status: String = row.get(0);
        match status.as_str() {
            "committed" => {
                self.one_trip_result(name, false);
                self.committed(t, applied);
                Ok(Some(receipt))
            }
            "recovered" => {
                self.one_trip_result(name, false);
                let stored = row
                    .get::<_, Option<String>>(1)
                    .map(|sha| (sha, row.get::<_, String>(2)));
                shared::recovered(stored, name, &submission.request_key, submission_sha)
            }
            "unknown" => Err(StoreError::unknown_target(name)),
            _ => {
                self.one_trip_result(name, true);
                Ok(None)
            }
        }
    }

    /// After this process committed an attempt decided on row `t`: the content cache and the
    /// row hint hold what the commit left.
    pub(super) fn committed(&self, t: &TargetRow, applied: Option<shared::Applied>) {
        let mut row = t.clone();
        if let Some(a) = applied {
            let edited = t.after_edit(&a);
            row.revision = a.revision;
            row.sha256 = a.sha256;
            row.edits_since_snapshot = edited.since_edits;
            row.bytes_since_snapshot = edited.since_bytes;
            self.cache
                .remember(t.id, &t.incarnation, a.revision, a.new_content.into());
        }
        self.hint_row(row);
    }
}

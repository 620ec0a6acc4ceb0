//! One pass of `patchdiff replica sync` over its targets (R2–R4): the refusal of a non-text
//! change, the submission recorded before it is sent, the catch-up from the file's cursor and
//! the write-back that never replaces an unsubmitted local change (see `replica::sync`).

use super::*;

impl Sync {
    /// One pass over every target; the number of targets whose change was refused or
    /// rejected. Errors stop the sync: the lease ended, or a submission's outcome stayed
    /// unknown (it stays recorded and is retried by key on the next start).
    pub(super) async fn pass(&mut self) -> Result<usize, String> {
        self.renew_if_due().await?;
        let mut problems = 0;
        for i in 0..self.state.targets.len() {
            if self.sync_target(i).await? {
                problems += 1;
            }
        }
        Ok(problems)
    }

    /// R4: reports a refused change of target `i` (once per content in the long-running
    /// mode); nothing of the target is submitted or written.
    fn refuse(&mut self, i: usize, bytes: &[u8], why: &str) {
        let digest = sha256_hex(bytes);
        if !self.once && self.refused.get(&i) == Some(&digest) {
            return;
        }
        self.refused.insert(i, digest);
        let t = &self.state.targets[i];
        let path = self.dir.join(&t.file);
        self.out.event(
            "refused",
            json!({"target": t.target, "file": path, "reason": why}),
            || {
                format!(
                    "{}: refused: {why}; a replica submits UTF-8 text only, nothing was applied \
                     and the file is left as it is",
                    path.display()
                )
            },
        );
    }

    /// One target's pass (see the module docs); true when its change was refused or rejected.
    async fn sync_target(&mut self, i: usize) -> Result<bool, String> {
        let t = self.state.targets[i].clone();
        let path = self.dir.join(&t.file);
        let read = read_file(&path)?;
        // The submission to settle: one an interrupted pass left, or this file's change.
        let pending = match (&t.pending, &read) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(bytes)) if bytes.as_slice() != t.content.as_bytes() => {
                let text = match mirror::text_of(bytes) {
                    Ok(text) => text,
                    Err(why) => {
                        self.refuse(i, bytes, &why);
                        return Ok(true);
                    }
                };
                let operations = match mirror::operations(&t.content, text) {
                    Ok(ops) => ops,
                    Err(why) => {
                        self.refuse(i, bytes, &why);
                        return Ok(true);
                    }
                };
                let new_sha256 = sha256_hex(text);
                let p = Pending {
                    request_key: mirror::request_key(
                        &self.state.lease_id,
                        &t.target,
                        &t.cursor,
                        &new_sha256,
                    ),
                    cursor: t.cursor.clone(),
                    expected_sha256: t.sha256.clone(),
                    operations,
                    new_sha256,
                };
                // R3: recorded before it is sent, so a lost answer is retried by key.
                self.state.targets[i].pending = Some(p.clone());
                self.save_state()?;
                Some(p)
            }
            _ => None,
        };
        self.refused.remove(&i);
        let receipt = match &pending {
            Some(p) => match self.submit(&t, p).await {
                Ok(r) => Some(r),
                Err(Failure::Refused { code, message }) => {
                    self.state.targets[i].pending = None;
                    self.save_state()?;
                    self.out.event(
                        "error",
                        json!({"target": t.target, "file": path, "request_key": p.request_key,
                               "code": code, "message": message}),
                        || {
                            format!(
                                "{}: the submission was refused ({code}: {message}); nothing was \
                                 applied, the file is left as it is",
                                path.display()
                            )
                        },
                    );
                    return Ok(true);
                }
                Err(Failure::Lost(m)) => {
                    return Err(format!(
                        "the outcome of submission {} for {} is unknown ({m}); it stays recorded \
                         in {STATE_DIR} and is retried by its request key when the sync runs again",
                        p.request_key,
                        path.display()
                    ));
                }
            },
            None => None,
        };
        let caught = self
            .catch_up(&t, pending.as_ref().map(|p| p.request_key.as_str()))
            .await?;
        let problem = self.write_back(i, &path, &t, pending.as_ref(), receipt.as_ref(), caught)?;
        Ok(problem)
    }

    /// R2: sends `p` (again, if an earlier pass lost its answer); the receipt.
    async fn submit(&mut self, t: &TargetState, p: &Pending) -> Result<Receipt, Failure> {
        let args = json!({
            "lease_id": self.state.lease_id,
            "target": t.target,
            "request_key": p.request_key,
            "cursor": p.cursor,
            "expected_sha256": p.expected_sha256,
            "operations": p.operations,
        });
        let v = self.link.call("patchdiff_replica_submit", args).await?;
        let receipt: Receipt = serde_json::from_value(v.clone())
            .map_err(|e| Failure::Lost(format!("the answer is not a receipt ({e}): {v}")))?;
        let path = self.dir.join(&t.file);
        self.out.event(
            "submitted",
            json!({"target": t.target, "file": path, "request_key": p.request_key,
                   "receipt": v}),
            || {
                let (o, rev) = (receipt.outcome.as_str(), receipt.revision);
                let why = if receipt.reasons.is_empty() {
                    String::new()
                } else {
                    format!(": {}", receipt.reasons.join("; "))
                };
                format!(
                    "{} → {o} at revision {rev} (request key {}){why}",
                    path.display(),
                    p.request_key
                )
            },
        );
        Ok(receipt)
    }

    /// R3: the changes after the file's cursor applied to its content, page by page:
    /// the canonical state, and the state right after the entry of `own_key` (this sync's
    /// submission) if it is among them.
    async fn catch_up(&mut self, t: &TargetState, own_key: Option<&str>) -> Result<Caught, String> {
        let mut now = Canonical {
            cursor: t.cursor.clone(),
            sha256: t.sha256.clone(),
            content: t.content.clone(),
            revision: None,
        };
        let mut own = None;
        loop {
            let args = json!({"lease_id": self.state.lease_id, "target": t.target,
                              "after": now.cursor, "limit": CHANGES_PAGE});
            let v = self
                .link
                .call("patchdiff_replica_changes", args)
                .await
                .map_err(|f| f.describe("patchdiff_replica_changes"))?;
            let page: ReplayPage = serde_json::from_value(v).map_err(|e| e.to_string())?;
            for e in &page.entries {
                now.content = mirror::apply_entry(&now.content, e)
                    .map_err(|why| format!("catching up target {:?}: {why}", t.target))?;
                now.cursor = e.cursor.clone();
                now.sha256 = e.sha256.clone();
                now.revision = Some(e.revision);
                if e.kind == JournalKind::Edit
                    && own_key.is_some()
                    && e.request_key.as_deref() == own_key
                {
                    own = Some(now.clone());
                }
            }
            if page.entries.is_empty() || !page.has_more {
                return Ok(Caught { now, own });
            }
        }
    }

    /// Writes the canonical content back into the file unless a local change would be lost,
    /// keeps the state the file now derives from, and settles the pending submission.
    fn write_back(
        &mut self,
        i: usize,
        path: &Path,
        t: &TargetState,
        pending: Option<&Pending>,
        receipt: Option<&Receipt>,
        caught: Caught,
    ) -> Result<bool, String> {
        let Caught { now, own } = caught;
        let current = read_file(path)?;
        let current_sha = current.as_deref().map(sha256_hex);
        let mut problem = false;
        // The canonical state the file derives from after this pass.
        let mut base = now.clone();
        match (pending, receipt) {
            (Some(p), Some(r)) if r.outcome == Outcome::Accepted => {
                let local = current_sha.as_deref() == Some(p.new_sha256.as_str());
                if local && self.write_if_unchanged(path, current.as_deref(), &now.content)? {
                    self.updated(t, path, &now);
                } else if let Some(own) = own.filter(|o| o.sha256 == p.new_sha256) {
                    // Changed again meanwhile: the file derives from this sync's own entry, so
                    // the next pass submits the newer change at its cursor.
                    base = own;
                } else {
                    // Not anchored to a canonical state: kept aside, then the canonical content.
                    let latest = read_file(path)?;
                    if latest.as_deref().map(sha256_hex).as_deref() != Some(p.new_sha256.as_str()) {
                        self.keep_aside(t, path, latest.as_deref(), mirror::UNSYNCED_SUFFIX)?;
                    }
                    self.write_atomic(path, &now.content)?;
                    self.updated(t, path, &now);
                }
            }
            (Some(_), Some(_)) => {
                problem = true;
                self.keep_aside(t, path, current.as_deref(), mirror::REJECTED_SUFFIX)?;
                self.write_atomic(path, &now.content)?;
                self.updated(t, path, &now);
            }
            _ => {
                let unchanged =
                    current.is_none() || current.as_deref() == Some(t.content.as_bytes());
                if !unchanged {
                    // A local change written during this pass: it derives from the old state.
                    base = Canonical {
                        cursor: t.cursor.clone(),
                        sha256: t.sha256.clone(),
                        content: t.content.clone(),
                        revision: None,
                    };
                } else if current.as_deref() != Some(now.content.as_bytes()) {
                    if self.write_if_unchanged(path, current.as_deref(), &now.content)? {
                        self.updated(t, path, &now);
                    } else {
                        base = Canonical {
                            cursor: t.cursor.clone(),
                            sha256: t.sha256.clone(),
                            content: t.content.clone(),
                            revision: None,
                        };
                    }
                }
            }
        }
        let s = &mut self.state.targets[i];
        s.cursor = base.cursor;
        s.sha256 = base.sha256;
        s.content = base.content;
        s.pending = None;
        self.save_state()?;
        Ok(problem)
    }

    /// Keeps a local change the canonical content is about to replace as `FILE` + `suffix`.
    fn keep_aside(
        &self,
        t: &TargetState,
        path: &Path,
        bytes: Option<&[u8]>,
        suffix: &str,
    ) -> Result<(), String> {
        let Some(bytes) = bytes else {
            return Ok(());
        };
        let aside = self.dir.join(format!("{}{suffix}", t.file));
        std::fs::write(&aside, bytes)
            .map_err(|e| format!("cannot write {}: {e}", aside.display()))?;
        self.out.event(
            "kept_aside",
            json!({"target": t.target, "file": path, "copy": aside}),
            || {
                format!(
                    "{}: the local change is kept in {} and the canonical content written",
                    path.display(),
                    aside.display()
                )
            },
        );
        Ok(())
    }

    fn updated(&self, t: &TargetState, path: &Path, now: &Canonical) {
        self.out.event(
            "updated",
            json!({"target": t.target, "file": path, "revision": now.revision,
                   "cursor": now.cursor, "sha256": now.sha256}),
            || {
                format!(
                    "{} ← canonical content at cursor {}",
                    path.display(),
                    now.cursor
                )
            },
        );
    }
}

/// A target's canonical content at a cursor.
#[derive(Debug, Clone)]
struct Canonical {
    cursor: String,
    sha256: String,
    content: String,
    /// The revision of the entry at `cursor`, when the pass read one.
    revision: Option<u64>,
}

/// What a catch-up found: the canonical state now, and the state right after this sync's own
/// submission.
struct Caught {
    now: Canonical,
    own: Option<Canonical>,
}

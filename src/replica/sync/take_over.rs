//! `patchdiff replica sync DIR --lease-id ID` into a directory that mirrors nothing yet (R1,
//! R3): the live lease is renewed and each leased target mirrored from its current content at
//! the cursor of that revision (see `replica::sync`).

use super::*;

impl Sync {
    /// R1: takes over the live lease `id` into a directory that mirrors nothing yet: renews it,
    /// then mirrors each leased target's current content (read whole at one revision) at the
    /// cursor of that revision's last journal entry (R3: a cursor at or after the lease's
    /// checkpoint). A file already in DIR with other content is refused, naming it.
    pub(super) async fn take_over(&mut self, id: &str) -> Result<(), Fatal> {
        let renew = json!({"lease_id": id, "ttl_ms": self.ttl_ms});
        let lease: Lease = match self.link.call("patchdiff_replica_renew", renew).await {
            Ok(v) => serde_json::from_value(v)
                .map_err(|e| Fatal::Failed(format!("renew answered no lease: {e}")))?,
            Err(f) => {
                return Err(Fatal::Failed(format!(
                    "lease {id} cannot be taken over: {}",
                    f.describe("patchdiff_replica_renew")
                )));
            }
        };
        if let Some((a, b)) = mirror::colliding_names(&lease.targets) {
            return Err(Fatal::Usage(format!(
                "targets {a:?} and {b:?} of lease {id} would share one file on a \
                 case-insensitive file system"
            )));
        }
        let mut targets = Vec::new();
        for name in &lease.targets {
            let (content, revision, sha256) = self.read_whole(name).await.map_err(Fatal::Failed)?;
            let cursor = self
                .cursor_of(name, revision)
                .await
                .map_err(Fatal::Failed)?;
            targets.push(TargetState {
                target: name.clone(),
                file: mirror::file_name(name),
                cursor,
                sha256,
                content,
                pending: None,
            });
        }
        let mut conflicts = Vec::new();
        for t in &targets {
            let path = self.dir.join(&t.file);
            if read_file(&path)
                .map_err(Fatal::Failed)?
                .is_some_and(|b| b != t.content.as_bytes())
            {
                conflicts.push(path.display().to_string());
            }
        }
        if !conflicts.is_empty() {
            return Err(Fatal::Failed(format!(
                "{} already exist with other content than the targets of lease {id}; nothing \
                 was written: move them away and take the lease over again",
                conflicts.join(", ")
            )));
        }
        self.state = SyncState {
            lease_id: lease.lease_id.clone(),
            integration: lease.integration.clone(),
            expires_at_ms: lease.expires_at_ms,
            targets,
        };
        self.save_state().map_err(Fatal::Failed)?;
        let at = lease.expires_at_ms;
        self.out.event(
            "lease",
            json!({"lease_id": id, "resumed": true, "taken_over": true, "expires_at_ms": at,
                   "targets": self.state.target_names()}),
            || {
                format!(
                    "took over lease {id} of {} (expires at {at} ms)",
                    lease.integration
                )
            },
        );
        for t in &self.state.targets {
            let path = self.dir.join(&t.file);
            self.write_atomic(&path, &t.content)
                .map_err(Fatal::Failed)?;
            self.out.event(
                "mirrored",
                json!({"target": t.target, "file": path, "sha256": t.sha256}),
                || {
                    format!(
                        "{} ← target {} at cursor {}",
                        path.display(),
                        t.target,
                        t.cursor
                    )
                },
            );
        }
        Ok(())
    }

    /// `target`'s whole content, page by page, at one revision: (content, revision, sha256).
    /// A revision that moves between pages starts the read again, at most five times.
    async fn read_whole(&mut self, target: &str) -> Result<(String, u64, String), String> {
        for _ in 0..5 {
            let (mut content, mut offset, mut at) = (String::new(), 0u64, None);
            let complete = loop {
                let v = self
                    .link
                    .call(
                        "patchdiff_read_target",
                        json!({"target": target, "offset": offset}),
                    )
                    .await
                    .map_err(|f| f.describe("patchdiff_read_target"))?;
                let revision = v["revision"].as_u64();
                let sha = v["sha256"].as_str().unwrap_or_default().to_owned();
                if at.is_some_and(|a: (Option<u64>, String)| a.0 != revision) {
                    break None;
                }
                at = Some((revision, sha));
                content.push_str(v["content"].as_str().unwrap_or_default());
                match v["next_offset"].as_u64().filter(|_| v["has_more"] == true) {
                    Some(next) => offset = next,
                    None => break at.clone(),
                }
            };
            if let Some((Some(revision), sha)) = complete
                && sha256_hex(&content) == sha
            {
                return Ok((content, revision, sha));
            }
        }
        Err(format!(
            "target {target:?} kept changing while it was read; take the lease over again"
        ))
    }

    /// R3: the cursor of the last journal entry of `target` at `revision` (the edit that made
    /// it, or a save of it after), from the whole journal (`patchdiff_replay`, in pages).
    async fn cursor_of(&mut self, target: &str, revision: u64) -> Result<String, String> {
        let (mut after, mut found): (Option<String>, Option<String>) = (None, None);
        loop {
            let v = self
                .link
                .call(
                    "patchdiff_replay",
                    json!({"target": target, "after": after, "limit": 1000}),
                )
                .await
                .map_err(|f| f.describe("patchdiff_replay"))?;
            let page: ReplayPage = serde_json::from_value(v).map_err(|e| e.to_string())?;
            for e in &page.entries {
                if e.revision == revision {
                    found = Some(e.cursor.clone());
                }
            }
            match (page.has_more, page.next_cursor) {
                (true, Some(next)) if !page.entries.is_empty() => after = Some(next),
                _ => break,
            }
        }
        found.ok_or_else(|| {
            format!("the journal of target {target:?} has no entry at revision {revision}")
        })
    }
}

//! `replica TARGET PLAN` (R1–R3): a scripted replica that edits a second region of one target
//! while the next `agent` step's scripted agent works on it. The step starts a third MCP
//! process (`patchdiff mcp`, full profile, a real child over stdio through rmcp's client) with
//! its own wire log, perf events and stderr (`replica.*`), and acquires a lease over TARGET
//! (its checkpoint: the content and cursor before the agent's first edit). During the agent
//! step ([`beside_agent`]) the replica waits until the agent's first accepted submission to
//! TARGET has come back, then submits PLAN's edits — the first one at its checkpoint's cursor, so it is
//! transformed over the agent's edit — catches up from the changes (its mirror checked against
//! every entry's sha256), and once the agent is done makes sure its edits are in a saved
//! version (saving once if the agent's last save predates them), then releases the lease and
//! stops. Both writers' receipts are in the wire logs, so `verify`'s receipts check covers
//! both.
//!
//! PLAN is JSONL, one submission per line:
//! `{"request_key": "…", "operations": [{"old_text": "…", "new_text": "…"}]}` (each
//! `old_text` must occur exactly once in the content at the replica's cursor, as an agent's).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::super::client::{LaunchSpec, McpProcess};
use super::super::error::StepError;
use super::super::outcome::AgentStop;
use super::super::plan::PlanStep;
use crate::config::Key;
use crate::evidence::RunDir;
use crate::evidence::run_dir::process::REPLICA;
use crate::kernel::sha256_hex;
use crate::store::apply_journal_operations;
use crate::store::replica::{LEASE_MAX_TTL_MS, ReplicaOperation};

/// R1: the integration the scripted replica's lease is granted to.
pub const INTEGRATION: &str = "scripted-replica";

/// Most submissions a replica plan may hold (each is one tool call during the agent step).
pub const MAX_PLAN_SUBMISSIONS: usize = 64;

/// Entries asked for per `patchdiff_replica_changes` page while catching up.
const CHANGES_PAGE: u32 = 100;

/// One line of a replica plan: a submission's request key and operations (R2).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaEdit {
    pub request_key: String,
    pub operations: Vec<ReplicaOperation>,
}

/// Loads a replica plan (1..=[`MAX_PLAN_SUBMISSIONS`] JSONL lines; blank lines skipped).
/// Errors name the file and line and what a line must be.
pub fn load_replica_plan(path: &Path) -> Result<Vec<ReplicaEdit>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read replica plan {}: {e}", path.display()))?;
    let mut edits = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let edit: ReplicaEdit = serde_json::from_str(line).map_err(|e| {
            format!(
                "replica plan {} line {}: {e}; a line is {{\"request_key\": \"…\", \
                 \"operations\": [{{\"old_text\": \"…\", \"new_text\": \"…\"}}]}}",
                path.display(),
                i + 1
            )
        })?;
        edits.push(edit);
    }
    if edits.is_empty() || edits.len() > MAX_PLAN_SUBMISSIONS {
        return Err(format!(
            "replica plan {} holds {} submissions; 1..={MAX_PLAN_SUBMISSIONS} are accepted",
            path.display(),
            edits.len()
        ));
    }
    Ok(edits)
}

/// The full process's launch spec, with the replica's own evidence files in `run`
/// (`replica.mcp.jsonl`, `replica.perf.jsonl`, `replica.stderr.log`, its worker's stderr).
pub fn replica_spec(mut spec: LaunchSpec, run: &RunDir) -> LaunchSpec {
    for (k, v) in &mut spec.env {
        let path = if k == Key::EvidenceWireLog.variable() {
            run.wire_log(REPLICA)
        } else if k == Key::PerfEvents.variable() {
            run.perf_events(REPLICA)
        } else if k == Key::WorkerStderrLog.variable() {
            run.worker_stderr_log(REPLICA)
        } else {
            continue;
        };
        *v = path.display().to_string();
    }
    spec.stderr = run.stderr_log(REPLICA);
    spec
}

/// Where the agent step is, as the replica waits on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Working,
    /// The agent's first submission to the replica's target came back.
    Edited,
    Done,
}

/// The replica's view of its target: what it mirrors at `cursor`.
struct Mirror {
    cursor: String,
    sha256: String,
    content: String,
    /// The highest revision a save in the changes made a version of.
    saved_revision: Option<u64>,
    /// Entries caught up so far.
    entries: usize,
}

/// A replica armed by the `replica` step for the next agent step.
pub struct Armed {
    process: McpProcess,
    target: String,
    lease_id: String,
    mirror: Mirror,
    edits: Vec<ReplicaEdit>,
}

/// `replica TARGET PLAN`: loads PLAN, starts the replica's full-profile process from `spec`
/// ([`replica_spec`]), leases TARGET and arms the replica in `slot` for the next scripted
/// `agent PLAN` step (an agent host does not run it; `report` stops an idle one). Errors:
/// before `init`, with a replica already armed or a bad plan (`Refused`, nothing started); a
/// process that does not start; a refused lease (`Call`, the process stopped).
pub async fn arm(
    slot: &mut Option<Armed>,
    spec: LaunchSpec,
    run: &RunDir,
    target: &str,
    plan: &Path,
    initialized: bool,
) -> Result<String, StepError> {
    if !initialized {
        return Err(StepError::Refused(
            "run `init` first: the replica leases a target the run initialized".to_owned(),
        ));
    }
    if let Some(armed) = slot {
        return Err(StepError::Refused(format!(
            "a replica on `{}` is already armed for the next agent step; one replica per agent step",
            armed.target
        )));
    }
    let edits = load_replica_plan(plan).map_err(StepError::Refused)?;
    let process = McpProcess::launch(&replica_spec(spec, run)).await?;
    let args = json!({"integration": INTEGRATION, "targets": [target], "ttl_ms": LEASE_MAX_TTL_MS});
    let cp = match process.call_ok("patchdiff_replica_acquire", args).await {
        Ok(cp) => cp,
        Err(e) => {
            process.stop().await;
            return Err(StepError::Call(format!(
                "replica: the lease over `{target}` was refused: {}",
                e.message
            )));
        }
    };
    let t = &cp["targets"][0];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let armed = Armed {
        lease_id: text(&cp["lease"]["lease_id"]),
        mirror: Mirror {
            cursor: text(&t["cursor"]),
            sha256: text(&t["sha256"]),
            content: text(&t["content"]),
            saved_revision: None,
            entries: 0,
        },
        target: target.to_owned(),
        edits,
        process,
    };
    let summary = format!(
        "replica pid {} · lease {} over `{target}` at revision {} · {} submissions beside the next agent step",
        armed.process.pid.map_or("?".into(), |p| p.to_string()),
        armed.lease_id,
        t["revision"],
        armed.edits.len()
    );
    *slot = Some(armed);
    Ok(summary)
}

/// What the agent step tells the replica: called before each plan step, so when the step
/// after the agent's first submission to the target (one its plan expects accepted) starts,
/// that submission's receipt has come back.
pub struct AgentProgress {
    target: Option<String>,
    phase: Option<Arc<watch::Sender<Phase>>>,
    last_submitted_target: bool,
}

impl AgentProgress {
    /// Before plan step `_i` (`step`).
    pub fn on_step(&mut self, _i: usize, step: &PlanStep) {
        if self.last_submitted_target
            && let Some(phase) = &self.phase
        {
            phase.send_if_modified(|p| {
                let moved = *p == Phase::Working;
                if moved {
                    *p = Phase::Edited;
                }
                moved
            });
        }
        // A submission its plan expects to be accepted (not an expected rejection or error).
        let rejected = step
            .expect
            .as_ref()
            .is_some_and(|e| e["outcome"] == "rejected");
        self.last_submitted_target = step.tool.contains("submit")
            && !step.expect_error
            && !rejected
            && self
                .target
                .as_deref()
                .is_some_and(|t| step.args["target"] == t);
    }
}

/// Runs the agent step `agent` and, when a replica is armed, the replica beside it (R2: two
/// writers on one target); the step fails when the replica did (naming what it was refused).
/// The replica's process is stopped before this returns.
pub async fn beside_agent<F>(
    armed: Option<Armed>,
    agent: impl FnOnce(AgentProgress) -> F,
) -> (Result<String, StepError>, AgentStop)
where
    F: Future<Output = (Result<String, StepError>, AgentStop)>,
{
    let Some(armed) = armed else {
        let progress = AgentProgress {
            target: None,
            phase: None,
            last_submitted_target: false,
        };
        return agent(progress).await;
    };
    let (tx, rx) = watch::channel(Phase::Working);
    let tx = Arc::new(tx);
    let progress = AgentProgress {
        target: Some(armed.target.clone()),
        phase: Some(tx.clone()),
        last_submitted_target: false,
    };
    let agent_run = async {
        let out = agent(progress).await;
        tx.send_replace(Phase::Done);
        out
    };
    let ((result, stop), replica) = tokio::join!(agent_run, armed.run(rx));
    let result = match (result, replica) {
        (Ok(agent), Ok(replica)) => Ok(format!("{agent} · {replica}")),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
    };
    (result, stop)
}

/// Releases the lease of an armed replica no agent step ran and stops its process (before the
/// run is sealed); a refused release changes nothing.
pub async fn disarm(armed: Option<Armed>) {
    if let Some(armed) = armed {
        let release = json!({"lease_id": armed.lease_id});
        let _ = armed.call("patchdiff_replica_release", release).await;
        armed.process.stop().await;
    }
}

impl Armed {
    async fn run(mut self, rx: watch::Receiver<Phase>) -> Result<String, StepError> {
        let result = self.work(rx).await;
        self.process.stop().await;
        result
    }

    async fn work(&mut self, mut rx: watch::Receiver<Phase>) -> Result<String, StepError> {
        // While the agent works: after its first submission to the target came back.
        let _ = rx.wait_for(|p| *p >= Phase::Edited).await;
        let edits = std::mem::take(&mut self.edits);
        let mut revisions = Vec::new();
        for (n, edit) in edits.iter().enumerate() {
            if n > 0 {
                self.catch_up().await?;
            }
            revisions.push(self.submit(edit).await?);
        }
        let _ = rx.wait_for(|p| *p == Phase::Done).await;
        self.catch_up().await?;
        let last = revisions.iter().copied().max().unwrap_or(0);
        let saved = if self.mirror.saved_revision.is_some_and(|r| r >= last) {
            "in the agent's save".to_owned()
        } else {
            let reply = self
                .call("patchdiff_save", json!({"target": self.target}))
                .await?;
            format!("saved as version {}", reply["version"])
        };
        self.call(
            "patchdiff_replica_release",
            json!({"lease_id": self.lease_id}),
        )
        .await?;
        Ok(format!(
            "replica: {} submissions accepted (revisions {}) · caught up {} entries, mirror = \
             canonical · {saved} · lease released",
            revisions.len(),
            revisions
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            self.mirror.entries
        ))
    }

    async fn call(&self, tool: &str, args: Value) -> Result<Value, StepError> {
        self.process.call_ok(tool, args).await.map_err(|e| {
            StepError::Call(format!(
                "replica: {tool} on `{}` failed: {}",
                self.target, e.message
            ))
        })
    }

    /// One submission at the mirror's cursor; its revision. Errors when it is not accepted.
    async fn submit(&self, edit: &ReplicaEdit) -> Result<u64, StepError> {
        let args = json!({
            "lease_id": self.lease_id,
            "target": self.target,
            "request_key": edit.request_key,
            "cursor": self.mirror.cursor,
            "expected_sha256": self.mirror.sha256,
            "operations": edit.operations,
        });
        let receipt = self.call("patchdiff_replica_submit", args).await?;
        match (receipt["outcome"].as_str(), receipt["revision"].as_u64()) {
            (Some("accepted"), Some(revision)) => Ok(revision),
            _ => Err(StepError::Failed(format!(
                "replica: submission `{}` on `{}` was not accepted: {}",
                crate::display::visible_inline(&edit.request_key),
                self.target,
                crate::display::visible_inline(&receipt["reasons"].to_string())
            ))),
        }
    }

    /// R3: the changes after the mirror's cursor, page by page, applied to the mirror; each
    /// edit's result must hash to its entry's sha256 (the mirror equals the canonical content).
    async fn catch_up(&mut self) -> Result<(), StepError> {
        loop {
            let page = self
                .call(
                    "patchdiff_replica_changes",
                    json!({"lease_id": self.lease_id, "target": self.target,
                           "after": self.mirror.cursor, "limit": CHANGES_PAGE}),
                )
                .await?;
            let entries = page["entries"].as_array().cloned().unwrap_or_default();
            for e in &entries {
                self.mirror.apply(e).map_err(|why| {
                    StepError::Failed(format!(
                        "replica: catching up on `{}` at revision {}: {why}",
                        self.target, e["revision"]
                    ))
                })?;
            }
            if entries.is_empty() || page["has_more"] != true {
                return Ok(());
            }
        }
    }
}

impl Mirror {
    fn apply(&mut self, e: &Value) -> Result<(), String> {
        let sha = e["sha256"].as_str().unwrap_or_default();
        match e["kind"].as_str() {
            Some("edit") => {
                let ops: Vec<crate::kernel::JournalOperation> =
                    serde_json::from_value(e["operations"].clone()).map_err(|e| e.to_string())?;
                self.content =
                    apply_journal_operations(&self.content, &ops).map_err(|e| e.to_string())?;
                if sha256_hex(&self.content) != sha {
                    return Err("the mirror no longer hashes to the journal's sha256".to_owned());
                }
            }
            Some("save") => {
                self.saved_revision = self.saved_revision.max(e["revision"].as_u64());
            }
            other => return Err(format!("unexpected journal entry {other:?} within a lease")),
        }
        self.sha256 = sha.to_owned();
        self.cursor = e["cursor"].as_str().unwrap_or_default().to_owned();
        self.entries += 1;
        Ok(())
    }
}

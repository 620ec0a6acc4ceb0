//! The full profile's replica tools (R1–R3): a trusted integration leases targets, submits
//! text operations beside the agent and catches up from the journal. Never in the observed or
//! workspace-observed profile (`profile_tools` lists them for the full profile only, and the
//! router drops every tool a profile does not list). The lease clock is this process's wall
//! clock in milliseconds since the Unix epoch (the store's tests drive an injected one).

use super::*;
use crate::store::replica::{LeaseRequest, ReplicaSubmission};

/// R1: the replica tools, listed after the other full-profile tools.
pub const REPLICA_TOOLS: [&str; 5] = [
    "patchdiff_replica_acquire",
    "patchdiff_replica_renew",
    "patchdiff_replica_release",
    "patchdiff_replica_submit",
    "patchdiff_replica_changes",
];

/// Milliseconds since the Unix epoch (0 before it).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[tool_router(router = replica_router, vis = "pub(super)")]
impl PatchdiffServer {
    #[tool(
        description = "Operator only (R1). Grant a named integration an expiring lease over targets and return its immutable checkpoint: per target version, revision, sha256, content and the replay cursor of that moment. Submit with patchdiff_replica_submit and catch up with patchdiff_replica_changes; renew before expires_at_ms."
    )]
    async fn patchdiff_replica_acquire(
        &self,
        Parameters(args): Parameters<ReplicaAcquireArgs>,
    ) -> ToolResult {
        let request = LeaseRequest {
            integration: args.integration,
            targets: args.targets,
            ttl_ms: args.ttl_ms,
        };
        respond(
            self.blocking(move |s| s.replica_acquire(&request, &wall_ms))
                .await,
        )
    }

    #[tool(
        description = "Operator only (R1). Move a live lease's expiry to now + ttl_ms. An expired, released or invalidated (a leased target was re-initialized) lease is refused: acquire a new one."
    )]
    async fn patchdiff_replica_renew(
        &self,
        Parameters(args): Parameters<ReplicaRenewArgs>,
    ) -> ToolResult {
        respond(
            self.blocking(move |s| s.replica_renew(&args.lease_id, args.ttl_ms, &wall_ms))
                .await,
        )
    }

    #[tool(
        description = "Operator only (R1). End a lease; every later call with it is refused with LEASE_RELEASED."
    )]
    async fn patchdiff_replica_release(
        &self,
        Parameters(args): Parameters<LeaseArg>,
    ) -> ToolResult {
        respond(
            self.blocking(move |s| s.replica_release(&args.lease_id, &wall_ms))
                .await,
        )
    }

    #[tool(
        description = "Operator only (R2). Submit text operations computed at `cursor` (content hashing to expected_sha256): decided as an agent's submission, transformed over what was accepted since, with the same receipts, request keys and conflict rules. An unknown outcome is learnt by retrying the same request_key."
    )]
    async fn patchdiff_replica_submit(
        &self,
        Parameters(args): Parameters<ReplicaSubmitArgs>,
    ) -> ToolResult {
        let (lease_id, submission) = (
            args.lease_id,
            ReplicaSubmission {
                target: args.target,
                request_key: args.request_key,
                cursor: args.cursor,
                expected_sha256: args.expected_sha256,
                operations: args.operations,
            },
        );
        let validator = self.submission_validator();
        // W7: validation holds the target's boundary and never starts a worker; start one
        // first (a failure leaves validation unavailable: VALIDATION_UNAVAILABLE, nothing kept).
        if let Some(w) = validator.waymark.as_ref().filter(|w| !w.status().ready) {
            let _ = w.prewarm().await;
        }
        respond(
            self.blocking(move |s| {
                s.replica_submit(
                    &lease_id,
                    &submission,
                    &wall_ms,
                    &|language, content| validator.validate(language, content),
                    None,
                )
            })
            .await,
        )
    }

    #[tool(
        description = "Operator only (R3). The leased target's journal after `after` (default: the checkpoint's cursor), a page at a time; pass next_cursor as `after` while has_more is true."
    )]
    async fn patchdiff_replica_changes(
        &self,
        Parameters(args): Parameters<ReplicaChangesArgs>,
    ) -> ToolResult {
        respond(
            self.blocking(move |s| {
                s.replica_changes(
                    &args.lease_id,
                    &args.target,
                    args.after.as_deref(),
                    args.limit,
                    &wall_ms,
                )
            })
            .await,
        )
    }
}

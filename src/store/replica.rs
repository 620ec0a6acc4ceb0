//! Replicas (SPEC R1–R3): the shapes and backend-neutral decisions of leases, checkpoints,
//! replica submissions and catch-up; the SQL lives in `sqlite/replica.rs` and
//! `postgres/replica.rs`.
//!
//! A lease names one integration, a set of targets (each pinned to its incarnation, so a
//! re-init invalidates it) and an expiry on the caller's clock (milliseconds since the Unix
//! epoch, injected: tests drive it by hand). Every replica call checks the lease first; a
//! submission checks it again inside the transaction that commits it, so a lease released,
//! renewed or invalidated concurrently is serialized with the commit and an expired or released
//! lease never has anything applied. A replica submission is an ordinary submission (K3/K4)
//! whose base revision is the revision at the replica's cursor, with `expected_sha256`
//! required, decided through the same per-target boundary (K5).

use serde::{Deserialize, Serialize};

use super::{ErrorCode, OperationRequest, StoreError, Submission};

/// R1: shortest lease (1 000 ms).
pub const LEASE_MIN_TTL_MS: u64 = 1_000;
/// R1: longest lease, also per renewal (3 600 000 ms, one hour).
pub const LEASE_MAX_TTL_MS: u64 = 3_600_000;
/// R1: most targets one lease covers (64).
pub const LEASE_MAX_TARGETS: usize = 64;
/// R1: longest integration name (128 bytes).
pub const INTEGRATION_MAX_BYTES: usize = 128;

/// The caller's clock: milliseconds since the Unix epoch. Injected so lease expiry is tested
/// on a clock the test moves, never by sleeping.
pub type Clock<'a> = &'a (dyn Fn() -> u64 + Sync);

/// Where a replica submission can be held by a test seam (R2's races): after the lease check,
/// after request-key recovery, with the target's boundary held, after planning and before the
/// commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplicaPoint {
    LeaseChecked,
    Recovered,
    BoundaryHeld,
    Planned,
    BeforeCommit,
}

impl ReplicaPoint {
    /// Every point, in the order a submission passes them.
    pub const ALL: [ReplicaPoint; 5] = [
        ReplicaPoint::LeaseChecked,
        ReplicaPoint::Recovered,
        ReplicaPoint::BoundaryHeld,
        ReplicaPoint::Planned,
        ReplicaPoint::BeforeCommit,
    ];
    /// Whether a submission at this point holds its target's boundary (K5).
    pub fn holds_boundary(self) -> bool {
        matches!(
            self,
            ReplicaPoint::BoundaryHeld | ReplicaPoint::Planned | ReplicaPoint::BeforeCommit
        )
    }
}

/// A seam called at each [`ReplicaPoint`]; it may block (tests hold the replica there).
pub type Seam<'a> = &'a (dyn Fn(ReplicaPoint) + Sync);

/// R1: what an integration asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeaseRequest {
    /// Who the lease is for (1..=128 bytes, no control characters), e.g. `build-container`.
    pub integration: String,
    /// The targets the lease covers (1..=64 distinct names).
    pub targets: Vec<String>,
    /// How long the lease lasts from now, in milliseconds (1 000..=3 600 000).
    pub ttl_ms: u64,
}

/// R1: a lease as granted, renewed or released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub lease_id: String,
    pub integration: String,
    /// Milliseconds since the Unix epoch, on the store caller's clock.
    pub granted_at_ms: u64,
    pub expires_at_ms: u64,
    /// Set once the lease is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at_ms: Option<u64>,
    /// The leased targets, by name.
    pub targets: Vec<String>,
}

/// R1: one target as the checkpoint froze it: content and the replay cursor of the same
/// moment (the cursor of its last journal entry; changes after it are what came since).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointTarget {
    pub name: String,
    pub language: String,
    pub version: u64,
    pub revision: u64,
    /// Lowercase hex SHA-256 of `content`.
    pub sha256: String,
    pub content: String,
    /// The canonical replay cursor at this checkpoint.
    pub cursor: String,
}

/// R1: the lease and its immutable checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub lease: Lease,
    pub targets: Vec<CheckpointTarget>,
}

/// R2: a replica's submission: text operations (as an agent's, K3) against the content at
/// `cursor` (a cursor of this target's journal at or after the lease's checkpoint), which must
/// hash to `expected_sha256`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplicaSubmission {
    pub target: String,
    pub request_key: String,
    pub cursor: String,
    pub expected_sha256: String,
    pub operations: Vec<ReplicaOperation>,
}

/// R2: one operation: replace the single occurrence of `old_text` in the content at the
/// cursor by `new_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplicaOperation {
    pub old_text: String,
    pub new_text: String,
}

impl ReplicaSubmission {
    /// The ordinary submission this is, at `base_revision` (the cursor's revision).
    pub fn to_submission(&self, base_revision: u64) -> Submission {
        Submission {
            request_key: self.request_key.clone(),
            base_revision,
            expected_sha256: Some(self.expected_sha256.clone()),
            operations: self
                .operations
                .iter()
                .map(|o| OperationRequest {
                    observation_id: None,
                    old_text: o.old_text.clone(),
                    new_text: o.new_text.clone(),
                })
                .collect(),
        }
    }
}

/// A lease row as both backends store it.
#[derive(Debug, Clone)]
pub(crate) struct LeaseRow {
    pub lease_id: String,
    pub integration: String,
    pub granted_at_ms: u64,
    pub expires_at_ms: u64,
    pub released_at_ms: Option<u64>,
}

/// One leased target: which incarnation it was at and the checkpoint's cursor (an entry id).
#[derive(Debug, Clone)]
pub(crate) struct LeaseTargetRow {
    pub target_name: String,
    pub incarnation: String,
    pub checkpoint_cursor: i64,
}

impl LeaseRow {
    pub(crate) fn into_lease(self, targets: Vec<String>) -> Lease {
        Lease {
            lease_id: self.lease_id,
            integration: self.integration,
            granted_at_ms: self.granted_at_ms,
            expires_at_ms: self.expires_at_ms,
            released_at_ms: self.released_at_ms,
            targets,
        }
    }
}

/// R1: checks a lease request; returns the targets in order, deduplicated is refused.
/// Errors: `INVALID_INPUT` naming the field and what is accepted.
pub(crate) fn check_lease_request(req: &LeaseRequest) -> Result<(), StoreError> {
    let bad = |m: String| Err(StoreError::new(ErrorCode::InvalidInput, m));
    if req.integration.is_empty()
        || req.integration.len() > INTEGRATION_MAX_BYTES
        || req.integration.chars().any(char::is_control)
    {
        return bad(format!(
            "integration must be 1..={INTEGRATION_MAX_BYTES} bytes without control characters (got {} bytes)",
            req.integration.len()
        ));
    }
    check_ttl(req.ttl_ms)?;
    if req.targets.is_empty() || req.targets.len() > LEASE_MAX_TARGETS {
        return bad(format!(
            "targets must name 1..={LEASE_MAX_TARGETS} targets (got {})",
            req.targets.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for t in &req.targets {
        if !seen.insert(t.as_str()) {
            return bad(format!(
                "target {:?} is named twice; name each target once",
                crate::kernel::snippet(t, 80)
            ));
        }
    }
    Ok(())
}

/// R1: `ttl_ms` within [`LEASE_MIN_TTL_MS`]..=[`LEASE_MAX_TTL_MS`]. Errors: `OUT_OF_RANGE`.
pub(crate) fn check_ttl(ttl_ms: u64) -> Result<(), StoreError> {
    if !(LEASE_MIN_TTL_MS..=LEASE_MAX_TTL_MS).contains(&ttl_ms) {
        return Err(StoreError::new(
            ErrorCode::OutOfRange,
            format!(
                "ttl_ms must be {LEASE_MIN_TTL_MS}..={LEASE_MAX_TTL_MS} milliseconds (got {ttl_ms})"
            ),
        ));
    }
    Ok(())
}

/// A fresh lease id (a random UUID).
pub(crate) fn new_lease_id() -> String {
    format!("lease-{}", uuid::Uuid::new_v4())
}

/// R1: whether `lease` is live at `now_ms`. Errors: `UNKNOWN_LEASE`, `LEASE_RELEASED`,
/// `LEASE_EXPIRED` (each says to acquire a new lease).
pub(crate) fn check_live(
    lease_id: &str,
    lease: Option<&LeaseRow>,
    now_ms: u64,
) -> Result<(), StoreError> {
    let Some(l) = lease else {
        return Err(StoreError::new(
            ErrorCode::UnknownLease,
            format!(
                "no lease {:?}; acquire one with patchdiff_replica_acquire",
                crate::kernel::snippet(lease_id, 80)
            ),
        ));
    };
    if let Some(at) = l.released_at_ms {
        return Err(StoreError::new(
            ErrorCode::LeaseReleased,
            format!(
                "lease {} was released at {at} ms; nothing was applied, acquire a new lease",
                l.lease_id
            ),
        ));
    }
    if now_ms >= l.expires_at_ms {
        return Err(StoreError::new(
            ErrorCode::LeaseExpired,
            format!(
                "lease {} expired at {} ms (now {now_ms} ms); nothing was applied, acquire a new lease",
                l.lease_id, l.expires_at_ms
            ),
        ));
    }
    Ok(())
}

/// R1: whether `target` (now at `incarnation`) is in the lease and was not re-initialized
/// since. Errors: `TARGET_NOT_LEASED`, `LEASE_INVALIDATED`.
pub(crate) fn check_target(
    lease_id: &str,
    target: &str,
    leased: Option<&LeaseTargetRow>,
    incarnation: Option<&str>,
) -> Result<(), StoreError> {
    let Some(lt) = leased else {
        return Err(StoreError::new(
            ErrorCode::TargetNotLeased,
            format!(
                "lease {lease_id} does not cover target {:?}; acquire a lease that names it",
                crate::kernel::snippet(target, 80)
            ),
        ));
    };
    if incarnation != Some(lt.incarnation.as_str()) {
        return Err(invalidated(lease_id, &lt.target_name));
    }
    Ok(())
}

pub(crate) fn invalidated(lease_id: &str, target: &str) -> StoreError {
    StoreError::new(
        ErrorCode::LeaseInvalidated,
        format!(
            "target {target} was re-initialized after lease {lease_id} was granted, so its checkpoint no longer describes it; nothing was applied, acquire a new lease"
        ),
    )
}

/// R2/R3: the entry id of a replica's cursor, which must be at or after the checkpoint's.
/// Errors: `INVALID_CURSOR`.
pub(crate) fn cursor_entry(cursor: &str, leased: &LeaseTargetRow) -> Result<i64, StoreError> {
    match cursor.parse::<i64>() {
        Ok(id) if id >= leased.checkpoint_cursor => Ok(id),
        _ => Err(StoreError::new(
            ErrorCode::InvalidCursor,
            format!(
                "cursor {:?} is not a cursor of target {} at or after the lease's checkpoint ({}); pass the checkpoint's cursor or one patchdiff_replica_changes returned",
                crate::kernel::snippet(cursor, 80),
                leased.target_name,
                leased.checkpoint_cursor
            ),
        )),
    }
}

/// R2: the error when `cursor` names no entry of the target.
pub(crate) fn unknown_cursor(cursor: &str, target: &str) -> StoreError {
    StoreError::new(
        ErrorCode::InvalidCursor,
        format!(
            "cursor {:?} names no journal entry of target {target}; pass the checkpoint's cursor or one patchdiff_replica_changes returned",
            crate::kernel::snippet(cursor, 80)
        ),
    )
}

/// R2: a replica submission's own checks before anything is read (K8 via the kernel's checks
/// run later). Errors: `INVALID_INPUT` (bad `expected_sha256`).
pub(crate) fn check_submission(s: &ReplicaSubmission) -> Result<(), StoreError> {
    let hex = s.expected_sha256.len() == 64
        && s.expected_sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex {
        return Err(StoreError::new(
            ErrorCode::InvalidInput,
            "expected_sha256 must be 64 lowercase hex digits: the SHA-256 of the content at the cursor",
        ));
    }
    Ok(())
}

/// What a replica submission hands the backend's submission path: the lease to check inside
/// the commit's transaction, the clock, and the test seam.
pub(crate) struct ReplicaGuard<'a> {
    pub lease_id: &'a str,
    pub clock: Clock<'a>,
    pub seam: Option<Seam<'a>>,
}

impl ReplicaGuard<'_> {
    pub(crate) fn at(&self, point: ReplicaPoint) {
        if let Some(seam) = self.seam {
            seam(point);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(released: Option<u64>) -> LeaseRow {
        LeaseRow {
            lease_id: "l".into(),
            integration: "i".into(),
            granted_at_ms: 0,
            expires_at_ms: 10_000,
            released_at_ms: released,
        }
    }

    #[test]
    fn lease_is_live_until_its_expiry_instant_and_never_after_release() {
        assert!(check_live("l", Some(&row(None)), 9_999).is_ok());
        assert_eq!(
            check_live("l", Some(&row(None)), 10_000).unwrap_err().code,
            ErrorCode::LeaseExpired
        );
        assert_eq!(
            check_live("l", Some(&row(Some(5))), 6).unwrap_err().code,
            ErrorCode::LeaseReleased
        );
        assert_eq!(
            check_live("l", None, 0).unwrap_err().code,
            ErrorCode::UnknownLease
        );
    }

    #[test]
    fn lease_request_names_what_is_wrong() {
        let ok = LeaseRequest {
            integration: "ci".into(),
            targets: vec!["a".into()],
            ttl_ms: 5_000,
        };
        assert!(check_lease_request(&ok).is_ok());
        let twice = LeaseRequest {
            targets: vec!["a".into(), "a".into()],
            ..ok.clone()
        };
        assert!(
            check_lease_request(&twice)
                .unwrap_err()
                .message
                .contains("named twice")
        );
        let short = LeaseRequest {
            ttl_ms: 999,
            ..ok.clone()
        };
        assert_eq!(
            check_lease_request(&short).unwrap_err().code,
            ErrorCode::OutOfRange
        );
        let nameless = LeaseRequest {
            integration: String::new(),
            ..ok
        };
        assert_eq!(
            check_lease_request(&nameless).unwrap_err().code,
            ErrorCode::InvalidInput
        );
    }

    #[test]
    fn cursor_before_the_checkpoint_is_refused() {
        let lt = LeaseTargetRow {
            target_name: "a".into(),
            incarnation: "x".into(),
            checkpoint_cursor: 7,
        };
        assert_eq!(cursor_entry("7", &lt).unwrap(), 7);
        assert_eq!(
            cursor_entry("6", &lt).unwrap_err().code,
            ErrorCode::InvalidCursor
        );
        assert_eq!(
            cursor_entry("x", &lt).unwrap_err().code,
            ErrorCode::InvalidCursor
        );
        assert_eq!(
            check_target("l", "a", Some(&lt), Some("y"))
                .unwrap_err()
                .code,
            ErrorCode::LeaseInvalidated
        );
    }
}

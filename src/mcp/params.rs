//! Tool argument types (SPEC M6). Field names are a stable public contract: agents' prompts and
//! operators' scripts depend on them. Descriptions are what an agent reads in `tools/list`.

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetArg {
    /// Target name, e.g. `calendar`.
    pub target: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadTargetArgs {
    /// Target name, e.g. `calendar`.
    pub target: String,
    /// UTF-8 byte offset where the page starts (default 0): pass the `next_offset` of the page
    /// before while `has_more` is true. Must be at most `total` and fall on a character
    /// boundary.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Most content bytes this page may hold (default and most: as many as fit in one result,
    /// about 32 KiB). A page that stops early ends after its last whole line.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindOccurrencesArgs {
    /// Target name.
    pub target: String,
    /// Exact text to find (case-sensitive, may span lines). Occurrences are returned with
    /// UTF-8 byte offsets, 1-based line and column, and their innermost structural scope.
    pub text: String,
    /// Index of the first occurrence to return (0-based, default 0): pass the `next_offset`
    /// of the page before while `has_more` is true.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Most occurrences to return (default 200, at most 1000); a page also stops when one
    /// result would hold no more (about 32 KiB). `total` counts them all, `has_more` says
    /// whether more follow `next_offset`.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

/// Default and maximum `limit` of `patchdiff_find_occurrences`.
pub const OCCURRENCES_DEFAULT_LIMIT: u32 = 200;
pub const OCCURRENCES_MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineRange {
    /// First line, 1-based (as shown by `patchdiff_find_occurrences`).
    #[schemars(range(min = 1))]
    pub start: usize,
    /// Last line, 1-based, inclusive; at least `start`.
    #[schemars(range(min = 1))]
    pub end: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObserveScopeArgs {
    /// Target name.
    pub target: String,
    /// Qualified name of a structural scope, e.g. `Calendar.addWindow` or `parse_line`. Give
    /// either `scope` or `lines`.
    #[serde(default)]
    pub scope: Option<String>,
    /// An explicit line range `{start, end}` (1-based, inclusive) to observe instead of a named
    /// scope; use it for code outside any structural scope. Give either `scope` or `lines`.
    #[serde(default)]
    pub lines: Option<LineRange>,
    /// UTF-8 byte offset picking one scope: with `scope`, the one of that name starting here
    /// (when several share the name, `AMBIGUOUS_SCOPE` lists their `start_byte`s); alone, the
    /// innermost scope containing this byte.
    #[serde(default)]
    pub start_byte: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationArg {
    /// The `observation_id` returned by `patchdiff_observe_scope` for the scope this edit lies
    /// in. Required under strict observation mode (the observed profile of a canary runs
    /// with it); the observation must still be unchanged, otherwise observe again.
    #[serde(default)]
    pub observation_id: Option<String>,
    /// Text to replace; must occur exactly once inside the observed scope. Include enough
    /// surrounding context to make it unique.
    pub old_text: String,
    /// Replacement text.
    pub new_text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitArgs {
    /// Target name.
    pub target: String,
    /// Your idempotency key for this submission. Retrying with the same key and the same content
    /// returns the same receipt; reusing a key for different content is refused.
    pub request_key: String,
    /// The target revision your observations were made at (the `revision` you were shown).
    pub base_revision: u64,
    /// Optional SHA-256 of the target content at `base_revision`, as an extra guard.
    #[serde(default)]
    pub expected_sha256: Option<String>,
    /// The edits, applied atomically: all accepted or all rejected. Operations of one
    /// submission must not overlap.
    pub operations: Vec<OperationArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayArgs {
    /// Target name.
    pub target: String,
    /// Cursor returned as `next_cursor` by a previous call; omit to start at the beginning.
    #[serde(default)]
    pub after: Option<String>,
    /// Page size in entries (default 100, at most 1000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitTargetArgs {
    /// Target name to create.
    pub target: String,
    /// Path of the fixture file holding the original bytes.
    pub fixture: String,
    /// Expected SHA-256 (hex) of the fixture bytes; a mismatch refuses the target.
    pub sha256: String,
    /// Language of the target, exactly one of `javascript`, `jsx`, `typescript`, `tsx`,
    /// `python`, `rust`, `go` (`.tsx` files are `tsx`); anything else is refused.
    pub language: String,
    /// Wipe an existing target's history and re-initialize it. Without this, a target that has
    /// any history is refused (C1: canary targets must be fresh).
    #[serde(default)]
    pub reset: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportTargetArgs {
    /// Target name.
    pub target: String,
    /// Absolute destination file path. The latest saved version is written there (0600); an
    /// existing file is refused.
    pub dest: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// R1: `patchdiff_replica_acquire`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicaAcquireArgs {
    /// Who the lease is for (1..=128 bytes), e.g. `build-container`.
    pub integration: String,
    /// The targets the lease covers (1..=64 distinct names).
    pub targets: Vec<String>,
    /// Lease length from now, in milliseconds (1000..=3600000).
    #[schemars(range(min = 1000, max = 3600000))]
    pub ttl_ms: u64,
}

/// R1: `patchdiff_replica_renew`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicaRenewArgs {
    /// The lease id `patchdiff_replica_acquire` returned.
    pub lease_id: String,
    /// New lease length from now, in milliseconds (1000..=3600000).
    #[schemars(range(min = 1000, max = 3600000))]
    pub ttl_ms: u64,
}

/// R1: `patchdiff_replica_release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseArg {
    /// The lease id `patchdiff_replica_acquire` returned.
    pub lease_id: String,
}

/// R2: `patchdiff_replica_submit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSubmitArgs {
    /// The lease id `patchdiff_replica_acquire` returned.
    pub lease_id: String,
    /// A leased target.
    pub target: String,
    /// Makes the submission idempotent: retry an unknown outcome with the same key.
    pub request_key: String,
    /// The replay cursor the operations were computed at (the checkpoint's, or a
    /// `next_cursor` of `patchdiff_replica_changes`).
    pub cursor: String,
    /// SHA-256 (64 lowercase hex digits) of the content at `cursor`.
    pub expected_sha256: String,
    /// At most 64 operations, each replacing the single occurrence of `old_text` in the
    /// content at `cursor`.
    pub operations: Vec<crate::store::replica::ReplicaOperation>,
}

/// R3: `patchdiff_replica_changes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicaChangesArgs {
    /// The lease id `patchdiff_replica_acquire` returned.
    pub lease_id: String,
    /// A leased target.
    pub target: String,
    /// Cursor to read after (default: the lease's checkpoint cursor; never before it).
    #[serde(default)]
    pub after: Option<String>,
    /// Page size in entries (default 100, at most 1000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

/// Checks `arguments` against the argument type of `tool` before dispatch, so that malformed
/// arguments (wrong types, missing required fields, unknown fields) are refused before any
/// handler runs — as an `isError` result with code `INVALID_ARGUMENTS` the model can correct
/// itself from (MCP 2025-11-25, SEP-1303). Returns the
/// deserialization message (field and expected type) on failure. Unknown tools pass (the
/// profile boundary handles them).
pub fn validate(
    tool: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(), String> {
    fn check<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<(), String> {
        serde_json::from_value::<T>(v)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    let v = serde_json::Value::Object(arguments.cloned().unwrap_or_default());
    match tool {
        "patchdiff_read_target" => check::<ReadTargetArgs>(v),
        "patchdiff_save" | "patchdiff_audit" => check::<TargetArg>(v),
        "patchdiff_find_occurrences" => check::<FindOccurrencesArgs>(v),
        "patchdiff_observe_scope" => check::<ObserveScopeArgs>(v),
        "patchdiff_submit_observed_operations" => check::<SubmitArgs>(v),
        "patchdiff_replay" => check::<ReplayArgs>(v),
        "patchdiff_init_target" => check::<InitTargetArgs>(v),
        "patchdiff_export_target" => check::<ExportTargetArgs>(v),
        "patchdiff_worker_status" => check::<NoArgs>(v),
        "patchdiff_replica_acquire" => check::<ReplicaAcquireArgs>(v),
        "patchdiff_replica_renew" => check::<ReplicaRenewArgs>(v),
        "patchdiff_replica_release" => check::<LeaseArg>(v),
        "patchdiff_replica_submit" => check::<ReplicaSubmitArgs>(v),
        "patchdiff_replica_changes" => check::<ReplicaChangesArgs>(v),
        _ => Ok(()),
    }
}

//! Every acknowledged receipt in the run's wire logs against the journal (V2), read through
//! the one wire-log reader (`evidence::wire`, pairing by (process, id)).

use serde_json::Value;

use super::Ctx;
use super::journal::JournalIndex;
use crate::evidence::evidence_files;

/// One acknowledged receipt in a wire log: a submission's (`outcome` accepted or rejected)
/// or a save's.
struct WireReceipt {
    line: usize,
    pid: u32,
    tool: String,
    receipt: Value,
}

/// Every acknowledged receipt in the run's wire logs (`*.mcp.jsonl`, streamed line by line;
/// requests paired with results by (process, id)) against the journal: an accepted
/// submission's request key must be a journal edit with the same revision, sha256 and
/// attempt id; a rejected one's must not be; a save's version must be a journal save with the
/// same revision and sha256. A receipt for a target the journal does not hold is named too.
pub(super) fn check_receipts(
    ctx: &mut Ctx,
    indexes: &std::collections::HashMap<String, JournalIndex>,
) {
    const SUBMIT: &str = "patchdiff_submit_observed_operations";
    // R2: a replica's submissions (the `replica` process's wire log) carry the same receipts.
    const REPLICA_SUBMIT: &str = "patchdiff_replica_submit";
    const SAVE: &str = "patchdiff_save";
    let before = ctx.problems.len();
    let logs: Vec<String> = evidence_files(&ctx.root)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| crate::evidence::run_dir::is_wire_log(f))
        .collect();
    let mut checked = 0;
    // Per wire log (one per process: the agent's, a replica's, the full process's).
    let mut per_log = Vec::new();
    for rel in &logs {
        let before_log = checked;
        let Ok(messages) = crate::evidence::wire_log_messages(&ctx.root.join(rel)) else {
            continue; // named by the chain check
        };
        let pairs = crate::evidence::pair_requests(
            messages,
            |m| {
                let tool = m.message["params"]["name"].as_str()?;
                (m.message["method"] == "tools/call"
                    && [SUBMIT, REPLICA_SUBMIT, SAVE].contains(&tool))
                .then(|| tool.to_owned())
            },
            |tool, reply| WireReceipt {
                line: reply.line,
                pid: reply.pid,
                tool: tool.clone(),
                receipt: reply.message["result"]["structuredContent"].clone(),
            },
        );
        for r in pairs.into_iter().filter_map(|(_, reply)| reply) {
            if let Some(problem) = receipt_problem(&r, indexes) {
                ctx.problem("receipts", rel, Some(r.line), problem);
            }
            checked += 1;
        }
        per_log.push(format!("{rel} {}", checked - before_log));
    }
    ctx.done(
        "receipts",
        before,
        format!(
            "{checked} acknowledged receipts in {} wire logs against the journal ({})",
            logs.len(),
            per_log.join(", ")
        ),
    );
}

/// Why receipt `r` is not what the journal holds, or `None` when it is (or it acknowledges
/// nothing: an error result carries no receipt).
fn receipt_problem(
    r: &WireReceipt,
    indexes: &std::collections::HashMap<String, JournalIndex>,
) -> Option<String> {
    let s = &r.receipt;
    let target = s["target"].as_str()?;
    let revision = s["revision"].as_u64();
    let sha256 = s["sha256"].as_str();
    let Some(index) = indexes.get(target) else {
        return Some(format!(
            "a receipt of pid {} for target `{target}`, which the journal does not hold",
            r.pid
        ));
    };
    if r.tool == "patchdiff_save" {
        let version = s["version"].as_u64()?;
        return match index.saves.get(&version) {
            Some((rev, sha)) if Some(*rev) == revision && Some(sha.as_str()) == sha256 => None,
            Some((rev, sha)) => Some(format!(
                "the save receipt of `{target}` version {version} (pid {}) acknowledges revision \
                 {} SHA-256 {}; the journal's save records revision {rev} SHA-256 {sha}",
                r.pid,
                revision.map_or("?".into(), |v| v.to_string()),
                sha256.unwrap_or("?"),
            )),
            None => Some(format!(
                "the save receipt of `{target}` version {version} (pid {}) is not in the journal",
                r.pid
            )),
        };
    }
    let key = s["request_key"].as_str()?;
    let attempt = s["attempt_id"].as_str();
    match (s["outcome"].as_str()?, index.edits.get(key)) {
        ("accepted", Some((rev, sha, id)))
            if Some(*rev) == revision
                && Some(sha.as_str()) == sha256
                && (attempt.is_none() || id.as_deref() == attempt) =>
        {
            None
        }
        ("accepted", Some((rev, sha, id))) => Some(format!(
            "the receipt of request key `{}` on `{target}` (pid {}) acknowledges revision {} \
             SHA-256 {} attempt {}; the journal's edit records revision {rev} SHA-256 {sha} \
             attempt {}",
            crate::display::visible_inline(key),
            r.pid,
            revision.map_or("?".into(), |v| v.to_string()),
            sha256.unwrap_or("?"),
            attempt.unwrap_or("?"),
            id.as_deref().unwrap_or("?"),
        )),
        ("accepted", None) => Some(format!(
            "the receipt of request key `{}` on `{target}` (pid {}) acknowledges revision {} \
             SHA-256 {}, but the journal holds no edit under that key",
            crate::display::visible_inline(key),
            r.pid,
            revision.map_or("?".into(), |v| v.to_string()),
            sha256.unwrap_or("?"),
        )),
        ("rejected", Some((rev, _, _))) => Some(format!(
            "the receipt of request key `{}` on `{target}` (pid {}) says rejected, but the \
             journal holds an edit under that key (revision {rev})",
            crate::display::visible_inline(key),
            r.pid
        )),
        _ => None,
    }
}

//! The files a sealed run must hold and the hash chain of every chained log (V1).

use std::path::Path;

use serde_json::Value;

use super::Ctx;
use crate::evidence::run_dir::{
    JOURNAL_FILE, MANIFEST_FILE, TRANSCRIPT_FILE, process, report_name, wire_log_name,
};
use crate::evidence::{SEAL_FILE, SUMS_FILE, audit_file, audit_log, evidence_files};

/// The files a sealed run must hold, whatever `SHA256SUMS` lists —
/// the manifest, the seal, the sums, the reports and the transcript, the wire log of each
/// process a successful step used (`init` → `full.mcp.jsonl`, also when only the manifest
/// `init` wrote says so; `preflight` → `observed.mcp.jsonl`) as `report.json`'s steps say, and
/// the journal binding when the manifest records the store's identity — and no symlink or
/// other non-regular entry anywhere in it.
/// A re-sealed run with a deleted log is named here.
pub(super) fn check_files(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let mut required: Vec<String> = [MANIFEST_FILE, SUMS_FILE, SEAL_FILE]
        .into_iter()
        .map(str::to_owned)
        .chain(["json", "txt", "junit.xml"].map(report_name))
        .chain([TRANSCRIPT_FILE.to_owned()])
        .collect();
    let report: Value = std::fs::read(ctx.run.report("json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let ran = |name: &str| {
        report["steps"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["command"] == name && s["ok"] == true))
    };
    // The manifest is written by `init`: a run that holds one initialized its targets through
    // the full-profile process even when its report is gone; one that records its store's
    // identity was sealed with its journal binding.
    let manifest: Value = std::fs::read(ctx.run.manifest())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    if ran("init")
        || manifest["initial_targets"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    {
        required.push(wire_log_name(process::FULL));
    }
    if manifest["configuration"]["store_identity"]["store_id"].is_string() {
        required.push(JOURNAL_FILE.to_owned());
    }
    if ran("preflight") {
        required.push(wire_log_name(process::OBSERVED));
    }
    for rel in &required {
        match std::fs::symlink_metadata(ctx.root.join(rel)) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => {} // named below as a non-regular entry
            Err(_) => ctx.problem(
                "files",
                rel,
                None,
                "missing: a sealed run must hold it (deleted after the run, even if the sums \
                 were recomputed)"
                    .into(),
            ),
        }
    }
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, &'static str)>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if kind.is_dir() {
                walk(root, &path, out);
            } else if kind.is_symlink() {
                out.push((rel, "a symlink"));
            } else if !kind.is_file() {
                out.push((rel, "not a regular file"));
            }
        }
    }
    let mut odd = Vec::new();
    walk(&ctx.root, &ctx.root, &mut odd);
    for (rel, what) in odd {
        ctx.problem(
            "files",
            &rel,
            None,
            format!("{what}: a run holds only regular files and directories"),
        );
    }
    ctx.done(
        "files",
        before,
        format!("{} required files, no symlinks", required.len()),
    );
}

pub use crate::evidence::is_chained;

/// Checks the chain of one log's bytes; returns the number of lines, or the first problem
/// (1-based line and why): a change, a torn line or a gap ([`audit_log`] tells them apart).
pub fn check_chain(bytes: &[u8]) -> Result<usize, (usize, String)> {
    let audit = audit_log(bytes);
    if let Some(changed) = audit.changed {
        return Err(changed);
    }
    if let Some(&n) = audit.torn.first() {
        return Err((n, torn_message(n, audit.lines)));
    }
    if let Some(gap) = audit.gaps.first() {
        return Err((gap.line, gap.describe()));
    }
    Ok(audit.lines)
}

fn torn_message(n: usize, lines: usize) -> String {
    if n == lines {
        format!("line {n} is torn: the last write was cut short (no newline); not a change")
    } else {
        format!(
            "line {n} is torn: a write was cut short and the next append ended it; not a change"
        )
    }
}

/// Every chained log: its links (a broken one is a change), its torn lines and its gaps
/// (records a failed write lost, or a jump in a process's `seq`), each named as such.
pub(super) fn check_chains(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let files: Vec<String> = evidence_files(&ctx.root)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| is_chained(f))
        .collect();
    let mut lines = 0;
    let mut gaps = 0;
    for rel in &files {
        // Streamed line by line: memory does not grow with the log.
        match audit_file(&ctx.root.join(rel)) {
            Ok(audit) => {
                lines += audit.lines;
                if let Some((line, message)) = audit.changed.clone() {
                    ctx.problem("chain", rel, Some(line), message);
                }
                for &n in &audit.torn {
                    ctx.problem("torn", rel, Some(n), torn_message(n, audit.lines));
                }
                for gap in &audit.gaps {
                    gaps += 1;
                    ctx.problem("gap", rel, Some(gap.line), gap.describe());
                }
            }
            Err(e) => ctx.problem("chain", rel, None, format!("cannot read: {e}")),
        }
    }
    ctx.done(
        "chain",
        before,
        format!("{} chained logs, {lines} lines, {gaps} gaps", files.len()),
    );
}

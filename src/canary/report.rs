//! The canary's final report (text, JSON, JUnit XML) and the SAVE/replay consistency check
//! (SPEC C5, K6, U5).

use serde::Serialize;
use serde_json::{Value, json};

use super::client::McpProcess;
use super::{Canary, StepOutcome, TargetRow};
use crate::evidence::{RunDir, write_new_private};
use crate::fixtures::sha256_hex;

/// Page size used when replaying a journal for inspection.
const REPLAY_PAGE: u32 = 500;

/// K6 check through the full process: replaying the journal from the fixture bytes reproduces
/// every saved version (hash per `save` entry) and the current revision; revisions advance by
/// exactly one per edit, so no edit is applied twice.
pub async fn replay_consistency(
    full: &McpProcess,
    target: &str,
    original: &[u8],
    current: &Value,
) -> Result<(), String> {
    let mut content = original.to_vec();
    let mut revision = 0u64;
    let mut after: Option<String> = None;
    let mut saves = 0u64;
    loop {
        let mut args = json!({"target": target, "limit": REPLAY_PAGE});
        if let Some(a) = &after {
            args["after"] = Value::String(a.clone());
        }
        let page = full
            .call_ok("patchdiff_replay", args)
            .await
            .map_err(|e| format!("replay failed: {}", e.message))?;
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        for entry in &entries {
            let kind = entry["kind"].as_str().unwrap_or_default();
            let entry_revision = entry["revision"].as_u64().unwrap_or(u64::MAX);
            match kind {
                "init" => {
                    if entry["sha256"].as_str() != Some(sha256_hex(original).as_str()) {
                        return Err(
                            "the journal's init entry does not match the fixture bytes".into()
                        );
                    }
                }
                "edit" => {
                    if entry_revision != revision + 1 {
                        return Err(format!(
                            "journal edit for revision {entry_revision} follows revision {revision}"
                        ));
                    }
                    let mut ops = entry["operations"].as_array().cloned().unwrap_or_default();
                    ops.sort_by_key(|o| std::cmp::Reverse(o["start_byte"].as_u64().unwrap_or(0)));
                    for op in ops {
                        let (s, e) = (
                            op["start_byte"].as_u64().unwrap_or(0) as usize,
                            op["end_byte"].as_u64().unwrap_or(0) as usize,
                        );
                        if s > e || e > content.len() {
                            return Err(format!(
                                "revision {entry_revision}: operation range {s}..{e} is out of bounds"
                            ));
                        }
                        let new_text = op["new_text"].as_str().unwrap_or_default().as_bytes();
                        content.splice(s..e, new_text.iter().copied());
                    }
                    revision = entry_revision;
                    if entry["sha256"].as_str() != Some(sha256_hex(&content).as_str()) {
                        return Err(format!(
                            "replay of revision {revision} does not reproduce its hash"
                        ));
                    }
                }
                "save" => {
                    saves += 1;
                    if entry_revision != revision
                        || entry["sha256"].as_str() != Some(sha256_hex(&content).as_str())
                    {
                        return Err(format!(
                            "saved version {} does not match the replayed content at revision {revision}",
                            entry["version"]
                        ));
                    }
                }
                other => return Err(format!("unknown journal entry kind `{other}`")),
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) if page["has_more"].as_bool() == Some(true) => after = Some(c.to_owned()),
            _ => break,
        }
    }
    if current["revision"].as_u64() != Some(revision)
        || current["sha256"].as_str() != Some(sha256_hex(&content).as_str())
    {
        return Err(format!(
            "replay ends at revision {revision} but the target is at revision {}",
            current["revision"]
        ));
    }
    if current["version"].as_u64() != Some(saves) {
        return Err(format!(
            "the journal has {saves} saves but the target is at version {}",
            current["version"]
        ));
    }
    Ok(())
}

/// The run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub run_id: String,
    pub run_dir: String,
    /// Every step succeeded and every target passed both checks.
    pub passed: bool,
    pub steps: Vec<StepOutcome>,
    pub targets: Vec<ReportTarget>,
    pub agent: crate::evidence::AgentIdentity,
    /// A4: the agent host run (CLI, version, models, turns, tool calls, usage, seal), if any.
    pub agent_host: Option<super::host::HostRecord>,
    /// C7: comparative runs are a separate mode, closed here.
    pub gate2: &'static str,
}

/// One target in the report; `full_byte`/`behavioral` are false until evaluated.
#[derive(Debug, Clone, Serialize)]
pub struct ReportTarget {
    pub name: String,
    pub full_byte: bool,
    pub behavioral: bool,
    pub evaluated: bool,
    pub version: u64,
    pub revision: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub initial_sha256: String,
    pub exported_sha256: Option<String>,
    pub replay_consistent: Option<bool>,
    pub notes: Vec<String>,
}

impl From<&TargetRow> for ReportTarget {
    fn from(r: &TargetRow) -> Self {
        Self {
            name: r.name.clone(),
            full_byte: r.full_byte.unwrap_or(false),
            behavioral: r.behavioral.unwrap_or(false),
            evaluated: r.full_byte.is_some(),
            version: r.version,
            revision: r.revision,
            accepted: r.accepted,
            rejected: r.rejected,
            initial_sha256: r.initial_sha256.clone(),
            exported_sha256: r.exported_sha256.clone(),
            replay_consistent: r.replay_consistent,
            notes: r.notes.clone(),
        }
    }
}

impl Report {
    pub fn build(canary: &Canary) -> Self {
        let targets: Vec<ReportTarget> = canary.targets.iter().map(ReportTarget::from).collect();
        // The report step itself is judged by this report, so it is not counted here.
        let steps_ok = canary
            .steps
            .iter()
            .filter(|s| s.command != "report")
            .all(|s| s.ok);
        let evaluated = canary.evaluation.is_some();
        let passed = steps_ok && evaluated && targets.iter().all(|t| t.full_byte && t.behavioral);
        Self {
            run_id: canary.run.run_id.clone(),
            run_dir: canary.run.path.display().to_string(),
            passed,
            steps: canary.steps.clone(),
            targets,
            agent: canary.identity.clone(),
            agent_host: canary.host_record.clone(),
            gate2: "closed",
        }
    }

    /// One line naming failed steps and targets.
    pub fn failure_summary(&self) -> String {
        let mut parts: Vec<String> = self
            .steps
            .iter()
            .filter(|s| !s.ok && s.command != "report")
            .map(|s| format!("step {} failed", s.command))
            .collect();
        for t in self
            .targets
            .iter()
            .filter(|t| !(t.full_byte && t.behavioral))
        {
            parts.push(format!(
                "target {} full-byte {} behavioral {}",
                t.name,
                verdict(t.evaluated, t.full_byte),
                verdict(t.evaluated, t.behavioral)
            ));
        }
        if parts.is_empty() && !self.passed {
            parts.push("the evaluator has not run".into());
        }
        parts.join("; ")
    }

    /// Plain-text rendering.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "patchdiff canary {} — {}\nrun directory: {}\ngate 2: {}\n\nsteps:\n",
            self.run_id,
            if self.passed { "PASSED" } else { "FAILED" },
            self.run_dir,
            self.gate2
        );
        for s in &self.steps {
            out.push_str(&format!(
                "  {:<11} {:<4} {:>6} ms  {}\n",
                s.command,
                if s.ok { "ok" } else { "FAIL" },
                s.elapsed_ms,
                s.summary
            ));
        }
        if let Some(h) = &self.agent_host {
            let calls: Vec<String> = h
                .tool_calls
                .iter()
                .map(|(tool, n)| format!("{tool} {n}"))
                .collect();
            out.push_str(&format!(
                "\nagent host: {} {} ({}) · requested model {} · reported {} · {} turns · {} ms{}{}\n  seal: {}\n  tool calls: {}\n",
                h.host,
                h.version,
                h.binary,
                h.requested_model,
                if h.reported_models.is_empty() { "-".to_owned() } else { h.reported_models.join(", ") },
                h.turns,
                h.duration_ms,
                h.cost_usd.map_or(String::new(), |c| format!(" · ${c:.4}")),
                if h.timed_out { " · TIMED OUT" } else { "" },
                h.seal.problem.as_deref().unwrap_or("6 observed tools, one MCP server"),
                if calls.is_empty() { "none".to_owned() } else { calls.join(", ") },
            ));
        }
        out.push_str("\ntargets:                 full-byte behavioral ver rev acc/rej replay\n");
        for t in &self.targets {
            out.push_str(&format!(
                "  {:<22} {:<9} {:<10} {:>3} {:>3} {:>3}/{:<3} {}\n",
                t.name,
                verdict(t.evaluated, t.full_byte),
                verdict(t.evaluated, t.behavioral),
                t.version,
                t.revision,
                t.accepted,
                t.rejected,
                match t.replay_consistent {
                    Some(true) => "ok",
                    Some(false) => "MISMATCH",
                    None => "-",
                }
            ));
        }
        let passing = self
            .targets
            .iter()
            .filter(|t| t.full_byte && t.behavioral)
            .count();
        out.push_str(&format!(
            "\n{passing}/{} targets pass both checks\n",
            self.targets.len()
        ));
        out
    }

    /// JUnit XML: one test case per step and one per target check.
    pub fn to_junit(&self) -> String {
        let mut cases = String::new();
        let mut failures = 0;
        let mut case = |class: &str, name: &str, ok: bool, message: &str| {
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\">",
                xml_escape(class),
                xml_escape(name)
            ));
            if !ok {
                failures += 1;
                cases.push_str(&format!("<failure message=\"{}\"/>", xml_escape(message)));
            }
            cases.push_str("</testcase>\n");
        };
        for s in &self.steps {
            case("canary.step", &s.command, s.ok, &s.summary);
        }
        for t in &self.targets {
            let notes = t.notes.join("; ");
            case("canary.full_byte", &t.name, t.full_byte, &notes);
            case("canary.behavioral", &t.name, t.behavioral, &notes);
        }
        let tests = self.steps.len() + 2 * self.targets.len();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"patchdiff-canary {}\" tests=\"{tests}\" failures=\"{failures}\">\n{cases}  </testsuite>\n</testsuites>\n",
            xml_escape(&self.run_id)
        )
    }
}

fn verdict(evaluated: bool, ok: bool) -> &'static str {
    match (evaluated, ok) {
        (false, _) => "-",
        (true, true) => "pass",
        (true, false) => "FAIL",
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes `report.txt`, `report.json` and `report.junit.xml` into the run directory (once; E2).
pub fn write_reports(run: &RunDir, report: &Report) -> std::io::Result<()> {
    write_new_private(&run.report("txt"), report.to_text().as_bytes())?;
    write_new_private(&run.report("json"), &serde_json::to_vec_pretty(report)?)?;
    write_new_private(&run.report("junit.xml"), report.to_junit().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escape_handles_markup() {
        assert_eq!(xml_escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}

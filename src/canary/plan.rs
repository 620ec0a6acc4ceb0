//! The scripted agent (SPEC C4): a JSONL plan of MCP tool calls replayed through a real MCP
//! client against the observed process. Later calls refer to earlier results with
//! `${step.field}` (a whole string becomes the JSON value, type kept; inside a longer string it
//! is replaced textually; `field` may be a `/`-separated path such as `scope/name`).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::client::McpProcess;
use crate::evidence::JsonlLog;
use crate::telemetry::unix_ms_now;

/// One line of a plan file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// Name later steps use to refer to this step's result.
    pub step: String,
    pub tool: String,
    #[serde(default)]
    pub args: Value,
    /// A subset of the structured result that must match.
    #[serde(default)]
    pub expect: Option<Value>,
    /// The call must come back with `isError`.
    #[serde(default)]
    pub expect_error: bool,
}

/// Reads a plan file; errors name the line.
pub fn load_plan(path: &Path) -> Result<Vec<PlanStep>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read plan {}: {e}", path.display()))?;
    let mut steps: Vec<PlanStep> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let step: PlanStep = serde_json::from_str(line)
            .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
        if steps.iter().any(|s| s.step == step.step) {
            return Err(format!(
                "{} line {}: step name `{}` is used twice",
                path.display(),
                i + 1,
                step.step
            ));
        }
        steps.push(step);
    }
    if steps.is_empty() {
        return Err(format!("plan {} has no steps", path.display()));
    }
    check_references(&steps).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(steps)
}

/// Checks, before anything runs, that every `${step.field}` reference names an earlier step —
/// so a broken plan is refused whole instead of failing half-way through a canary.
pub fn check_references(steps: &[PlanStep]) -> Result<(), String> {
    fn walk<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::String(s) => {
                let mut rest = s.as_str();
                while let Some(start) = rest.find("${") {
                    let after = &rest[start + 2..];
                    let end = after.find(['.', '}']).unwrap_or(after.len());
                    out.push(&after[..end]);
                    rest = &after[end..];
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    for (i, step) in steps.iter().enumerate() {
        let mut referenced = Vec::new();
        walk(&step.args, &mut referenced);
        for name in referenced {
            if !steps[..i].iter().any(|s| s.step == name) {
                return Err(format!(
                    "step `{}` refers to `${{{name}.…}}`, which is not an earlier step",
                    step.step
                ));
            }
        }
    }
    Ok(())
}

/// Resolves `${step.field}` references in `value` against earlier results.
pub fn substitute(value: &Value, results: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => {
            if let Some(inner) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                && !inner.contains("${")
                && !inner.contains('}')
            {
                return lookup(inner, results);
            }
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                out.push_str(&rest[..start]);
                let after = &rest[start + 2..];
                let end = after
                    .find('}')
                    .ok_or_else(|| format!("unterminated reference in `{s}`"))?;
                match lookup(&after[..end], results)? {
                    Value::String(v) => out.push_str(&v),
                    other => out.push_str(&other.to_string()),
                }
                rest = &after[end + 1..];
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| substitute(v, results))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), substitute(v, results)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn lookup(reference: &str, results: &HashMap<String, Value>) -> Result<Value, String> {
    let (step, field) = reference
        .split_once('.')
        .ok_or_else(|| format!("reference `${{{reference}}}` must be `${{step.field}}`"))?;
    let result = results
        .get(step)
        .ok_or_else(|| format!("reference `${{{reference}}}`: no earlier step `{step}`"))?;
    result
        .pointer(&format!("/{field}"))
        .cloned()
        .ok_or_else(|| {
            format!("reference `${{{reference}}}`: step `{step}` has no field `{field}`")
        })
}

/// True when every field of `expected` appears in `actual` with an equal value (recursively
/// for objects; arrays must be equal).
pub fn matches_subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| matches_subset(v, av))),
        _ => expected == actual,
    }
}

/// Summary of a plan run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanOutcome {
    pub calls: usize,
    pub errors_expected: usize,
    /// Steps whose result did not meet the plan's expectation, with why.
    pub deviations: Vec<String>,
}

/// Runs `steps` against `process`, appending every call and reply to `transcript`. A protocol
/// error or an unmet expectation is recorded as a deviation; the run continues so the evidence
/// shows everything the agent did.
pub async fn run_plan(
    process: &McpProcess,
    steps: &[PlanStep],
    transcript: &JsonlLog,
    mut progress: impl FnMut(usize, &PlanStep),
) -> PlanOutcome {
    let mut results: HashMap<String, Value> = HashMap::new();
    let mut outcome = PlanOutcome::default();
    for (i, step) in steps.iter().enumerate() {
        progress(i, step);
        let args = match substitute(&step.args, &results) {
            Ok(a) => a,
            Err(e) => {
                outcome
                    .deviations
                    .push(format!("step `{}`: {e}", step.step));
                continue;
            }
        };
        let _ = transcript.append(&json!({
            "ts_ms": unix_ms_now(), "role": "agent", "step": step.step,
            "tool": step.tool, "arguments": args,
        }));
        outcome.calls += 1;
        let reply = process.call(&step.tool, args).await;
        let (record, deviation) = match reply {
            Ok(reply) => {
                results.insert(step.step.clone(), reply.structured.clone());
                let deviation = if reply.is_error != step.expect_error {
                    Some(if reply.is_error {
                        format!(
                            "step `{}`: unexpected error: {}",
                            step.step,
                            reply.error_message()
                        )
                    } else {
                        format!("step `{}`: expected an error, got success", step.step)
                    })
                } else if let Some(expect) = step
                    .expect
                    .as_ref()
                    .filter(|e| !matches_subset(e, &reply.structured))
                {
                    Some(format!(
                        "step `{}`: result {} does not match expected {}",
                        step.step, reply.structured, expect
                    ))
                } else {
                    None
                };
                if reply.is_error && step.expect_error {
                    outcome.errors_expected += 1;
                }
                (
                    json!({"ts_ms": unix_ms_now(), "role": "server", "step": step.step,
                           "is_error": reply.is_error, "structured": reply.structured, "text": reply.text}),
                    deviation,
                )
            }
            Err(e) => (
                json!({"ts_ms": unix_ms_now(), "role": "server", "step": step.step,
                       "protocol_error": e.message}),
                (!step.expect_error).then(|| format!("step `{}`: {e}", step.step)),
            ),
        };
        let _ = transcript.append(&record);
        if let Some(d) = deviation {
            outcome.deviations.push(d);
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> HashMap<String, Value> {
        HashMap::from([(
            "obs".to_owned(),
            json!({"observation_id": "o-1", "revision": 4, "scope": {"name": "A.b"}}),
        )])
    }

    #[test]
    fn whole_string_reference_keeps_the_json_type() {
        let v = substitute(&json!({"base_revision": "${obs.revision}"}), &results()).unwrap();
        assert_eq!(v, json!({"base_revision": 4}));
    }

    #[test]
    fn embedded_references_are_textual_and_paths_nest() {
        let v = substitute(
            &json!(["id ${obs.observation_id} in ${obs.scope/name}"]),
            &results(),
        )
        .unwrap();
        assert_eq!(v, json!(["id o-1 in A.b"]));
    }

    #[test]
    fn missing_step_or_field_is_an_error_naming_it() {
        assert!(
            substitute(&json!("${nope.x}"), &results())
                .unwrap_err()
                .contains("no earlier step `nope`")
        );
        assert!(
            substitute(&json!("${obs.sha}"), &results())
                .unwrap_err()
                .contains("no field `sha`")
        );
    }

    #[test]
    fn references_to_later_or_missing_steps_are_refused_up_front() {
        let step = |name: &str, args: Value| PlanStep {
            step: name.into(),
            tool: "patchdiff_save".into(),
            args,
            expect: None,
            expect_error: false,
        };
        let ok = [
            step("a", json!({})),
            step("b", json!({"r": "${a.revision}"})),
        ];
        assert!(check_references(&ok).is_ok());
        let forward = [
            step("a", json!({"r": ["x ${b.revision}"]})),
            step("b", json!({})),
        ];
        assert!(
            check_references(&forward)
                .unwrap_err()
                .contains("step `a` refers to `${b.…}`")
        );
    }

    #[test]
    fn subset_matching_is_recursive() {
        let actual = json!({"outcome": "accepted", "revision": 3, "x": {"a": 1, "b": 2}});
        assert!(matches_subset(
            &json!({"outcome": "accepted", "x": {"a": 1}}),
            &actual
        ));
        assert!(!matches_subset(&json!({"outcome": "rejected"}), &actual));
    }
}

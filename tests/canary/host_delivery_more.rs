//! What Codex, Gemini CLI and opencode hand the model of our results (SPEC M1, M5;
//! `patchdiff::mcp::delivery::HOST_LIMITS`), as `host_delivery.rs` checks it for Claude Code.
//!
//! Each pinned CLI runs as `agent codex|gemini|opencode` in the console, so it is sealed and
//! configured exactly as a canary's host is (the result shape its server gets, and the limit the
//! host table declares for it), offline against `scripted-model` on loopback, whose request log
//! holds every tool result as the host sent it to the model. The plan reads every page of a
//! ~100 KB target and submits a 64-operation rejection: every page and the rejection's ids must
//! reach the model whole.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::agent_host::{Model, SECRET, codex, report};
use crate::host_delivery::{
    argparse_like, assert_64_operation_receipt, copy_dir, init, launch, mcp_env, read_pages,
    rejection_steps, repo, sha256_hex, write_plan,
};
use crate::more_hosts::{gemini, opencode};

/// The target the plan reads: the bundled `chess` fixture's original replaced by a ~100 KB
/// argparse-like Python module (quotes and backslashes on most lines).
const TARGET: &str = "chess";

/// The bundled fixtures in `dir` with [`TARGET`]'s original replaced by `content`, and the
/// manifest to match; returns the manifest's path.
fn fixtures_with(dir: &Path, content: &str) -> PathBuf {
    let fixtures = dir.join("fixtures");
    copy_dir(&repo().join("assets/fixtures"), &fixtures);
    let manifest_path = fixtures.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let fixture = manifest["fixtures"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|f| f["target"] == TARGET)
        .expect("the chess fixture");
    std::fs::write(
        fixtures.join(fixture["original"].as_str().unwrap()),
        content,
    )
    .unwrap();
    fixture["sha256"] = json!(sha256_hex(content.as_bytes()));
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    manifest_path
}

/// Every page an agent's server gives of `content` from offset 0: (offset, page content). The
/// server is deterministic, so the plan can name them.
async fn pages_of(dir: &Path, content: &str) -> Vec<(u64, String)> {
    std::fs::create_dir_all(dir).unwrap();
    init(dir, TARGET, "python", content).await;
    let observed = launch(dir, "observed", mcp_env(dir, "observed", "resident")).await;
    let (offsets, read, pages) = read_pages(&observed, TARGET).await;
    observed.stop().await;
    assert_eq!(read, content);
    offsets
        .into_iter()
        .zip(
            pages
                .iter()
                .map(|p| p["content"].as_str().unwrap().to_owned()),
        )
        .collect()
}

/// Every JSON value in `raw`'s strings, and recursively in theirs: a host wraps a result's JSON
/// in its own text (Codex's `Wall time … Output:` line, Gemini CLI's `<untrusted_context>`, or
/// the error message in which Gemini CLI quotes the whole result).
fn values_in(raw: &Value, out: &mut Vec<Value>) {
    match raw {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find(['{', '[']) {
                let mut stream =
                    serde_json::Deserializer::from_str(&rest[i..]).into_iter::<Value>();
                match stream.next() {
                    Some(Ok(v)) => {
                        let end = i + stream.byte_offset();
                        values_in(&v, out);
                        out.push(v);
                        rest = &rest[end..];
                    }
                    _ => rest = &rest[i + 1..],
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| values_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| values_in(v, out)),
        _ => {}
    }
}

/// The JSON objects, at any depth, that the host's tool result `raw` carries.
fn objects_in(raw: &Value) -> Vec<Value> {
    let mut values = Vec::new();
    values_in(raw, &mut values);
    let mut objects = Vec::new();
    while let Some(v) = values.pop() {
        match v {
            Value::Object(ref map) => {
                values.extend(
                    map.values()
                        .filter(|v| v.is_object() || v.is_array())
                        .cloned(),
                );
                objects.push(v);
            }
            Value::Array(items) => values.extend(items),
            _ => {}
        }
    }
    objects
}

/// Runs `agent <host>` through the console on a ~100 KB target with `model` and the host's
/// environment `env`, the plan reading every page and submitting a 64-operation rejection;
/// asserts each page and the rejection reached the model whole, as the host sent them.
async fn delivers_every_page_and_the_rejection_whole(
    host: &str,
    model: &str,
    env: &[(&str, String)],
) {
    let dir = tempfile::tempdir().unwrap();
    let content = argparse_like(100 * 1024);
    let manifest = fixtures_with(dir.path(), &content);
    let pages = pages_of(&dir.path().join("pages"), &content).await;
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let largest = pages.iter().map(|(_, p)| p.len()).max().unwrap();
    assert!(largest > 30_000, "the largest page is {largest} bytes");

    let mut plan: Vec<Value> = pages
        .iter()
        .enumerate()
        .map(|(i, (offset, _))| {
            json!({"step": format!("read-{i}"), "tool": "patchdiff_read_target",
                   "args": {"target": TARGET, "offset": offset}})
        })
        .collect();
    plan.extend(rejection_steps(TARGET));
    let scripted = Model::start(dir.path(), &write_plan(dir.path(), &plan), "finish");
    let script = dir.path().join(format!("{host}.canary"));
    std::fs::write(
        &script,
        format!("record model={model}\ninit\nagent {host} max_turns=50 timeout=600\n"),
    )
    .unwrap();
    let runs = dir.path().join("runs");
    let env: Vec<(&str, String)> = env
        .iter()
        .map(|(k, v)| (*k, v.replace("{url}", &scripted.url)))
        .collect();
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(&script)
        .arg("--manifest")
        .arg(&manifest)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--json")
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("patchdiff runs");
    let report = report(&output);
    let record = &report["agent_host"];
    assert_eq!(record["host"], host, "{report:#}");
    assert_eq!(record["seal"]["problem"], Value::Null, "{record}");
    assert_eq!(report["agent_stop"]["reason"], "finished", "{report:#}");

    // What the host sent the model, tool result by tool result, in call order.
    let results = scripted.results();
    assert_eq!(results.len(), plan.len(), "{results:#?}");
    for (raw, marker) in results.iter().flat_map(|r| {
        [
            "tokens truncated",
            "Output too large",
            "bytes truncated",
            "saved to",
        ]
        .map(|m| (r, m))
    }) {
        let text = raw.to_string();
        assert!(
            !text.contains(marker),
            "{host} cut a result ({marker}): {}",
            &text[..text.len().min(2000)]
        );
    }
    for (i, (offset, page)) in pages.iter().enumerate() {
        let whole = objects_in(&results[i])
            .iter()
            .any(|o| o["offset"] == *offset && o["content"].as_str() == Some(page.as_str()));
        assert!(
            whole,
            "page {i} ({} bytes from offset {offset}) did not reach the model whole through {host}",
            page.len()
        );
    }
    let rejection = objects_in(results.last().unwrap())
        .into_iter()
        .find(|o| o["outcome"] == "rejected")
        .unwrap_or_else(|| panic!("no receipt in {}", results.last().unwrap()));
    assert_64_operation_receipt(&rejection, &content);
}

/// Codex hands the model a result's structured content and, by default, cuts it to 12,000
/// bytes for a model outside its catalog (gpt-5-codex): the sealed configuration declares the
/// host table's `tool_output_token_limit`, under which every page arrives whole.
#[tokio::test(flavor = "multi_thread")]
async fn codex_delivers_every_page_and_a_64_operation_rejections_ids() {
    delivers_every_page_and_the_rejection_whole(
        "codex",
        "gpt-5-codex",
        &[
            ("PATCHDIFF_CODEX_BINARY", codex().display().to_string()),
            ("OPENAI_BASE_URL", "{url}/v1".to_owned()),
            ("OPENAI_API_KEY", SECRET.to_owned()),
        ],
    )
    .await;
}

/// Gemini CLI hands the model only text blocks and cuts one past 40,000 characters: its server
/// answers each result as its JSON text, within the budget.
#[tokio::test(flavor = "multi_thread")]
async fn gemini_delivers_every_page_and_a_64_operation_rejections_ids() {
    delivers_every_page_and_the_rejection_whole(
        "gemini",
        "gemini-2.5-pro",
        &[
            ("PATCHDIFF_GEMINI_BINARY", gemini().display().to_string()),
            ("GOOGLE_GEMINI_BASE_URL", "{url}".to_owned()),
            ("GEMINI_API_KEY", SECRET.to_owned()),
        ],
    )
    .await;
}

/// opencode hands the model only text blocks and replaces one past 51,200 bytes: its server
/// answers each result as its JSON text, within the budget.
#[tokio::test(flavor = "multi_thread")]
async fn opencode_delivers_every_page_and_a_64_operation_rejections_ids() {
    delivers_every_page_and_the_rejection_whole(
        "opencode",
        "anthropic/claude-sonnet-4-5",
        &[
            (
                "PATCHDIFF_OPENCODE_BINARY",
                opencode().display().to_string(),
            ),
            ("ANTHROPIC_BASE_URL", "{url}".to_owned()),
            ("ANTHROPIC_API_KEY", SECRET.to_owned()),
        ],
    )
    .await;
}

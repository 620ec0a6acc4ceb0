//! Results a host can deliver, limits that agree, and a console client that takes every reply
//! (SPEC M1, M5, M6, E1, C3; `patchdiff::mcp::delivery`).
//!
//! Everything is real: the `patchdiff mcp` binary, its store and worker, the console's own
//! `McpProcess` client, `patchdiff console --script` with its preflight, and — for what a host
//! actually hands the model — the pinned Claude Code CLI offline against `scripted-model` on
//! loopback, started with the console's own sealed command line (`canary::host::host_args`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use patchdiff::canary::client::{LaunchSpec, McpProcess};
use patchdiff::canary::command::{Host, ProcessKind};
use patchdiff::canary::host::{self, HostPaths, HostRun};
use patchdiff::evidence::{Direction, WireRecord};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const EXE: &str = env!("CARGO_BIN_EXE_patchdiff");

pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The environment of a `patchdiff mcp` child of `profile` on the database in `dir`.
pub(crate) fn mcp_env(dir: &Path, profile: &str, mode: &str) -> Vec<(String, String)> {
    vec![
        ("PATCHDIFF_MCP_PROFILE".into(), profile.into()),
        ("PATCHDIFF_STRICT_OBSERVATION_MODE".into(), "1".into()),
        (
            "PATCHDIFF_DATABASE_URL".into(),
            format!("sqlite://{}", dir.join("pd.sqlite").display()),
        ),
        (
            "PATCHDIFF_STATE_DIR".into(),
            dir.join("state").display().to_string(),
        ),
        (
            "PATCHDIFF_DATA_DIR".into(),
            dir.join("data").display().to_string(),
        ),
        (
            "PATCHDIFF_CONFIG_DIR".into(),
            dir.join("config").display().to_string(),
        ),
        (
            "PATCHDIFF_WAYMARK_DIR".into(),
            repo().join("integrations/waymark").display().to_string(),
        ),
        ("PATCHDIFF_WAYMARK_MODE".into(), mode.into()),
    ]
}

pub(crate) async fn launch(dir: &Path, profile: &str, env: Vec<(String, String)>) -> McpProcess {
    let spec = LaunchSpec {
        kind: if profile == "full" {
            ProcessKind::Full
        } else {
            ProcessKind::Observed
        },
        exe: EXE.into(),
        env,
        stderr: dir.join(format!("{profile}.stderr.log")),
    };
    McpProcess::launch(&spec)
        .await
        .expect("patchdiff mcp starts")
}

/// Initializes `target` from `content` through a full-profile process.
pub(crate) async fn init(dir: &Path, target: &str, language: &str, content: &str) {
    let fixture = dir.join(format!("{target}.fixture"));
    std::fs::write(&fixture, content).unwrap();
    let full = launch(dir, "full", mcp_env(dir, "full", "resident")).await;
    full.call_ok(
        "patchdiff_init_target",
        json!({"target": target, "fixture": fixture, "sha256": sha256_hex(content.as_bytes()), "language": language}),
    )
    .await
    .expect("init");
    full.stop().await;
}

/// A Python module of about `bytes` bytes shaped like CPython's `argparse.py`: classes with
/// docstrings, quotes, backslashes and `self` on most lines (escapes count against a page).
pub(crate) fn argparse_like(bytes: usize) -> String {
    let mut s = String::from(
        "\"\"\"Command-line parsing library, argparse-like.\"\"\"\n\nimport os as _os\nimport re as _re\n\n",
    );
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!(
            "class Action{i}(_AttributeHolder):\n    \"\"\"Information about how to convert \"--opt{i}\" into an object.\n\n    Backslashes \\\\ and 'quotes' are kept.\n    \"\"\"\n\n    def __init__(self, option_strings, dest, nargs=None, default=None):\n        self.option_strings = option_strings\n        self.dest = dest\n        self.nargs = nargs\n        self.default = default\n\n    def __call__(self, parser, namespace, values, option_string=None):\n        raise NotImplementedError(_('.__call__() not defined: %r' % self.dest))\n\n\n"
        ));
        i += 1;
    }
    s
}

/// Every page of `target` read through `client` from offset 0: (offsets, contents, last page).
pub(crate) async fn read_pages(
    client: &McpProcess,
    target: &str,
) -> (Vec<u64>, String, Vec<Value>) {
    let (mut offsets, mut content, mut pages) = (vec![0u64], String::new(), Vec::new());
    loop {
        let offset = *offsets.last().unwrap();
        let page = client
            .call_ok(
                "patchdiff_read_target",
                json!({"target": target, "offset": offset}),
            )
            .await
            .expect("read_target");
        content.push_str(page["content"].as_str().unwrap());
        let more = page["has_more"] == true;
        if more {
            offsets.push(page["next_offset"].as_u64().expect("next_offset"));
        }
        pages.push(page);
        if !more {
            return (offsets, content, pages);
        }
        assert!(pages.len() < 10_000, "paging does not end");
    }
}

/// Each `how_to_continue` an agent is handed is true: following the offset it names, and only
/// that, reads the whole target and finds every occurrence; the last page has none. And a
/// journal entry larger than a host delivers (a 48 KB edit) is refused `RESULT_TOO_LARGE`
/// rather than sent, naming its size, the budget and the cursor past it, and that cursor
/// continues the replay (M5, the delivery budgets of `patchdiff::mcp::delivery`).
#[tokio::test(flavor = "multi_thread")]
async fn every_how_to_continue_leads_to_the_rest_and_an_entry_no_host_delivers_names_the_cursor_past_it()
 {
    let dir = tempfile::tempdir().unwrap();
    let content = argparse_like(100 * 1024);
    init(dir.path(), "argparse", "python", &content).await;
    let observed = launch(
        dir.path(),
        "observed",
        mcp_env(dir.path(), "observed", "resident"),
    )
    .await;

    // read_target: each page but the last tells the next call; the pages add up to the target.
    let (mut read, mut offset) = (String::new(), 0u64);
    loop {
        let page = observed
            .call_ok(
                "patchdiff_read_target",
                json!({"target": "argparse", "offset": offset}),
            )
            .await
            .unwrap();
        read.push_str(page["content"].as_str().unwrap());
        let Some(how) = page["how_to_continue"].as_str() else {
            assert_eq!(page["has_more"], false, "{page}");
            break;
        };
        offset = how
            .split("offset=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no offset in {how:?}"));
        assert_eq!(page["next_offset"], offset, "{how}");
        assert!(
            how.contains(&format!("of {} shown", content.len())),
            "{how}"
        );
    }
    assert_eq!(read, content);

    // find_occurrences: the same, counting occurrences.
    let (mut found, mut offset) = (0usize, 0u64);
    let total = content.matches("self").count();
    loop {
        let page = observed
            .call_ok(
                "patchdiff_find_occurrences",
                json!({"target": "argparse", "text": "self", "limit": 1000, "offset": offset}),
            )
            .await
            .unwrap();
        found += page["occurrences"].as_array().unwrap().len();
        let Some(how) = page["how_to_continue"].as_str() else {
            assert_eq!(page["has_more"], false, "{page}");
            break;
        };
        assert!(how.contains(&format!("of {total} shown")), "{how}");
        offset = how
            .split("offset=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no offset in {how:?}"));
    }
    assert_eq!(found, total, "every occurrence, once");

    // One 48 KB edit, then a small one: the journal's first entry no host delivers whole.
    let first_line = content.lines().next().unwrap();
    let (mut base, mut line) = (0, 1);
    for (key, extra) in [
        ("big", "# padding\n".repeat(4_800)),
        ("small", "# one\n".into()),
    ] {
        let obs = observed
            .call_ok(
                "patchdiff_observe_scope",
                json!({"target": "argparse", "lines": {"start": line, "end": line}}),
            )
            .await
            .unwrap();
        line += extra.matches('\n').count();
        let receipt = observed
            .call_ok(
                "patchdiff_submit_observed_operations",
                json!({"target": "argparse", "request_key": key, "base_revision": base,
                       "operations": [{"observation_id": obs["observation_id"],
                                       "old_text": first_line,
                                       "new_text": format!("{extra}{first_line}")}]}),
            )
            .await
            .unwrap();
        assert_eq!(receipt["outcome"], "accepted", "{receipt}");
        base = receipt["revision"].as_u64().unwrap();
    }
    // The replay pages around it (halving a page that would not fit) until the big entry
    // stands alone.
    let mut after = Value::Null;
    let refused = loop {
        let reply = observed
            .call(
                "patchdiff_replay",
                json!({"target": "argparse", "after": after}),
            )
            .await
            .unwrap();
        if reply.is_error {
            break reply;
        }
        let keys = reply.structured["entries"].to_string();
        assert!(!keys.contains("\"big\""), "the big entry was sent: {keys}");
        assert_eq!(reply.structured["has_more"], true, "{}", reply.structured);
        after = reply.structured["next_cursor"].clone();
    };
    assert_eq!(refused.structured["error"]["code"], "RESULT_TOO_LARGE");
    let message = refused.error_message();
    assert!(
        message.contains(&format!(
            "more than the {} bytes",
            patchdiff::mcp::delivery::RESULT_BUDGET_BYTES
        )),
        "{message}"
    );
    let after = message
        .split("after=")
        .nth(1)
        .map(|c| c.trim_matches(|ch: char| ch == '"' || ch.is_whitespace()))
        .unwrap_or_else(|| panic!("no cursor in {message:?}"));
    let rest = observed
        .call_ok(
            "patchdiff_replay",
            json!({"target": "argparse", "after": after}),
        )
        .await
        .unwrap();
    let keys: Vec<&str> = rest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["request_key"].as_str())
        .collect();
    assert_eq!(keys, ["small"], "{rest}");
    observed.stop().await;
}

/// Issue 23 item 8: an 11 MiB submission of control characters is legal (K3: 32 MiB of text)
/// and is accepted — its JSON line is 66 MiB, past the 65 MiB the transport read before —, and
/// the console's own client takes the 66 MiB replay page that carries it (rmcp's own client
/// drops lines over 16 MiB and would wait forever).
#[tokio::test(flavor = "multi_thread")]
async fn an_11_mib_submission_of_control_characters_is_accepted_and_replays_to_the_console() {
    let dir = tempfile::tempdir().unwrap();
    init(dir.path(), "t", "javascript", "const a = 1;\n").await;
    // Oneshot: validation under the lock starts no worker, so nothing but the limits is tested.
    let mut env = mcp_env(dir.path(), "full", "oneshot");
    env.push(("PATCHDIFF_STRICT_OBSERVATION_MODE".into(), "0".into()));
    let full = launch(dir.path(), "full", env).await;
    let controls = "\u{1}".repeat(11 * 1024 * 1024);
    let receipt = full
        .call(
            "patchdiff_submit_observed_operations",
            json!({"target": "t", "request_key": "ctl-1", "base_revision": 0,
                   "operations": [{"old_text": "1", "new_text": controls}]}),
        )
        .await
        .expect("an 11 MiB submission gets an answer, not a transport refusal");
    assert!(!receipt.is_error, "{}", receipt.text);
    assert_eq!(
        receipt.structured["outcome"], "accepted",
        "{}",
        receipt.text
    );
    assert_eq!(receipt.structured["revision"], 1);
    // The journal: the fixture's entry, then the edit, alone on its page (K6).
    let (mut after, mut largest) = (Value::Null, String::new());
    loop {
        let page = full
            .call_ok("patchdiff_replay", json!({"target": "t", "after": after}))
            .await
            .expect("each replay page, the 66 MiB one too, reaches the console's client");
        let text = page.to_string();
        if text.len() > largest.len() {
            largest = text;
        }
        if page["has_more"] != true {
            break;
        }
        after = page["next_cursor"].clone();
    }
    assert!(largest.len() > 66 * 1024 * 1024, "{} bytes", largest.len());
    assert!(
        largest.contains("\\u0001\\u0001"),
        "the edit's text is in the page"
    );
    full.stop().await;
}

/// The transport's line limit holds a legal submission at the worst escaping: 32 MiB of
/// control characters (the most K3 allows), 64 operations, as one `tools/call` line.
#[test]
fn the_largest_legal_submission_at_the_worst_escaping_fits_the_line_limit() {
    use patchdiff::kernel::{MAX_OPERATIONS, MAX_SUBMISSION_TEXT_BYTES};
    let per_op = MAX_SUBMISSION_TEXT_BYTES / MAX_OPERATIONS / 2;
    let text = "\u{1}".repeat(per_op);
    let operations: Vec<Value> = (0..MAX_OPERATIONS)
        .map(|i| json!({"observation_id": format!("obs-{i:032}"), "old_text": text, "new_text": text}))
        .collect();
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "patchdiff_submit_observed_operations",
        "arguments": {"target": "t".repeat(200), "request_key": "k".repeat(200),
                      "base_revision": u64::MAX, "expected_sha256": "0".repeat(64),
                      "operations": operations}}})
    .to_string();
    assert!(
        line.len() > 6 * MAX_SUBMISSION_TEXT_BYTES - 1024,
        "{} bytes",
        line.len()
    );
    assert!(
        line.len() <= patchdiff::mcp::stdio::MAX_LINE_BYTES,
        "{} > {}",
        line.len(),
        patchdiff::mcp::stdio::MAX_LINE_BYTES
    );
}

/// Issue 23 item 8: the wire log records each message once — reading a 1 MiB target page by
/// page writes about its size (before: 2.08 MB per read, structured content and its text copy),
/// and no result record is larger than a page.
#[tokio::test(flavor = "multi_thread")]
async fn reading_a_1_mib_target_writes_each_message_once_to_the_wire_log() {
    let dir = tempfile::tempdir().unwrap();
    let content = argparse_like(1024 * 1024);
    init(dir.path(), "big", "python", &content).await;
    let wire = dir.path().join("observed.mcp.jsonl");
    let mut env = mcp_env(dir.path(), "observed", "resident");
    env.push((
        "PATCHDIFF_EVIDENCE_WIRE_LOG".into(),
        wire.display().to_string(),
    ));
    let observed = launch(dir.path(), "observed", env).await;
    let before = std::fs::metadata(&wire).map_or(0, |m| m.len());
    let (_, read, pages) = read_pages(&observed, "big").await;
    observed.stop().await;
    assert_eq!(read, content, "the pages add up to the target");
    assert!(pages.len() > 1);
    let written = std::fs::metadata(&wire).unwrap().len() - before;
    // Escapes: the content's quotes and backslashes grow once in the result line and once more
    // in the record's JSON string; about 1.1× here, 2× was the copy.
    assert!(
        written < content.len() as u64 * 13 / 10,
        "{written} bytes of wire log for a {} byte read",
        content.len()
    );
    let log = std::fs::read_to_string(&wire).unwrap();
    let results: Vec<WireRecord> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<WireRecord>(l).ok())
        .filter(|r| r.direction == Direction::Result)
        .collect();
    for r in &results {
        assert!(
            r.bytes().len() <= 2 * patchdiff::mcp::delivery::RESULT_BUDGET_BYTES,
            "a result of {} bytes",
            r.bytes().len()
        );
        assert!(!r.elided, "far below the wire log's bound");
    }
}

/// Issue 25 item 2: a 9.8 MB target made the console's `read_target` reply 19.53 MiB, which
/// its rmcp client dropped, and `preflight` waited forever. Now the preflight finishes.
#[test]
fn preflight_of_a_9_8_mb_target_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("fixtures");
    copy_dir(&repo().join("assets/fixtures"), &fixtures);
    // The calendar original grows to 9.8 MB of comments: the same behaviour, so the controls
    // still hold.
    let original = fixtures.join("calendar/original.js");
    let mut bytes = std::fs::read(&original).unwrap();
    while bytes.len() < 9_800_000 {
        bytes.extend_from_slice(
            b"// padding: the target is large, its behaviour unchanged \"quoted\" \\ back\n",
        );
    }
    std::fs::write(&original, &bytes).unwrap();
    let manifest_path = fixtures.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    for f in manifest["fixtures"].as_array_mut().unwrap() {
        if f["target"] == "calendar" {
            f["sha256"] = json!(sha256_hex(&bytes));
        }
    }
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let script = dir.path().join("preflight.canary");
    std::fs::write(&script, "init\nlaunch observed\npreflight\n").unwrap();
    let runs = dir.path().join("runs");
    let mut child = Command::new(EXE)
        .arg("console")
        .arg("--script")
        .arg(&script)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--manifest")
        .arg(&manifest_path)
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Not a sleep: a bound on a wait that used to be endless, so the test fails rather than
    // hangs on a console that never finishes.
    let limit = Instant::now() + Duration::from_secs(240);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > limit {
            let _ = child.kill();
            panic!("the console did not finish init + preflight of a 9.8 MB target in 240 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("preflight"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("ok") && line.contains("targets fresh"),
        "{line}"
    );
}

pub(crate) fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// The pinned Claude Code CLI (or `PATCHDIFF_CLAUDE_BINARY`). Missing is a failure: CI
/// installs it.
fn claude() -> PathBuf {
    if let Some(p) = std::env::var_os("PATCHDIFF_CLAUDE_BINARY") {
        return PathBuf::from(p);
    }
    let p = repo().join("tests/tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    assert!(
        p.is_file(),
        "the Claude Code CLI is missing: run `npm ci --prefix tests/tools` (or set PATCHDIFF_CLAUDE_BINARY)"
    );
    p
}

/// Issue 25 item 1, through the real Claude Code CLI: a 100 KB argparse-like target read page
/// by page, `find_occurrences limit=1000` paged, and a 64-operation rejection. Before, the
/// read and the find came back as "exceeds maximum allowed tokens … saved to" (a file the
/// sealed agent cannot read) and the rejection's `revision`, `sha256` and `request_key` fell in
/// the 5,000 + 5,000 characters' cut.
#[tokio::test(flavor = "multi_thread")]
async fn claude_code_delivers_every_page_every_occurrence_and_a_64_operation_rejections_ids() {
    let dir = tempfile::tempdir().unwrap();
    let content = argparse_like(100 * 1024);
    init(dir.path(), "argparse", "python", &content).await;
    let needle = "self";
    let occurrences = content.matches(needle).count();
    assert!(occurrences > 1000, "{occurrences}");

    // The pages the server will give (it is deterministic), so the scripted plan can name them.
    let observed = launch(
        dir.path(),
        "observed",
        mcp_env(dir.path(), "observed", "resident"),
    )
    .await;
    let (offsets, _, _) = read_pages(&observed, "argparse").await;
    let mut finds = vec![0u64];
    loop {
        let page = observed
            .call_ok(
                "patchdiff_find_occurrences",
                json!({"target": "argparse", "text": needle, "limit": 1000, "offset": finds.last()}),
            )
            .await
            .unwrap();
        match page["next_offset"].as_u64() {
            Some(next) if page["has_more"] == true => finds.push(next),
            _ => break,
        }
    }
    observed.stop().await;
    assert!(
        offsets.len() >= 3 && finds.len() >= 2,
        "{offsets:?} {finds:?}"
    );

    let mut plan = Vec::new();
    for (i, offset) in offsets.iter().enumerate() {
        plan.push(
            json!({"step": format!("read-{i}"), "tool": "patchdiff_read_target",
                         "args": {"target": "argparse", "offset": offset}}),
        );
    }
    for (i, offset) in finds.iter().enumerate() {
        plan.push(json!({"step": format!("find-{i}"), "tool": "patchdiff_find_occurrences",
                         "args": {"target": "argparse", "text": needle, "limit": 1000, "offset": offset}}));
    }
    plan.extend(rejection_steps("argparse"));
    let plan_path = write_plan(dir.path(), &plan);

    let mut model = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
        .arg("--plan")
        .arg(&plan_path)
        .args(["--after-plan", "finish"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("scripted-model starts");
    let mut url = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(model.stdout.take().unwrap()),
        &mut url,
    )
    .unwrap();
    let url = url.trim().to_owned();

    // The console's own sealed command line and environment for the host.
    let home = dir.path().join("home");
    let workdir = dir.path().join("workdir");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    let paths = HostPaths {
        workdir: workdir.clone(),
        mcp_config: dir.path().join("agent.claude.mcp.json"),
        settings: dir.path().join("agent.claude.settings.json"),
        home: home.clone(),
    };
    let observed_env = mcp_env(dir.path(), "observed", "resident");
    std::fs::write(
        paths.host_mcp_config(),
        host::claude_mcp_config(EXE, &observed_env).to_string(),
    )
    .unwrap();
    std::fs::write(&paths.settings, host::claude_settings().to_string()).unwrap();
    let run = HostRun {
        host: Host::Claude,
        binary: claude(),
        model: "claude-sonnet-4-5".into(),
        max_turns: Some(200),
        timeout: Duration::from_secs(300),
    };
    let provider = vec![
        ("ANTHROPIC_BASE_URL".to_owned(), url),
        ("ANTHROPIC_API_KEY".to_owned(), "x".to_owned()),
    ];
    let output = Command::new(&run.binary)
        .args(host::host_args(
            &run,
            &paths,
            "Read the target, find, and edit.",
        ))
        .current_dir(&workdir)
        .env_clear()
        .envs(host::host_env(Host::Claude, &paths, &provider, &[]))
        .stdin(Stdio::null())
        .output()
        .expect("claude runs");
    let _ = model.kill();
    let _ = model.wait();
    let stream = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stream}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!stream.contains("saved to"), "a result was saved to a file");
    assert!(
        !stream.contains("exceeds maximum allowed tokens"),
        "{stream}"
    );
    assert!(!stream.contains("characters truncated"), "a result was cut");

    // What the model was handed, tool result by tool result, in call order.
    let results: Vec<(bool, String)> = stream
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "user")
        .flat_map(|v| {
            v["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            (b["is_error"] == true, text)
        })
        .collect();
    assert_eq!(results.len(), plan.len(), "{stream}");
    let leading = |text: &str| -> Value {
        let start = text
            .find('{')
            .unwrap_or_else(|| panic!("no JSON in {text}"));
        serde_json::Deserializer::from_str(&text[start..])
            .into_iter::<Value>()
            .next()
            .unwrap()
            .unwrap()
    };
    let mut read = String::new();
    for (_, text) in &results[..offsets.len()] {
        read.push_str(leading(text)["content"].as_str().unwrap());
    }
    assert_eq!(
        read, content,
        "the pages the model got add up to the target"
    );
    let mut found = 0;
    for (_, text) in &results[offsets.len()..offsets.len() + finds.len()] {
        let page = leading(text);
        assert_eq!(page["total"], occurrences);
        found += page["occurrences"].as_array().unwrap().len();
    }
    assert_eq!(found, occurrences, "every occurrence reached the model");
    let (is_error, rejection) = results.last().unwrap();
    assert!(is_error, "{rejection}");
    assert_64_operation_receipt(&leading(rejection), &content);
}

/// The request key of the 64-operation rejection the delivery tests submit.
pub(crate) const REJECTED_KEY: &str = "rejected-64-operations-key";

/// Plan steps that observe lines 1–40 of `target` and submit 64 operations whose `old_text` is
/// nowhere in them, with [`REJECTED_KEY`]: a rejection listing 64 reasons (expected as an error).
pub(crate) fn rejection_steps(target: &str) -> Vec<Value> {
    let operations: Vec<Value> = (0..64)
        .map(|i| json!({"observation_id": "${obs.observation_id}",
                        "old_text": format!("text that is nowhere in the scope, operation {i} {}", "x".repeat(120)),
                        "new_text": "y"}))
        .collect();
    vec![
        json!({"step": "obs", "tool": "patchdiff_observe_scope",
               "args": {"target": target, "lines": {"start": 1, "end": 40}}}),
        json!({"step": "reject", "tool": "patchdiff_submit_observed_operations",
               "args": {"target": target, "request_key": REJECTED_KEY,
                        "base_revision": "${obs.revision}", "operations": operations},
               "expect_error": true}),
    ]
}

/// `plan` as a scripted-model plan file in `dir`.
pub(crate) fn write_plan(dir: &Path, plan: &[Value]) -> PathBuf {
    let path = dir.join("delivery.plan.jsonl");
    let lines: Vec<String> = plan.iter().map(Value::to_string).collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The receipt of [`rejection_steps`]' submission on a target of `content` at version 0, whole:
/// its ids, and 64 reasons (8 listed, the rest counted).
pub(crate) fn assert_64_operation_receipt(receipt: &Value, content: &str) {
    assert_eq!(receipt["request_key"], REJECTED_KEY, "{receipt}");
    assert_eq!(receipt["outcome"], "rejected", "{receipt}");
    assert_eq!(receipt["revision"], 0, "{receipt}");
    assert_eq!(
        receipt["sha256"],
        sha256_hex(content.as_bytes()),
        "{receipt}"
    );
    assert_eq!(receipt["reasons_total"], 64, "{receipt}");
    assert_eq!(receipt["reason_codes"].as_array().unwrap().len(), 64);
    assert!(
        receipt["reasons_omitted"]
            .as_str()
            .unwrap()
            .contains("56 more not listed: 56 OLD_TEXT_NOT_FOUND"),
        "{receipt}"
    );
}

/// The installed CPython's own `argparse.py` (about 99.6 KB), read where the interpreter keeps
/// it: a real file of a well-known project, never a copy in this repository.
fn cpython_argparse() -> String {
    let out = Command::new("python3")
        .args(["-c", "import argparse; print(argparse.__file__)"])
        .output()
        .expect("python3 runs (every machine running these tests has it)");
    let path = String::from_utf8(out.stdout).unwrap();
    let text = std::fs::read_to_string(path.trim()).expect("argparse.py is readable");
    assert!(
        text.len() > 90_000,
        "{} is {} bytes",
        path.trim(),
        text.len()
    );
    text
}

/// Runs the real `patchdiff` with a private state and data dir under `home`.
fn patchdiff_cli(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(EXE)
        .args(args)
        .env("PATCHDIFF_STATE_DIR", home.join("state"))
        .env("PATCHDIFF_DATA_DIR", home.join("data"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("patchdiff runs")
}

fn both(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The first "done means" of issue 25, end to end through the console and the real Claude Code
/// CLI: an operator's one-target suite on CPython's real `argparse.py` with one bug put in
/// (`usage: ` misspelt), and a scripted model whose plan reads the whole target page by page,
/// finds more than 1,000 occurrences of `=` with `limit=1000`, observes
/// `HelpFormatter._format_usage`, fixes it and saves. The run is solved 1/1 by behaviour, no
/// tool result in the host's stream was saved to a file or cut, and what the host handed the
/// model adds up to the target and every occurrence (M5, A2, C1, E1).
#[tokio::test(flavor = "multi_thread")]
async fn a_claude_canary_on_cpythons_real_argparse_reads_finds_a_thousand_and_is_solved() {
    let claude = claude();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let real = cpython_argparse();
    let (bug, fix) = ("_('usgae: ')", "_('usage: ')");
    assert_eq!(
        real.matches(fix).count(),
        1,
        "argparse.py names `usage: ` once"
    );
    let original = real.replacen(fix, bug, 1);
    let needle = "=";
    let occurrences = original.matches(needle).count();
    assert!(
        occurrences > 1000,
        "{occurrences} occurrences of {needle:?}"
    );

    // The suite: `suite new`, the argparse target added, the example taken out, re-pinned.
    let inputs = home.join("inputs");
    std::fs::create_dir_all(inputs.join("expected")).unwrap();
    std::fs::write(inputs.join("argparse.py"), &original).unwrap();
    std::fs::write(inputs.join("expected/argparse.py"), &real).unwrap();
    std::fs::write(
        inputs.join("TASK.md"),
        "`ArgumentParser.format_usage()` must start with `usage: ` (it says `usgae: `).\n",
    )
    .unwrap();
    std::fs::write(
        inputs.join("test_usage.py"),
        "import unittest\n\nimport cliargs\n\n\nclass Usage(unittest.TestCase):\n    \
         def test_usage_starts_with_usage(self):\n        \
         parser = cliargs.ArgumentParser(prog='tool')\n        \
         parser.add_argument('--level', type=int)\n        \
         self.assertEqual(parser.format_usage(), 'usage: tool [-h] [--level LEVEL]\\n')\n\n    \
         def test_help_starts_with_usage(self):\n        \
         self.assertTrue(cliargs.ArgumentParser(prog='tool').format_help().startswith('usage: tool'))\n",
    )
    .unwrap();
    let suite = home.join("suite");
    let s = suite.to_str().unwrap();
    let i = |name: &str| inputs.join(name).display().to_string();
    for args in [
        vec!["suite", "new", s],
        vec![
            "suite",
            "add",
            s,
            "argparse",
            "--language",
            "python",
            "--original",
            &i("argparse.py"),
            "--expected",
            &i("expected/argparse.py"),
            "--task",
            &i("TASK.md"),
            "--check-file",
            &i("test_usage.py"),
            "--module-file",
            "cliargs.py",
            "--report",
            "unittest",
            "--check",
            "python3",
            "-m",
            "unittest",
            "-v",
        ],
    ] {
        let out = patchdiff_cli(home, &args);
        assert!(out.status.success(), "{args:?}: {}", both(&out));
    }
    let manifest_path = suite.join("manifest.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["fixtures"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["target"] == "argparse");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    std::fs::remove_dir_all(suite.join("example")).unwrap();
    for args in [["suite", "pin", s], ["suite", "check", s]] {
        let out = patchdiff_cli(home, &args);
        assert!(out.status.success(), "{args:?}: {}", both(&out));
    }

    // The pages the server gives (it is deterministic), so the scripted plan can name them.
    let scratch = tempfile::tempdir().unwrap();
    init(scratch.path(), "argparse", "python", &original).await;
    let observed = launch(
        scratch.path(),
        "observed",
        mcp_env(scratch.path(), "observed", "resident"),
    )
    .await;
    let (offsets, read, _) = read_pages(&observed, "argparse").await;
    assert_eq!(read, original);
    let mut finds = vec![0u64];
    loop {
        let page = observed
            .call_ok(
                "patchdiff_find_occurrences",
                json!({"target": "argparse", "text": needle, "limit": 1000, "offset": finds.last()}),
            )
            .await
            .unwrap();
        match page["next_offset"].as_u64() {
            Some(next) if page["has_more"] == true => finds.push(next),
            _ => break,
        }
    }
    observed.stop().await;
    assert!(
        offsets.len() >= 3 && finds.len() >= 2,
        "{offsets:?} {finds:?}"
    );

    let mut plan = Vec::new();
    for (n, offset) in offsets.iter().enumerate() {
        plan.push(
            json!({"step": format!("read-{n}"), "tool": "patchdiff_read_target",
                         "args": {"target": "argparse", "offset": offset}}),
        );
    }
    for (n, offset) in finds.iter().enumerate() {
        plan.push(json!({"step": format!("find-{n}"), "tool": "patchdiff_find_occurrences",
                         "args": {"target": "argparse", "text": needle, "limit": 1000, "offset": offset}}));
    }
    plan.push(json!({"step": "obs", "tool": "patchdiff_observe_scope",
                     "args": {"target": "argparse", "scope": "HelpFormatter._format_usage"}}));
    plan.push(
        json!({"step": "fix", "tool": "patchdiff_submit_observed_operations",
                     "args": {"target": "argparse", "request_key": "argparse-1",
                              "base_revision": "${obs.revision}",
                              "operations": [{"observation_id": "${obs.observation_id}",
                                              "old_text": bug, "new_text": fix}]},
                     "expect": {"outcome": "accepted"}}),
    );
    plan.push(
        json!({"step": "save", "tool": "patchdiff_save", "args": {"target": "argparse"},
                     "expect": {"version": 1}}),
    );
    let plan_path = home.join("argparse.plan.jsonl");
    let lines: Vec<String> = plan.iter().map(Value::to_string).collect();
    std::fs::write(&plan_path, lines.join("\n") + "\n").unwrap();
    let script = suite.join("argparse.canary");
    std::fs::write(
        &script,
        "suite .\nrecord model=claude-sonnet-4-5 provider=anthropic reasoning=default\ninit\n\
         agent claude max_turns=200 timeout=600\nexport\ninspect\nevaluate\nreport\n",
    )
    .unwrap();

    let model = crate::agent_host::Model::start(home, &plan_path, "finish");
    let runs = home.join("runs");
    let output = Command::new(EXE)
        .arg("console")
        .arg("--script")
        .arg(&script)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--json")
        .env("PATCHDIFF_STATE_DIR", home.join("state"))
        .env("PATCHDIFF_DATA_DIR", home.join("data"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .env("PATCHDIFF_CLAUDE_BINARY", &claude)
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-argparse-canary")
        .stdin(Stdio::null())
        .output()
        .expect("patchdiff runs");
    let report = crate::agent_host::report(&output);
    assert!(
        output.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["passed"], true, "{report:#}");
    let targets = report["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{report:#}");
    assert_eq!(targets[0]["name"], "argparse");
    assert_eq!(targets[0]["behavioral"], true, "{report:#}");
    assert_eq!(report["agent_host"]["seal"]["problem"], Value::Null);

    // What the host handed the model: nothing saved to a file, nothing cut; the reads add up
    // to the target and the finds to every occurrence.
    let run = crate::agent_host::the_only_run(&runs);
    let stream = crate::agent_host::host_stream(&run.join("agent.claude.jsonl"));
    for refusal in [
        "saved to",
        "exceeds maximum allowed tokens",
        "characters truncated",
    ] {
        assert!(
            stream.iter().all(|l| !l.contains(refusal)),
            "a result was `{refusal}`"
        );
    }
    let results: Vec<Value> = stream
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "user")
        .flat_map(|v| {
            v["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            let start = text
                .find('{')
                .unwrap_or_else(|| panic!("no JSON in {text}"));
            serde_json::Deserializer::from_str(&text[start..])
                .into_iter::<Value>()
                .next()
                .unwrap()
                .unwrap()
        })
        .collect();
    assert_eq!(results.len(), plan.len(), "one result per call");
    let delivered: String = results[..offsets.len()]
        .iter()
        .map(|page| page["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        delivered, original,
        "the pages the model got add up to the target"
    );
    let found: usize = results[offsets.len()..offsets.len() + finds.len()]
        .iter()
        .map(|page| page["occurrences"].as_array().unwrap().len())
        .sum();
    assert_eq!(found, occurrences, "every occurrence reached the model");
    assert_eq!(results[results.len() - 2]["outcome"], "accepted");
}

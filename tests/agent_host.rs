//! SPEC A1–A5 with the real Claude Code CLI, offline: `agent claude` launches the pinned CLI
//! (`tests/tools`, installed by `npm ci --prefix tests/tools`) headless and sealed, against a
//! scripted model on loopback (`scripted-model`, which speaks the Anthropic Messages streaming
//! API and plays a canary plan as `tool_use` blocks). Everything else is real: the CLI, the
//! observed process it starts from the run's MCP configuration, the worker, the store, the
//! evaluator.
//!
//! Two hosts here are *test hosts*: a wrapper that runs the real CLI with `Bash` left on (a host
//! that ignores the seal; the only way to produce that fault), and a model that never ends its
//! turn (a stalled model, for the timeout).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// A credential the runs receive; it must appear in no evidence file (A4).
const SECRET: &str = "sk-ant-test-SECRET-0f9a8b7c6d";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pinned Claude Code CLI (or `PATCHDIFF_CLAUDE_BINARY`). Missing is a failure, not a skip:
/// CI installs it.
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

/// The pinned Codex CLI's native binary (or `PATCHDIFF_CODEX_BINARY`).
fn codex() -> PathBuf {
    if let Some(p) = std::env::var_os("PATCHDIFF_CODEX_BINARY") {
        return PathBuf::from(p);
    }
    let p = repo().join(
        "tests/tools/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    );
    assert!(
        p.is_file(),
        "the Codex CLI is missing: run `npm ci --prefix tests/tools` (or set PATCHDIFF_CODEX_BINARY)"
    );
    p
}

/// `scripted-model` on a free loopback port; killed on drop.
struct Model {
    child: Child,
    url: String,
    requests: PathBuf,
}

impl Model {
    fn start(dir: &Path, plan: &Path, after: &str) -> Self {
        let requests = dir.join("model-requests.jsonl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
            .arg("--plan")
            .arg(plan)
            .args(["--after-plan", after, "--requests"])
            .arg(&requests)
            .stdout(Stdio::piped())
            .spawn()
            .expect("scripted-model starts");
        let mut url = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut url)
            .expect("scripted-model prints its address");
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        Self {
            child,
            url: url.trim().to_owned(),
            requests,
        }
    }

    /// The tool names each model request offered.
    fn offered_tools(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(&self.requests)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("request log line");
                v["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_owned())
                    .collect()
            })
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `patchdiff console --script SCRIPT --json` with the model's address and a credential.
fn run_canary(runs: &Path, script: &Path, model: &Model, claude: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(script)
        .arg("--runs-dir")
        .arg(runs)
        .arg("--json")
        .env("PATCHDIFF_STATE_DIR", runs.join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .env("PATCHDIFF_CLAUDE_BINARY", claude)
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", SECRET)
        .stdin(Stdio::null())
        .output()
        .expect("patchdiff runs")
}

/// The bundled `claude.canary` run against a model playing `assets/canary/PLAN`, through the
/// CLI at `claude`. Returns the runs directory (kept alive), the model and the console's output.
fn claude_canary(plan: &str, claude: &Path) -> (tempfile::TempDir, Model, Output) {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary").join(plan),
        "finish",
    );
    let output = run_canary(
        runs.path(),
        &repo().join("assets/canary/claude.canary"),
        &model,
        claude,
    );
    (runs, model, output)
}

/// A4: no file of the run holds the credential's value.
fn assert_no_credential(run: &Path) {
    for file in files(run) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "{} holds the API key",
            file.display()
        );
    }
}

fn report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a JSON report ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn the_only_run(runs: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["command"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {report:#}"))
}

/// Writes a script next to the plans, so relative paths still resolve.
fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("run.canary");
    std::fs::write(&path, body).unwrap();
    path
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The host's stream lines as the evidence keeps them (hash-chained records of the raw lines).
fn host_stream(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let record: Value = serde_json::from_str(l).expect("a chained record");
            assert!(record["prev_sha256"].is_string(), "{record}");
            record["raw"].as_str().expect("raw line").to_owned()
        })
        .collect()
}

fn sealed_tools() -> Vec<String> {
    // M2/A3, spelled out from SPEC rather than taken from the product's list.
    let mut six: Vec<String> = [
        "patchdiff_read_target",
        "patchdiff_find_occurrences",
        "patchdiff_observe_scope",
        "patchdiff_submit_observed_operations",
        "patchdiff_save",
        "patchdiff_replay",
    ]
    .iter()
    .map(|t| format!("mcp__patchdiff__{t}"))
    .collect();
    six.sort();
    six
}

#[test]
fn claude_runs_the_bundled_canary_sealed_and_passes_five_of_five() {
    let (runs, model, output) = claude_canary("demo.plan.jsonl", &claude());
    let report = report(&output);
    assert!(
        output.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["passed"], true);
    for t in report["targets"].as_array().unwrap() {
        assert_eq!(t["full_byte"], true, "{t}");
        assert_eq!(t["behavioral"], true, "{t}");
    }
    let host = &report["agent_host"];
    assert_eq!(host["host"], "claude");
    assert!(
        host["version"].as_str().unwrap().starts_with("2.1.328"),
        "{host}"
    );
    assert_eq!(host["requested_model"], "claude-sonnet-4-5");
    assert_eq!(host["seal"]["problem"], Value::Null);
    assert_eq!(host["tool_calls"]["patchdiff_save"], 5, "{host}");
    assert_eq!(host["timed_out"], false);

    // A3 seen from the other side: every model request offered exactly the six tools.
    let offered = model.offered_tools();
    assert!(!offered.is_empty());
    for mut tools in offered {
        tools.sort();
        assert_eq!(tools, sealed_tools());
    }

    let run = the_only_run(runs.path());
    // A4: the host's own stream is evidence (0600), starting with its init line.
    let stream_path = run.join("agent.claude.jsonl");
    let mode = std::fs::metadata(&stream_path)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let stream = host_stream(&stream_path);
    let init: Value = serde_json::from_str(&stream[0]).unwrap();
    assert_eq!(init["subtype"], "init");
    let mut tools: Vec<String> = serde_json::from_value(init["tools"].clone()).unwrap();
    tools.sort();
    assert_eq!(tools, sealed_tools());
    assert!(stream.last().unwrap().contains("\"type\":\"result\""));
    // A2: the working directory held only the brief.
    assert!(patchdiff::canary::host_run::workdir_is_sealed(
        &run.join("agent-workdir")
    ));
    // A4: the manifest names the CLI and its version, written before the agent ran.
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    let planned = &manifest["configuration"]["agent_host"];
    assert_eq!(planned["host"], "claude");
    assert!(planned["version"].as_str().unwrap().contains("2.1.328"));
    // The edits went through the observed process the host started: its wire log has them.
    let wire = std::fs::read_to_string(run.join("host-observed.mcp.jsonl")).unwrap();
    assert_eq!(
        wire.matches("patchdiff_submit_observed_operations")
            .count()
            .min(1),
        1
    );
    // V2: the sealed run verifies, the host's stream included.
    let verify = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    // A4: no credential in any evidence file.
    assert_no_credential(&run);
}

#[test]
fn claude_with_a_wrong_plan_fails_naming_chess() {
    let (_runs, _model, output) = claude_canary("wrong.plan.jsonl", &claude());
    assert_eq!(output.status.code(), Some(1));
    let report = report(&output);
    assert_eq!(step(&report, "agent")["ok"], true, "{report:#}");
    let failed: Vec<&str> = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["full_byte"] != true || t["behavioral"] != true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["chess"]);
    assert!(
        step(&report, "evaluate")["summary"]
            .as_str()
            .unwrap()
            .contains("chess")
    );
    // Issue 21 item 2: the broken sub-test is named in JSON, text and JUnit (one test case per
    // named check, read back with a JUnit reader).
    let broken = "test_chess.Castling.test_kingside_castling_when_clear";
    let chess = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "chess")
        .unwrap();
    let failing_in_json: Vec<&str> = chess["failing_checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(failing_in_json.contains(&broken), "{chess:#}");
    let run = the_only_run(_runs.path());
    let text = std::fs::read_to_string(run.join("report.txt")).unwrap();
    assert!(
        text.contains(&format!("failing checks: {}", failing_in_json.join(", "))),
        "{text}"
    );
    let junit = std::fs::read_to_string(run.join("report.junit.xml")).unwrap();
    let parsed = quick_junit::Report::deserialize_from_str(&junit).expect("valid JUnit XML");
    let named: Vec<&quick_junit::TestCase> = parsed.test_suites[0]
        .test_cases
        .iter()
        .filter(|c| c.classname.as_deref() == Some("check.chess"))
        .collect();
    let named_in_json = chess["checks"].as_array().unwrap().len();
    assert_eq!(
        named.len(),
        named_in_json,
        "one test case per named check: {junit}"
    );
    let failing: Vec<&str> = named
        .iter()
        .filter(|c| matches!(c.status, quick_junit::TestCaseStatus::NonSuccess { .. }))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failing, failing_in_json, "{junit}");
}

/// Issue 21 item 1 through the real CLI: the model fixes chess's castling rule with `or`
/// instead of the reference's `any(…)` — right behaviour, other bytes. Behaviour decides: the
/// target passes, `identical to the reference: no`; the same run with `evaluate
/// require=full-byte` fails it.
#[test]
fn claude_with_an_edit_in_other_words_passes_by_behaviour_and_fails_full_byte() {
    let claude = claude();
    let reference = "any(self.is_attacked(x, rank, opponent(color)) for x in (crossed, target))";
    let or_form = "self.is_attacked(crossed, rank, opponent(color)) or self.is_attacked(target, rank, opponent(color))";
    let demo = std::fs::read_to_string(repo().join("assets/canary/demo.plan.jsonl")).unwrap();
    assert!(
        demo.contains(reference),
        "the demo plan's castling edit moved"
    );
    let bundled = std::fs::read_to_string(repo().join("assets/canary/claude.canary")).unwrap();
    for (evaluate, status, exit) in [
        ("evaluate", "pass", 0),
        ("evaluate require=full-byte", "fail", 1),
    ] {
        let runs = tempfile::tempdir().unwrap();
        let plan = runs.path().join("or-form.plan.jsonl");
        std::fs::write(&plan, demo.replace(reference, or_form)).unwrap();
        let model = Model::start(runs.path(), &plan, "finish");
        let body = bundled.replace("\nevaluate\n", &format!("\n{evaluate}\n"));
        assert!(body.contains(evaluate));
        let output = run_canary(runs.path(), &script(runs.path(), &body), &model, &claude);
        let report = report(&output);
        assert_eq!(output.status.code(), Some(exit), "{evaluate}: {report:#}");
        assert_eq!(step(&report, "agent")["ok"], true, "{report:#}");
        let chess = report["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "chess")
            .unwrap();
        assert_eq!(chess["status"], status, "{evaluate}: {chess:#}");
        assert_eq!(chess["full_byte"], false, "{chess:#}");
        assert_eq!(chess["behavioral"], true, "{chess:#}");
        assert!(chess["first_difference"].is_string(), "{chess:#}");
        let text = std::fs::read_to_string(the_only_run(runs.path()).join("report.txt")).unwrap();
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("chess"))
            .unwrap();
        assert!(
            row.contains(if status == "pass" { "pass" } else { "FAIL" }),
            "{text}"
        );
        assert!(text.contains("first difference: at byte"), "{text}");
        assert!(
            text.contains(if exit == 0 {
                "decided by: behaviour"
            } else {
                "decided by: full-byte"
            }),
            "{text}"
        );
    }
}

#[test]
fn a_host_that_offers_a_native_tool_fails_the_seal_before_the_agent_acts() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    // TEST HOST: the real CLI, with `--tools ""` turned into `--tools Bash` and without the
    // settings that deny it (both layers of the seal removed, as a careless host would).
    let wrapper = runs.path().join("claude-with-bash");
    std::fs::write(
        &wrapper,
        format!(
            "#!/usr/bin/env bash\nargs=()\nprev=\nfor a in \"$@\"; do\n  \
             if [ \"$prev\" = --settings ]; then prev=; continue; fi\n  \
             if [ \"$a\" = --settings ]; then prev=$a; continue; fi\n  \
             if [ \"$prev\" = --tools ]; then a=Bash; fi\n  \
             args+=(\"$a\"); prev=$a\ndone\nexec {:?} \"${{args[@]}}\"\n",
            claude()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = run_canary(
        runs.path(),
        &repo().join("assets/canary/claude.canary"),
        &model,
        &wrapper,
    );
    assert_eq!(output.status.code(), Some(1));
    let report = report(&output);
    let agent = step(&report, "agent");
    assert_eq!(agent["ok"], false);
    let summary = agent["summary"].as_str().unwrap();
    assert!(
        summary.contains("seal does not hold") && summary.contains("Bash"),
        "{summary}"
    );
    assert!(
        report["agent_host"]["seal"]["problem"]
            .as_str()
            .unwrap()
            .contains("Bash")
    );
    // Stopped before the agent acted: no tool call reached the observed process.
    let run = the_only_run(runs.path());
    let wire = std::fs::read_to_string(run.join("host-observed.mcp.jsonl")).unwrap_or_default();
    assert!(!wire.contains("tools/call"), "{wire}");
    for t in report["targets"].as_array().unwrap() {
        assert_eq!(t["version"], 0, "{t}");
        assert_eq!(t["accepted"], 0, "{t}");
    }
}

#[test]
fn a_model_that_never_saves_hits_the_timeout_and_the_host_group_is_stopped() {
    let runs = tempfile::tempdir().unwrap();
    let plan = runs.path().join("read-only.plan.jsonl");
    std::fs::write(
        &plan,
        "{\"step\": \"read\", \"tool\": \"patchdiff_read_target\", \"args\": {\"target\": \"calendar\"}}\n",
    )
    .unwrap();
    // TEST MODEL: reads one target, then never answers again.
    let model = Model::start(runs.path(), &plan, "stall");
    let body = "record model=claude-sonnet-4-5\ninit\nagent claude timeout=8\nexport\nreport\n";
    let output = run_canary(runs.path(), &script(runs.path(), body), &model, &claude());
    assert_eq!(output.status.code(), Some(1));
    let report = report(&output);
    let agent = step(&report, "agent");
    assert_eq!(agent["ok"], false);
    assert!(
        agent["summary"]
            .as_str()
            .unwrap()
            .contains("timed out after 8 s"),
        "{agent}"
    );
    let host = &report["agent_host"];
    assert_eq!(host["timed_out"], true);
    assert_eq!(host["tool_calls"]["patchdiff_read_target"], 1, "{host}");
    // A1: nothing of the host's process group outlives the step — the CLI and the observed
    // process it started are gone.
    let pid = host["pid"].as_u64().expect("host pid");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "host {pid} lives"
    );
    let run = the_only_run(runs.path());
    let perf = std::fs::read_to_string(run.join("host-observed.perf.jsonl")).unwrap();
    let observed = patchdiff::canary::host::newest_pid(&perf).expect("observed pid");
    let state = patchdiff::canary::client::proc_state(u64::from(observed));
    assert!(
        state == "gone" || state.starts_with('Z'),
        "observed {observed}: {state}"
    );
}

/// Codex 0.169 always offers three helpers for MCP *resources* of the configured servers (ours
/// lists none) next to the server's tools; nothing else may appear (A2).
const CODEX_RESOURCE_HELPERS: [&str; 3] = [
    "list_mcp_resource_templates",
    "list_mcp_resources",
    "read_mcp_resource",
];

#[test]
fn codex_runs_the_bundled_canary_sealed_and_passes_five_of_five() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(repo().join("assets/canary/codex.canary"))
        .arg("--runs-dir")
        .arg(runs.path())
        .arg("--json")
        .env("PATCHDIFF_STATE_DIR", runs.path().join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .env("PATCHDIFF_CODEX_BINARY", codex())
        .env("OPENAI_BASE_URL", format!("{}/v1", model.url))
        .env("OPENAI_API_KEY", SECRET)
        .stdin(Stdio::null())
        .output()
        .expect("patchdiff runs");
    let report = report(&output);
    assert!(
        output.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["passed"], true);
    let host = &report["agent_host"];
    assert_eq!(host["host"], "codex");
    assert!(
        host["version"].as_str().unwrap().contains("0.169.0"),
        "{host}"
    );
    assert_eq!(host["seal"]["problem"], Value::Null, "{host}");
    assert_eq!(host["tool_calls"]["patchdiff_save"], 5, "{host}");
    // What Codex offered the model: the six under our server's namespace, and no native tool.
    let offered = model.offered_tools();
    assert!(!offered.is_empty());
    for tools in offered {
        let mut ours: Vec<String> = tools
            .iter()
            .filter(|t| !CODEX_RESOURCE_HELPERS.contains(&t.as_str()))
            .cloned()
            .collect();
        ours.sort();
        assert_eq!(ours, sealed_tools(), "offered: {tools:?}");
    }
    let run = the_only_run(runs.path());
    let stream = host_stream(&run.join("agent.codex.jsonl"));
    assert!(stream[0].contains("thread.started"));
    assert_no_credential(&run);
}

//! SPEC A1–A5 with the real Claude Code CLI, offline: `agent claude` launches the pinned CLI
//! (`tests/tools`, installed by `npm ci --prefix tests/tools`) headless and sealed, against a
//! scripted model on loopback (`scripted-model`, which speaks the Anthropic Messages streaming
//! API and plays a canary plan as `tool_use` blocks). Everything else is real: the CLI, the
//! observed process it starts from the run's MCP configuration, the worker, the store, the
//! evaluator.
//!
//! Some hosts and models here are *test* ones, each the only way to produce its fault: a wrapper
//! that runs the real CLI with `Bash` left on (a host that ignores the seal); models that never
//! end their turn (`--after-plan stall`), stall after saving two targets
//! (`--stall-after-saves 2`) or never answer at all (`--stall-after-saves 0`), for the timeout;
//! and models that answer HTTP errors (`--fail-status 529|500`), for a provider that refuses
//! the first request or fails after the agent acted (issue 21 item 3). A missing host binary is
//! a path that does not exist.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// A credential the runs receive; it must appear in no evidence file (A4).
pub(crate) const SECRET: &str = "sk-ant-test-SECRET-0f9a8b7c6d";

pub(crate) fn repo() -> PathBuf {
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
pub(crate) fn codex() -> PathBuf {
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
pub(crate) struct Model {
    child: Child,
    pub(crate) url: String,
    requests: PathBuf,
}

impl Model {
    pub(crate) fn start(dir: &Path, plan: &Path, after: &str) -> Self {
        Self::start_with(dir, plan, &["--after-plan", after])
    }

    /// `scripted-model` with more options (`--fail-status`, `--stall-after-saves`, …).
    fn start_with(dir: &Path, plan: &Path, options: &[&str]) -> Self {
        let requests = dir.join("model-requests.jsonl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
            .arg("--plan")
            .arg(plan)
            .args(options)
            .arg("--requests")
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

    /// The HTTP status of each model request, as the model's request log has it.
    pub(crate) fn statuses(&self) -> Vec<u64> {
        std::fs::read_to_string(&self.requests)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("request log line");
                v["status"].as_u64().expect("status")
            })
            .collect()
    }

    /// The tool results each model request handed the model for the first time, as the host
    /// sent them (the request log's `results`), in request order.
    pub(crate) fn results(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.requests)
            .unwrap_or_default()
            .lines()
            .flat_map(|l| {
                let v: Value = serde_json::from_str(l).expect("request log line");
                v["results"].as_array().cloned().unwrap_or_default()
            })
            .collect()
    }

    /// The tool names each model request offered.
    pub(crate) fn offered_tools(&self) -> Vec<Vec<String>> {
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
    run_canary_with(runs, script, model, claude, &[])
}

/// [`run_canary`] with more variables in the console's environment.
fn run_canary_with(
    runs: &Path,
    script: &Path,
    model: &Model,
    claude: &Path,
    env: &[(&str, &str)],
) -> Output {
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .envs(env.iter().copied())
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

/// A TEST HOST: an executable bash script `name` in `dir` that runs `prelude` and then execs
/// the real CLI with `args` (bash words; `"$@"` passes the console's own arguments through).
fn claude_wrapper(dir: &Path, name: &str, prelude: &str, args: &str) -> PathBuf {
    let wrapper = dir.join(name);
    std::fs::write(
        &wrapper,
        format!("#!/usr/bin/env bash\n{prelude}exec {:?} {args}\n", claude()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// A4: no file of the run holds the credential's value.
pub(crate) fn assert_no_credential(run: &Path) {
    for file in files(run) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "{} holds the API key",
            file.display()
        );
    }
}

pub(crate) fn report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a JSON report ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

pub(crate) fn the_only_run(runs: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

pub(crate) fn step<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["command"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {report:#}"))
}

/// Writes a script next to the plans, so relative paths still resolve.
pub(crate) fn script(dir: &Path, body: &str) -> PathBuf {
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
pub(crate) fn host_stream(path: &Path) -> Vec<String> {
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
    // Issue 21 item 5: the host's totals, normalised. Each model request carries 10 uncached
    // input tokens, 3 written to and 20 read from the cache, and 10 output tokens.
    let requests = model.statuses().len() as u64;
    assert_eq!(host["turns"], requests, "one answer per request: {host}");
    assert_eq!(host["usage_source"], "result", "{host}");
    assert_eq!(host["input_tokens"], 33 * requests, "{host}");
    assert_eq!(host["cache_read_tokens"], 20 * requests, "{host}");
    assert_eq!(host["cache_write_tokens"], 3 * requests, "{host}");
    assert_eq!(host["output_tokens"], 10 * requests, "{host}");
    assert_eq!(
        host["usage"]["input_tokens"],
        10 * requests,
        "raw beside: {host}"
    );
    assert_eq!(report["agent_stop"]["reason"], "finished", "{report:#}");

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
    assert!(patchdiff::canary::steps::agent_host::workdir_is_sealed(
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

/// A2/A4: the operator's proxy settings reach the sealed host, which still reaches the loopback model
/// (`NO_PROXY` exempts it; the proxy itself is a closed port, so a host that ignored `NO_PROXY`
/// would fail every request); the record names the variables, and the proxy's password is in
/// no file of the run.
#[test]
fn a_sealed_claude_run_behind_a_proxy_gets_its_settings_and_names_them_in_the_host_record() {
    const PROXY_PASSWORD: &str = "proxy-pw-7d6c5b4a";
    let proxy = format!("http://operator:{PROXY_PASSWORD}@127.0.0.1:9");
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let output = run_canary_with(
        runs.path(),
        &repo().join("assets/canary/claude.canary"),
        &model,
        &claude(),
        &[
            ("HTTPS_PROXY", &proxy),
            ("HTTP_PROXY", &proxy),
            ("NO_PROXY", "127.0.0.1,localhost"),
            ("MAX_MCP_OUTPUT_TOKENS", "100"),
        ],
    );
    let report = report(&output);
    assert!(
        output.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(!model.statuses().is_empty(), "the host reached the model");
    let host = &report["agent_host"];
    // The three given, in the list's order (the machine's own CA settings, if any, beside).
    let names: Vec<&str> = host["network_variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .filter(|n| n.contains("PROXY"))
        .collect();
    assert_eq!(names, ["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"], "{host}");
    // The operator's tiny output limit did not reach the host: the host table's did.
    assert_eq!(
        host["host_limit_variables"],
        serde_json::json!(["MAX_MCP_OUTPUT_TOKENS"]),
        "{host}"
    );
    let run = the_only_run(runs.path());
    let record: Value =
        serde_json::from_slice(&std::fs::read(run.join("agent.claude.json")).unwrap()).unwrap();
    assert_eq!(record["network_variables"], host["network_variables"]);
    for file in files(&run) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(
            !text.contains(PROXY_PASSWORD),
            "{} holds the proxy's password",
            file.display()
        );
    }
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
    let wrapper = claude_wrapper(
        runs.path(),
        "claude-with-bash",
        "args=()\nprev=\nfor a in \"$@\"; do\n  \
         if [ \"$prev\" = --settings ]; then prev=; continue; fi\n  \
         if [ \"$a\" = --settings ]; then prev=$a; continue; fi\n  \
         if [ \"$prev\" = --tools ]; then a=Bash; fi\n  \
         args+=(\"$a\"); prev=$a\ndone\n",
        "\"${args[@]}\"",
    );
    let output = run_canary(
        runs.path(),
        &repo().join("assets/canary/claude.canary"),
        &model,
        &wrapper,
    );
    // Refused before the agent acted: infra_abort (exit 3), nothing judged (issue 21 item 3).
    assert_eq!(output.status.code(), Some(3));
    let report = report(&output);
    assert_eq!(report["outcome"], "infra_abort", "{report:#}");
    assert_eq!(report["agent_stop"]["reason"], "seal_refused", "{report:#}");
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
    // The timeout counts from the step's start (the checks before the host starts included):
    // 15 s leave a loaded machine's CLI time to reach its first model turn.
    let body = "record model=claude-sonnet-4-5\ninit\nagent claude timeout=15\nexport\nreport\n";
    let output = run_canary(runs.path(), &script(runs.path(), body), &model, &claude());
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let report = report(&output);
    let agent = step(&report, "agent");
    assert_eq!(agent["ok"], false);
    assert!(
        agent["summary"]
            .as_str()
            .unwrap()
            .contains("timed out after 15 s"),
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
    codex_runs_the_bundled_canary_sealed("gpt-5.1-codex");
}

/// A2 for the models Codex's own catalog lists (`codex debug models --bundled`): the catalog
/// gives each `apply_patch` and `tool_search` (our six deferred behind it), code mode and
/// sub-agents to some, whatever the features say — and Codex's stream says nothing of it. One
/// model of each wire it speaks (the classic Responses `tools`, and "responses lite", which
/// offers tools as `additional_tools` input items), each checked to carry native tools in the
/// bundled catalog, runs the sealed canary: offered the six and Codex's resource helpers only,
/// and passed.
#[test]
fn codex_with_the_models_its_own_catalog_gives_native_tools_is_offered_only_the_six() {
    let out = Command::new(codex())
        .args(["debug", "models", "--bundled"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let catalog: Value = serde_json::from_slice(&out.stdout).expect("the bundled catalog");
    for lite in [false, true] {
        let model = catalog["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["use_responses_lite"] == lite)
            .unwrap_or_else(|| panic!("no catalog model with use_responses_lite={lite}"));
        assert_eq!(model["supports_search_tool"], true, "{model}");
        assert!(model["apply_patch_tool_type"].is_string(), "{model}");
        codex_runs_the_bundled_canary_sealed(model["slug"].as_str().unwrap());
    }
}

/// The bundled `codex.canary` with `--set model=MODEL` against the scripted model: sealed,
/// passed, the six (and Codex's resource helpers) the only tools offered in every request.
fn codex_runs_the_bundled_canary_sealed(model_name: &str) {
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
        .args(["--set", &format!("model={model_name}")])
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
    // Issue 21 item 5: Codex's figures in the same terms as Claude Code's. Each model request
    // carries 40 input tokens of which 25 cached and 10 output tokens; the Responses API names
    // no cache writes (Codex reports 0) and Codex gives no cost.
    let requests = model.statuses().len() as u64;
    assert_eq!(host["turns"], requests, "one answer per request: {host}");
    assert_eq!(host["host_turns"], 1, "one prompt: {host}");
    assert_eq!(host["usage_source"], "turns", "{host}");
    assert_eq!(host["input_tokens"], 40 * requests, "{host}");
    assert_eq!(host["cache_read_tokens"], 25 * requests, "{host}");
    assert_eq!(host["output_tokens"], 10 * requests, "{host}");
    assert_eq!(host["cache_write_tokens"], 0, "{host}");
    assert_eq!(host["cost_usd"], Value::Null, "{host}");
    assert_eq!(
        host["usage"]["cached_input_tokens"],
        25 * requests,
        "raw beside: {host}"
    );
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
    // Issue 26 item 4: the model came from `--set model=…` into the script's `${model}`.
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["agent"]["model"], model_name, "{manifest:#}");
    let stream = host_stream(&run.join("agent.codex.jsonl"));
    assert!(stream[0].contains("thread.started"));
    assert_no_credential(&run);
}

/// The `agent claude` canary with the model at `model` and a timeout of `timeout` s: export,
/// inspect and evaluate after it, then the report.
fn claude_canary_judged(runs: &Path, model: &Model, timeout: u32) -> Output {
    let body = format!(
        "record model=claude-sonnet-4-5\ninit\nagent claude timeout={timeout}\nexport\ninspect\nevaluate\nreport\n"
    );
    run_canary(runs, &script(runs, &body), model, &claude())
}

#[test]
fn a_provider_refusing_the_first_request_aborts_the_run_with_nothing_judged_and_compare_says_infra_error()
 {
    let root = tempfile::tempdir().unwrap();
    // A: the bundled canary, passed by the real CLI.
    let (pass_dir, pass_model) = (root.path().join("pass"), root.path().join("pass-model"));
    std::fs::create_dir_all(&pass_model).unwrap();
    let model = Model::start(
        &pass_model,
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    std::fs::create_dir_all(&pass_dir).unwrap();
    let passed = run_canary(
        &pass_dir,
        &repo().join("assets/canary/claude.canary"),
        &model,
        &claude(),
    );
    assert_eq!(passed.status.code(), Some(0), "{:#}", report(&passed));
    drop(model);
    let a = the_only_run(&pass_dir);

    // B: a model that answers 529 (overloaded) to every request, from the first.
    let refused_dir = root.path().join("refused");
    std::fs::create_dir_all(&refused_dir).unwrap();
    let model = Model::start_with(
        &refused_dir,
        &repo().join("assets/canary/demo.plan.jsonl"),
        &["--fail-status", "529"],
    );
    let output = claude_canary_judged(&refused_dir, &model, 120);
    // Issue 21 item 3: refused before its first model turn → infra_abort, exit 3.
    assert_eq!(output.status.code(), Some(3), "{:#}", report(&output));
    let report = report(&output);
    assert_eq!(report["outcome"], "infra_abort", "{report:#}");
    assert_eq!(report["passed"], false);
    let stop = &report["agent_stop"];
    assert_eq!(stop["acted"], false, "{stop}");
    assert_eq!(stop["reason"], "provider_refused", "{stop}");
    assert!(
        stop["detail"].as_str().unwrap().contains("HTTP 529"),
        "{stop}"
    );
    assert!(
        report["infra_abort"]
            .as_str()
            .unwrap()
            .contains("provider refused the first model request"),
        "{report:#}"
    );
    // The host asked once and gave up (x-should-retry: false); the model never answered.
    assert_eq!(model.statuses(), [529]);
    assert_eq!(report["agent_host"]["turns"], 0, "{report:#}");
    assert_eq!(report["agent_host"]["tool_calls_total"], 0);
    // Nothing judged: export, inspect and evaluate did not run, no target has a verdict.
    let steps: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["command"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["record", "init", "agent", "report"], "{report:#}");
    for t in report["targets"].as_array().unwrap() {
        assert_eq!(t["status"], Value::Null, "{t}");
        assert_eq!(t["evaluated"], false, "{t}");
    }
    let b = the_only_run(&refused_dir);
    let text = std::fs::read_to_string(b.join("report.txt")).unwrap();
    assert!(text.contains("— INFRA_ABORT"), "{text}");
    assert!(
        text.contains("no target judged") && !text.contains("targets pass both checks"),
        "{text}"
    );
    // JUnit: the targets are skipped, not failed.
    let junit = std::fs::read_to_string(b.join("report.junit.xml")).unwrap();
    let parsed = quick_junit::Report::deserialize_from_str(&junit).expect("JUnit parses");
    let suite = &parsed.test_suites[0];
    let targets: Vec<_> = suite
        .test_cases
        .iter()
        .filter(|c| c.classname.as_deref() != Some("canary.step"))
        .collect();
    assert_eq!(targets.len(), 10);
    for case in targets {
        assert!(
            matches!(case.status, quick_junit::TestCaseStatus::Skipped { .. }),
            "{case:?}"
        );
    }
    let wire = std::fs::read_to_string(b.join("host-observed.mcp.jsonl")).unwrap_or_default();
    assert!(
        !wire.contains("tools/call"),
        "no call reached the observed process"
    );
    // The aborted run is still a sealed run that verifies (V2), with no credential in it;
    // `--evaluate` has no verdict to reproduce and says so.
    let verify = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("verify")
        .arg("--evaluate")
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("nothing judged (infra_abort)"),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    assert_no_credential(&b);

    // Issue 21 item 4: `runs compare` names the change infra_error, never REGRESSED.
    let compare = root.path().join("compare.canary");
    std::fs::write(
        &compare,
        format!("runs compare {} {}\n", a.display(), b.display()),
    )
    .unwrap();
    let view = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(&compare)
        .arg("--runs-dir")
        .arg(root.path().join("views"))
        .env("PATCHDIFF_STATE_DIR", root.path().join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let view = String::from_utf8_lossy(&view.stdout);
    for target in ["calendar", "chess", "incidents", "worker-logs", "limiter"] {
        let line = view
            .lines()
            .find(|l| l.starts_with(target))
            .unwrap_or_else(|| panic!("no {target} line:\n{view}"));
        assert!(
            line.contains("pass") && line.contains("infra_error"),
            "{line}"
        );
    }
    assert!(!view.contains("REGRESSED"), "{view}");
}

#[test]
fn a_model_that_stalls_after_saving_two_targets_gets_those_two_judged_and_the_rest_fail() {
    let runs = tempfile::tempdir().unwrap();
    // TEST MODEL: plays the demo plan, and stops answering once two targets are saved
    // (calendar and chess), so the host runs into its timeout with partial work saved.
    let model = Model::start_with(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        &["--stall-after-saves", "2"],
    );
    let output = claude_canary_judged(runs.path(), &model, 30);
    assert_eq!(output.status.code(), Some(1));
    let report = report(&output);
    assert_eq!(report["outcome"], "failed", "{report:#}");
    let stop = &report["agent_stop"];
    assert_eq!(stop["acted"], true, "{stop}");
    assert_eq!(stop["reason"], "timed_out", "{stop}");
    assert_eq!(stop["why"], "agent timed out", "{stop}");
    let agent = step(&report, "agent");
    assert_eq!(agent["ok"], false);
    assert!(
        agent["summary"]
            .as_str()
            .unwrap()
            .contains("agent timed out"),
        "{agent}"
    );
    // Issue 21 item 3: the saved work is exported, inspected and judged.
    for name in ["export", "inspect"] {
        assert_eq!(step(&report, name)["ok"], true, "{report:#}");
    }
    let verdicts: Vec<(String, String)> = report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    let expected = [
        ("calendar", "pass"),
        ("chess", "pass"),
        ("incidents", "fail"),
        ("worker-logs", "fail"),
        ("limiter", "fail"),
    ]
    .map(|(n, v)| (n.to_owned(), v.to_owned()));
    assert_eq!(verdicts, expected);
    let run = the_only_run(runs.path());
    let text = std::fs::read_to_string(run.join("report.txt")).unwrap();
    assert!(
        text.contains("agent stopped: agent timed out (after acting"),
        "{text}"
    );
    // Issue 21 item 5: usage normalised from the host's per-message figures (no result line
    // after a timeout). Each answered request carries 10 uncached input tokens, 3 written to
    // and 20 read from the cache; the model answered once per turn.
    let host = &report["agent_host"];
    // Calendar and chess take 14 calls of the plan, one model answer each.
    let turns = host["turns"].as_u64().unwrap();
    assert_eq!(turns, 14, "{host}");
    assert_eq!(host["usage_source"], "messages", "{host}");
    assert_eq!(host["input_tokens"], 33 * turns, "{host}");
    assert_eq!(host["cache_read_tokens"], 20 * turns, "{host}");
    assert_eq!(host["cache_write_tokens"], 3 * turns, "{host}");
    assert_eq!(
        host["usage"]["cache_read_input_tokens"],
        20 * turns,
        "raw beside: {host}"
    );
    assert_eq!(host["tool_calls_total"], turns, "{host}");
    // The plan's deliberately ambiguous submission, counted by its reason code.
    assert_eq!(
        host["tool_errors"],
        serde_json::json!({"patchdiff_submit_observed_operations": {"OLD_TEXT_AMBIGUOUS": 1}}),
        "{host}"
    );
    let minutes = host["minutes"].as_f64().unwrap();
    assert!((0.5..2.0).contains(&minutes), "a 30 s timeout: {minutes}");
    // Every request was answered 200 (the last one never ended): none failed.
    assert!(model.statuses().iter().all(|s| *s == 200));
}

#[test]
fn a_turn_limit_or_a_provider_error_after_the_agent_acted_is_its_outcome_and_its_work_is_judged() {
    // Calendar is saved by the plan's 8th call; then the host stops at its turn limit, or the
    // provider fails the 9th request (500). Either way the agent acted: its saved calendar is
    // judged pass, the rest FAIL, and the report names why it stopped.
    let root = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], &str, &str, &str); 2] = [
        (
            "turn-limit",
            &[],
            "max_turns=8 timeout=120",
            "max_turns",
            "agent reached its turn limit",
        ),
        (
            "provider-500",
            &["--fail-status", "500", "--fail-from", "9"],
            "timeout=120",
            "provider_error",
            "provider error while the agent worked",
        ),
    ];
    for (name, options, agent_args, reason, why) in cases {
        let runs = root.path().join(name);
        std::fs::create_dir_all(&runs).unwrap();
        let model = Model::start_with(
            &runs,
            &repo().join("assets/canary/demo.plan.jsonl"),
            options,
        );
        let body = format!(
            "record model=claude-sonnet-4-5\ninit\nagent claude {agent_args}\nexport\ninspect\nevaluate\nreport\n"
        );
        let output = run_canary(&runs, &script(&runs, &body), &model, &claude());
        assert_eq!(output.status.code(), Some(1), "{name}");
        let report = report(&output);
        assert_eq!(report["outcome"], "failed", "{name}: {report:#}");
        let stop = &report["agent_stop"];
        assert_eq!(stop["acted"], true, "{name}: {stop}");
        assert_eq!(stop["reason"], reason, "{name}: {stop}");
        assert_eq!(stop["why"], why, "{name}: {stop}");
        let statuses: Vec<(&str, &str)> = report["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap(),
                    t["status"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(
            statuses,
            [
                ("calendar", "pass"),
                ("chess", "fail"),
                ("incidents", "fail"),
                ("worker-logs", "fail"),
                ("limiter", "fail"),
            ],
            "{name}"
        );
        let text = std::fs::read_to_string(the_only_run(&runs).join("report.txt")).unwrap();
        assert!(text.contains(&format!("agent stopped: {why}")), "{text}");
    }
}

#[test]
fn codex_refused_by_its_provider_before_acting_aborts_the_run_too() {
    // The same kind of fault through the other host: Codex retries a 500 on its own a few
    // times, then fails the turn; the agent never acted.
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start_with(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        &["--fail-status", "500"],
    );
    let body = "record model=gpt-5-codex\ninit\nagent codex timeout=120\nexport\ninspect\nevaluate\nreport\n";
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(script(runs.path(), body))
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
    assert_eq!(output.status.code(), Some(3), "{report:#}");
    assert_eq!(report["outcome"], "infra_abort", "{report:#}");
    assert_eq!(
        report["agent_stop"]["reason"], "provider_refused",
        "{report:#}"
    );
    assert_eq!(report["agent_host"]["turns"], 0, "{report:#}");
    assert!(model.statuses().iter().all(|s| *s == 500));
    for t in report["targets"].as_array().unwrap() {
        assert_eq!(t["evaluated"], false, "{t}");
    }
}

#[test]
fn scripted_model_documents_its_rehearsals_and_refuses_a_status_that_is_no_error() {
    let help = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for option in [
        "--stall-after-saves",
        "--fail-status",
        "--fail-from",
        "--fail-count",
        "--after-plan",
    ] {
        assert!(help.contains(option), "{option} in:\n{help}");
    }
    // Issue 26 item 6: documented as the operator's rehearsal tool, with both hosts' recipes
    // (Codex's base URL ends in /v1) that stop the server they start.
    for said in [
        "rehearsal tool",
        "ANTHROPIC_BASE_URL=$(head -1 model.url)",
        "OPENAI_BASE_URL=$(head -1 model.url)/v1",
        "trap 'kill $model' EXIT",
        "--set model=",
    ] {
        assert!(help.contains(said), "`{said}` in:\n{help}");
    }
    let refused = Command::new(env!("CARGO_BIN_EXE_scripted-model"))
        .args(["--plan", "x.jsonl", "--fail-status", "200"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--fail-status") && stderr.contains("400..=599"),
        "{stderr}"
    );
}

#[test]
fn a_host_binary_that_is_missing_aborts_the_run_at_the_agent_step_with_a_report() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let missing = runs.path().join("no-such-claude");
    let body =
        "record model=claude-sonnet-4-5\ninit\nagent claude\nexport\ninspect\nevaluate\nreport\n";
    let output = run_canary(runs.path(), &script(runs.path(), body), &model, &missing);
    let report = report(&output);
    assert_eq!(output.status.code(), Some(3), "{report:#}");
    assert_eq!(report["outcome"], "infra_abort", "{report:#}");
    let stop = &report["agent_stop"];
    assert_eq!(stop["reason"], "host_unavailable", "{stop}");
    assert_eq!(stop["acted"], false, "{stop}");
    let summary = step(&report, "agent")["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        summary.contains("PATCHDIFF_CLAUDE_BINARY") && summary.contains("no-such-claude"),
        "{summary}"
    );
    // The manifest, written at init, says the binary did not resolve.
    let run = the_only_run(runs.path());
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    let planned = &manifest["configuration"]["agent_host"];
    assert_eq!(planned["binary"], Value::Null, "{planned}");
    assert!(
        planned["binary_error"]
            .as_str()
            .unwrap()
            .contains("PATCHDIFF_CLAUDE_BINARY"),
        "{planned}"
    );
    assert!(model.statuses().is_empty(), "no host, no model request");
}

#[test]
fn a_provider_that_never_answers_the_first_request_aborts_the_run_at_the_timeout() {
    // TEST MODEL: never answers a model request (`--stall-after-saves 0`).
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start_with(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        &["--stall-after-saves", "0"],
    );
    let output = claude_canary_judged(runs.path(), &model, 10);
    let report = report(&output);
    assert_eq!(output.status.code(), Some(3), "{report:#}");
    assert_eq!(report["outcome"], "infra_abort", "{report:#}");
    let stop = &report["agent_stop"];
    assert_eq!(stop["reason"], "provider_silent", "{stop}");
    assert_eq!(stop["acted"], false, "{stop}");
    assert_eq!(report["agent_host"]["timed_out"], true);
    assert!(!model.statuses().is_empty(), "the host did ask");
    for t in report["targets"].as_array().unwrap() {
        assert_eq!(t["evaluated"], false, "{t}");
    }
}

/// The model puts the provider key into tool arguments — a target name that the
/// `UNKNOWN_TARGET` error echoes, and a `find_occurrences` text. No file of the run holds it
/// (before, the sealed `host-observed.mcp.jsonl` held it three times); the wire log shows where
/// the agent put it, redacted. (The database-password route is `hostile_agent`'s test.)
#[test]
fn a_key_the_model_puts_into_tool_arguments_reaches_no_file_of_the_run() {
    let runs = tempfile::tempdir().unwrap();
    let plan = runs.path().join("leak.plan.jsonl");
    let steps = [
        serde_json::json!({"step": "leak-read", "tool": "patchdiff_read_target",
                           "args": {"target": SECRET}}),
        serde_json::json!({"step": "leak-find", "tool": "patchdiff_find_occurrences",
                           "args": {"target": "chess", "text": SECRET}}),
    ];
    std::fs::write(
        &plan,
        steps.iter().map(|s| format!("{s}\n")).collect::<String>(),
    )
    .unwrap();
    let model = Model::start(runs.path(), &plan, "finish");
    let output = run_canary(
        runs.path(),
        &repo().join("assets/canary/claude.canary"),
        &model,
        &claude(),
    );
    let report = report(&output);
    assert_eq!(step(&report, "agent")["ok"], true, "{report:#}");
    let run = the_only_run(runs.path());
    assert_no_credential(&run);
    let wire = std::fs::read_to_string(run.join("host-observed.mcp.jsonl")).unwrap();
    assert!(
        wire.matches("[redacted:ANTHROPIC_API_KEY]").count() >= 3,
        "two requests and the error that echoes one: {wire}"
    );
}

/// A1/A4: a process the host starts that leaves the host's group (`setsid`) and keeps the
/// host's stderr open cannot hold the step: the stderr copy stops after the grace and the host
/// record says why. TEST HOST: the real CLI behind a wrapper that first starts such a process
/// (the only way to make one on purpose). Before, the step waited for that stderr to close —
/// here 120 s, with no deadline.
#[test]
fn a_process_outside_the_hosts_group_holding_its_stderr_cannot_hold_the_step() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let escaped = runs.path().join("escaped.pid");
    let wrapper = claude_wrapper(
        runs.path(),
        "claude-with-an-escaped-child",
        &format!(
            "if [ \"$1\" != --version ]; then\n  setsid sleep 120 >/dev/null </dev/null &\n  \
             echo $! > {escaped:?}\nfi\n"
        ),
        "\"$@\"",
    );
    let output = run_canary(
        runs.path(),
        &repo().join("assets/canary/claude.canary"),
        &model,
        &wrapper,
    );
    // The test's own process, not the product's: stopped here whatever the outcome.
    let pid: i32 = std::fs::read_to_string(&escaped)
        .expect("the wrapper started its escaped process")
        .trim()
        .parse()
        .unwrap();
    let still_there = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(
        still_there,
        "the escaped process outlived the step, as it should here"
    );
    let report = report(&output);
    assert!(
        output.status.success(),
        "{report:#}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["passed"], true, "{report:#}");
    let host = &report["agent_host"];
    assert!(
        host["exit"]
            .as_str()
            .unwrap()
            .contains("stderr held open by a process outside the host's group"),
        "{host}"
    );
    let elapsed = step(&report, "agent")["elapsed_ms"].as_u64().unwrap();
    assert!(elapsed < 90_000, "the agent step took {elapsed} ms");
}

/// Issue 25 item 2: the step's timeout holds from the step's start, the work before the host
/// starts included. TEST HOST: the real CLI behind a wrapper whose `--version` never answers
/// (a host stuck before it starts; the only way to stall that phase on purpose). Before, the
/// console waited out its own 20 s for `--version` and then gave the host the whole timeout.
#[test]
fn agent_timeout_holds_when_the_host_is_stuck_before_it_starts() {
    let runs = tempfile::tempdir().unwrap();
    let model = Model::start(
        runs.path(),
        &repo().join("assets/canary/demo.plan.jsonl"),
        "finish",
    );
    let wrapper = claude_wrapper(
        runs.path(),
        "claude-stuck-before-start",
        "if [ \"$1\" = --version ]; then exec sleep 120; fi\n",
        "\"$@\"",
    );
    let body = "record model=claude-sonnet-4-5\ninit\nagent claude timeout=8\nreport\n";
    let started = std::time::Instant::now();
    let output = run_canary(runs.path(), &script(runs.path(), body), &model, &wrapper);
    let took = started.elapsed();
    let report = report(&output);
    let agent = step(&report, "agent");
    assert_eq!(agent["ok"], false, "{report:#}");
    let summary = agent["summary"].as_str().unwrap();
    assert!(
        summary.contains("timeout of 8 s ran out before the host started")
            && summary.contains("--version"),
        "{summary}"
    );
    assert_eq!(report["agent_stop"]["acted"], false, "{report:#}");
    // The step ended at its timeout, not after the 20 s `--version` wait plus a host run. (The
    // run as a whole also waits once, before `init`, for the version the manifest records.)
    let elapsed = agent["elapsed_ms"].as_u64().unwrap();
    assert!(
        (8_000..10_000).contains(&elapsed),
        "{elapsed} ms; run {took:?}"
    );
    assert!(model.statuses().is_empty(), "the host never started");
}

//! Operators' own suites (issue 26 item 3, issue 22 item 4): a three-target suite in
//! TypeScript, Go and Python authored with the real `patchdiff suite new/add/pin/check`, a
//! canary on it through `console --script … --set model=…` with a scripted plan, and the
//! sealed run verified (`verify --evaluate`) after it was moved elsewhere with the suite it
//! came from deleted — it verifies from its own copy (`suite/`). A check weakened in the run's
//! copy and re-sealed is named by `verify`.
//!
//! Toolchains: Node and Python are what every machine running these tests has; TypeScript is
//! `tsc` from `tests/tools` (pinned there, `npm ci --prefix tests/tools`), handed to its check
//! through the manifest's `check.env` (`TSC`); Go is the `go` on PATH (`.ci/run` installs
//! Debian's `golang-go`), its build cache through `check.env` (`GOCACHE=~/.cache/go-build`).
//! Without `tsc` or `go` the test says `SKIPPED` — except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tsc() -> PathBuf {
    repo().join("tests/tools/node_modules/.bin/tsc")
}

/// Whether the toolchains this suite's checks need are here; under `CI=true` a missing one
/// fails instead.
fn toolchains_present() -> bool {
    let go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    let missing: Vec<&str> = [
        ("go (Debian: golang-go)", go),
        (
            "tests/tools tsc (npm ci --prefix tests/tools)",
            tsc().is_file(),
        ),
    ]
    .into_iter()
    .filter_map(|(name, ok)| (!ok).then_some(name))
    .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("missing toolchains under CI=true: {}", missing.join(", "));
    }
    eprintln!("SKIPPED: missing toolchains: {}", missing.join(", "));
    false
}

fn patchdiff(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .args(args)
        .env("TSC", tsc())
        .env("PATCHDIFF_STATE_DIR", home.join("state"))
        .env("PATCHDIFF_DATA_DIR", home.join("data"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `patchdiff suite add SUITE NAME --language L --original … --expected … --task …` with each
/// `--check-file`, then `extra` (options and `--check CMD…`); asserts it succeeded.
fn suite_add(
    home: &Path,
    suite: &str,
    name: &str,
    language: &str,
    [original, expected, task]: [&Path; 3],
    check_files: &[&Path],
    extra: &[&str],
) {
    let mut args = vec![
        "suite",
        "add",
        suite,
        name,
        "--language",
        language,
        "--original",
        original.to_str().unwrap(),
        "--expected",
        expected.to_str().unwrap(),
        "--task",
        task.to_str().unwrap(),
    ];
    for f in check_files {
        args.extend(["--check-file", f.to_str().unwrap()]);
    }
    args.extend(extra);
    let out = patchdiff(&args, home);
    assert!(out.status.success(), "{}", text(&out));
}

fn write(path: &Path, body: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    path.to_path_buf()
}

const STACK_TS: &str = "export class Stack<T> {
  private items: T[] = [];

  push(item: T): void {
    this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[0];
  }

  size(): number {
    return this.items.length;
  }
}
";

const RING_GO: &str = "package ring

// Ring keeps the last Cap values pushed.
type Ring struct {
\tCap    int
\tvalues []int
}

// Push appends v, dropping the oldest value once the ring holds Cap values.
func (r *Ring) Push(v int) {
\tr.values = append(r.values, v)
\tif len(r.values) > r.Cap+1 {
\t\tr.values = r.values[1:]
\t}
}

// Values returns the values held, oldest first.
func (r *Ring) Values() []int {
\treturn append([]int(nil), r.values...)
}
";

const RING_TEST_GO: &str = "package ring

import \"testing\"

func TestPushKeepsTheLastCapValues(t *testing.T) {
\tr := &Ring{Cap: 2}
\tfor _, v := range []int{1, 2, 3} {
\t\tr.Push(v)
\t}
\tgot := r.Values()
\tif len(got) != 2 || got[0] != 2 || got[1] != 3 {
\t\tt.Fatalf(\"got %v, want [2 3]\", got)
\t}
}
";

const STACK_TEST_MJS: &str = "import { test } from \"node:test\";
import assert from \"node:assert/strict\";
import { Stack } from \"./out/stack.js\";

test(\"peek returns the last item pushed\", () => {
  const s = new Stack();
  s.push(1);
  s.push(2);
  assert.equal(s.peek(), 2);
  assert.equal(s.size(), 2);
});
";

/// The scripted agent's plan: observe each target's scope by the name `suite check` lists,
/// fix it, save.
fn plan() -> String {
    let steps = [
        (
            "stack",
            "Stack.peek",
            "return this.items[0];",
            "return this.items[this.items.length - 1];",
        ),
        ("ring", "Ring.Push", "> r.Cap+1", "> r.Cap"),
        (
            "example",
            "clamp",
            "if value > high:\n        return value",
            "if value > high:\n        return high",
        ),
    ];
    let mut lines = Vec::new();
    for (target, scope, old, new) in steps {
        let obs = format!("{target}-obs");
        lines.push(
            serde_json::json!({"step": obs, "tool": "patchdiff_observe_scope",
            "args": {"target": target, "scope": scope}}),
        );
        lines.push(serde_json::json!({"step": format!("{target}-sub"),
            "tool": "patchdiff_submit_observed_operations",
            "args": {"target": target, "request_key": format!("{target}-1"),
                "base_revision": format!("${{{obs}.revision}}"),
                "operations": [{"observation_id": format!("${{{obs}.observation_id}}"),
                    "old_text": old, "new_text": new}]},
            "expect": {"outcome": "accepted"}}));
        lines.push(
            serde_json::json!({"step": format!("{target}-save"), "tool": "patchdiff_save",
            "args": {"target": target}, "expect": {"version": 1}}),
        );
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn verify_json(run: &Path, home: &Path) -> (Output, Value) {
    let out = patchdiff(
        &["verify", run.to_str().unwrap(), "--json", "--evaluate"],
        home,
    );
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify printed no JSON ({e}): {}", text(&out)));
    (out, json)
}

/// C1, V2: authored, pinned, checked, run through `--set`, verified moved with its source gone
/// (from the run's own copy of the suite), and a weakened check in that copy named.
#[test]
fn an_authored_three_language_suite_runs_a_canary_through_set_and_verifies_moved() {
    if !toolchains_present() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path();
    let suite = home.join("suite");
    let inputs = home.join("inputs");
    let s = suite.to_str().unwrap();

    // new: a suite with the Python example target.
    let out = patchdiff(&["suite", "new", s], home);
    assert!(out.status.success(), "{}", text(&out));

    // add: TypeScript, compiled by the pinned tsc its check finds through check.env.
    let original = write(&inputs.join("ts/stack.ts"), STACK_TS);
    let expected = write(
        &inputs.join("ts-expected/stack.ts"),
        &STACK_TS.replace("this.items[0]", "this.items[this.items.length - 1]"),
    );
    let task = write(
        &inputs.join("ts/TASK.md"),
        "`Stack.peek` must return the last item pushed.\n",
    );
    let test = write(&inputs.join("ts/stack.test.mjs"), STACK_TEST_MJS);
    let pkg = write(&inputs.join("ts/package.json"), "{\"type\": \"module\"}\n");
    suite_add(
        home,
        s,
        "stack",
        "typescript",
        [&original, &expected, &task],
        &[&test, &pkg],
        &[
            "--report",
            "tap",
            "--env",
            "TSC",
            "--check",
            "sh",
            "-c",
            "\"$TSC\" --strict --target es2022 --module es2022 --outDir out stack.ts && node --test --test-reporter=tap",
        ],
    );

    // add: Go, its build cache through check.env (the check's own HOME is private).
    let original = write(&inputs.join("go/ring.go"), RING_GO);
    let expected = write(
        &inputs.join("go-expected/ring.go"),
        &RING_GO.replace("> r.Cap+1", "> r.Cap"),
    );
    let task = write(
        &inputs.join("go/TASK.md"),
        "`Ring.Push` must keep exactly the last `Cap` values.\n",
    );
    let test = write(&inputs.join("go/ring_test.go"), RING_TEST_GO);
    let gomod = write(&inputs.join("go/go.mod"), "module ring\n\ngo 1.19\n");
    suite_add(
        home,
        s,
        "ring",
        "go",
        [&original, &expected, &task],
        &[&test, &gomod],
        &[
            "--env",
            "GOCACHE=~/.cache/go-build",
            "--env",
            "GOTOOLCHAIN=local",
            "--check",
            "go",
            "test",
            "-v",
            ".",
        ],
    );

    // A task edited after pinning fails the check, naming it; pin re-pins it.
    let task = suite.join("example/TASK.md");
    let mut body = std::fs::read_to_string(&task).unwrap();
    body.push_str("Values inside the range come back unchanged.\n");
    std::fs::write(&task, body).unwrap();
    let out = patchdiff(&["suite", "check", s], home);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("example/TASK.md"), "{}", text(&out));
    let out = patchdiff(&["suite", "pin", s], home);
    assert!(out.status.success(), "{}", text(&out));

    // check: authenticated, controls hold for all three, and the scopes a plan may use.
    let out = patchdiff(&["suite", "check", s], home);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for line in [
        "ok   controls stack",
        "ok   controls ring",
        "ok   controls example",
        "method Stack.peek lines 8–10",
        "method Ring.Push lines 10–15",
        "struct Ring lines 4–7",
        "function clamp lines 1–7",
    ] {
        assert!(shown.contains(line), "`{line}` missing:\n{shown}");
    }

    // A canary on it: the script names its suite (relative to the script) and takes the model
    // through --set; an unset placeholder refuses the script before any run exists.
    write(&suite.join("plan.jsonl"), &plan());
    let script = write(
        &suite.join("own.canary"),
        "suite .\nrecord model=${model} provider=patchdiff reasoning=none\ninit\nlaunch observed\n\
         preflight\nagent plan.jsonl\nexport\ninspect\nevaluate require=full-byte\nreport\n",
    );
    let runs = home.join("runs");
    let sc = script.to_str().unwrap();
    let rd = runs.to_str().unwrap();
    let out = patchdiff(&["console", "--script", sc, "--runs-dir", rd], home);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("`${model}` has no value: give `--set model=VALUE`"),
        "{}",
        text(&out)
    );
    assert!(!runs.exists() || std::fs::read_dir(&runs).unwrap().next().is_none());
    let out = patchdiff(
        &[
            "console",
            "--script",
            sc,
            "--runs-dir",
            rd,
            "--set",
            "model=suite-rehearsal",
        ],
        home,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("PASSED · 3/3 targets pass"),
        "{}",
        text(&out)
    );
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .unwrap();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["agent"]["model"], "suite-rehearsal");
    assert_eq!(
        manifest["configuration"]["fixture_manifest"],
        "suite/manifest.json"
    );

    // Moved elsewhere, with the suite it came from gone: it verifies from its own copy.
    let moved = home.join("elsewhere/archived");
    copy_tree(&run, &moved);
    std::fs::remove_dir_all(&suite).unwrap();
    std::fs::remove_dir_all(&runs).unwrap();
    let (out, report) = verify_json(&moved, home);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "evaluation" && c["summary"] == "3/3 pass on re-evaluation"),
        "{report:#}"
    );

    // A check weakened in the run's copy (it now passes anything) and the run re-sealed:
    // every digest holds again, and verify names the changed check file.
    let weak = moved.join("suite/example/check/test_example.py");
    std::fs::write(&weak, "import unittest\n").unwrap();
    std::fs::remove_file(moved.join("SHA256SUMS")).unwrap();
    std::fs::remove_file(moved.join("manifest.seal")).unwrap();
    patchdiff::evidence::seal_run(&patchdiff::evidence::RunDir {
        run_id: manifest["run_id"].as_str().unwrap().to_owned(),
        path: moved.clone(),
    })
    .unwrap();
    let (out, report) = verify_json(&moved, home);
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    let problems = report["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["check"] == "fixtures"
            && p["file"] == "suite/example/check/test_example.py"
            && p["message"].as_str().unwrap().contains("the manifest pins")),
        "{report:#}"
    );
}

/// The fixture README documents every language the worker parses (it once said javascript,
/// python, rust) and the scope naming of each, e.g. `Ring.Push` for a Go method.
#[test]
fn the_fixture_readme_documents_every_language_and_its_scope_names() {
    let readme = std::fs::read_to_string(repo().join("assets/fixtures/README.md")).unwrap();
    let table = readme
        .split("## Languages")
        .nth(1)
        .expect("a Languages section")
        .split("\n## ")
        .next()
        .unwrap();
    for language in patchdiff::waymark::Language::ALL {
        assert!(
            table.contains(&format!("`{language}`")),
            "{language} missing from the Languages section"
        );
    }
    for example in [
        "`Ring.Push`",
        "`C.m`",
        "`S.m`",
        "check.env",
        "task_sha256",
        "observation_id",
    ] {
        assert!(readme.contains(example), "{example} missing");
    }
    assert!(!readme.contains("verify.sh") && !readme.contains("gen_manifest"));
}

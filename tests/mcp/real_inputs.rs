//! Real and unusual inputs through the real `patchdiff mcp` binary and a real Node worker (issue
//! 11): languages refused or supported at init (K8), `.tsx`/`.jsx`/Go files, identical scope
//! entries told apart by byte range, parse errors made visible, and a 2.3 MB generated file with
//! ~24,000 scopes that discovery answers question by question.

use crate::mcp::*;
use serde_json::{Value, json};

/// A full-profile process (it has the agent's tools too) with `target` initialized in
/// `language`.
async fn with_target(env: &TestEnv, target: &str, language: &str, content: &str) -> Mcp {
    let mcp = Mcp::launch(&env.vars("full")).await;
    let (fixture, sha) = env.fixture(&format!("{target}.fixture"), content);
    mcp.ok(
        "patchdiff_init_target",
        json!({"target": target, "fixture": fixture, "sha256": sha, "language": language}),
    )
    .await;
    mcp
}

/// The structured `error` of an isError result.
async fn error_of(mcp: &Mcp, tool: &str, args: Value) -> Value {
    let r = mcp.call(tool, args).await.expect("a tool result");
    assert_eq!(r.is_error, Some(true), "{tool} should fail: {r:?}");
    r.structured_content.expect("structured")["error"].clone()
}

async fn observe_named(mcp: &Mcp, target: &str, scope: &str) -> Value {
    mcp.ok(
        "patchdiff_observe_scope",
        json!({"target": target, "scope": scope}),
    )
    .await
}

async fn submit(mcp: &Mcp, target: &str, key: &str, obs: &Value, old: &str, new: &str) -> Value {
    let r = mcp
        .call(
            "patchdiff_submit_observed_operations",
            json!({"target": target, "request_key": key, "base_revision": obs["revision"],
                   "operations": [{"observation_id": obs["observation_id"], "old_text": old, "new_text": new}]}),
        )
        .await
        .expect("a tool result");
    r.structured_content.expect("structured")
}

const REACT_TSX: &str = r#"import React, { useState } from "react";

export function Counter({ start }: { start: number }) {
  const [n, setN] = useState(start);
  return <button onClick={() => setN(n + 1)}>{n}</button>;
}

export const Label = ({ text }: { text: string }) => <span className="label">{text}</span>;

export default class Panel extends React.Component<{ title: string }> {
  render() {
    return <section><h2>{this.props.title}</h2><Counter start={0} /></section>;
  }
}
"#;

#[tokio::test]
async fn init_refuses_unknown_languages_naming_the_accepted_ones() {
    let env = TestEnv::new();
    let mcp = Mcp::launch(&env.vars("full")).await;
    let (fixture, sha) = env.fixture("t.fixture", "let x = 1;\n");
    for (language, hint) in [
        ("TypeScript", Some("typescript")),
        ("py", Some("python")),
        ("cobol", None),
    ] {
        let e = error_of(
            &mcp,
            "patchdiff_init_target",
            json!({"target": "t", "fixture": fixture, "sha256": sha, "language": language}),
        )
        .await;
        assert_eq!(e["code"], "UNSUPPORTED_LANGUAGE", "{language}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("javascript, jsx, typescript, tsx, python, rust, go"),
            "{message}"
        );
        if let Some(h) = hint {
            assert!(message.contains(&format!("did you mean {h}?")), "{message}");
        }
    }
    // Nothing was initialized.
    let e = error_of(&mcp, "patchdiff_read_target", json!({"target": "t"})).await;
    assert_eq!(e["code"], "UNKNOWN_TARGET");
    for language in ["tsx", "jsx", "go"] {
        mcp.ok(
            "patchdiff_init_target",
            json!({"target": format!("t-{language}"), "fixture": fixture, "sha256": sha, "language": language}),
        )
        .await;
    }
    mcp.stop().await;
}

#[tokio::test]
async fn a_react_component_file_as_tsx_has_all_four_scopes() {
    let env = TestEnv::new();
    let mcp = with_target(&env, "panel", "tsx", REACT_TSX).await;
    for (name, kind) in [
        ("Counter", "function"),
        ("Label", "function"),
        ("Panel", "class"),
        ("Panel.render", "method"),
    ] {
        let obs = mcp
            .ok(
                "patchdiff_observe_scope",
                json!({"target": "panel", "scope": name}),
            )
            .await;
        assert_eq!(obs["scope"]["kind"], kind, "{name}: {obs}");
        assert_eq!(obs["parses_cleanly"], true, "{name}");
    }
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "panel", "scope": "Label"}),
        )
        .await;
    let r = submit(
        &mcp,
        "panel",
        "k",
        &obs,
        "className=\"label\"",
        "className=\"tag\"",
    )
    .await;
    assert_eq!(r["outcome"], "accepted", "{r}");
    assert!(r.get("warnings").is_none(), "{r}");
    // The same file as plain TypeScript does not parse cleanly, and now says so.
    let ts = with_target(&env, "panel-ts", "typescript", REACT_TSX).await;
    // (A named observation waits for the worker; a read only asks an idle, ready one.)
    let counter = observe_named(&ts, "panel-ts", "Counter").await;
    assert_eq!(counter["parses_cleanly"], false);
    let read = ts
        .ok("patchdiff_read_target", json!({"target": "panel-ts"}))
        .await;
    assert_eq!(read["parses_cleanly"], false);
    ts.stop().await;
    mcp.stop().await;
}

#[tokio::test]
async fn jsx_and_go_files_have_their_scopes() {
    let env = TestEnv::new();
    let jsx = "export function App({ items }) {\n  return <ul>{items.map((i) => <li key={i}>{i}</li>)}</ul>;\n}\nconst Row = () => <tr />;\n";
    let mcp = with_target(&env, "app", "jsx", jsx).await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "app", "scope": "Row"}),
        )
        .await;
    assert_eq!(obs["text"], "const Row = () => <tr />;");
    assert_eq!(obs["parses_cleanly"], true);
    mcp.stop().await;

    let go = "package cal\n\ntype Calendar struct {\n\twindows []int\n}\n\nfunc (c *Calendar) AddWindow(w int) {\n\tc.windows = append(c.windows, w)\n}\n\nfunc ParseLine(l string) []string {\n\treturn nil\n}\n";
    let mcp = with_target(&env, "cal", "go", go).await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "cal", "scope": "Calendar.AddWindow"}),
        )
        .await;
    assert_eq!(obs["scope"]["kind"], "method");
    assert_eq!(obs["scope"]["start_line"], 7);
    let r = submit(
        &mcp,
        "cal",
        "k",
        &obs,
        "append(c.windows, w)",
        "append(c.windows, w, w)",
    )
    .await;
    assert_eq!(r["outcome"], "accepted", "{r}");
    mcp.stop().await;
}

#[tokio::test]
async fn identical_minified_scopes_are_listed_by_byte_range_and_picked_by_start_byte() {
    let env = TestEnv::new();
    // Two `function lines 2–2` entries named `f`.
    let src = "// bundle\nfunction f(){return 1}function f(){return 2}\n";
    let second = src.rfind("function f").unwrap();
    let mcp = with_target(&env, "min", "javascript", src).await;
    let e = error_of(
        &mcp,
        "patchdiff_observe_scope",
        json!({"target": "min", "scope": "f"}),
    )
    .await;
    assert_eq!(e["code"], "AMBIGUOUS_SCOPE");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("function lines 2–2 bytes 10–32")
            && message.contains(&format!("start_byte {second}")),
        "{message}"
    );
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "min", "scope": "f", "start_byte": second}),
        )
        .await;
    assert_eq!(obs["text"], "function f(){return 2}");
    assert_eq!(obs["scope"]["start_byte"], second);
    // A byte alone picks the innermost scope containing it.
    let by_byte = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "min", "start_byte": second + 14}),
        )
        .await;
    assert_eq!(by_byte["text"], "function f(){return 2}");
    let r = submit(&mcp, "min", "k", &obs, "return 2", "return 3").await;
    assert_eq!(r["outcome"], "accepted", "{r}");
    let read = mcp
        .ok("patchdiff_read_target", json!({"target": "min"}))
        .await;
    assert_eq!(
        read["content"],
        "// bundle\nfunction f(){return 1}function f(){return 3}\n"
    );
    mcp.stop().await;
}

#[tokio::test]
async fn parse_errors_are_reported_and_an_edit_introducing_them_is_warned_about() {
    let env = TestEnv::new();
    let mcp = with_target(&env, "t", "javascript", CALENDAR_JS).await;
    // (A named observation waits for the worker; a read only asks an idle, ready one.)
    let obs = observe_named(&mcp, "t", "Calendar.count").await;
    assert_eq!(obs["parses_cleanly"], true);
    let read = mcp
        .ok("patchdiff_read_target", json!({"target": "t"}))
        .await;
    assert_eq!(read["parses_cleanly"], true);
    // Drop a closing parenthesis: accepted, with a warning.
    let r = submit(
        &mcp,
        "t",
        "k1",
        &obs,
        "return this.windows.length;",
        "return (this.windows.length;",
    )
    .await;
    assert_eq!(r["outcome"], "accepted", "{r}");
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("SYNTAX_ERRORS_INTRODUCED"), "{r}");
    let read = mcp
        .ok("patchdiff_read_target", json!({"target": "t"}))
        .await;
    assert_eq!(read["parses_cleanly"], false);
    // The base already has errors: a further edit is not blamed for them.
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "t", "lines": {"start": 9, "end": 9}}),
        )
        .await;
    assert_eq!(obs["parses_cleanly"], false);
    let r = submit(&mcp, "t", "k2", &obs, "split(',')", "split(';')").await;
    assert_eq!(r["outcome"], "accepted", "{r}");
    assert!(r.get("warnings").is_none(), "{r}");
    mcp.stop().await;
}

/// A generated TypeScript file shaped like protobuf/ts-proto output: `classes` classes with two
/// methods each (3 scopes per class), padded to about `bytes`.
fn generated_ts(classes: usize, bytes: usize) -> String {
    let mut s = String::from("/* eslint-disable */\n// Generated code. DO NOT EDIT.\n");
    for i in 0..classes {
        s.push_str(&format!(
            "export class Msg{i} {{\n  field{i}: number = {i};\n  encode(w: Writer): Writer {{\n    w.uint32({i}).int64(this.field{i});\n    return w;\n  }}\n  decode(r: Reader): Msg{i} {{\n    const m = new Msg{i}();\n    m.field{i} = r.int64();\n    return m;\n  }}\n}}\n"
        ));
    }
    let line = "// ".to_owned() + &"=".repeat(76) + "\n";
    while s.len() < bytes {
        s.push_str(&line);
    }
    s
}

#[tokio::test]
async fn a_2_3_mb_file_with_24000_scopes_can_be_searched_observed_and_edited() {
    let env = TestEnv::new();
    let src = generated_ts(8_000, 2_300_000);
    assert!(src.len() >= 2_300_000);
    let mcp = with_target(&env, "gen", "typescript", &src).await;

    // find_occurrences needs no scope list: the occurrences and their scopes come back.
    let found = mcp
        .ok(
            "patchdiff_find_occurrences",
            json!({"target": "gen", "text": "w.uint32(7777)"}),
        )
        .await;
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["occurrences"][0]["scope"]["name"], "Msg7777.encode");
    assert!(found.get("scope_error").is_none(), "{found}");

    // A named scope among 24,000.
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "gen", "scope": "Msg7777.decode"}),
        )
        .await;
    assert_eq!(obs["parses_cleanly"], true);
    let r = submit(&mcp, "gen", "k1", &obs, "r.int64()", "r.uint64()").await;
    assert_eq!(r["outcome"], "accepted", "{r}");

    // Observed by lines, as the old error advised: the submission is no longer blamed for the
    // size of its base.
    let line = found["occurrences"][0]["line"].as_u64().unwrap();
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "gen", "lines": {"start": line, "end": line}}),
        )
        .await;
    let r = submit(&mcp, "gen", "k2", &obs, "uint32(7777)", "uint32(7778)").await;
    assert_eq!(r["outcome"], "accepted", "{r}");

    // An unknown name gets a bounded list, not 24,000 names.
    let e = error_of(
        &mcp,
        "patchdiff_observe_scope",
        json!({"target": "gen", "scope": "Msg9999"}),
    )
    .await;
    assert_eq!(e["code"], "UNKNOWN_SCOPE");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("the first 40 names of 24000 scopes"),
        "{message}"
    );
    assert!(message.len() < 4096, "{} bytes", message.len());
    mcp.stop().await;
}

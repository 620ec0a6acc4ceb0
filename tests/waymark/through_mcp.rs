//! The Waymark supervisor through the real `patchdiff mcp` binary and a real Node worker.
//!
//! A pathological file costs only itself (W4, W8, W10): a million-line JavaScript target (about 22 MB) kills or times out its
//! generation once; asking again answers `DISCOVERY_FAILED` at once with the cause and "observe
//! by `lines`", without sending it to a worker (no launch, no active phase), while a 400-byte
//! target in the same process is observed by scope and accepts a submission. Before the
//! quarantine, each retry killed another generation and the third death spent the launch budget
//! (`WAYMARK_WORKER_RESTART_LIMIT` for every target).
//!
//! The active timeout is lowered to 3 s so the big parse ends by timeout when it does not end by
//! the RSS limit first (both are deaths the content causes; which comes first depends on the
//! machine), and the test does not wait 15 s per try.
//!
//! A paused process is not a slow worker (W6): the server and its worker are stopped (SIGSTOP)
//! in the middle of a discovery for longer than the active timeout, as a suspended machine
//! stops them; after SIGCONT the discovery completes, nothing is retired, and the active phase
//! reports the pause as `paused_ms`. Before, the ceiling fired the moment the server resumed
//! and retired the healthy generation as `active_timeout`.

use crate::mcp::*;
use serde_json::{Value, json};

/// A class, then `lines` one-line declarations (22 bytes each).
fn js_of_lines(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 22 + 64);
    s.push_str("class Big {\n  m() { return 1; }\n}\n");
    for i in 0..lines {
        use std::fmt::Write;
        let _ = writeln!(s, "let a{i:06} = {i:06};");
    }
    s
}

/// About 22 MB: a class, then a million one-line declarations.
fn million_line_js() -> String {
    js_of_lines(1_000_000)
}

/// About 400 bytes: the calendar plus a helper.
fn small_js() -> String {
    let mut s = CALENDAR_JS.to_owned();
    s.push_str("function describe(c) {\n  const n = c.count();\n  return `calendar with ${n} windows, last change at ${Date.now()}`;\n}\n");
    s.push_str("// a short file that must keep its worker\n");
    s
}

fn error_of(r: &rmcp::model::CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    r.structured_content.as_ref().expect("structured")["error"].clone()
}

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test]
async fn a_file_that_kills_discovery_costs_only_itself() {
    let env = TestEnv::new();
    let big = million_line_js();
    assert!(big.len() > 21_000_000, "{} bytes", big.len());
    env.init_target("big", &big).await;
    drop(big);
    let small = small_js();
    assert!((380..=460).contains(&small.len()), "{} bytes", small.len());
    env.init_target("small", &small).await;

    let perf = env.path().join("perf.jsonl");
    let mut vars = env.vars("observed");
    vars.insert("PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS".into(), "3000".into());
    vars.insert("PATCHDIFF_PERF_EVENTS".into(), perf.display().to_string());
    vars.insert("PATCHDIFF_PERF_MEMORY".into(), "0".into());
    let mcp = Mcp::launch(&vars).await;

    // The first try reaches the worker and kills (or times out) its generation.
    let observe_big = json!({"target": "big", "scope": "Big.m"});
    let first = mcp
        .call("patchdiff_observe_scope", observe_big.clone())
        .await
        .expect("a tool result");
    let first = error_of(&first);
    let code = first["code"].as_str().unwrap_or_default().to_owned();
    assert!(
        code == "WAYMARK_WORKER_RSS_LIMIT" || code == "DISCOVERY_FAILED",
        "the content kills its generation: {first}"
    );

    // Every later try is answered without a worker: the cause, and what to do instead.
    for _ in 0..3 {
        let again = mcp
            .call("patchdiff_observe_scope", observe_big.clone())
            .await
            .expect("a tool result");
        let again = error_of(&again);
        assert_eq!(again["code"], "DISCOVERY_FAILED", "{again}");
        let message = again["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("retired worker generation")
                && message.contains("not sent to the Waymark worker again")
                && message.contains("observe by `lines`"),
            "{message}"
        );
    }
    // Observing by lines still works on the big target.
    mcp.ok(
        "patchdiff_observe_scope",
        json!({"target": "big", "lines": {"start": 1, "end": 3}}),
    )
    .await;

    // The small target keeps its worker and launch budget.
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "small", "scope": "Calendar.addWindow"}),
        )
        .await;
    let receipt = mcp
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": "small", "request_key": "k1", "base_revision": 0,
                   "operations": [{"observation_id": obs["observation_id"],
                                   "old_text": "addWindow(w) {", "new_text": "addWindow(win) {"}]}),
        )
        .await;
    assert_eq!(receipt["outcome"], "accepted", "{receipt}");
    mcp.stop().await;

    // The evidence: the big content reached a worker once; its retries were answered
    // `quarantined` with no active phase; two launches in all (prewarm, then one replacement).
    let events = events(&perf);
    let big_bytes = events
        .iter()
        .filter(|e| {
            e["name"] == "discovery_total" && e["attrs"]["bytes"].as_u64() > Some(1_000_000)
        })
        .collect::<Vec<_>>();
    let codes: Vec<&str> = big_bytes
        .iter()
        .map(|e| e["attrs"]["code"].as_str().unwrap_or("ok"))
        .collect();
    assert!(codes.len() >= 4, "{codes:?}");
    assert_ne!(codes[0], "quarantined", "{codes:?}");
    assert!(
        codes[1..].iter().all(|c| *c == "quarantined"),
        "retries never reach a worker: {codes:?}"
    );
    let launches = events
        .iter()
        .filter(|e| e["name"] == "worker_launch")
        .count();
    assert_eq!(launches, 2, "one death, one replacement");
    let retired: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "worker_retired")
        .map(|e| e["attrs"]["reason"].as_str().unwrap_or_default())
        .collect();
    assert!(
        matches!(
            retired.first(),
            Some(&"rss_limit") | Some(&"active_timeout")
        ),
        "{retired:?}"
    );
}

/// Polls the perf-event file until an event satisfies `pred` (a condition, not a duration: the
/// bound only turns a hang into a failure).
async fn wait_for_event(path: &std::path::Path, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(e) = events(path).into_iter().find(|e| pred(e)) {
            return e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no such event in {}",
            path.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Bytes `pid` has read so far (`rchar` of `/proc/PID/io`).
fn bytes_read(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("rchar: ").map(|n| n.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// Polls until `pid` has read `at_least` more bytes than `base` (a condition, not a duration).
async fn wait_until_read(pid: u32, base: u64, at_least: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while bytes_read(pid) < base + at_least {
        assert!(
            std::time::Instant::now() < deadline,
            "worker {pid} never read its request"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).expect("signal");
}

#[tokio::test]
async fn a_paused_server_does_not_retire_a_healthy_generation() {
    use nix::sys::signal::Signal;
    let env = TestEnv::new();
    // About 1 MB: a parse that takes the worker a fraction of a second (W6's 6 s below leaves
    // room for a loaded machine).
    env.init_target("mid", &js_of_lines(46_000)).await;
    let perf = env.path().join("perf.jsonl");
    let mut vars = env.vars("observed");
    vars.insert("PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS".into(), "6000".into());
    vars.insert("PATCHDIFF_PERF_EVENTS".into(), perf.display().to_string());
    vars.insert("PATCHDIFF_PERF_MEMORY".into(), "0".into());
    let mcp = Mcp::launch(&vars).await;
    let ready = wait_for_event(&perf, |e| e["name"] == "worker_ready").await;
    let worker = ready["attrs"]["pid"].as_u64().expect("worker pid") as u32;

    let observing = mcp.call(
        "patchdiff_observe_scope",
        json!({"target": "mid", "scope": "Big.m"}),
    );
    let base = bytes_read(worker);
    let source_bytes = js_of_lines(46_000).len() as u64;
    let pause = async {
        // The worker has read the request file: its frame was sent and the active phase is
        // running; the worker is now hashing and parsing.
        wait_until_read(worker, base, source_bytes).await;
        signal(worker, Signal::SIGSTOP);
        signal(mcp.pid, Signal::SIGSTOP);
        // The pause itself is what is tested: longer than the 6 s active timeout.
        tokio::time::sleep(std::time::Duration::from_secs(8)).await;
        signal(worker, Signal::SIGCONT);
        signal(mcp.pid, Signal::SIGCONT);
    };
    let (observed, ()) = tokio::join!(observing, pause);
    let observed = observed.expect("a tool result");
    assert_ne!(observed.is_error, Some(true), "{observed:?}");
    mcp.stop().await;

    let events = events(&perf);
    let retired: Vec<&Value> = events
        .iter()
        .filter(|e| e["name"] == "worker_retired")
        .collect();
    assert!(
        retired.iter().all(|e| e["attrs"]["reason"] == "shutdown"),
        "a pause retires nothing: {retired:?}"
    );
    let active = events
        .iter()
        .find(|e| e["name"] == "phase_active")
        .expect("phase_active");
    assert_eq!(active["outcome"], "ok", "{active}");
    let paused = active["attrs"]["paused_ms"].as_u64().unwrap_or(0);
    assert!(
        paused >= 5_000,
        "the active phase reports the pause: {active}"
    );
}

/// Initializes `target` in `language` from `content` through a full-profile process.
async fn init_in(env: &TestEnv, target: &str, language: &str, content: &str) {
    let (fixture, sha) = env.fixture(&format!("{target}.fixture"), content);
    let full = Mcp::launch(&env.vars("full")).await;
    let r = full
        .call(
            "patchdiff_init_target",
            json!({"target": target, "fixture": fixture, "sha256": sha, "language": language}),
        )
        .await
        .expect("init_target is a full-profile tool");
    assert_ne!(r.is_error, Some(true), "init failed: {r:?}");
    full.stop().await;
}

/// K2: each misleading answer the issue quotes, through the real server and worker, now names its
/// cause: text elsewhere in the target (with its scope), a scope lost to a parse error, an LF needle in a CRLF file, an LF new text mixed
/// into CRLF, and a decorator outside its class's scope.
#[tokio::test]
async fn advice_names_the_real_cause_of_each_near_miss() {
    let env = TestEnv::new();
    init_in(
        &env,
        "broken",
        "python",
        "def f1():\n    return [1,\n\ndef f4():\n    return 4\n",
    )
    .await;
    init_in(
        &env,
        "crlf",
        "python",
        "def total(xs):\r\n    s = 0\r\n    return s\r\n",
    )
    .await;
    init_in(
        &env,
        "app",
        "typescript",
        "@Component({selector: 'app-root'})\nexport class AppComponent {\n  title = 'app';\n}\n",
    )
    .await;
    init_in(
        &env,
        "ring",
        "python",
        "class Ring:\n    def push(self, x):\n        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n",
    )
    .await;
    let mcp = Mcp::launch(&env.vars("observed")).await;

    // Text that is in the target but not in the observed scope: it was "observe the scope that
    // contains it", with no word of which; now the scope is named, kind, name and lines.
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "ring", "scope": "Ring.pop"}),
        )
        .await;
    let rejected = mcp
        .call(
            "patchdiff_submit_observed_operations",
            json!({"target": "ring", "request_key": "k0", "base_revision": obs["revision"],
                   "operations": [{"observation_id": obs["observation_id"],
                                   "old_text": "self.items.append(x)", "new_text": "self.items.insert(0, x)"}]}),
        )
        .await
        .expect("a tool result");
    let receipt = rejected.structured_content.clone().expect("a receipt");
    assert_eq!(receipt["outcome"], "rejected", "{receipt}");
    assert_eq!(
        receipt["reasons"][0],
        "operation 1 (index 0): old_text \"self.items.append(x)\" does not occur in scope method Ring.pop at revision 0: it occurs elsewhere in the target: at line 3 (bytes 43–63) in method Ring.push lines 2–3, outside this scope (lines 5–6); observe method Ring.push (scope \"Ring.push\") and use that observation",
        "{receipt}"
    );

    // UNKNOWN_SCOPE after `return [1,`: it said only "scopes are: f1".
    let r = mcp
        .call(
            "patchdiff_observe_scope",
            json!({"target": "broken", "scope": "f4"}),
        )
        .await
        .expect("a tool result");
    let e = error_of(&r);
    assert_eq!(e["code"], "UNKNOWN_SCOPE");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("the content does not parse from line 2 (a syntax error)")
            && message.contains("observe by `lines` {start, end} instead"),
        "{message}"
    );
    let by_lines = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "broken", "lines": {"start": 4, "end": 5}}),
        )
        .await;
    assert_eq!(by_lines["text"], "def f4():\n    return 4\n");

    // find_occurrences of an LF needle in a CRLF file: it found nothing and said nothing.
    let found = mcp
        .ok(
            "patchdiff_find_occurrences",
            json!({"target": "crlf", "text": "s = 0\n    return s"}),
        )
        .await;
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["occurrences"][0]["line"], 2);
    assert_eq!(
        found["occurrences"][0]["end_byte"].as_u64().unwrap()
            - found["occurrences"][0]["start_byte"].as_u64().unwrap(),
        19
    );
    assert!(
        found["line_endings"]
            .as_str()
            .unwrap()
            .starts_with("text used LF line endings and the target uses CRLF: matched with CRLF"),
        "{found}"
    );

    // An LF old_text on the CRLF file: it was "read the scope again and copy the exact text".
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "crlf", "scope": "total"}),
        )
        .await;
    let submit = |key: &str, old: &str, new: &str| {
        json!({"target": "crlf", "request_key": key, "base_revision": obs["revision"],
               "operations": [{"observation_id": obs["observation_id"], "old_text": old, "new_text": new}]})
    };
    let rejected = mcp
        .call(
            "patchdiff_submit_observed_operations",
            submit("k1", "s = 0\n    return s", "s = 1\n    return s"),
        )
        .await
        .expect("a tool result");
    let text = serde_json::to_string(&rejected.structured_content).unwrap();
    assert!(
        text.contains("its line endings differ: old_text uses LF but the scope uses CRLF"),
        "{text}"
    );

    // An LF new_text into the CRLF file was accepted and mixed line endings.
    let accepted = mcp
        .ok(
            "patchdiff_submit_observed_operations",
            submit("k2", "    s = 0\r\n", "    s = 0\n    s += sum(xs)\n"),
        )
        .await;
    assert_eq!(accepted["outcome"], "accepted", "{accepted}");
    assert!(
        accepted["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("LINE_ENDINGS_NORMALISED: operation 1 (index 0): new_text used LF"),
        "{accepted}"
    );
    let read = mcp
        .ok("patchdiff_read_target", json!({"target": "crlf"}))
        .await;
    assert_eq!(
        read["content"],
        "def total(xs):\r\n    s = 0\r\n    s += sum(xs)\r\n    return s\r\n"
    );

    // The decorator of an exported class is inside the class's scope: editing it was rejected
    // OLD_TEXT_NOT_FOUND "… copy the exact text" though the text was there.
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": "app", "scope": "AppComponent"}),
        )
        .await;
    assert!(
        obs["text"]
            .as_str()
            .unwrap()
            .starts_with("@Component({selector: 'app-root'})")
    );
    let edited = mcp
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": "app", "request_key": "k3", "base_revision": obs["revision"],
                   "operations": [{"observation_id": obs["observation_id"],
                                   "old_text": "selector: 'app-root'", "new_text": "selector: 'app-main'"}]}),
        )
        .await;
    assert_eq!(edited["outcome"], "accepted", "{edited}");
    mcp.stop().await;
}

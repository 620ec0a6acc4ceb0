//! SPEC T1–T4: perf-event configuration, file modes and bounds — through the library's
//! `Recorder` and end to end through the status receipt of a real `patchdiff mcp` process.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::mcp::*;
use patchdiff::telemetry::{
    Limits, MAX_EVENT_BYTES, MAX_EVENTS, PerfEvent, Recorder, memory_path_for,
};
use serde_json::{Map, Value, json};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn unset_memory_variable_samples_into_a_private_memory_file() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("perf.jsonl");
    let (rec, status) = Recorder::configure(Some(&events), None);
    assert!(status.recording && status.valid && status.memory_sampling_enabled);
    assert_eq!(status.memory_path, Some(memory_path_for(&events)));
    rec.record(PerfEvent::point("worker_ready"));
    rec.record_memory(42, 1_000_000, Map::new());
    assert_eq!(mode(&events), 0o600);
    let memory = memory_path_for(&events);
    assert_eq!(mode(&memory), 0o600);
    let sample: Value =
        serde_json::from_str(std::fs::read_to_string(&memory).unwrap().trim()).unwrap();
    assert_eq!(sample["rss_bytes"], 1_000_000);
    assert_eq!(rec.stats().memory_samples, 1);
}

#[test]
fn memory_one_is_the_default_behaviour() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("perf.jsonl");
    let (_rec, status) = Recorder::configure(Some(&events), Some("1"));
    assert!(status.valid && status.memory_sampling_enabled);
    assert!(memory_path_for(&events).exists());
}

#[test]
fn memory_zero_keeps_events_but_no_memory_file() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("perf.jsonl");
    let (rec, status) = Recorder::configure(Some(&events), Some("0"));
    assert!(status.recording && status.valid);
    assert!(!status.memory_sampling_enabled);
    assert_eq!(status.memory_path, None);
    rec.record(PerfEvent::point("worker_ready"));
    rec.record_memory(42, 1, Map::new());
    assert!(!memory_path_for(&events).exists());
    let lines = event_lines(&events);
    assert_eq!(
        lines.len(),
        2,
        "the status line and the one event: {lines:?}"
    );
    assert_eq!(lines[0]["name"], "telemetry_status");
    assert_eq!(lines[0]["attrs"]["memory_sampling_enabled"], false);
    assert_eq!(lines[1]["name"], "worker_ready");
}

/// The events file's lines, parsed.
fn event_lines(events: &Path) -> Vec<Value> {
    std::fs::read_to_string(events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_status_receipt_is_the_first_line_of_the_events_file() {
    // T2: `memory_sampling_enabled` reaches the events file, not only the status tool.
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("perf.jsonl");
    let (_rec, status) = Recorder::configure(Some(&events), None);
    assert!(status.memory_sampling_enabled);
    let lines = event_lines(&events);
    assert_eq!(lines[0]["name"], "telemetry_status");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["attrs"]["valid"], true);
    assert_eq!(lines[0]["attrs"]["memory_sampling_enabled"], true);
    assert_eq!(
        lines[0]["attrs"]["memory_path"],
        memory_path_for(&events).display().to_string()
    );
}

#[test]
fn junk_memory_value_invalidates_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("perf.jsonl");
    for junk in ["yes", "2", "", "true"] {
        let (rec, status) = Recorder::configure(Some(&events), Some(junk));
        assert!(!status.valid && !status.recording, "{junk:?}");
        assert_eq!(
            status.invalid_reason.as_deref(),
            Some("invalid_memory_configuration")
        );
        assert!(!rec.is_recording());
    }
    // T2/T3: the events file holds only the status lines saying why nothing else is recorded.
    let lines = event_lines(&events);
    assert_eq!(lines.len(), 4);
    for l in lines {
        assert_eq!(l["name"], "telemetry_status");
        assert_eq!(l["outcome"], "failed");
        assert_eq!(l["attrs"]["invalid_reason"], "invalid_memory_configuration");
    }
    assert!(!memory_path_for(&events).exists());
}

#[test]
fn relative_events_path_is_a_configuration_error() {
    let (rec, status) = Recorder::configure(Some(Path::new("perf.jsonl")), None);
    assert!(!status.valid && !rec.is_recording());
    assert_eq!(
        status.invalid_reason.as_deref(),
        Some("relative_events_path")
    );
    assert!(!Path::new("perf.jsonl").exists());
}

#[test]
fn unset_events_path_records_nothing() {
    let (rec, status) = Recorder::configure(None, Some("junk-is-irrelevant-when-off"));
    assert!(status.valid && !status.recording && !rec.is_recording());
}

#[test]
fn product_bounds_are_the_spec_figures() {
    assert_eq!(MAX_EVENTS, 200_000);
    assert_eq!(MAX_EVENT_BYTES, 64 * 1024 * 1024);
    assert_eq!(
        Limits::PRODUCT,
        Limits {
            max_events: MAX_EVENTS,
            max_bytes: MAX_EVENT_BYTES
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let (_, status) = Recorder::configure(Some(&dir.path().join("p.jsonl")), Some("0"));
    assert_eq!(status.limits, Some(Limits::PRODUCT));
}

#[test]
fn byte_bound_counts_what_earlier_processes_appended() {
    // T4: a path reused across restarts (as a host config's fixed path is) stays bounded.
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("reused.jsonl");
    std::fs::write(&events, vec![b'x'; 3_900]).unwrap();
    // An earlier process created it private; a file others can read would be refused.
    std::fs::set_permissions(&events, std::fs::Permissions::from_mode(0o600)).unwrap();
    let limits = Limits {
        max_events: 1_000_000,
        max_bytes: 4_096,
    };
    let (rec, _) = Recorder::configure_with_limits(Some(&events), Some("0"), limits);
    for i in 0..100u64 {
        rec.record(PerfEvent::point("after_restart").id("i", i));
    }
    let len = std::fs::metadata(&events).unwrap().len();
    assert!(len <= 4_096, "file grew to {len} bytes past its bound");
    assert!(rec.stats().dropped_events > 0);
}

#[test]
fn events_file_stays_within_its_bounds_under_a_flood() {
    let dir = tempfile::tempdir().unwrap();
    // Count bound first.
    let events = dir.path().join("count.jsonl");
    let limits = Limits {
        max_events: 50,
        max_bytes: 1 << 20,
    };
    let (rec, _) = Recorder::configure_with_limits(Some(&events), Some("0"), limits);
    for i in 0..5_000u64 {
        rec.record(PerfEvent::point("flood").id("i", i));
    }
    let text = std::fs::read_to_string(&events).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 51, "the status line, 49 events and one marker");
    assert_eq!(lines[0]["name"], "telemetry_status");
    assert_eq!(lines[50]["name"], "telemetry_truncated");
    assert_eq!(rec.stats().dropped_events, 4_951);

    // Byte bound: big events, marker included, never past max_bytes.
    let events = dir.path().join("bytes.jsonl");
    let limits = Limits {
        max_events: 1_000_000,
        max_bytes: 4_096,
    };
    let (rec, _) = Recorder::configure_with_limits(Some(&events), Some("0"), limits);
    for i in 0..2_000u64 {
        rec.record(
            PerfEvent::point("flood")
                .id("i", i)
                .attr("pad", "x".repeat(100)),
        );
    }
    let len = std::fs::metadata(&events).unwrap().len();
    assert!(len <= 4_096, "events file is {len} bytes");
    let text = std::fs::read_to_string(&events).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("telemetry_truncated"))
            .count(),
        1
    );
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
    let stats = rec.stats();
    assert_eq!(stats.written_bytes, len);
    assert_eq!(
        stats.written_events + stats.dropped_events,
        2_001,
        "the status line and the flood"
    );
}

/// The status receipt of a real full-profile process for one `PATCHDIFF_PERF_MEMORY` value, and
/// proof that transactions run the same.
async fn status_with_memory(env: &TestEnv, memory: Option<&str>, events: &Path) -> Value {
    let mut vars = env.vars("full");
    vars.insert("PATCHDIFF_PERF_EVENTS".into(), events.display().to_string());
    if let Some(m) = memory {
        vars.insert("PATCHDIFF_PERF_MEMORY".into(), m.into());
    }
    let (fixture, sha) = env.fixture("t.js", CALENDAR_JS);
    let mcp = Mcp::launch(&vars).await;
    let target = match memory {
        None => "tunset",
        Some("1") => "tone",
        Some("0") => "tzero",
        Some(_) => "tjunk",
    };
    mcp.ok(
        "patchdiff_init_target",
        json!({"target": target, "fixture": fixture, "sha256": sha, "language": "javascript", "reset": true}),
    )
    .await;
    let obs = mcp
        .ok(
            "patchdiff_observe_scope",
            json!({"target": target, "scope": "Calendar.addWindow"}),
        )
        .await;
    let receipt = mcp
        .ok(
            "patchdiff_submit_observed_operations",
            json!({"target": target, "request_key": "k", "base_revision": 0, "operations": [
                {"observation_id": obs["observation_id"], "old_text": "addWindow(w) {", "new_text": "addWindow(w) { // added"}
            ]}),
        )
        .await;
    assert_eq!(receipt["outcome"], "accepted", "transactions unchanged");
    let status = mcp.ok("patchdiff_worker_status", json!({})).await;
    mcp.stop().await;
    status
}

#[tokio::test]
async fn status_receipt_reports_each_memory_configuration() {
    let env = TestEnv::new();

    let events = env.path().join("unset.perf.jsonl");
    let s = status_with_memory(&env, None, &events).await;
    assert_eq!(s["telemetry"]["recording"], true);
    assert_eq!(s["telemetry"]["memory_sampling_enabled"], true);
    assert!(memory_path_for(&events).exists());
    assert_eq!(mode(&events), 0o600);
    assert_eq!(mode(&memory_path_for(&events)), 0o600);
    assert!(s["telemetry_counters"]["written_events"].as_u64() > Some(0));
    assert_eq!(s["telemetry"]["limits"]["max_events"], MAX_EVENTS);

    let events = env.path().join("one.perf.jsonl");
    let s = status_with_memory(&env, Some("1"), &events).await;
    assert_eq!(s["telemetry"]["memory_sampling_enabled"], true);
    assert!(memory_path_for(&events).exists());

    let events = env.path().join("zero.perf.jsonl");
    let s = status_with_memory(&env, Some("0"), &events).await;
    assert_eq!(s["telemetry"]["recording"], true);
    assert_eq!(s["telemetry"]["valid"], true);
    assert_eq!(s["telemetry"]["memory_sampling_enabled"], false);
    assert!(!memory_path_for(&events).exists());
    assert!(
        std::fs::read_to_string(&events)
            .unwrap()
            .contains("\"submission\"")
    );

    let events = env.path().join("junk.perf.jsonl");
    let s = status_with_memory(&env, Some("lots"), &events).await;
    assert_eq!(s["telemetry"]["valid"], false);
    assert_eq!(
        s["telemetry"]["invalid_reason"],
        "invalid_memory_configuration"
    );
    // T2/T3: the events file holds only the status line, naming the invalid configuration.
    let lines = event_lines(&events);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["name"], "telemetry_status");
    assert_eq!(
        lines[0]["attrs"]["invalid_reason"],
        "invalid_memory_configuration"
    );
    assert!(!memory_path_for(&events).exists());
    // T3: telemetry never disables the worker's own RSS limit (W9).
    assert!(
        s["worker"].is_object(),
        "the worker still runs under an invalid telemetry configuration: {s}"
    );
}

#[tokio::test]
async fn relative_events_path_is_reported_invalid_in_the_receipt() {
    let env = TestEnv::new();
    let mut vars = env.vars("full");
    vars.insert("PATCHDIFF_PERF_EVENTS".into(), "relative/perf.jsonl".into());
    let mcp = Mcp::launch(&vars).await;
    let s = mcp.ok("patchdiff_worker_status", json!({})).await;
    assert_eq!(s["telemetry"]["valid"], false);
    assert_eq!(s["telemetry"]["invalid_reason"], "relative_events_path");
    mcp.stop().await;
}

//! Issue 10 item 6: `patchdiff trace RUN_DIR -o trace.json` turns a real canary's perf events
//! into the Chrome trace-event format (what Perfetto UI imports): the output parses as that
//! format, holds every recorded span (every phase) with its start and duration, every queue-depth
//! and RSS sample as a counter, names every process and track, and keeps slices well nested per
//! track (Perfetto drops slices that are not).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use patchdiff::telemetry::PerfEvent;
use serde_json::Value;

#[test]
fn a_canary_trace_holds_every_span_and_counter_in_trace_event_format() {
    let runs = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("console")
        .arg("--script")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/canary/demo.canary"))
        .arg("--runs-dir")
        .arg(runs.path())
        .env("PATCHDIFF_STATE_DIR", runs.path().join("state"))
        .env_remove("PATCHDIFF_DATABASE_URL")
        .output()
        .unwrap();
    assert!(output.status.success());
    let run = std::fs::read_dir(runs.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
        .unwrap();
    let out = runs.path().join("trace.json");
    let status = Command::new(env!("CARGO_BIN_EXE_patchdiff"))
        .arg("trace")
        .arg(&run)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let trace: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents array");

    // The format: every event has a known phase, a pid and tid; timed ones a numeric ts.
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(["X", "i", "C", "M"].contains(&ph), "{e}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].is_f64() || e["ts"].is_u64(), "{e}");
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().unwrap() > 0.0, "{e}");
        }
    }
    let named_processes: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();

    // Every recorded span is a slice with the same name, process, start and duration.
    let mut recorded: Vec<PerfEvent> = Vec::new();
    let mut memory_samples = 0;
    for entry in std::fs::read_dir(&run).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if name.ends_with(".perf.jsonl") {
            recorded.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
        } else if name.ends_with(".memory.jsonl") {
            memory_samples += text.lines().count();
        }
    }
    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let mut phases = 0;
    for ev in recorded.iter().filter(|e| e.duration_ms > 0.0) {
        if ev.name.starts_with("phase_") {
            phases += 1;
        }
        let ts = (ev.start_ms * 1000.0).round();
        assert!(
            slices.iter().any(|s| s["name"] == ev.name.as_str()
                && s["pid"] == ev.pid
                && (s["ts"].as_f64().unwrap() - ts).abs() < 0.5
                && (s["dur"].as_f64().unwrap() - (ev.duration_ms * 1000.0).round()).abs() <= 1.0),
            "span {} at {} of pid {} is missing",
            ev.name,
            ev.start_ms,
            ev.pid
        );
        assert!(named_processes.contains(&u64::from(ev.pid)));
    }
    assert!(phases >= 20, "the demo records phases: {phases}");
    let count = |name: &str| {
        recorded
            .iter()
            .filter(|e| e.name == name && e.duration_ms > 0.0)
            .count()
    };
    for name in [
        "phase_admission",
        "phase_readiness",
        "phase_active",
        "phase_outer",
    ] {
        assert_eq!(
            slices.iter().filter(|s| s["name"] == name).count(),
            count(name),
            "{name}"
        );
    }
    // Counters: queue depth and RSS.
    let counters = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"].as_str().unwrap().starts_with(name))
            .count()
    };
    assert_eq!(
        counters("queue depth"),
        recorded
            .iter()
            .filter(|e| e.name == "worker_queue_depth")
            .count()
    );
    assert!(counters("queue depth") > 0);
    assert_eq!(counters("memory sample rss"), memory_samples);
    // Worker generation tracks are named.
    assert!(events.iter().any(|e| e["ph"] == "M"
        && e["name"] == "thread_name"
        && e["args"]["name"] == "worker generation 1"));

    // Slices nest properly on each track (1 µs of rounding allowed).
    let mut by_track: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for s in &slices {
        let ts = s["ts"].as_f64().unwrap();
        by_track
            .entry((s["pid"].as_u64().unwrap(), s["tid"].as_u64().unwrap()))
            .or_default()
            .push((ts, ts + s["dur"].as_f64().unwrap()));
    }
    for (track, mut spans) in by_track {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut stack: Vec<f64> = Vec::new();
        for (start, end) in spans {
            while stack.last().is_some_and(|&top| start >= top - 1.0) {
                stack.pop();
            }
            if let Some(&top) = stack.last() {
                assert!(
                    end <= top + 1.0,
                    "track {track:?}: [{start}, {end}] overlaps its parent ending {top}"
                );
            }
            stack.push(end);
        }
    }
}

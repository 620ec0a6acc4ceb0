//! `patchdiff trace RUN_DIR -o trace.json`: the perf events of every process of
//! a run as a Chrome trace-event file (the JSON object format), which Perfetto UI and
//! `chrome://tracing` open.
//!
//! Layout: one trace process per recording process (`observed`, `full`, … with its pid), and in
//! it one track for the MCP server (`mcp_call`, `submission`, refusals) and one per Waymark worker
//! generation (lifecycle points, `discovery_total` and every `phase_*`/`ipc_read` span, assigned
//! to the generation that was current when they started). Spans are complete events (`X`),
//! points are instant events (`i`); RSS (`worker_rss` and the memory file) and queue depth
//! (`worker_queue_depth`) are counters (`C`). Timestamps are µs of Unix time, as recorded.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::telemetry::{EventKind, Outcome, PerfEvent, attr};

/// Track id of a process's MCP-server track.
const MCP_TID: u64 = 1;
/// Track ids of worker generations are this plus the generation number.
const GENERATION_TID_BASE: u64 = 100;
/// Track ids of a track's further lanes: `tid + LANE_STRIDE × lane` ([`Trace::assign_lanes`]).
const LANE_STRIDE: u64 = 10_000;
/// Slices are written in whole µs ([`us`]): ends that differ by less than this still nest.
const ROUNDING_US: f64 = 1.0;

/// What the export found, for the command's one-line summary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceSummary {
    pub processes: usize,
    pub spans: usize,
    pub instants: usize,
    pub counters: usize,
}

fn us(ms: f64) -> f64 {
    (ms * 1000.0).round()
}

fn generation_of(ev: &PerfEvent) -> Option<u64> {
    ev.ids.get(attr::GENERATION).and_then(|g| {
        g.as_u64()
            .or_else(|| g.as_str().and_then(|s| s.parse().ok()))
    })
}

fn is_worker_event(name: &str) -> bool {
    name.starts_with("worker_")
        || name.starts_with("phase_")
        || name == "discovery_total"
        || name == "ipc_read"
}

/// Builds the trace from every `*.perf.jsonl` file (and its `.memory.jsonl`) in `run_dir`,
/// files in name order. Perf-event text that does not parse (a torn last line) is skipped.
/// Errors: the directory or a perf-events file cannot be read.
pub fn build(run_dir: &Path) -> std::io::Result<(Value, TraceSummary)> {
    let mut files: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(run_dir)?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".perf.jsonl")
                .map(|process| (process.to_owned(), e.path()))
        })
        .collect();
    files.sort();
    let mut trace = Trace::default();
    for (process, path) in &files {
        let text = std::fs::read_to_string(path)?;
        let mut perf: Vec<PerfEvent> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<PerfEvent>(l).ok())
            .collect();
        perf.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        trace.add_perf_events(process, &perf);
        // Diagnostic RSS samples of the sampled child (T2), as a counter in the trace process
        // of the recording process that owns the file, when there is exactly one.
        let memory = path.with_file_name(format!("{process}.perf.jsonl.memory.jsonl"));
        let owner = {
            let pids: std::collections::BTreeSet<u32> = perf.iter().map(|e| e.pid).collect();
            (pids.len() == 1).then(|| pids.into_iter().next()).flatten()
        };
        if let Ok(text) = std::fs::read_to_string(&memory) {
            trace.add_memory_samples(process, &text, owner);
        }
    }
    Ok(trace.finish(run_dir))
}

/// The trace being built: its events, the processes and tracks they name, and the counts.
#[derive(Default)]
struct Trace {
    events: Vec<Value>,
    summary: TraceSummary,
    /// (trace pid) → process label.
    processes: BTreeMap<u32, String>,
    /// (pid, tid) → track name.
    tracks: BTreeMap<(u32, u64), String>,
}

impl Trace {
    /// One recording process's perf events (sorted by start), each on its track.
    fn add_perf_events(&mut self, process: &str, perf: &[PerfEvent]) {
        // The generation current per recording pid, as lifecycle points announce it.
        let mut current: BTreeMap<u32, u64> = BTreeMap::new();
        for ev in perf {
            self.processes
                .entry(ev.pid)
                .or_insert_with(|| format!("{process} (pid {})", ev.pid));
            if EventKind::parse(&ev.name) == Some(EventKind::WorkerLaunch)
                && let Some(g) = generation_of(ev)
            {
                current.insert(ev.pid, g);
            }
            let generation = generation_of(ev).or_else(|| current.get(&ev.pid).copied());
            let tid = self.track_of(ev, generation);
            self.push_event(ev, tid);
        }
    }

    /// The track of `ev`: its worker generation's (or the no-generation-yet track) for worker
    /// events, else the MCP server's. Names the track on first use.
    fn track_of(&mut self, ev: &PerfEvent, generation: Option<u64>) -> u64 {
        let (tid, name) = match generation {
            _ if !is_worker_event(&ev.name) => (MCP_TID, "mcp server".to_owned()),
            Some(g) => (GENERATION_TID_BASE + g, format!("worker generation {g}")),
            None => (GENERATION_TID_BASE, "worker (no generation yet)".to_owned()),
        };
        self.tracks.entry((ev.pid, tid)).or_insert(name);
        tid
    }

    /// `ev` as a counter (`C`: queue depth, worker RSS), a span (`X`) or an instant (`i`).
    fn push_event(&mut self, ev: &PerfEvent, tid: u64) {
        let (event, count) = match EventKind::parse(&ev.name) {
            Some(EventKind::WorkerQueueDepth) => (
                json!({
                    "name": "queue depth", "ph": "C", "ts": us(ev.start_ms),
                    "pid": ev.pid, "tid": tid,
                    "args": {
                        "active": ev.attrs.get(attr::ACTIVE).cloned().unwrap_or(json!(0)),
                        "waiting": ev.attrs.get(attr::WAITING).cloned().unwrap_or(json!(0)),
                    },
                }),
                &mut self.summary.counters,
            ),
            Some(EventKind::WorkerRss) => (
                json!({
                    "name": "worker rss", "ph": "C", "ts": us(ev.start_ms),
                    "pid": ev.pid, "tid": tid,
                    "args": {"rss_bytes": ev.attrs.get(attr::RSS_BYTES).cloned().unwrap_or(json!(0))},
                }),
                &mut self.summary.counters,
            ),
            _ if ev.duration_ms > 0.0 => (
                json!({
                    "name": ev.name, "cat": if tid == MCP_TID { "mcp" } else { "worker" },
                    "ph": "X", "ts": us(ev.start_ms), "dur": us(ev.duration_ms).max(1.0),
                    "pid": ev.pid, "tid": tid, "args": event_args(ev),
                }),
                &mut self.summary.spans,
            ),
            _ => (
                json!({
                    "name": ev.name, "cat": if tid == MCP_TID { "mcp" } else { "worker" },
                    "ph": "i", "s": "t", "ts": us(ev.start_ms),
                    "pid": ev.pid, "tid": tid, "args": event_args(ev),
                }),
                &mut self.summary.instants,
            ),
        };
        *count += 1;
        self.events.push(event);
    }

    /// The memory file's RSS samples (`text`, JSONL) as counters in `owner`'s trace process
    /// (else the sampled child's pid).
    fn add_memory_samples(&mut self, process: &str, text: &str, owner: Option<u32>) {
        for v in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            let (Some(ts), Some(rss)) = (v["ts_ms"].as_f64(), v["rss_bytes"].as_u64()) else {
                continue;
            };
            let child = v["pid"].as_u64().unwrap_or(0);
            let pid = owner.unwrap_or(child as u32);
            self.processes
                .entry(pid)
                .or_insert_with(|| format!("{process} (pid {pid})"));
            self.events.push(json!({
                "name": format!("memory sample rss (pid {child})"), "ph": "C", "ts": us(ts),
                "pid": pid, "tid": 0, "args": {"rss_bytes": rss},
            }));
            self.summary.counters += 1;
        }
    }

    /// Puts every `X` slice on a lane of its track where slices nest, as the trace-event format
    /// requires of one thread: a slice that starts inside another but ends after it (a discovery
    /// that began waiting while its generation was still becoming ready) goes to the track's
    /// next lane, `tid + LANE_STRIDE × lane`, named after the track.
    fn assign_lanes(&mut self) {
        let mut by_track: BTreeMap<(u32, u64), Vec<usize>> = BTreeMap::new();
        for (i, e) in self.events.iter().enumerate() {
            if e["ph"] == "X"
                && let (Some(pid), Some(tid)) = (e["pid"].as_u64(), e["tid"].as_u64())
            {
                by_track.entry((pid as u32, tid)).or_default().push(i);
            }
        }
        let span = |e: &Value| {
            let ts = e["ts"].as_f64().unwrap_or(0.0);
            (ts, ts + e["dur"].as_f64().unwrap_or(0.0))
        };
        for ((pid, tid), mut slices) in by_track {
            slices.sort_by(|&a, &b| {
                let (sa, ea) = span(&self.events[a]);
                let (sb, eb) = span(&self.events[b]);
                sa.total_cmp(&sb).then(eb.total_cmp(&ea))
            });
            // Per lane, the ends of the slices still open at the current start.
            let mut lanes: Vec<Vec<f64>> = Vec::new();
            for i in slices {
                let (start, end) = span(&self.events[i]);
                let lane = (0..)
                    .find(|&l| {
                        if l == lanes.len() {
                            lanes.push(Vec::new());
                        }
                        let open = &mut lanes[l];
                        while open.last().is_some_and(|&top| start >= top - ROUNDING_US) {
                            open.pop();
                        }
                        open.last().is_none_or(|&top| end <= top + ROUNDING_US)
                    })
                    .expect("a new lane always fits");
                lanes[lane].push(end);
                if lane > 0 {
                    let lane_tid = tid + LANE_STRIDE * lane as u64;
                    self.events[i]["tid"] = json!(lane_tid);
                    let base = self.tracks.get(&(pid, tid)).cloned().unwrap_or_default();
                    self.tracks
                        .entry((pid, lane_tid))
                        .or_insert_with(|| format!("{base} · overlapping {lane}"));
                }
            }
        }
    }

    /// The trace document: process and track metadata (`M`) first, then the events.
    fn finish(mut self, run_dir: &Path) -> (Value, TraceSummary) {
        self.assign_lanes();
        self.summary.processes = self.processes.len();
        let mut meta = Vec::new();
        for (pid, name) in &self.processes {
            meta.push(json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}));
        }
        for ((pid, tid), name) in &self.tracks {
            meta.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
            meta.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}));
        }
        meta.extend(self.events);
        (
            json!({
                "traceEvents": meta,
                "displayTimeUnit": "ms",
                "otherData": {"source": "patchdiff trace", "run_dir": run_dir},
            }),
            self.summary,
        )
    }
}

/// A span's or instant's `args`: ids, attributes, outcome, and `nested` when set.
fn event_args(ev: &PerfEvent) -> Value {
    let mut args = serde_json::Map::new();
    args.insert("ids".into(), Value::Object(ev.ids.clone()));
    args.insert("attrs".into(), Value::Object(ev.attrs.clone()));
    args.insert(
        "outcome".into(),
        json!(if ev.outcome == Outcome::Ok {
            "ok"
        } else {
            "failed"
        }),
    );
    if ev.nested {
        args.insert("nested".into(), json!(true));
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(ts: f64, dur: f64) -> Value {
        json!({"name": "s", "ph": "X", "ts": ts, "dur": dur, "pid": 7, "tid": 101})
    }

    #[test]
    fn a_slice_crossing_its_parents_end_moves_to_a_lane_of_its_own_and_nested_ones_stay() {
        let mut trace = Trace::default();
        trace.tracks.insert((7, 101), "worker generation 1".into());
        // [0, 100] holds [10, 20]; [90, 130] starts inside [0, 100] and ends after it.
        trace.events = vec![slice(0.0, 100.0), slice(10.0, 10.0), slice(90.0, 40.0)];
        trace.assign_lanes();
        let tids: Vec<u64> = trace
            .events
            .iter()
            .map(|e| e["tid"].as_u64().unwrap())
            .collect();
        assert_eq!(tids, [101, 101, 101 + LANE_STRIDE]);
        assert_eq!(
            trace.tracks[&(7, 101 + LANE_STRIDE)],
            "worker generation 1 · overlapping 1"
        );
    }
}

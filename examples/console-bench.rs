//! Console pipeline bench (not a test; `cargo run --release --example console-bench`): feeds the
//! console's real event pipeline — the byte-offset tailer, the bounded monitor and the run loop
//! drawing a 200×60 `TestBackend` — with 50,000 perf events/s appended to a file for 10 s, then
//! measures an idle console for 10 s. Prints events/s ingested, frame time p50/p99, peak RSS
//! and idle CPU. Then opens a run of 200,000 perf events (a past run's `observed.perf.jsonl`,
//! written by the bench) the way `runs open` does and prints the time to the first frame that
//! shows the run and to the frame that shows all of it — with today's loading path (small
//! first read, event application bounded by [`patchdiff::console::DRAIN_BUDGET`] per frame)
//! next to the earlier one (8 MiB reads, every queued batch applied before a frame), in one
//! run. `console-bench open` runs only that part. Last, the runs pane: 1,000 past runs written
//! into the temporary directory (a manifest and a report of the demo run's shape each), the
//! time from the `u` key to the first 200×60 frame of the list (the index read, sorted, drawn),
//! median of 7, goal ≤ 100 ms. `console-bench runs` runs only that part.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use patchdiff::canary::command::Command;
use patchdiff::console::app::App;
use patchdiff::console::state::percentile;
use patchdiff::console::{AppEvent, CommandSink, Sources, run_loop, run_loop_with};
use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use tokio::sync::mpsc;

/// Events per second written during the load phase.
const RATE: u64 = 50_000;
/// Length of each phase.
const PHASE: Duration = Duration::from_secs(10);
/// Writes happen in slices of this length.
const SLICE: Duration = Duration::from_millis(10);

struct Ignore;
impl CommandSink for Ignore {
    fn send(&mut self, _app: &mut App, _command: Command) {}
}

fn event_line(i: u64, now_ms: f64) -> String {
    let (name, attrs) = match i % 8 {
        0 => ("ipc_read", String::from("{}")),
        1 => (
            "discovery_total",
            String::from("{\"language\":\"typescript\"}"),
        ),
        2 => ("phase_admission", String::from("{\"ceiling_ms\":2000}")),
        3 => ("phase_active", String::from("{\"ceiling_ms\":15000}")),
        4 => ("phase_outer", String::from("{\"ceiling_ms\":28000}")),
        5 => (
            "worker_queue_depth",
            format!("{{\"active\":{},\"waiting\":{}}}", i % 2, i % 9),
        ),
        6 => (
            "worker_rss",
            format!(
                "{{\"rss_bytes\":{},\"limit_bytes\":1073741824}}",
                200_000_000 + (i % 1000) * 100_000
            ),
        ),
        _ => ("mcp_call", String::from("{}")),
    };
    format!(
        "{{\"name\":\"{name}\",\"start_ms\":{now_ms:.3},\"duration_ms\":{:.3},\"outcome\":\"{}\",\"ids\":{{\"generation\":1,\"request\":{i}}},\"nested\":false,\"attrs\":{attrs},\"pid\":4242}}\n",
        (i % 997) as f64 / 10.0,
        if i.is_multiple_of(101) {
            "failed"
        } else {
            "ok"
        }
    )
}

fn unix_ms() -> f64 {
    patchdiff::telemetry::unix_ms_now()
}

/// Appends events to `path` at [`RATE`] per second for `phase`; returns how many were written.
fn write_events(path: &Path, phase: Duration) -> u64 {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open the bench events file");
    let per_slice = RATE * SLICE.as_millis() as u64 / 1000;
    let start = Instant::now();
    let mut written = 0u64;
    let mut slice = 0u32;
    while start.elapsed() < phase {
        let mut buf = String::with_capacity(per_slice as usize * 260);
        let now = unix_ms();
        for _ in 0..per_slice {
            buf.push_str(&event_line(written, now));
            written += 1;
        }
        f.write_all(buf.as_bytes()).expect("append events");
        slice += 1;
        let next = SLICE * slice;
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    written
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs the console loop on `events` for `phase` (plus `drain`); returns the app.
async fn run_console(events: &Path, phase: Duration, drain: Duration) -> App {
    let (tx, mut rx) = mpsc::channel::<AppEvent>(patchdiff::console::EVENT_QUEUE);
    let _sources = Sources::start(&[("observed".to_owned(), events.to_path_buf())], None, &tx);
    let mut app = App::new(true, unix_ms());
    app.size = (200, 60);
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("test terminal");
    let stopper = tx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(phase + drain).await;
        let _ = stopper.send(AppEvent::Signal("bench done")).await;
    });
    run_loop(&mut terminal, &mut app, &mut rx, &mut Ignore)
        .await
        .expect("run loop");
    app
}

/// Events in the opened run.
const OPEN_EVENTS: u64 = 200_000;

/// A `TestBackend` that notes, at every flushed frame, when it was drawn and how many events
/// the header says were ingested (`· N events ·`): what the operator sees, not internal state.
struct Timed {
    inner: TestBackend,
    started: Instant,
    frames: Frames,
}

/// (time since the open, events the header showed) of each frame.
type Frames = std::sync::Arc<std::sync::Mutex<Vec<(Duration, u64)>>>;

impl Timed {
    fn header_events(&self) -> u64 {
        let buf = self.inner.buffer();
        let header: String = (0..buf.area.width).map(|x| buf[(x, 0)].symbol()).collect();
        header
            .split(" events")
            .next()
            .and_then(|h| h.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

impl Backend for Timed {
    type Error = <TestBackend as Backend>::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()?;
        let seen = self.header_events();
        let at = self.started.elapsed();
        self.frames.lock().expect("frames").push((at, seen));
        Ok(())
    }
}

/// Opens `events` as `runs open` does (tailed from its start) and returns, in ms since the
/// open, the first frame showing any of its events and the first showing all `total`, plus
/// the frames drawn until then. `earlier` selects the earlier loading path.
async fn open_run(events: &Path, total: u64, earlier: bool) -> (f64, f64, usize) {
    let (tx, mut rx) = mpsc::channel::<AppEvent>(patchdiff::console::EVENT_QUEUE);
    let mut app = App::new(true, unix_ms());
    app.size = (200, 60);
    let started = Instant::now();
    let _sources = Sources::start_from(
        &[("observed".to_owned(), events.to_path_buf())],
        None,
        &tx,
        if earlier {
            patchdiff::console::sources::TAIL_BATCH_BYTES
        } else {
            patchdiff::console::sources::FIRST_BATCH_BYTES
        },
    );
    let frames = Frames::default();
    let mut terminal = Terminal::new(Timed {
        inner: TestBackend::new(200, 60),
        started,
        frames: frames.clone(),
    })
    .expect("test terminal");
    let budget = if earlier {
        None
    } else {
        Some(patchdiff::console::DRAIN_BUDGET)
    };
    // Stop once a frame has shown every event (or after 60 s).
    let shown = frames.clone();
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(60);
        let all_shown = || {
            shown
                .lock()
                .expect("frames")
                .last()
                .is_some_and(|&(_, n)| n >= total)
        };
        while Instant::now() < deadline && !all_shown() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let _ = tx.send(AppEvent::Signal("bench done")).await;
    });
    run_loop_with(&mut terminal, &mut app, &mut rx, &mut Ignore, budget)
        .await
        .expect("run loop");
    let frames = frames.lock().expect("frames").clone();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let first = frames
        .iter()
        .find(|&&(_, n)| n > 0)
        .map_or(f64::NAN, |&(t, _)| ms(t));
    let all = frames.iter().position(|&(_, n)| n >= total);
    let complete = all.map_or(f64::NAN, |i| ms(frames[i].0));
    (first, complete, all.map_or(frames.len(), |i| i + 1))
}

fn open_phase(dir: &Path, runtime: &tokio::runtime::Runtime) {
    let run = dir.join("r-bench");
    std::fs::create_dir_all(&run).expect("run dir");
    let events = run.join("observed.perf.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&events).expect("events"));
        let now = unix_ms();
        for i in 0..OPEN_EVENTS {
            f.write_all(event_line(i, now).as_bytes()).expect("write");
        }
    }
    let bytes = std::fs::metadata(&events).map_or(0, |m| m.len());
    println!(
        "open: a run of {OPEN_EVENTS} perf events ({:.1} MiB), time from `runs open` to a frame, median of 3:",
        bytes as f64 / 1048576.0
    );
    for (label, earlier) in [("earlier path", true), ("today's path", false)] {
        let mut firsts = Vec::new();
        let mut completes = Vec::new();
        let mut frames = 0;
        for _ in 0..3 {
            let (first, complete, n) = runtime.block_on(open_run(&events, OPEN_EVENTS, earlier));
            firsts.push(first);
            completes.push(complete);
            frames = n;
        }
        firsts.sort_by(f64::total_cmp);
        completes.sort_by(f64::total_cmp);
        println!(
            "open: {label:<13} first frame showing the run {:>7.1} ms · every event shown {:>7.1} ms ({frames} frames)",
            firsts[1], completes[1]
        );
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if std::env::args().nth(1).as_deref() == Some("open") {
        open_phase(dir.path(), &runtime);
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("runs") {
        runs_phase(dir.path());
        return;
    }

    // Phase 1: 50,000 events/s for 10 s.
    let events = dir.path().join("load.perf.jsonl");
    std::fs::write(&events, b"").expect("create events file");
    let writer_path = events.clone();
    let writer = std::thread::spawn(move || write_events(&writer_path, PHASE));
    let started = Instant::now();
    let cpu_load0 = cpu_seconds();
    let app = runtime.block_on(run_console(&events, PHASE, Duration::from_millis(500)));
    let elapsed = started.elapsed();
    let cpu_load = cpu_seconds() - cpu_load0;
    let written = writer.join().expect("writer");
    let mut frames: Vec<f64> = app.frame_ms.iter().copied().collect();
    frames.sort_by(f64::total_cmp);
    let bytes = std::fs::metadata(&events).map_or(0, |m| m.len());
    println!(
        "load: {written} events written ({:.1} MiB) at {RATE}/s for {} s",
        bytes as f64 / 1048576.0,
        PHASE.as_secs()
    );
    println!(
        "load: {} events ingested in {:.2} s → {:.0} events/s ingested ({} malformed)",
        app.monitor.ingested,
        elapsed.as_secs_f64(),
        app.monitor.ingested as f64 / PHASE.as_secs_f64(),
        app.monitor.malformed
    );
    println!(
        "load: process CPU {:.2} s over {:.2} s wall = {:.0} % of one core (writer thread included)",
        cpu_load,
        elapsed.as_secs_f64(),
        100.0 * cpu_load / elapsed.as_secs_f64()
    );
    println!(
        "load: {} frames at 200×60 · frame time p50 {:.2} ms · p99 {:.2} ms · max {:.2} ms",
        frames.len(),
        percentile(&frames, 0.50),
        percentile(&frames, 0.99),
        frames.last().copied().unwrap_or(0.0)
    );

    // Phase 2: burst — a pre-written file of 500,000 events, time until all are ingested.
    let burst = dir.path().join("burst.perf.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&burst).expect("burst file"));
        let now = unix_ms();
        for i in 0..500_000 {
            f.write_all(event_line(i, now).as_bytes()).expect("write");
        }
    }
    let mut monitor = patchdiff::console::state::Monitor::new();
    let mut tail = patchdiff::console::tail::JsonlTail::new(&burst);
    let t = Instant::now();
    while tail
        .poll(patchdiff::console::sources::TAIL_BATCH_BYTES, |l| {
            monitor.ingest_item("observed", &l)
        })
        .unwrap_or(0)
        > 0
    {}
    monitor.refresh();
    println!(
        "burst: {} events parsed and ingested in {:.2} s → {:.0} events/s (single thread)",
        monitor.ingested,
        t.elapsed().as_secs_f64(),
        monitor.ingested as f64 / t.elapsed().as_secs_f64()
    );
    println!(
        "peak RSS: {:.1} MiB (VmHWM, whole bench process)",
        peak_rss_mib()
    );

    // Phase 3: idle — the same loop, no events, 10 s.
    let idle = dir.path().join("idle.perf.jsonl");
    std::fs::write(&idle, b"").expect("idle file");
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let app = runtime.block_on(run_console(&idle, PHASE, Duration::ZERO));
    let cpu = cpu_seconds() - cpu0;
    println!(
        "idle: {:.3} s CPU over {:.1} s wall = {:.2} % of one core ({} redraws)",
        cpu,
        t.elapsed().as_secs_f64(),
        100.0 * cpu / t.elapsed().as_secs_f64(),
        app.frame_ms.len()
    );

    // Phase 4: opening a past run of 200,000 events.
    open_phase(dir.path(), &runtime);

    // Phase 5: the runs pane over 1,000 past runs.
    runs_phase(dir.path());
}

/// Past runs the runs pane lists.
const PAST_RUNS: usize = 1_000;

/// Writes [`PAST_RUNS`] run directories under `root`: a manifest (agent, suite, endpoints,
/// padded with a process environment) and a report of five targets with seven named checks
/// each, about the size the demo run writes.
fn write_past_runs(root: &Path) {
    use serde_json::json;
    let names = ["calendar", "chess", "incidents", "worker-logs", "limiter"];
    for i in 0..PAST_RUNS {
        let id = format!("r-20261201-{:06}-{i}", i % 240_000);
        let dir = root.join(&id);
        std::fs::create_dir_all(&dir).expect("run dir");
        let env: serde_json::Map<String, serde_json::Value> = (0..40)
            .map(|k| {
                (
                    format!("SETTING_{k}"),
                    json!(format!("/tmp/runs/{id}/value-{k}")),
                )
            })
            .collect();
        let manifest = json!({
            "run_id": id, "started_ms": 1_796_000_000_000.0 + i as f64 * 60_000.0,
            "agent": {"model": if i % 3 == 0 { "claude-sonnet-4-5" } else { "scripted-demo" }},
            "configuration": {"observed_process": env,
                "fixture_manifest_source": "/s/bundled-suite/manifest.json",
                "fixture_manifest_sha256": "c".repeat(64), "provider_endpoints": []}});
        let targets: Vec<serde_json::Value> = names
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let checks: Vec<serde_json::Value> = (0..7)
                    .map(|c| json!({"name": format!("named check {c} holds"), "passed": true}))
                    .collect();
                let pass = (i + k) % 7 != 0;
                json!({"name": t, "status": if pass { "pass" } else { "fail" },
                       "evaluated": true, "checks": checks, "check_output": "x".repeat(300)})
            })
            .collect();
        let passed = targets.iter().all(|t| t["status"] == "pass");
        let report = json!({"run_id": id, "passed": passed,
            "outcome": if passed { "passed" } else { "failed" }, "targets": targets});
        std::fs::write(dir.join("manifest.json"), manifest.to_string()).expect("manifest");
        std::fs::write(dir.join("report.json"), report.to_string()).expect("report");
    }
}

/// The time from `u` to the first frame of the runs pane listing [`PAST_RUNS`] runs.
fn runs_phase(dir: &Path) {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let root = dir.join("runs");
    write_past_runs(&root);
    let mut times = Vec::new();
    let mut listed = 0;
    for _ in 0..7 {
        let mut app = App::new(true, unix_ms());
        app.panes.runs.root = Some(root.clone());
        let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("test terminal");
        let t = Instant::now();
        app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::NONE));
        terminal
            .draw(|f| patchdiff::console::ui::draw(f, &app))
            .expect("draw");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        listed = app.panes.runs.list.shown.len();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "runs pane: {listed} past runs listed — `u` to the first 200×60 frame, median of 7 {:.1} ms (min {:.1}, max {:.1}; goal ≤ 100 ms)",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
}

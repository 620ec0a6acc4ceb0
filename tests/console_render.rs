//! Console rendering tests (SPEC U2, U4): each pane and the whole screen, built from a recorded
//! fixture of real perf events, drawn into `TestBackend` and compared with insta snapshots
//! (nothing filtered: `tests/fixtures/console/record.sh` fixes the fixture's pids, paths and
//! clock); plus resize safety and `NO_COLOR`.

use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use patchdiff::canary::StepOutcome;
use patchdiff::canary::TargetRow;
use patchdiff::canary::command::{COMMANDS, Command, ProcessKind};
use patchdiff::canary::host::HostProgress;
use patchdiff::console::app::{App, Input, Overlay, Pane};
use patchdiff::console::evidence::EvidenceView;
use patchdiff::console::runner::{CanarySnapshot, ProcessSnapshot, RunnerEvent};
use patchdiff::console::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/console")
}

/// Unix ms of the fixture's last event (a discovery became active then).
const LAST_EVENT_MS: f64 = 1_796_012_949_639.501_5;

/// A console showing a live canary, from the recorded fixture, 1.2 s after its last event.
fn live_app(color: bool) -> App {
    let mut app = App::new(color, LAST_EVENT_MS + 1_200.0);
    let dir = fixtures();
    for line in std::fs::read_to_string(dir.join("observed.perf.jsonl"))
        .unwrap()
        .lines()
    {
        app.monitor.ingest_line("observed", line);
    }
    for line in std::fs::read_to_string(dir.join("observed.perf.jsonl.memory.jsonl"))
        .unwrap()
        .lines()
    {
        app.monitor.ingest_memory_line(line);
    }
    app.monitor.refresh();
    let names = ["calendar", "chess", "incidents", "worker-logs", "limiter"];
    let targets = names
        .iter()
        .enumerate()
        .map(|(i, n)| TargetRow {
            name: (*n).into(),
            language: "typescript".into(),
            initial_sha256: format!("{i}aaaaaaaaaaaaaaaa"),
            version: u64::from(i < 2),
            revision: [3, 2, 0, 0, 0][i],
            accepted: [3, 2, 0, 0, 0][i],
            rejected: [1, 0, 0, 0, 0][i],
            current_sha256: if i < 2 {
                format!("{i}bbbbbbbbbbbbbbbb")
            } else {
                format!("{i}aaaaaaaaaaaaaaaa")
            },
            exported_sha256: (i == 0).then(|| "0bbbbbbbbbbbbbbbb".into()),
            full_byte: (i == 0).then_some(true),
            behavioral: (i == 0).then_some(true),
            ..TargetRow::default()
        })
        .collect();
    app.canary = Some(CanarySnapshot {
        run_id: "r-20261130-101500-4242".into(),
        run_path: "/tmp/runs/r-20261130-101500-4242".into(),
        database: "/tmp/runs/r-20261130-101500-4242/store.sqlite".into(),
        processes: vec![
            ProcessSnapshot {
                kind: "full",
                pid: Some(7001),
                started_ms: LAST_EVENT_MS - 65_000.0,
            },
            ProcessSnapshot {
                kind: "observed",
                pid: Some(7010),
                started_ms: LAST_EVENT_MS - 61_000.0,
            },
        ],
        exits: vec![],
        targets,
        steps: vec![],
        host: None,
    });
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "preflight".into(),
            ok: true,
            summary: "tools/list = 6 exact · full-profile call refused · worker ready 277 ms · 5 targets fresh".into(),
            elapsed_ms: 301,
        },
        output: None,
    });
    app.evidence = EvidenceView::new(vec![(
        "observed requests/results".into(),
        dir.join("observed.mcp.jsonl"),
    )]);
    app.evidence.rows = 12;
    app.evidence.reload();
    app
}

fn render(app: &App, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t.backend().buffer().clone()
}

fn render_pane(app: &App, pane: Pane, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw_pane(f, app, pane, Rect::new(0, 0, w, h)))
        .unwrap();
    t.backend().buffer().clone()
}

fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        for x in 0..area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::assert_snapshot!($name, $value);
    };
}

#[test]
fn whole_screen_of_a_live_canary_from_recorded_events() {
    let app = live_app(true);
    snap!("whole_screen_200x60", text(&render(&app, 200, 60)));
}

#[test]
fn processes_pane_shows_pid_uptime_state_and_worker_generation() {
    let app = live_app(true);
    let t = text(&render_pane(&app, Pane::Processes, 70, 5));
    assert!(t.contains("up    01:02"), "{t}");
    assert!(t.contains("gen 1"), "{t}");
    snap!("pane_processes", t);
}

#[test]
fn processes_pane_shows_the_agent_host_with_turns_and_last_tool_call() {
    let mut app = live_app(false);
    assert!(!text(&render_pane(&app, Pane::Processes, 100, 5)).contains("claude"));
    let mut tool_calls = std::collections::BTreeMap::new();
    tool_calls.insert("patchdiff_observe_scope".to_owned(), 4);
    tool_calls.insert("patchdiff_read_target".to_owned(), 2);
    app.on_runner(RunnerEvent::Host(Box::new(HostProgress {
        host: "claude".into(),
        pid: Some(7020),
        started_ms: LAST_EVENT_MS - 42_000.0,
        turns: 7,
        tool_calls,
        last_tool: Some("patchdiff_observe_scope".into()),
        state: "running".into(),
    })));
    let t = text(&render_pane(&app, Pane::Processes, 100, 5));
    let row = t
        .lines()
        .find(|l| l.contains("claude"))
        .expect("a host row");
    assert!(row.contains("pid 7020"), "{row}");
    assert!(row.contains("up    00:43"), "{row}");
    assert!(
        row.contains("7 turns · 6 calls · last observe_scope"),
        "{row}"
    );
    assert!(row.contains("running"), "{row}");
}

#[test]
fn enter_on_a_selected_target_asks_for_its_story_and_shows_it() {
    let mut app = live_app(false);
    app.focus = Pane::Targets;
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Up));
    let t = text(&render_pane(&app, Pane::Targets, 80, 9));
    assert!(t.lines().nth(4).unwrap().starts_with("│incidents"), "{t}");
    assert_eq!(
        app.on_key(key(KeyCode::Enter)),
        Some(Command::Target {
            name: "incidents".into()
        })
    );
    // The story comes back as the step's output and opens in an overlay.
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "target".into(),
            ok: true,
            summary: "story of `incidents`".into(),
            elapsed_ms: 3,
        },
        output: Some(
            "incidents (javascript) · version 1\ndiff: expected → exported\n  -a\n  +b".into(),
        ),
    });
    let screen = text(&render(&app, 80, 24));
    assert!(screen.contains("diff: expected → exported"), "{screen}");
    assert!(screen.contains("+b"), "{screen}");
}

#[test]
fn targets_pane_shows_versions_counts_hashes_export_and_evaluation() {
    let app = live_app(true);
    let t = text(&render_pane(&app, Pane::Targets, 80, 9));
    assert!(t.contains("≠ init") && t.contains("= init"), "{t}");
    assert!(t.contains("✔ exported") && t.contains("✔ pass"), "{t}");
    snap!("pane_targets", t);
}

#[test]
fn targets_pane_shows_a_broken_check_as_infra_error_not_fail() {
    let mut app = live_app(true);
    if let Some(c) = app.canary.as_mut() {
        let limiter = c.targets.iter_mut().find(|t| t.name == "limiter").unwrap();
        limiter.full_byte = Some(true);
        limiter.behavioral = Some(false);
        limiter.status = Some(patchdiff::evaluate::Status::InfraError);
        let chess = c.targets.iter_mut().find(|t| t.name == "chess").unwrap();
        chess.full_byte = Some(true);
        chess.behavioral = Some(false);
        chess.status = Some(patchdiff::evaluate::Status::Flaky);
    }
    let t = text(&render_pane(&app, Pane::Targets, 80, 9));
    let row = |name: &str| t.lines().find(|l| l.contains(name)).unwrap().to_owned();
    assert!(row("limiter").contains("infra_error"), "{t}");
    assert!(!row("limiter").contains("FAIL"), "{t}");
    assert!(row("chess").contains("flaky"), "{t}");
}

#[test]
fn worker_pane_shows_queue_phases_rss_launches_and_retirements() {
    let app = live_app(true);
    let t = text(&render_pane(&app, Pane::Worker, 110, 11));
    assert!(t.contains("active ■ 1/1"), "{t}");
    assert!(t.contains("active     ▶"), "live active phase: {t}");
    assert!(t.contains("launches this minute 1/3"), "{t}");
    snap!("pane_worker", t);
}

#[test]
fn perf_pane_shows_percentile_table_and_live_tail() {
    let app = live_app(true);
    let t = text(&render_pane(&app, Pane::Perf, 110, 24));
    assert!(t.contains("ipc_read") && t.contains("p99"), "{t}");
    assert!(t.contains("live tail"), "{t}");
    // Recorded from a build whose admissions succeed: none of the 22 failed.
    let admission = t.lines().find(|l| l.contains("phase_admission")).unwrap();
    let columns: Vec<&str> = admission
        .trim_matches(['│', ' '])
        .split_whitespace()
        .collect();
    assert_eq!(columns[1], "22", "{admission}");
    assert_eq!(columns.last(), Some(&"0"), "failed column: {admission}");
    snap!("pane_perf", t);
}

#[test]
fn evidence_pane_summarizes_requests_and_results() {
    let mut app = live_app(true);
    app.focus = Pane::Evidence;
    let t = text(&render_pane(&app, Pane::Evidence, 140, 14));
    assert!(t.contains("→ tools/call patchdiff_"), "{t}");
    assert!(t.contains("▶ "), "selected row marked: {t}");
    snap!("pane_evidence", t);
}

#[test]
fn help_overlay_is_generated_from_the_command_table() {
    let mut app = live_app(true);
    app.overlay = Overlay::Help { scroll: 0 };
    let t = text(&render(&app, 160, 50));
    for spec in COMMANDS {
        assert!(t.contains(spec.usage), "help lacks {}: {t}", spec.usage);
    }
    snap!("help_overlay", t);
}

#[test]
fn bottom_bar_lists_table_keys_and_the_focused_panes_keys() {
    let mut app = live_app(true);
    let t = text(&render(&app, 200, 60));
    let last = t.lines().last().unwrap_or("").to_owned();
    for spec in COMMANDS.iter().filter(|s| s.key.is_some()) {
        assert!(last.contains(spec.name), "{last}");
    }
    app.focus = Pane::Evidence;
    let t = text(&render(&app, 200, 60));
    assert!(t.lines().last().unwrap_or("").contains("/ search"), "{t}");
}

#[test]
fn renders_at_every_size_without_panicking() {
    let app = live_app(true);
    let mut sizes = vec![
        (1, 1),
        (2, 1),
        (1, 2),
        (40, 12),
        (200, 60),
        (19, 5),
        (20, 6),
        (80, 24),
        (99, 21),
        (100, 22),
        (300, 100),
    ];
    for w in (1..=120).step_by(7) {
        for h in (1..=50).step_by(5) {
            sizes.push((w, h));
        }
    }
    for (w, h) in sizes {
        let buf = render(&app, w, h);
        assert_eq!(buf.area, Rect::new(0, 0, w, h));
    }
    // At 40×12 the most important panes are still there.
    let t = text(&render(&app, 40, 12));
    assert!(t.contains("PROCESSES") && t.contains("TARGETS"), "{t}");
    snap!("whole_screen_40x12", t);
    snap!("whole_screen_80x24", text(&render(&app, 80, 24)));
    let mut with_overlay = live_app(true);
    with_overlay.overlay = Overlay::Help { scroll: 3 };
    for (w, h) in [(1, 1), (5, 3), (40, 12)] {
        render(&with_overlay, w, h);
    }
}

#[test]
fn small_terminals_drop_charts_before_tables() {
    let app = live_app(true);
    let panes: Vec<Pane> = ui::layout(Rect::new(0, 0, 60, 24), Pane::Processes)
        .panes
        .iter()
        .map(|(p, _)| *p)
        .collect();
    assert!(panes.contains(&Pane::Processes) && panes.contains(&Pane::Targets));
    assert!(!panes.contains(&Pane::Evidence));
    let t = text(&render(&app, 60, 24));
    assert!(t.contains("TARGETS"), "{t}");
}

#[test]
fn no_color_paints_no_colour_and_keeps_every_word() {
    let app = live_app(false);
    let buf = render(&app, 200, 60);
    for cell in buf.content() {
        assert_eq!(cell.fg, Color::Reset, "coloured cell {:?}", cell);
        assert_eq!(cell.bg, Color::Reset);
    }
    let colored = text(&render(&live_app(true), 200, 60));
    assert_eq!(text(&buf), colored, "NO_COLOR must not lose any text");
}

#[test]
fn phase_timer_turns_yellow_at_75_percent_and_red_at_the_ceiling() {
    let mut app = live_app(true);
    // The active discovery started at LAST_EVENT_MS; 12 s later it is past 75 % of 15 s.
    app.now_ms = LAST_EVENT_MS + 12_000.0;
    let buf = render_pane(&app, Pane::Worker, 110, 11);
    let t = text(&buf);
    let row = t.lines().position(|l| l.contains("active     ▶")).unwrap();
    assert!(t.lines().nth(row).unwrap().contains("high"), "{t}");
    assert!((0..110).any(|x| buf[(x, row as u16)].fg == Color::Yellow));
    app.now_ms = LAST_EVENT_MS + 15_500.0;
    let buf = render_pane(&app, Pane::Worker, 110, 11);
    let t = text(&buf);
    assert!(t.lines().nth(row).unwrap().contains("LIMIT"), "{t}");
    assert!((0..110).any(|x| buf[(x, row as u16)].fg == Color::Red));
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn type_str(app: &mut App, s: &str) -> Option<Command> {
    let mut last = None;
    for c in s.chars() {
        last = app.on_key(key(KeyCode::Char(c)));
    }
    last
}

#[test]
fn command_line_completes_names_and_arguments_from_the_table() {
    let mut app = App::new(true, 0.0);
    type_str(&mut app, ":la");
    app.on_key(key(KeyCode::Tab));
    assert_eq!(
        app.input,
        Input::Command {
            text: "launch ".into(),
            cycle: None
        }
    );
    app.on_key(key(KeyCode::Tab));
    assert!(matches!(&app.input, Input::Command { text, .. } if text == "launch full"));
    app.on_key(key(KeyCode::Tab));
    assert!(matches!(&app.input, Input::Command { text, .. } if text == "launch observed"));
    let cmd = app.on_key(key(KeyCode::Enter));
    assert_eq!(
        cmd,
        Some(Command::Launch {
            which: Some(patchdiff::canary::command::ProcessKind::Observed)
        })
    );
}

#[test]
fn a_bad_command_line_says_why_and_runs_nothing() {
    let mut app = App::new(true, 0.0);
    type_str(&mut app, ":launch everything");
    assert_eq!(app.on_key(key(KeyCode::Enter)), None);
    let s = app.statuses.last().unwrap();
    assert!(!s.ok && s.text.contains("usage: launch"), "{:?}", s);
}

#[test]
fn table_keys_run_commands_and_keys_needing_arguments_open_the_command_line() {
    let mut app = App::new(true, 0.0);
    assert_eq!(
        type_str(&mut app, "i"),
        Some(Command::Init { reset: false })
    );
    assert_eq!(type_str(&mut app, "a"), None);
    assert!(matches!(&app.input, Input::Command { text, .. } if text == "agent "));
}

#[test]
fn tab_moves_focus_forward_and_shift_tab_back() {
    let mut app = App::new(true, 0.0);
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.focus, Pane::Targets);
    app.on_key(key(KeyCode::BackTab));
    app.on_key(key(KeyCode::BackTab));
    assert_eq!(app.focus, Pane::Evidence);
}

#[test]
fn init_over_a_target_with_history_surfaces_the_not_fresh_advice() {
    let mut app = live_app(true);
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "init".into(),
            ok: false,
            summary: "target `calendar`: patchdiff_init_target: TARGET_NOT_FRESH: target calendar is not fresh (version 1, revision 3, 4 attempts, 2 observations); pass reset to wipe its history, or use another name".into(),
            elapsed_ms: 12,
        },
        output: None,
    });
    let t = text(&render(&app, 200, 60));
    let status = t.lines().rev().nth(1).unwrap_or("");
    assert!(
        status.contains("TARGET_NOT_FRESH") && status.contains(":init --reset"),
        "{status}"
    );
    // The message as the canary really reports it (without the code) is recognised too.
    app.notice = None;
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "init".into(),
            ok: false,
            summary: "target `calendar`: target calendar is not fresh (version 1, revision 2, 3 attempts, 2 observations); pass reset to wipe its history, or use another name".into(),
            elapsed_ms: 4,
        },
        output: None,
    });
    assert!(
        app.notice
            .as_deref()
            .is_some_and(|n| n.contains(":init --reset"))
    );
    // A successful init clears it.
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "init".into(),
            ok: true,
            summary: "5 targets at version 0".into(),
            elapsed_ms: 12,
        },
        output: None,
    });
    assert!(app.notice.is_none());
}

#[test]
fn quit_keys_set_quit() {
    let mut app = App::new(true, 0.0);
    app.on_key(key(KeyCode::Char('q')));
    assert!(app.quit);
    let mut app = App::new(true, 0.0);
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

#[test]
fn enter_on_an_evidence_line_pretty_prints_that_message() {
    let mut app = live_app(true);
    app.focus = Pane::Evidence;
    app.on_key(key(KeyCode::Up));
    assert!(!app.evidence.follow, "moving up leaves follow mode");
    app.on_key(key(KeyCode::Enter));
    let Overlay::Text { title, lines, .. } = &app.overlay else {
        panic!("no detail overlay")
    };
    assert!(title.contains("@ byte"), "{title}");
    assert!(lines.len() > 3 && lines[0] == "{", "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("\"direction\"")),
        "{lines:?}"
    );
    let t = text(&render(&app, 120, 40));
    assert!(t.contains("(Esc closes)"), "{t}");
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn slash_searches_the_evidence_log() {
    let mut app = live_app(true);
    app.focus = Pane::Evidence;
    type_str(&mut app, "/patchdiff_save");
    app.on_key(key(KeyCode::Enter));
    assert!(
        app.evidence.status.contains("match 1 of"),
        "{}",
        app.evidence.status
    );
    assert!(app.evidence.lines[0].text.contains("patchdiff_save"));
    // `n` moves to the next match; the status counts it.
    let n = app.evidence.matches.len();
    app.on_key(key(KeyCode::Char('n')));
    assert!(
        app.evidence
            .status
            .contains(&format!("match {} of {n}", 2.min(n))),
        "{}",
        app.evidence.status
    );
    assert!(app.evidence.lines[0].text.contains("patchdiff_save"));
}

#[test]
fn enter_on_processes_shows_the_step_log() {
    let mut app = live_app(true);
    app.on_key(key(KeyCode::Enter));
    let Overlay::Text { title, lines, .. } = &app.overlay else {
        panic!("no step log")
    };
    assert!(title.starts_with("step log"), "{title}");
    assert!(lines[0].starts_with("✔ preflight ok"), "{lines:?}");
}

#[test]
fn processes_pane_restarts_stops_and_kills_one_process_saying_what_it_does() {
    let mut app = live_app(false);
    app.focus = Pane::Processes;
    app.on_key(key(KeyCode::Down)); // observed
    assert_eq!(
        app.on_key(key(KeyCode::Char('R'))),
        Some(Command::Launch {
            which: Some(ProcessKind::Observed)
        })
    );
    assert!(app.statuses.iter().any(|s| {
        s.text
            .contains("restarting the observed process only (pid 7010)")
    }));
    assert_eq!(
        app.on_key(key(KeyCode::Char('X'))),
        Some(Command::Stop {
            which: Some(ProcessKind::Observed)
        })
    );
    // A kill asks first; anything but `y` cancels.
    assert_eq!(app.on_key(key(KeyCode::Char('K'))), None);
    let screen = text(&render(&app, 120, 30));
    assert!(
        screen.contains("kill observed (pid 7010) with SIGKILL? y/N"),
        "{screen}"
    );
    app.on_key(key(KeyCode::Char('n')));
    assert!(app.statuses.iter().any(|s| s.text == "cancelled"));
    // The selected row is highlighted and every process shows its sampled RSS and CPU.
    app.proc_usage.insert(
        7010,
        patchdiff::console::app::ProcUsage {
            rss_bytes: 64 * 1024 * 1024,
            cpu_percent: 12.0,
        },
    );
    let t = text(&render_pane(&app, Pane::Processes, 110, 6));
    let row = t.lines().find(|l| l.contains("observed")).unwrap();
    assert!(row.contains("rss 64.0 MiB cpu 12%"), "{t}");
}

#[test]
fn a_confirmed_kill_sends_sigkill_to_the_selected_process() {
    use std::os::unix::process::ExitStatusExt;
    // A real process stands in for an agent host the console shows.
    let mut child = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let mut app = live_app(false);
    app.on_runner(RunnerEvent::Host(Box::new(HostProgress {
        host: "claude".into(),
        pid: Some(child.id()),
        started_ms: LAST_EVENT_MS,
        state: "running".into(),
        ..HostProgress::default()
    })));
    app.focus = Pane::Processes;
    let rows = app.process_rows();
    let index = rows.iter().position(|r| r.label == "claude").unwrap();
    for _ in 0..index {
        app.on_key(key(KeyCode::Down));
    }
    app.on_key(key(KeyCode::Char('K')));
    assert!(matches!(app.input, Input::Confirm { .. }));
    // `sleep` is its own process's leader only if spawned so; kill it alone here.
    if let Input::Confirm {
        action: patchdiff::console::app::ProcessAction::Kill { group, .. },
        ..
    } = &mut app.input
    {
        *group = false;
    }
    app.on_key(key(KeyCode::Char('y')));
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert!(
        app.statuses
            .iter()
            .any(|s| s.text.contains("sent SIGKILL to claude"))
    );
}

#[test]
fn after_report_the_header_carries_the_verdict() {
    let mut app = live_app(false);
    let header = |app: &App| {
        text(&render(app, 200, 60))
            .lines()
            .next()
            .unwrap()
            .to_owned()
    };
    assert!(!header(&app).contains("PASSED") && !header(&app).contains("FAILED"));
    let mut snapshot = app.canary.clone().unwrap();
    snapshot.steps.push(StepOutcome {
        command: "report".into(),
        ok: false,
        summary: "the canary did not pass".into(),
        elapsed_ms: 1,
    });
    app.on_runner(RunnerEvent::Snapshot(Box::new(snapshot.clone())));
    // In the fixture only calendar has passed both checks.
    assert!(
        header(&app).contains("FAILED 1/5 (chess, incidents, worker-logs, limiter)"),
        "{}",
        header(&app)
    );
    for t in &mut snapshot.targets {
        t.full_byte = Some(true);
        t.behavioral = Some(true);
    }
    snapshot.steps.last_mut().unwrap().ok = true;
    app.on_runner(RunnerEvent::Snapshot(Box::new(snapshot)));
    assert!(header(&app).contains("PASSED 5/5"), "{}", header(&app));
}

#[test]
fn perf_table_shows_gauges_in_their_units_and_hides_a_kind_from_the_tail() {
    let mut app = live_app(false);
    let rss = |bytes: u64, ts: f64| {
        format!(
            r#"{{"name":"worker_rss","start_ms":{ts},"duration_ms":0.0,"outcome":"ok","ids":{{"generation":1}},"nested":false,"attrs":{{"limit_bytes":1073741824,"rss_bytes":{bytes}}},"pid":7010}}"#
        )
    };
    // 200, 300, 400 MiB after the fixture's seven samples (all below 200 MiB): percentiles
    // are sizes, not 0 ms, and the top two are the largest sample.
    for (i, mib) in [200u64, 300, 400].iter().enumerate() {
        app.monitor.ingest_line(
            "observed",
            &rss(mib * 1024 * 1024, LAST_EVENT_MS + i as f64),
        );
    }
    app.monitor.refresh();
    app.focus = Pane::Perf;
    let t = text(&render_pane(&app, Pane::Perf, 110, 40));
    let row = t.lines().find(|l| l.contains("worker_rss")).unwrap();
    assert_eq!(row.matches(" MiB").count(), 3, "{row}");
    assert!(row.contains("400.0 MiB 400.0 MiB"), "p95 and p99: {row}");
    assert!(
        t.lines()
            .any(|l| l.contains("worker_queue_depth") && !l.contains(" ms"))
    );
    // Select the worker_rss row and hide the kind from the tail.
    let index = app
        .monitor
        .stat_rows
        .iter()
        .position(|r| r.name == "worker_rss")
        .unwrap();
    app.perf_scroll = index;
    app.on_key(key(KeyCode::Char('x')));
    let t = text(&render_pane(&app, Pane::Perf, 110, 40));
    let tail: Vec<&str> = t.lines().skip_while(|l| !l.contains("live tail")).collect();
    assert!(tail[0].contains("(hidden: worker_rss)"), "{t}");
    assert!(!tail[1..].iter().any(|l| l.contains("worker_rss")), "{t}");
    app.on_key(key(KeyCode::Char('x')));
    assert!(app.perf_hidden.is_empty());
}

#[test]
fn after_the_worker_exits_the_rss_line_says_it_is_gone() {
    let mut app = live_app(false);
    let t = text(&render_pane(&app, Pane::Worker, 110, 11));
    assert!(!t.contains("worker gone"), "{t}");
    let pid = app.monitor.worker.pid.expect("the fixture's worker");
    app.proc_state.insert(pid, "gone".into());
    let t = text(&render_pane(&app, Pane::Worker, 110, 11));
    let row = t.lines().find(|l| l.contains("RSS")).unwrap();
    assert!(
        row.contains("worker gone (process exited)") && row.contains("—"),
        "{row}"
    );
}

#[test]
fn small_terminals_say_panes_are_hidden_and_focus_never_lands_on_one() {
    let mut app = live_app(false);
    app.size = (80, 24);
    let area = Rect::new(0, 0, 80, 24);
    let shown = ui::layout(area, app.focus).panes.len();
    assert!(shown < Pane::ALL.len(), "80×24 hides some panes");
    let header = text(&render(&app, 80, 24))
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert!(
        header.contains(&format!("+{} panes: Tab", Pane::ALL.len() - shown)),
        "{header}"
    );
    // Tab visits every pane, and whichever has focus is on screen.
    let mut seen = Vec::new();
    for _ in 0..Pane::ALL.len() {
        app.on_key(key(KeyCode::Tab));
        let panes: Vec<Pane> = ui::layout(area, app.focus)
            .panes
            .iter()
            .map(|(p, _)| *p)
            .collect();
        assert!(
            panes.contains(&app.focus),
            "{:?} not in {panes:?}",
            app.focus
        );
        seen.push(app.focus);
    }
    seen.sort_by_key(|p| Pane::ALL.iter().position(|q| q == p));
    seen.dedup();
    assert_eq!(seen, Pane::ALL);
}

#[test]
fn the_record_key_opens_the_command_line_instead_of_recording_nothing() {
    let mut app = live_app(false);
    assert_eq!(app.on_key(key(KeyCode::Char('c'))), None);
    assert!(
        matches!(&app.input, Input::Command { text, .. } if text == "record "),
        "{:?}",
        app.input
    );
}

#[test]
fn a_worker_that_has_not_started_is_not_shown_as_ok() {
    let app = App::new(false, LAST_EVENT_MS);
    let t = text(&render_pane(&app, Pane::Processes, 90, 5));
    let row = t.lines().find(|l| l.contains("worker")).unwrap();
    assert!(row.contains("○ worker    not started"), "{row}");
    assert!(!row.contains('●'), "{row}");
}

#[test]
fn tab_completes_file_paths_for_agent_plans() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("demo.plan.jsonl"), "").unwrap();
    std::fs::write(dir.path().join(".hidden.jsonl"), "").unwrap();
    std::fs::create_dir(dir.path().join("plans")).unwrap();
    std::fs::write(dir.path().join("plans/wrong.plan.jsonl"), "").unwrap();
    let base = dir.path().display().to_string();
    let mut app = live_app(false);
    app.on_key(key(KeyCode::Char(':')));
    for c in format!("agent {base}/d").chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Tab));
    assert!(
        matches!(&app.input, Input::Command { text, .. } if *text == format!("agent {base}/demo.plan.jsonl ")),
        "{:?}",
        app.input
    );
    // A directory completes with its slash and stays open; hidden files are not offered.
    let cands = patchdiff::console::app::candidates(&format!("agent {base}/"));
    assert_eq!(
        cands,
        [format!("{base}/demo.plan.jsonl"), format!("{base}/plans/")]
    );
    let (line, _) = patchdiff::console::app::complete_line(&format!("agent {base}/pl"), None);
    assert_eq!(line, format!("agent {base}/plans/"));
    let (line, _) = patchdiff::console::app::complete_line(&line, None);
    assert_eq!(line, format!("agent {base}/plans/wrong.plan.jsonl "));
    // Host names are still offered next to files.
    assert!(patchdiff::console::app::candidates("agent cl").contains(&"claude".to_owned()));
}

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
pub(crate) fn live_app(color: bool) -> App {
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
            status: (i == 0).then_some(patchdiff::evaluate::Status::Pass),
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
        infra_abort: None,
        sealed: false,
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
    app.panes.evidence = EvidenceView::new(vec![(
        "observed requests/results".into(),
        dir.join("observed.mcp.jsonl"),
    )]);
    app.panes.evidence.rows = 12;
    app.panes.evidence.reload();
    app
}

pub(crate) fn render(app: &App, w: u16, h: u16) -> Buffer {
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

pub(crate) fn text(buf: &Buffer) -> String {
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
    assert!(t.contains("up 01:02"), "{t}");
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
    let t = text(&render_pane(&app, Pane::Processes, 120, 5));
    let row = t
        .lines()
        .find(|l| l.contains("claude"))
        .expect("a host row");
    assert!(row.contains("pid 7020"), "{row}");
    assert!(row.contains("up 00:43"), "{row}");
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
    assert!(t.lines().nth(4).unwrap().starts_with("│▶ incidents"), "{t}");
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

/// Issue 21: behaviour decides, and the TARGETS pane says whether the bytes are the
/// reference's; a failing target names its first failing check.
#[test]
fn targets_pane_shows_identity_beside_a_pass_and_names_a_failing_check() {
    let mut app = live_app(true);
    if let Some(c) = app.canary.as_mut() {
        let chess = c.targets.iter_mut().find(|t| t.name == "chess").unwrap();
        chess.full_byte = Some(false);
        chess.behavioral = Some(true);
        chess.status = Some(patchdiff::evaluate::Status::Pass);
        let limiter = c.targets.iter_mut().find(|t| t.name == "limiter").unwrap();
        limiter.full_byte = Some(false);
        limiter.behavioral = Some(false);
        limiter.status = Some(patchdiff::evaluate::Status::Fail);
        limiter.failing_checks = vec!["partial_refill_is_capped".into(), "keyed".into()];
    }
    let t = text(&render_pane(&app, Pane::Targets, 100, 9));
    let row = |name: &str| t.lines().find(|l| l.contains(name)).unwrap().to_owned();
    assert!(row("chess").contains("✔ pass · ≠ reference"), "{t}");
    assert!(row("calendar").contains("✔ pass · identical"), "{t}");
    assert!(
        row("limiter").contains("✖ FAIL partial_refill_is_capped +1"),
        "{t}"
    );
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
    assert_eq!(columns[2], "22", "{admission}");
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
        let usage = spec.usage();
        assert!(t.contains(&usage), "help lacks {usage}: {t}");
    }
    snap!("help_overlay", t);
}

#[test]
fn bottom_bar_shows_only_the_focused_panes_keys() {
    let mut app = live_app(true);
    let bar = |app: &App| {
        text(&render(app, 200, 60))
            .lines()
            .last()
            .unwrap_or("")
            .to_owned()
    };
    // PROCESSES focused: its keys, none of the evidence pane's nor the command table's (`n`
    // is "next match" there and `inspect` in the command table: the bar never shows both).
    let last = bar(&app);
    assert!(
        last.contains("K kill…") && last.contains("R restart"),
        "{last}"
    );
    assert!(
        !last.contains("next/prev match") && !last.contains("inspect"),
        "{last}"
    );
    assert!(last.contains("? help, all keys"), "{last}");
    for pane in Pane::ALL {
        app.focus = pane;
        let last = bar(&app);
        for other in Pane::ALL.iter().filter(|p| **p != pane) {
            for (k, what) in other.keys() {
                if !pane.keys().iter().any(|(_, w)| *w == what) {
                    assert!(!last.contains(&format!("{k} {what}")), "{pane:?}: {last}");
                }
            }
        }
        for (k, what) in pane.keys() {
            assert!(last.contains(&format!("{k} {what}")), "{pane:?}: {last}");
        }
    }
    // Every command key is still in help.
    let help: String = ui::help_lines().iter().map(|l| format!("{l}\n")).collect();
    for spec in COMMANDS.iter().filter(|s| s.key.is_some()) {
        assert!(help.contains(spec.name), "{help}");
    }
}

#[test]
fn q_during_a_running_step_asks_first_and_only_y_quits() {
    let mut app = live_app(false);
    app.on_runner(RunnerEvent::Started("agent".into()));
    app.on_key(key(KeyCode::Char('q')));
    assert!(!app.quit, "q must not quit at once while a step runs");
    let screen = text(&render(&app, 120, 30));
    assert!(
        screen.contains("`agent` is running: quitting stops it and every child process and seals nothing. Quit? y/N"),
        "{screen}"
    );
    app.on_key(key(KeyCode::Char('n')));
    assert!(!app.quit);
    assert!(app.statuses.iter().any(|s| s.text == "cancelled"));
    app.on_key(key(KeyCode::Char('q')));
    app.on_key(key(KeyCode::Char('y')));
    assert!(app.quit);
    // Ctrl-C asks too; a second Ctrl-C answers it.
    let mut app = live_app(false);
    app.on_runner(RunnerEvent::Started("agent".into()));
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    app.on_key(ctrl_c);
    assert!(!app.quit && matches!(app.input, Input::Confirm { .. }));
    app.on_key(ctrl_c);
    assert!(app.quit);
}

#[test]
fn the_report_key_asks_before_sealing() {
    let mut app = live_app(false);
    assert_eq!(
        app.on_key(key(KeyCode::Char('r'))),
        None,
        "r must not seal at once"
    );
    let screen = text(&render(&app, 200, 60));
    assert!(screen.contains("report seals the run"), "{screen}");
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.queued, 0);
    app.on_key(key(KeyCode::Char('r')));
    assert_eq!(app.on_key(key(KeyCode::Char('y'))), Some(Command::Report));
    // Typed in full on the command line it is deliberate: no question.
    type_str(&mut app, ":report");
    assert_eq!(app.on_key(key(KeyCode::Enter)), Some(Command::Report));
}

#[test]
fn the_selected_row_has_a_marker_that_survives_no_color() {
    let mut app = live_app(false);
    for (pane, needle) in [
        (Pane::Processes, "full"),
        (Pane::Targets, "calendar"),
        (Pane::Perf, ""),
    ] {
        app.focus = pane;
        let t = text(&render_pane(&app, pane, 110, 14));
        let marked: Vec<&str> = t.lines().filter(|l| l.contains("│▶ ")).collect();
        assert_eq!(marked.len(), 1, "{pane:?}: {t}");
        assert!(marked[0].contains(needle), "{pane:?}: {t}");
        app.focus = Pane::Worker;
        let t = text(&render_pane(&app, pane, 110, 14));
        assert!(!t.contains('▶'), "an unfocused pane marks no row: {t}");
    }
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

#[test]
fn phase_gauges_fill_with_the_time_spent_against_the_ceiling_without_colour_too() {
    let mut app = live_app(false);
    // The active discovery started at LAST_EVENT_MS; its ceiling is 15 s (W6). At 12 s (80 %)
    // a 12-cell gauge has 9 whole cells filled; at the ceiling all 12.
    app.now_ms = LAST_EVENT_MS + 12_000.0;
    let t = text(&render_pane(&app, Pane::Worker, 110, 11));
    let row = t.lines().find(|l| l.contains("active     ▶")).unwrap();
    assert_eq!(row.matches('━').count(), 9, "{row}");
    assert_eq!(row.matches('─').count(), 3, "{row}");
    app.now_ms = LAST_EVENT_MS + 15_500.0;
    let t = text(&render_pane(&app, Pane::Worker, 110, 11));
    let row = t.lines().find(|l| l.contains("active     ▶")).unwrap();
    assert_eq!(row.matches('━').count(), 12, "{row}");
}

#[test]
fn a_tall_worker_pane_charts_rss_over_time_against_the_limits() {
    let app = live_app(true);
    // Nine text rows fit in 11; below 17 there is no room for the chart.
    let short = text(&render_pane(&app, Pane::Worker, 110, 16));
    assert!(!short.contains("0 MiB"), "{short}");
    let tall = text(&render_pane(&app, Pane::Worker, 110, 20));
    let chart: Vec<&str> = tall
        .lines()
        .skip_while(|l| !l.contains("retired"))
        .skip(1)
        .collect();
    assert!(
        chart[0].contains("1024 MiB"),
        "the 1 GiB limit on top: {tall}"
    );
    assert!(chart.iter().any(|l| l.contains("│0 MiB")), "{tall}");
    // Two lines in braille: the 768 MiB old-space flag near the top, RSS (74 MiB) near 0.
    let braille = |l: &str| l.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c));
    let drawn: Vec<usize> = (0..chart.len()).filter(|i| braille(chart[*i])).collect();
    assert_eq!(drawn.len(), 2, "{tall}");
    assert!(drawn[0] <= 2 && chart[drawn[1]].contains("0 MiB"), "{tall}");
    snap!("pane_worker_tall", tall);
    // Its widgets fit any size the pane may get, down to nothing inside the border.
    for w in [1, 2, 3, 12, 30, 59, 70, 110, 300] {
        for h in 1..=24 {
            let buf = render_pane(&app, Pane::Worker, w, h);
            assert_eq!(buf.area, Rect::new(0, 0, w, h));
        }
    }
    // A 200×70 screen gives the worker pane that room; 200×60 does not.
    let rows = |h| {
        ui::layout(Rect::new(0, 0, 200, h), Pane::Processes)
            .panes
            .iter()
            .find(|(p, _)| *p == Pane::Worker)
            .map(|(_, r)| r.height)
    };
    assert_eq!(rows(60), Some(11));
    assert_eq!(rows(70), Some(19));
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
    assert!(!app.panes.evidence.follow, "moving up leaves follow mode");
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
        app.panes.evidence.status.contains("match 1 of"),
        "{}",
        app.panes.evidence.status
    );
    assert!(app.panes.evidence.lines[0].text.contains("patchdiff_save"));
    // `n` moves to the next match; the status counts it.
    let n = app.panes.evidence.matches.len();
    app.on_key(key(KeyCode::Char('n')));
    assert!(
        app.panes
            .evidence
            .status
            .contains(&format!("match {} of {n}", 2.min(n))),
        "{}",
        app.panes.evidence.status
    );
    assert!(app.panes.evidence.lines[0].text.contains("patchdiff_save"));
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
    app.procs.usage.insert(
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
        action: patchdiff::console::app::Confirmed::Kill { group, .. },
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
    // In the fixture only calendar has passed.
    assert!(
        header(&app).contains("FAILED 1/5 (chess, incidents, worker-logs, limiter)"),
        "{}",
        header(&app)
    );
    for t in &mut snapshot.targets {
        t.full_byte = Some(true);
        t.behavioral = Some(true);
        t.status = Some(patchdiff::evaluate::Status::Pass);
    }
    snapshot.steps.last_mut().unwrap().ok = true;
    app.on_runner(RunnerEvent::Snapshot(Box::new(snapshot.clone())));
    assert!(header(&app).contains("PASSED 5/5"), "{}", header(&app));
    // Issue 21 item 3: a run that stopped before the agent acted says so, with no count.
    snapshot.steps.last_mut().unwrap().ok = false;
    snapshot.infra_abort = Some("provider refused the first model request".into());
    app.on_runner(RunnerEvent::Snapshot(Box::new(snapshot)));
    let line = header(&app);
    assert!(line.contains("INFRA_ABORT"), "{line}");
    assert!(
        !line.contains("FAILED") && !line.contains("PASSED"),
        "{line}"
    );
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
    app.panes.perf.cursor = index;
    app.on_key(key(KeyCode::Char('x')));
    let t = text(&render_pane(&app, Pane::Perf, 110, 40));
    let tail: Vec<&str> = t.lines().skip_while(|l| !l.contains("live tail")).collect();
    assert!(tail[0].contains("(hidden: worker_rss)"), "{t}");
    assert!(!tail[1..].iter().any(|l| l.contains("worker_rss")), "{t}");
    app.on_key(key(KeyCode::Char('x')));
    assert!(app.panes.perf.hidden.is_empty());
}

#[test]
fn after_the_worker_exits_the_rss_line_says_it_is_gone() {
    let mut app = live_app(false);
    let t = text(&render_pane(&app, Pane::Worker, 110, 11));
    assert!(!t.contains("worker gone"), "{t}");
    let pid = app.monitor.worker.pid.expect("the fixture's worker");
    app.procs.state.insert(pid, "gone".into());
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
    assert!(
        row.contains("○ worker ") && row.contains(" not started "),
        "{row}"
    );
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

// ---- issue 13, second pass: snapshots of the new views and the attach rules ----

/// Writes a past run directory the way a run leaves it: manifest, JSON report and perf events
/// with `phase_active` spans of `phases` ms.
pub(crate) fn past_run(
    root: &Path,
    id: &str,
    started_ms: f64,
    verdicts: &[(&str, &str)],
    phases: &[f64],
) {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::json!({"run_id": id, "started_ms": started_ms,
            "agent": {"model": "scripted-wrong"}})
        .to_string(),
    )
    .unwrap();
    let targets: Vec<serde_json::Value> = verdicts
        .iter()
        .map(|(n, s)| serde_json::json!({"name": n, "status": s, "evaluated": true}))
        .collect();
    let passed = verdicts.iter().all(|(_, s)| *s == "pass");
    std::fs::write(
        dir.join("report.json"),
        serde_json::json!({"passed": passed, "targets": targets}).to_string(),
    )
    .unwrap();
    let events: Vec<String> = phases
        .iter()
        .enumerate()
        .map(|(i, d)| {
            format!(
                r#"{{"name":"phase_active","start_ms":{},"duration_ms":{d},"outcome":"ok","ids":{{}},"nested":false,"attrs":{{"ceiling_ms":15000}},"pid":7010}}"#,
                started_ms + i as f64
            )
        })
        .collect();
    std::fs::write(dir.join("observed.perf.jsonl"), events.join("\n")).unwrap();
}

/// Two past runs: A fails chess, B passes it and limiter's check breaks (infra_error), with
/// slower phases.
pub(crate) fn two_past_runs() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let five = |chess: &'static str, limiter: &'static str| {
        vec![
            ("calendar", "pass"),
            ("chess", chess),
            ("incidents", "pass"),
            ("worker-logs", "pass"),
            ("limiter", limiter),
        ]
    };
    past_run(
        root.path(),
        "r-20261129-121500-1111",
        1_796_040_900_000.0,
        &five("fail", "pass"),
        &[12.5, 20.0, 31.0],
    );
    past_run(
        root.path(),
        "r-20261129-133000-2222",
        1_796_045_400_000.0,
        &five("pass", "infra_error"),
        &[14.0, 26.5, 95.0],
    );
    root
}

/// The console with a command's text output in its overlay, as the runner delivers it.
fn with_output(command: &str, output: String) -> App {
    let mut app = live_app(false);
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: command.into(),
            ok: true,
            summary: format!("{} lines", output.lines().count()),
            elapsed_ms: 1,
        },
        output: Some(output),
    });
    app
}

macro_rules! snap_runs {
    ($root:expr, $name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            // Only the temporary runs directory varies: pids and the clock come from the
            // recorded fixture (issue 16 item 4).
            (regex_lite_escape($root).as_str(), "[runs]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

/// `s` as a regular expression matching itself.
pub(crate) fn regex_lite_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '-' || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn run_browser_lists_past_runs_newest_first_at_200x60_and_80x24() {
    let root = two_past_runs();
    let list = patchdiff::canary::runs::render_list(
        root.path(),
        &patchdiff::canary::runs::list_runs(root.path()),
    );
    let app = with_output("runs", list);
    let screen = text(&render(&app, 200, 60));
    let newest = screen.find("r-20261129-133000-2222").unwrap();
    let older = screen.find("r-20261129-121500-1111").unwrap();
    assert!(newest < older, "newest first:\n{screen}");
    assert!(screen.contains("2026-11-30 12:15"), "{screen}");
    assert!(screen.contains("chess FAIL"), "{screen}");
    let root_text = root.path().display().to_string();
    snap_runs!(&root_text, "run_browser_200x60", screen);
    snap_runs!(&root_text, "run_browser_80x24", text(&render(&app, 80, 24)));
}

#[test]
fn run_comparison_shows_verdict_changes_and_phase_deltas_at_200x60_and_80x24() {
    let root = two_past_runs();
    let compared = patchdiff::canary::runs::compare(
        &root.path().join("r-20261129-121500-1111"),
        &root.path().join("r-20261129-133000-2222"),
    )
    .unwrap();
    let app = with_output("runs", compared);
    let screen = text(&render(&app, 200, 60));
    let row = |name: &str| {
        screen
            .lines()
            .find(|l| l.contains(&format!("│{name} ")) || l.contains(&format!("│ {name} ")))
            .unwrap_or_else(|| panic!("no {name} row:\n{screen}"))
            .to_owned()
    };
    // Issue 21 item 4: one run each decides nothing, and a broken check is not a regression.
    assert!(row("chess").contains("changed (1 run each"), "{screen}");
    assert!(
        row("limiter").contains("infra_error (the check"),
        "{screen}"
    );
    assert!(!screen.contains("REGRESSED"), "{screen}");
    // p50 20.00 → 26.50 (+6.50); p95 31.00 → 95.00 (+64.00), nearest rank over three spans.
    let phase = row("phase_active");
    assert!(
        phase.contains("+6.50") && phase.contains("+64.00"),
        "{phase}"
    );
    let root_text = root.path().display().to_string();
    snap_runs!(&root_text, "run_compare_200x60", screen);
    snap_runs!(&root_text, "run_compare_80x24", text(&render(&app, 80, 24)));
}

#[test]
fn hidden_pane_hint_at_80x24_and_none_at_200x60() {
    let mut app = live_app(false);
    // Focus on a pane 80×24 would otherwise drop: it is laid out, others are counted.
    app.focus = Pane::Evidence;
    app.size = (80, 24);
    let small = text(&render(&app, 80, 24));
    let header = small.lines().next().unwrap();
    let shown = ui::layout(Rect::new(0, 0, 80, 24), app.focus).panes.len();
    assert!(
        header.contains(&format!("+{} panes: Tab", Pane::ALL.len() - shown)),
        "{header}"
    );
    assert!(small.contains("▸ EVIDENCE"), "{small}");
    snap!("hidden_pane_hint_80x24", small);
    app.size = (200, 60);
    let large = text(&render(&app, 200, 60));
    assert!(!large.lines().next().unwrap().contains("panes: Tab"));
    snap!("hidden_pane_hint_200x60", large);
}

#[test]
fn kill_confirmation_prompt_at_200x60_and_80x24() {
    let mut app = live_app(false);
    app.focus = Pane::Processes;
    app.on_key(key(KeyCode::Down)); // observed
    assert_eq!(app.on_key(key(KeyCode::Char('K'))), None);
    for (w, h, name) in [
        (200, 60, "process_kill_confirm_200x60"),
        (80, 24, "process_kill_confirm_80x24"),
    ] {
        app.size = (w, h);
        let screen = text(&render(&app, w, h));
        assert!(
            screen.contains("kill observed (pid 7010) with SIGKILL? y/N"),
            "{screen}"
        );
        snap!(name, screen);
    }
}

#[test]
fn at_40x12_the_targets_pane_scrolls_so_j_and_k_reach_every_target() {
    let mut app = live_app(false);
    app.size = (40, 12);
    app.focus = Pane::Targets;
    let names = ["calendar", "chess", "incidents", "worker-logs", "limiter"];
    let selected_row = |app: &App| {
        let screen = text(&render(app, 40, 12));
        let shown: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| {
                screen.lines().any(|l| {
                    l.starts_with(&format!("│  {n} ")) || l.starts_with(&format!("│▶ {n} "))
                })
            })
            .collect();
        (shown.len(), screen)
    };
    let (shown, screen) = selected_row(&app);
    assert!(shown < names.len(), "40×12 cannot show all five:\n{screen}");
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            app.on_key(key(KeyCode::Char('j')));
        }
        assert_eq!(app.panes.targets.cursor, i);
        let (_, screen) = selected_row(&app);
        assert!(
            screen
                .lines()
                .any(|l| l.starts_with(&format!("│  {name} "))
                    || l.starts_with(&format!("│▶ {name} "))),
            "{name} not on screen with the cursor on it:\n{screen}"
        );
        if i == names.len() - 1 {
            snap!("targets_scrolled_40x12", screen);
        }
    }
    for _ in 0..names.len() {
        app.on_key(key(KeyCode::Char('k')));
    }
    let (_, screen) = selected_row(&app);
    assert!(screen.contains("│▶ calendar "), "{screen}");
}

#[test]
fn attaching_is_refused_while_the_canary_is_live_and_steps_are_refused_while_attached() {
    let mut app = live_app(false);
    let why = app.attach_refusal().expect("full and observed are running");
    assert!(
        why.contains("is live (full pid 7001, observed pid 7010)") && why.contains("`stop`"),
        "{why}"
    );
    // Stopped processes: the screen may switch wholly to the attached run.
    for p in &mut app.canary.as_mut().unwrap().processes {
        p.pid = None;
    }
    assert_eq!(app.attach_refusal(), None);
    app.attached = Some(patchdiff::console::app::Attached {
        events: "/runs/r-1/observed.perf.jsonl".into(),
        database: None,
    });
    let why = app.read_only_refusal(&Command::Export).unwrap();
    assert!(
        why.contains("`export` refused") && why.contains("read-only"),
        "{why}"
    );
    assert_eq!(
        app.read_only_refusal(&Command::parse("runs").unwrap()),
        None
    );
}

#[test]
fn an_attached_screen_shows_none_of_the_canarys_processes_or_targets() {
    let mut app = live_app(false);
    app.attached = Some(patchdiff::console::app::Attached {
        events: "/runs/r-1/observed.perf.jsonl".into(),
        database: None,
    });
    let processes = text(&render_pane(&app, Pane::Processes, 90, 6));
    assert!(!processes.contains("full "), "{processes}");
    assert!(!processes.contains("pid 7010   up"), "{processes}");
    assert!(processes.contains("attached"), "{processes}");
    let targets = text(&render_pane(&app, Pane::Targets, 90, 9));
    assert!(!targets.contains("calendar"), "{targets}");
    assert!(app.target_names().is_empty());
}

#[test]
fn a_clean_exit_of_the_attached_server_is_not_shown_as_a_failure() {
    let line = |name: &str, outcome: &str, attrs: &str| {
        format!(
            r#"{{"name":"{name}","start_ms":{LAST_EVENT_MS},"duration_ms":0.0,"outcome":"{outcome}","ids":{{"generation":1}},"nested":false,"attrs":{attrs},"pid":7310}}"#
        )
    };
    let attached = |retired: String| {
        let mut app = App::new(false, LAST_EVENT_MS + 1_000.0);
        app.attached = Some(patchdiff::console::app::Attached {
            events: "/runs/r-1/host-observed.perf.jsonl".into(),
            database: None,
        });
        app.monitor.ingest_line(
            "observed",
            &line("worker_launch", "ok", r#"{"pid":7311,"mode":"resident"}"#),
        );
        app.monitor.ingest_line("observed", &retired);
        app.procs.state.insert(7310, "gone".into());
        text(&render_pane(&app, Pane::Processes, 90, 5))
    };
    let clean = attached(line("worker_retired", "ok", r#"{"reason":"shutdown"}"#));
    let row = clean.lines().find(|l| l.contains("observed")).unwrap();
    assert!(
        row.contains("○ observed") && row.contains("exited (clean shutdown)"),
        "{row}"
    );
    assert!(!clean.contains('✖'), "{clean}");
    // A worker that died under it is a failure, and the process exit is shown as one.
    let crashed = attached(line(
        "worker_retired",
        "failed",
        r#"{"reason":"pipe_failed"}"#,
    ));
    let row = crashed.lines().find(|l| l.contains("observed")).unwrap();
    assert!(
        row.contains("✖ observed") && row.contains("exited"),
        "{row}"
    );
}

#[tokio::test]
async fn attach_opens_the_attached_servers_own_wire_log() {
    let run = tempfile::tempdir().unwrap();
    let events = run.path().join("host-observed.perf.jsonl");
    std::fs::write(&events, "").unwrap();
    // The canary's own observed process logged beside it: never shown for the host's process.
    std::fs::write(run.path().join("observed.mcp.jsonl"), "").unwrap();
    std::fs::write(run.path().join("host-observed.mcp.jsonl"), "").unwrap();
    let mut app = App::new(false, LAST_EVENT_MS);
    let (tx, _rx) = tokio::sync::mpsc::channel(8);
    let mut sources = patchdiff::console::Sources::default();
    patchdiff::console::attach(&mut app, &mut sources, &tx, &events, None, None);
    let labels: Vec<&str> = app
        .panes
        .evidence
        .sources
        .iter()
        .map(|(l, _)| l.as_str())
        .collect();
    assert_eq!(
        labels,
        ["host-observed requests/results", "perf events"],
        "{:?}",
        app.panes.evidence.sources
    );
    assert_eq!(
        app.panes.evidence.sources[0].1,
        run.path().join("host-observed.mcp.jsonl")
    );
}

#[test]
fn the_high_triangle_means_past_75_percent_only_not_a_starting_process() {
    let mut app = App::new(false, LAST_EVENT_MS + 500.0);
    app.monitor.ingest_line(
        "observed",
        &format!(
            r#"{{"name":"worker_launch","start_ms":{LAST_EVENT_MS},"duration_ms":0.0,"outcome":"ok","ids":{{"generation":1}},"nested":false,"attrs":{{"pid":7311,"mode":"resident"}},"pid":7310}}"#
        ),
    );
    let t = text(&render_pane(&app, Pane::Processes, 90, 5));
    let row = t.lines().find(|l| l.contains("worker")).unwrap();
    assert!(
        row.contains("◐ worker") && row.contains("starting"),
        "{row}"
    );
    assert!(!t.contains('▲'), "{t}");
    // The help legend gives each symbol one meaning.
    let help: Vec<String> = ui::help_lines().iter().map(|l| l.to_string()).collect();
    assert!(help.iter().any(|l| l.contains("▲ high (≥ 75 %)")));
    assert!(
        help.iter()
            .any(|l| l.starts_with("Processes:") && l.contains("◐ starting") && !l.contains('▲'))
    );
}

#[test]
fn relaunched_process_retirements_carry_their_pid_on_the_worker_pane() {
    let mut app = App::new(false, LAST_EVENT_MS + 500.0);
    for pid in [7310, 7320] {
        app.monitor.ingest_line(
            "observed",
            &format!(
                r#"{{"name":"worker_retired","start_ms":{LAST_EVENT_MS},"duration_ms":0.0,"outcome":"ok","ids":{{"generation":1}},"nested":false,"attrs":{{"reason":"shutdown","requests":3}},"pid":{pid}}}"#
            ),
        );
    }
    let t = text(&render_pane(&app, Pane::Worker, 120, 11));
    let row = t.lines().find(|l| l.contains("retired")).unwrap();
    assert!(
        row.contains(
            "retired gen 1 shutdown (3 req) of mcp pid 7320 · gen 1 shutdown (3 req) of mcp pid 7310"
        ),
        "{row}"
    );
}

/// Samples the process table until `done` holds (the processes start and end asynchronously),
/// failing after 10 s.
fn sample_until(app: &mut App, done: impl Fn(&App) -> bool) {
    let mut sampler = patchdiff::console::event_loop::ProcSampler::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        sampler.sample(app);
        if done(app) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            app.process_rows()
        );
        std::thread::yield_now();
    }
}

/// The parent pid `/proc/<pid>/stat` gives (its fourth field, after the parenthesised name).
fn proc_parent(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn processes_lists_every_process_of_the_hosts_tree_with_real_pids_and_parents() {
    // A real process tree stands in for an agent host: it starts two children, as a host starts
    // the observed process (which starts its worker).
    let mut host = std::process::Command::new("sh")
        .args(["-c", "sleep 300 & sleep 300 & wait"])
        .spawn()
        .unwrap();
    let host_pid = host.id();
    let mut app = live_app(false);
    app.on_runner(RunnerEvent::Host(Box::new(HostProgress {
        host: "claude".into(),
        pid: Some(host_pid),
        started_ms: LAST_EVENT_MS,
        state: "running".into(),
        ..HostProgress::default()
    })));
    // Until both children have exec'd `sleep` (a child sampled between its fork and its exec is
    // still named `sh`).
    sample_until(&mut app, |a| {
        a.process_rows()
            .iter()
            .filter(|r| r.parent == Some(host_pid) && r.label == "sleep")
            .count()
            == 2
    });
    let children: Vec<u32> = app
        .process_rows()
        .iter()
        .filter(|r| r.parent == Some(host_pid))
        .map(|r| {
            assert_eq!(r.label, "sleep", "{r:?}");
            r.pid.unwrap()
        })
        .collect();
    for pid in &children {
        assert_eq!(
            proc_parent(*pid),
            host_pid,
            "the row's parent is the real one"
        );
    }
    // Every row is on screen in a pane that grew for them, and the cursor reaches the last.
    app.focus = Pane::Processes;
    let rows = app.process_rows().len();
    for _ in 0..rows + 2 {
        app.on_key(key(KeyCode::Down));
    }
    let screen = text(&render(&app, 200, 60));
    for pid in &children {
        let row = screen
            .lines()
            .find(|l| l.contains(&format!("pid {pid} ")))
            .unwrap_or_else(|| panic!("no row for {pid}:\n{screen}"));
        assert!(
            row.contains(&format!("parent {host_pid}")) && row.contains("running"),
            "{row}"
        );
    }
    let marked: Vec<&str> = screen.lines().filter(|l| l.contains("│▶ ")).collect();
    assert_eq!(marked.len(), 1, "{screen}");
    assert!(
        marked[0].contains(&format!("pid {}", children[1])),
        "the cursor rests on the last row, which is shown:\n{screen}"
    );
    // K names the row it would kill.
    app.on_key(key(KeyCode::Char('K')));
    let Input::Confirm { question, .. } = &app.input else {
        panic!("no question")
    };
    assert!(
        question.contains(&format!("kill sleep (pid {})", children[1])),
        "{question}"
    );
    app.on_key(key(KeyCode::Char('n')));
    // A child killed is shown exited, with its uptime frozen.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(children[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    sample_until(&mut app, |a| a.procs.gone(u64::from(children[0])));
    let screen = text(&render(&app, 200, 60));
    let row = screen
        .lines()
        .find(|l| l.contains(&format!("pid {} ", children[0])))
        .unwrap();
    assert!(row.contains("ran") && row.contains("exited"), "{row}");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(children[1] as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    host.kill().unwrap();
    host.wait().unwrap();
}

#[test]
fn a_worker_whose_pid_left_the_process_table_is_shown_gone() {
    // A real process plays the worker generation the events announced; a SIGKILL writes no
    // retirement, so only the process table can say it is gone.
    let mut worker = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = worker.id();
    let mut app = App::new(false, LAST_EVENT_MS + 500.0);
    for line in [
        format!(
            r#"{{"name":"worker_launch","start_ms":{LAST_EVENT_MS},"duration_ms":0.0,"outcome":"ok","ids":{{"generation":1}},"attrs":{{"pid":{pid},"mode":"resident"}},"pid":4242}}"#
        ),
        format!(
            r#"{{"name":"worker_ready","start_ms":{LAST_EVENT_MS},"duration_ms":300.0,"outcome":"ok","ids":{{"generation":1}},"attrs":{{"pid":{pid}}},"pid":4242}}"#
        ),
    ] {
        app.monitor.ingest_line("observed", &line);
    }
    sample_until(&mut app, |a| a.procs.state.contains_key(&u64::from(pid)));
    let t = text(&render_pane(&app, Pane::Worker, 120, 11));
    assert!(
        t.contains(&format!("gen 1 · worker pid {pid} · ready")),
        "{t}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    sample_until(&mut app, |a| a.procs.gone(u64::from(pid)));
    let t = text(&render_pane(&app, Pane::Worker, 160, 11));
    let first = t.lines().nth(1).unwrap();
    assert!(
        first.contains(&format!(
            "worker pid {pid} · gone (signal 9, no retirement recorded)"
        )) && first.contains("--:--"),
        "{t}"
    );
    worker.wait().unwrap();
}

#[test]
fn perf_figures_are_per_process_say_a_relaunch_restarted_them_and_fold_repeated_gauges() {
    let mut app = App::new(false, LAST_EVENT_MS + 10_000.0);
    let call = |pid: u32, ms: f64, at: f64| {
        format!(
            r#"{{"name":"mcp_call","start_ms":{at},"duration_ms":{ms},"outcome":"ok","ids":{{}},"attrs":{{}},"pid":{pid}}}"#
        )
    };
    let at = |i: u32| LAST_EVENT_MS + f64::from(i);
    // The observed process's three slow calls, then the full process's trivial ones: never
    // one p50 over both.
    for i in 0..3 {
        app.monitor.ingest_line("observed", &call(7010, 7.0, at(i)));
    }
    for i in 3..5 {
        app.monitor.ingest_line("full", &call(7001, 0.5, at(i)));
    }
    // A relaunch: process 7020 takes the observed events over.
    app.monitor.ingest_line("observed", &call(7020, 9.0, at(5)));
    for i in 6..43 {
        app.monitor.ingest_line(
            "observed",
            &format!(
                r#"{{"name":"worker_rss","start_ms":{},"duration_ms":0.0,"outcome":"ok","ids":{{"generation":1}},"attrs":{{"rss_bytes":{}}},"pid":7020}}"#,
                at(i),
                64 * 1024 * 1024
            ),
        );
    }
    app.monitor.refresh();
    let t = text(&render_pane(&app, Pane::Perf, 120, 30));
    let row = |source: &str, name: &str| {
        t.lines()
            .find(|l| l.contains(&format!(" {source} ")) && l.contains(name))
            .unwrap_or_else(|| panic!("no {source} {name} row:\n{t}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        row("observed", "mcp_call").starts_with("observed mcp_call 1 4 9 ms"),
        "{t}"
    );
    assert!(
        row("full", "mcp_call").starts_with("full mcp_call 2 2 0.50 ms"),
        "{t}"
    );
    assert!(
        t.contains("relaunched: observed ×1 — count is the current process's, total the run's"),
        "{t}"
    );
    let tail: Vec<&str> = t.lines().skip_while(|l| !l.contains("live tail")).collect();
    let gauges: Vec<&&str> = tail.iter().filter(|l| l.contains("worker_rss")).collect();
    assert_eq!(
        gauges.len(),
        1,
        "37 samples in a row fold into one line:\n{t}"
    );
    assert!(
        gauges[0].contains("worker_rss ×37") && gauges[0].contains("64.0 MiB"),
        "a gauge shows its value, not a duration: {t}"
    );
    assert!(!gauges[0].contains(" ms"), "{t}");
}

#[test]
fn after_a_killed_host_step_the_header_says_what_happened() {
    let mut app = live_app(false);
    let mut snapshot = app.canary.clone().unwrap();
    for t in &mut snapshot.targets {
        t.status = Some(patchdiff::evaluate::Status::Pass);
    }
    snapshot.steps = vec![
        StepOutcome {
            command: "agent".into(),
            ok: false,
            summary: "claude exited: signal 9 (SIGKILL) after 12 turns (A4)".into(),
            elapsed_ms: 10,
        },
        StepOutcome {
            command: "report".into(),
            ok: false,
            summary: "a step failed".into(),
            elapsed_ms: 10,
        },
    ];
    app.on_runner(RunnerEvent::Snapshot(Box::new(snapshot)));
    let header = text(&render(&app, 200, 60))
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert!(
        header.contains("FAILED: `agent` failed: claude exited: signal 9 (SIGKILL) after 12 turns · 5/5 targets pass"),
        "{header}"
    );
    assert!(
        !header.contains("(A4)") && !header.contains("a step failed"),
        "{header}"
    );
}

#[test]
fn the_story_overlay_names_its_target() {
    let mut app = live_app(false);
    app.focus = Pane::Targets;
    app.on_key(key(KeyCode::Down));
    assert_eq!(
        app.on_key(key(KeyCode::Enter)),
        Some(Command::Target {
            name: "chess".into()
        })
    );
    app.on_runner(RunnerEvent::Started("target".into()));
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "target".into(),
            ok: true,
            summary: "story".into(),
            elapsed_ms: 1,
        },
        output: Some("verdicts\n…".into()),
    });
    let Overlay::Text { title, .. } = &app.overlay else {
        panic!("no story")
    };
    assert_eq!(title, "story of chess");
}

#[test]
fn refusals_and_help_speak_words_not_requirement_ids() {
    let mut app = live_app(false);
    app.push_status(
        false,
        "an agent host already ran in this run; a run is one canary (C7)",
    );
    let screen = text(&render(&app, 200, 60));
    assert!(screen.contains("a run is one canary"), "{screen}");
    let ids = |s: &str| {
        s.split(['(', ')']).any(|part| {
            part.len() <= 3
                && part.starts_with(|c: char| c.is_ascii_uppercase())
                && part[1..].chars().all(|c| c.is_ascii_digit())
                && part.len() > 1
        })
    };
    assert!(!ids(&screen), "{screen}");
    let help: String = ui::help_lines().iter().map(|l| format!("{l}\n")).collect();
    assert!(!ids(&help), "{help}");
    assert!(!help.contains("gate 2"), "{help}");
}

/// A live canary whose agent host runs with the observed process it started and that
/// process's worker, every process sampled (long labels, a four-digit RSS, a full core).
fn host_run_app() -> App {
    use patchdiff::console::procs::{ProcInfo, ProcUsage};
    let mut app = live_app(false);
    let mut tool_calls = std::collections::BTreeMap::new();
    tool_calls.insert("patchdiff_observe_scope".to_owned(), 4);
    app.on_runner(RunnerEvent::Host(Box::new(HostProgress {
        host: "claude".into(),
        pid: Some(7020),
        started_ms: LAST_EVENT_MS - 42_000.0,
        turns: 7,
        tool_calls,
        last_tool: Some("patchdiff_observe_scope".into()),
        state: "running".into(),
    })));
    app.monitor.ingest_line(
        "host",
        &format!(
            r#"{{"name":"worker_launch","start_ms":{LAST_EVENT_MS},"duration_ms":0.0,"outcome":"ok","ids":{{"generation":1}},"nested":false,"attrs":{{"pid":7031,"mode":"resident"}},"pid":7030}}"#
        ),
    );
    for (pid, ppid, comm, rss_mib, cpu) in [
        (7001, 4242, "patchdiff", 61.9, 0.4),
        (7010, 4242, "patchdiff", 64.0, 1.0),
        (7015, 7010, "node", 1234.5, 100.0),
        (7020, 4242, "claude", 312.0, 37.0),
        (7030, 7020, "patchdiff", 58.2, 2.0),
        (7031, 7030, "node", 96.3, 12.0),
    ] {
        app.procs.info.insert(
            pid,
            ProcInfo {
                ppid,
                comm: comm.into(),
                started_ms: Some(LAST_EVENT_MS - 30_000.0),
            },
        );
        app.procs.state.insert(pid, "S".into());
        app.procs.usage.insert(
            pid,
            ProcUsage {
                rss_bytes: (rss_mib * 1024.0 * 1024.0) as u64,
                cpu_percent: cpu,
            },
        );
    }
    app.procs.host_tree = vec![7030, 7031];
    app
}

#[test]
fn processes_rows_keep_pid_parent_uptime_state_rss_and_cpu_on_screen_cutting_the_label() {
    let app = host_run_app();
    let at_80 = text(&render(&app, 80, 24));
    let at_200 = text(&render(&app, 200, 60));
    for (screen, size) in [(&at_80, "80x24"), (&at_200, "200x60")] {
        for (pid, parent, rss, cpu) in [
            (7001, 4242, "61.9 MiB", "0%"),
            (7010, 4242, "64.0 MiB", "1%"),
            (7015, 7010, "1234.5 MiB", "100%"),
            (7020, 4242, "312.0 MiB", "37%"),
            (7030, 7020, "58.2 MiB", "2%"),
            (7031, 7030, "96.3 MiB", "12%"),
        ] {
            let row = screen
                .lines()
                .map(|l| l.split("││").next().unwrap_or(l))
                .find(|l| l.contains(&format!("pid {pid} ")))
                .unwrap_or_else(|| panic!("no row for pid {pid} at {size}:\n{screen}"));
            for cell in [
                format!("parent {parent} "),
                " up ".to_owned(),
                format!("rss {rss:>10} cpu {cpu:>4}"),
            ] {
                assert!(row.contains(&cell), "`{cell}` missing at {size}: {row}");
            }
            // The worker the WORKER pane follows is `starting` (launched, not ready yet).
            assert!(
                [" running ", " ready ", " starting "]
                    .iter()
                    .any(|w| row.contains(w)),
                "no state at {size}: {row}"
            );
        }
    }
    // At 80 columns the long label gives way, cut with an ellipsis; at 200 it is whole.
    assert!(at_80.contains("worker gen…"), "{at_80}");
    assert!(!at_80.contains("(host-observed)"), "{at_80}");
    snap!("processes_columns_80x24", at_80);
    snap!("processes_columns_200x60", at_200);
}

/// The PROCESSES pane's rows on a rendered screen: the lines of its box in the left column.
fn process_pane_rows(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .map(|l| l.split("││").next().unwrap_or(l))
        .skip_while(|l| !l.contains("PROCESSES"))
        .skip(1)
        .take_while(|l| !l.starts_with('└'))
        .collect()
}

/// U1: from 100 to 190 columns PROCESSES is the left column of the two-column screen,
/// narrower than a row with every column: the optional columns give way (CPU, then RSS,
/// parent, uptime) so that no row loses its label, pid or state, and what is shown is whole.
#[test]
fn processes_rows_keep_label_pid_and_state_from_100_to_190_columns() {
    let app = host_run_app();
    for width in 100..=190 {
        let screen = text(&render(&app, width, 40));
        let rows = process_pane_rows(&screen);
        assert_eq!(rows.len(), 6, "at {width}:\n{screen}");
        for (label, pid, state) in [
            ("full", 7001, "running"),
            ("observed", 7010, "running"),
            ("claude", 7020, "running"),
            ("worker gen", 7031, "starting"),
            ("host-obser", 7030, "running"),
            ("worker gen", 7015, "running"),
        ] {
            let row = rows
                .iter()
                .find(|l| l.contains(&format!(" pid {pid} ")))
                .unwrap_or_else(|| panic!("no row for pid {pid} at {width}:\n{screen}"));
            // The label is cut (with `…`) to no fewer than 11 characters.
            assert!(row.contains(label), "label cut at {width}: {row}");
            let words: Vec<&str> = row.split_whitespace().collect();
            assert!(
                words.contains(&state),
                "state `{state}` cut at {width}: {row}"
            );
            // A column shown is shown whole: its name comes with its full value.
            for (name, value) in [
                ("parent", pid_parent(pid).to_string()),
                ("cpu", cpu_of(pid).to_owned()),
            ] {
                if let Some(at) = words.iter().position(|w| *w == name) {
                    assert_eq!(
                        words.get(at + 1),
                        Some(&value.as_str()),
                        "at {width}: {row}"
                    );
                }
            }
        }
    }
    // At the widest of these every column fits again.
    let at_190 = text(&render(&app, 190, 40));
    assert!(
        process_pane_rows(&at_190)
            .iter()
            .all(|r| r.contains(" parent ") && r.contains(" up ") && r.contains(" cpu ")),
        "{at_190}"
    );
    let at_120 = text(&render(&app, 120, 40));
    snap!("processes_columns_120x40", at_120);
}

/// U1: a row longer than its pane is cut with `…`, never mid-word at the pane's edge (at 200
/// columns a worker row once ended `resid`): from 80 to 260 columns, each row's last word is a
/// whole word of the same row on a screen wide enough for all of it, or ends with `…`.
#[test]
fn processes_rows_too_long_for_their_pane_end_with_an_ellipsis() {
    let app = host_run_app();
    let whole = text(&render(&app, 400, 40));
    let whole_rows = process_pane_rows(&whole);
    let pid_of = |row: &str| -> Option<String> {
        let words: Vec<&str> = row.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "pid")?;
        words.get(at + 1).map(|p| (*p).to_owned())
    };
    for width in 80..=260 {
        let screen = text(&render(&app, width, 40));
        for row in process_pane_rows(&screen) {
            let inside = row.trim_start_matches('│').trim_end_matches('│').trim_end();
            let Some(pid) = pid_of(inside) else { continue };
            let last = inside.split_whitespace().last().unwrap();
            if last.ends_with('…') {
                continue;
            }
            let uncut = whole_rows
                .iter()
                .find(|r| pid_of(r).as_deref() == Some(pid.as_str()))
                .unwrap_or_else(|| panic!("no row for pid {pid} at 400 columns:\n{whole}"));
            assert!(
                uncut
                    .split_whitespace()
                    .any(|w| w.trim_end_matches('│') == last),
                "at {width} the row for pid {pid} ends mid-word (`{last}`): {inside}\nwhole: {uncut}"
            );
        }
    }
}

/// [`host_run_app`]'s parent of `pid`.
fn pid_parent(pid: u32) -> u32 {
    match pid {
        7015 => 7010,
        7030 => 7020,
        7031 => 7030,
        _ => 4242,
    }
}

/// [`host_run_app`]'s CPU cell of `pid`.
fn cpu_of(pid: u32) -> &'static str {
    match pid {
        7001 => "0%",
        7010 => "1%",
        7015 => "100%",
        7020 => "37%",
        7030 => "2%",
        _ => "12%",
    }
}

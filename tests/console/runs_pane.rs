//! The RUNS pane (SPEC U2, U4): past runs and a comparison under a runs directory, walked with
//! the keys an operator presses, drawn into `TestBackend` over the live console of the
//! recorded fixture and compared with insta snapshots at 80×24 and 200×60 (only the temporary
//! runs directory is filtered).

use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use patchdiff::console::app::{App, Input, Overlay};
use patchdiff::console::panes::runs::Screen;
use serde_json::json;

use crate::render::{live_app, past_run, regex_lite_escape, render, text, two_past_runs};

macro_rules! snap_runs {
    ($root:expr, $name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (regex_lite_escape($root).as_str(), "[runs]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

fn press(app: &mut App, code: KeyCode) {
    let command = app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
    assert!(
        command.is_none(),
        "the runs pane sends nothing to the canary: {command:?}"
    );
}

fn screen(app: &App) -> String {
    text(&render(app, 200, 60))
}

/// A sealed-shaped gate-2 comparison of 2 + 2 member runs: chess passes in both baseline runs
/// and fails in both candidate runs (REGRESSED), calendar passes everywhere. Each member run
/// holds a report and a copy of the bundled suite, so its stories open.
fn comparison(root: &Path) -> String {
    let id = "cmp-20261130-090000-c0ffee";
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plan.seal"), "plan sealed\n").unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        json!({"runs_per_arm": 2}).to_string(),
    )
    .unwrap();
    let members = [
        (
            "A-01",
            "baseline",
            "r-20261130-090100-a001",
            ["pass", "pass"],
        ),
        (
            "B-01",
            "candidate",
            "r-20261130-090200-b001",
            ["pass", "fail"],
        ),
        (
            "A-02",
            "baseline",
            "r-20261130-090300-a002",
            ["pass", "pass"],
        ),
        (
            "B-02",
            "candidate",
            "r-20261130-090400-b002",
            ["pass", "fail"],
        ),
    ];
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/fixtures");
    let mut runs = Vec::new();
    for (i, (slot, arm, run_id, outcomes)) in members.iter().enumerate() {
        let started = 1_796_029_260_000.0 + 120_000.0 * i as f64;
        runs.push(json!({"slot": slot, "arm": arm, "run_id": run_id,
                         "started_ms": started, "outcomes": outcomes}));
        let run = dir.join("runs").join(slot).join(run_id);
        std::fs::create_dir_all(&run).unwrap();
        let targets: Vec<_> = ["calendar", "chess"]
            .iter()
            .zip(outcomes)
            .map(|(name, o)| {
                json!({"name": name, "status": o, "evaluated": true, "version": 1,
                       "revision": 2, "accepted": 2, "rejected": u64::from(*o == "fail"),
                       "full_byte": *o == "pass", "behavioral": *o == "pass",
                       "require": "full_byte"})
            })
            .collect();
        std::fs::write(
            run.join("manifest.json"),
            json!({"run_id": run_id, "started_ms": started,
                   "agent": {"model": if *arm == "baseline" {"m-base"} else {"m-cand"}}})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            run.join("report.json"),
            json!({"passed": outcomes.iter().all(|o| *o == "pass"), "targets": targets})
                .to_string(),
        )
        .unwrap();
        // Of the suite, a story here needs its manifest and the fixture it tells of.
        let copy = run.join("suite");
        std::fs::create_dir_all(copy.join("chess")).unwrap();
        std::fs::copy(suite.join("manifest.json"), copy.join("manifest.json")).unwrap();
        for f in std::fs::read_dir(suite.join("chess")).unwrap() {
            let f = f.unwrap();
            if f.file_type().unwrap().is_dir() {
                continue;
            }
            std::fs::copy(f.path(), copy.join("chess").join(f.file_name())).unwrap();
        }
    }
    std::fs::write(
        dir.join("report.json"),
        json!({
            "runs_per_arm": 2,
            "verdict": {
                "kind": "REGRESSED",
                "line": "REGRESSED: chess 2/2 → 0/2 (p = 0.1667 ≤ α); a target at 2/2 is flagged only at 0/2",
                "reasons": ["chess: one-sided Fisher rejects at the Tarone-corrected level"],
                "targets": [
                    {"name": "calendar", "regressed": false, "improved": false},
                    {"name": "chess", "regressed": true, "improved": false}
                ]
            },
            "runs": runs,
            "arms": {"baseline": {"agent.model": "m-base"},
                     "candidate": {"agent.model": "m-cand"}}
        })
        .to_string(),
    )
    .unwrap();
    id.to_owned()
}

/// The live console with its runs directory at `root` and the runs pane opened by `u`.
fn opened(root: &Path) -> App {
    let mut app = live_app(false);
    app.panes.runs.root = Some(root.to_owned());
    press(&mut app, KeyCode::Char('u'));
    assert!(app.panes.runs.open, "u opens the runs pane");
    app
}

#[test]
fn the_runs_pane_lists_runs_and_comparisons_with_a_cursor_and_marks_at_80x24_and_200x60() {
    let root = two_past_runs();
    let cmp = comparison(root.path());
    let mut app = opened(root.path());
    let s = screen(&app);
    // Every entry of the index: both runs and the comparison (dated by its first member run).
    for id in [
        "r-20261129-133000-2222",
        "r-20261129-121500-1111",
        cmp.as_str(),
    ] {
        assert!(s.contains(id), "{id}:\n{s}");
    }
    // An entry's row (its id is also in the header once marked): the one with its date.
    let row = |s: &str, id: &str| {
        s.lines()
            .find(|l| l.contains(id) && l.contains(" 2026-11-"))
            .unwrap()
            .to_owned()
    };
    assert!(row(&s, "1111").contains("FAILED") && row(&s, "1111").contains("chess FAIL"));
    assert!(row(&s, &cmp).contains("REGRESSED") && row(&s, &cmp).contains("4/4 member runs"));
    // The bar shows the pane's keys, not the live panes' (no `q quit` while it is open).
    let bar = s.lines().last().unwrap();
    assert!(
        bar.contains("Space mark") && bar.contains("c compare"),
        "{bar}"
    );
    assert!(!bar.contains("q quit"), "{bar}");
    // The cursor row carries ▶, a marked row ◆ — glyphs, so NO_COLOR keeps both.
    let first = app.panes.runs.list.selected().unwrap().id.clone();
    press(&mut app, KeyCode::Down);
    let second = app.panes.runs.list.selected().unwrap().id.clone();
    assert_ne!(first, second);
    press(&mut app, KeyCode::Char(' '));
    let s = screen(&app);
    assert!(
        row(&s, &second).contains('▶') && row(&s, &second).contains('◆'),
        "{s}"
    );
    assert!(s.contains("marked 1/2"), "{s}");
    let root_text = root.path().display().to_string();
    snap_runs!(&root_text, "runs_list_200x60", s);
    snap_runs!(&root_text, "runs_list_80x24", text(&render(&app, 80, 24)));
}

#[test]
fn sort_and_filter_keys_reorder_and_narrow_the_list_and_a_bad_filter_says_why() {
    let root = two_past_runs();
    comparison(root.path());
    let mut app = opened(root.path());
    assert_eq!(app.panes.runs.list.shown.len(), 3);
    press(&mut app, KeyCode::Char('s'));
    assert!(screen(&app).contains("sort: oldest"));
    // The comparison is dated by its first member run, the oldest entry.
    assert_eq!(
        app.panes.runs.list.rows().next().unwrap().id,
        "cmp-20261130-090000-c0ffee"
    );
    press(&mut app, KeyCode::Char('/'));
    for c in "kind=run verdict=failed".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    assert!(screen(&app).contains("filter: kind=run verdict=failed█"));
    press(&mut app, KeyCode::Enter);
    let ids: Vec<&str> = app.panes.runs.list.rows().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r-20261129-121500-1111", "r-20261129-133000-2222"]);
    press(&mut app, KeyCode::Char('/'));
    for c in " colour=red".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let last = app.statuses.last().unwrap();
    assert!(
        !last.ok && last.text.contains("unknown filter `colour`"),
        "{last:?}"
    );
    assert_eq!(
        app.panes.runs.list.shown.len(),
        2,
        "a bad filter changes nothing"
    );
}

#[test]
fn enter_opens_a_past_run_with_its_verdicts_and_esc_returns_to_the_live_console() {
    let root = two_past_runs();
    let mut app = opened(root.path());
    // The newest run: chess passes, limiter's check broke.
    press(&mut app, KeyCode::Enter);
    assert!(matches!(
        app.panes.runs.stack.last(),
        Some(Screen::Run { .. })
    ));
    let s = screen(&app);
    assert!(s.contains("run r-20261129-133000-2222 · FAILED"), "{s}");
    let limiter = s.lines().find(|l| l.contains("limiter ")).unwrap();
    assert!(limiter.contains("infra_error"), "{limiter}");
    assert!(
        s.contains("processes as they ended") && s.contains("evidence files"),
        "{s}"
    );
    // A command key does not reach the live run from the pane: `r` would ask to seal.
    press(&mut app, KeyCode::Char('r'));
    assert_eq!(app.input, Input::Normal);
    let root_text = root.path().display().to_string();
    snap_runs!(&root_text, "runs_open_run_200x60", s);
    snap_runs!(
        &root_text,
        "runs_open_run_80x24",
        text(&render(&app, 80, 24))
    );
    // Esc: back to the list, then back to the live console, which went on underneath.
    press(&mut app, KeyCode::Esc);
    assert!(app.panes.runs.stack.is_empty() && app.panes.runs.open);
    press(&mut app, KeyCode::Esc);
    assert!(!app.panes.runs.open);
    let s = screen(&app);
    assert!(s.contains("PROCESSES") && s.contains("WORKER"), "{s}");
    // `u` again opens the list where it was.
    press(&mut app, KeyCode::Char('u'));
    assert!(app.panes.runs.open && app.panes.runs.stack.is_empty());
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn two_marked_runs_compare_side_by_side_and_one_mark_says_what_is_missing() {
    let root = two_past_runs();
    let mut app = opened(root.path());
    press(&mut app, KeyCode::Char('c'));
    let last = app.statuses.last().unwrap();
    assert!(!last.ok && last.text.contains("mark two runs"), "{last:?}");
    // Mark the older run first: it is A.
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Up);
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Char('c'));
    let s = screen(&app);
    assert!(
        s.contains("A r-20261129-121500-1111 → B r-20261129-133000-2222"),
        "{s}"
    );
    let chess = s.lines().find(|l| l.contains("│chess ")).unwrap();
    assert!(chess.contains("changed (1 run each"), "{chess}");
    assert!(!s.contains("REGRESSED"), "{s}");
    let root_text = root.path().display().to_string();
    snap_runs!(&root_text, "runs_compare_200x60", s);
    snap_runs!(
        &root_text,
        "runs_compare_80x24",
        text(&render(&app, 80, 24))
    );
    // `:runs compare A B` opens the same screen.
    let mut app = live_app(false);
    app.panes.runs.root = Some(root.path().to_owned());
    press(&mut app, KeyCode::Char(':'));
    for c in "runs compare 20261129-1215 20261129-1330".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let again = screen(&app);
    assert!(
        again.contains("A r-20261129-121500-1111 → B r-20261129-133000-2222")
            && again.contains(chess),
        "{again}"
    );
}

#[test]
fn a_comparison_opens_on_its_strips_and_enter_on_a_cell_opens_that_member_runs_story() {
    let root = tempfile::tempdir().unwrap();
    past_run(
        root.path(),
        "r-20261129-121500-1111",
        1_796_040_900_000.0,
        &[("chess", "pass")],
        &[],
    );
    let cmp = comparison(root.path());
    let mut app = opened(root.path());
    while app.panes.runs.list.selected().unwrap().id != cmp {
        press(&mut app, KeyCode::Down);
    }
    press(&mut app, KeyCode::Enter);
    assert!(matches!(
        app.panes.runs.stack.last(),
        Some(Screen::Comparison { .. })
    ));
    let s = screen(&app);
    assert!(
        s.contains("comparison cmp-20261130-090000-c0ffee · REGRESSED"),
        "{s}"
    );
    assert!(s.contains("VERDICT  REGRESSED: chess 2/2 → 0/2"), "{s}");
    let chess = s
        .lines()
        .find(|l| l.contains(" chess ") && l.contains('█'))
        .unwrap();
    assert!(chess.contains("██") && chess.contains("▁▁") && chess.contains("REGRESSED"));
    // The cursor starts on calendar's first baseline cell; down to chess, right to the
    // first candidate run.
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Right);
    press(&mut app, KeyCode::Right);
    let s = screen(&app);
    assert!(
        s.contains("▶ cell B-01 (candidate) · run r-20261130-090200-b001 · chess: fail"),
        "{s}"
    );
    let root_text = root.path().display().to_string();
    snap_runs!(&root_text, "runs_comparison_200x60", s);
    snap_runs!(
        &root_text,
        "runs_comparison_80x24",
        text(&render(&app, 80, 24))
    );
    press(&mut app, KeyCode::Enter);
    let s = screen(&app);
    assert!(
        s.contains("story of chess in B-01 (r-20261130-090200-b001)"),
        "{s}"
    );
    assert!(s.contains("verdict: fail"), "{s}");
    // Esc back to the strips, with the cursor where it was.
    press(&mut app, KeyCode::Esc);
    assert!(matches!(
        app.panes.runs.stack.last(),
        Some(Screen::Comparison {
            row: 1,
            cell: 2,
            ..
        })
    ));
}

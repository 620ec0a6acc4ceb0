//! The target detail view (issue 13) from a real run: the bundled wrong canary's steps run
//! in-process against real `patchdiff mcp` children and the real Node worker, then chess's
//! story (verdicts with the check's output, submissions with their receipts, diffs) is opened
//! the way Enter on TARGETS opens it and compared with insta snapshots at 200×60 and 80×24
//! (hashes are the fixtures' own; temp paths and timings filtered).

use std::path::{Path, PathBuf};

use patchdiff::canary::command::Command;
use patchdiff::canary::{Canary, CanaryOptions, StepOutcome};
use patchdiff::console::app::{App, Overlay};
use patchdiff::console::runner::RunnerEvent;
use patchdiff::console::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Runs the steps of `assets/canary/wrong.canary` up to `evaluate` and returns chess's story.
async fn wrong_canary_story(runs: &Path) -> String {
    let mut canary = Canary::create(CanaryOptions {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_patchdiff")),
        manifest: patchdiff::fixtures::bundled_manifest_path().unwrap(),
        runs_root: runs.to_owned(),
        database_url: None,
        settings: patchdiff::config::Settings::from_env(),
        step_timeout: patchdiff::canary::steps::deadline::STEP_TIMEOUT,
    })
    .unwrap();
    let plan = repo().join("assets/canary/wrong.plan.jsonl");
    for line in [
        "record model=scripted-wrong provider=patchdiff reasoning=none".to_owned(),
        "init".to_owned(),
        "launch observed".to_owned(),
        "preflight".to_owned(),
        format!("agent {}", plan.display()),
        "export".to_owned(),
        "inspect".to_owned(),
    ] {
        let outcome = canary.execute(&Command::parse(&line).unwrap()).await;
        assert!(outcome.ok, "{line}: {}", outcome.summary);
    }
    let evaluate = canary
        .execute(&Command::parse("evaluate require=full-byte").unwrap())
        .await;
    assert!(
        !evaluate.ok,
        "the wrong plan fails chess: {}",
        evaluate.summary
    );
    let story = canary.target_story("chess").unwrap();
    canary.stop(None).await;
    story
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_detail_after_the_wrong_canary_shows_verdicts_submissions_and_diffs() {
    let runs = tempfile::tempdir().unwrap();
    let story = wrong_canary_story(runs.path()).await;
    // What an operator needs first after a FAIL, in this order.
    let at = |needle: &str| {
        story
            .find(needle)
            .unwrap_or_else(|| panic!("no `{needle}` in:\n{story}"))
    };
    assert!(
        at("verdict: FAIL (full-byte) · identical to the reference: no · behavioral FAIL")
            < at("submissions (2):")
    );
    // Issue 21 item 2: the broken sub-test by name, with its assertion.
    assert!(at("named checks: ") < at("✖ test_chess.Castling.test_kingside_castling_when_clear"));
    assert!(at("submissions (2):") < at("diff: expected → exported"));
    assert!(at("diff: expected → exported") < at("diff: original → exported"));
    // The wrong castling edit: attacks by the mover's own colour (expected: the opponent's).
    assert!(story.contains("opponent(color)) for x in"), "{story}");
    assert!(
        story
            .lines()
            .any(|l| l.trim_start().starts_with('+') && l.contains(" color) for x in")),
        "{story}"
    );
    // Shown the way Enter on TARGETS shows it: the step's output in an overlay.
    let mut app = App::new(false, 1_796_012_943_289.0);
    app.on_runner(RunnerEvent::Finished {
        outcome: StepOutcome {
            command: "target".into(),
            ok: true,
            summary: "story of `chess`".into(),
            elapsed_ms: 3,
        },
        output: Some(story),
    });
    assert!(matches!(app.overlay, Overlay::Text { .. }));
    let filters = vec![
        (r"\b\d\d:\d\d:\d\d\.\d\d\d\b", "[hh:mm:ss.mmm]"),
        // The clock cut where a narrow header ends.
        (r"(?m) \d\d:[0-9:.]*$", " [clock, cut]"),
        // The check's duration varies run to run, and so does the padding after it.
        (r"check \d+ ms +", "check [n] ms "),
        (r"/tmp/[^ /│]+", "[tmp]"),
        (r"in \d+\.\d+s", "in [t]s"),
        (r"r-\d{8}-\d{6}-\d+", "[run]"),
        // Controls run or reused from the cache, under a digest of this machine's toolchains.
        (
            r"controls: (run|reused) \(digest [0-9a-f]{12}\) +",
            "controls: [source] ",
        ),
    ];
    insta::with_settings!({filters => filters}, {
        insta::assert_snapshot!("target_detail_200x60", text(&app, 200, 60));
        insta::assert_snapshot!("target_detail_80x24", text(&app, 80, 24));
    });
    // The overlay scrolls to the diffs.
    if let Overlay::Text { lines, scroll, .. } = &mut app.overlay {
        *scroll = lines
            .iter()
            .position(|l| l == "diff: expected → exported")
            .unwrap() as u16;
    }
    let screen = text(&app, 200, 60);
    assert!(screen.contains("--- expected"), "{screen}");
    assert!(screen.contains("+++ exported"), "{screen}");
}

//! Attach mode (SPEC U1, ARCHITECTURE "the console can also watch a process an agent host
//! started"): `:attach EVENTS [DATABASE]` tails a perf-events file written by someone else and
//! reads the store, through the same sources and loop as a console-run canary.

use std::io::Write;
use std::time::{Duration, Instant};

use patchdiff::canary::command::Command;
use patchdiff::console::app::App;
use patchdiff::console::{AppEvent, Sources, apply_event, attach};
use patchdiff::store::{EditStore, SqliteStore};
use tokio::sync::mpsc;

/// Applies events from `rx` until `done` holds, failing after `limit`.
async fn pump_until(
    app: &mut App,
    rx: &mut mpsc::Receiver<AppEvent>,
    limit: Duration,
    done: impl Fn(&App) -> bool,
) {
    let deadline = Instant::now() + limit;
    while !done(app) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(ev)) => {
                apply_event(app, ev);
            }
            _ => panic!("condition not reached within {limit:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_follows_an_outside_events_file_and_reads_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("observed.perf.jsonl");
    let db = dir.path().join("store.sqlite");
    let store = SqliteStore::open(&db).unwrap();
    let content = b"export const x = 1;\n";
    let sha = hex_sha(content);
    store
        .init_target("calendar", "typescript", content, &sha, false)
        .unwrap();
    let mut f = std::fs::File::create(&events).unwrap();
    writeln!(f, r#"{{"name":"worker_launch","start_ms":1000,"duration_ms":0,"outcome":"ok","ids":{{"generation":4}},"attrs":{{"pid":999999}},"pid":4242}}"#).unwrap();
    writeln!(f, "this line is not an event").unwrap();

    let (tx, mut rx) = mpsc::channel(64);
    let mut sources = Sources::default();
    let mut app = App::new(false, 2_000.0);
    let command = Command::parse(&format!("attach {} {}", events.display(), db.display())).unwrap();
    let Command::Attach {
        events: e,
        database,
    } = command
    else {
        panic!("not an attach command")
    };
    attach(&mut app, &mut sources, &tx, &e, database.as_deref(), None);
    pump_until(&mut app, &mut rx, Duration::from_secs(10), |a| {
        a.monitor.ingested == 1 && a.monitor.malformed == 1 && !a.panes.targets.store.is_empty()
    })
    .await;
    assert_eq!(app.monitor.worker.generation, Some(4));
    assert_eq!(app.attached_pid(), Some(4242));
    assert_eq!(app.panes.targets.store[0].name, "calendar");

    // Lines appended later arrive too.
    writeln!(f, r#"{{"name":"worker_ready","start_ms":1300,"duration_ms":300,"outcome":"ok","ids":{{"generation":4}},"pid":4242}}"#).unwrap();
    pump_until(&mut app, &mut rx, Duration::from_secs(10), |a| {
        a.monitor.ingested == 2
    })
    .await;
    assert_eq!(
        app.monitor.worker.state,
        patchdiff::console::state::WorkerState::Ready
    );
}

fn hex_sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

//! Background data sources for the console (ARCHITECTURE: async sources send one event enum):
//! a tailer task following perf-event and memory files by byte offset, batched per poll, and a
//! store poller reading the targets (through SQLite's WAL, or from PostgreSQL) while the MCP
//! processes write.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::tail::{JsonlTail, TailItem};
use crate::config::{Key, Settings};
use crate::kernel::TargetSummary;
use crate::store::EditStore;

/// How often files are polled for appended lines.
pub const TAIL_INTERVAL: Duration = Duration::from_millis(100);
/// Most bytes read from one file per poll (bounds one batch: 8 MiB).
pub const TAIL_BATCH_BYTES: usize = 8 * 1024 * 1024;
/// The first batch read from a file (bytes): small, so a file with history (a past run, an
/// attached process that ran for hours) shows on screen within a frame; each further batch
/// doubles up to [`TAIL_BATCH_BYTES`] (a run of 200,000 events opens without a stall).
pub const FIRST_BATCH_BYTES: usize = 256 * 1024;
/// How often the store is read for the targets pane.
pub const STORE_INTERVAL: Duration = Duration::from_millis(1000);

/// What a followed file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Perf events (T4), tagged with a source name.
    Perf,
    /// Memory samples (T2).
    Memory,
}

/// A batch of lines, or a store reading.
#[derive(Debug, Clone)]
pub enum SourceEvent {
    Lines {
        source: String,
        kind: FileKind,
        lines: Vec<TailItem>,
    },
    Targets(Result<Vec<TargetSummary>, String>),
}

/// Follows `files` (source name, path, kind) and sends each poll's new lines as one batch:
/// [`FIRST_BATCH_BYTES`] first, doubling to [`TAIL_BATCH_BYTES`].
pub fn spawn_tailer<E: Send + 'static>(
    files: Vec<(String, PathBuf, FileKind)>,
    events: mpsc::Sender<E>,
    wrap: fn(SourceEvent) -> E,
) -> JoinHandle<()> {
    spawn_tailer_from(files, events, wrap, FIRST_BATCH_BYTES)
}

/// [`spawn_tailer`] with the first batch of `first_batch` bytes (at most [`TAIL_BATCH_BYTES`];
/// `console-bench` compares [`TAIL_BATCH_BYTES`], the earlier behaviour, with the default).
pub fn spawn_tailer_from<E: Send + 'static>(
    files: Vec<(String, PathBuf, FileKind)>,
    events: mpsc::Sender<E>,
    wrap: fn(SourceEvent) -> E,
    first_batch: usize,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tails: Vec<(String, FileKind, JsonlTail)> = files
            .into_iter()
            .map(|(s, p, k)| (s, k, JsonlTail::new(&p)))
            .collect();
        let mut batch = first_batch.clamp(1, TAIL_BATCH_BYTES);
        let mut tick = tokio::time::interval(TAIL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for (source, kind, tail) in &mut tails {
                loop {
                    let mut lines = Vec::new();
                    let read = tail.poll(batch, |l| lines.push(l)).unwrap_or(0);
                    let full = read >= batch;
                    batch = (batch * 2).min(TAIL_BATCH_BYTES);
                    if !lines.is_empty() {
                        let batch = SourceEvent::Lines {
                            source: source.clone(),
                            kind: *kind,
                            lines,
                        };
                        if events.send(wrap(batch)).await.is_err() {
                            return;
                        }
                    }
                    if !full {
                        break;
                    }
                }
            }
        }
    })
}

/// The PostgreSQL URL the resolved `settings` select for the store (`PATCHDIFF_DATABASE_URL`
/// naming `postgres://…` or `postgresql://…`, P1), or `None`: the SQLite file.
pub fn postgres_url(settings: &Settings) -> Option<String> {
    settings
        .text(Key::DatabaseUrl)
        .ok()
        .flatten()
        .filter(|u| crate::store::is_postgres_url(u))
        .map(str::to_owned)
}

/// The store poller's connection, shared with its owner so closing it is synchronous
/// (`report` closes every handle the run holds before it hashes the database).
#[derive(Default)]
pub struct PollerStore {
    store: Option<std::sync::Arc<dyn EditStore>>,
    closed: bool,
}

/// A handle on a [`spawn_store_poller`] poller's connection.
#[derive(Clone, Default)]
pub struct StoreHandle(std::sync::Arc<std::sync::Mutex<PollerStore>>);

impl StoreHandle {
    /// Closes the poller's database connection and stops it reopening one. Waits for a read
    /// under way (reads run under the same lock), so when this returns no connection of the
    /// poller is open.
    pub fn close(&self) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.closed = true;
        slot.store = None;
    }

    /// Whether the poller has a database connection open.
    pub fn is_open(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .store
            .is_some()
    }
}

/// How the store poller opens its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreAccess {
    /// A live run's database (the MCP processes write it).
    Live,
    /// A past run's SQLite file, opened `immutable=1` read-only: nothing is created or
    /// changed beside it.
    ReadOnly,
}

/// Reads the targets every [`STORE_INTERVAL`] from the PostgreSQL database at `postgres_url`
/// when given (see [`postgres_url`]), else from the SQLite database at `path` once the file
/// exists (read-only with [`StoreAccess::ReadOnly`]). The returned [`StoreHandle`] closes its
/// connection.
pub fn spawn_store_poller<E: Send + 'static>(
    path: PathBuf,
    postgres_url: Option<String>,
    access: StoreAccess,
    events: mpsc::Sender<E>,
    wrap: fn(SourceEvent) -> E,
) -> (JoinHandle<()>, StoreHandle) {
    let handle = StoreHandle::default();
    let slot = handle.clone();
    let task = tokio::spawn(async move {
        let url = postgres_url;
        let mut tick = tokio::time::interval(STORE_INTERVAL);
        loop {
            tick.tick().await;
            if url.is_none() && !path.exists() {
                continue;
            }
            let (p, u, slot) = (path.clone(), url.clone(), slot.clone());
            // Opening and reading hold the slot's lock, so `close` waits for them.
            let reading = tokio::task::spawn_blocking(move || {
                let mut guard = slot.0.lock().unwrap_or_else(|e| e.into_inner());
                if guard.closed {
                    return None;
                }
                if guard.store.is_none() {
                    let opened = match (access, u) {
                        (StoreAccess::ReadOnly, None) => {
                            crate::store::SqliteStore::open_read_only(&p)
                                .map(|s| std::sync::Arc::new(s) as std::sync::Arc<dyn EditStore>)
                        }
                        (_, u) => crate::store::open_backend(&p, u.as_deref()),
                    };
                    match opened {
                        Ok(s) => guard.store = Some(s),
                        Err(e) => return Some(Err(e.to_string())),
                    }
                }
                let store = guard.store.as_ref()?;
                Some(store.list_targets().map_err(|e| e.to_string()))
            })
            .await;
            let reading = match reading {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => Err(e.to_string()),
            };
            if events
                .send(wrap(SourceEvent::Targets(reading)))
                .await
                .is_err()
            {
                return;
            }
        }
    });
    (task, handle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::Path;

    #[test]
    fn the_store_poller_reads_postgresql_only_when_the_settings_name_it() {
        let with = |url: Option<&str>| {
            postgres_url(&Settings::from_lookup(|k| {
                (k == Key::DatabaseUrl.variable())
                    .then_some(url)
                    .flatten()
                    .map(Into::into)
            }))
        };
        assert_eq!(with(None), None);
        assert_eq!(with(Some("sqlite:///var/lib/pd.sqlite")), None);
        assert_eq!(
            with(Some("postgres://pd@127.0.0.1:5432/pd")).as_deref(),
            Some("postgres://pd@127.0.0.1:5432/pd")
        );
        assert_eq!(
            with(Some("postgresql://pd@db/pd")).as_deref(),
            Some("postgresql://pd@db/pd")
        );
    }

    #[tokio::test]
    async fn an_oversize_event_line_is_skipped_with_a_note_and_the_next_events_are_read() {
        use crate::console::app::App;
        use crate::console::{AppEvent, apply_event};
        let fixture = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/console/observed.perf.jsonl"),
        )
        .unwrap();
        let events: Vec<&str> = fixture.lines().collect();
        let (before, after) = events.split_at(events.len() / 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("observed.perf.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        for l in before {
            writeln!(f, "{l}").unwrap();
        }
        // A line of 64 KiB + 1 byte (the longest accepted is 64 KiB) in the middle.
        writeln!(f, "{{\"name\":\"{}\"}}", "x".repeat(65_537)).unwrap();
        for l in after {
            writeln!(f, "{l}").unwrap();
        }
        drop(f);
        let (tx, mut rx) = mpsc::channel(64);
        let task = spawn_tailer(
            vec![("observed".into(), path, FileKind::Perf)],
            tx,
            AppEvent::Source,
        );
        let mut app = App::new(false, 0.0);
        while app.monitor.ingested + app.monitor.malformed < events.len() as u64 + 1 {
            let ev = rx.recv().await.expect("the tailer stopped");
            apply_event(&mut app, ev);
        }
        task.abort();
        assert_eq!(
            app.monitor.ingested,
            events.len() as u64,
            "every other line is read"
        );
        assert_eq!(app.monitor.malformed, 1);
        assert_eq!(
            app.monitor.last_malformed.as_deref(),
            Some("observed: a line over 65536 bytes was skipped")
        );
        // The note is on screen: the header counts it.
        app.size = (200, 60);
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 60)).unwrap();
        terminal
            .draw(|f| crate::console::ui::draw(f, &app))
            .unwrap();
        let header: String = (0..200)
            .map(|x| terminal.backend().buffer()[(x, 0)].symbol().to_owned())
            .collect();
        assert!(header.contains(" · 1 malformed"), "{header}");
    }

    #[tokio::test]
    async fn a_file_with_history_arrives_in_small_batches_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("observed.perf.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        // 2 MiB of 100-byte lines (99 bytes + newline).
        let line = "x".repeat(99);
        for _ in 0..(2 * 1024 * 1024 / 100) {
            writeln!(f, "{line}").unwrap();
        }
        drop(f);
        let (tx, mut rx) = mpsc::channel(64);
        let task = spawn_tailer(vec![("observed".into(), path, FileKind::Perf)], tx, |e| e);
        let mut sizes = Vec::new();
        let mut total = 0;
        while total < 2 * 1024 * 1024 / 100 {
            let Some(SourceEvent::Lines { lines, .. }) = rx.recv().await else {
                panic!("the tailer stopped");
            };
            total += lines.len();
            sizes.push(lines.len() * 100);
        }
        task.abort();
        // 256 KiB, then 512 KiB, then 1 MiB (each may complete the line the read before cut):
        // a frame can show the first batch at once.
        assert!(sizes[0] <= 256 * 1024, "{sizes:?}");
        assert!(
            sizes[1] <= 512 * 1024 + 100 && sizes[1] > 256 * 1024,
            "{sizes:?}"
        );
        assert!(sizes[2] > 512 * 1024, "{sizes:?}");
    }
}

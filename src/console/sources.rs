//! Background data sources for the console (ARCHITECTURE: async sources send one event enum):
//! a tailer task following perf-event and memory files by byte offset, batched per poll, and a
//! store poller reading the targets (through SQLite's WAL, or from PostgreSQL) while the MCP
//! processes write.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::tail::JsonlTail;
use crate::kernel::TargetSummary;
use crate::store::EditStore;

/// How often files are polled for appended lines.
pub const TAIL_INTERVAL: Duration = Duration::from_millis(100);
/// Most bytes read from one file per poll (bounds one batch: 8 MiB).
pub const TAIL_BATCH_BYTES: usize = 8 * 1024 * 1024;
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
        lines: Vec<String>,
    },
    Targets(Result<Vec<TargetSummary>, String>),
}

/// Follows `files` (source name, path, kind) and sends each poll's new lines as one batch.
pub fn spawn_tailer<E: Send + 'static>(
    files: Vec<(String, PathBuf, FileKind)>,
    events: mpsc::Sender<E>,
    wrap: fn(SourceEvent) -> E,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tails: Vec<(String, FileKind, JsonlTail)> = files
            .into_iter()
            .map(|(s, p, k)| (s, k, JsonlTail::new(&p)))
            .collect();
        let mut tick = tokio::time::interval(TAIL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for (source, kind, tail) in &mut tails {
                loop {
                    let mut lines = Vec::new();
                    let read = tail
                        .poll(TAIL_BATCH_BYTES, |l| lines.push(l.to_owned()))
                        .unwrap_or(0);
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
                    if read < TAIL_BATCH_BYTES {
                        break;
                    }
                }
            }
        }
    })
}

/// Reads the targets every [`STORE_INTERVAL`] from the store `PATCHDIFF_DATABASE_URL` selects
/// when it names PostgreSQL, else from the SQLite database at `path` once the file exists.
pub fn spawn_store_poller<E: Send + 'static>(
    path: PathBuf,
    events: mpsc::Sender<E>,
    wrap: fn(SourceEvent) -> E,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let url =
            crate::store::database_url_from_env().filter(|u| crate::store::is_postgres_url(u));
        let mut store: Option<std::sync::Arc<dyn EditStore>> = None;
        let mut tick = tokio::time::interval(STORE_INTERVAL);
        loop {
            tick.tick().await;
            if store.is_none() {
                if url.is_none() && !path.exists() {
                    continue;
                }
                let (p, u) = (path.clone(), url.clone());
                match tokio::task::spawn_blocking(move || {
                    crate::store::open_backend(&p, u.as_deref())
                })
                .await
                {
                    Ok(Ok(s)) => store = Some(s),
                    Ok(Err(e)) => {
                        let _ = events
                            .send(wrap(SourceEvent::Targets(Err(e.to_string()))))
                            .await;
                        continue;
                    }
                    Err(_) => continue,
                }
            }
            let Some(s) = store.clone() else { continue };
            let reading = tokio::task::spawn_blocking(move || s.list_targets())
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            if events
                .send(wrap(SourceEvent::Targets(reading)))
                .await
                .is_err()
            {
                return;
            }
        }
    })
}

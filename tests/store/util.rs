//! Helpers shared by the store integration tests.

pub use patchdiff_test_util::example_binary::example_binary;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use patchdiff::kernel::{find_all, sha256_hex};
use patchdiff::store::*;

use crate::backends::{Backend, Scratch};

/// Anything the helpers can use as a store: `Arc<dyn EditStore>` (what [`fresh`] returns), a
/// concrete store, or `dyn EditStore`.
pub trait AsStore {
    fn st(&self) -> &dyn EditStore;
}

impl AsStore for dyn EditStore + '_ {
    fn st(&self) -> &dyn EditStore {
        self
    }
}

impl<S: EditStore + ?Sized> AsStore for std::sync::Arc<S>
where
    S: AsStore,
{
    fn st(&self) -> &dyn EditStore {
        (**self).st()
    }
}

impl AsStore for SqliteStore {
    fn st(&self) -> &dyn EditStore {
        self
    }
}

/// A store on a fresh database of `backend` (a file in a temp dir, or a new PostgreSQL
/// database), kept alive by the returned [`Scratch`], which also reopens it.
pub fn fresh(backend: Backend) -> (Scratch, std::sync::Arc<dyn EditStore>) {
    let scratch = Scratch::new(backend);
    let store = scratch.open();
    (scratch, store)
}

pub fn init(store: &(impl AsStore + ?Sized), name: &str, content: &str) -> TargetState {
    store
        .st()
        .init_target(
            name,
            "javascript",
            content.as_bytes(),
            &sha256_hex(content),
            false,
        )
        .unwrap()
}

pub fn sub(key: &str, base: u64, ops: &[(Option<&str>, &str, &str)]) -> Submission {
    Submission {
        request_key: key.to_owned(),
        base_revision: base,
        expected_sha256: None,
        operations: ops
            .iter()
            .map(|(obs, old, new)| OperationRequest {
                observation_id: obs.map(str::to_owned),
                old_text: (*old).to_owned(),
                new_text: (*new).to_owned(),
            })
            .collect(),
    }
}

pub fn lines(start: usize, end: usize) -> ObserveRange {
    ObserveRange {
        kind: "lines".to_owned(),
        name: None,
        start_byte: start,
        end_byte: end,
    }
}

/// Observes the single occurrence of `text` at the current revision.
pub fn observe_text(
    store: &(impl AsStore + ?Sized),
    target: &str,
    text: &str,
    kind: &str,
    name: &str,
) -> Observation {
    let store = store.st();
    let t = store.read_target(target).unwrap();
    let hits = find_all(&t.content, text);
    assert_eq!(hits.len(), 1, "{text:?} must occur once");
    store
        .observe(
            target,
            t.revision,
            ObserveRange {
                kind: kind.to_owned(),
                name: Some(name.to_owned()),
                start_byte: hits[0],
                end_byte: hits[0] + text.len(),
            },
        )
        .unwrap()
}

/// Replays the whole journal from the init entry's fixture bytes (version 0), checking every
/// entry's hash and every saved version against `saved_version`. Returns (entries, content).
pub fn replay_to_end(store: &(impl AsStore + ?Sized), target: &str) -> (Vec<JournalEntry>, String) {
    let store = store.st();
    let mut content = store.saved_version(target, 0).unwrap().content;
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.replay(target, cursor.as_deref(), Some(1000)).unwrap();
        for e in &page.entries {
            match e.kind {
                JournalKind::Init => assert_eq!(sha256_hex(&content), e.sha256),
                JournalKind::Edit => {
                    content = apply_journal_operations(&content, &e.operations).unwrap();
                    assert_eq!(
                        sha256_hex(&content),
                        e.sha256,
                        "edit at revision {}",
                        e.revision
                    );
                }
                JournalKind::Save => {
                    let saved = store.saved_version(target, e.version).unwrap();
                    assert_eq!(saved.content, content, "version {}", e.version);
                    assert_eq!(saved.sha256, e.sha256);
                }
            }
        }
        all.extend(page.entries);
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    (all, content)
}

/// A `store-probe` child: a second OS process sharing the database (K5). It prints `READY`
/// first; tests synchronize with it through its pipes, never with sleeps.
pub struct Probe {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: BufReader<ChildStdout>,
}

impl Probe {
    pub fn spawn(args: &[&str]) -> Probe {
        let mut child = Command::new(example_binary("store-probe"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn store-probe");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut p = Probe {
            child,
            stdin,
            stdout,
        };
        assert_eq!(p.line().as_deref(), Some("READY"));
        p
    }

    pub fn line(&mut self) -> Option<String> {
        let mut s = String::new();
        match self.stdout.read_line(&mut s) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(s.trim_end().to_owned()),
        }
    }

    pub fn go(&mut self) {
        writeln!(self.stdin, "GO").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Remaining lines until the child exits; asserts it succeeded.
    pub fn finish(mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(l) = self.line() {
            lines.push(l);
        }
        assert!(
            self.child.wait().unwrap().success(),
            "probe failed: {lines:?}"
        );
        lines
    }
}

/// The probe's `DB` argument for a [`Scratch`]: the SQLite path or the PostgreSQL URL.
pub fn db_arg(scratch: &Scratch) -> String {
    scratch.probe_arg()
}

/// A small deterministic generator (xorshift64*), so a failing seed replays.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

//! Shared helpers for the Waymark integration tests: paths, configs, and an in-process event log
//! fed by the recorder's listener (tests wait on events, never on sleeps).

pub use patchdiff_test_util::example_binary::example_binary;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use patchdiff::telemetry::{PerfEvent, Recorder};
use patchdiff::waymark::config::resolve_node_binary;
use patchdiff::waymark::{WaymarkConfig, WaymarkMode};
use tokio::sync::Notify;

/// `integrations/waymark`, with its `node_modules` installed.
pub fn script_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/integrations/waymark"));
    assert!(
        dir.join("node_modules/web-tree-sitter").is_dir(),
        "Node dependencies missing: run `npm ci --prefix integrations/waymark` first"
    );
    dir
}

/// The Node binary on PATH (or PATCHDIFF_NODE_BINARY).
pub fn node() -> PathBuf {
    resolve_node_binary(
        std::env::var_os("PATCHDIFF_NODE_BINARY").as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
    .expect("a Node binary (set PATCHDIFF_NODE_BINARY or put node on PATH)")
}

/// A config with SPEC defaults in `work_root`.
pub fn config(mode: WaymarkMode, work_root: &Path) -> WaymarkConfig {
    WaymarkConfig::new(mode, node(), script_dir(), work_root.to_path_buf())
}

/// A resident config running the TEST-ONLY fault worker
/// (`integrations/waymark/test-fixtures/fault_worker.mjs --fault NAME`).
pub fn fault_config(fault: &str, work_root: &Path) -> WaymarkConfig {
    let mut c = config(WaymarkMode::Resident, work_root);
    c.worker_script = Some(script_dir().join("test-fixtures/fault_worker.mjs"));
    c.worker_args = vec!["--fault".into(), fault.into()];
    c
}

/// Every event the recorder saw, with a notifier for waiting on one.
#[derive(Clone, Default)]
pub struct EventLog {
    events: Arc<Mutex<Vec<PerfEvent>>>,
    notify: Arc<Notify>,
}

impl EventLog {
    /// A recorder that writes no file and feeds this log.
    pub fn recorder(&self) -> Recorder {
        self.listening(Recorder::disabled())
    }

    /// `base` (e.g. a recorder writing files) that also feeds this log.
    pub fn listening(&self, base: Recorder) -> Recorder {
        let events = self.events.clone();
        let notify = self.notify.clone();
        base.with_listener(Arc::new(move |e: &PerfEvent| {
            events.lock().expect("event log").push(e.clone());
            notify.notify_waiters();
        }))
    }

    pub fn all(&self) -> Vec<PerfEvent> {
        self.events.lock().expect("event log").clone()
    }

    pub fn named(&self, name: &str) -> Vec<PerfEvent> {
        self.all().into_iter().filter(|e| e.name == name).collect()
    }

    /// Waits until an event matching `pred` has been recorded (bounded by `within`).
    pub async fn wait_for(&self, within: Duration, pred: impl Fn(&PerfEvent) -> bool) -> PerfEvent {
        let found = tokio::time::timeout(within, async {
            loop {
                let notified = self.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Some(e) = self.all().into_iter().find(|e| pred(e)) {
                    return e;
                }
                notified.await;
            }
        })
        .await;
        match found {
            Ok(e) => e,
            Err(_) => panic!(
                "no matching event within {within:?}; saw: {:?}",
                self.all().iter().map(|e| &e.name).collect::<Vec<_>>()
            ),
        }
    }

    /// Waits for a `worker_retired` event and returns its reason.
    pub async fn retirement(&self, within: Duration) -> String {
        let e = self.wait_for(within, |e| e.name == "worker_retired").await;
        e.attrs["reason"].as_str().unwrap_or_default().to_owned()
    }
}

/// Waits (bounded) until `pid` has exited (a zombie counts as exited). Uses a pidfd, which
/// becomes readable exactly when the process exits; falls back to checking /proc when pidfds are
/// unavailable.
pub async fn wait_gone(pid: u32, within: Duration) {
    let waited = tokio::time::timeout(within, async {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
        if fd >= 0 {
            use std::os::fd::{FromRawFd, OwnedFd};
            // SAFETY: fd is a fresh descriptor we own.
            let owned = unsafe { OwnedFd::from_raw_fd(fd as i32) };
            // SAFETY: `owned` is a valid open pidfd and moves into the AsyncFd, which keeps it
            // open, unchanged, until it is dropped.
            let afd = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    owned,
                    tokio::io::Interest::READABLE,
                )
            }
            .map_err(|e| e.to_string())
            .expect("register pidfd");
            let _ = afd.readable().await.expect("pidfd readable");
            return;
        }
        while patchdiff::waymark::process::is_running(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "process {pid} still running after {within:?}"
    );
}

/// Generation roots (`waymark-*`) left in `work_root`.
pub fn roots(work_root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(work_root)
        .map(|it| {
            it.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("waymark-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub const JS: &str = "// café 界 😀\nclass Calendar {\n  constructor() { this.windows = []; }\n  addWindow(w) { this.windows.push(w); }\n}\nfunction parseLine(line) { return line.split(','); }\nconst total = (xs) => xs.reduce((a, b) => a + b, 0);\n";
pub const TS: &str = "interface Window { start: number }\nenum Color { Red, Green }\nexport class Calendar {\n  addWindow(w: Window): void { console.log(w); }\n}\nexport function parseLine(l: string): string[] { return l.split(','); }\n";
pub const PY: &str = "# é\nclass RateLimiter:\n    def __init__(self):\n        self.n = 0\n\n    @property\n    def allow(self):\n        return True\n\n\ndef parse_line(line):\n    return line.split(',')\n";
pub const RS: &str = "/// 界\npub struct RateLimiter { n: u32 }\n\nimpl RateLimiter {\n    pub fn allow(&mut self) -> bool { self.n += 1; true }\n}\n\npub trait Limit { fn limit(&self) -> u32; }\n\nfn parse_line(l: &str) -> Vec<&str> { l.split(',').collect() }\n";

//! `patchdiff replica sync DIR` (R1–R4): the reference replica integration. It leases targets
//! through a full-profile `patchdiff mcp` child over stdio (the same tools, validation, receipts
//! and request keys as any MCP client), mirrors each leased target's checkpoint into one file
//! of DIR, turns file changes into replica submissions and writes canonical changes back.
//!
//! A pass, per target: a file whose bytes differ from the content it was written from is a local
//! change. A change that is not UTF-8 text without NUL bytes is refused, naming the file, and
//! nothing of that target is submitted or written (R4). A text change becomes operations
//! (`mirror::operations`) under a request key derived from the lease, target, cursor and new
//! content; it is recorded in DIR's state before it is sent, so a submission whose answer was
//! lost (the child died, the sync was killed) is retried by the same key, after a reconnect or
//! on the next start, and its stored receipt is learnt — never an invented success (R3). Then
//! the changes after the file's cursor — the agent's edits and this submission, transformed —
//! are applied to the mirror, each checked against its entry's SHA-256, and the canonical
//! content replaces the file atomically (a temporary file in `DIR/.patchdiff-sync`, then a
//! rename) only if the file still holds what was read (checked just before the rename): a local
//! change written meanwhile is never clobbered, it is submitted in the next pass. A rejected
//! change is kept beside the file (`FILE~rejected`) before the canonical content is written.
//!
//! DIR keeps the lease: a later sync of DIR resumes (renews) it, so `--once` passes chain; a
//! lease that ended is acquired again over the same targets when no local change is waiting.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::mirror::{self, Pending, STATE_DIR, STATE_FILE, SyncState, TargetState};

mod pass;
mod take_over;
use crate::canary::client::{LaunchSpec, McpProcess};
use crate::canary::names::ProcessKind;
use crate::config::{Key, Settings};
use crate::kernel::{JournalKind, Outcome, Receipt, ReplayPage, sha256_hex};
use crate::store::replica::{Checkpoint, Lease};

/// R1: the integration a lease is granted to when `--integration` names none.
pub const DEFAULT_INTEGRATION: &str = "patchdiff-replica-sync";
/// R1: the lease's default length, 60 000 ms; it is renewed when less than half is left.
pub const DEFAULT_TTL_MS: u64 = 60_000;
/// The long-running mode's default pause between passes, 1 000 ms.
pub const DEFAULT_INTERVAL_MS: u64 = 1_000;
/// R3: entries asked for per `patchdiff_replica_changes` page.
const CHANGES_PAGE: u32 = 100;
/// How many times a call whose answer was lost is sent again on a relaunched child.
const RECONNECTS: usize = 2;

/// Exit code: the pass (or the run until a signal) completed with nothing refused.
pub const EXIT_OK: i32 = 0;
/// Exit code: a change was refused or rejected, or the sync stopped on an error.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the options or DIR's state do not fit together; nothing was done.
pub const EXIT_USAGE: i32 = 2;

/// What `patchdiff replica sync` was asked to do.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// The mirror directory (created if missing).
    pub dir: PathBuf,
    /// Targets to lease (1..=64), or empty to resume the lease DIR mirrors.
    pub targets: Vec<String>,
    /// Take over this lease (DIR must mirror it).
    pub lease_id: Option<String>,
    /// R1: who the lease is for (1..=128 bytes).
    pub integration: String,
    /// R1: lease length and renewal, 1 000..=3 600 000 ms.
    pub ttl_ms: u64,
    /// Pause between passes of the long-running mode.
    pub interval: Duration,
    /// One pass, then exit (the lease is kept unless `release`).
    pub once: bool,
    /// With `once`: release the lease after the pass.
    pub release: bool,
    /// One JSON object per event line instead of text.
    pub json: bool,
    /// How to start the full-profile MCP child ([`launch_spec`]).
    pub launch: LaunchSpec,
}

/// P1: the settings the MCP child is given, from this process's resolved settings.
const FORWARDED: [Key; 11] = [
    Key::DatabaseUrl,
    Key::NodeBinary,
    Key::WaymarkDir,
    Key::WaymarkMode,
    Key::WaymarkWorkers,
    Key::WaymarkActiveTimeoutMs,
    Key::WaymarkWorkRoot,
    Key::PerfMemory,
    Key::StateDir,
    Key::DataDir,
    Key::ConfigDir,
];

/// The full-profile child `exe mcp` with this process's settings (P1: forwarded, no config
/// file of its own), its stderr in `DIR/.patchdiff-sync/mcp.stderr.log` and its wire log (E1:
/// every request and receipt) in `DIR/.patchdiff-sync/mcp.jsonl`.
pub fn launch_spec(settings: &Settings, exe: PathBuf, dir: &Path) -> LaunchSpec {
    let own = dir.join(STATE_DIR);
    let mut env = settings.child_env(&FORWARDED);
    env.push((Key::McpProfile.variable().into(), "full".into()));
    env.push((
        Key::EvidenceWireLog.variable().into(),
        absolute(&own.join("mcp.jsonl")).display().to_string(),
    ));
    env.push((Key::Config.variable().into(), "/dev/null".into()));
    LaunchSpec {
        kind: ProcessKind::Full,
        exe,
        env,
        stderr: own.join("mcp.stderr.log"),
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Why the sync stopped early: a usage error (nothing done) or a failure.
#[derive(Debug)]
enum Fatal {
    Usage(String),
    Failed(String),
}

/// A call that did not return a result.
enum Failure {
    /// The server answered `isError`: nothing was applied.
    Refused { code: String, message: String },
    /// No answer, also after relaunching the child: the outcome is unknown.
    Lost(String),
}

impl Failure {
    fn describe(&self, tool: &str) -> String {
        match self {
            Failure::Refused { code, message } => format!("{tool} refused: {code}: {message}"),
            Failure::Lost(m) => format!("{tool}: no answer: {m}"),
        }
    }
}

/// The MCP child and its client, relaunched when an answer is lost.
struct Link {
    spec: LaunchSpec,
    process: Option<McpProcess>,
}

impl Link {
    /// Calls `tool`; a lost answer stops the child, starts a new one and sends the same
    /// arguments again, at most [`RECONNECTS`] times (every call the sync makes is safe to
    /// repeat: a submission by its request key, K4).
    async fn call(&mut self, tool: &str, args: Value) -> Result<Value, Failure> {
        let mut last = String::new();
        for _ in 0..=RECONNECTS {
            let process = match self.process.take() {
                Some(p) => p,
                None => match McpProcess::launch(&self.spec).await {
                    Ok(p) => p,
                    Err(e) => {
                        last = e.to_string();
                        continue;
                    }
                },
            };
            match process.call(tool, args.clone()).await {
                Ok(reply) => {
                    self.process = Some(process);
                    if reply.is_error {
                        let code = reply.structured.pointer("/error/code");
                        return Err(Failure::Refused {
                            code: code.and_then(Value::as_str).unwrap_or("ERROR").to_owned(),
                            message: reply.error_message(),
                        });
                    }
                    return Ok(reply.structured);
                }
                Err(e) => {
                    last = e.message;
                    process.stop().await;
                }
            }
        }
        Err(Failure::Lost(last))
    }

    async fn close(&mut self) {
        if let Some(p) = self.process.take() {
            p.stop().await;
        }
    }
}

/// Event lines on stdout: text made visible for a terminal, or one JSON object each.
struct Reporter {
    json: bool,
}

impl Reporter {
    fn event(&self, event: &str, fields: Value, text: impl FnOnce() -> String) {
        if self.json {
            let mut line = json!({ "event": event });
            if let (Some(l), Value::Object(f)) = (line.as_object_mut(), fields) {
                l.extend(f);
            }
            println!("{line}");
        } else {
            println!("{}", crate::display::visible_inline(&text()));
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A running sync of one directory.
struct Sync {
    dir: PathBuf,
    state: SyncState,
    link: Link,
    out: Reporter,
    ttl_ms: u64,
    interval: Duration,
    /// Per target, the digest of the refused content last reported (said once per content).
    refused: HashMap<usize, String>,
    once: bool,
    /// The exclusive `flock` on DIR's [`LOCK_FILE`], held for the sync's life: one sync per
    /// directory.
    _dir_lock: nix::fcntl::Flock<std::fs::File>,
}

/// The file in DIR's state directory whose `flock` a running sync holds.
pub const LOCK_FILE: &str = "lock";

/// Runs the sync `options` describe; returns the exit code ([`EXIT_OK`], [`EXIT_FAILED`],
/// [`EXIT_USAGE`]). Long-running mode ends on SIGTERM or SIGINT: the pass under way finishes,
/// the lease is released and the exit code is [`EXIT_OK`] unless the release failed.
pub async fn run(options: SyncOptions) -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            eprintln!("patchdiff replica sync: cannot install the signal handlers");
            return EXIT_FAILED;
        }
    };
    let (once, release, interval) = (options.once, options.release, options.interval);
    let mut sync = match Sync::open(options).await {
        Ok(s) => s,
        Err(Fatal::Usage(m)) => {
            eprintln!("patchdiff replica sync: {}", crate::display::visible(&m));
            return EXIT_USAGE;
        }
        Err(Fatal::Failed(m)) => {
            eprintln!("patchdiff replica sync: {}", crate::display::visible(&m));
            return EXIT_FAILED;
        }
    };
    let mut code = EXIT_OK;
    loop {
        match sync.pass().await {
            Ok(problems) => {
                if once && problems > 0 {
                    code = EXIT_FAILED;
                }
            }
            Err(m) => {
                eprintln!("patchdiff replica sync: {}", crate::display::visible(&m));
                sync.link.close().await;
                return EXIT_FAILED;
            }
        }
        if once {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    if !once || release {
        if let Err(m) = sync.release().await {
            eprintln!("patchdiff replica sync: {}", crate::display::visible(&m));
            code = EXIT_FAILED;
        }
    } else {
        let (lease, at) = (&sync.state.lease_id, sync.state.expires_at_ms);
        sync.out.event(
            "kept",
            json!({"lease_id": lease, "expires_at_ms": at}),
            || {
                format!(
                    "lease {lease} kept until {at} ms; the next sync of this directory resumes it"
                )
            },
        );
    }
    sync.link.close().await;
    code
}

/// Reads `path`: `None` when there is no such file.
fn read_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

impl Sync {
    fn state_path(dir: &Path) -> PathBuf {
        dir.join(STATE_DIR).join(STATE_FILE)
    }

    /// DIR's saved state: `None` before its first sync.
    fn read_state(dir: &Path) -> Result<Option<SyncState>, Fatal> {
        let path = Self::state_path(dir);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Fatal::Failed(format!(
                    "{} is not a sync state ({e}); move it away to start a new mirror",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Fatal::Failed(format!("cannot read the sync state: {e}"))),
        }
    }

    /// Takes DIR's lock without waiting: a second sync of one directory is refused, since two
    /// would submit and write back the same files.
    fn lock_dir(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, Fatal> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(STATE_DIR).join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Fatal::Failed(format!("cannot open {}: {e}", path.display())))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
            |(_, e)| match e {
                nix::errno::Errno::EWOULDBLOCK => Fatal::Failed(format!(
                    "another `patchdiff replica sync` is syncing {}; one sync per directory \
                     (stop it, or sync another directory)",
                    dir.display()
                )),
                e => Fatal::Failed(format!("cannot lock {}: {e}", path.display())),
            },
        )
    }

    /// Creates DIR and its state directory, then acquires, resumes or takes over the lease and
    /// mirrors a fresh checkpoint.
    async fn open(options: SyncOptions) -> Result<Self, Fatal> {
        let dir = options.dir.clone();
        let own = dir.join(STATE_DIR);
        if Self::read_state(&dir)?.is_none()
            && options.lease_id.is_none()
            && options.targets.is_empty()
        {
            return Err(Fatal::Usage(format!(
                "{} mirrors no lease yet: name the targets to lease with --lease NAME",
                dir.display()
            )));
        }
        std::fs::create_dir_all(&dir)
            .and_then(|()| match crate::owned_fs::create_private_dir(&own) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            })
            .map_err(|e| Fatal::Failed(format!("cannot create {}: {e}", own.display())))?;
        let dir_lock = Self::lock_dir(&dir)?;
        // Read again under the lock: a sync that held it may have just written the state.
        let saved = Self::read_state(&dir)?;
        let mut sync = Sync {
            dir,
            state: SyncState {
                lease_id: String::new(),
                integration: options.integration.clone(),
                expires_at_ms: 0,
                targets: Vec::new(),
            },
            link: Link {
                spec: options.launch.clone(),
                process: None,
            },
            out: Reporter { json: options.json },
            ttl_ms: options.ttl_ms,
            interval: options.interval,
            refused: HashMap::new(),
            once: options.once,
            _dir_lock: dir_lock,
        };
        match saved {
            Some(saved) => sync.resume(saved, &options).await?,
            None => {
                if let Some(id) = &options.lease_id {
                    sync.take_over(id).await?;
                    return Ok(sync);
                }
                sync.acquire(&options.integration, &options.targets, None)
                    .await?;
            }
        }
        Ok(sync)
    }

    /// Resumes DIR's lease (renewing it), or acquires a new one over its targets when it ended
    /// and no local change waits for it.
    async fn resume(&mut self, saved: SyncState, options: &SyncOptions) -> Result<(), Fatal> {
        if let Some(id) = options
            .lease_id
            .as_ref()
            .filter(|id| **id != saved.lease_id)
        {
            return Err(Fatal::Usage(format!(
                "{} mirrors lease {}, not {id}; take over a lease in the directory that mirrors it",
                self.dir.display(),
                saved.lease_id
            )));
        }
        let (mut asked, mut have) = (options.targets.clone(), saved.target_names());
        asked.sort();
        have.sort();
        if !asked.is_empty() && asked != have {
            return Err(Fatal::Usage(format!(
                "{} mirrors lease {} over {have:?}, not {asked:?}; omit --lease to resume it, or \
                 use another directory",
                self.dir.display(),
                saved.lease_id
            )));
        }
        let renew = json!({"lease_id": saved.lease_id, "ttl_ms": self.ttl_ms});
        match self.link.call("patchdiff_replica_renew", renew).await {
            Ok(v) => {
                let lease: Lease = serde_json::from_value(v)
                    .map_err(|e| Fatal::Failed(format!("renew answered no lease: {e}")))?;
                self.state = SyncState {
                    expires_at_ms: lease.expires_at_ms,
                    ..saved
                };
                let (id, at) = (&self.state.lease_id, self.state.expires_at_ms);
                self.out.event(
                    "lease",
                    json!({"lease_id": id, "resumed": true, "expires_at_ms": at,
                           "targets": self.state.target_names()}),
                    || format!("resumed lease {id} (expires at {at} ms)"),
                );
                Ok(())
            }
            Err(Failure::Refused { code, message }) if options.lease_id.is_none() => {
                let waiting = self.waiting_changes(&saved)?;
                if !waiting.is_empty() {
                    return Err(Fatal::Failed(format!(
                        "lease {} of {} ended ({code}: {message}) while local changes wait in {}; \
                         they cannot be submitted under a new lease's checkpoint: move them away \
                         and sync again",
                        saved.lease_id,
                        self.dir.display(),
                        waiting.join(", ")
                    )));
                }
                self.out.event(
                    "lease_ended",
                    json!({"lease_id": saved.lease_id, "code": code}),
                    || {
                        format!(
                            "lease {} ended ({code}); acquiring a new one",
                            saved.lease_id
                        )
                    },
                );
                let names = saved.target_names();
                self.acquire(&saved.integration, &names, Some(&saved)).await
            }
            Err(f) => Err(Fatal::Failed(f.describe("patchdiff_replica_renew"))),
        }
    }

    /// The files of `saved` holding a change its lease has not settled.
    fn waiting_changes(&self, saved: &SyncState) -> Result<Vec<String>, Fatal> {
        let mut out = Vec::new();
        for t in &saved.targets {
            let path = self.dir.join(&t.file);
            let bytes = read_file(&path).map_err(Fatal::Failed)?;
            if t.pending.is_some() || bytes.is_some_and(|b| b != t.content.as_bytes()) {
                out.push(path.display().to_string());
            }
        }
        Ok(out)
    }

    /// R1: acquires a lease over `targets` and mirrors its checkpoint. A file already in DIR
    /// that is neither the checkpoint's content nor (with `previous`) the content its earlier
    /// lease wrote is refused, naming it, and the new lease is released.
    async fn acquire(
        &mut self,
        integration: &str,
        targets: &[String],
        previous: Option<&SyncState>,
    ) -> Result<(), Fatal> {
        if let Some((a, b)) = mirror::colliding_names(targets) {
            return Err(Fatal::Usage(format!(
                "targets {a:?} and {b:?} would share one file ({}) on a case-insensitive file \
                 system; lease them into separate directories",
                mirror::file_name(&a)
            )));
        }
        let args = json!({"integration": integration, "targets": targets, "ttl_ms": self.ttl_ms});
        let cp: Checkpoint = match self.link.call("patchdiff_replica_acquire", args).await {
            Ok(v) => serde_json::from_value(v)
                .map_err(|e| Fatal::Failed(format!("acquire answered no checkpoint: {e}")))?,
            Err(f) => return Err(Fatal::Failed(f.describe("patchdiff_replica_acquire"))),
        };
        let mut conflicts = Vec::new();
        for t in &cp.targets {
            let path = self.dir.join(mirror::file_name(&t.name));
            let earlier = previous
                .and_then(|p| p.targets.iter().find(|s| s.target == t.name))
                .map(|s| s.content.as_bytes());
            match read_file(&path).map_err(Fatal::Failed)? {
                Some(b) if b != t.content.as_bytes() && Some(b.as_slice()) != earlier => {
                    conflicts.push(path.display().to_string());
                }
                _ => {}
            }
        }
        if !conflicts.is_empty() {
            let release = json!({"lease_id": cp.lease.lease_id});
            let _ = self.link.call("patchdiff_replica_release", release).await;
            return Err(Fatal::Failed(format!(
                "{} already exist with other content than the checkpoint; nothing was written and \
                 the lease was released: move them away (or sync them into the lease that wrote \
                 them) and sync again",
                conflicts.join(", ")
            )));
        }
        self.state = SyncState {
            lease_id: cp.lease.lease_id.clone(),
            integration: cp.lease.integration.clone(),
            expires_at_ms: cp.lease.expires_at_ms,
            targets: cp
                .targets
                .iter()
                .map(|t| TargetState {
                    target: t.name.clone(),
                    file: mirror::file_name(&t.name),
                    cursor: t.cursor.clone(),
                    sha256: t.sha256.clone(),
                    content: t.content.clone(),
                    pending: None,
                })
                .collect(),
        };
        self.save_state().map_err(Fatal::Failed)?;
        let (id, at) = (&self.state.lease_id, self.state.expires_at_ms);
        self.out.event(
            "lease",
            json!({"lease_id": id, "resumed": false, "expires_at_ms": at,
                   "targets": self.state.target_names()}),
            || format!("acquired lease {id} as {integration} (expires at {at} ms)"),
        );
        for (t, c) in self.state.targets.iter().zip(&cp.targets) {
            let path = self.dir.join(&t.file);
            self.write_atomic(&path, &t.content)
                .map_err(Fatal::Failed)?;
            self.out.event(
                "mirrored",
                json!({"target": t.target, "file": path, "revision": c.revision,
                       "sha256": t.sha256}),
                || {
                    format!(
                        "{} ← target {} at revision {}",
                        path.display(),
                        t.target,
                        c.revision
                    )
                },
            );
        }
        Ok(())
    }

    /// Writes the state file atomically.
    fn save_state(&self) -> Result<(), String> {
        let bytes = serde_json::to_vec_pretty(&self.state).map_err(|e| e.to_string())?;
        let path = Self::state_path(&self.dir);
        let tmp = self.temp_path();
        std::fs::write(&tmp, &bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn temp_path(&self) -> PathBuf {
        self.dir
            .join(STATE_DIR)
            .join(format!("tmp-{}", uuid::Uuid::new_v4()))
    }

    /// Replaces `path` by `content`: written and synced to a temporary file beside the state,
    /// with the old file's permissions, then renamed over it.
    fn write_atomic(&self, path: &Path, content: &str) -> Result<(), String> {
        use std::io::Write;
        let tmp = self.temp_path();
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(content.as_bytes())?;
            f.sync_all()?;
            if let Ok(meta) = std::fs::metadata(path) {
                std::fs::set_permissions(&tmp, meta.permissions())?;
            }
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })
    }

    /// [`Sync::write_atomic`] only if `path` still holds `expected` (`None`: no file) just
    /// before the rename; false when a local change was written meanwhile (nothing written).
    fn write_if_unchanged(
        &self,
        path: &Path,
        expected: Option<&[u8]>,
        content: &str,
    ) -> Result<bool, String> {
        if read_file(path)?.as_deref() != expected {
            return Ok(false);
        }
        self.write_atomic(path, content)?;
        Ok(true)
    }

    /// R1: renews the lease when less than half its length (plus one interval) is left.
    async fn renew_if_due(&mut self) -> Result<(), String> {
        let margin = self.ttl_ms / 2 + self.interval.as_millis() as u64;
        if now_ms().saturating_add(margin) < self.state.expires_at_ms {
            return Ok(());
        }
        let args = json!({"lease_id": self.state.lease_id, "ttl_ms": self.ttl_ms});
        let v = self
            .link
            .call("patchdiff_replica_renew", args)
            .await
            .map_err(|f| f.describe("patchdiff_replica_renew"))?;
        let lease: Lease = serde_json::from_value(v).map_err(|e| e.to_string())?;
        self.state.expires_at_ms = lease.expires_at_ms;
        self.save_state()?;
        let (id, at) = (&self.state.lease_id, lease.expires_at_ms);
        self.out.event(
            "renewed",
            json!({"lease_id": id, "expires_at_ms": at}),
            || format!("renewed lease {id} until {at} ms"),
        );
        Ok(())
    }

    /// R1: releases the lease; the state stays, so a later sync acquires a new one.
    async fn release(&mut self) -> Result<(), String> {
        let args = json!({"lease_id": self.state.lease_id});
        self.link
            .call("patchdiff_replica_release", args)
            .await
            .map_err(|f| f.describe("patchdiff_replica_release"))?;
        let id = &self.state.lease_id;
        self.out.event("released", json!({"lease_id": id}), || {
            format!("released lease {id}")
        });
        Ok(())
    }
}

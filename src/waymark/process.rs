//! Process ownership helpers (SPEC W9, W11, W12): process creation identity (pid + start time),
//! liveness checks, process-group kill, RSS sampling and the capped stderr capture.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

/// A process's creation identity: its pid and its start time (Linux: clock ticks since boot,
/// field 22 of `/proc/<pid>/stat`; elsewhere: seconds since the epoch). A pid whose start time
/// differs has been reused (W12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    pub start_time: u64,
}

impl ProcessIdentity {
    /// The identity of a running process, if it can be read.
    pub fn of(pid: u32) -> Option<Self> {
        process_start_time(pid).map(|start_time| Self { pid, start_time })
    }

    /// This process.
    pub fn current() -> Option<Self> {
        Self::of(std::process::id())
    }
}

/// What a recorded identity says about a process now (W12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Running, same creation identity.
    Alive,
    /// No such process (or only a zombie left).
    Dead,
    /// The pid runs a different process (start time differs).
    Reused,
    /// Cannot tell (e.g. no permission to read it).
    Unknown,
}

/// Checks `identity` against the running system.
pub fn liveness(identity: ProcessIdentity) -> Liveness {
    match read_stat(identity.pid) {
        StatRead::Missing => Liveness::Dead,
        StatRead::Unreadable => Liveness::Unknown,
        StatRead::Stat { state, start_time } => {
            if start_time != identity.start_time {
                Liveness::Reused
            } else if state == 'Z' || state == 'X' {
                Liveness::Dead
            } else {
                Liveness::Alive
            }
        }
    }
}

/// True when `pid` names a running (non-zombie) process.
pub fn is_running(pid: u32) -> bool {
    matches!(read_stat(pid), StatRead::Stat { state, .. } if state != 'Z' && state != 'X')
}

enum StatRead {
    Missing,
    Unreadable,
    Stat { state: char, start_time: u64 },
}

#[cfg(target_os = "linux")]
fn read_stat(pid: u32) -> StatRead {
    let Ok(pid) = i32::try_from(pid) else {
        return StatRead::Missing;
    };
    match procfs::process::Process::new(pid).and_then(|p| p.stat()) {
        Ok(stat) => StatRead::Stat {
            state: stat.state,
            start_time: stat.starttime,
        },
        Err(procfs::ProcError::NotFound(_)) => StatRead::Missing,
        Err(_) => StatRead::Unreadable,
    }
}

/// A process's scheduler state letter (`R`, `S`, `Z`, …) for display, or `gone`. For a zombie
/// (exited, not yet reaped) its wait status follows: `Z exit 1`, `Z signal 9`.
pub fn state_summary(pid: u32) -> String {
    #[cfg(target_os = "linux")]
    {
        let stat = i32::try_from(pid).map_err(|_| ()).and_then(|pid| {
            procfs::process::Process::new(pid)
                .and_then(|p| p.stat())
                .map_err(|_| ())
        });
        match stat {
            Ok(stat) => describe_state(stat.state, stat.exit_code),
            Err(()) => "gone".to_owned(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        if is_running(pid) {
            "R".to_owned()
        } else {
            "gone".to_owned()
        }
    }
}

/// [`state_summary`]'s text for a state letter and (Linux ≥ 3.5) the raw wait status.
pub fn describe_state(state: char, exit_code: Option<i32>) -> String {
    match (state, exit_code) {
        ('Z', Some(status)) if status & 0x7f == 0 => format!("Z exit {}", (status >> 8) & 0xff),
        ('Z', Some(status)) => format!("Z signal {}", status & 0x7f),
        (state, _) => state.to_string(),
    }
}

#[cfg(not(target_os = "linux"))]
fn read_stat(pid: u32) -> StatRead {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let Ok(mut sys) = System::new() else {
        return StatRead::Unreadable;
    };
    let p = Pid::from_u32(pid);
    sys.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[p]),
        true,
        ProcessRefreshKind::nothing(),
    );
    match sys.process(p) {
        None => StatRead::Missing,
        Some(proc_) => StatRead::Stat {
            state: 'R',
            start_time: proc_.start_time(),
        },
    }
}

/// Start time of `pid` (see [`ProcessIdentity`]), if it runs and can be read.
pub fn process_start_time(pid: u32) -> Option<u64> {
    match read_stat(pid) {
        StatRead::Stat { start_time, .. } => Some(start_time),
        _ => None,
    }
}

/// W11: SIGKILLs the process group led by `pgid` (the child runs in its own group). A group that
/// no longer exists is not an error.
pub fn kill_group(pgid: u32) -> Result<(), nix::Error> {
    let Ok(raw) = i32::try_from(pgid) else {
        return Err(nix::Error::EINVAL);
    };
    if raw <= 1 {
        return Err(nix::Error::EINVAL);
    }
    match nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(raw),
        nix::sys::signal::Signal::SIGKILL,
    ) {
        Ok(()) | Err(nix::Error::ESRCH) => Ok(()),
        Err(e) => Err(e),
    }
}

/// W9: samples RSS of one process with `sysinfo`.
pub struct RssSampler {
    system: Option<sysinfo::System>,
}

impl Default for RssSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl RssSampler {
    /// A sampler (no processes loaded yet).
    pub fn new() -> Self {
        Self {
            system: sysinfo::System::new().ok(),
        }
    }

    /// Resident set size of `pid` in bytes, or `None` when it is gone or unreadable.
    pub fn rss_bytes(&mut self, pid: u32) -> Option<u64> {
        use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate};
        let system = self.system.as_mut()?;
        let p = Pid::from_u32(pid);
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[p]),
            true,
            ProcessRefreshKind::nothing().with_memory(),
        );
        system.process(p).map(|proc_| proc_.memory())
    }
}

/// W3: stderr of one generation, capped (64 KiB by default). Bytes past the cap are read and
/// counted but not kept, so the child never blocks on a full pipe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StderrBuffer {
    /// The first `cap` bytes.
    pub bytes: Vec<u8>,
    /// All bytes the child wrote.
    pub total_bytes: u64,
    /// True when `total_bytes` exceeds what was kept.
    pub truncated: bool,
}

/// Reads `stderr` to its end into `buffer`, keeping at most `cap` bytes. With `tee` (the
/// generation's evidence log, a [`crate::redact::RedactingWriter`] in production), the kept
/// bytes are also written to it as they arrive (E1), so whole lines survive even if this
/// process is killed before the generation's cleanup; `tee` is dropped at the end.
pub async fn capture_stderr(
    mut stderr: impl tokio::io::AsyncRead + Unpin,
    buffer: Arc<Mutex<StderrBuffer>>,
    cap: usize,
    mut tee: Option<impl std::io::Write>,
) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut b = buffer.lock().unwrap_or_else(|e| e.into_inner());
                b.total_bytes += n as u64;
                let room = cap.saturating_sub(b.bytes.len());
                let keep = room.min(n);
                b.bytes.extend_from_slice(&chunk[..keep]);
                if keep < n {
                    b.truncated = true;
                }
                if let Some(f) = tee.as_mut()
                    && keep > 0
                {
                    let _ = f.write_all(&chunk[..keep]);
                }
            }
        }
    }
}

/// W11: makes the child `cmd` spawns die with its parent (Linux `PR_SET_PDEATHSIG(SIGKILL)`,
/// set in the child between fork and exec). This complements the stdin-close guard, which runs
/// on Node's main thread: a worker in a long synchronous parse, or a SIGSTOPped one, never reads
/// the end of its stdin, and used to outlive a SIGKILLed parent (by 12.6 s, or forever).
///
/// The signal fires when the *thread* that spawned the child exits: spawn from a thread that
/// lives as long as the owner (a tokio runtime worker, or the thread driving a current-thread
/// runtime), never from a short-lived one. A parent already gone before the `prctl` (the child
/// was reparented) makes the spawn fail with `ESRCH` instead of leaving an orphan.
/// Elsewhere a no-op: the process group and the guard remain the mechanism.
pub fn die_with_parent(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getpid();
        // SAFETY: the closure runs in the forked child before exec and only makes two system
        // calls (prctl, getppid); it allocates nothing and takes no locks, so it is
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
                if nix::unistd::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_identity_is_alive_and_a_different_start_time_is_reuse() {
        let me = ProcessIdentity::current().expect("own identity");
        assert_eq!(liveness(me), Liveness::Alive);
        let reused = ProcessIdentity {
            start_time: me.start_time + 1,
            ..me
        };
        assert_eq!(liveness(reused), Liveness::Reused);
    }

    #[test]
    fn an_exited_and_reaped_process_is_dead() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        let start = process_start_time(pid).unwrap_or(0);
        child.wait().expect("wait");
        assert_eq!(
            liveness(ProcessIdentity {
                pid,
                start_time: start
            }),
            Liveness::Dead
        );
    }

    #[test]
    fn rss_of_this_process_is_positive() {
        let mut s = RssSampler::new();
        assert!(s.rss_bytes(std::process::id()).unwrap_or(0) > 0);
    }
}

//! The per-target serialization boundary (K5, W7): one advisory file lock per target.
//!
//! A submission holds its target's lock from planning through validation to commit, so two
//! submissions of one target — in this process or in any other process using the same
//! database — never interleave, while submissions, saves and reads of *other* targets never wait
//! for it. The SQLite write lock is only held for the short commit transaction.
//!
//! The lock is `flock(2)` on `<database>.target-locks/<sha256(target)[..32]>.lock`. The kernel
//! releases it when the holder's file description closes, so a writer killed with SIGKILL
//! never leaves a target locked (no lease or owner row to expire). Each acquisition opens the
//! file anew, so two threads of one process exclude each other exactly as two processes do.
//! Lock files are never deleted (deleting a lock file races with a process about to lock it).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{ErrorCode, StoreError};
use crate::kernel::sha256_hex;

/// Longest pause between two attempts to take a busy target lock: 5 ms.
const MAX_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// The directory of per-target lock files next to a database.
#[derive(Debug)]
pub(crate) struct TargetLocks {
    dir: PathBuf,
}

/// A held target lock; dropping it releases the boundary.
#[derive(Debug)]
pub(crate) struct TargetLockGuard {
    _lock: Flock<File>,
}

impl TargetLocks {
    /// The lock directory `<database>.target-locks`; created (0700) by the first submission,
    /// so opening a store only to read it creates nothing.
    pub(crate) fn new(database: &Path) -> Self {
        let mut dir = database.as_os_str().to_owned();
        dir.push(".target-locks");
        Self {
            dir: PathBuf::from(dir),
        }
    }

    fn open_lock_file(&self, path: &Path) -> std::io::Result<File> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)
        };
        match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.dir)?;
                open()
            }
            other => other,
        }
    }

    /// Takes target `name`'s lock, waiting at most `timeout` for its holder (another
    /// submission of the same target validating). Errors: `STORAGE` when the wait expires or
    /// the lock file cannot be opened; nothing was changed.
    pub(crate) fn acquire(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<TargetLockGuard, StoreError> {
        let path = self
            .dir
            .join(format!("{}.lock", &sha256_hex(name.as_bytes())[..32]));
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(200);
        let mut file = self.open_lock_file(&path).map_err(|e| {
            StoreError::storage(&format!("opening target lock {}", path.display()), e)
        })?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(TargetLockGuard { _lock: lock }),
                Err((f, Errno::EWOULDBLOCK | Errno::EINTR)) => file = f,
                Err((_, e)) => {
                    return Err(StoreError::storage(&format!("locking target {name}"), e));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::new(
                    ErrorCode::Storage,
                    format!(
                        "target {name} stayed busy for {} ms (another submission of it is being validated); nothing was changed, retry the same request",
                        timeout.as_millis()
                    ),
                ));
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(MAX_POLL_INTERVAL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_target_lock_excludes_the_same_target_but_not_another() {
        let dir = tempfile::tempdir().expect("tempdir");
        let locks = TargetLocks::new(&dir.path().join("db.sqlite"));
        let held = locks.acquire("a", Duration::from_secs(1)).expect("a");
        let err = locks
            .acquire("a", Duration::from_millis(20))
            .expect_err("a is held");
        assert_eq!(err.code, ErrorCode::Storage);
        assert!(
            err.message.contains("target a stayed busy"),
            "{}",
            err.message
        );
        let _b = locks
            .acquire("b", Duration::from_millis(20))
            .expect("b is free");
        drop(held);
        let _a = locks
            .acquire("a", Duration::from_millis(20))
            .expect("a released");
    }
}

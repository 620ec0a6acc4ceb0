//! Generation roots and their ownership manifests; stale-root cleanup (SPEC W12).
//!
//! Each generation works in `<work_root>/waymark-<owner pid>-g<generation>-<random>/` holding
//! `manifest.json` (owner and child creation identities, created time) and one directory per
//! request. At startup a root is removed only when its manifest is valid *and* its owner is
//! confirmed dead or its pid reused; everything else is kept and reported.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::process::{Liveness, ProcessIdentity, kill_group, liveness};

/// Prefix of generation root directory names.
pub const ROOT_PREFIX: &str = "waymark-";
/// Manifest file name inside a generation root.
pub const MANIFEST: &str = "manifest.json";
/// Manifest format version.
pub const MANIFEST_FORMAT: u32 = 1;

/// W12: the ownership manifest of one generation root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub generation: u64,
    pub owner: ProcessIdentity,
    /// `None` until the child has been spawned.
    pub child: Option<ProcessIdentity>,
    /// Unix time in milliseconds.
    pub created_unix_ms: u64,
}

/// Creates `dir` (and parents) with mode 0700 and checks it is ours: a work root under `/tmp`
/// that another user created first (or a symlink planted there) is refused, not written into
/// (never another user's directory; see [`crate::owned_fs::create_owned_dir`]).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    crate::owned_fs::create_owned_dir(dir)
}

/// Writes a private (0600) file atomically: a temp file in the same directory, then rename.
/// Not fsynced: these files are ephemeral (request files) or re-validated on read (manifests).
pub fn write_private_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
    }
    std::fs::rename(&tmp, path)
}

/// Writes `bytes` to a new private file (0600) at `path`; fails if it exists.
pub fn write_private_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(bytes)
}

/// Writes `manifest` into `root`.
pub fn write_manifest(root: &Path, manifest: &Manifest) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
    write_private_atomic(&root.join(MANIFEST), &bytes)
}

/// Reads and validates the manifest in `root`.
pub fn read_manifest(root: &Path) -> Result<Manifest, String> {
    let bytes = std::fs::read(root.join(MANIFEST)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "manifest_missing".to_owned(),
        _ => format!("manifest_unreadable: {e}"),
    })?;
    let m: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("manifest_invalid: {e}"))?;
    if m.format != MANIFEST_FORMAT {
        return Err(format!("manifest_invalid: unknown format {}", m.format));
    }
    if m.owner.pid == 0 {
        return Err("manifest_invalid: owner pid 0".to_owned());
    }
    Ok(m)
}

/// One root looked at by the sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleRoot {
    pub path: PathBuf,
    /// Removed: `owner_dead`, `owner_pid_reused`. Kept: `manifest_missing`, `manifest_invalid…`,
    /// `owner_alive`, `owner_unknown`, `remove_failed…`.
    pub reason: String,
}

/// W12: what the startup sweep removed and what it kept (ambiguous roots are reported here).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StaleReport {
    pub removed: Vec<StaleRoot>,
    pub kept: Vec<StaleRoot>,
}

/// Sweeps `work_root` for stale generation roots (W12). Roots owned by `own` (this process) are
/// skipped. A confirmed-orphan child (recorded identity still alive, owner dead/reused) has its
/// process group killed before its root is removed.
pub fn sweep(work_root: &Path, own: Option<ProcessIdentity>) -> StaleReport {
    let mut report = StaleReport::default();
    let Ok(entries) = std::fs::read_dir(work_root) else {
        return report;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(ROOT_PREFIX) {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if !is_dir {
            continue;
        }
        let manifest = match read_manifest(&path) {
            Ok(m) => m,
            Err(reason) => {
                report.kept.push(StaleRoot { path, reason });
                continue;
            }
        };
        if Some(manifest.owner) == own {
            continue; // one of ours, alive
        }
        let reason = match liveness(manifest.owner) {
            Liveness::Dead => "owner_dead",
            Liveness::Reused => "owner_pid_reused",
            Liveness::Alive => {
                report.kept.push(StaleRoot {
                    path,
                    reason: "owner_alive".into(),
                });
                continue;
            }
            Liveness::Unknown => {
                report.kept.push(StaleRoot {
                    path,
                    reason: "owner_unknown".into(),
                });
                continue;
            }
        };
        if let Some(child) = manifest.child
            && liveness(child) == Liveness::Alive
        {
            let _ = kill_group(child.pid);
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => report.removed.push(StaleRoot {
                path,
                reason: reason.into(),
            }),
            Err(e) => report.kept.push(StaleRoot {
                path,
                reason: format!("remove_failed: {e}"),
            }),
        }
    }
    report.removed.sort_by(|a, b| a.path.cmp(&b.path));
    report.kept.sort_by(|a, b| a.path.cmp(&b.path));
    report
}

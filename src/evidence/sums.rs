//! The seal's digests (V1): `SHA256SUMS` over every evidence file of a run, the seal over it
//! and the manifest, and the refusal to write into a sealed run.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::run_dir::{MANIFEST_FILE, RunDir};
use super::{line_digest, write_new_private};

pub use super::run_dir::{SEAL_FILE, SIGNATURE_FILE, SUMS_FILE};
/// First line of a seal.
pub const SEAL_HEADER: &str = "patchdiff-seal 1";

/// SHA-256 (hex) of a file, read in 64 KiB blocks.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// SQLite's volatile side files of a database (`X.sqlite-wal`, `-shm`, `-journal`): never
/// sealed. The seal checkpoints the database first, so its content is in the main
/// file; `verify` names a non-empty WAL as writes after the seal and never replays it.
pub fn is_volatile_side_file(rel: &str) -> bool {
    [".sqlite-wal", ".sqlite-shm", ".sqlite-journal"]
        .iter()
        .any(|s| rel.ends_with(s))
}

/// Every regular file under `root` (recursively; symlinks are not followed) except the sums,
/// the seal, its signature and SQLite's volatile side files ([`is_volatile_side_file`]), as `/`-separated
/// relative paths, sorted.
pub fn evidence_files(root: &Path) -> std::io::Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                walk(root, &path, out)?;
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .map_err(std::io::Error::other)?
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                if rel != SUMS_FILE
                    && rel != SEAL_FILE
                    && rel != SIGNATURE_FILE
                    && !is_volatile_side_file(&rel)
                {
                    out.push(rel);
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// Whether a run file is a hash-chained evidence log: every JSONL file of a run (wire logs,
/// transcript, host streams, perf events and memory samples).
pub fn is_chained(rel: &str) -> bool {
    rel.ends_with(".jsonl")
}

/// The sealed run directory `path` would be written into, if any (no command of ours
/// writes into a sealed run): the nearest ancestor of `path` holding [`SEAL_FILE`]. `path`
/// need not exist; relative paths are taken from the current directory.
pub fn sealed_run_containing(path: &Path) -> Option<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    // Resolve what exists (symlinks, `..`), keep the rest as given.
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
    let mut resolved = existing.canonicalize().ok()?;
    for part in rest.iter().rev() {
        resolved.push(part);
    }
    resolved
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(SEAL_FILE).is_file())
        .map(Path::to_path_buf)
}

/// `Err` naming the sealed run when `path` lies inside one ([`sealed_run_containing`]).
pub fn refuse_sealed_destination(path: &Path) -> Result<(), String> {
    match sealed_run_containing(path) {
        Some(run) => Err(format!(
            "refusing to write {}: it is inside the sealed run {} (its {SEAL_FILE} binds every \
             file; anything added would fail `patchdiff verify`); write it outside the run",
            path.display(),
            run.display()
        )),
        None => Ok(()),
    }
}

/// The seal's exact text for these digests.
pub fn seal_text(run_id: &str, manifest_sha256: Option<&str>, sums_sha256: &str) -> String {
    let mut text = format!("{SEAL_HEADER}\nrun {run_id}\n");
    if let Some(m) = manifest_sha256 {
        text.push_str(&format!("SHA256 ({MANIFEST_FILE}) = {m}\n"));
    }
    text.push_str(&format!("SHA256 ({SUMS_FILE}) = {sums_sha256}\n"));
    text
}

/// Seals a finished run (V1): writes [`SUMS_FILE`] over every file in the run directory, then
/// [`SEAL_FILE`]; both are created exclusively. Returns the digest of the sums. Nothing may
/// write into the run afterwards (its processes are stopped first).
pub fn seal_run(run: &RunDir) -> std::io::Result<String> {
    let mut sums = String::new();
    for rel in evidence_files(&run.path)? {
        sums.push_str(&format!("{}  {rel}\n", file_digest(&run.path.join(&rel))?));
    }
    write_new_private(&run.sums(), sums.as_bytes())?;
    let sums_sha256 = line_digest(sums.as_bytes());
    let manifest_sha256 = match file_digest(&run.manifest()) {
        Ok(d) => Some(d),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    write_new_private(
        &run.seal(),
        seal_text(&run.run_id, manifest_sha256.as_deref(), &sums_sha256).as_bytes(),
    )?;
    Ok(sums_sha256)
}

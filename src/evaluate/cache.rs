//! The control cache (V3): a target's controls depend only on the expected and
//! original bytes, the check's files, its command and declared environment, and the toolchain,
//! so their result is kept under the SHA-256 of exactly those (with the toolchain's
//! `--version` output) in `<data dir>/control-cache/<digest>.json`. Only controls that *hold*
//! are stored: a broken environment is re-checked every time. A second canary on the same
//! fixtures reuses them; `--fresh-controls` runs them anyway (and stores the new result).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Controls;

/// Version of the digest's inputs and of the entry format; a change makes old entries unused.
pub const CACHE_FORMAT: u32 = 1;
/// Bytes of a cache entry read at most (1 MiB); a larger file is ignored and replaced.
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// What one control digest covers, in a fixed order (field order is the digest's order).
#[derive(Serialize)]
pub struct DigestInputs<'a> {
    pub format: u32,
    pub target: &'a str,
    pub module_file: &'a str,
    pub expected_sha256: String,
    pub original_sha256: String,
    /// `(file name, SHA-256)` of every file of the check's directory, sorted by name.
    pub check_files: Vec<(String, String)>,
    pub command: &'a [String],
    /// The declared variables as given to the check: `(name, SHA-256 of the value)`.
    pub env: Vec<(String, String)>,
    pub report: Option<&'a str>,
    /// The toolchain command and its exit status plus output (stdout then stderr).
    pub toolchain: &'a [String],
    pub toolchain_output: String,
}

impl DigestInputs<'_> {
    /// Lowercase hex SHA-256 of the canonical JSON of these inputs.
    pub fn digest(&self) -> String {
        let json = serde_json::to_vec(self).expect("digest inputs serialize");
        hex::encode(Sha256::digest(json))
    }
}

/// One stored entry.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    format: u32,
    digest: String,
    target: String,
    controls: Controls,
}

/// Where the controls of one target came from, as the reports show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ControlSource {
    /// `run` (the controls ran now) or `reused` (read from the cache).
    pub how: String,
    /// The control digest (hex SHA-256), or null when there is no cache.
    pub digest: Option<String>,
    /// Why a cache entry was not used or stored, when something went wrong with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ControlSource {
    /// `run` or `reused`, with the digest's first 12 digits: `reused (digest 0a1b2c3d4e5f)`.
    pub fn describe(&self) -> String {
        match &self.digest {
            Some(d) => format!("{} (digest {})", self.how, &d[..d.len().min(12)]),
            None => self.how.clone(),
        }
    }
}

/// The cache directory: entries are `<digest>.json`, 0600, in a 0700 directory.
#[derive(Debug, Clone)]
pub struct ControlCache {
    pub dir: PathBuf,
}

impl ControlCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn entry_path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}.json"))
    }

    /// The stored controls for `digest`, if an entry of this format exists, names this digest
    /// and target, and its controls hold; anything else is `None` (and will be replaced).
    pub fn load(&self, digest: &str, target: &str) -> Option<Controls> {
        let bytes =
            crate::owned_fs::read_regular_bounded(&self.entry_path(digest), MAX_ENTRY_BYTES)
                .ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        (entry.format == CACHE_FORMAT
            && entry.digest == digest
            && entry.target == target
            && entry.controls.failure().is_none())
        .then_some(entry.controls)
    }

    /// Stores controls that hold under `digest` (written to a new private file, then renamed
    /// over any older entry, so a reader never sees half an entry). Errors: the directory or
    /// file cannot be written.
    pub fn store(&self, digest: &str, target: &str, controls: &Controls) -> std::io::Result<()> {
        crate::owned_fs::create_private_dir(&self.dir)?;
        let entry = Entry {
            format: CACHE_FORMAT,
            digest: digest.to_owned(),
            target: target.to_owned(),
            controls: controls.clone(),
        };
        let tmp = self
            .dir
            .join(format!(".{digest}.{}.tmp", uuid::Uuid::new_v4().simple()));
        crate::owned_fs::write_new_private(&tmp, &serde_json::to_vec_pretty(&entry)?)?;
        std::fs::rename(&tmp, self.entry_path(digest)).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

/// `(name, SHA-256)` of every regular file directly in `dir`, sorted by name (the files a check
/// is given; see `run_check`).
pub fn check_file_digests(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let bytes = std::fs::read(entry.path())?;
            files.push((
                entry.file_name().to_string_lossy().into_owned(),
                hex::encode(Sha256::digest(&bytes)),
            ));
        }
    }
    files.sort();
    Ok(files)
}

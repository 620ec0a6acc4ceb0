//! Blocking work of the tool handlers: store calls off the async executor (reads of a local
//! store in place), and the file I/O of the full profile's tools (`init_target` reads fixtures,
//! `export_target` writes exports) on a blocking thread, never into the store's own files.

use std::path::Path;

use super::*;

impl PatchdiffServer {
    /// A read of the store on the caller's own thread, when that is cheap and allowed: SQLite
    /// (a read transaction on a local file, the content cached per revision) on a
    /// multi-threaded runtime, through `block_in_place` so the other tasks move to another
    /// worker meanwhile. That saves the hop to the blocking pool and back — two thread wake-ups
    /// on the path of every `read_target`, the largest part of its cost over a bare server
    /// (`mcp-bench`). Anything else (PostgreSQL's network round trip, a current-thread runtime)
    /// goes through [`Self::blocking`].
    pub(super) async fn reading<T, F>(&self, f: F) -> Result<T, DomainError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn EditStore) -> Result<T, StoreError> + Send + 'static,
    {
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if self.local_store && multi_thread {
            return tokio::task::block_in_place(|| f(self.store.as_ref()))
                .map_err(DomainError::from);
        }
        self.blocking(f).await
    }

    /// Runs blocking store work off the async executor.
    pub(super) async fn blocking<T, F>(&self, f: F) -> Result<T, DomainError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn EditStore) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(store.as_ref()))
            .await
            .map_err(|e| DomainError::new(DomainCode::Internal, format!("store task failed: {e}")))?
            .map_err(DomainError::from)
    }
}

/// Runs file I/O on a blocking thread, never on the runtime (a FIFO or our own stdin must not
/// stall it). A failed task is `INTERNAL` ("`task` task failed: …"); an I/O error is
/// whatever `refused` makes of it.
pub(super) async fn file_io<T: Send + 'static>(
    task: &str,
    io: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    refused: impl FnOnce(std::io::Error) -> DomainError,
) -> Result<T, DomainError> {
    tokio::task::spawn_blocking(io)
        .await
        .map_err(|e| DomainError::new(DomainCode::Internal, format!("{task} task failed: {e}")))?
        .map_err(refused)
}

/// Writes an export file exclusively (0600; parents it creates 0700); never overwrites.
pub(super) fn write_export(dest: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = dest.parent() {
        crate::owned_fs::create_private_dir(parent)?;
    }
    crate::owned_fs::write_new_private(dest, bytes)
}

/// SQLite's own files beside a database: an export named like one of them could be taken for
/// (and deleted as) a hot journal.
pub(super) const SIDECAR_SUFFIXES: [&str; 3] = ["-journal", "-wal", "-shm"];

/// An export never lands in the store's own directory nor under a sidecar-like name (a hostile `dest`:
/// SQLite deleted such an export).
pub(super) fn refuse_store_paths(dest: &Path, database: &Path) -> Result<(), DomainError> {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned());
    if let Some(suffix) = name
        .as_deref()
        .and_then(|n| SIDECAR_SUFFIXES.iter().find(|s| n.ends_with(*s)))
    {
        return Err(DomainError::new(
            DomainCode::InvalidDest,
            format!(
                "`dest` {} ends in `{suffix}`, like an SQLite journal file; choose a name not                  ending in -journal, -wal or -shm",
                dest.display()
            ),
        ));
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if let (Some(dest_dir), Some(db_dir)) = (dest.parent(), database.parent())
        && canonical(dest_dir) == canonical(db_dir)
    {
        return Err(DomainError::new(
            DomainCode::InvalidDest,
            format!(
                "`dest` {} is in the database's own directory {}; export to another directory",
                dest.display(),
                db_dir.display()
            ),
        ));
    }
    Ok(())
}

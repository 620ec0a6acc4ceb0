//! Sealing a run's SQLite file: checkpoint the WAL into the main file (`report`).

use super::*;

/// `file:` URI for `path` with `immutable=1` (percent-encoding what a URI path may not hold).
pub(super) fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Checkpoints the SQLite database at `path` into its main file and truncates its WAL
/// (`PRAGMA wal_checkpoint(TRUNCATE)`), for sealing a run: afterwards the main file
/// holds every committed transaction and, once the last connection closes, SQLite removes the
/// `-wal` and `-shm` side files. A missing file is nothing to do.
///
/// Errors: `STORAGE` when it cannot be opened, or another connection kept the checkpoint from
/// completing within the busy timeout (a handle the run still holds).
pub fn checkpoint_for_seal(path: &Path) -> Result<(), StoreError> {
    use rusqlite::OpenFlags;
    if !path.is_file() {
        return Ok(());
    }
    let ctx = format!("checkpointing database {}", path.display());
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::storage(&ctx, e))?;
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
        .map_err(|e| StoreError::storage(&ctx, e))?;
    let (busy, _log, _done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(|e| StoreError::storage(&ctx, e))?;
    if busy != 0 {
        return Err(StoreError::new(
            ErrorCode::Storage,
            format!(
                "{ctx}: another connection still holds the database, so its WAL could not be \
                 checkpointed; close every reader of the run before sealing it"
            ),
        ));
    }
    conn.close().map_err(|(_, e)| StoreError::storage(&ctx, e))
}

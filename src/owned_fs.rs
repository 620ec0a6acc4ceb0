//! Files and directories this process owns (E1, T1: never touch a file we do not own).
//!
//! Every private file — perf events, memory samples, evidence logs, the database — is opened
//! with `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat`: it must be a regular file owned by
//! the effective uid. Only a file this process *created* (`O_EXCL`) gets its mode set; an
//! existing one is used as it is or refused, never `chmod`ed. Directories we create are 0700.
//! A refusal changes nothing and says what was wrong and what is accepted.
//!
//! Fixtures go the other way: [`read_regular_bounded`] reads a regular file of bounded size and
//! refuses FIFOs, devices and our own stdin.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Permission bits a private file may have: owner read/write only.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// Why a path was refused (the `std::io::Error` carries this in its message; telemetry reports
/// [`Refusal::code`] as its `invalid_reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A symbolic link: we never write through one.
    Symlink,
    /// A device node, FIFO, socket or directory (named).
    NotRegular(&'static str),
    /// A regular file owned by another uid.
    ForeignOwner { uid: u32 },
    /// Our own file, but group or others may access it (mode shown in octal).
    SharedMode { mode: u32 },
    /// Larger than the caller's cap (bytes).
    TooLarge { len: u64, cap: u64 },
}

impl Refusal {
    /// Stable snake_case code, e.g. `not_a_regular_file`.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Symlink => "symlink",
            Refusal::NotRegular(_) => "not_a_regular_file",
            Refusal::ForeignOwner { .. } => "not_owned_by_us",
            Refusal::SharedMode { .. } => "accessible_by_others",
            Refusal::TooLarge { .. } => "too_large",
        }
    }

    fn describe(&self) -> String {
        let euid = nix::unistd::geteuid();
        match self {
            Refusal::Symlink => "is a symbolic link; give the real path of a regular file".into(),
            Refusal::NotRegular(kind) => {
                format!("is a {kind}, not a regular file; give the path of a regular file")
            }
            Refusal::ForeignOwner { uid } => format!(
                "is owned by uid {uid}, not by this process's uid {euid}; use a file of your own \
                 or a path that does not exist yet"
            ),
            Refusal::SharedMode { mode } => format!(
                "is accessible by group or others (mode {mode:04o}); `chmod 600` it yourself or \
                 use a path that does not exist yet"
            ),
            Refusal::TooLarge { len, cap } => {
                format!("is {len} bytes, over the limit of {cap} bytes")
            }
        }
    }

    /// The refusal as an I/O error naming `path`, ending with "nothing was changed".
    pub fn into_error(self, path: &Path) -> std::io::Error {
        let kind = match self {
            Refusal::TooLarge { .. } => std::io::ErrorKind::InvalidData,
            _ => std::io::ErrorKind::PermissionDenied,
        };
        std::io::Error::new(
            kind,
            RefusalError {
                message: format!(
                    "{} {}; nothing was changed",
                    path.display(),
                    self.describe()
                ),
                refusal: self,
            },
        )
    }

    /// The refusal carried by `err`, if it is one.
    pub fn of(err: &std::io::Error) -> Option<&Refusal> {
        err.get_ref()
            .and_then(|e| e.downcast_ref::<RefusalError>())
            .map(|e| &e.refusal)
    }
}

#[derive(Debug)]
struct RefusalError {
    refusal: Refusal,
    message: String,
}

impl std::fmt::Display for RefusalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RefusalError {}

fn kind_name(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Checks an already-opened (or `lstat`ed) file: regular, owned by the effective uid, and —
/// with `private` — not accessible by group or others.
fn check_owned(meta: &Metadata, private: bool) -> Result<(), Refusal> {
    if meta.file_type().is_symlink() {
        return Err(Refusal::Symlink);
    }
    if !meta.file_type().is_file() {
        return Err(Refusal::NotRegular(kind_name(meta)));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(Refusal::ForeignOwner { uid: meta.uid() });
    }
    let mode = meta.mode() & 0o7777;
    if private && mode & 0o077 != 0 {
        return Err(Refusal::SharedMode { mode });
    }
    Ok(())
}

/// Checks, without opening or changing anything, that an existing `path` is a regular file
/// owned by the effective uid (`Ok(true)`), or that nothing is there yet (`Ok(false)`).
pub fn check_existing_owned(path: &Path) -> std::io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check_owned(&meta, false)
            .map(|()| true)
            .map_err(|r| r.into_error(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens `path` with `options` plus `O_NOFOLLOW | O_NONBLOCK` (a FIFO never blocks the open),
/// then clears `O_NONBLOCK` again.
fn open_nofollow(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            // ELOOP: the last component is a symlink (O_NOFOLLOW).
            if e.raw_os_error() == Some(libc::ELOOP) {
                Refusal::Symlink.into_error(path)
            } else {
                e
            }
        })?;
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(&file, FcntlArg::F_GETFL)?);
    fcntl(&file, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(file)
}

/// How [`open_append_private`] found its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This call created the file (and set it 0600).
    Created,
    /// The file existed: a regular 0600 (or narrower) file of ours; its mode was left alone.
    Existing,
}

/// Opens `path` for appending (E1, E2, T1). A missing file is created exclusively and set to
/// exactly 0600; an existing one must be a regular file owned by the effective uid with no
/// group/other access, and is not `chmod`ed. Symlinks, devices, FIFOs and other users' files
/// are refused ([`Refusal`]) without being changed.
pub fn open_append_private(path: &Path) -> std::io::Result<File> {
    open_append_private_with_origin(path).map(|(f, _)| f)
}

/// [`open_append_private`], also saying whether the file was created.
pub fn open_append_private_with_origin(path: &Path) -> std::io::Result<(File, Origin)> {
    // Two rounds: a file removed between the exclusive create and the plain open is retried once.
    for _ in 0..2 {
        match open_nofollow(
            OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(PRIVATE_FILE_MODE),
            path,
        ) {
            Ok(file) => {
                // Ours: set exactly 0600 (the umask may have narrowed it further).
                file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
                return Ok((file, Origin::Created));
            }
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            Err(_) => {}
        }
        // It exists: look before opening, so a device node is never even opened.
        let before = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        check_owned(&before, true).map_err(|r| r.into_error(path))?;
        let file = match open_nofollow(OpenOptions::new().append(true), path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        check_owned(&meta, true).map_err(|r| r.into_error(path))?;
        if (meta.dev(), meta.ino()) != (before.dev(), before.ino()) {
            return Err(std::io::Error::other(format!(
                "{} was replaced while it was being opened; nothing was changed",
                path.display()
            )));
        }
        return Ok((file, Origin::Existing));
    }
    Err(std::io::Error::other(format!(
        "{} keeps appearing and disappearing; nothing was changed",
        path.display()
    )))
}

/// Writes `bytes` to a new file at `path` (0600); fails if anything exists there, a symlink
/// included (E2: never rewritten).
pub fn write_new_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_new_private_unsynced(path, bytes)?.sync_all()
}

/// [`write_new_private`] without the `fsync`, for files whose every reader verifies them first
/// and re-creates them when they are wrong (the unpacked bundle, `crate::assets`): a crash can
/// lose them but never lets a bad one be used, so waiting for the disk buys nothing. Returns
/// the open file.
pub fn write_new_private_unsynced(path: &Path, bytes: &[u8]) -> std::io::Result<File> {
    let mut f = open_nofollow(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE_MODE),
        path,
    )?;
    f.set_permissions(std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
    f.write_all(bytes)?;
    Ok(f)
}

/// Creates `path` (and missing parents) as private directories, mode 0700 (E1). Directories
/// that already exist keep their mode (`--runs-dir /tmp` must not strip `/tmp`'s bits); each
/// one this call creates is set to exactly 0700.
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(path);
    while let Some(p) = cur {
        if p.as_os_str().is_empty() || std::fs::symlink_metadata(p).is_ok() {
            break;
        }
        missing.push(p);
        cur = p.parent();
    }
    for dir in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {
                // The umask may only narrow the mode; set it exactly on what we created.
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
            // Someone else created it in between: theirs, leave it alone.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    if !path.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{} exists and is not a directory", path.display()),
        ));
    }
    Ok(())
}

/// [`create_private_dir`], then checks that `path` — created now or before, possibly by someone
/// else (a predictable name under `/tmp`) — is a real directory owned by the effective uid that
/// group and others cannot write to. Refuses otherwise, changing nothing.
pub fn create_owned_dir(path: &Path) -> std::io::Result<()> {
    create_private_dir(path)?;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(Refusal::Symlink.into_error(path));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(Refusal::ForeignOwner { uid: meta.uid() }.into_error(path));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Refusal::SharedMode { mode }.into_error(path));
    }
    Ok(())
}

/// Reads a fixture (C1; never a device or an unbounded read): `path` must name a regular file of at most `cap` bytes. The
/// open never blocks (`O_NONBLOCK`: a FIFO with no writer is refused, not waited on), FIFOs,
/// devices and sockets — `/dev/stdin`, `/proc/self/fd/0` included — are refused, and the read
/// stops at `cap + 1` bytes even if the file grows meanwhile. Blocking: call it from
/// `spawn_blocking` in async code.
pub fn read_regular_bounded(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(Refusal::NotRegular(kind_name(&meta)).into_error(path));
    }
    if meta.len() > cap {
        return Err(Refusal::TooLarge {
            len: meta.len(),
            cap,
        }
        .into_error(path));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(Refusal::TooLarge {
            len: bytes.len() as u64,
            cap,
        }
        .into_error(path));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_file_is_created_0600_and_reopened_without_chmod() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let (_, origin) = open_append_private_with_origin(&path).unwrap();
        assert_eq!((origin, mode(&path)), (Origin::Created, 0o600));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o200)).unwrap();
        let (_, origin) = open_append_private_with_origin(&path).unwrap();
        assert_eq!((origin, mode(&path)), (Origin::Existing, 0o200));
    }

    #[test]
    fn a_symlink_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("theirs.txt");
        std::fs::write(&target, b"theirs").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = open_append_private(&link).unwrap_err();
        assert_eq!(Refusal::of(&err), Some(&Refusal::Symlink), "{err}");
        assert!(err.to_string().contains("nothing was changed"), "{err}");
        assert_eq!(mode(&target), 0o644);
        assert_eq!(std::fs::read(&target).unwrap(), b"theirs");
        // A dangling symlink is not followed to create its target either.
        let dangling = dir.path().join("dangling.jsonl");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(open_append_private(&dangling).is_err());
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let err = open_append_private(&fifo).unwrap_err();
        assert_eq!(Refusal::of(&err), Some(&Refusal::NotRegular("FIFO")));
        assert_eq!(mode(&fifo), 0o644);
        let err = read_regular_bounded(&fifo, 1024).unwrap_err();
        assert_eq!(Refusal::of(&err), Some(&Refusal::NotRegular("FIFO")));
    }

    #[test]
    fn a_shared_existing_file_is_refused_not_chmoded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = open_append_private(&path).unwrap_err();
        assert_eq!(
            Refusal::of(&err),
            Some(&Refusal::SharedMode { mode: 0o644 }),
            "{err}"
        );
        assert_eq!(mode(&path), 0o644);
    }

    #[test]
    fn created_directories_are_0700_and_existing_ones_keep_their_mode() {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let deep = root.path().join("a/b/c");
        create_private_dir(&deep).unwrap();
        for p in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&root.path().join(p)), 0o700, "{p}");
        }
        assert_eq!(mode(root.path()), 0o755);
    }

    #[test]
    fn an_owned_dir_must_be_ours_and_closed_to_others() {
        let root = tempfile::tempdir().unwrap();
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = create_owned_dir(&shared).unwrap_err();
        assert_eq!(
            Refusal::of(&err).map(Refusal::code),
            Some("accessible_by_others")
        );
        assert_eq!(mode(&shared), 0o777);
        let link = root.path().join("link");
        std::os::unix::fs::symlink(root.path(), &link).unwrap();
        assert!(create_owned_dir(&link).is_err());
        create_owned_dir(&root.path().join("fresh/deeper")).unwrap();
    }

    #[test]
    fn a_fixture_over_the_cap_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.js");
        let f = File::create(&path).unwrap();
        f.set_len(2 * 1024 * 1024 * 1024).unwrap(); // 2 GiB sparse
        let err = read_regular_bounded(&path, 1024).unwrap_err();
        assert_eq!(Refusal::of(&err).map(Refusal::code), Some("too_large"));
        std::fs::write(&path, b"ok").unwrap();
        assert_eq!(read_regular_bounded(&path, 2).unwrap(), b"ok");
    }
}

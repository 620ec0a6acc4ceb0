//! `patchdiff mcp`'s stdin and stdout as streams the async runtime's reactor drives (M1).
//!
//! tokio's `stdin()`/`stdout()` do every read and write on a blocking-pool thread: a request's
//! bytes wake that thread, which wakes a runtime worker, and a result's write plus its flush is
//! another hand-off there and back. On a 2-core machine those wake-ups were the largest part of
//! a `read_target` round trip beside a bare rmcp server (`mcp-bench` prints both transports).
//! Every MCP host gives a stdio server a pipe (tokio, Python's subprocess and anyio) or a socket
//! pair (Node's `child_process`: Claude Code, Gemini CLI), and both can be read and written
//! non-blocking under epoll on the worker that awaits them, with no thread between.
//!
//! The descriptors are duplicated, and the duplicates set `O_NONBLOCK`. That flag belongs to the
//! open file description, which fd 0 or 1 may share with another process (a wrapper script that
//! passed its own stdin through), so each stream puts the flags back as they were when it is
//! dropped: serving ends by stdin closing or by SIGTERM, both of which drop it (a SIGKILL leaves
//! the flag set). A terminal, a regular file or `/dev/null` is left alone and served through
//! tokio's own stdio, as before.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One end of the stdio stream pair, reactor-driven or through tokio's blocking stdio.
pub type Reader = Box<dyn AsyncRead + Unpin + Send>;
/// See [`Reader`].
pub type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// What a standard descriptor is, as far as serving MCP over it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StdioKind {
    /// A pipe or FIFO.
    Pipe,
    /// A stream socket (Node's stdio "pipe" is a Unix socket pair).
    Socket,
    /// A terminal, a regular file, a character device: tokio's blocking stdio.
    Other,
}

/// What `fd` is (`Other` when it cannot be told, e.g. closed).
fn stdio_kind(fd: BorrowedFd<'_>) -> StdioKind {
    match fstat(fd) {
        Ok(st) => match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFIFO => StdioKind::Pipe,
            SFlag::S_IFSOCK => StdioKind::Socket,
            _ => StdioKind::Other,
        },
        Err(_) => StdioKind::Other,
    }
}

/// The process's stdin and stdout for the MCP stdio transport: each reactor-driven when it is a
/// pipe or a socket, else tokio's `stdin()`/`stdout()`. A descriptor that cannot be duplicated
/// or made non-blocking also falls back (never an error: serving goes on the slower way).
pub fn stdio() -> (Reader, Writer) {
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    // Both descriptors' flags are read before either changes: stdin and stdout may be one
    // description (a single socket, as socat or inetd give), and the second stream must not
    // take the first one's O_NONBLOCK for the original.
    let (in_flags, out_flags) = (status_flags(stdin.as_fd()), status_flags(stdout.as_fd()));
    let reader: Reader = match in_flags.and_then(|f| reactor_stream_from(stdin.as_fd(), f)) {
        Some(s) => Box::new(s),
        None => Box::new(tokio::io::stdin()),
    };
    let writer: Writer = match out_flags.and_then(|f| reactor_stream_from(stdout.as_fd(), f)) {
        Some(s) => Box::new(s),
        None => Box::new(tokio::io::stdout()),
    };
    (reader, writer)
}

/// A descriptor's file status flags (`F_GETFL`).
fn status_flags(fd: BorrowedFd<'_>) -> Option<OFlag> {
    fcntl(fd, FcntlArg::F_GETFL)
        .ok()
        .map(OFlag::from_bits_truncate)
}

/// A non-blocking duplicate of `fd` registered with the reactor, when `fd` is a pipe or a
/// socket (`None` otherwise), putting back `original` (the flags as they were before any stream
/// of this process changed them) when dropped. Must be called inside a tokio runtime.
fn reactor_stream_from(fd: BorrowedFd<'_>, original: OFlag) -> Option<ReactorStream> {
    if stdio_kind(fd) == StdioKind::Other {
        return None;
    }
    let dup: OwnedFd = fd.try_clone_to_owned().ok()?;
    fcntl(dup.as_fd(), FcntlArg::F_SETFL(original | OFlag::O_NONBLOCK)).ok()?;
    // SAFETY: the `File` owns the duplicate, so the descriptor stays open, and names the same
    // description, for as long as the `AsyncFd` that owns the `File` lives.
    match unsafe { AsyncFd::register(File::from(dup)) } {
        Ok(fd) => Some(ReactorStream {
            fd,
            flags: original,
        }),
        // Registration failed and took the duplicate with it: put the flags back through the
        // original, which shares the description.
        Err(_) => {
            let _ = fcntl(fd, FcntlArg::F_SETFL(original));
            None
        }
    }
}

/// A pipe or socket end read and written with plain `read(2)`/`write(2)` when the reactor says
/// it is ready (no buffering: a write is on its way when it returns, so flush has nothing to
/// do). Dropping it puts the descriptor's status flags back, then closes the duplicate.
pub struct ReactorStream {
    fd: AsyncFd<File>,
    /// The status flags before `O_NONBLOCK` was added.
    flags: OFlag,
}

impl Drop for ReactorStream {
    fn drop(&mut self) {
        // Runs before the field drops close the duplicate.
        let _ = fcntl(self.fd.get_ref().as_fd(), FcntlArg::F_SETFL(self.flags));
    }
}

impl AsyncRead for ReactorStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let fd = &self.fd;
        loop {
            let mut ready = std::task::ready!(fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|f| retry_interrupted(|| f.get_ref().read(unfilled))) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not ready after all: readiness was cleared; wait again.
                Err(_would_block) => {}
            }
        }
    }
}

impl AsyncWrite for ReactorStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let fd = &self.fd;
        loop {
            let mut ready = std::task::ready!(fd.poll_write_ready(cx))?;
            match ready.try_io(|f| retry_interrupted(|| f.get_ref().write(buf))) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// `op`, again while it fails with `EINTR`.
fn retry_interrupted<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match op() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn reactor_stream(fd: BorrowedFd<'_>) -> Option<ReactorStream> {
        reactor_stream_from(fd, status_flags(fd)?)
    }

    fn nonblocking(fd: BorrowedFd<'_>) -> bool {
        let flags = fcntl(fd, FcntlArg::F_GETFL).expect("F_GETFL");
        OFlag::from_bits_truncate(flags).contains(OFlag::O_NONBLOCK)
    }

    /// On a one-thread runtime, a writer that fills the pipe and the reader draining it take
    /// turns: a blocking write would hang the only thread with the reader never run.
    #[tokio::test(flavor = "current_thread")]
    async fn a_full_pipe_waits_for_the_reader_on_the_reactor_instead_of_blocking_the_thread() {
        let (read_end, write_end) = nix::unistd::pipe().expect("pipe");
        let mut reader = reactor_stream(read_end.as_fd()).expect("a pipe is reactor-driven");
        let mut writer = reactor_stream(write_end.as_fd()).expect("a pipe is reactor-driven");
        // 4 MiB: 64 times a Linux pipe's default capacity.
        let sent: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        let expected = sent.clone();
        let writing = async move {
            writer.write_all(&sent).await.expect("write");
            drop(writer);
        };
        let reading = async move {
            let mut got = Vec::new();
            reader.read_to_end(&mut got).await.expect("read");
            got
        };
        // The originals are still open: end-of-file needs every write end closed.
        drop(write_end);
        // A guard against a hang (a write that blocks the thread never returns here at all).
        let ((), got) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            tokio::join!(writing, reading)
        })
        .await
        .expect("the writer and the reader finish");
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "the bytes arrive whole and in order");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_socket_is_reactor_driven_and_dropping_the_stream_puts_its_flags_back() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        assert_eq!(stdio_kind(theirs.as_fd()), StdioKind::Socket);
        assert!(!nonblocking(theirs.as_fd()));
        let mut stream = reactor_stream(theirs.as_fd()).expect("a socket is reactor-driven");
        assert!(
            nonblocking(theirs.as_fd()),
            "the duplicate shares the description, so the original sees O_NONBLOCK"
        );
        (&ours).write_all(b"ping\n").expect("write");
        let mut buf = [0u8; 5];
        stream.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"ping\n");
        drop(stream);
        assert!(
            !nonblocking(theirs.as_fd()),
            "the flags are as they were before the stream"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_regular_file_or_a_character_device_is_left_to_tokios_stdio_untouched() {
        let file = tempfile::tempfile().expect("tempfile");
        let null = File::open("/dev/null").expect("/dev/null");
        for (what, fd) in [("a file", file.as_fd()), ("/dev/null", null.as_fd())] {
            assert_eq!(stdio_kind(fd), StdioKind::Other, "{what}");
            assert!(reactor_stream(fd).is_none(), "{what}");
            assert!(!nonblocking(fd), "{what}: flags untouched");
        }
    }
}

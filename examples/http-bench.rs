//! HTTP resource bench (not a test, M1): the resident memory (RSS, MiB, from
//! `/proc/PID/status`) of a `patchdiff mcp --http` server under two hostile loads, for one or two
//! binaries side by side:
//! - **sessions**: `--sessions N` (default 3,000) sessions opened with `initialize` and never
//!   closed; prints the RSS before and after, and how many of the first ones still answer;
//! - **readers**: `--readers N` (default 8) clients that each call `patchdiff_read_target` on a
//!   `--target-mib M` (default 40) MiB target and never read the response; prints the RSS high-water
//!   mark, the RSS after `--hold-s S` (default 40, above the 30 s write timeout), and whether the
//!   server dropped the stalled connections.
//!
//! Run: `cargo run --example http-bench -- [--before PATH] [--after PATH] [...]`. `--after`
//! defaults to the `patchdiff` next to this binary; `--before` (e.g. main's build) adds a column.
//! Each scenario gets a fresh server (workspace profile, a temporary SQLite database with the
//! target initialized directly through the store).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use patchdiff::store::{EditStore, SqliteStore};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    before: Option<PathBuf>,
    after: PathBuf,
    sessions: usize,
    readers: usize,
    target_mib: usize,
    hold: Duration,
}

fn parse_args() -> anyhow::Result<Args> {
    let exe = std::env::current_exe()?;
    let sibling = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("patchdiff"))
        .context("no directory above this example")?;
    let mut args = Args {
        before: None,
        after: sibling,
        sessions: 3000,
        readers: 8,
        target_mib: 40,
        hold: Duration::from_secs(40),
    };
    let mut it = std::env::args().skip(1);
    let accepted =
        "--before PATH, --after PATH, --sessions N, --readers N, --target-mib M, --hold-s S";
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--before" => args.before = Some(value.into()),
            "--after" => args.after = value.into(),
            "--sessions" => args.sessions = value.parse().context("--sessions N")?,
            "--readers" => args.readers = value.parse().context("--readers N")?,
            "--target-mib" => args.target_mib = value.parse().context("--target-mib M")?,
            "--hold-s" => args.hold = Duration::from_secs(value.parse().context("--hold-s S")?),
            other => bail!("unknown flag {other}; accepted: {accepted}"),
        }
    }
    for exe in args.before.iter().chain([&args.after]) {
        if !exe.is_file() {
            bail!("{} not found: build it first (cargo build)", exe.display());
        }
    }
    Ok(args)
}

/// A running `patchdiff mcp --http` child with its own temporary directory.
struct Server {
    child: tokio::process::Child,
    addr: std::net::SocketAddr,
    token: String,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(exe: &Path, target: Option<&[u8]>) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let database = dir.path().join("pd.sqlite");
        if let Some(content) = target {
            let store = SqliteStore::open(&database)?;
            let sha = patchdiff::fixtures::sha256_hex(content);
            store.init_target("big", "javascript", content, &sha, false)?;
        }
        let token_file = dir.path().join("token");
        let mut child = tokio::process::Command::new(exe)
            .args(["mcp", "--http", "127.0.0.1:0", "--token-file"])
            .arg(&token_file)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PATCHDIFF_MCP_PROFILE", "workspace")
            .env(
                "PATCHDIFF_DATABASE_URL",
                format!("sqlite://{}", database.display()),
            )
            .env("PATCHDIFF_DATA_DIR", dir.path().join("data"))
            .env("PATCHDIFF_STATE_DIR", dir.path().join("state"))
            .env("PATCHDIFF_CONFIG_DIR", dir.path().join("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let stdout = child.stdout.take().context("stdout")?;
        let banner = tokio::io::BufReader::new(stdout)
            .lines()
            .next_line()
            .await?
            .context("no banner")?;
        let addr = banner
            .trim_start_matches("patchdiff mcp: listening on http://")
            .trim_end_matches("/mcp")
            .parse()
            .with_context(|| format!("banner {banner:?}"))?;
        let token = std::fs::read_to_string(&token_file)?;
        Ok(Self {
            child,
            addr,
            token,
            _dir: dir,
        })
    }

    /// `(VmRSS, VmHWM)` in MiB.
    fn rss(&self) -> anyhow::Result<(f64, f64)> {
        let pid = self.child.id().context("exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let field = |name: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(f64::NAN, |kb| kb / 1024.0)
        };
        Ok((field("VmRSS:"), field("VmHWM:")))
    }

    fn request(&self, session: Option<&str>, body: &str) -> String {
        let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n{session}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        )
    }

    /// One POST on a fresh connection, read to its end.
    async fn post(&self, session: Option<&str>, body: &str) -> anyhow::Result<String> {
        let mut stream = TcpStream::connect(self.addr).await?;
        stream
            .write_all(self.request(session, body).as_bytes())
            .await?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    async fn open_session(&self) -> anyhow::Result<String> {
        let response = self.post(None, INITIALIZE).await?;
        let session = response
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| v.trim().to_owned())
            })
            .with_context(|| format!("no session: {response}"))?;
        self.post(
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await?;
        Ok(session)
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"http-bench","version":"0"}}}"#;

struct SessionFigures {
    rss_before: f64,
    rss_after: f64,
    seconds: f64,
    first_alive: usize,
}

async fn sessions(exe: &Path, n: usize) -> anyhow::Result<SessionFigures> {
    let server = Server::start(exe, None).await?;
    let (rss_before, _) = server.rss()?;
    let start = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let response = server.post(None, INITIALIZE).await?;
        if let Some(id) = response.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        }) {
            ids.push(id);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let (rss_after, _) = server.rss()?;
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let mut first_alive = 0;
    for id in ids.iter().take(100) {
        let response = server.post(Some(id), ping).await?;
        if response.starts_with("HTTP/1.1 200") {
            first_alive += 1;
        }
    }
    Ok(SessionFigures {
        rss_before,
        rss_after,
        seconds,
        first_alive,
    })
}

struct ReaderFigures {
    rss_before: f64,
    rss_stalled: f64,
    high_water: f64,
    rss_after_hold: f64,
    dropped: usize,
}

async fn readers(
    exe: &Path,
    n: usize,
    content: &[u8],
    hold: Duration,
) -> anyhow::Result<ReaderFigures> {
    let server = Server::start(exe, Some(content)).await?;
    let (rss_before, _) = server.rss()?;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"patchdiff_read_target","arguments":{"target":"big"}}}"#;
    let mut stalled = Vec::new();
    for _ in 0..n {
        let session = server.open_session().await?;
        let mut stream = TcpStream::connect(server.addr).await?;
        stream
            .write_all(server.request(Some(&session), call).as_bytes())
            .await?;
        // Read until the result is flowing, then never again.
        let mut seen = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        while !String::from_utf8_lossy(&seen).contains("\"result\"") {
            let k = stream.read(&mut chunk).await?;
            if k == 0 {
                bail!("closed early: {}", String::from_utf8_lossy(&seen));
            }
            seen.extend_from_slice(&chunk[..k]);
        }
        stalled.push(stream);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss_stalled, _) = server.rss()?;
    tokio::time::sleep(hold.saturating_sub(Duration::from_secs(3))).await;
    let (rss_after_hold, high_water) = server.rss()?;
    // Dropped by the server: the end of stream comes before the response's last chunk.
    let mut dropped = 0;
    for mut stream in stalled {
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut rest)).await;
        let whole = matches!(read, Ok(Ok(_))) && rest.ends_with(b"0\r\n\r\n");
        if !whole {
            dropped += 1;
        }
    }
    Ok(ReaderFigures {
        rss_before,
        rss_stalled,
        high_water,
        rss_after_hold,
        dropped,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let mut columns: Vec<(&str, &Path)> = Vec::new();
    if let Some(before) = &args.before {
        columns.push(("before", before));
    }
    columns.push(("after", &args.after));
    let content = "x".repeat(args.target_mib * 1024 * 1024).into_bytes();
    let mut s = Vec::new();
    let mut r = Vec::new();
    for (name, exe) in &columns {
        eprintln!("{name}: {} sessions on {}", args.sessions, exe.display());
        s.push(sessions(exe, args.sessions).await?);
        eprintln!(
            "{name}: {} non-reading clients of a {} MiB target, held {} s",
            args.readers,
            args.target_mib,
            args.hold.as_secs()
        );
        r.push(readers(exe, args.readers, &content, args.hold).await?);
    }
    let header: String = columns.iter().map(|(n, _)| format!("{n:>12}")).collect();
    println!("http-bench (RSS in MiB; debug or release as built)");
    println!("{:<58}{header}", "");
    let row = |label: &str, values: Vec<String>| {
        let cells: String = values.iter().map(|v| format!("{v:>12}")).collect();
        println!("{label:<58}{cells}");
    };
    let n = args.sessions;
    row(
        "sessions: RSS at start",
        s.iter().map(|f| format!("{:.1}", f.rss_before)).collect(),
    );
    row(
        &format!("sessions: RSS after {n} never closed"),
        s.iter().map(|f| format!("{:.1}", f.rss_after)).collect(),
    );
    row(
        &format!("sessions: RSS added by {n} sessions"),
        s.iter()
            .map(|f| format!("{:+.1}", f.rss_after - f.rss_before))
            .collect(),
    );
    row(
        &format!("sessions: seconds to open {n}"),
        s.iter().map(|f| format!("{:.1}", f.seconds)).collect(),
    );
    row(
        "sessions: of the first 100, still live",
        s.iter().map(|f| f.first_alive.to_string()).collect(),
    );
    let (k, m) = (args.readers, args.target_mib);
    row(
        "readers: RSS at start",
        r.iter().map(|f| format!("{:.1}", f.rss_before)).collect(),
    );
    row(
        &format!("readers: RSS with {k} stalled on {m} MiB (3 s)"),
        r.iter().map(|f| format!("{:.1}", f.rss_stalled)).collect(),
    );
    row(
        &format!("readers: RSS after {} s", args.hold.as_secs()),
        r.iter()
            .map(|f| format!("{:.1}", f.rss_after_hold))
            .collect(),
    );
    row(
        "readers: RSS high-water (VmHWM)",
        r.iter().map(|f| format!("{:.1}", f.high_water)).collect(),
    );
    row(
        &format!("readers: of {k}, dropped by the server"),
        r.iter().map(|f| f.dropped.to_string()).collect(),
    );
    Ok(())
}

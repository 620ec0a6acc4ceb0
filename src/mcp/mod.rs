//! The MCP server process (`patchdiff mcp`, SPEC M1–M6, W13): configuration from the
//! environment, the stdio serving loop with the wire log (E1), and worker ownership across it.

pub mod delivery;
pub mod gate;
pub mod http;
pub mod params;
pub mod pipes;
pub mod server;
pub mod stdio;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;

use crate::config::{self, ConfigError, Key, Profile, Settings};
use crate::evidence::{Direction, TeeReader, TeeWriter, WireLog};
use crate::store::{EditStore, PostgresStore, SqliteStore};
use crate::telemetry::Recorder;
use crate::waymark::{Waymark, WaymarkConfig, WaymarkMode};

pub use server::{FULL_ONLY_TOOLS, OBSERVED_TOOLS, PatchdiffServer, REPLICA_TOOLS, profile_tools};

/// Everything `patchdiff mcp` reads at startup (P1). Built whole or not at all (P2).
#[derive(Debug, Clone)]
pub struct McpOptions {
    pub profile: Profile,
    pub strict: bool,
    /// SQLite database file (from `PATCHDIFF_DATABASE_URL` or the data directory); unused when
    /// `postgres_url` is set.
    pub database: PathBuf,
    /// `PATCHDIFF_DATABASE_URL` when it names PostgreSQL (`postgres://…`, S1).
    pub postgres_url: Option<String>,
    /// `None` for the workspace profile (W13).
    pub waymark: Option<WaymarkConfig>,
    /// `PATCHDIFF_EVIDENCE_WIRE_LOG`: absolute path of the request/result log (E1).
    pub wire_log: Option<PathBuf>,
    /// `PATCHDIFF_MCP_HTTP` (or `--http`): serve Streamable HTTP on a loopback address instead
    /// of stdio (M1). `None`: stdio.
    pub http: Option<http::HttpOptions>,
    /// The HTTP transport's bounds (`PATCHDIFF_MCP_HTTP_*`, M1), validated whether or not HTTP
    /// is served (P2).
    pub http_limits: http::HttpLimits,
    /// The process's resolved settings, for what is built at serve time (the perf recorder,
    /// the admission gate).
    pub settings: Settings,
}

impl McpOptions {
    /// Validates every setting `patchdiff mcp` uses from the process's resolved [`Settings`];
    /// the first invalid one is returned (P2).
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let paths = &settings.paths;
        let var = |key: Key| settings.text(key);
        let profile = Profile::parse(var(Key::McpProfile)?.unwrap_or("observed"))?;
        let strict = config::strict_observation_from(var(Key::StrictObservationMode)?)?;
        let url = var(Key::DatabaseUrl)?;
        let postgres_url = url
            .filter(|u| crate::store::is_postgres_url(u))
            .map(str::to_owned);
        let database = match url.filter(|_| postgres_url.is_none()) {
            Some(url) => {
                let path = config::parse_database_url(url)?;
                // An operator-chosen location must exist; only the default one is created (P4).
                if !path.parent().is_some_and(Path::is_dir) {
                    return Err(ConfigError::new(
                        Key::DatabaseUrl.variable(),
                        url,
                        "a file in an existing directory (create the directory first)",
                    ));
                }
                path
            }
            None => paths.default_database(),
        };
        // Validate worker settings for every profile (P2), but only keep them where used. The
        // workspace profile never starts the worker, so it needs no Node at all (M4, W13).
        let waymark = if profile.uses_worker() {
            Some(WaymarkConfig::from_settings(
                settings,
                WaymarkConfig::default_script_dir(settings)?,
                paths.worker_root(),
            )?)
        } else {
            WaymarkConfig::validate_settings(settings)?;
            None
        };
        let wire_log = match var(Key::EvidenceWireLog)? {
            Some(p) if Path::new(p).is_absolute() => Some(PathBuf::from(p)),
            Some(p) => {
                return Err(ConfigError::new(
                    Key::EvidenceWireLog.variable(),
                    p,
                    "an absolute file path",
                ));
            }
            None => None,
        };
        let http = match var(Key::McpHttp)? {
            Some(bind) => Some(http::HttpOptions::parse(bind, var(Key::McpHttpTokenFile)?)?),
            None => None,
        };
        let http_limits = http::HttpLimits::from_settings(settings)?;
        Ok(Self {
            profile,
            strict,
            database,
            postgres_url,
            waymark,
            wire_log,
            http,
            http_limits,
            settings: settings.clone(),
        })
    }
}

/// The server and the worker it owns, built from validated options.
struct Served {
    server: PatchdiffServer,
    waymark: Option<Waymark>,
}

/// Opens the store, creates the worker handle (never for the workspace profile, W13) and starts
/// the resident prewarm in the background, outside any target transaction; a failed prewarm is
/// logged and does not stop request-key recovery.
fn build_server(options: &McpOptions) -> anyhow::Result<Served> {
    learn_secrets(options);
    let (recorder, telemetry) = Recorder::from_settings(&options.settings);
    // T3: telemetry stays off and transactions are unchanged, but the operator hears of it.
    if let Some(detail) = &telemetry.invalid_detail {
        eprintln!("patchdiff mcp: warning: {detail}");
    }
    let store: Arc<dyn EditStore> = match &options.postgres_url {
        Some(url) => Arc::new(PostgresStore::connect(url)?),
        None => Arc::new(open_store(&options.database)?),
    };
    // K5/W7: a submission validates while holding its target's lock, for up to the outer
    // discovery allowance; a submission of the same target (here or in another process) queues
    // behind it rather than fail. Other targets never wait for it.
    // A workspace process (no worker) may share the database with an observed one: it assumes
    // the default allowance (W6: 15 s + 13 s).
    let outer = options.waymark.as_ref().map_or(
        crate::waymark::config::DEFAULT_ACTIVE_TIMEOUT + Duration::from_secs(13),
        WaymarkConfig::outer_allowance,
    );
    let busy =
        Duration::from_millis(crate::store::BUSY_TIMEOUT_MS).max(outer + Duration::from_secs(2));
    store.set_busy_timeout(busy)?;
    let waymark = options
        .waymark
        .clone()
        .map(|config| Waymark::new(config, recorder.clone()));
    if let Some(w) = &waymark
        && w.status().mode == WaymarkMode::Resident
    {
        let w = w.clone();
        tokio::spawn(async move {
            match w.prewarm().await {
                Ok(()) => {}
                // The client left before the worker was ready: shutdown, not a failure.
                Err(e) if e.code == crate::waymark::error::WorkerErrorCode::Cancelled => {
                    tracing::debug!("waymark prewarm cancelled by shutdown: {e}");
                }
                Err(e) => tracing::warn!("waymark prewarm failed: {e}"),
            }
        });
    }
    let server = PatchdiffServer::new(
        options.profile,
        options.strict,
        store,
        waymark.clone(),
        recorder,
        telemetry,
    )
    .with_admission_gate(gate::AdmissionGate::from_settings(&options.settings)?)
    .with_json_text(options.settings.text(Key::McpResultText)? == Some("json"));
    Ok(Served { server, waymark })
}

/// Opens the database without touching a file that is not ours (E1; never a planted link): a missing file
/// is created exclusively (0600, its parent directories 0700); an existing one must be a regular
/// file owned by the effective uid and is changed only after SQLite accepted it as a database —
/// then tightened to 0600 (its WAL and shared-memory files inherit the mode).
fn open_store(database: &Path) -> anyhow::Result<SqliteStore> {
    if let Some(parent) = database.parent() {
        crate::owned_fs::create_private_dir(parent)
            .with_context(|| format!("creating database directory {}", parent.display()))?;
    }
    let existed = crate::owned_fs::check_existing_owned(database)
        .with_context(|| format!("refusing database {}", database.display()))?;
    if !existed {
        crate::owned_fs::write_new_private(database, b"")
            .with_context(|| format!("creating database {}", database.display()))?;
    }
    let store = SqliteStore::open(database)
        .with_context(|| format!("opening database {}", database.display()))?;
    if existed {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(database)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(database, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("making database {} private", database.display()))?;
        }
    }
    Ok(store)
}

/// Serves MCP over stdio until the client disconnects, owning the Waymark worker across the
/// serving loop (W13). Every request gets an answer, malformed ones included
/// ([`stdio::StdioTransport`]). With `wire_log` set, every message in both directions is appended to it
/// exactly as it crossed the pipe (E1).
pub async fn serve_stdio(options: McpOptions) -> anyhow::Result<()> {
    // SIGTERM (e.g. a client's shutdown after its stdin-close grace period) ends serving the
    // same way as stdin closing — also during the handshake — so the worker is still shut down
    // and reaped and its stderr evidence completed (W11, E1) instead of the process dying
    // mid-cleanup.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let Served { server, waymark } = build_server(&options)?;
    let handshake = async {
        let (stdin, stdout) = pipes::stdio();
        let service = match &options.wire_log {
            Some(path) => {
                let log = WireLog::open(path)
                    .with_context(|| format!("opening wire log {}", path.display()))?;
                let reader = TeeReader::new(stdin, log.clone(), Direction::Request);
                let writer = TeeWriter::new(stdout, log, Direction::Result);
                server
                    .serve(stdio::StdioTransport::new(reader, writer))
                    .await?
            }
            None => {
                server
                    .serve(stdio::StdioTransport::new(stdin, stdout))
                    .await?
            }
        };
        anyhow::Ok(service)
    };
    // A SIGTERM during the handshake drops the transport with the handshake, here.
    let served = match tokio::select! {
        started = handshake => Some(started),
        _ = terminate.recv() => None,
    } {
        None => Ok(()),
        Some(Err(e)) => Err(e),
        Some(Ok(service)) => serve_until_ended(service, &mut terminate).await,
    };
    if let Some(w) = &waymark {
        w.shutdown().await;
    }
    served
}

/// How long a SIGTERM waits for the serving loop to end before shutdown goes on without it.
/// The loop owns the transport: only when it ends are stdin's and stdout's flags put back
/// ([`pipes`]), and its last lines written.
const TERMINATE_GRACE: Duration = Duration::from_secs(5);

/// Runs a started service until its client disconnects or a SIGTERM comes. A SIGTERM cancels
/// the loop and waits for it (at most [`TERMINATE_GRACE`]), instead of dropping it: a dropped
/// service ends asynchronously on a worker thread the exiting process may never run again.
async fn serve_until_ended(
    service: rmcp::service::RunningService<rmcp::RoleServer, PatchdiffServer>,
    terminate: &mut tokio::signal::unix::Signal,
) -> anyhow::Result<()> {
    let token = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        ended = &mut waiting => {
            ended?;
        }
        _ = terminate.recv() => {
            token.cancel();
            if let Ok(ended) = tokio::time::timeout(TERMINATE_GRACE, &mut waiting).await {
                ended?;
            }
        }
    }
    Ok(())
}

/// Serves MCP over Streamable HTTP (M1) on a loopback address until SIGINT/SIGTERM or, when
/// stdin is a parent's pipe, until it closes (a parent that dies takes the server down too).
///
/// Startup writes a fresh random bearer token to `token_file` (0600, created new) or, without
/// one, prints it; then prints exactly one line on stdout:
/// `patchdiff mcp: listening on http://ADDR/mcp` (ADDR with the resolved port), followed by
/// `token: TOKEN` only when no token file was given. Owns the worker like [`serve_stdio`].
pub async fn serve_http(options: McpOptions, http: http::HttpOptions) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let listener = http::HttpListener::bind(&http)
        .await
        .with_context(|| format!("binding {}", http.bind))?
        .with_limits(options.http_limits);
    let token = http::new_token();
    if let Some(path) = &http.token_file {
        crate::evidence::write_new_private(path, token.as_bytes())
            .with_context(|| format!("writing the bearer token to {}", path.display()))?;
    }
    // The handlers are installed before the banner announces the server: a client that reads
    // the banner and signals at once must get a clean stop, not the default disposition.
    let stop = StopSignals::install().context("installing the SIGINT/SIGTERM handlers")?;
    let Served { server, waymark } = build_server(&options)?;
    let mut banner = format!(
        "patchdiff mcp: listening on http://{}{}\n",
        listener.local_addr,
        http::ENDPOINT
    );
    if http.token_file.is_none() {
        banner.push_str(&format!("token: {token}\n"));
    }
    let mut stdout = tokio::io::stdout();
    stdout.write_all(banner.as_bytes()).await?;
    stdout.flush().await?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        stop.wait().await;
        trigger.cancel();
    });
    let wire_log = match &options.wire_log {
        Some(path) => Some(
            WireLog::open(path).with_context(|| format!("opening wire log {}", path.display()))?,
        ),
        None => None,
    };
    let served = listener.serve(server, token, shutdown, wire_log).await;
    if let Some(w) = &waymark {
        w.shutdown().await;
    }
    served.context("serving HTTP")
}

/// What stops an HTTP server: SIGINT, SIGTERM or — when stdin is a pipe or socket held by a
/// parent — end of stdin. A terminal or `/dev/null` stdin is not a stop signal (a server started
/// with `</dev/null` keeps serving until signalled).
///
/// The signal handlers are installed by [`StopSignals::install`], so a signal that arrives any
/// time after it returns is seen by [`StopSignals::wait`], however late that is first polled.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the SIGINT and SIGTERM handlers now. Errors: the runtime cannot register them.
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves on the first stop: a signal received since [`Self::install`], or end of a
    /// parent's stdin pipe.
    async fn wait(mut self) {
        use tokio::io::AsyncReadExt;
        let watch_stdin = stdin_is_pipe();
        let stdin_closed = async move {
            if !watch_stdin {
                return std::future::pending::<()>().await;
            }
            let mut stdin = tokio::io::stdin();
            let mut buf = [0u8; 256];
            while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
        };
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
            _ = stdin_closed => {}
        }
    }
}

/// True when fd 0 is a FIFO or a socket (a parent's pipe), not a terminal, file or `/dev/null`.
fn stdin_is_pipe() -> bool {
    use nix::sys::stat::{SFlag, fstat};
    match fstat(std::io::stdin()) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK
        }
        Err(_) => false,
    }
}

/// The wire log's redactor ([`crate::redact::process`]) also learns the password of
/// the database URL the resolved settings name (which may come from a file).
fn learn_secrets(options: &McpOptions) {
    if let Some(url) = &options.postgres_url {
        crate::redact::learn_database_url(crate::config::Key::DatabaseUrl.variable(), url);
    }
}

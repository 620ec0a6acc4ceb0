//! The MCP server process (`patchdiff mcp`, SPEC M1–M6, W13): configuration from the
//! environment, the stdio serving loop with the wire log (E1), and worker ownership across it.

pub mod params;
pub mod server;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use rmcp::ServiceExt;

use crate::config::{self, ConfigError, Paths, Profile};
use crate::evidence::{Direction, JsonlLog, TeeReader, TeeWriter};
use crate::store::SqliteStore;
use crate::telemetry::Recorder;
use crate::waymark::{Waymark, WaymarkConfig, WaymarkMode};

pub use server::{FULL_ONLY_TOOLS, OBSERVED_TOOLS, PatchdiffServer, profile_tools};

/// Everything `patchdiff mcp` reads at startup (P1). Built whole or not at all (P2).
#[derive(Debug, Clone)]
pub struct McpOptions {
    pub profile: Profile,
    pub strict: bool,
    /// SQLite database file (from `PATCHDIFF_DATABASE_URL` or the data directory).
    pub database: PathBuf,
    /// `None` for the workspace profile (W13).
    pub waymark: Option<WaymarkConfig>,
    /// `PATCHDIFF_EVIDENCE_WIRE_LOG`: absolute path of the request/result log (E1).
    pub wire_log: Option<PathBuf>,
}

impl McpOptions {
    /// Reads and validates every variable; the first invalid one is returned (P2).
    pub fn from_env(paths: &Paths) -> Result<Self, ConfigError> {
        let var = |name: &str| std::env::var(name).ok();
        let profile = Profile::parse(var(Profile::VARIABLE).as_deref().unwrap_or("observed"))?;
        let strict =
            config::strict_observation_from(var("PATCHDIFF_STRICT_OBSERVATION_MODE").as_deref())?;
        let database = match var("PATCHDIFF_DATABASE_URL") {
            Some(url) => config::parse_database_url(&url)?,
            None => paths.default_database(),
        };
        // Validate worker settings for every profile (P2), but only keep them where used.
        let waymark =
            WaymarkConfig::from_env(WaymarkConfig::default_script_dir(), paths.worker_root())
                .map_err(|e| ConfigError::new(&e.variable, &e.value, &e.accepted))?;
        let wire_log = match var("PATCHDIFF_EVIDENCE_WIRE_LOG") {
            Some(p) if PathBuf::from(&p).is_absolute() => Some(PathBuf::from(p)),
            Some(p) => {
                return Err(ConfigError::new(
                    "PATCHDIFF_EVIDENCE_WIRE_LOG",
                    &p,
                    "an absolute file path",
                ));
            }
            None => None,
        };
        Ok(Self {
            profile,
            strict,
            database,
            waymark: profile.uses_worker().then_some(waymark),
            wire_log,
        })
    }
}

/// Serves MCP over stdio until the client disconnects, owning the Waymark worker across the
/// serving loop (W13): resident mode is prewarmed in the background, outside any target
/// transaction; a failed prewarm is logged and does not stop request-key recovery.
pub async fn serve_stdio(options: McpOptions) -> anyhow::Result<()> {
    let (recorder, telemetry) = Recorder::from_env();
    if let Some(parent) = options.database.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating database directory {}", parent.display()))?;
    }
    // E1: the database holds evidence too; create it private before SQLite opens it (its WAL
    // and shared-memory files inherit the mode).
    crate::evidence::open_append_private(&options.database)
        .with_context(|| format!("creating database {}", options.database.display()))?;
    let store = SqliteStore::open(&options.database)
        .with_context(|| format!("opening database {}", options.database.display()))?;
    let waymark = options
        .waymark
        .clone()
        .map(|config| Waymark::new(config, recorder.clone()));
    if let Some(w) = &waymark {
        if w.status().mode == WaymarkMode::Resident {
            let w = w.clone();
            tokio::spawn(async move {
                if let Err(e) = w.prewarm().await {
                    tracing::warn!("waymark prewarm failed: {e}");
                }
            });
        }
    }
    let server = PatchdiffServer::new(
        options.profile,
        options.strict,
        Arc::new(store),
        waymark.clone(),
        recorder,
        telemetry,
    );
    let (stdin, stdout) = rmcp::transport::stdio();
    let service = match &options.wire_log {
        Some(path) => {
            let log = JsonlLog::open(path)
                .with_context(|| format!("opening wire log {}", path.display()))?;
            let reader = TeeReader::new(stdin, log.clone(), Direction::Request);
            let writer = TeeWriter::new(stdout, log, Direction::Result);
            server.serve((reader, writer)).await?
        }
        None => server.serve((stdin, stdout)).await?,
    };
    let served = service.waiting().await;
    if let Some(w) = &waymark {
        w.shutdown().await;
    }
    served?;
    Ok(())
}

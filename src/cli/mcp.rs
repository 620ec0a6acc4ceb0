//! `patchdiff mcp`: the MCP server over stdio or Streamable HTTP, and `--print-host-config`
//! (A5), an agent host's configuration for an observed process.

use std::path::{Path, PathBuf};

use patchdiff::canary::command::Host;
use patchdiff::config::{self, Key, Settings};
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};

#[derive(clap::Args)]
pub(crate) struct McpArgs {
    /// Print the agent-host configuration (claude, codex, gemini, opencode or cursor) for an observed process
    /// using the current environment's database and exit.
    #[arg(long, value_name = "HOST")]
    print_host_config: Option<String>,
    /// Serve Streamable HTTP on this loopback address (127.0.0.1:PORT, [::1]:PORT,
    /// localhost:PORT; port 0 picks one) instead of stdio. Same as PATCHDIFF_MCP_HTTP.
    /// Non-loopback addresses are refused. Every request needs the bearer token.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// With --http: write the random bearer token to this absolute path (0600, must not exist)
    /// instead of printing it. Same as PATCHDIFF_MCP_HTTP_TOKEN_FILE.
    #[arg(long, value_name = "PATH", requires = "http")]
    token_file: Option<PathBuf>,
}

pub(crate) async fn run_mcp(args: McpArgs, settings: &Settings) -> i32 {
    let mut options = match patchdiff::mcp::McpOptions::from_settings(settings) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("patchdiff mcp: {e}");
            return EXIT_USAGE;
        }
    };
    if let Some(bind) = &args.http {
        let token_file = args
            .token_file
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| {
                settings
                    .get(Key::McpHttpTokenFile)
                    .map(|v| v.to_string_lossy().into_owned())
            });
        match patchdiff::mcp::http::HttpOptions::parse(bind, token_file.as_deref()) {
            Ok(http) => options.http = Some(http),
            Err(e) => {
                eprintln!("patchdiff mcp: --http: {e}");
                return EXIT_USAGE;
            }
        }
    }
    if let Some(host) = args.print_host_config {
        return print_host_config(&host, settings, &options);
    }
    let _log = init_tracing(settings);
    let served = match options.http.clone() {
        Some(http) => patchdiff::mcp::serve_http(options, http).await,
        None => patchdiff::mcp::serve_stdio(options).await,
    };
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("patchdiff mcp: {e:#}");
            EXIT_FAILED
        }
    }
}

/// `patchdiff mcp --print-host-config HOST` (A5): the host's configuration for an observed
/// process with this process's settings, on stdout exactly as the host's file (hint lines on
/// stderr). Returns the exit code: [`EXIT_USAGE`] for an unknown host or a relative path,
/// [`EXIT_FAILED`] when a directory it names cannot be created.
fn print_host_config(host: &str, settings: &Settings, options: &patchdiff::mcp::McpOptions) -> i32 {
    let paths = &settings.paths;
    let Some(host) = Host::parse(host) else {
        eprintln!(
            "patchdiff mcp: --print-host-config {host:?}: accepted values are claude, codex, gemini, opencode, cursor"
        );
        return EXIT_USAGE;
    };
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "patchdiff".into());
    let perf = settings
        .get(Key::PerfEvents)
        .map(PathBuf::from)
        .unwrap_or_else(|| paths.state_dir.join("observed.perf.jsonl"));
    let wire_log = options
        .wire_log
        .clone()
        .unwrap_or_else(|| paths.state_dir.join("observed.mcp.jsonl"));
    if let Err(e) = check_printed_paths(settings, &options.database, &perf, &wire_log) {
        eprintln!("patchdiff mcp: --print-host-config: {e}");
        return EXIT_USAGE;
    }
    // A5: the printed configuration works as printed — the directories it names exist
    // (created 0700 when missing; existing ones are left as they are).
    for dir in [options.database.parent(), perf.parent(), wire_log.parent()]
        .into_iter()
        .flatten()
    {
        if let Err(e) = patchdiff::evidence::create_private_dir(dir) {
            eprintln!(
                "patchdiff mcp: --print-host-config: cannot create {} for the configuration: {e}",
                dir.display()
            );
            return EXIT_FAILED;
        }
    }
    let node = options.waymark.as_ref().map(|c| c.node_binary.clone());
    let mut env =
        patchdiff::canary::client::host_env(&options.database, &perf, &wire_log, node.as_deref());
    // A worker directory set for this process is the one the host's server must use
    // too (unset, both use the bundle this binary carries).
    if let Some(dir) = settings.path(Key::WaymarkDir) {
        env.push((
            Key::WaymarkDir.variable().to_owned(),
            dir.display().to_string(),
        ));
    }
    // A PostgreSQL store is named by its URL, as configured.
    if let Some(url) = &options.postgres_url {
        for (k, v) in env.iter_mut() {
            if k == patchdiff::store::DATABASE_URL_VARIABLE {
                v.clone_from(url);
            }
        }
    }
    let text = patchdiff::canary::host_config_text(Some(host), &exe, &env);
    // stdout carries exactly the host's file (valid JSON or TOML); the leading `# where it
    // goes` hint lines go to stderr, since JSON has no comments.
    let (hint, body) = split_leading_comments(&text);
    eprint!("{hint}");
    print!("{body}");
    0
}

/// A5: a printed configuration works as printed, from any directory, so every path it names is
/// absolute. A relative one (a relative directory override or perf-events path) is refused
/// naming the variable it came from, instead of printing an invalid database URL.
fn check_printed_paths(
    settings: &Settings,
    database: &Path,
    perf: &Path,
    wire_log: &Path,
) -> Result<(), config::ConfigError> {
    // PATCHDIFF_DATABASE_URL and PATCHDIFF_EVIDENCE_WIRE_LOG are already checked absolute, so
    // a relative database or wire log comes from the data or state directory. An empty
    // PATCHDIFF_PERF_EVENTS is printed as it was given: no recording (T1).
    let perf_key = if settings.get(Key::PerfEvents).is_some() {
        Key::PerfEvents
    } else {
        Key::StateDir
    };
    for (path, key) in [
        (database, Key::DataDir),
        (perf, perf_key),
        (wire_log, Key::StateDir),
    ] {
        let no_recording = key == Key::PerfEvents && path.as_os_str().is_empty();
        if !path.is_absolute() && !no_recording {
            let value = settings.get(key).map_or_else(
                || path.display().to_string(),
                |v| v.to_string_lossy().into_owned(),
            );
            return Err(config::ConfigError::new(
                key.variable(),
                &value,
                "an absolute path (a printed host configuration must work from any directory)",
            ));
        }
    }
    Ok(())
}

/// Splits leading `#` comment lines (a hint naming the host's config file) from the document.
fn split_leading_comments(text: &str) -> (&str, &str) {
    let mut cut = 0;
    for line in text.split_inclusive('\n') {
        if !line.starts_with('#') {
            break;
        }
        cut += line.len();
    }
    text.split_at(cut)
}

/// Diagnostics go to stderr (stdout carries the MCP protocol).
fn init_tracing(settings: &Settings) -> Option<()> {
    use std::io::IsTerminal;
    let filter = settings
        .text(Key::Log)
        .ok()
        .flatten()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        // rmcp logs every JSON-RPC error it sends at WARN; the wire log already keeps them.
        .unwrap_or_else(|| "warn,rmcp=error".into());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .try_init()
        .ok()
}

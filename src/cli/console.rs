//! `patchdiff console` (the default command): the interactive operator console, a headless
//! canary with `--script`, or watching an observed process with `--attach-events`.

use std::path::PathBuf;

use patchdiff::canary::CanaryOptions;
use patchdiff::canary::steps::deadline::{STEP_TIMEOUT, STEP_TIMEOUT_MAX_SECS};
use patchdiff::config::{self, Key, Settings};
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};

#[derive(clap::Args, Default)]
pub(crate) struct ConsoleArgs {
    /// Run this script of console commands headless (one command per line; `#` comments) and
    /// exit: 0 every step succeeded, 1 a step failed (a target failing its checks fails `evaluate`), 2 invalid script or options,
    /// 3 infra_abort (the run stopped before the agent acted: nothing judged).
    /// A bare name that is not a file names a script the binary carries: `demo` (the bundled
    /// demo canary, scripted agent), `wrong`, `claude`, `codex`.
    #[arg(long, value_name = "FILE|NAME")]
    script: Option<PathBuf>,
    /// With --script: print the final report as JSON on stdout (progress goes to stderr).
    #[arg(long, requires = "script")]
    json: bool,
    /// With --script: fill the script's `${NAME}` placeholders (e.g. `--set model=M`); repeat
    /// for several. A placeholder with no value (and no `${NAME:-DEFAULT}`) and a NAME the
    /// script does not use are refused before anything runs.
    #[arg(long = "set", value_name = "NAME=VALUE", requires = "script")]
    set: Vec<String>,
    /// Fixture manifest to authenticate and evaluate against (default: the bundled suite the
    /// binary carries; a script's `suite PATH` overrides it).
    #[arg(long, value_name = "PATH")]
    manifest: Option<PathBuf>,
    /// Directory for run evidence (default: <data dir>/runs).
    #[arg(long, value_name = "DIR")]
    runs_dir: Option<PathBuf>,
    /// Watch an observed process an agent host started, through its perf-events file (the
    /// absolute PATCHDIFF_PERF_EVENTS path it was given). Starts nothing.
    #[arg(long, value_name = "EVENTS.jsonl", conflicts_with = "script")]
    attach_events: Option<PathBuf>,
    /// Bound every step without a timeout of its own (init, launch, preflight, a scripted
    /// `agent PLAN`, export, inspect, report) to SECONDS from its start, 1..=86400; a step that
    /// does not finish in time fails naming it. `agent HOST timeout=S`, `wait … timeout=S` and
    /// `evaluate check_timeout=S` keep their own bounds. Default 600.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=STEP_TIMEOUT_MAX_SECS))]
    step_timeout: Option<u64>,
    /// With --attach-events: the SQLite database that process uses, for the targets pane.
    #[arg(long, value_name = "DATABASE.sqlite", requires = "attach_events")]
    database: Option<PathBuf>,
}

fn canary_options(args: &ConsoleArgs, settings: Settings) -> Result<CanaryOptions, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let database_url = match settings.text(Key::DatabaseUrl).map_err(|e| e.to_string())? {
        Some(url) if patchdiff::store::is_postgres_url(url) => Some(url.to_owned()),
        Some(url) => {
            config::parse_database_url(url).map_err(|e| e.to_string())?;
            Some(url.to_owned())
        }
        None => None,
    };
    let paths = &settings.paths;
    let manifest = match &args.manifest {
        Some(m) => m.clone(),
        None => patchdiff::fixtures::bundled_manifest_path()
            .map_err(|e| format!("{e}; or name a suite with --manifest PATH"))?,
    };
    Ok(CanaryOptions {
        exe,
        manifest,
        runs_root: args.runs_dir.clone().unwrap_or_else(|| paths.runs_root()),
        database_url,
        settings,
        step_timeout: args
            .step_timeout
            .map_or(STEP_TIMEOUT, std::time::Duration::from_secs),
    })
}

pub(crate) async fn run_console(args: ConsoleArgs, settings: Settings) -> i32 {
    let options = match canary_options(&args, settings) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("patchdiff: {e}");
            return EXIT_USAGE;
        }
    };
    use std::io::IsTerminal;
    // U4: the interactive console needs a terminal on stdin and stdout; refuse before creating
    // anything (no run directory, no children) rather than fail inside the terminal library.
    if args.script.is_none()
        && let Some(stream) = [
            ("stdin", std::io::stdin().is_terminal()),
            ("stdout", std::io::stdout().is_terminal()),
        ]
        .into_iter()
        .find_map(|(name, tty)| (!tty).then_some(name))
    {
        eprintln!(
            "patchdiff console: {stream} is not a terminal; the interactive console needs one. \
             For a headless run use `patchdiff console --script FILE` (see --help)"
        );
        return EXIT_USAGE;
    }
    if let Some(events) = args.attach_events {
        return match patchdiff::console::run_attach(events, args.database, &options.settings).await
        {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("patchdiff: {e:#}");
                EXIT_FAILED
            }
        };
    }
    match &args.script {
        Some(script) => match patchdiff::assets::resolve_script(script) {
            Ok(script) => match patchdiff::canary::command::parse_parameters(&args.set) {
                Ok(params) => {
                    patchdiff::console::headless::run_script_with(
                        options, &script, &params, args.json,
                    )
                    .await
                }
                Err(e) => {
                    eprintln!("patchdiff console: {e}");
                    EXIT_USAGE
                }
            },
            Err(e) => {
                eprintln!("patchdiff console: {e}");
                EXIT_USAGE
            }
        },
        None => match patchdiff::console::run_interactive(options).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("patchdiff: {e:#}");
                EXIT_FAILED
            }
        },
    }
}

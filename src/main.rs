//! The `patchdiff` binary: console (default), MCP server, evaluator.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use patchdiff::canary::CanaryOptions;
use patchdiff::canary::command::Host;
use patchdiff::config::{self, Key, Settings};
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};
use patchdiff::gate2::cli as compare;

/// Observed edits for AI coding agents, and the console that runs canaries of them.
///
/// With no subcommand, opens the interactive operator console.
#[derive(Parser)]
#[command(name = "patchdiff", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
}

const AFTER_HELP: &str = "\
Quick start:
  patchdiff console --script demo                        run the bundled demo canary headless
  patchdiff doctor                                       can this installation run a canary?
  patchdiff console                                      open the interactive console
  patchdiff mcp --print-host-config claude              agent-host configuration for the observed process

Configuration comes from PATCHDIFF_* environment variables (see README.md), never from MCP arguments.";

#[derive(Subcommand)]
enum Cmd {
    /// The operator console: interactive, or headless with --script.
    Console(ConsoleArgs),
    /// The MCP server over stdio (or Streamable HTTP on loopback with --http); profile from
    /// PATCHDIFF_MCP_PROFILE (observed|full|workspace).
    Mcp(McpArgs),
    /// The independent evaluator: exported files against the fixture manifest (full-byte and
    /// behavioral). Reads no database.
    Evaluate(EvaluateArgs),
    /// Re-check a sealed run directory: seal, SHA256SUMS digests, evidence hash chains, fixture
    /// hashes, journal replay against the exports (and, with --evaluate, the verdicts). Exit 0
    /// only if all hold.
    Verify(VerifyArgs),
    /// The operator's seal key (ed25519): `report` signs each run's seal with it, `verify --key`
    /// checks the signature.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Export the perf events of every process of a run as a Chrome trace-event file that
    /// Perfetto UI (ui.perfetto.dev) and chrome://tracing open.
    Trace(TraceArgs),
    /// Gate 2 (SPEC C7): compare two agent configurations over many sealed runs. Read-only
    /// views need no gate.
    #[command(subcommand)]
    Compare(CompareCmd),
    /// Check that this installation can run a canary: Node, the worker reaching readiness with
    /// each grammar, the database, the data/state/runs directories, agent host CLIs, the
    /// bundled fixture suite and the evaluator's controls. One ok/FAIL line each, with what to
    /// do; exit 0 only if every check holds.
    Doctor(DoctorArgs),
    /// Author and pin a fixture suite of your own: `new`, `add`, `pin`, `check`. A canary
    /// script names it with `suite PATH` before `init` (or `console --manifest DIR/manifest.json`).
    #[command(subcommand)]
    Suite(SuiteCmd),
}

// Parsed once per process and moved into its handler: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum SuiteCmd {
    /// Create a suite directory with one example target (Python, unittest), pinned.
    New {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Add a target: copies its files into DIR/NAME/ and re-pins the suite. --check takes the
    /// rest of the line as the check's command.
    Add {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[arg(value_name = "NAME")]
        name: String,
        /// javascript, jsx, typescript, tsx, python, rust or go.
        #[arg(long, value_name = "L")]
        language: String,
        /// The bytes the target starts from.
        #[arg(long, value_name = "F")]
        original: PathBuf,
        /// The reference result (the fix applied).
        #[arg(long, value_name = "F")]
        expected: PathBuf,
        /// The task text the agent is given.
        #[arg(long, value_name = "F")]
        task: PathBuf,
        /// A file of the check (its tests, a go.mod, a package.json…); repeat for several.
        #[arg(long = "check-file", value_name = "F")]
        check_file: Vec<PathBuf>,
        /// The name the check imports the export as (default: the original's file name).
        #[arg(long, value_name = "NAME")]
        module_file: Option<String>,
        /// How the check reports its sub-tests: tap, junit, unittest or libtest.
        #[arg(long, value_name = "FORMAT")]
        report: Option<String>,
        /// A variable the check gets from the evaluator's environment: NAME or NAME=DEFAULT
        /// (`~/` = the evaluator's HOME); repeat for several. Checks otherwise see only PATH,
        /// a private HOME and TMPDIR, and the C.UTF-8 locale.
        #[arg(long, value_name = "NAME[=DEFAULT]")]
        env: Vec<String>,
        /// The check's command (argv; everything after --check).
        #[arg(long, value_name = "CMD", num_args = 1.., allow_hyphen_values = true, required = true)]
        check: Vec<String>,
    },
    /// Rewrite DIR/manifest.json pinning the SHA-256 of every file the evaluation and brief
    /// depend on (original, expected, TASK.md, each file of check/).
    Pin {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Authenticate the suite, run the evaluator's controls (each check passes on expected and
    /// fails on original) and list the scopes discovery finds in each original (the names a
    /// plan may use). Exit 0 only if all hold.
    Check {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Write a new ed25519 private key (PKCS#8 PEM, 0600) to <config dir>/seal-key.pem and print
    /// its public key: one line, `ed25519:` + base64 of the 32 key bytes (give it to
    /// `verify --key`). Refuses to overwrite an existing key without --force.
    New(KeyNewArgs),
    /// Print the public key of the existing seal key (the line `key new` printed).
    Show(KeyShowArgs),
}

#[derive(clap::Args)]
struct KeyNewArgs {
    /// Replace an existing key (runs it signed then verify only with its old public key).
    #[arg(long)]
    force: bool,
    /// Write the key here instead of <config dir>/seal-key.pem (`report` signs only with the
    /// key in the config directory).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct KeyShowArgs {
    /// The private key file (default <config dir>/seal-key.pem).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
}

#[derive(Subcommand)]
enum CompareCmd {
    /// What N runs per arm can detect: flag thresholds, exact power, minimum detectable drop
    /// (one-sided Fisher exact). Runs nothing; needs no gate.
    Power(PowerArgs),
    /// Write a pre-registered comparison plan: resolves both arms from their canary scripts
    /// without running an agent, refuses undeclared differences, prints what this N can
    /// detect. Runs nothing; needs no gate.
    Plan(PlanArgs),
    /// Run a comparison (gate 2 must be open: PATCHDIFF_GATE2=open): seals the plan into
    /// cmp-<id>/ beside the runs, runs N sealed canaries per arm in AB/BA blocks, writes and
    /// prints the report. Exit 0 unchanged/improved, 1 regressed, 2 usage or gate closed,
    /// 3 invalid/incomplete (with --slot: 0 the slot ran, 3 every attempt was infra_abort).
    Run(RunArgs),
    /// Recompute a comparison's report from its sealed member runs (and run directories copied
    /// in from elsewhere), verifying each first; writes report.{txt,json,md,junit.xml},
    /// runs.csv, SHA256SUMS and compare.seal. Exit codes as `compare run`. Needs no gate.
    Report(ReportArgs),
}

#[derive(clap::Args)]
struct PlanArgs {
    /// The baseline arm's canary script (a file, or a bundled name: demo, wrong, claude, codex).
    #[arg(long, value_name = "A.canary")]
    baseline: String,
    /// The candidate arm's canary script (with --aa: ignored, the candidate is the baseline).
    #[arg(long, value_name = "B.canary", required_unless_present = "aa")]
    candidate: Option<String>,
    /// Runs per arm (5 to 100).
    #[arg(long, value_name = "N", default_value_t = 10)]
    runs: u32,
    /// Family-wise one-sided level (above 0, at most 0.2).
    #[arg(long, value_name = "A", default_value_t = 0.05)]
    alpha: f64,
    /// Canary runs at once (1 to 16, at most 2 × runs).
    #[arg(long, value_name = "C", default_value_t = 2)]
    concurrency: u32,
    /// A configuration field (or prefix: agent, host, build, suite, node, script) allowed to
    /// differ between the arms; repeat for several.
    #[arg(long = "declare", value_name = "FIELD")]
    declare: Vec<String>,
    /// A/A calibration: the candidate is the baseline.
    #[arg(long)]
    aa: bool,
    /// The one extension the comparison may take: runs per arm after it.
    #[arg(long, value_name = "N")]
    extend_to: Option<u32>,
    /// Cost budget in US dollars (as the hosts report it); exhausted → INCOMPLETE.
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Wall-clock budget of one `compare run` in seconds; exhausted → INCOMPLETE.
    #[arg(long, value_name = "S")]
    max_wall: Option<u64>,
    /// Run every planned run even once the decision is settled (no curtailment).
    #[arg(long)]
    no_curtail: bool,
    /// Seed of the AB/BA block order (default: from the clock; recorded in the plan).
    #[arg(long, value_name = "SEED")]
    seed: Option<u32>,
    /// A name for people (default: "BASELINE vs CANDIDATE").
    #[arg(long, value_name = "TEXT")]
    name: Option<String>,
    /// Fixture manifest the runs use (default: the bundled suite).
    #[arg(long, value_name = "PATH")]
    manifest: Option<PathBuf>,
    /// Where to write the plan (a new file).
    #[arg(short = 'o', long = "output", value_name = "plan.toml")]
    output: PathBuf,
}

impl From<PlanArgs> for compare::PlanCommand {
    fn from(a: PlanArgs) -> Self {
        Self {
            baseline: a.baseline,
            candidate: a.candidate,
            runs: a.runs,
            alpha: a.alpha,
            concurrency: a.concurrency,
            declare: a.declare,
            aa: a.aa,
            extend_to: a.extend_to,
            max_cost_usd: a.max_cost,
            max_wall_s: a.max_wall,
            curtail: !a.no_curtail,
            seed: a.seed,
            name: a.name,
            manifest: a.manifest,
            output: a.output,
        }
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// The plan (plan.toml), or a comparison directory (cmp-<id>) to continue with --resume.
    #[arg(value_name = "PLAN|CMP_DIR")]
    plan: PathBuf,
    /// Continue an interrupted comparison: run only the slots without a counted run.
    #[arg(long)]
    resume: bool,
    /// Run exactly one slot (A-07, B-03, …) and stop: for CI matrices and job arrays.
    #[arg(long, value_name = "ID")]
    slot: Option<String>,
    /// Take the plan's one extension (to its extend_to runs per arm) and run the new slots.
    #[arg(long, conflicts_with = "slot")]
    extend: bool,
    /// Directory the comparison directory goes in (default: <data dir>/runs).
    #[arg(long, value_name = "DIR")]
    runs_dir: Option<PathBuf>,
    /// Print the report as JSON on stdout at the end (progress goes to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// The comparison directory (cmp-<id>).
    #[arg(value_name = "CMP_DIR")]
    dir: PathBuf,
    /// More member runs: run directories, slot directories, or directories holding them
    /// (copied in from other machines).
    #[arg(value_name = "RUNS")]
    runs: Vec<PathBuf>,
    /// Print report.json instead of the text.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print report.md (a pull-request comment) instead of the text.
    #[arg(long)]
    markdown: bool,
}

#[derive(clap::Args)]
struct PowerArgs {
    /// Runs per arm (2 to 200).
    #[arg(long, value_name = "N", default_value_t = 10)]
    runs: u32,
    /// One-sided level per target (above 0, at most 0.5).
    #[arg(long, value_name = "A", default_value_t = 0.05)]
    alpha: f64,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct TraceArgs {
    /// The run directory.
    #[arg(value_name = "RUN_DIR")]
    run_dir: PathBuf,
    /// Where to write the trace (created new; keep it outside a sealed run directory).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
}

#[derive(clap::Args)]
struct VerifyArgs {
    /// The run directory (the one `report` sealed).
    #[arg(value_name = "RUN_DIR")]
    run_dir: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Fixture manifest to check against (default: the one the run recorded).
    #[arg(long, value_name = "PATH")]
    manifest: Option<PathBuf>,
    /// Also re-run the evaluator on the exports and compare verdicts with report.json.
    #[arg(long)]
    evaluate: bool,
    /// The operator's public key (the `ed25519:…` line `patchdiff key new` printed, or a file
    /// holding it): the run's seal signature must hold for it. Without it, verify says whether
    /// the run is unsigned or who signed it, unchecked.
    #[arg(long, value_name = "PUB")]
    key: Option<String>,
}

#[derive(clap::Args, Default)]
struct ConsoleArgs {
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
    /// With --attach-events: the SQLite database that process uses, for the targets pane.
    #[arg(long, value_name = "DATABASE.sqlite", requires = "attach_events")]
    database: Option<PathBuf>,
}

#[derive(clap::Args)]
struct McpArgs {
    /// Print the agent-host configuration (claude, codex or cursor) for an observed process
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

#[derive(clap::Args)]
struct EvaluateArgs {
    /// The fixture manifest (expected bytes and check commands).
    #[arg(long, value_name = "PATH")]
    manifest: PathBuf,
    /// Directory holding the exported targets, named by each fixture's module_file.
    #[arg(long, value_name = "DIR", required_unless_present = "controls_only")]
    exports: Option<PathBuf>,
    /// Print the evaluation as JSON.
    #[arg(long)]
    json: bool,
    /// Run the behavioral check on each export K times; a target whose verdicts differ is
    /// `flaky` (V3).
    #[arg(long, value_name = "K", default_value_t = 1)]
    repeat: u32,
    /// Run only the controls (each check on the expected bytes must pass, on the original must
    /// fail) and exit 0 if they all hold; --exports is not read.
    #[arg(long)]
    controls_only: bool,
    /// Kill a behavioral check run (with every process it started) after this many seconds;
    /// the run fails with `timed out after N s`. 1 to 3600. Overrides each fixture's
    /// `check.timeout_s`; without either, 120.
    #[arg(long, value_name = "SECONDS")]
    check_timeout: Option<u64>,
    /// Which rule decides a target: `behavioral` (its check on the export; identity with the
    /// reference is reported beside it) or `full-byte` (the export must also be identical to
    /// the reference). Fixtures with `"require_full_byte": true` always use full-byte.
    #[arg(long, value_name = "RULE", default_value = "behavioral", value_parser = parse_require)]
    require: patchdiff::evaluate::Require,
    /// Run the controls even when a cached result for their digest exists (and cache the new
    /// result).
    #[arg(long)]
    fresh_controls: bool,
    /// Where controls that hold are cached, by digest. Default: `control-cache` in the data
    /// directory (PATCHDIFF_DATA_DIR).
    #[arg(long, value_name = "DIR")]
    control_cache: Option<PathBuf>,
    /// Targets evaluated side by side (1 to 16); default: the available cores, at most 4.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

fn parse_require(s: &str) -> Result<patchdiff::evaluate::Require, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // P1: the one place the environment and the config file are read; everything below gets
    // these settings.
    let settings = match Settings::load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("patchdiff: {e}");
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("patchdiff: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            None => run_console(ConsoleArgs::default(), settings).await,
            Some(Cmd::Console(args)) => run_console(args, settings).await,
            Some(Cmd::Mcp(args)) => run_mcp(args, &settings).await,
            Some(Cmd::Evaluate(args)) => run_evaluate(args, &settings).await,
            Some(Cmd::Verify(args)) => run_verify(args, &settings).await,
            Some(Cmd::Key(cmd)) => run_key(cmd, &settings),
            Some(Cmd::Trace(args)) => run_trace(args),
            Some(Cmd::Compare(CompareCmd::Power(args))) => run_compare_power(&args),
            Some(Cmd::Compare(CompareCmd::Plan(args))) => compare::plan(args.into(), &settings),
            Some(Cmd::Compare(CompareCmd::Run(args))) => {
                compare::run(
                    &args.plan,
                    compare::RunMode {
                        resume: args.resume,
                        extend: args.extend,
                    },
                    args.slot.as_deref(),
                    args.runs_dir,
                    args.json,
                    &settings,
                )
                .await
            }
            Some(Cmd::Compare(CompareCmd::Report(args))) => {
                compare::report(&args.dir, &args.runs, args.json, args.markdown, &settings).await
            }
            Some(Cmd::Doctor(args)) => patchdiff::doctor::run(&settings, args.json).await,
            Some(Cmd::Suite(cmd)) => run_suite(cmd, &settings).await,
        }
    });
    // The work is done; do not wait for blocking-pool threads still parked in a read of an
    // open stdin (an MCP server stopped by SIGTERM while its client keeps the pipe open).
    runtime.shutdown_background();
    ExitCode::from(code as u8)
}

/// `patchdiff suite …`: exit 0 when done (for `check`: when everything holds), 1 when
/// `check` found a problem, 2 for refused input (nothing changed).
async fn run_suite(cmd: SuiteCmd, settings: &Settings) -> i32 {
    use patchdiff::suite;
    let done = match cmd {
        SuiteCmd::New { dir } => suite::new_suite(&dir),
        SuiteCmd::Add {
            dir,
            name,
            language,
            original,
            expected,
            task,
            check_file,
            module_file,
            report,
            env,
            check,
        } => suite::add_target(
            &dir,
            &suite::NewTarget {
                name,
                language,
                original,
                expected,
                task,
                check_files: check_file,
                check,
                module_file,
                report,
                env,
                toolchain: None,
            },
        ),
        SuiteCmd::Pin { dir } => suite::pin(&dir),
        SuiteCmd::Check { dir } => {
            return match suite::check(&dir, settings).await {
                Ok(found) => {
                    for line in &found.lines {
                        println!("{line}");
                    }
                    println!(
                        "suite {}: {}",
                        dir.display(),
                        if found.ok { "ok" } else { "FAILED" }
                    );
                    if found.ok { 0 } else { EXIT_FAILED }
                }
                Err(e) => {
                    eprintln!("patchdiff suite check: {e}");
                    EXIT_USAGE
                }
            };
        }
    };
    match done {
        Ok(summary) => {
            println!("{summary}");
            0
        }
        Err(e) => {
            eprintln!("patchdiff suite: {e}");
            EXIT_USAGE
        }
    }
}

/// `patchdiff compare power`: the power table for `--runs` at `--alpha`, as
/// text or JSON on stdout. Exit 0, or [`EXIT_USAGE`] for runs or alpha out of range.
fn run_compare_power(args: &PowerArgs) -> i32 {
    use patchdiff::gate2::power::{Design, PowerTable};
    let table = match Design::new(args.runs, args.alpha).and_then(PowerTable::of) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("patchdiff compare power: {e}");
            return EXIT_USAGE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&table) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("patchdiff compare power: {e}");
                return EXIT_FAILED;
            }
        }
    } else {
        print!("{}", table.render_text());
    }
    0
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
    })
}

async fn run_console(args: ConsoleArgs, settings: Settings) -> i32 {
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

async fn run_mcp(args: McpArgs, settings: &Settings) -> i32 {
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
            "patchdiff mcp: --print-host-config {host:?}: accepted values are claude, codex, cursor"
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

fn run_trace(args: TraceArgs) -> i32 {
    // No command of ours writes into a sealed run.
    if let Err(why) = patchdiff::evidence::refuse_sealed_destination(&args.output) {
        eprintln!("patchdiff trace: {why}");
        return EXIT_USAGE;
    }
    let (trace, summary) = match patchdiff::trace::build(&args.run_dir) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "patchdiff trace: cannot read {}: {e}",
                args.run_dir.display()
            );
            return EXIT_USAGE;
        }
    };
    let written = serde_json::to_vec(&trace)
        .map_err(std::io::Error::other)
        .and_then(|bytes| patchdiff::evidence::write_new_private(&args.output, &bytes));
    match written {
        Ok(()) => {
            println!(
                "{}: {} processes · {} spans · {} instants · {} counter samples (open in ui.perfetto.dev)",
                args.output.display(),
                summary.processes,
                summary.spans,
                summary.instants,
                summary.counters
            );
            0
        }
        Err(e) => {
            eprintln!(
                "patchdiff trace: cannot write {}: {e}",
                args.output.display()
            );
            EXIT_FAILED
        }
    }
}

/// `patchdiff key new|show`: prints the public key on stdout. Exit 0, or [`EXIT_FAILED`]
/// (an existing key without --force, no key to show, an unreadable key) said on stderr.
fn run_key(cmd: KeyCmd, settings: &Settings) -> i32 {
    use patchdiff::seal::{SealKey, key_path};
    let default = key_path(&settings.paths.config_dir);
    let result = match cmd {
        KeyCmd::New(args) => {
            let path = args.out.unwrap_or(default);
            SealKey::create(&path, args.force).map(|k| (k, path))
        }
        KeyCmd::Show(args) => {
            let path = args.key.unwrap_or(default);
            match SealKey::load(&path) {
                Ok(Some(k)) => Ok((k, path)),
                Ok(None) => Err(format!(
                    "no seal key at {}; `patchdiff key new` writes one",
                    path.display()
                )),
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok((key, path)) => {
            println!("{}", key.public().encode());
            eprintln!(
                "seal key {} ({}); `report` signs runs with it, `patchdiff verify --key {}` \
                 checks them",
                path.display(),
                key.public().key_id(),
                key.public().encode()
            );
            0
        }
        Err(e) => {
            eprintln!("patchdiff key: {e}");
            EXIT_FAILED
        }
    }
}

async fn run_verify(args: VerifyArgs, settings: &Settings) -> i32 {
    // A run on PostgreSQL replays from the database the settings name.
    let database_url = match settings.text(Key::DatabaseUrl) {
        Ok(url) => url.filter(|u| !u.is_empty()).map(str::to_owned),
        Err(e) => {
            eprintln!("patchdiff verify: {e}");
            return EXIT_USAGE;
        }
    };
    let key = match args
        .key
        .as_deref()
        .map(patchdiff::seal::PublicKey::from_arg)
    {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(e)) => {
            eprintln!("patchdiff verify: {e}");
            return EXIT_USAGE;
        }
    };
    let options = patchdiff::verify::VerifyOptions {
        manifest: args.manifest,
        evaluate: args.evaluate,
        database_url,
        key,
    };
    // A comparison directory: every member run, and report.json against a recomputation.
    if patchdiff::gate2::report::is_comparison_dir(&args.run_dir) {
        return compare::verify(&args.run_dir, &options, args.json).await;
    }
    match patchdiff::verify::verify(&args.run_dir, &options).await {
        Ok(report) => {
            if let Err(code) = print_result("verify", args.json, &report, || report.to_text()) {
                return code;
            }
            if report.ok { 0 } else { EXIT_FAILED }
        }
        Err(e) => {
            eprintln!("patchdiff verify: {e}");
            EXIT_USAGE
        }
    }
}

/// Prints `result` as pretty JSON with `json`, else `text()`. `Err(EXIT_FAILED)` when it cannot
/// be serialized (said on stderr as `patchdiff COMMAND: …`).
fn print_result<T: serde::Serialize>(
    command: &str,
    json: bool,
    result: &T,
    text: impl FnOnce() -> String,
) -> Result<(), i32> {
    if !json {
        // The text names what a run's agent wrote; a terminal gets it visible.
        print!("{}", patchdiff::display::visible(&text()));
        return Ok(());
    }
    match serde_json::to_string_pretty(result) {
        Ok(text) => {
            println!("{text}");
            Ok(())
        }
        Err(e) => {
            eprintln!("patchdiff {command}: {e}");
            Err(EXIT_FAILED)
        }
    }
}

async fn run_evaluate(args: EvaluateArgs, settings: &Settings) -> i32 {
    let manifest = match patchdiff::fixtures::FixtureManifest::load(&args.manifest) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("patchdiff evaluate: {e}");
            return EXIT_USAGE;
        }
    };
    let check_timeout = match args
        .check_timeout
        .map(patchdiff::evaluate::check_timeout_from_secs)
        .transpose()
    {
        Ok(timeout) => timeout,
        Err(e) => {
            eprintln!("patchdiff evaluate: {e}");
            return EXIT_USAGE;
        }
    };
    let options = patchdiff::evaluate::EvaluateOptions {
        repeat: args.repeat,
        require: args.require,
        check_timeout,
        control_cache: Some(
            args.control_cache
                .clone()
                .unwrap_or_else(|| settings.paths.data_dir.join("control-cache")),
        ),
        fresh_controls: args.fresh_controls,
        jobs: args.jobs.unwrap_or_else(patchdiff::evaluate::default_jobs),
    };
    if args.controls_only {
        return run_controls_only(&manifest, &options, args.json).await;
    }
    let exports = args.exports.unwrap_or_default();
    match patchdiff::evaluate::evaluate_with(&manifest, &exports, &options).await {
        Ok(evaluation) => {
            let text = || patchdiff::evaluate::render_text(&evaluation);
            if let Err(code) = print_result("evaluate", args.json, &evaluation, text) {
                return code;
            }
            if evaluation.all_passed() {
                0
            } else {
                EXIT_FAILED
            }
        }
        Err(e) => {
            eprintln!("patchdiff evaluate: {e}");
            EXIT_USAGE
        }
    }
}

/// `patchdiff evaluate --controls-only` (V3): 0 when every target's controls hold.
async fn run_controls_only(
    manifest: &patchdiff::fixtures::FixtureManifest,
    options: &patchdiff::evaluate::EvaluateOptions,
    json: bool,
) -> i32 {
    let report = match patchdiff::evaluate::evaluate_controls(manifest, options).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("patchdiff evaluate: {e}");
            return EXIT_USAGE;
        }
    };
    let text = || {
        let mut out = String::new();
        for t in &report.targets {
            out.push_str(&format!(
                "{:<14} {} · controls {}\n",
                t.name,
                t.reason.as_deref().unwrap_or("controls hold"),
                t.source
                    .as_ref()
                    .map_or("-".to_owned(), patchdiff::evaluate::ControlSource::describe)
            ));
        }
        for t in report.targets.iter().filter(|t| !t.hold) {
            out.push_str(&patchdiff::evaluate::check_detail(
                &t.name,
                t.check_exit.as_deref(),
                &t.check_output,
            ));
        }
        out
    };
    if let Err(code) = print_result("evaluate", json, &report, text) {
        return code;
    }
    if report.hold { 0 } else { EXIT_FAILED }
}

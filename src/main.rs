//! The `patchdiff` binary: console (default), MCP server, evaluator. This file parses the
//! command line and dispatches; each subcommand group lives in `cli/`.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use patchdiff::config::Settings;
use patchdiff::console::headless::EXIT_USAGE;

use cli::compare::CompareCmd;
use cli::console::{ConsoleArgs, run_console};
use cli::doctor::DoctorArgs;
use cli::evaluate::{EvaluateArgs, run_evaluate};
use cli::mcp::{McpArgs, run_mcp};
use cli::replica::ReplicaCmd;
use cli::suite::{SuiteCmd, run_suite};
use cli::trace::{TraceArgs, run_trace};
use cli::verify::{KeyCmd, VerifyArgs, run_key, run_verify};

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
    /// Past runs and comparisons under the runs directory: `list` (default; --model, --host,
    /// --suite, --verdict, --rehearsal, --sort), `show ID`, `compare A B`, `story ID TARGET`;
    /// --json for the data. Reads only.
    Runs(patchdiff::runs::cli::RunsArgs),
    /// Replica integrations (R1–R4): `sync DIR --lease TARGET…` mirrors leased targets into a
    /// directory and edits them beside the agent through the full profile's replica tools.
    #[command(subcommand)]
    Replica(ReplicaCmd),
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
            Some(Cmd::Compare(cmd)) => cli::compare::run(cmd, &settings).await,
            Some(Cmd::Doctor(args)) => cli::doctor::run(args, &settings).await,
            Some(Cmd::Suite(cmd)) => run_suite(cmd, &settings).await,
            Some(Cmd::Runs(args)) => patchdiff::runs::cli::run(&args, &settings.paths.runs_root()),
            Some(Cmd::Replica(cmd)) => cli::replica::run(cmd, &settings).await,
        }
    });
    // The work is done; do not wait for blocking-pool threads still parked in a read of an
    // open stdin (an MCP server stopped by SIGTERM while its client keeps the pipe open).
    runtime.shutdown_background();
    ExitCode::from(code as u8)
}

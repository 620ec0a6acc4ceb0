//! `patchdiff compare power|plan|run|report`: gate 2 (C7), comparing two agent configurations
//! over many sealed runs; the work is in `patchdiff::gate2::cli`.

use std::path::PathBuf;

use clap::Subcommand;

use patchdiff::config::Settings;
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};
use patchdiff::gate2::cli as compare;

#[derive(Subcommand)]
pub(crate) enum CompareCmd {
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
pub(crate) struct PlanArgs {
    /// The baseline arm's canary script (a file, or a bundled name: demo, wrong, claude, codex, gemini, opencode).
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
pub(crate) struct RunArgs {
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
pub(crate) struct ReportArgs {
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
pub(crate) struct PowerArgs {
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

/// Runs one `compare` subcommand; returns the process exit code (see each subcommand's help).
pub(crate) async fn run(cmd: CompareCmd, settings: &Settings) -> i32 {
    match cmd {
        CompareCmd::Power(args) => run_compare_power(&args),
        CompareCmd::Plan(args) => compare::plan(args.into(), settings),
        CompareCmd::Run(args) => {
            compare::run(
                &args.plan,
                compare::RunMode {
                    resume: args.resume,
                    extend: args.extend,
                },
                args.slot.as_deref(),
                args.runs_dir,
                args.json,
                settings,
            )
            .await
        }
        CompareCmd::Report(args) => {
            compare::report(&args.dir, &args.runs, args.json, args.markdown, settings).await
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

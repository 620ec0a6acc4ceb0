//! `patchdiff evaluate`: the independent evaluator (V1–V3) over exported files, or only the
//! controls with `--controls-only`; the work is in `patchdiff::evaluate`.

use std::path::PathBuf;

use patchdiff::config::Settings;
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};

use super::print_result;

#[derive(clap::Args)]
pub(crate) struct EvaluateArgs {
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

pub(crate) async fn run_evaluate(args: EvaluateArgs, settings: &Settings) -> i32 {
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

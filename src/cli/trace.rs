//! `patchdiff trace RUN_DIR -o FILE`: a run's perf events as a Chrome trace-event file.

use std::path::PathBuf;

use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};

#[derive(clap::Args)]
pub(crate) struct TraceArgs {
    /// The run directory.
    #[arg(value_name = "RUN_DIR")]
    run_dir: PathBuf,
    /// Where to write the trace (created new; keep it outside a sealed run directory).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
}

pub(crate) fn run_trace(args: TraceArgs) -> i32 {
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

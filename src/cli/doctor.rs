//! `patchdiff doctor`: can this installation run a canary? The checks are `patchdiff::doctor`.

use patchdiff::config::Settings;

#[derive(clap::Args)]
pub(crate) struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the checks; exit 0 only if every one holds.
pub(crate) async fn run(args: DoctorArgs, settings: &Settings) -> i32 {
    patchdiff::doctor::run(settings, args.json).await
}

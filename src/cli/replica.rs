//! `patchdiff replica sync DIR`: the reference replica integration (R1–R4), its arguments and
//! handler. The work is `patchdiff::replica::sync::run`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use patchdiff::config::Settings;
use patchdiff::replica::sync::{
    self, DEFAULT_INTEGRATION, DEFAULT_INTERVAL_MS, DEFAULT_TTL_MS, EXIT_FAILED, EXIT_USAGE,
    SyncOptions,
};
use patchdiff::store::replica::{LEASE_MAX_TTL_MS, LEASE_MIN_TTL_MS};

#[derive(Subcommand)]
pub(crate) enum ReplicaCmd {
    /// Mirror leased targets into DIR, one file each, and keep both sides in step: a file
    /// changed in DIR becomes a replica submission (UTF-8 text only; anything else is refused,
    /// naming the file, with nothing applied), and canonical changes — the agent's edits
    /// included — are written back into the files atomically, never over a change not yet
    /// submitted. Talks to a full-profile `patchdiff mcp` child over stdio, with this process's
    /// settings (PATCHDIFF_DATABASE_URL, …).
    #[command(after_help = SYNC_AFTER_HELP)]
    Sync(SyncArgs),
}

const SYNC_AFTER_HELP: &str = "\
Examples:
  patchdiff replica sync mirror/ --lease calc.py --lease util.py --once    lease two targets, mirror them, one pass
  patchdiff replica sync mirror/ --once                                     one more pass under the lease mirror/ keeps
  patchdiff replica sync mirror/ --interval-ms 500                          keep syncing; SIGTERM/Ctrl-C releases the lease

A target's file is its name with every byte but letters, digits, `_`, `-` and a non-leading `.`
written %XX (src/lib.rs → src%2Flib.rs). The sync's own state, the MCP child's stderr and wire
log are in DIR/.patchdiff-sync. Exit 0: done with nothing refused; 1: a change was refused or
rejected, or the sync stopped on an error; 2: the options or DIR's state do not fit together.";

#[derive(Args)]
pub(crate) struct SyncArgs {
    /// The mirror directory (created if missing).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// A target to lease (repeat for more, 1..=64). Omit to resume the lease DIR mirrors.
    #[arg(long = "lease", value_name = "TARGET")]
    targets: Vec<String>,
    /// Take over the live lease with this id: DIR mirrors it already (a sync restarted after
    /// a crash) or mirrors nothing yet (each leased target is mirrored from its current
    /// content).
    #[arg(long, value_name = "ID", conflicts_with = "targets")]
    lease_id: Option<String>,
    /// The integration the lease is granted to (1..=128 bytes).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_INTEGRATION)]
    integration: String,
    /// The lease's length in milliseconds, renewed when less than half is left.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_TTL_MS,
          value_parser = clap::value_parser!(u64).range(LEASE_MIN_TTL_MS..=LEASE_MAX_TTL_MS))]
    ttl_ms: u64,
    /// Milliseconds between passes in the long-running mode (at most half the lease's length).
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_INTERVAL_MS,
          value_parser = clap::value_parser!(u64).range(10..=1_800_000))]
    interval_ms: u64,
    /// One pass, then exit; the lease is kept for the next sync of DIR.
    #[arg(long)]
    once: bool,
    /// With --once: release the lease after the pass.
    #[arg(long, requires = "once")]
    release: bool,
    /// One JSON object per event line (lease, mirrored, submitted with its receipt, updated,
    /// refused, kept_aside, renewed, released) instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `replica sync`; the exit code (0 done, 1 refused or failed, 2 usage).
pub(crate) async fn run(cmd: ReplicaCmd, settings: &Settings) -> i32 {
    let ReplicaCmd::Sync(args) = cmd;
    if args.interval_ms.saturating_mul(2) > args.ttl_ms {
        eprintln!(
            "patchdiff replica sync: --interval-ms {} is more than half of --ttl-ms {}; the lease \
             could expire between passes",
            args.interval_ms, args.ttl_ms
        );
        return EXIT_USAGE;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("patchdiff replica sync: cannot find this executable: {e}");
            return EXIT_FAILED;
        }
    };
    let launch = sync::launch_spec(settings, exe, &args.dir);
    sync::run(SyncOptions {
        dir: args.dir,
        targets: args.targets,
        lease_id: args.lease_id,
        integration: args.integration,
        ttl_ms: args.ttl_ms,
        interval: Duration::from_millis(args.interval_ms),
        once: args.once,
        release: args.release,
        json: args.json,
        launch,
    })
    .await
}

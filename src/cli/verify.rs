//! `patchdiff verify` (re-check a sealed run or comparison) and `patchdiff key new|show` (the
//! operator's seal key that `report` signs with and `verify --key` checks).

use std::path::PathBuf;

use clap::Subcommand;

use patchdiff::config::{Key, Settings};
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};
use patchdiff::gate2::cli as compare;

use super::print_result;

#[derive(clap::Args)]
pub(crate) struct VerifyArgs {
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

pub(crate) async fn run_verify(args: VerifyArgs, settings: &Settings) -> i32 {
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

#[derive(Subcommand)]
pub(crate) enum KeyCmd {
    /// Write a new ed25519 private key (PKCS#8 PEM, 0600) to <config dir>/seal-key.pem and print
    /// its public key: one line, `ed25519:` + base64 of the 32 key bytes (give it to
    /// `verify --key`). Refuses to overwrite an existing key without --force.
    New(KeyNewArgs),
    /// Print the public key of the existing seal key (the line `key new` printed).
    Show(KeyShowArgs),
}

#[derive(clap::Args)]
pub(crate) struct KeyNewArgs {
    /// Replace an existing key (runs it signed then verify only with its old public key).
    #[arg(long)]
    force: bool,
    /// Write the key here instead of <config dir>/seal-key.pem (`report` signs only with the
    /// key in the config directory).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct KeyShowArgs {
    /// The private key file (default <config dir>/seal-key.pem).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
}

/// `patchdiff key new|show`: prints the public key on stdout. Exit 0, or [`EXIT_FAILED`]
/// (an existing key without --force, no key to show, an unreadable key) said on stderr.
pub(crate) fn run_key(cmd: KeyCmd, settings: &Settings) -> i32 {
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

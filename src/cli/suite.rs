//! `patchdiff suite new|add|pin|check`: author and pin a fixture suite of your own.

use std::path::PathBuf;

use clap::Subcommand;

use patchdiff::config::Settings;
use patchdiff::console::headless::{EXIT_FAILED, EXIT_USAGE};

// Parsed once per process and moved into its handler: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(crate) enum SuiteCmd {
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
        /// javascript, jsx, typescript, tsx, python, rust, go, java, c, cpp, csharp, ruby or
        /// php (`patchdiff::waymark::Language::ALL`).
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

/// `patchdiff suite …`: exit 0 when done (for `check`: when everything holds), 1 when
/// `check` found a problem, 2 for refused input (nothing changed).
pub(crate) async fn run_suite(cmd: SuiteCmd, settings: &Settings) -> i32 {
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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::SuiteCmd;
    use patchdiff::waymark::Language;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        suite: SuiteCmd,
    }

    /// The `--language` help of `suite add` names every language discovery parses (it once
    /// stopped at the first seven).
    #[test]
    fn suite_add_help_names_every_language() {
        let mut cli = Cli::command();
        let add = cli.find_subcommand_mut("add").expect("suite add");
        let help = add.render_long_help().to_string();
        // The option's paragraph (the last mention; the first is the usage line), up to the
        // next option.
        let from = help.rfind("--language").expect("--language");
        let paragraph = &help[from..help[from..]
            .find("--original")
            .map_or(help.len(), |n| from + n)];
        let words: Vec<&str> = paragraph
            .split(|c: char| !c.is_ascii_alphanumeric())
            .collect();
        for language in Language::ALL {
            assert!(
                words.contains(&language.as_str()),
                "`{language}` missing from:\n{paragraph}"
            );
        }
    }
}

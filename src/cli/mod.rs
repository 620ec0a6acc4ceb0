//! The `patchdiff` binary's subcommands, one module per group: each holds its clap arguments
//! and its handler, which returns the process exit code. `main.rs` parses and dispatches.

pub(crate) mod compare;
pub(crate) mod console;
pub(crate) mod doctor;
pub(crate) mod evaluate;
pub(crate) mod mcp;
pub(crate) mod replica;
pub(crate) mod suite;
pub(crate) mod trace;
pub(crate) mod verify;

use patchdiff::console::headless::EXIT_FAILED;

/// Prints `result` as pretty JSON with `json`, else `text()`. `Err(EXIT_FAILED)` when it cannot
/// be serialized (said on stderr as `patchdiff COMMAND: …`).
pub(crate) fn print_result<T: serde::Serialize>(
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

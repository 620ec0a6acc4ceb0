//! Headless console (`patchdiff console --script FILE`, SPEC U3, U5): runs the same commands as
//! the interactive console, one progress line per step, and a final report.
//!
//! Exit codes: 0 every step succeeded (an `evaluate` step fails unless every target passes both
//! checks); 1 a step failed;
//! 2 the script or the options were invalid (nothing was run); 130 / 143 interrupted by SIGINT /
//! SIGTERM (child processes stopped first).

use std::io::Write;
use std::path::Path;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::canary::command::{Command, parse_script};
use crate::canary::{Canary, CanaryOptions};

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: a step failed or a target did not pass.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: invalid script or options; nothing ran.
pub const EXIT_USAGE: i32 = 2;

/// Runs `script` headless. Progress goes to stdout, or to stderr when `json` is set (stdout then
/// carries only the JSON report).
pub async fn run_script(options: CanaryOptions, script: &Path, json: bool) -> i32 {
    let mut progress: Box<dyn Write> = if json {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    let commands = match std::fs::read_to_string(script)
        .map_err(|e| format!("cannot read script {}: {e}", script.display()))
        .and_then(|text| parse_script(&text).map_err(|e| located(script, &e)))
    {
        Ok(c) => resolve_paths(c, script.parent().unwrap_or(Path::new("."))),
        Err(e) => {
            eprintln!("patchdiff: {e}");
            return EXIT_USAGE;
        }
    };
    // U5: refuse an invalid script whole, before anything runs: plans must load and refer only to
    // earlier steps, and `record` must precede `init` (the manifest is written once, E2).
    if let Err(e) = check_script(&commands, &options.settings) {
        eprintln!("patchdiff: {}", located(script, &e));
        return EXIT_USAGE;
    }
    // `attach` watches a process in the interactive console; a script cannot run it.
    if let Some((line, _)) = commands
        .iter()
        .find(|(_, c)| matches!(c, Command::Attach { .. }))
    {
        eprintln!(
            "patchdiff: {}: line {line}: `attach` works only in the interactive console",
            script.display()
        );
        return EXIT_USAGE;
    }
    let mut canary = match Canary::create(options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("patchdiff: cannot start the canary: {e:#}");
            return EXIT_USAGE;
        }
    };
    // A4: the run manifest (written at init) names the agent host the script launches.
    if let Some((_, Command::AgentHost { host, model, .. })) = commands
        .iter()
        .find(|(_, c)| matches!(c, Command::AgentHost { .. }))
    {
        let recorded = commands.iter().find_map(|(_, c)| match c {
            Command::Record { model: Some(m), .. } => Some(m.clone()),
            _ => None,
        });
        if let Err(e) = canary
            .plan_host(*host, model.as_deref().or(recorded.as_deref()))
            .await
        {
            eprintln!("patchdiff: {e:#}");
            return EXIT_USAGE;
        }
    }
    let _ = writeln!(
        progress,
        "patchdiff canary {} · evidence {}",
        canary.run.run_id,
        canary.run.path.display()
    );
    let (mut sigint, mut sigterm) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("patchdiff: cannot watch for interrupts: {e}");
            return EXIT_FAILED;
        }
    };
    let total = commands.len();
    // `[i/n]` column width, so step names line up past nine steps.
    let w = 2 * total.to_string().len() + 3;
    let mut failed = false;
    for (i, (_, command)) in commands.iter().enumerate() {
        // After a failure only `report` and views (`target`) still run, so the report names
        // what failed and the operator sees why.
        if failed
            && !matches!(
                command,
                Command::Report | Command::Target { .. } | Command::Runs { .. }
            )
        {
            let _ = writeln!(
                progress,
                "[{}/{total}] {:<11} skipped",
                i + 1,
                command.name()
            );
            continue;
        }
        // U5: an operator's interrupt ends the run as interrupted (exit 130 for SIGINT, 143 for
        // SIGTERM), never as the step's own failure or timeout.
        let outcome = tokio::select! {
            outcome = canary.execute(command) => outcome,
            signal = interrupted(&mut sigint, &mut sigterm) => {
                let (name, code) = signal;
                let _ = writeln!(
                    progress,
                    "{:<w$} {:<11} {:<4} interrupted by {name}; stopping child processes",
                    format!("[{}/{total}]", i + 1),
                    command.name(),
                    "INT"
                );
                canary.stop(None).await;
                let _ = writeln!(
                    progress,
                    "INTERRUPTED · evidence {}",
                    canary.run.path.display()
                );
                return code;
            }
        };
        let _ = writeln!(
            progress,
            "{:<w$} {:<11} {:<4} {}",
            format!("[{}/{total}]", i + 1),
            outcome.command,
            if outcome.ok { "ok" } else { "FAIL" },
            outcome.summary
        );
        // V3: a check that did not pass shows its exit status and output tail right here.
        if !outcome.ok && matches!(command, Command::Preflight | Command::Evaluate { .. }) {
            for row in canary.targets.iter().filter(|r| {
                r.status.is_some_and(|s| s != crate::evaluate::Status::Pass)
                    && r.check_output.is_some()
            }) {
                let _ = write!(
                    progress,
                    "{}",
                    crate::evaluate::check_detail(
                        &format!("  {} {}", row.name, row.status.map_or("-", |s| s.as_str())),
                        row.check_exit.as_deref(),
                        row.check_output.as_deref().unwrap_or("")
                    )
                );
            }
        }
        if let (Command::HostConfig { host, .. }, true) = (command, outcome.ok) {
            let _ = writeln!(progress, "{}", canary.host_config(*host));
        }
        if let (Command::Target { name }, true) = (command, outcome.ok)
            && let Ok(story) = canary.target_story(name)
        {
            let _ = writeln!(progress, "{story}");
        }
        if let (Command::Runs { action }, true) = (command, outcome.ok)
            && let Ok(text) = canary.runs_view(action)
        {
            let _ = writeln!(progress, "{text}");
        }
        failed |= !outcome.ok;
    }
    canary.stop(None).await;
    let report = canary.build_report();
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("patchdiff: cannot serialize the report: {e}"),
        }
    } else if canary.evaluation.is_some() {
        let passing = report.targets.iter().filter(|t| t.passed()).count();
        let _ = writeln!(
            progress,
            "{} · {passing}/{} targets pass both checks · report {}",
            if report.passed && !failed {
                "PASSED"
            } else {
                "FAILED"
            },
            report.targets.len(),
            canary.run.report("txt").display()
        );
    } else {
        let ok = canary.steps.iter().filter(|s| s.ok).count();
        let _ = writeln!(
            progress,
            "{} · {ok}/{total} steps ok · not evaluated",
            if failed { "FAILED" } else { "DONE" }
        );
    }
    // U5: 0 only when every step succeeded; a failed evaluation is a failed step.
    if failed { EXIT_FAILED } else { EXIT_OK }
}

/// Turns `line N: …` errors (one per line) into `FILE:N: …`, one `patchdiff:` line each.
fn located(script: &Path, errors: &str) -> String {
    errors
        .lines()
        .map(
            |l| match l.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
                Some((n, rest)) => format!("{}:{n}: {rest}", script.display()),
                None => format!("{}: {l}", script.display()),
            },
        )
        .collect::<Vec<_>>()
        .join("\npatchdiff: ")
}

/// Waits for SIGINT or SIGTERM; returns its name and the shell's exit code for it (128 + n).
async fn interrupted(sigint: &mut Signal, sigterm: &mut Signal) -> (&'static str, i32) {
    tokio::select! {
        _ = sigint.recv() => ("SIGINT", 130),
        _ = sigterm.recv() => ("SIGTERM", 143),
    }
}

/// Static checks of a parsed script (see [`run_script`]); errors name the line.
fn check_script(
    commands: &[(usize, Command)],
    settings: &crate::config::Settings,
) -> Result<(), String> {
    let mut init_line = None;
    for (line, command) in commands {
        match command {
            Command::Agent { plan } => {
                crate::canary::plan::load_plan(plan).map_err(|e| format!("line {line}: {e}"))?;
            }
            Command::Init { .. } => {
                init_line.get_or_insert(*line);
            }
            Command::AgentHost { host, model, .. } => {
                // A1: the binary must resolve and the model be known before anything runs.
                crate::canary::host::resolve_binary(*host, settings)
                    .map_err(|e| format!("line {line}: {e}"))?;
                let recorded = commands.iter().any(|(l, c)| {
                    *l < *line && matches!(c, Command::Record { model: Some(_), .. })
                });
                if model.is_none() && !recorded {
                    return Err(format!(
                        "line {line}: `agent {}` needs a model: give model=… or `record model=…` before it",
                        host.as_str()
                    ));
                }
            }
            Command::Record { .. } => {
                if let Some(init) = init_line {
                    return Err(format!(
                        "line {line}: `record` must come before `init` (line {init}): the run \
                         manifest is written once, at init"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Relative paths in a script (agent plans) are relative to the script's own directory, so a
/// script runs the same from any working directory.
fn resolve_paths(commands: Vec<(usize, Command)>, script_dir: &Path) -> Vec<(usize, Command)> {
    commands
        .into_iter()
        .map(|(line, command)| match command {
            Command::Agent { plan } if plan.is_relative() => (
                line,
                Command::Agent {
                    plan: script_dir.join(plan),
                },
            ),
            Command::HostConfig {
                host,
                file: Some(file),
            } if file.is_relative() => (
                line,
                Command::HostConfig {
                    host,
                    file: Some(script_dir.join(file)),
                },
            ),
            other => (line, other),
        })
        .collect()
}

//! Headless console (`patchdiff console --script FILE`, SPEC U3, U5): runs the same commands as
//! the interactive console, one progress line per step, and a final report.
//!
//! Exit codes: 0 every step succeeded (an `evaluate` step fails unless every target passes both
//! checks); 1 a step failed (after the agent acted, its saved work is still exported, inspected
//! and evaluated); 2 the script or the options were invalid (nothing was run); 3 `infra_abort`:
//! the run stopped before the agent acted (host could not start, seal refused, the provider
//! refused its first request, preflight failed) — nothing judged, nothing counts against the
//! agent; 130 / 143 interrupted by SIGINT / SIGTERM (child processes stopped first). A script
//! with a `compare` step exits as `patchdiff compare run` does for it when that is not 0
//! (1 regressed, 2 refused — gate 2 closed is refused before anything runs —, 3 invalid or
//! incomplete); its per-run lines are printed as they finish, then the same report.

use std::io::Write;
use std::path::Path;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::canary::command::{Command, parse_script};
use crate::canary::{Canary, CanaryOptions};
use crate::display::{VisibleWriter, visible};

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: a step failed or a target did not pass.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: invalid script or options; nothing ran.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: `infra_abort` — the run stopped before the agent acted; no target was judged and
/// nothing counts against the agent.
pub const EXIT_INFRA_ABORT: i32 = 3;

/// Runs `script` headless. Progress goes to stdout, or to stderr when `json` is set (stdout then
/// carries only the JSON report). Returns the exit code ([`EXIT_OK`], [`EXIT_FAILED`],
/// [`EXIT_USAGE`], [`EXIT_INFRA_ABORT`], 130/143 when interrupted).
pub async fn run_script(options: CanaryOptions, script: &Path, json: bool) -> i32 {
    run_script_with(options, script, &[], json).await
}

/// [`run_script`] with `--set NAME=VALUE` parameters filling the script's `${NAME}`
/// placeholders ([`crate::canary::command::fill_placeholders`]); a placeholder without a
/// value, or a parameter naming none, refuses the script before anything runs.
pub async fn run_script_with(
    options: CanaryOptions,
    script: &Path,
    params: &[(String, String)],
    json: bool,
) -> i32 {
    // Progress lines carry what the agent wrote (step summaries, check output,
    // stories); a person's terminal gets it only through `visible`.
    let mut progress: Box<dyn Write> = if json {
        Box::new(VisibleWriter::new(std::io::stderr()))
    } else {
        Box::new(VisibleWriter::new(std::io::stdout()))
    };
    let commands = match load_script(script, params) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("patchdiff: {}", visible(&e));
            return EXIT_USAGE;
        }
    };
    // Gate 2 (C7): a comparison is refused whole, before anything runs, while the gate is closed.
    if let Some((line, _)) = commands
        .iter()
        .find(|(_, c)| matches!(c, Command::Compare { .. }))
        && let Some(refused) = crate::gate2::cli::gate_refusal(&options.settings)
    {
        eprintln!(
            "patchdiff: {}:{line}: `compare` refused: {}",
            script.display(),
            refused.message
        );
        return refused.code;
    }
    let mut canary = match start_canary(options, &commands).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("patchdiff: {}", visible(&e));
            return EXIT_USAGE;
        }
    };
    // A script of views only (`runs`, `target`) creates no run directory; nor does one that
    // only compares (a comparison has its own directory).
    let views_only = commands.iter().all(|(_, c)| c.is_view());
    let no_run_dir = commands.iter().all(|(_, c)| !c.needs_run_dir());
    // A comparison's progress lines, as its member runs finish, under its step.
    let stream_to_stderr = json;
    canary.comparison.progress = Some(std::sync::Arc::new(move |line: String| {
        let line = format!("  {line}\n");
        let _ = if stream_to_stderr {
            VisibleWriter::new(std::io::stderr()).write_all(line.as_bytes())
        } else {
            VisibleWriter::new(std::io::stdout()).write_all(line.as_bytes())
        };
    }));
    let _ = if views_only {
        writeln!(
            progress,
            "patchdiff views · runs under {} · no run directory (the script only views)",
            canary.options.runs_root.display()
        )
    } else if no_run_dir {
        writeln!(
            progress,
            "patchdiff compare · runs under {} · no run directory (the script only compares and views)",
            canary.options.runs_root.display()
        )
    } else {
        writeln!(
            progress,
            "patchdiff canary {} · evidence {}",
            canary.run.run_id,
            canary.run.path.display()
        )
    };
    let failed = match run_steps(&mut canary, &commands, &mut progress).await {
        Ok(failed) => failed,
        Err(code) => return code,
    };
    canary.stop(None).await;
    if views_only {
        finish_views(&canary, &commands, json, &mut progress);
    } else if no_run_dir {
        finish_compare(&canary, failed, json, &mut progress);
    } else {
        finish(&canary, commands.len(), failed, json, &mut progress);
    }
    // A comparison that did not come out unchanged/improved exits as `compare run` would.
    if let Some(code) = canary
        .comparison
        .last
        .as_ref()
        .map(|c| c.exit_code)
        .filter(|c| *c != EXIT_OK)
    {
        return code;
    }
    // U5: 0 only when every step succeeded; a failed evaluation is a failed step.
    if canary.build_report().infra_abort.is_some() {
        EXIT_INFRA_ABORT
    } else if failed {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// Reads, parses and checks the script, with paths resolved against its directory. U5: an
/// invalid script is refused whole, before anything runs. Errors are `FILE:LINE: …` lines.
fn load_script(
    script: &Path,
    params: &[(String, String)],
) -> Result<Vec<(usize, Command)>, String> {
    let text = std::fs::read_to_string(script)
        .map_err(|e| format!("cannot read script {}: {e}", script.display()))?;
    let text = crate::canary::command::fill_placeholders(&text, params)
        .map_err(|e| located(script, &e))?;
    let commands = parse_script(&text).map_err(|e| located(script, &e))?;
    let commands = resolve_paths(commands, script.parent().unwrap_or(Path::new(".")));
    // Plans must load and refer only to earlier steps, and `record` must precede `init` (the
    // manifest is written once, E2).
    check_script(&commands).map_err(|e| located(script, &e))?;
    // `attach` watches a process in the interactive console; a script cannot run it.
    if let Some((line, _)) = commands
        .iter()
        .find(|(_, c)| matches!(c, Command::Attach { .. }))
    {
        return Err(format!(
            "{}: line {line}: `attach` works only in the interactive console",
            script.display()
        ));
    }
    Ok(commands)
}

/// Creates the canary's run; A4: when the script launches an agent host, resolves it first so
/// the run manifest (written at init) names it.
async fn start_canary(
    options: CanaryOptions,
    commands: &[(usize, Command)],
) -> Result<Canary, String> {
    let mut canary =
        Canary::create(options).map_err(|e| format!("cannot start the canary: {e:#}"))?;
    // A run meant for an agent aborts when a step fails before it acted.
    canary.agent_planned = commands
        .iter()
        .any(|(_, c)| matches!(c, Command::Agent { .. } | Command::AgentHost { .. }));
    if let Some((_, Command::AgentHost { host, model, .. })) = commands
        .iter()
        .find(|(_, c)| matches!(c, Command::AgentHost { .. }))
    {
        let recorded = commands.iter().find_map(|(_, c)| match c {
            Command::Record { model: Some(m), .. } => Some(m.clone()),
            _ => None,
        });
        canary
            .plan_host(*host, model.as_deref().or(recorded.as_deref()))
            .await;
    }
    Ok(canary)
}

/// Runs every step, one progress line each. After a failure only `report` and views
/// (`target`, `runs`) still run, so the report names what failed and the operator sees why —
/// and, once the agent acted, `export`, `inspect` and `evaluate`, which judge what it saved
/// ([`Canary::runs_after_failure`]).
/// Returns whether a step failed, or `Err(exit code)` when interrupted (U5: 130 for SIGINT,
/// 143 for SIGTERM, after stopping the child processes — never the step's own failure).
async fn run_steps(
    canary: &mut Canary,
    commands: &[(usize, Command)],
    progress: &mut Box<dyn Write>,
) -> Result<bool, i32> {
    let (mut sigint, mut sigterm) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("patchdiff: cannot watch for interrupts: {e}");
            return Err(EXIT_FAILED);
        }
    };
    let total = commands.len();
    // `[i/n]` column width, so step names line up past nine steps.
    let w = 2 * total.to_string().len() + 3;
    let mut failed = false;
    for (i, (_, command)) in commands.iter().enumerate() {
        if failed && !canary.runs_after_failure(command) {
            let _ = writeln!(
                progress,
                "[{}/{total}] {:<11} skipped",
                i + 1,
                command.name()
            );
            continue;
        }
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
                return Err(code);
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
        show_step_output(canary, command, outcome.ok, progress);
        failed |= !outcome.ok;
    }
    Ok(failed)
}

/// What a step shows below its progress line: V3, a check that did not pass shows its exit
/// status and output tail; `host-config`, `target` and `runs` print their text.
fn show_step_output(canary: &Canary, command: &Command, ok: bool, progress: &mut Box<dyn Write>) {
    if !ok && matches!(command, Command::Preflight | Command::Evaluate { .. }) {
        for row in canary.targets.iter().filter(|r| {
            r.status.is_some_and(|s| s != crate::evaluate::Status::Pass) && r.check_output.is_some()
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
    // A comparison's report, whatever its verdict (as `compare run` prints it).
    if let (Command::Compare { .. }, Some(text)) = (
        command,
        canary
            .comparison
            .last
            .as_ref()
            .and_then(|c| c.text.as_ref()),
    ) {
        let _ = write!(progress, "{text}");
    }
    if !ok {
        return;
    }
    match command {
        Command::HostConfig { host, .. } => {
            let _ = writeln!(progress, "{}", canary.host_config(*host));
        }
        Command::Target { name } => {
            if let Ok(story) = canary.target_story(name) {
                let _ = writeln!(progress, "{story}");
            }
        }
        Command::Runs { action } => {
            if let Ok(text) = canary.runs_view(action) {
                let _ = writeln!(progress, "{text}");
            }
        }
        _ => {}
    }
}

/// The final report: JSON on stdout with `json`, else the verdict line (`PASSED · n/m targets
/// pass · report …`, or `DONE`/`FAILED · k/n steps ok · not evaluated`).
fn finish(canary: &Canary, total: usize, failed: bool, json: bool, progress: &mut Box<dyn Write>) {
    let report = canary.build_report();
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("patchdiff: cannot serialize the report: {e}"),
        }
    } else if let Some(why) = &report.infra_abort {
        let _ = writeln!(
            progress,
            "INFRA_ABORT · nothing judged, nothing counts against the agent: {why} · report {}",
            canary.run.report("txt").display()
        );
    } else if canary.evaluation.is_some() {
        let passing = report.targets.iter().filter(|t| t.passed()).count();
        let _ = writeln!(
            progress,
            "{} · {passing}/{} targets pass · report {}",
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
}

/// The end of a script that only compared (and viewed): with `json` the comparison's
/// `report.json`, else `VERDICT · comparison DIR · no run directory created`.
fn finish_compare(canary: &Canary, failed: bool, json: bool, progress: &mut Box<dyn Write>) {
    let last = canary.comparison.last.as_ref();
    if json {
        let value = last.and_then(|c| c.json.clone()).unwrap_or_default();
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
        return;
    }
    let verdict = last
        .and_then(|c| c.json.as_ref())
        .and_then(|j| j["verdict"]["kind"].as_str().map(str::to_owned));
    let _ = writeln!(
        progress,
        "{} · comparison {} · no run directory created",
        match (&verdict, failed) {
            (Some(v), _) => v.clone(),
            (None, _) => "FAILED".to_owned(),
        },
        last.and_then(|c| c.dir.as_ref())
            .map_or_else(|| "not run".to_owned(), |d| d.display().to_string())
    );
}

/// The end of a session that only viewed: `VIEWED · k/n views ok` (or `FAILED · …`), or with
/// `json` what each view showed as data ([`crate::runs::view_json`]; a story as text).
fn finish_views(
    canary: &Canary,
    commands: &[(usize, Command)],
    json: bool,
    progress: &mut Box<dyn Write>,
) {
    let views: Vec<serde_json::Value> = commands
        .iter()
        .map(|(line, c)| {
            let data = match c {
                Command::Runs { action } => {
                    crate::runs::view_json(&canary.options.runs_root, action)
                }
                Command::Target { name } => canary
                    .target_story(name)
                    .map(serde_json::Value::String)
                    .map_err(|e| format!("{e:#}")),
                _ => Err("not a view".to_owned()),
            };
            match data {
                Ok(data) => {
                    serde_json::json!({"line": line, "command": c.name(), "ok": true, "data": data})
                }
                Err(e) => {
                    serde_json::json!({"line": line, "command": c.name(), "ok": false, "error": e})
                }
            }
        })
        .collect();
    let ok = views.iter().filter(|v| v["ok"] == true).count();
    if json {
        let report = serde_json::json!({
            "views_only": true,
            "run_directory": null,
            "runs_root": canary.options.runs_root,
            "views": views,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        let _ = writeln!(
            progress,
            "{} · {ok}/{} views ok · no run directory created",
            if ok == views.len() {
                "VIEWED"
            } else {
                "FAILED"
            },
            views.len()
        );
    }
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
fn check_script(commands: &[(usize, Command)]) -> Result<(), String> {
    let mut init_line = None;
    for (line, command) in commands {
        match command {
            Command::Agent { plan } => {
                crate::canary::plan::load_plan(plan).map_err(|e| format!("line {line}: {e}"))?;
            }
            Command::Replica { plan, .. } => {
                crate::canary::steps::replica::load_replica_plan(plan)
                    .map_err(|e| format!("line {line}: {e}"))?;
            }
            Command::Init { .. } => {
                init_line.get_or_insert(*line);
            }
            Command::AgentHost { host, model, .. } => {
                // A1: the model must be known before anything runs. A host binary that does
                // not resolve is not the script's fault: the run reaches the `agent` step and
                // ends `infra_abort` there, with a report.
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
            Command::Suite { path } => {
                // The suite must load before anything runs (no run directory for a typo).
                let manifest = if path.is_dir() {
                    path.join("manifest.json")
                } else {
                    path.clone()
                };
                crate::fixtures::FixtureManifest::load(&manifest)
                    .map_err(|e| format!("line {line}: suite: {e}"))?;
                if let Some(init) = init_line {
                    return Err(format!(
                        "line {line}: `suite` must come before `init` (line {init}): init copies \
                         the suite into the run"
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
            Command::Replica { target, plan } if plan.is_relative() => (
                line,
                Command::Replica {
                    target,
                    plan: script_dir.join(plan),
                },
            ),
            Command::Compare { plan } if plan.is_relative() => (
                line,
                Command::Compare {
                    plan: script_dir.join(plan),
                },
            ),
            Command::Suite { path } if path.is_relative() => (
                line,
                Command::Suite {
                    path: script_dir.join(path),
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

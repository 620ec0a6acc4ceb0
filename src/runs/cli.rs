//! `patchdiff runs [list|show ID|compare A B|story ID TARGET] [--json]` (U2):
//! the run index, one entry opened, two runs side by side, a past run's target story — the
//! same library the console's runs views use. Reads only.
//!
//! Exit codes: 0 shown; 1 an entry could not be read for `compare`/`story`; 2 bad input (an id
//! that names no entry or several, a filter value that is not accepted — the message lists
//! candidates or the accepted values).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::json;

use super::detail;
use super::index::{EntryKind, RunFilter, RunSummary, RunVerdict, SortKey, query, resolve};
use crate::display::{visible, visible_inline};

/// Exit code: shown.
pub const EXIT_OK: i32 = 0;
/// Exit code: an entry could not be read.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: bad input (unknown or ambiguous id, a filter value not accepted).
pub const EXIT_USAGE: i32 = 2;

/// `patchdiff runs`: past runs and comparisons under the runs directory.
#[derive(Debug, Args, Default)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub action: Option<RunsAction>,
    /// The runs directory (default: the one the console writes to, `runs` in the data
    /// directory, PATCHDIFF_DATA_DIR).
    #[arg(long, value_name = "DIR", global = true)]
    pub runs_dir: Option<PathBuf>,
    /// Print the data as JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// List: only entries whose model contains TEXT (case-insensitive).
    #[arg(long, value_name = "TEXT", global = true)]
    pub model: Option<String>,
    /// List: only entries whose agent host contains TEXT (`scripted` for none).
    #[arg(long, value_name = "TEXT", global = true)]
    pub host: Option<String>,
    /// List: only entries whose suite name contains TEXT or whose suite digest starts with it.
    #[arg(long, value_name = "TEXT", global = true)]
    pub suite: Option<String>,
    /// List: only entries with this verdict: passed, failed, infra_abort, no_report,
    /// unchanged, improved, regressed, invalid, incomplete, unreadable.
    #[arg(long, value_name = "VERDICT", global = true, value_parser = parse_verdict)]
    pub verdict: Option<RunVerdict>,
    /// List: only rehearsals (`yes`, the default of the bare flag) or only runs against a
    /// real provider (`no`).
    #[arg(long, value_name = "yes|no", global = true, num_args = 0..=1,
          default_missing_value = "yes", value_parser = parse_yes_no)]
    pub rehearsal: Option<bool>,
    /// List: only runs, or only comparisons.
    #[arg(long, value_name = "run|comparison", global = true, value_parser = parse_kind)]
    pub kind: Option<EntryKind>,
    /// List: order by newest (default), oldest, model, host or verdict.
    #[arg(long, value_name = "KEY", global = true, default_value = "newest", value_parser = parse_sort)]
    pub sort: SortKey,
}

/// What `patchdiff runs` shows.
#[derive(Debug, Subcommand, Clone)]
pub enum RunsAction {
    /// One line per run and comparison (the default).
    List,
    /// One run: verdict per target, stories, steps, processes as they ended, evidence files;
    /// a comparison: its verdict and per-target strips. ID: a unique prefix, CMP/SLOT for a
    /// comparison's member run, or a path.
    Show { id: String },
    /// Two runs side by side: per-target verdicts A → B, phase and step durations, tool errors.
    Compare { a: String, b: String },
    /// A past run's target story: verdict with the check's output, submissions, diffs.
    Story { id: String, target: String },
}

fn parse_verdict(s: &str) -> Result<RunVerdict, String> {
    s.parse()
}

fn parse_sort(s: &str) -> Result<SortKey, String> {
    s.parse()
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!(
            "`{}` is not yes or no",
            crate::display::visible_inline(s)
        )),
    }
}

fn parse_kind(s: &str) -> Result<EntryKind, String> {
    match s.to_ascii_lowercase().as_str() {
        "run" | "runs" => Ok(EntryKind::Run),
        "comparison" | "comparisons" | "cmp" => Ok(EntryKind::Comparison),
        _ => Err(format!(
            "`{}` is not run or comparison",
            crate::display::visible_inline(s)
        )),
    }
}

impl RunsArgs {
    /// The filter the list options set.
    pub fn filter(&self) -> RunFilter {
        RunFilter {
            model: self.model.clone(),
            host: self.host.clone(),
            suite: self.suite.clone(),
            verdict: self.verdict,
            rehearsal: self.rehearsal,
            kind: self.kind,
        }
    }
}

/// Runs `patchdiff runs` with the runs directory `default_root` unless `--runs-dir` names
/// another; prints to stdout (errors to stderr) and returns the exit code.
pub fn run(args: &RunsArgs, default_root: &Path) -> i32 {
    let root = args
        .runs_dir
        .clone()
        .unwrap_or_else(|| default_root.to_owned());
    match execute(args, &root) {
        Ok(text) => {
            println!("{text}");
            EXIT_OK
        }
        Err((code, message)) => {
            eprintln!("patchdiff runs: {}", visible(&message));
            code
        }
    }
}

/// The text (or JSON) `patchdiff runs` prints for `args` under `root`, or the exit code and
/// the error message.
pub fn execute(args: &RunsArgs, root: &Path) -> Result<String, (i32, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    match args.action.clone().unwrap_or(RunsAction::List) {
        RunsAction::List => {
            let runs = query(root, &args.filter(), args.sort);
            Ok(if args.json {
                pretty(json!({"root": root, "entries": runs}))
            } else {
                render_table(root, &runs, args.filter() != RunFilter::default())
            })
        }
        RunsAction::Show { id } => {
            let detail = detail::open(root, &id).map_err(usage)?;
            Ok(if args.json {
                pretty(serde_json::to_value(&detail).unwrap_or_default())
            } else {
                detail.to_text()
            })
        }
        RunsAction::Compare { a, b } => {
            let (pa, pb) = (
                resolve(root, &a).map_err(usage)?,
                resolve(root, &b).map_err(usage)?,
            );
            for p in [&pa, &pb] {
                if p.join(crate::gate2::matrix::PLAN_SEAL_FILE).is_file() {
                    return Err(usage(format!(
                        "{} is a comparison, not a run: `patchdiff runs show {}` shows it \
                         (compare takes two runs; CMP/SLOT names a member run)",
                        p.display(),
                        p.file_name().unwrap_or_default().to_string_lossy()
                    )));
                }
            }
            let pair = super::pair::pair(&pa, &pb).map_err(|e| (EXIT_FAILED, e))?;
            Ok(if args.json {
                pretty(serde_json::to_value(&pair).unwrap_or_default())
            } else {
                pair.to_text()
            })
        }
        RunsAction::Story { id, target } => {
            let run = resolve(root, &id).map_err(usage)?;
            let story = detail::story(&run, &target).map_err(|e| (EXIT_FAILED, e))?;
            Ok(if args.json {
                pretty(json!({"run": run, "target": target, "story": story}))
            } else {
                story
            })
        }
    }
}

/// Pads `s` to `width` characters (not bytes).
fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

/// The list as a table: one line per entry — id, start (UTC), model, host, suite (name and
/// digest prefix), verdict (with `(rehearsal)`), targets passed (a comparison: member runs),
/// seal — and an unreadable entry's reason.
pub fn render_table(root: &Path, runs: &[RunSummary], filtered: bool) -> String {
    if runs.is_empty() {
        return format!(
            "no {}runs under {}",
            if filtered { "matching " } else { "" },
            root.display()
        );
    }
    let rows: Vec<[String; 8]> = runs
        .iter()
        .map(|r| {
            let suite = match (&r.suite, &r.suite_sha256) {
                (Some(n), Some(d)) => format!("{n}@{}", &d[..d.len().min(8)]),
                (Some(n), None) => n.clone(),
                (None, Some(d)) => format!("@{}", &d[..d.len().min(8)]),
                (None, None) => "-".to_owned(),
            };
            let targets = match (r.kind, r.members) {
                (EntryKind::Comparison, Some((n, of))) => format!("{n}/{of} runs"),
                _ if r.verdict == RunVerdict::Unreadable => "-".to_owned(),
                _ => format!("{}/{}", r.targets_passed, r.targets_total),
            };
            let seal = match (r.seal, r.signed) {
                (super::SealState::Sealed, true) => "sealed, signed".to_owned(),
                (s, _) => s.label().to_owned(),
            };
            [
                visible_inline(&r.id).into_owned(),
                super::date(r.started_ms),
                visible_inline(r.model.as_deref().unwrap_or("-")).into_owned(),
                if r.verdict == RunVerdict::Unreadable {
                    "-".to_owned()
                } else {
                    visible_inline(r.host_label()).into_owned()
                },
                visible_inline(&suite).into_owned(),
                super::verdict_word(r),
                targets,
                match &r.problem {
                    Some(p) if r.verdict == RunVerdict::Unreadable => {
                        visible_inline(p).into_owned()
                    }
                    Some(p) => format!("{seal}: {}", visible_inline(p)),
                    None => seal,
                },
            ]
        })
        .collect();
    let header = [
        "ID", "STARTED", "MODEL", "HOST", "SUITE", "VERDICT", "TARGETS", "SEAL",
    ];
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count().min(48));
        }
    }
    let line = |cells: [&str; 8]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&pad(cell, widths[i]));
                out.push_str("  ");
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = vec![
        format!(
            "{} {} under {}",
            runs.len(),
            if runs.len() == 1 { "entry" } else { "entries" },
            root.display()
        ),
        line(header),
    ];
    for row in &rows {
        out.push(line(row.each_ref().map(String::as_str)));
    }
    out.join("\n")
}

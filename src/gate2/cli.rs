//! `patchdiff compare plan|run|report` and `patchdiff verify CMP_DIR` (SPEC C7, gate 2): the command
//! bodies `main` calls with its resolved [`Settings`]. Each returns the process exit code:
//! 0 unchanged/improved, 1 regressed, 2 usage or gate closed, 3 invalid/incomplete.
//!
//! Gate 2 (SPEC C7) guards what spends agent runs: `compare run` refuses with exit 2 unless
//! `PATCHDIFF_GATE2=open` (environment only). `compare plan` needs no gate — it resolves the
//! arms (reading scripts, the manifest, `--version` lines) and writes one file, but starts no
//! agent and no canary — and neither do the read-only `compare report`, `compare power` and
//! `verify`.

use std::path::{Path, PathBuf};

use crate::config::{Gate2, Settings};

use super::matrix::{Comparison, Opening, Slot, Stop};
use super::plan::{Plan, PlanRequest};
use super::report;
use super::resolve::ScriptResolver;
use super::verdict::{EXIT_INVALID, EXIT_USAGE, Rules};

/// What `compare plan` was asked for.
pub struct PlanCommand {
    /// Baseline script.
    pub baseline: String,
    /// Candidate script (`None` with `aa`).
    pub candidate: Option<String>,
    /// Runs per arm.
    pub runs: u32,
    /// α.
    pub alpha: f64,
    /// Concurrency.
    pub concurrency: u32,
    /// Declared differences.
    pub declare: Vec<String>,
    /// A/A.
    pub aa: bool,
    /// The one extension.
    pub extend_to: Option<u32>,
    /// Cost budget (USD).
    pub max_cost_usd: Option<f64>,
    /// Wall-clock budget of one `compare run` (s).
    pub max_wall_s: Option<u64>,
    /// Deterministic curtailment.
    pub curtail: bool,
    /// Block-order seed.
    pub seed: Option<u32>,
    /// Plan name.
    pub name: Option<String>,
    /// Fixture manifest.
    pub manifest: Option<PathBuf>,
    /// Output file.
    pub output: PathBuf,
}

/// A script as the plan records it: an existing file as an absolute path (so `compare run`
/// works from any directory), else as given (a bundled name).
fn script_reference(script: &str) -> String {
    let path = Path::new(script);
    if path.is_file()
        && let Ok(abs) = std::path::absolute(path)
    {
        return abs.display().to_string();
    }
    script.to_owned()
}

/// `patchdiff compare plan`: resolves both arms, validates, prints the differences and what
/// this N can detect, writes the plan to a new file. Exit 0, or 2 (refused: every problem
/// named, undeclared differences with the `--declare` that allows them).
pub fn plan(command: PlanCommand, settings: &Settings) -> i32 {
    let manifest = match command
        .manifest
        .clone()
        .map_or_else(crate::fixtures::bundled_manifest_path, Ok)
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!("patchdiff compare plan: {e}; or name a suite with --manifest PATH");
            return EXIT_USAGE;
        }
    };
    if command.output.exists() {
        eprintln!(
            "patchdiff compare plan: {} exists; a plan is written to a new file (choose another -o)",
            command.output.display()
        );
        return EXIT_USAGE;
    }
    let baseline = script_reference(&command.baseline);
    let candidate = command
        .candidate
        .as_deref()
        .map_or_else(|| baseline.clone(), script_reference);
    let seed = command.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos() ^ d.as_secs() as u32)
    });
    let name = command.name.clone().unwrap_or_else(|| {
        if command.aa {
            format!("A/A {}", short(&command.baseline))
        } else {
            format!(
                "{} vs {}",
                short(&command.baseline),
                short(command.candidate.as_deref().unwrap_or(""))
            )
        }
    });
    let request = PlanRequest {
        name,
        baseline,
        candidate,
        runs: command.runs,
        extend_to: command.extend_to,
        alpha: command.alpha,
        concurrency: command.concurrency,
        seed,
        declared: command.declare.clone(),
        aa: command.aa,
    };
    let resolver = ScriptResolver { settings, manifest };
    let drafted = Plan::draft(request, &resolver).and_then(|mut p| {
        p.max_cost_usd = command.max_cost_usd;
        p.max_wall_s = command.max_wall_s;
        p.curtail = command.curtail;
        // Validated whole again, budgets included.
        Plan::from_toml(&p.to_toml()?)
    });
    let plan = match drafted {
        Ok(p) => p,
        Err(super::plan::PlanError::Invalid(problems)) => {
            eprintln!("patchdiff compare plan: refused:");
            for p in &problems {
                eprintln!("  {p}");
            }
            return EXIT_USAGE;
        }
        Err(e) => {
            eprintln!("patchdiff compare plan: {e}");
            return EXIT_USAGE;
        }
    };
    let text = match plan.to_toml() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("patchdiff compare plan: {e}");
            return EXIT_USAGE;
        }
    };
    if let Err(e) = crate::evidence::write_new_private(&command.output, text.as_bytes()) {
        eprintln!(
            "patchdiff compare plan: cannot write {}: {e}",
            command.output.display()
        );
        return EXIT_USAGE;
    }
    println!(
        "plan {} · digest {} · {} runs per arm · α {} · seed {} · concurrency {}",
        command.output.display(),
        plan.digest().unwrap_or_default(),
        plan.runs,
        plan.alpha,
        plan.seed,
        plan.concurrency
    );
    let differences = plan.differences();
    if plan.aa {
        println!("A/A calibration: both arms identical");
    } else if differences.is_empty() {
        println!("the arms differ only in their script files");
    } else {
        println!("declared differences ({}):", plan.declared.join(", "));
        for (field, a, b) in differences {
            println!(
                "  {field}: {} → {}",
                a.as_deref().unwrap_or("(absent)"),
                b.as_deref().unwrap_or("(absent)")
            );
        }
    }
    match report::plan_sensitivity(&plan) {
        Ok(table) => print!("\n{table}"),
        Err(e) => eprintln!("patchdiff compare plan: power table: {e}"),
    }
    println!(
        "\nrun it (gate 2 must be open): PATCHDIFF_GATE2=open patchdiff compare run {}",
        command.output.display()
    );
    0
}

fn short(script: &str) -> String {
    Path::new(script)
        .file_stem()
        .map_or_else(|| script.to_owned(), |s| s.to_string_lossy().into_owned())
}

/// Why a comparison was refused or could not finish: the exit code `compare run` gives for it
/// (2 usage or gate closed, 3 a comparison directory that cannot be written) and one sentence
/// for the operator saying what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The process exit code of `compare run` for this refusal.
    pub code: i32,
    /// What went wrong and what to do, in plain words.
    pub message: String,
}

impl Refusal {
    fn usage(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
}

/// Gate 2's check (C7): `None` when `PATCHDIFF_GATE2=open` is in the environment, else the
/// refusal (exit 2) saying how to open it. A config file cannot open the gate.
pub fn gate_refusal(settings: &Settings) -> Option<Refusal> {
    match settings.gate2() {
        Ok(g) if g.value == Gate2::Open => None,
        Ok(_) => Some(Refusal::usage(
            "gate 2 is closed: set PATCHDIFF_GATE2=open in the environment to run a comparison \
             (a config file cannot open it); nothing was run",
        )),
        Err(e) => Some(Refusal::usage(e.to_string())),
    }
}

/// The gate check: `Err(exit code)` with the refusal said on stderr unless gate 2 is open.
fn require_gate(settings: &Settings) -> Result<(), i32> {
    match gate_refusal(settings) {
        None => Ok(()),
        Some(r) => {
            eprintln!("patchdiff compare run: {}", r.message);
            Err(r.code)
        }
    }
}

/// How `compare run` continues an existing comparison.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunMode {
    /// `--resume`: run only the slots without a counted run.
    pub resume: bool,
    /// `--extend`: take the plan's one extension first (implies resuming).
    pub extend: bool,
}

/// A comparison run to its end by [`run_plan`]: its directory and its report (written).
pub struct Finished {
    /// The sealed comparison directory, `cmp-<id>/` under the runs root.
    pub dir: PathBuf,
    /// The report, as `report.txt`/`report.json` hold it; its verdict carries the exit code.
    pub report: report::CompareReport,
}

/// `compare run PLAN` from a plan file, start to end — `patchdiff compare run PLAN` and the
/// console's `compare PLAN` step both run this. Gate-checked first (nothing runs with the gate
/// closed); then the plan is sealed into a fresh `cmp-<id>/` under `runs_root`, the opening
/// recorded, every slot run (member runs are child `patchdiff console --script` processes)
/// until all are counted, a budget runs out or curtailment settles the decision, and the
/// report written. `on_line` gets the progress lines as they happen: the comparison directory
/// first, one `[done/total] …` line per finished run, a stop line. Errors: the refusal with
/// its exit code (2: gate closed, unreadable or invalid plan, a directory holding another plan;
/// 3: the comparison directory cannot be written or the report cannot be computed).
pub async fn run_plan(
    plan_path: &Path,
    runs_root: &Path,
    settings: &Settings,
    on_line: &mut (dyn FnMut(String) + Send),
) -> Result<Finished, Refusal> {
    if let Some(refused) = gate_refusal(settings) {
        return Err(refused);
    }
    let text = std::fs::read_to_string(plan_path)
        .map_err(|e| Refusal::usage(format!("cannot read {}: {e}", plan_path.display())))?;
    let plan = Plan::from_toml(&text)
        .map_err(|e| Refusal::usage(format!("{}: {e}", plan_path.display())))?;
    let cmp = Comparison::seal(&plan, runs_root, true).map_err(Refusal::usage)?;
    let opening = Opening::now("all".to_owned());
    opened(&cmp, &opening, on_line)?;
    let exe = this_exe()?;
    run_all(&cmp, &exe, on_line).await?;
    let report = compute_and_write(&cmp.dir, &[], settings).await?;
    Ok(Finished {
        dir: cmp.dir,
        report,
    })
}

/// Says the comparison is open (its directory first) and records the opening.
fn opened(
    cmp: &Comparison,
    opening: &Opening,
    on_line: &mut (dyn FnMut(String) + Send),
) -> Result<(), Refusal> {
    on_line(format!(
        "{} · plan {} sealed · gate 2 open (env)",
        cmp.dir.display(),
        &cmp.digest[..12]
    ));
    cmp.record_opening(opening).map_err(|message| Refusal {
        code: EXIT_INVALID,
        message,
    })
}

fn this_exe() -> Result<PathBuf, Refusal> {
    std::env::current_exe()
        .map_err(|e| Refusal::usage(format!("cannot locate this executable: {e}")))
}

/// Runs every slot without a counted run, one progress line per finished run, and says why it
/// stopped early (a budget, or curtailment).
async fn run_all(
    cmp: &Comparison,
    exe: &Path,
    on_line: &mut (dyn FnMut(String) + Send),
) -> Result<(), Refusal> {
    let started = std::time::Instant::now();
    let ran = super::matrix::run_matrix(
        cmp,
        exe,
        |r, done, total| {
            on_line(format!(
                "[{done}/{total}] {}",
                crate::display::visible_inline(&r.line)
            ));
        },
        || stop_check(cmp, started.elapsed()),
    )
    .await;
    match ran {
        Err(e) => Err(Refusal {
            code: match e {
                super::matrix::MatrixError::Usage { .. } => EXIT_USAGE,
                super::matrix::MatrixError::Io(_) => EXIT_INVALID,
            },
            message: e.to_string(),
        }),
        Ok((_, Some(Stop::Budget(why)))) => {
            on_line(format!(
                "stopped: {why}; continue with `patchdiff compare run {} --resume`",
                cmp.dir.display()
            ));
            Ok(())
        }
        Ok((_, Some(Stop::Curtailed))) => {
            on_line(
                "curtailed: the decision is settled, whatever the remaining runs would show"
                    .to_owned(),
            );
            Ok(())
        }
        Ok((_, None)) => Ok(()),
    }
}

/// `patchdiff compare run PLAN|CMP_DIR [--resume] [--extend] [--slot ID]`: gate-checked; seals
/// the plan into `cmp-<id>/` (its path printed first), records the opening, takes the
/// extension when asked, runs the matrix (or one slot) until every slot has its counted run, a
/// budget runs out (INCOMPLETE, recorded) or the decision is settled (curtailment), then writes
/// and prints the report. A plain plan file goes through [`run_plan`].
pub async fn run(
    plan_path: &Path,
    mode: RunMode,
    slot: Option<&str>,
    runs_dir: Option<PathBuf>,
    json: bool,
    settings: &Settings,
) -> i32 {
    if let Err(code) = require_gate(settings) {
        return code;
    }
    let resume = mode.resume || mode.extend;
    let say = |e: &str| eprintln!("patchdiff compare run: {e}");
    let root = runs_dir.unwrap_or_else(|| settings.paths.runs_root());
    if !plan_path.is_dir() && !resume && slot.is_none() {
        return match run_plan(plan_path, &root, settings, &mut |l| eprintln!("{l}")).await {
            Ok(done) => print_report(&done.report, json, false),
            Err(r) => {
                say(&r.message);
                r.code
            }
        };
    }
    let cmp = if plan_path.is_dir() {
        if !resume && slot.is_none() {
            say(&format!(
                "{} is a comparison directory: continue it with --resume, or run one slot with --slot",
                plan_path.display()
            ));
            return EXIT_USAGE;
        }
        Comparison::open(plan_path)
    } else {
        let text = match std::fs::read_to_string(plan_path) {
            Ok(t) => t,
            Err(e) => {
                say(&format!("cannot read {}: {e}", plan_path.display()));
                return EXIT_USAGE;
            }
        };
        match Plan::from_toml(&text) {
            Ok(plan) => Comparison::seal(&plan, &root, false),
            Err(e) => Err(e.to_string()),
        }
    };
    let cmp = match cmp {
        Ok(c) => c,
        Err(e) => {
            say(&e);
            return EXIT_USAGE;
        }
    };
    let opening = Opening::now(slot.map_or_else(|| "all".to_owned(), str::to_owned));
    if mode.extend {
        if let Err(e) = extension_allowed(&cmp, settings).await {
            say(&e);
            return EXIT_USAGE;
        }
        match cmp.take_extension(&opening) {
            Ok(to) => eprintln!("extension taken: {to} runs per arm"),
            Err(e) => {
                say(&e);
                return EXIT_USAGE;
            }
        }
    }
    let slot = match slot.map(|s| Slot::parse(s, cmp.runs_per_arm())).transpose() {
        Ok(s) => s,
        Err(e) => {
            say(&e);
            return EXIT_USAGE;
        }
    };
    let progress = &mut |l: String| eprintln!("{l}");
    let exe = match opened(&cmp, &opening, progress).and_then(|()| this_exe()) {
        Ok(exe) => exe,
        Err(r) => {
            say(&r.message);
            return r.code;
        }
    };
    if let Some(slot) = slot {
        if super::matrix::slot_settled(&cmp.slot_dir(slot)) {
            eprintln!("{}: already has its counted run; nothing to do", slot.id());
            return 0;
        }
        return match super::matrix::run_slot(&cmp, &exe, slot).await {
            Ok(r) => {
                eprintln!("[1/1] {}", crate::display::visible_inline(&r.line));
                if r.infra_abort { EXIT_INVALID } else { 0 }
            }
            Err(e) => {
                say(&e.to_string());
                EXIT_USAGE
            }
        };
    }
    if let Err(r) = run_all(&cmp, &exe, progress).await {
        say(&r.message);
        return r.code;
    }
    write_and_print(&cmp.dir, &[], json, false, settings).await
}

/// The matrix's check before each slot: a budget of the plan ran out (wall time of this
/// invocation, or the cost the counted runs reported), or the decision is settled
/// ([`super::curtail::settled`] on the counted runs read unverified).
fn stop_check(cmp: &Comparison, elapsed: std::time::Duration) -> Option<Stop> {
    let plan = &cmp.plan;
    if let Some(max) = plan.max_wall_s
        && elapsed.as_secs() >= max
    {
        return Some(Stop::Budget(format!(
            "the wall-clock budget of {max} s ran out ({} s elapsed)",
            elapsed.as_secs()
        )));
    }
    let (table, cost) = super::collect::quick_table(cmp);
    if let Some(max) = plan.max_cost_usd
        && cost >= max
    {
        return Some(Stop::Budget(format!(
            "the cost budget of ${max} ran out (${cost:.4} reported)"
        )));
    }
    let rules = Rules {
        runs: cmp.runs_per_arm(),
        ..Rules::of(plan)
    };
    (plan.curtail && super::curtail::settled(&table, &rules).is_some()).then_some(Stop::Curtailed)
}

/// `--extend` is for a comparison whose first N runs per arm are all in and decided neither
/// way (GATE2 §3.7: test at N, and only if nothing was flagged, once more at `extend_to`).
async fn extension_allowed(cmp: &Comparison, settings: &Settings) -> Result<(), String> {
    if cmp.plan.extend_to.is_none() {
        return Err(format!(
            "{}: the plan declares no extension (plan it with --extend-to N)",
            cmp.dir.display()
        ));
    }
    let at_n = report::compute(&cmp.dir, &[], &verify_options(settings)).await?;
    match at_n.verdict.kind {
        super::verdict::VerdictKind::Unchanged => Ok(()),
        kind => Err(format!(
            "{}: the extension is taken only after an UNCHANGED verdict at {} runs per arm; \
             this comparison is {} (see its report)",
            cmp.dir.display(),
            cmp.plan.runs,
            kind.word()
        )),
    }
}

fn verify_options(settings: &Settings) -> crate::verify::VerifyOptions {
    crate::verify::VerifyOptions {
        manifest: None,
        evaluate: false,
        database_url: settings
            .text(crate::config::Key::DatabaseUrl)
            .ok()
            .flatten()
            .filter(|u| !u.is_empty())
            .map(str::to_owned),
        // Member runs' signatures are named in each run's verification, not checked: a
        // comparison has no operator key of its own yet.
        key: None,
    }
}

/// Recomputes the comparison's report from its sealed runs and writes its files.
async fn compute_and_write(
    dir: &Path,
    extra: &[PathBuf],
    settings: &Settings,
) -> Result<report::CompareReport, Refusal> {
    let invalid = |message| Refusal {
        code: EXIT_INVALID,
        message,
    };
    let computed = report::compute(dir, extra, &verify_options(settings))
        .await
        .map_err(invalid)?;
    report::write(dir, &computed).map_err(invalid)?;
    Ok(computed)
}

/// Prints the report on stdout (JSON, Markdown or the text) and returns its verdict's exit code.
fn print_report(computed: &report::CompareReport, json: bool, markdown: bool) -> i32 {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&computed.to_json()).unwrap_or_default()
        );
    } else if markdown {
        print!("{}", computed.to_markdown());
    } else {
        print!("{}", crate::display::visible(&computed.to_text()));
    }
    computed.verdict.exit_code
}

async fn write_and_print(
    dir: &Path,
    extra: &[PathBuf],
    json: bool,
    markdown: bool,
    settings: &Settings,
) -> i32 {
    match compute_and_write(dir, extra, settings).await {
        Ok(computed) => print_report(&computed, json, markdown),
        Err(r) => {
            eprintln!("patchdiff compare report: {}", r.message);
            r.code
        }
    }
}

/// `patchdiff compare report CMP_DIR [RUNS…]`: recompute from the sealed runs and write the
/// report files. Needs no gate.
pub async fn report(
    dir: &Path,
    extra: &[PathBuf],
    json: bool,
    markdown: bool,
    settings: &Settings,
) -> i32 {
    write_and_print(dir, extra, json, markdown, settings).await
}

/// `patchdiff verify CMP_DIR`: every member run verifies, the seals hold, and `report.json`
/// equals a fresh recomputation. Exit 0 verified, 1 not, 2 not a comparison directory.
pub async fn verify(dir: &Path, options: &crate::verify::VerifyOptions, json: bool) -> i32 {
    match report::verify_comparison(dir, options).await {
        Ok((problems, fresh)) => {
            if json {
                let value = serde_json::json!({
                    "comparison": fresh.comparison,
                    "ok": problems.is_empty(),
                    "runs": fresh.runs.len(),
                    "verdict": fresh.verdict.kind,
                    "problems": problems,
                });
                println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
            } else {
                println!(
                    "patchdiff verify {} (comparison {})",
                    dir.display(),
                    fresh.comparison
                );
                println!(
                    "  {} member runs checked · recomputed verdict {}",
                    fresh.runs.len(),
                    fresh.verdict.kind.word()
                );
                for p in &problems {
                    println!("  FAIL {}", crate::display::visible_inline(p));
                }
                println!(
                    "{}",
                    if problems.is_empty() {
                        "VERIFIED: every member run verifies and report.json equals a fresh recomputation"
                    } else {
                        "NOT VERIFIED"
                    }
                );
            }
            if problems.is_empty() { 0 } else { 1 }
        }
        Err(e) => {
            eprintln!("patchdiff verify: {e}");
            EXIT_USAGE
        }
    }
}

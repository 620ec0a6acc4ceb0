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

/// The gate check: `Err(exit code)` with the refusal said on stderr unless gate 2 is open.
fn require_gate(settings: &Settings) -> Result<(), i32> {
    match settings.gate2() {
        Ok(g) if g.value == Gate2::Open => Ok(()),
        Ok(_) => {
            eprintln!(
                "patchdiff compare run: gate 2 is closed (SPEC C7): set PATCHDIFF_GATE2=open in \
                 the environment to run a comparison (a config file cannot open it); nothing was run"
            );
            Err(EXIT_USAGE)
        }
        Err(e) => {
            eprintln!("patchdiff compare run: {e}");
            Err(EXIT_USAGE)
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

/// `patchdiff compare run PLAN|CMP_DIR [--resume] [--extend] [--slot ID]`: gate-checked; seals
/// the plan into `cmp-<id>/` (its path printed first), records the opening, takes the
/// extension when asked, runs the matrix (or one slot) until every slot has its counted run, a
/// budget runs out (INCOMPLETE, recorded) or the decision is settled (curtailment), then writes
/// and prints the report.
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
            Ok(plan) => {
                let root = runs_dir.unwrap_or_else(|| settings.paths.runs_root());
                Comparison::seal(&plan, &root, !resume && slot.is_none())
            }
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
    eprintln!(
        "{} · plan {} sealed · gate 2 open (env)",
        cmp.dir.display(),
        &cmp.digest[..12]
    );
    if let Err(e) = cmp.record_opening(&opening) {
        say(&e);
        return EXIT_INVALID;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            say(&format!("cannot locate this executable: {e}"));
            return EXIT_USAGE;
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
    let started = std::time::Instant::now();
    let ran = super::matrix::run_matrix(
        &cmp,
        &exe,
        |r, done, total| {
            eprintln!(
                "[{done}/{total}] {}",
                crate::display::visible_inline(&r.line)
            );
        },
        || stop_check(&cmp, started.elapsed()),
    )
    .await;
    match ran {
        Err(e) => {
            say(&e.to_string());
            return match e {
                super::matrix::MatrixError::Usage { .. } => EXIT_USAGE,
                super::matrix::MatrixError::Io(_) => EXIT_INVALID,
            };
        }
        Ok((_, Some(Stop::Budget(why)))) => {
            eprintln!(
                "stopped: {why}; continue with `patchdiff compare run {} --resume`",
                cmp.dir.display()
            );
        }
        Ok((_, Some(Stop::Curtailed))) => {
            eprintln!("curtailed: the decision is settled, whatever the remaining runs would show");
        }
        Ok((_, None)) => {}
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

async fn write_and_print(
    dir: &Path,
    extra: &[PathBuf],
    json: bool,
    markdown: bool,
    settings: &Settings,
) -> i32 {
    let computed = match report::compute(dir, extra, &verify_options(settings)).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("patchdiff compare report: {e}");
            return EXIT_INVALID;
        }
    };
    if let Err(e) = report::write(dir, &computed) {
        eprintln!("patchdiff compare report: {e}");
        return EXIT_INVALID;
    }
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

//! The run matrix of a comparison (GATE2 §4.4): the sealed comparison
//! directory `cmp-<id>/` beside the runs, the seeded AB/BA block order, and N ordinary sealed
//! canary runs per arm, each a child `patchdiff console --script ARM.canary` process writing
//! its run into `cmp-<id>/runs/<slot>/` (so each passes `patchdiff verify` on its own).
//!
//! Layout:
//!
//! ```text
//! cmp-<id>/plan.toml        the plan's canonical text, sealed before run 1
//! cmp-<id>/plan.seal        its SHA-256 (hex, one line)
//! cmp-<id>/manifest.json    comparison id, plan digest, block order (written once)
//! cmp-<id>/openings.jsonl   one line per `compare run`: gate 2's state and source, user, host, time
//! cmp-<id>/runs/A-01/r-…/   the slot's attempts, each an ordinary sealed run
//! cmp-<id>/logs/A-01.1.stderr.log   each attempt's console stderr, redacted line by line
//! cmp-<id>/stops.jsonl      one line per early stop: a budget (cost, wall time) ran out
//! cmp-<id>/extension.json   written once when the plan's one extension is taken (`--extend`)
//! ```
//!
//! Early stops: before each slot starts, the caller's stop check may end the matrix — a
//! budget ran out (recorded in `stops.jsonl`; the report is INCOMPLETE while slots are missing,
//! and `--resume` continues) or the decision is settled ([`super::curtail`], nothing recorded:
//! the report recomputes it from the sealed runs).
//!
//! The id is the first 12 hex digits of the plan's digest, so every process given the same plan
//! (`--slot` on other machines, `--resume` here) names the same directory.
//!
//! Order: block i holds slots A-(i+1) and B-(i+1), AB or BA by a SplitMix64 stream seeded with
//! the plan's `seed`. Runs start strictly in that order, at most `concurrency` at once, so at
//! any moment the arms' started counts differ by at most one: one arm never gets a block ahead.
//!
//! Retries (outcome-blind): an attempt whose run ends `infra_abort` (the console's exit 3: it
//! stopped before the agent acted) is retried in its slot, at most [`MAX_RETRIES`] times;
//! every attempt stays in the slot directory and is counted in the report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::plan::Plan;
use super::verdict::Side;

/// Retries of an `infra_abort` attempt in its slot (GATE2 §4.4): at most three attempts.
pub const MAX_RETRIES: u32 = 2;
/// The console's exit code for `infra_abort` (see `console::headless`).
pub const EXIT_INFRA_ABORT: i32 = 3;
/// The console's exit code for an invalid script or options.
pub const EXIT_CONSOLE_USAGE: i32 = 2;
/// File holding the plan's digest.
pub const PLAN_SEAL_FILE: &str = "plan.seal";
/// The plan's canonical text.
pub const PLAN_FILE: &str = "plan.toml";
/// One line per `compare run` invocation: how gate 2 was opened.
pub const OPENINGS_FILE: &str = "openings.jsonl";
/// One line per early stop of the matrix (a budget ran out).
pub const STOPS_FILE: &str = "stops.jsonl";
/// Written once when the plan's one extension is taken.
pub const EXTENSION_FILE: &str = "extension.json";

/// Why the matrix starts no further slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// A budget of the plan ran out (cost or wall time): the comparison is INCOMPLETE.
    Budget(String),
    /// The decision is settled (deterministic curtailment, GATE2 §3.7).
    Curtailed,
}

/// One slot of the matrix: `A-07` is the baseline's 7th run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Slot {
    /// Its arm.
    pub side: Side,
    /// 1-based index within the arm.
    pub index: u32,
}

impl Slot {
    /// `A-01`, `B-10`, … (two digits up to 99, three for 100).
    pub fn id(self) -> String {
        let arm = match self.side {
            Side::Baseline => 'A',
            Side::Candidate => 'B',
        };
        format!("{arm}-{:02}", self.index)
    }

    /// Parses `A-07` / `B-7` against a plan of `runs` per arm. Errors name the value and what
    /// is accepted.
    pub fn parse(text: &str, runs: u32) -> Result<Self, String> {
        let bad = || {
            format!(
                "slot {text:?}: accepted is A-NN or B-NN with NN from 1 to {runs} (the plan's runs per arm)"
            )
        };
        let (arm, n) = text.split_once('-').ok_or_else(bad)?;
        let side = match arm {
            "A" | "a" => Side::Baseline,
            "B" | "b" => Side::Candidate,
            _ => return Err(bad()),
        };
        let index: u32 = n.parse().map_err(|_| bad())?;
        if !(1..=runs).contains(&index) {
            return Err(bad());
        }
        Ok(Self { side, index })
    }
}

/// SplitMix64: a fixed, documented stream, so a seed gives the same order on every machine.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The plan's run order: `runs` blocks of two, each AB or BA (the low bit of the next
/// SplitMix64 value seeded with `seed`: 0 → AB).
pub fn block_order(seed: u32, runs: u32) -> Vec<Slot> {
    let mut state = u64::from(seed);
    let mut out = Vec::with_capacity(2 * runs as usize);
    for index in 1..=runs {
        let a = Slot {
            side: Side::Baseline,
            index,
        };
        let b = Slot {
            side: Side::Candidate,
            index,
        };
        if splitmix64(&mut state) & 1 == 0 {
            out.extend([a, b]);
        } else {
            out.extend([b, a]);
        }
    }
    out
}

/// The comparison's id: `cmp-` and the first 12 hex digits of the plan digest.
pub fn comparison_id(digest: &str) -> String {
    format!("cmp-{}", &digest[..12.min(digest.len())])
}

/// Gate 2's opening for one `compare run` (C7): state, where it came from, who, where, when.
#[derive(Debug, Clone, Serialize)]
pub struct Opening {
    /// `open` (a run never starts otherwise).
    pub state: &'static str,
    /// `env`: only the environment can open gate 2.
    pub source: &'static str,
    /// The effective user's name (or uid).
    pub user: String,
    /// This machine's host name.
    pub host: String,
    /// Milliseconds since the Unix epoch.
    pub opened_ms: u128,
    /// The `compare run` process.
    pub pid: u32,
    /// `all`, or the one slot asked for.
    pub slots: String,
}

impl Opening {
    /// The opening of this process, now.
    pub fn now(slots: String) -> Self {
        let uid = nix::unistd::getuid();
        let user = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map_or_else(|| format!("uid {uid}"), |u| u.name);
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
        Self {
            state: "open",
            source: "env",
            user,
            host,
            opened_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            pid: std::process::id(),
            slots,
        }
    }
}

/// A comparison directory with its sealed plan.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// `…/cmp-<id>`.
    pub dir: PathBuf,
    /// `cmp-<id>`.
    pub id: String,
    /// The plan digest (`plan.seal`).
    pub digest: String,
    /// The sealed plan.
    pub plan: Plan,
}

impl Comparison {
    /// Opens an existing comparison directory: `plan.toml` must match `plan.seal` byte for
    /// byte. Errors name the file and what is wrong.
    pub fn open(dir: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(dir.join(PLAN_FILE)).map_err(|e| {
            format!(
                "{}: not a comparison directory ({PLAN_FILE}: {e})",
                dir.display()
            )
        })?;
        let seal = std::fs::read_to_string(dir.join(PLAN_SEAL_FILE)).map_err(|e| {
            format!(
                "{}: not a comparison directory ({PLAN_SEAL_FILE}: {e})",
                dir.display()
            )
        })?;
        let plan =
            Plan::from_sealed(&text, &seal).map_err(|e| format!("{}: {e}", dir.display()))?;
        let digest = seal.trim().to_owned();
        Ok(Self {
            id: comparison_id(&digest),
            dir: dir.to_path_buf(),
            digest,
            plan,
        })
    }

    /// Seals `plan` into `<runs_root>/cmp-<id>/` before any run: writes the canonical
    /// `plan.toml`, `plan.seal` and `manifest.json` (0600, in a 0700 directory) when the
    /// directory is new. An existing directory must hold the same sealed plan (then this is a
    /// resume or another slot); `fresh` refuses an existing one with runs in it (use
    /// `--resume`). Errors name the path.
    pub fn seal(plan: &Plan, runs_root: &Path, fresh: bool) -> Result<Self, String> {
        let text = plan.to_toml().map_err(|e| e.to_string())?;
        let digest = plan.digest().map_err(|e| e.to_string())?;
        let id = comparison_id(&digest);
        let dir = runs_root.join(&id);
        if dir.join(PLAN_SEAL_FILE).is_file() {
            let existing = Self::open(&dir)?;
            if existing.digest != digest {
                return Err(format!(
                    "{}: holds another plan (digest {}); this plan's digest is {digest}",
                    dir.display(),
                    existing.digest
                ));
            }
            if fresh && dir.join("runs").is_dir() {
                return Err(format!(
                    "{} already holds runs of this plan: continue it with `patchdiff compare run \
                     {} --resume`, or run one slot with --slot",
                    dir.display(),
                    dir.display()
                ));
            }
            return Ok(existing);
        }
        // Written into a private directory beside it and renamed into place, so processes
        // sealing the same plan at once (slots started together) all see one whole directory.
        crate::evidence::create_private_dir(runs_root)
            .map_err(|e| format!("cannot create {}: {e}", runs_root.display()))?;
        let staging = runs_root.join(format!(".{id}.sealing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        crate::evidence::create_private_dir(&staging)
            .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
        let write = |name: &str, bytes: &[u8]| {
            crate::evidence::write_new_private(&staging.join(name), bytes)
                .map_err(|e| format!("cannot write {}: {e}", staging.join(name).display()))
        };
        write(PLAN_FILE, text.as_bytes())?;
        write(PLAN_SEAL_FILE, format!("{digest}\n").as_bytes())?;
        let order: Vec<String> = block_order(plan.seed, plan.runs)
            .into_iter()
            .map(Slot::id)
            .collect();
        let manifest = json!({
            "comparison": id,
            "plan_digest": digest,
            "plan_sealed_before_run_1": true,
            "order": order,
            "seed": plan.seed,
            "runs_per_arm": plan.runs,
            "baseline": plan.baseline,
            "candidate": plan.candidate,
            "declared": plan.declared,
        });
        write(
            "manifest.json",
            serde_json::to_string_pretty(&manifest)
                .unwrap_or_default()
                .as_bytes(),
        )?;
        if let Err(e) = std::fs::rename(&staging, &dir) {
            let _ = std::fs::remove_dir_all(&staging);
            if dir.join(PLAN_SEAL_FILE).is_file() {
                // Another process sealed it first: the same plan, by its digest.
                return Self::open(&dir);
            }
            return Err(format!("cannot create {}: {e}", dir.display()));
        }
        Ok(Self {
            dir,
            id,
            digest,
            plan: plan.clone(),
        })
    }

    /// Appends this invocation's gate-2 opening to `openings.jsonl`.
    pub fn record_opening(&self, opening: &Opening) -> Result<(), String> {
        use std::io::Write;
        let path = self.dir.join(OPENINGS_FILE);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let line = serde_json::to_string(opening).unwrap_or_default();
        writeln!(file, "{line}").map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Runs per arm now: the plan's `extend_to` once its extension was taken
    /// ([`EXTENSION_FILE`]), else its `runs`.
    pub fn runs_per_arm(&self) -> u32 {
        match self.plan.extend_to {
            Some(to) if self.dir.join(EXTENSION_FILE).is_file() => to,
            _ => self.plan.runs,
        }
    }

    /// Takes the plan's one extension: writes [`EXTENSION_FILE`] (once) with the opening that
    /// took it. Errors: the plan declares none, or it was taken already.
    pub fn take_extension(&self, opening: &Opening) -> Result<u32, String> {
        let Some(to) = self.plan.extend_to else {
            return Err(format!(
                "{}: the plan declares no extension (plan it with --extend-to N)",
                self.dir.display()
            ));
        };
        let record = json!({"extend_to": to, "from": self.plan.runs, "opening": opening});
        crate::evidence::write_new_private(
            &self.dir.join(EXTENSION_FILE),
            serde_json::to_string_pretty(&record)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(|e| {
            format!(
                "{}: the one extension (to {to} runs per arm) was taken already ({e})",
                self.dir.display()
            )
        })?;
        Ok(to)
    }

    /// Appends an early stop (a budget ran out) to [`STOPS_FILE`].
    pub fn record_stop(&self, reason: &str) -> Result<(), String> {
        use std::io::Write;
        let path = self.dir.join(STOPS_FILE);
        let mut file = crate::evidence::open_append_private(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let line = json!({"stopped": reason, "ms": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())});
        writeln!(file, "{line}").map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The last early stop recorded, if any.
    pub fn last_stop(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join(STOPS_FILE)).ok()?;
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
        let v: Value = serde_json::from_str(line).ok()?;
        v["stopped"].as_str().map(str::to_owned)
    }

    /// The directory of `slot`'s attempts.
    pub fn slot_dir(&self, slot: Slot) -> PathBuf {
        self.dir.join("runs").join(slot.id())
    }

    /// The arm's canary script.
    pub fn script(&self, side: Side) -> &str {
        match side {
            Side::Baseline => &self.plan.baseline.script,
            Side::Candidate => &self.plan.candidate.script,
        }
    }
}

/// The sealed run directories (`r-*` holding `manifest.seal`) in `slot_dir`, oldest first
/// (run ids start with their creation time).
pub fn sealed_attempts(slot_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(slot_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("r-"))
                && p.join(crate::evidence::SEAL_FILE).is_file()
        })
        .collect();
    out.sort();
    out
}

/// Whether a sealed run ended `infra_abort` (its report says so).
pub fn is_infra_abort(run: &Path) -> bool {
    std::fs::read(run.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|r| r["outcome"] == "infra_abort")
}

/// Whether `slot_dir` is settled: a sealed attempt that is an outcome, or every attempt used.
pub fn slot_settled(slot_dir: &Path) -> bool {
    let attempts = sealed_attempts(slot_dir);
    attempts.iter().any(|r| !is_infra_abort(r)) || attempts.len() as u32 > MAX_RETRIES
}

/// How one slot ended.
#[derive(Debug, Clone)]
pub struct SlotRun {
    /// The slot.
    pub slot: Slot,
    /// Attempts made by this process.
    pub attempts: u32,
    /// The counted run (the last attempt), if any attempt was sealed.
    pub run: Option<PathBuf>,
    /// The progress line.
    pub line: String,
    /// Whether every attempt was `infra_abort`.
    pub infra_abort: bool,
}

/// Why the matrix could not go on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MatrixError {
    /// The console refused the arm's script or options (its exit 2): nothing can run.
    #[error("{slot}: the console refused the {arm} script {script:?} (exit 2): {stderr}")]
    Usage {
        /// The slot.
        slot: String,
        /// `baseline` or `candidate`.
        arm: &'static str,
        /// The script.
        script: String,
        /// The end of the console's stderr.
        stderr: String,
    },
    /// A child could not be started or a directory written.
    #[error("{0}")]
    Io(String),
}

/// Runs `slot` with `exe` (`patchdiff`): attempts until one is not `infra_abort`, at most
/// 1 + [`MAX_RETRIES`]. Each attempt is `exe console --script SCRIPT --runs-dir SLOT_DIR
/// --json` with this process's environment; its stderr goes to `logs/<slot>.<n>.stderr.log`.
pub async fn run_slot(cmp: &Comparison, exe: &Path, slot: Slot) -> Result<SlotRun, MatrixError> {
    let slot_dir = cmp.slot_dir(slot);
    let logs = cmp.dir.join("logs");
    for dir in [cmp.dir.join("runs"), slot_dir.clone(), logs.clone()] {
        crate::evidence::create_private_dir(&dir)
            .map_err(|e| MatrixError::Io(format!("cannot create {}: {e}", dir.display())))?;
    }
    let script = cmp.script(slot.side).to_owned();
    let started = Instant::now();
    let mut attempts = 0;
    let previous = sealed_attempts(&slot_dir).len() as u32;
    loop {
        attempts += 1;
        let n = previous + attempts;
        let log_path = logs.join(format!("{}.{n}.stderr.log", slot.id()));
        let log = crate::evidence::open_append_private(&log_path)
            .map_err(|e| MatrixError::Io(format!("cannot write {}: {e}", log_path.display())))?;
        let mut child = tokio::process::Command::new(exe)
            .arg("console")
            .arg("--script")
            .arg(&script)
            .arg("--runs-dir")
            .arg(&slot_dir)
            .arg("--json")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| MatrixError::Io(format!("cannot start {}: {e}", exe.display())))?;
        // Evidence like every other file of the comparison: the console's stderr (which may
        // echo a check's or host's output) passes this process's redactor line by line.
        let copy = child.stderr.take().map(|stderr| {
            tokio::spawn(crate::redact::copy_redacted(
                stderr,
                log,
                crate::redact::process().clone(),
            ))
        });
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| MatrixError::Io(format!("cannot wait for {}: {e}", exe.display())))?;
        if let Some(copy) = copy {
            let _ = copy.await;
        }
        let code = output.status.code().unwrap_or(-1);
        if code == EXIT_CONSOLE_USAGE {
            let stderr = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
            return Err(MatrixError::Usage {
                slot: slot.id(),
                arm: slot.side.name(),
                script,
                stderr: tail,
            });
        }
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        let run = report["run_dir"]
            .as_str()
            .map(PathBuf::from)
            .filter(|p| p.join(crate::evidence::SEAL_FILE).is_file());
        let infra_abort = code == EXIT_INFRA_ABORT || report["outcome"] == "infra_abort";
        if infra_abort && previous + attempts <= MAX_RETRIES {
            continue;
        }
        let retries = (previous + attempts).saturating_sub(1);
        let line = progress_line(slot, &report, started.elapsed().as_secs_f64(), retries);
        return Ok(SlotRun {
            slot,
            attempts,
            run,
            line,
            infra_abort,
        });
    }
}

/// `B-06 r-…  calendar pass · chess FAIL · …  0.2 min  (1 retry)`.
fn progress_line(slot: Slot, report: &Value, seconds: f64, retries: u32) -> String {
    let run_id = report["run_id"].as_str().unwrap_or("(no run)");
    let targets: Vec<String> = report["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let status = match t["status"].as_str() {
                Some("pass") => "pass",
                Some("fail") => "FAIL",
                Some("infra_error") => "infra_error",
                Some("flaky") => "flaky",
                _ => "not judged",
            };
            format!("{} {status}", t["name"].as_str().unwrap_or("?"))
        })
        .collect();
    let what = if report["outcome"] == "infra_abort" {
        format!(
            "infra_abort: {}",
            report["infra_abort"]
                .as_str()
                .unwrap_or("stopped before the agent acted")
        )
    } else if targets.is_empty() {
        "no report".to_owned()
    } else {
        targets.join(" · ")
    };
    let cost = report["agent_host"]["cost_usd"]
        .as_f64()
        .map(|c| format!("  ${c:.4}"))
        .unwrap_or_default();
    let retries = match retries {
        0 => String::new(),
        1 => "  (1 retry)".to_owned(),
        n => format!("  ({n} retries)"),
    };
    format!(
        "{} {run_id}  {what}  {:.2} min{cost}{retries}",
        slot.id(),
        seconds / 60.0
    )
}

/// Runs every slot not yet settled, in block order, `concurrency` at a time (started strictly
/// in order). `on_done` gets each finished slot (for the progress line) with the count of
/// finished runs and the total. Before each slot starts, `stop` may end the matrix (a budget
/// ran out, recorded in [`STOPS_FILE`]; or the decision is settled): the slots already
/// running finish, and the stop is returned. Stops at the first [`MatrixError`] too.
pub async fn run_matrix(
    cmp: &Comparison,
    exe: &Path,
    mut on_done: impl FnMut(&SlotRun, usize, usize),
    mut stop: impl FnMut() -> Option<Stop>,
) -> Result<(Vec<SlotRun>, Option<Stop>), MatrixError> {
    let order: Vec<Slot> = block_order(cmp.plan.seed, cmp.runs_per_arm())
        .into_iter()
        .filter(|s| !slot_settled(&cmp.slot_dir(*s)))
        .collect();
    let total = 2 * cmp.runs_per_arm() as usize;
    let mut stopped = None;
    let mut finished = total - order.len();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(cmp.plan.concurrency as usize));
    let mut tasks = tokio::task::JoinSet::new();
    let cmp_shared = Arc::new(cmp.clone());
    let exe: Arc<Path> = Arc::from(exe);
    let mut out = Vec::new();
    let mut failure = None;
    for slot in order {
        // Start in order: wait for a free place before spawning the next slot; meanwhile
        // report what finished.
        let permit = loop {
            tokio::select! {
                permit = semaphore.clone().acquire_owned() => break permit,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    handle(done, &mut out, &mut failure, &mut finished, total, &mut on_done);
                }
            }
        };
        let Ok(permit) = permit else { break };
        if failure.is_some() {
            break;
        }
        if let Some(why) = stop() {
            if let Stop::Budget(reason) = &why
                && let Err(e) = cmp.record_stop(reason)
            {
                failure.get_or_insert(MatrixError::Io(e));
            }
            stopped = Some(why);
            break;
        }
        let cmp = cmp_shared.clone();
        let exe = exe.clone();
        tasks.spawn(async move {
            let result = run_slot(&cmp, &exe, slot).await;
            drop(permit);
            result
        });
    }
    while let Some(done) = tasks.join_next().await {
        handle(
            done,
            &mut out,
            &mut failure,
            &mut finished,
            total,
            &mut on_done,
        );
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((out, stopped)),
    }
}

fn handle(
    done: Result<Result<SlotRun, MatrixError>, tokio::task::JoinError>,
    out: &mut Vec<SlotRun>,
    failure: &mut Option<MatrixError>,
    finished: &mut usize,
    total: usize,
    on_done: &mut impl FnMut(&SlotRun, usize, usize),
) {
    match done {
        Ok(Ok(run)) => {
            *finished += 1;
            on_done(&run, *finished, total);
            out.push(run);
        }
        Ok(Err(e)) => {
            failure.get_or_insert(e);
        }
        Err(e) => {
            failure.get_or_insert(MatrixError::Io(format!("a slot's task failed: {e}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_order_is_seeded_and_never_lets_an_arm_get_a_block_ahead() {
        let order = block_order(20_261_203, 10);
        assert_eq!(order.len(), 20);
        assert_eq!(order, block_order(20_261_203, 10), "same seed, same order");
        assert_ne!(order, block_order(7, 10), "another seed, another order");
        let (mut a, mut b) = (0i32, 0i32);
        for (i, slot) in order.iter().enumerate() {
            match slot.side {
                Side::Baseline => a += 1,
                Side::Candidate => b += 1,
            }
            assert!((a - b).abs() <= 1, "after {} starts: A {a}, B {b}", i + 1);
            assert_eq!(
                slot.index as usize,
                i / 2 + 1,
                "block {} holds index {}",
                i / 2,
                i / 2 + 1
            );
        }
        let ab = order
            .chunks(2)
            .filter(|c| c[0].side == Side::Baseline)
            .count();
        assert!(
            (1..10).contains(&ab),
            "both AB and BA blocks occur: {ab} AB of 10"
        );
    }

    #[test]
    fn slot_ids_parse_back_and_out_of_range_slots_are_refused_naming_the_range() {
        for slot in block_order(1, 12) {
            assert_eq!(Slot::parse(&slot.id(), 12), Ok(slot));
        }
        let err = Slot::parse("B-11", 10).unwrap_err();
        assert!(err.contains("B-11") && err.contains("1 to 10"), "{err}");
        assert!(Slot::parse("C-01", 10).is_err());
        assert!(Slot::parse("A01", 10).is_err());
    }

    fn sealed_example(root: &Path) -> Comparison {
        let plan = Plan::from_toml(crate::gate2::plan::tests::GATE2_EXAMPLE).unwrap();
        assert_eq!((plan.runs, plan.extend_to), (10, Some(20)));
        Comparison::seal(&plan, root, true).unwrap()
    }

    #[test]
    fn the_one_extension_is_taken_once_and_widens_the_slots() {
        let dir = tempfile::tempdir().unwrap();
        let cmp = sealed_example(dir.path());
        assert_eq!(cmp.runs_per_arm(), 10);
        let opening = Opening::now("all".into());
        assert_eq!(cmp.take_extension(&opening), Ok(20));
        assert_eq!(cmp.runs_per_arm(), 20);
        // Reopened from disk (another process), the extension holds.
        assert_eq!(Comparison::open(&cmp.dir).unwrap().runs_per_arm(), 20);
        let again = cmp.take_extension(&opening).unwrap_err();
        assert!(again.contains("taken already"), "{again}");
        // The extended order starts with the original blocks.
        let order = block_order(cmp.plan.seed, 20);
        assert_eq!(order[..20], block_order(cmp.plan.seed, 10)[..]);
    }

    #[test]
    fn a_budget_stop_is_recorded_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let cmp = sealed_example(dir.path());
        assert_eq!(cmp.last_stop(), None);
        cmp.record_stop("the wall-clock budget of 1 s ran out")
            .unwrap();
        cmp.record_stop("the cost budget of $40 ran out").unwrap();
        assert_eq!(
            cmp.last_stop().as_deref(),
            Some("the cost budget of $40 ran out")
        );
    }
}

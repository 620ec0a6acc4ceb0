//! The pre-registered gate-2 plan (GATE2 §4.6): what a comparison will run and
//! how it will decide, fixed before the first run — both arms (canary script and the resolved
//! configuration fields), runs per arm, the one allowed extension, block order and seed,
//! concurrency, α and the tests, exclusion caps, budget, the declared differences and the A/A
//! flag. A typed struct serialised to TOML, parsed strictly (unknown fields are refused) and
//! validated as a whole; [`Plan::digest`] is the SHA-256 that seals it.
//!
//! Pure data: resolving a canary script into its configuration is the caller's, through the
//! [`ResolveArm`] seam ([`Plan::draft`]); writing `plan.toml` / `plan.seal` is the comparison
//! directory's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::power;

/// The gate a comparison plan must name (SPEC C7).
pub const PLAN_GATE: u8 = 2;
/// Fewest runs per arm a plan may ask for (GATE2 §4.4).
pub const MIN_RUNS: u32 = 5;
/// Most runs per arm a plan may ask for, extension included (GATE2 §4.4).
pub const MAX_RUNS: u32 = 100;
/// Most canary runs at once.
pub const MAX_CONCURRENCY: u32 = 16;
/// Largest α a plan accepts.
pub const MAX_ALPHA: f64 = 0.2;
/// Most re-judgements of each export.
pub const MAX_REJUDGE: u32 = 10;
/// Largest excluded share per arm and target a plan may allow.
pub const MAX_EXCLUDED_CAP: f64 = 0.5;
/// Longest plan name, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// Run order: randomized permuted blocks of two (AB or BA), seeded by [`Plan::seed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// AB/BA blocks; one arm is never a block ahead.
    #[default]
    Blocks,
}

/// What counts as a target's pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// The evaluator's verdict (behaviour decides unless the canary requires full bytes).
    #[default]
    Target,
    /// The behavioral check alone.
    Behavioral,
}

/// The per-target test. Only one-sided Fisher is built; Boschloo (GATE2 §3.2) is not, so a
/// plan cannot ask for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetTest {
    /// One-sided Fisher exact, regression and its improvement mirror.
    #[default]
    Fisher,
}

/// The multiplicity correction over targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Multiplicity {
    /// Tarone–Bonferroni: untestable targets spend no α.
    #[default]
    Tarone,
}

/// One arm: the canary script it runs and its resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// The canary script, as the operator named it (UTF-8 path).
    pub script: String,
    /// Resolved configuration fields, dotted lower-case names (`agent.model`,
    /// `agent.host_version`, `build.source_sha`, `suite.fixture_manifest`, …) to their values.
    /// Everything not declared must be equal across the arms.
    #[serde(default)]
    pub configuration: BTreeMap<String, String>,
}

/// Cost and time guardrails (descriptive unless `gating`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guardrails {
    /// Largest accepted candidate/baseline ratio of median cost per run (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_ratio: Option<f64>,
    /// Largest accepted ratio of median minutes per run (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes_ratio: Option<f64>,
    /// Whether a guardrail breach makes the comparison REGRESSED.
    #[serde(default)]
    pub gating: bool,
}

/// A pre-registered comparison plan, `cmp-<id>/plan.toml` (GATE2 §4.6). Fields without a
/// default must be present; [`Plan::to_toml`] writes every field, so a sealed plan states
/// everything it decides by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Must be 2 (SPEC C7): a plan for any other gate is refused.
    pub gate: u8,
    /// A name for people, 1–200 characters, no control characters.
    pub name: String,
    /// Runs per arm, [`MIN_RUNS`]..=[`MAX_RUNS`].
    pub runs: u32,
    /// The one extension a comparison may take (`--extend`): runs per arm after it,
    /// `runs` < extend_to ≤ [`MAX_RUNS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend_to: Option<u32>,
    /// Run order.
    #[serde(default)]
    pub order: Order,
    /// Seed of the block order.
    pub seed: u32,
    /// Canary runs at once, 1..=[`MAX_CONCURRENCY`] and at most 2 × runs.
    pub concurrency: u32,
    /// What a target's pass is.
    #[serde(default)]
    pub endpoint: Endpoint,
    /// Family-wise one-sided level, 0 < α ≤ [`MAX_ALPHA`].
    pub alpha: f64,
    /// The per-target test.
    #[serde(default)]
    pub test: TargetTest,
    /// The correction over targets.
    #[serde(default)]
    pub multiplicity: Multiplicity,
    /// Whether the run-level permutation test also decides (default true).
    #[serde(default = "yes")]
    pub run_level: bool,
    /// Whether the matrix stops once every decision is settled (default true).
    #[serde(default = "yes")]
    pub curtail: bool,
    /// Re-judgements of every export, 1..=[`MAX_REJUDGE`] (default 3).
    #[serde(default = "default_rejudge")]
    pub rejudge_repeat: u32,
    /// Largest excluded share per arm and target, 0..=[`MAX_EXCLUDED_CAP`] (default 0.2).
    #[serde(default = "default_max_excluded")]
    pub max_excluded: f64,
    /// Fewest valid runs per arm and target, 1..=runs (default 80 % of runs, rounded up).
    #[serde(default)]
    pub min_valid: Option<u32>,
    /// Budget in US dollars (> 0); exhausted → INCOMPLETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock budget in seconds (> 0); exhausted → INCOMPLETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_s: Option<u64>,
    /// A/A calibration: both arms identical, nothing declared.
    #[serde(default)]
    pub aa: bool,
    /// The declared differences: configuration field names or prefixes (`agent` covers
    /// `agent.model`, `agent.host`, …). Every differing field must be covered, and every entry
    /// must cover a differing field.
    #[serde(default)]
    pub declared: Vec<String>,
    /// Descriptive cost/time guardrails.
    #[serde(default)]
    pub guardrails: Guardrails,
    /// Arm A.
    pub baseline: Arm,
    /// Arm B.
    pub candidate: Arm,
}

fn yes() -> bool {
    true
}
fn default_rejudge() -> u32 {
    3
}
fn default_max_excluded() -> f64 {
    0.2
}

/// One thing wrong with a plan, naming the field, the value and what is accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanProblem {
    /// `gate` is not 2.
    #[error("gate = {0}: a comparison plan needs gate = 2 (SPEC C7)")]
    Gate(u8),
    /// `name` empty, too long or with control characters.
    #[error("name {0:?}: accepted is 1 to {MAX_NAME_CHARS} characters without control characters")]
    Name(String),
    /// `runs` out of range.
    #[error("runs = {0}: accepted are {MIN_RUNS} to {MAX_RUNS} runs per arm")]
    Runs(u32),
    /// `extend_to` not above `runs` or above the maximum.
    #[error("extend_to = {extend_to}: accepted is more than runs ({runs}) and at most {MAX_RUNS}")]
    ExtendTo {
        /// The value.
        extend_to: u32,
        /// The plan's runs.
        runs: u32,
    },
    /// `concurrency` out of range.
    #[error("concurrency = {value}: accepted are 1 to {max}")]
    Concurrency {
        /// The value.
        value: u32,
        /// min(16, 2 × runs).
        max: u32,
    },
    /// `alpha` out of range.
    #[error("alpha = {0}: accepted is a level above 0 and at most {MAX_ALPHA}")]
    Alpha(f64),
    /// `rejudge_repeat` out of range.
    #[error("rejudge_repeat = {0}: accepted are 1 to {MAX_REJUDGE}")]
    Rejudge(u32),
    /// `max_excluded` out of range.
    #[error("max_excluded = {0}: accepted is a share from 0 to {MAX_EXCLUDED_CAP}")]
    MaxExcluded(f64),
    /// `min_valid` out of range.
    #[error("min_valid = {value}: accepted are 1 to runs ({runs})")]
    MinValid {
        /// The value.
        value: u32,
        /// The plan's runs.
        runs: u32,
    },
    /// A budget that is not positive.
    #[error("{field} = {value}: accepted is a positive number")]
    Budget {
        /// `max_cost_usd` or `max_wall_s`.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// A guardrail ratio below 1 or not finite.
    #[error("guardrails.{field} = {value}: accepted is a finite ratio ≥ 1")]
    Guardrail {
        /// `cost_ratio` or `minutes_ratio`.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// An arm without a script.
    #[error("{arm}.script is empty: name the arm's canary script")]
    Script {
        /// `baseline` or `candidate`.
        arm: &'static str,
    },
    /// An extension whose exact worst-case false-alarm rate exceeds α (GATE2 §4.4).
    #[error(
        "extend_to = {extend_to}: testing at {runs} and again at {extend_to} runs per arm \
         false-alarms up to {sup:.4} (at a true pass rate of {at_rate_pct:.0} %), above alpha = \
         {alpha}; accepted is an extension whose exact worst case stays within alpha (a nearer \
         extend_to or a smaller alpha)"
    )]
    ExtensionSize {
        /// The plan's runs.
        runs: u32,
        /// The extension.
        extend_to: u32,
        /// The plan's α.
        alpha: f64,
        /// The exact supremum of the type-I error.
        sup: f64,
        /// Where it is reached, in percent.
        at_rate_pct: f64,
    },
    /// A configuration or declared name that is not a dotted lower-case identifier.
    #[error(
        "{place} {name:?}: accepted are dotted lower-case names such as agent.model \
         ([a-z][a-z0-9_]* parts joined by '.')"
    )]
    FieldName {
        /// Where the name was found.
        place: String,
        /// The name.
        name: String,
    },
    /// A declared entry given twice.
    #[error("declared {0:?} is listed twice")]
    DeclaredTwice(String),
    /// A configuration field that differs between the arms and is not declared.
    #[error(
        "undeclared difference in {field}: baseline {baseline}, candidate {candidate}; declare \
         it (--declare {field}) or make the arms agree"
    )]
    Undeclared {
        /// The field.
        field: String,
        /// The baseline's value (or `(absent)`).
        baseline: String,
        /// The candidate's value (or `(absent)`).
        candidate: String,
    },
    /// A declared entry covering no differing field.
    #[error("declared {0:?}, but no configuration field under it differs between the arms")]
    DeclaredNotDifferent(String),
    /// Arms identical without `aa = true`.
    #[error(
        "the arms are identical (script and configuration); set aa = true for an A/A \
         calibration, or change the candidate"
    )]
    IdenticalArms,
    /// `aa = true` with arms that differ, or with declared differences.
    #[error("aa = true: both arms must be identical and nothing declared; {0}")]
    AaNotIdentical(String),
}

/// Why a plan was not accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// Not TOML, an unknown field, a missing field or a wrong type (toml's message names the
    /// line and column, and for an unknown field or variant the accepted ones).
    #[error("plan: {0}")]
    Syntax(String),
    /// Every validation problem found.
    #[error("plan: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<PlanProblem>),
    /// The arm resolver failed.
    #[error("plan: cannot resolve the {arm} arm's script {script:?}: {message}")]
    Resolve {
        /// `baseline` or `candidate`.
        arm: &'static str,
        /// The script.
        script: String,
        /// The resolver's error.
        message: String,
    },
    /// The plan text does not match its seal.
    #[error(
        "plan: the plan's SHA-256 is {actual}, its seal says {sealed}: the plan changed after sealing"
    )]
    SealMismatch {
        /// The digest in the seal.
        sealed: String,
        /// The digest of the text.
        actual: String,
    },
}

/// The seam to the canary: resolving a canary script into the configuration fields
/// [`Arm::configuration`] holds, without running an agent (`super::resolve::ScriptResolver`).
pub trait ResolveArm {
    /// Resolves `script` (as the operator named it) into dotted field names and values.
    /// The error's text is shown to the operator.
    fn resolve(&self, script: &str) -> Result<BTreeMap<String, String>, String>;
}

/// What `patchdiff compare plan` asks for; [`Plan::draft`] turns it into a validated plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// Plan name.
    pub name: String,
    /// Baseline canary script.
    pub baseline: String,
    /// Candidate canary script (ignored with `aa`: the candidate is the baseline).
    pub candidate: String,
    /// Runs per arm.
    pub runs: u32,
    /// The one extension, if any.
    pub extend_to: Option<u32>,
    /// α.
    pub alpha: f64,
    /// Concurrency.
    pub concurrency: u32,
    /// Block-order seed.
    pub seed: u32,
    /// Declared differences.
    pub declared: Vec<String>,
    /// A/A calibration.
    pub aa: bool,
}

impl Plan {
    /// Builds and validates a plan from `request`, resolving both arms through `resolver`
    /// (once with `aa`, the candidate being a copy of the baseline). Defaults as
    /// [`Plan::from_toml`] applies them. Errors: the resolver's, then every
    /// [`PlanProblem`] — undeclared differences among them.
    pub fn draft(request: PlanRequest, resolver: &impl ResolveArm) -> Result<Self, PlanError> {
        let resolve = |arm: &'static str, script: &str| {
            resolver
                .resolve(script)
                .map(|configuration| Arm {
                    script: script.to_owned(),
                    configuration,
                })
                .map_err(|message| PlanError::Resolve {
                    arm,
                    script: script.to_owned(),
                    message,
                })
        };
        let baseline = resolve("baseline", &request.baseline)?;
        let candidate = if request.aa {
            baseline.clone()
        } else {
            resolve("candidate", &request.candidate)?
        };
        let plan = Self {
            gate: PLAN_GATE,
            name: request.name,
            runs: request.runs,
            extend_to: request.extend_to,
            order: Order::Blocks,
            seed: request.seed,
            concurrency: request.concurrency,
            endpoint: Endpoint::Target,
            alpha: request.alpha,
            test: TargetTest::Fisher,
            multiplicity: Multiplicity::Tarone,
            run_level: true,
            curtail: true,
            rejudge_repeat: default_rejudge(),
            max_excluded: default_max_excluded(),
            min_valid: None,
            max_cost_usd: None,
            max_wall_s: None,
            aa: request.aa,
            declared: request.declared,
            guardrails: Guardrails::default(),
            baseline,
            candidate,
        };
        plan.validate()?;
        Ok(plan.with_defaults_filled())
    }

    /// Parses and validates a plan. Errors: [`PlanError::Syntax`] for TOML that is not a plan
    /// (unknown fields included), [`PlanError::Invalid`] listing every problem.
    pub fn from_toml(text: &str) -> Result<Self, PlanError> {
        let plan: Self = toml::from_str(text).map_err(|e| PlanError::Syntax(e.to_string()))?;
        plan.validate()?;
        Ok(plan.with_defaults_filled())
    }

    /// The plan as TOML, every field written (the canonical text [`Plan::digest`] covers).
    /// Errors: [`PlanError::Invalid`] — only a valid plan is written.
    pub fn to_toml(&self) -> Result<String, PlanError> {
        self.validate()?;
        let plan = self.clone().with_defaults_filled();
        toml::to_string(&plan).map_err(|e| PlanError::Syntax(e.to_string()))
    }

    /// SHA-256 (lower-case hex, 64 characters) of [`Plan::to_toml`]: what `plan.seal` holds.
    pub fn digest(&self) -> Result<String, PlanError> {
        Ok(sha256_hex(self.to_toml()?.as_bytes()))
    }

    /// Parses `text` only if its bytes hash to `sealed` (hex): a sealed plan cannot change,
    /// not even in a comment. Errors: [`PlanError::SealMismatch`], then as [`Plan::from_toml`].
    pub fn from_sealed(text: &str, sealed: &str) -> Result<Self, PlanError> {
        let actual = sha256_hex(text.as_bytes());
        if !actual.eq_ignore_ascii_case(sealed.trim()) {
            return Err(PlanError::SealMismatch {
                sealed: sealed.trim().to_owned(),
                actual,
            });
        }
        Self::from_toml(text)
    }

    /// The valid-run floor per arm and target: `min_valid`, or 80 % of runs rounded up.
    pub fn min_valid_runs(&self) -> u32 {
        self.min_valid
            .unwrap_or_else(|| (self.runs * 4).div_ceil(5))
    }

    fn with_defaults_filled(mut self) -> Self {
        self.min_valid = Some(self.min_valid_runs());
        self
    }

    /// Every problem with the plan (empty: valid).
    pub fn problems(&self) -> Vec<PlanProblem> {
        let mut out = Vec::new();
        if self.gate != PLAN_GATE {
            out.push(PlanProblem::Gate(self.gate));
        }
        let name_chars = self.name.chars().count();
        if name_chars == 0 || name_chars > MAX_NAME_CHARS || self.name.chars().any(char::is_control)
        {
            out.push(PlanProblem::Name(self.name.clone()));
        }
        let runs_ok = (MIN_RUNS..=MAX_RUNS).contains(&self.runs);
        if !runs_ok {
            out.push(PlanProblem::Runs(self.runs));
        }
        if let Some(extend_to) = self.extend_to
            && (extend_to <= self.runs || extend_to > MAX_RUNS)
        {
            out.push(PlanProblem::ExtendTo {
                extend_to,
                runs: self.runs,
            });
        }
        let alpha_ok = self.alpha > 0.0 && self.alpha <= MAX_ALPHA;
        if let Some(extend_to) = self.extend_to
            && runs_ok
            && alpha_ok
            && extend_to > self.runs
            && extend_to <= MAX_RUNS
            && let Ok(size) = power::extension_size(self.runs, extend_to, self.alpha)
            && size.sup > self.alpha
        {
            out.push(PlanProblem::ExtensionSize {
                runs: self.runs,
                extend_to,
                alpha: self.alpha,
                sup: size.sup,
                at_rate_pct: size.at_rate * 100.0,
            });
        }
        let max_concurrency = MAX_CONCURRENCY.min(2 * self.runs.max(1));
        if !(1..=max_concurrency).contains(&self.concurrency) {
            out.push(PlanProblem::Concurrency {
                value: self.concurrency,
                max: max_concurrency,
            });
        }
        if !alpha_ok {
            out.push(PlanProblem::Alpha(self.alpha));
        }
        if !(1..=MAX_REJUDGE).contains(&self.rejudge_repeat) {
            out.push(PlanProblem::Rejudge(self.rejudge_repeat));
        }
        if !(0.0..=MAX_EXCLUDED_CAP).contains(&self.max_excluded) {
            out.push(PlanProblem::MaxExcluded(self.max_excluded));
        }
        if let Some(value) = self.min_valid
            && runs_ok
            && !(1..=self.runs).contains(&value)
        {
            out.push(PlanProblem::MinValid {
                value,
                runs: self.runs,
            });
        }
        if let Some(cost) = self.max_cost_usd
            && !(cost.is_finite() && cost > 0.0)
        {
            out.push(PlanProblem::Budget {
                field: "max_cost_usd",
                value: cost.to_string(),
            });
        }
        if self.max_wall_s == Some(0) {
            out.push(PlanProblem::Budget {
                field: "max_wall_s",
                value: "0".to_owned(),
            });
        }
        for (field, value) in [
            ("cost_ratio", self.guardrails.cost_ratio),
            ("minutes_ratio", self.guardrails.minutes_ratio),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 1.0)
            {
                out.push(PlanProblem::Guardrail { field, value });
            }
        }
        for (arm, side) in [("baseline", &self.baseline), ("candidate", &self.candidate)] {
            if side.script.trim().is_empty() {
                out.push(PlanProblem::Script { arm });
            }
            for key in side.configuration.keys() {
                if !is_field_name(key) {
                    out.push(PlanProblem::FieldName {
                        place: format!("{arm}.configuration key"),
                        name: key.clone(),
                    });
                }
            }
        }
        let mut seen = Vec::new();
        for entry in &self.declared {
            if !is_field_name(entry) {
                out.push(PlanProblem::FieldName {
                    place: "declared entry".to_owned(),
                    name: entry.clone(),
                });
            }
            if seen.contains(&entry) {
                out.push(PlanProblem::DeclaredTwice(entry.clone()));
            }
            seen.push(entry);
        }
        out.extend(self.difference_problems());
        out
    }

    fn validate(&self) -> Result<(), PlanError> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(PlanError::Invalid(problems))
        }
    }

    /// The configuration fields whose values differ between the arms (present in one only
    /// counts), with both values (`None`: absent).
    pub fn differences(&self) -> Vec<(String, Option<String>, Option<String>)> {
        let (a, b) = (&self.baseline.configuration, &self.candidate.configuration);
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter(|k| a.get(*k) != b.get(*k))
            .map(|k| ((*k).clone(), a.get(k).cloned(), b.get(k).cloned()))
            .collect()
    }

    fn difference_problems(&self) -> Vec<PlanProblem> {
        let differences = self.differences();
        let script_differs = self.baseline.script != self.candidate.script;
        let shown = |v: &Option<String>| {
            v.as_deref()
                .map_or("(absent)".to_owned(), |v| format!("{v:?}"))
        };
        if self.aa {
            let mut what: Vec<String> = differences.iter().map(|(k, _, _)| k.clone()).collect();
            if script_differs {
                what.insert(0, "script".to_owned());
            }
            let mut out = Vec::new();
            if !what.is_empty() {
                out.push(PlanProblem::AaNotIdentical(format!(
                    "the arms differ in {}",
                    what.join(", ")
                )));
            }
            if !self.declared.is_empty() {
                out.push(PlanProblem::AaNotIdentical(format!(
                    "declared {}",
                    self.declared.join(", ")
                )));
            }
            return out;
        }
        if differences.is_empty() && !script_differs {
            return vec![PlanProblem::IdenticalArms];
        }
        let covers = |entry: &str, key: &str| {
            key == entry
                || key
                    .strip_prefix(entry)
                    .is_some_and(|rest| rest.starts_with('.'))
        };
        let mut out: Vec<PlanProblem> = differences
            .iter()
            .filter(|(k, _, _)| !self.declared.iter().any(|d| covers(d, k)))
            .map(|(k, a, b)| PlanProblem::Undeclared {
                field: k.clone(),
                baseline: shown(a),
                candidate: shown(b),
            })
            .collect();
        out.extend(
            self.declared
                .iter()
                .filter(|d| is_field_name(d))
                .filter(|d| !differences.iter().any(|(k, _, _)| covers(d, k)))
                .map(|d| PlanProblem::DeclaredNotDifferent(d.clone())),
        );
        out
    }
}

fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// GATE2 §4.6's example plan (also used by `matrix`'s tests).
    pub(crate) const GATE2_EXAMPLE: &str = r#"
gate = 2
name = "observe_scope description v2"
runs = 10
extend_to = 20
order = "blocks"
seed = 20261203
concurrency = 2
endpoint = "target"
alpha = 0.05
test = "fisher"
multiplicity = "tarone"
run_level = true
curtail = true
rejudge_repeat = 3
max_excluded = 0.2
min_valid = 8
max_cost_usd = 40
declared = ["build"]

[baseline]
script = "assets/canary/claude.canary"
configuration = { "agent.model" = "claude-sonnet-4-5", "build.source_sha" = "1a2b3c4" }

[candidate]
script = "assets/canary/claude.canary"
configuration = { "agent.model" = "claude-sonnet-4-5", "build.source_sha" = "9f8e7d6", "build.binary" = "target/release/patchdiff-candidate" }

[guardrails]
cost_ratio = 1.25
minutes_ratio = 1.5
gating = false
"#;

    fn example() -> Plan {
        Plan::from_toml(GATE2_EXAMPLE).unwrap()
    }

    fn problems_of(edit: impl FnOnce(&mut Plan)) -> Vec<String> {
        let mut plan = example();
        edit(&mut plan);
        plan.problems().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn gate2_example_plan_parses_and_round_trips() {
        let plan = example();
        assert_eq!(plan.runs, 10);
        assert_eq!(plan.extend_to, Some(20));
        assert_eq!(plan.min_valid_runs(), 8);
        assert_eq!(
            plan.differences(),
            [
                (
                    "build.binary".to_owned(),
                    None,
                    Some("target/release/patchdiff-candidate".to_owned())
                ),
                (
                    "build.source_sha".to_owned(),
                    Some("1a2b3c4".to_owned()),
                    Some("9f8e7d6".to_owned())
                ),
            ]
        );
        let text = plan.to_toml().unwrap();
        let again = Plan::from_toml(&text).unwrap();
        assert_eq!(again, plan);
        assert_eq!(
            again.to_toml().unwrap(),
            text,
            "the canonical text is stable"
        );
    }

    #[test]
    fn defaults_are_written_out_so_the_sealed_text_states_them() {
        let minimal = r#"
gate = 2
name = "n"
runs = 10
seed = 1
concurrency = 2
alpha = 0.05
declared = ["agent.model"]
[baseline]
script = "a.canary"
configuration = { "agent.model" = "m1" }
[candidate]
script = "a.canary"
configuration = { "agent.model" = "m2" }
"#;
        let text = Plan::from_toml(minimal).unwrap().to_toml().unwrap();
        for line in [
            "order = \"blocks\"",
            "endpoint = \"target\"",
            "test = \"fisher\"",
            "multiplicity = \"tarone\"",
            "run_level = true",
            "curtail = true",
            "rejudge_repeat = 3",
            "max_excluded = 0.2",
            "min_valid = 8",
            "aa = false",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn parsing_refuses_unknown_fields_everywhere() {
        for (needle, replacement, field) in [
            ("runs = 10\n", "runs = 10\nrunz = 10\n", "runz"),
            (
                "script = \"assets/canary/claude.canary\"\nconfiguration = { \"agent.model\" = \"claude-sonnet-4-5\", \"build.source_sha\" = \"1a2b3c4\" }",
                "script = \"x\"\nbinary = \"y\"",
                "binary",
            ),
            (
                "gating = false",
                "gating = false\nlatency_ratio = 2",
                "latency_ratio",
            ),
        ] {
            let text = GATE2_EXAMPLE.replacen(needle, replacement, 1);
            let e = Plan::from_toml(&text).unwrap_err().to_string();
            assert!(e.contains(&format!("unknown field `{field}`")), "{e}");
            assert!(e.contains("expected"), "names the accepted fields: {e}");
        }
    }

    #[test]
    fn parsing_refuses_a_test_that_is_not_built() {
        let text = GATE2_EXAMPLE.replace("test = \"fisher\"", "test = \"boschloo\"");
        let e = Plan::from_toml(&text).unwrap_err().to_string();
        assert!(
            e.contains("unknown variant `boschloo`, expected `fisher`"),
            "{e}"
        );
        let text = GATE2_EXAMPLE.replace("runs = 10\n", "");
        let e = Plan::from_toml(&text).unwrap_err().to_string();
        assert!(e.contains("missing field `runs`"), "{e}");
    }

    #[test]
    fn validation_names_field_value_and_what_is_accepted() {
        type Edit = fn(&mut Plan);
        let cases: [(Edit, &str); 12] = [
            (
                |p| p.gate = 1,
                "gate = 1: a comparison plan needs gate = 2 (SPEC C7)",
            ),
            (
                |p| p.runs = 4,
                "runs = 4: accepted are 5 to 100 runs per arm",
            ),
            (
                |p| p.runs = 101,
                "runs = 101: accepted are 5 to 100 runs per arm",
            ),
            (
                |p| p.extend_to = Some(10),
                "extend_to = 10: accepted is more than runs (10) and at most 100",
            ),
            (
                |p| p.concurrency = 0,
                "concurrency = 0: accepted are 1 to 16",
            ),
            (
                |p| p.alpha = 0.3,
                "alpha = 0.3: accepted is a level above 0 and at most 0.2",
            ),
            (|p| p.alpha = f64::NAN, "alpha = NaN: accepted"),
            (
                |p| p.rejudge_repeat = 0,
                "rejudge_repeat = 0: accepted are 1 to 10",
            ),
            (
                |p| p.min_valid = Some(11),
                "min_valid = 11: accepted are 1 to runs (10)",
            ),
            (
                |p| p.max_cost_usd = Some(-1.0),
                "max_cost_usd = -1: accepted is a positive number",
            ),
            (
                |p| p.guardrails.cost_ratio = Some(0.9),
                "guardrails.cost_ratio = 0.9: accepted is a finite ratio ≥ 1",
            ),
            (
                |p| p.name = "a\nb".to_owned(),
                "name \"a\\nb\": accepted is 1 to 200",
            ),
        ];
        for (edit, expected) in cases {
            let problems = problems_of(edit);
            assert!(
                problems.iter().any(|p| p.starts_with(expected)),
                "{expected:?} not in {problems:?}"
            );
        }
        assert!(example().problems().is_empty());
    }

    #[test]
    fn an_extension_beyond_alpha_is_refused_at_plan_time() {
        // 10 → 20 at 0.05 stays at 0.0385 (GATE2 §3.7): accepted.
        assert!(example().problems().is_empty());
        let problems = problems_of(|p| {
            p.alpha = 0.1;
            p.extend_to = Some(30);
        });
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "extend_to = 30: testing at 10 and again at 30 runs per arm false-alarms up to 0.11"
            ),
            "{problems:?}"
        );
        assert!(problems[0].contains("above alpha = 0.1"), "{problems:?}");
    }

    #[test]
    fn an_undeclared_difference_is_refused_naming_both_values() {
        let problems = problems_of(|p| {
            p.candidate
                .configuration
                .insert("agent.model".to_owned(), "claude-opus-4-5".to_owned());
        });
        assert_eq!(
            problems,
            [
                "undeclared difference in agent.model: baseline \"claude-sonnet-4-5\", candidate \
                 \"claude-opus-4-5\"; declare it (--declare agent.model) or make the arms agree"
            ]
        );
        // Declaring the group prefix covers every field under it, and nothing else.
        assert!(
            problems_of(|p| {
                p.candidate
                    .configuration
                    .insert("agent.model".to_owned(), "claude-opus-4-5".to_owned());
                p.declared.push("agent".to_owned());
            })
            .is_empty()
        );
        let problems = problems_of(|p| p.declared = vec!["build.source_sha".to_owned()]);
        assert_eq!(
            problems,
            [
                "undeclared difference in build.binary: baseline (absent), candidate \
                 \"target/release/patchdiff-candidate\"; declare it (--declare build.binary) or \
                 make the arms agree"
            ]
        );
        // A prefix must end at a dot: `build` does not cover `buildx.y`.
        let problems = problems_of(|p| {
            p.candidate
                .configuration
                .insert("buildx.y".to_owned(), "1".to_owned());
        });
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("undeclared difference in buildx.y"));
    }

    #[test]
    fn a_declared_field_must_actually_differ() {
        let problems = problems_of(|p| p.declared.push("agent".to_owned()));
        assert_eq!(
            problems,
            ["declared \"agent\", but no configuration field under it differs between the arms"]
        );
        let problems = problems_of(|p| p.declared.push("build".to_owned()));
        assert_eq!(problems, ["declared \"build\" is listed twice"]);
        let problems = problems_of(|p| p.declared.push("Agent Model".to_owned()));
        assert!(problems[0].starts_with("declared entry \"Agent Model\": accepted are dotted"));
    }

    #[test]
    fn aa_plans_need_identical_arms_and_others_need_a_difference() {
        let problems = problems_of(|p| p.aa = true);
        assert_eq!(
            problems,
            [
                "aa = true: both arms must be identical and nothing declared; the arms differ in \
                 build.binary, build.source_sha",
                "aa = true: both arms must be identical and nothing declared; declared build",
            ]
        );
        let problems = problems_of(|p| {
            p.candidate = p.baseline.clone();
            p.declared.clear();
        });
        assert_eq!(
            problems,
            [
                "the arms are identical (script and configuration); set aa = true for an A/A \
                 calibration, or change the candidate"
            ]
        );
        assert!(
            problems_of(|p| {
                p.candidate = p.baseline.clone();
                p.declared.clear();
                p.aa = true;
            })
            .is_empty()
        );
    }

    #[test]
    fn digest_seals_the_canonical_text() {
        let plan = example();
        let text = plan.to_toml().unwrap();
        let digest = plan.digest().unwrap();
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, sha256_hex(text.as_bytes()));
        assert_eq!(Plan::from_sealed(&text, &digest).unwrap(), plan);
        // Any change after sealing, a comment included, breaks the seal.
        let edited = text.replacen("runs = 10", "runs = 12", 1);
        assert!(matches!(
            Plan::from_sealed(&edited, &digest),
            Err(PlanError::SealMismatch { .. })
        ));
        let commented = format!("# hello\n{text}");
        let e = Plan::from_sealed(&commented, &digest)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the plan changed after sealing"), "{e}");
        // Different plans, different digests.
        let mut other = plan.clone();
        other.seed += 1;
        assert_ne!(other.digest().unwrap(), digest);
    }

    struct Scripts(BTreeMap<&'static str, BTreeMap<String, String>>);

    impl ResolveArm for Scripts {
        fn resolve(&self, script: &str) -> Result<BTreeMap<String, String>, String> {
            self.0
                .get(script)
                .cloned()
                .ok_or_else(|| format!("no such canary script {script}"))
        }
    }

    fn scripts() -> Scripts {
        let fields = |model: &str| {
            BTreeMap::from([
                ("agent.model".to_owned(), model.to_owned()),
                ("suite.fixture_manifest".to_owned(), "sha256:aa".to_owned()),
            ])
        };
        Scripts(BTreeMap::from([
            ("a.canary", fields("m1")),
            ("b.canary", fields("m2")),
        ]))
    }

    fn request() -> PlanRequest {
        PlanRequest {
            name: "model m2".to_owned(),
            baseline: "a.canary".to_owned(),
            candidate: "b.canary".to_owned(),
            runs: 10,
            extend_to: None,
            alpha: 0.05,
            concurrency: 2,
            seed: 7,
            declared: vec!["agent".to_owned()],
            aa: false,
        }
    }

    #[test]
    fn draft_resolves_both_arms_through_the_seam() {
        let plan = Plan::draft(request(), &scripts()).unwrap();
        assert_eq!(plan.candidate.configuration["agent.model"], "m2");
        assert_eq!(plan.min_valid, Some(8));
        let e = Plan::draft(
            PlanRequest {
                declared: vec![],
                ..request()
            },
            &scripts(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("undeclared difference in agent.model"),
            "{e}"
        );
        let aa = Plan::draft(
            PlanRequest {
                declared: vec![],
                aa: true,
                candidate: "ignored".to_owned(),
                ..request()
            },
            &scripts(),
        )
        .unwrap();
        assert_eq!(aa.baseline, aa.candidate);
        let e = Plan::draft(
            PlanRequest {
                candidate: "missing.canary".to_owned(),
                ..request()
            },
            &scripts(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "plan: cannot resolve the candidate arm's script \"missing.canary\": no such canary \
             script missing.canary"
        );
    }
}

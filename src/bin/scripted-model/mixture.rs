//! `--mixture MODEL=PLAN:WEIGHT,…`: several plans with weights, one drawn per session from a
//! seeded stream, so an arm "fails chess 40 % of the time" (gate 2 rehearsals).

use super::*;

/// One `--mixture` argument, parsed.
#[derive(Clone)]
pub(crate) struct MixtureSpec {
    pub(crate) model: Option<String>,
    pub(crate) plans: Vec<(PathBuf, f64)>,
}

pub(crate) fn parse_mixture(text: &str) -> Result<MixtureSpec, String> {
    let (model, rest) = match text.split_once('=') {
        Some((m, rest)) if !m.is_empty() => (Some(m.to_owned()), rest),
        Some(_) => return Err(format!("--mixture {text:?}: empty MODEL before `=`")),
        None => (None, text),
    };
    let mut plans = Vec::new();
    for part in rest.split(',') {
        let (plan, weight) = part.rsplit_once(':').ok_or_else(|| {
            format!("--mixture {text:?}: `{part}` is not PLAN:WEIGHT (accepted: [MODEL=]PLAN:WEIGHT[,PLAN:WEIGHT…])")
        })?;
        let weight: f64 = weight
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w > 0.0)
            .ok_or_else(|| {
                format!("--mixture {text:?}: weight `{weight}` is not a positive number")
            })?;
        plans.push((PathBuf::from(plan), weight));
    }
    Ok(MixtureSpec { model, plans })
}

/// Plans with weights, one drawn per session.
pub(crate) struct Mixture {
    /// The model it serves (`None`: every model no other mixture names).
    pub(crate) model: Option<String>,
    /// (name, steps, weight).
    pub(crate) plans: Vec<(String, Vec<PlanStep>, f64)>,
    /// Sessions started so far.
    pub(crate) sessions: AtomicU64,
}

impl Mixture {
    /// The plan index session `n` (1-based) plays under `seed`: u = the top 53 bits of
    /// SplitMix64(seed ⊕ n·φ) as a fraction of 1, against the cumulative weights.
    pub(crate) fn pick(&self, seed: u64, n: u64) -> usize {
        let mut state = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let u =
            (patchdiff::gate2::matrix::splitmix64(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
        let total: f64 = self.plans.iter().map(|p| p.2).sum();
        let mut acc = 0.0;
        for (i, (_, _, w)) in self.plans.iter().enumerate() {
            acc += w / total;
            if u < acc {
                return i;
            }
        }
        self.plans.len() - 1
    }
}

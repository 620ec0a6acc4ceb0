//! The run manifest (E1, E2): written once, at `init`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The run manifest (E1): written once, when the canary first initializes targets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunManifest {
    pub run_id: String,
    pub started_ms: f64,
    pub written_ms: f64,
    /// The SHA embedded at build time (`build.rs`), else `unknown` ([`source_sha`]).
    pub source_sha: String,
    pub source_sha_origin: String,
    /// Requested model/provider identity and effective reasoning setting, as recorded by the
    /// operator (`record`). Attested by the host, not verified here.
    pub agent: AgentIdentity,
    /// Initial target hashes, by target name (C1).
    pub initial_targets: Vec<InitialTarget>,
    /// Effective configuration of the processes this run starts.
    pub configuration: Value,
    pub gate2: String,
}

/// What the operator recorded about the agent under test.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AgentIdentity {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub reasoning: Option<String>,
}

/// One target's initial state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InitialTarget {
    pub target: String,
    pub language: String,
    pub sha256: String,
    pub version: u64,
}

/// The executed source SHA and where it came from (E1): the SHA embedded at build time
/// (`PATCHDIFF_BUILD_SHA`, see `build.rs`: the commit the binary was built from, or the value the
/// release build was given), else `unknown`. Never read from a checkout at run time :
/// the binary runs where no checkout is, and a checkout that moved after the build would name
/// sources that were not executed.
pub fn source_sha() -> (String, String) {
    match crate::config::BUILD_SHA {
        Some(built) => (built.to_owned(), "embedded at build".to_owned()),
        None => (
            "unknown".to_owned(),
            "not embedded: built without git and without PATCHDIFF_BUILD_SHA".to_owned(),
        ),
    }
}

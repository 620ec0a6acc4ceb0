//! Waymark discovery worker (SPEC W1–W13): the frame codec, the supervisor that owns a Node child
//! (resident) or starts one per discovery (oneshot), its queue and phase ceilings, generation
//! retirement, RSS limit, process ownership, stale-root cleanup and the owner guard.
//!
//! The Node side lives in `integrations/waymark/` (`discovery_core.mjs`, `waymark_worker.mjs`,
//! `waymark_oneshot.mjs`); run `npm ci --prefix integrations/waymark` before use.
//!
//! Entry points: [`Waymark`] (construct with [`WaymarkConfig`] and a telemetry
//! [`Recorder`](crate::telemetry::Recorder)), [`owner::OwnerGuard`] and [`owner::shared`].

pub mod clock;
pub mod codec;
pub mod config;
pub mod error;
pub mod owner;
pub mod process;
pub mod protocol;
pub mod queue;
pub mod stale;
pub mod supervisor;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use clock::Clock;
pub use config::{ConfigError, WaymarkConfig, WaymarkLimits, WaymarkMode};
pub use error::{DiscoveryError, DomainFailure, WorkerError, WorkerErrorCode};
pub use stale::{StaleReport, StaleRoot};
pub use supervisor::{Retirement, StderrCapture, Waymark, WorkerStatus};

/// A language the worker discovers scopes in (W1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    JavaScript,
    TypeScript,
    Python,
    Rust,
}

impl Language {
    /// Every supported language.
    pub const ALL: [Language; 4] = [
        Language::JavaScript,
        Language::TypeScript,
        Language::Python,
        Language::Rust,
    ];

    /// The protocol name: `javascript`, `typescript`, `python` or `rust`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Python => "python",
            Language::Rust => "rust",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an unknown language name; names the value and the accepted names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language {0:?}: accepted values are javascript, typescript, python, rust")]
pub struct UnknownLanguage(pub String);

impl FromStr for Language {
    type Err = UnknownLanguage;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Language::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLanguage(s.to_owned()))
    }
}

/// One structural scope found by discovery.
///
/// `kind` is one of `class`, `function`, `method`, `interface`, `enum`, `struct`, `impl`,
/// `trait`, `module`. `name` is the qualified name: enclosing scope names joined with `.`
/// (`Calendar.addWindow`; an `impl Foo` block's methods are `Foo.method`). Byte offsets are
/// **UTF-8** bytes into the source, `end_byte` exclusive; lines are 1-based and inclusive.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    pub kind: String,
    pub name: String,
    pub start_byte: usize,
    pub end_byte: usize,
    pub start_line: usize,
    pub end_line: usize,
}

/// The result of one discovery: scopes sorted by `start_byte`, enclosing scopes first, and the
/// worker-reported parse+walk time in milliseconds (excludes process start and IPC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discovery {
    pub scopes: Vec<Scope>,
    pub parse_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_names_round_trip_through_fromstr_display_and_serde() {
        for l in Language::ALL {
            assert_eq!(l.to_string().parse::<Language>(), Ok(l));
            let json = serde_json::to_string(&l).expect("serialize");
            assert_eq!(json, format!("\"{l}\""));
        }
        let err = "go".parse::<Language>().expect_err("unknown");
        assert!(err.to_string().contains("\"go\""));
        assert!(err.to_string().contains("javascript, typescript, python, rust"));
    }
}

//! Waymark discovery worker (SPEC W1–W13): the frame codec, the supervisor that owns a Node child
//! (resident) or starts one per discovery (oneshot), its queue and phase ceilings, generation
//! retirement, RSS limit, process ownership, stale-root cleanup and the owner guard.
//!
//! The Node side lives in `integrations/waymark/` (`discovery_core.mjs`, `waymark_worker.mjs`,
//! `waymark_oneshot.mjs`); run `npm ci --prefix integrations/waymark` before use.
//!
//! Entry points: [`Waymark`] (construct with [`WaymarkConfig`] and a telemetry
//! [`Recorder`](crate::telemetry::Recorder)), [`owner::OwnerGuard`] and [`owner::shared`].

pub(crate) mod ceiling;
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
pub use supervisor::{
    CallerKind, Retirement, RetirementReason, StderrCapture, Waymark, WorkerStatus,
};

/// A language the worker discovers scopes in (W1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    JavaScript,
    /// JavaScript with JSX, through the JavaScript grammar (which parses JSX).
    Jsx,
    TypeScript,
    /// TypeScript with JSX (`.tsx`), through the TSX grammar `tree-sitter-typescript` ships.
    Tsx,
    Python,
    Rust,
    Go,
    Java,
    C,
    /// C++ (`.cc`, `.cpp`, `.h` of C++ code), through `tree-sitter-cpp`.
    Cpp,
    /// C#, through `tree-sitter-c-sharp`.
    CSharp,
    Ruby,
    /// PHP files (HTML around `<?php … ?>`), through `tree-sitter-php`'s full grammar.
    Php,
}

impl Language {
    /// Every supported language.
    pub const ALL: [Language; 13] = [
        Language::JavaScript,
        Language::Jsx,
        Language::TypeScript,
        Language::Tsx,
        Language::Python,
        Language::Rust,
        Language::Go,
        Language::Java,
        Language::C,
        Language::Cpp,
        Language::CSharp,
        Language::Ruby,
        Language::Php,
    ];

    /// The protocol name: `javascript`, `jsx`, `typescript`, `tsx`, `python`, `rust`, `go`,
    /// `java`, `c`, `cpp`, `csharp`, `ruby` or `php`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::JavaScript => "javascript",
            Language::Jsx => "jsx",
            Language::TypeScript => "typescript",
            Language::Tsx => "tsx",
            Language::Python => "python",
            Language::Rust => "rust",
            Language::Go => "go",
            Language::Java => "java",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::CSharp => "csharp",
            Language::Ruby => "ruby",
            Language::Php => "php",
        }
    }

    /// The accepted names, comma-separated (for error messages).
    pub fn accepted() -> String {
        Language::ALL.map(Language::as_str).join(", ")
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an unknown language name (K8); names the value, the accepted names and, for a
/// near miss (`TypeScript`, `py`, `ts`), the name probably meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language {0:?}: accepted values are {accepted}{hint}", accepted = Language::accepted(), hint = near_miss(.0).map(|l| format!(" (did you mean {l}?)")).unwrap_or_default())]
pub struct UnknownLanguage(pub String);

/// The language a common misspelling or file extension probably means.
fn near_miss(name: &str) -> Option<Language> {
    let lower = name.trim().to_ascii_lowercase();
    let lower = lower.trim_start_matches('.');
    let alias = match lower {
        "js" | "mjs" | "cjs" | "node" => "javascript",
        "ts" | "mts" | "cts" => "typescript",
        "py" | "python3" => "python",
        "rs" => "rust",
        "golang" => "go",
        "c++" | "cc" | "cxx" | "hpp" => "cpp",
        "c#" | "cs" | "c_sharp" | "c-sharp" => "csharp",
        "rb" => "ruby",
        other => other,
    };
    Language::ALL.into_iter().find(|l| l.as_str() == alias)
}

impl FromStr for Language {
    type Err = UnknownLanguage;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Language::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLanguage(s.to_owned()))
    }
}

/// The question a discovery answers (W3: the answer, not the file, is capped at 2 MiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeQuery {
    /// The scopes with this qualified name; with none, [`Discovery::names`] lists up to 40
    /// distinct names there are.
    Name(String),
    /// For each `[start, end)` UTF-8 byte range, the innermost scope containing it.
    Covering(Vec<[usize; 2]>),
    /// No scopes: only whether the content parses ([`Discovery::has_error`],
    /// [`Discovery::scope_count`]).
    Summary,
}

impl Serialize for ScopeQuery {
    /// `{"name": …}`, `{"covering": [[start, end], …]}` or `{"summary": true}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        match self {
            ScopeQuery::Name(name) => m.serialize_entry("name", name)?,
            ScopeQuery::Covering(ranges) => m.serialize_entry("covering", ranges)?,
            ScopeQuery::Summary => m.serialize_entry("summary", &true)?,
        }
        m.end()
    }
}

/// One structural scope found by discovery.
///
/// `kind` is one of `class`, `function`, `method`, `constructor`, `interface`, `enum`, `struct`,
/// `record`, `impl`, `trait`, `module`, `namespace`. `name` is the qualified name, written the
/// way the language's people write it: enclosing names joined with `.` (`Calendar.addWindow`,
/// Java's `Outer.Inner.method`; an `impl Foo` block's methods are `Foo.method`), `::` in C++
/// (`ns::Class::method`), `Module::Class#method` / `Class.singleton` in Ruby,
/// `Ns\Class::method` in PHP. A scope covers its decorators, attributes and annotations. Byte offsets are
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

/// The result of one discovery: scopes sorted by `start_byte`, enclosing scopes first (all of
/// them, or those answering a [`ScopeQuery`]), and the worker-reported parse+walk time in
/// milliseconds (excludes process start and IPC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discovery {
    pub scopes: Vec<Scope>,
    pub parse_ms: f64,
    /// Worker-reported time to read the request file, check its SHA-256 and decode it, in
    /// milliseconds (the Node side of the request's I/O).
    #[serde(default)]
    pub read_ms: f64,
    /// The parser found syntax errors (tree-sitter `ERROR`/`MISSING` nodes); scopes are still
    /// reported for what did parse.
    #[serde(default)]
    pub has_error: bool,
    /// With [`Discovery::has_error`]: the 1-based line of the first syntax error; the content
    /// does not parse from there, so scopes after it may be missing.
    #[serde(default)]
    pub error_line: Option<usize>,
    /// How many scopes the whole content has (`scopes` may list fewer for a query).
    #[serde(default)]
    pub scope_count: usize,
    /// For an unmatched [`ScopeQuery::Name`]: up to 40 distinct names there are.
    #[serde(default)]
    pub names: Vec<String>,
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
        let err = "cobol".parse::<Language>().expect_err("unknown");
        assert!(err.to_string().contains("\"cobol\""));
        assert!(
            err.to_string()
                .contains("javascript, jsx, typescript, tsx, python, rust, go"),
            "{err}"
        );
        let err = "TypeScript".parse::<Language>().expect_err("case matters");
        assert!(
            err.to_string().ends_with("(did you mean typescript?)"),
            "{err}"
        );
        let err = "py".parse::<Language>().expect_err("an extension");
        assert!(err.to_string().ends_with("(did you mean python?)"), "{err}");
    }

    #[test]
    fn scope_queries_have_the_worker_json_shape() {
        let json = |q: ScopeQuery| serde_json::to_string(&q).expect("json");
        assert_eq!(json(ScopeQuery::Name("A.b".into())), r#"{"name":"A.b"}"#);
        assert_eq!(
            json(ScopeQuery::Covering(vec![[1, 2]])),
            r#"{"covering":[[1,2]]}"#
        );
        assert_eq!(json(ScopeQuery::Summary), r#"{"summary":true}"#);
    }
}

//! Startup configuration (SPEC P1–P4): every `PATCHDIFF_*` variable, the optional TOML config
//! file, and platform paths, resolved once into [`Settings`] in `main` and passed down. Each
//! setting is declared once, as a row of [`SETTINGS`]; no other file spells a variable's name.
//! Configuration never comes from an MCP argument, and nothing here writes the process
//! environment.
//!
//! An invalid value never starts a half-configured process (P2): [`ConfigError`] names the
//! variable, the value and what is accepted, and the binary exits non-zero.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// P2: an invalid configuration value — the one error type every configuration parser returns.
///
/// Display: `invalid {variable}={value:?}: accepted values are {accepted}`, then `; {problem}`
/// when the parser said what was wrong beyond "not accepted".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {variable}={value:?}: accepted values are {accepted}{}",
    problem.as_deref().map(|p| format!("; {p}")).unwrap_or_default()
)]
pub struct ConfigError {
    /// The variable (`PATCHDIFF_*`) or, for the file itself, `PATCHDIFF_CONFIG`.
    pub variable: String,
    /// The value as given (lossy UTF-8 for a non-UTF-8 value).
    pub value: String,
    /// What the variable accepts.
    pub accepted: String,
    /// What is wrong with this value, when more can be said than "not accepted".
    pub problem: Option<String>,
}

impl ConfigError {
    pub fn new(variable: &str, value: &str, accepted: &str) -> Self {
        Self {
            variable: variable.to_owned(),
            value: value.to_owned(),
            accepted: accepted.to_owned(),
            problem: None,
        }
    }

    /// [`ConfigError::new`] saying what is wrong with this value.
    pub fn with_problem(mut self, problem: impl Into<String>) -> Self {
        self.problem = Some(problem.into());
        self
    }
}

/// One setting's declaration: everything else about a setting ([`Key`], its variable, its file
/// key, what it accepts, its default) derives from its row in [`SETTINGS`] (P1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingSpec {
    /// The typed name code uses.
    pub key: Key,
    /// The environment variable (`PATCHDIFF_` + the upper-cased file key, or `PATH`,
    /// `NO_COLOR`).
    pub variable: &'static str,
    /// The key the TOML config file sets it by; `None`: environment only.
    pub file_key: Option<&'static str>,
    /// The exact values accepted when they are a fixed set (empty: free-form, see `accepted`).
    /// `["1", "0"]` makes it an on/off switch, the only kind a TOML boolean may set.
    pub choices: &'static [&'static str],
    /// The value that applies when unset, when that is one literal value (`None`: unset means
    /// "off", or the default is derived, e.g. from the platform directories).
    pub default: Option<&'static str>,
    /// What is accepted, in the words of the errors and the documentation.
    pub accepted: &'static str,
}

impl SettingSpec {
    /// Whether a TOML boolean may set it (`true` → `1`, `false` → `0`): for any other key a
    /// boolean would become a number (`waymark_active_timeout_ms = true` a 1 ms timeout).
    pub fn is_switch(&self) -> bool {
        matches!(self.choices, ["1", "0"])
    }
}

/// Declares every setting once: `Key` and [`SETTINGS`] come from the same rows, in the same
/// order (so `SETTINGS[key as usize].key == key`).
/// What an agent host CLI's setting accepts (A1).
const HOST_BINARY_ACCEPTED: &str = "an executable path, or a name looked up on PATH";

macro_rules! settings {
    ($(
        $(#[$doc:meta])*
        $key:ident = $variable:literal {
            file: $file:expr,
            choices: [$($choice:literal),*],
            default: $default:expr,
            accepted: $accepted:expr $(,)?
        }
    )*) => {
        /// One setting [`Settings`] holds, declared by its row in [`SETTINGS`]. A misspelt
        /// setting is a compile error, not a silent `None`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Key {
            $( $(#[$doc])* $key, )*
        }

        /// P1: every setting, in the order the config file documents them; the one place a
        /// variable's name is spelt.
        pub const SETTINGS: &[SettingSpec] = &[
            $(
                SettingSpec {
                    key: Key::$key,
                    variable: $variable,
                    file_key: $file,
                    choices: &[$($choice),*],
                    default: $default,
                    accepted: $accepted,
                },
            )*
        ];
    };
}

settings! {
    /// W1: `resident` keeps one Node child; `oneshot` starts one per discovery.
    WaymarkMode = "PATCHDIFF_WAYMARK_MODE" {
        file: Some("waymark_mode"),
        choices: ["resident", "oneshot"],
        default: Some("resident"),
        accepted: "resident, oneshot",
    }
    /// P1: the trusted Node executable, resolved once to an absolute path.
    NodeBinary = "PATCHDIFF_NODE_BINARY" {
        file: Some("node_binary"),
        choices: [],
        default: Some("node"),
        accepted: "an executable regular file (an ELF binary or a `#!` script): a path, or a \
                   name looked up on PATH",
    }
    /// P1: the number of Waymark workers; only one is supported.
    WaymarkWorkers = "PATCHDIFF_WAYMARK_WORKERS" {
        file: Some("waymark_workers"),
        choices: ["1"],
        default: Some("1"),
        accepted: "1",
    }
    /// W6: the active discovery ceiling in milliseconds.
    WaymarkActiveTimeoutMs = "PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS" {
        file: Some("waymark_active_timeout_ms"),
        choices: [],
        default: Some("15000"),
        accepted: "a number of milliseconds from 1 to 86400000 (24 h), default 15000",
    }
    /// The store's URL (P1): `sqlite:///ABSOLUTE/PATH`, or
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (`postgresql://` too) for PostgreSQL
    /// (`store::is_postgres_url`). The PostgreSQL store reads this one key (`database_url`).
    DatabaseUrl = "PATCHDIFF_DATABASE_URL" {
        file: Some("database_url"),
        choices: [],
        default: None,
        accepted: "`sqlite://` followed by an absolute path without `?`, `#`, `%` or `..` \
                   components, e.g. sqlite:///var/lib/patchdiff/pd.sqlite (or \
                   postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, postgresql:// too, for PostgreSQL)",
    }
    /// M2–M4: the MCP tool profile.
    McpProfile = "PATCHDIFF_MCP_PROFILE" {
        file: Some("mcp_profile"),
        choices: ["observed", "full", "workspace"],
        default: Some("observed"),
        accepted: "`observed`, `full`, `workspace`",
    }
    /// K2: strict observation mode.
    StrictObservationMode = "PATCHDIFF_STRICT_OBSERVATION_MODE" {
        file: Some("strict_observation_mode"),
        choices: ["1", "0"],
        default: Some("0"),
        accepted: "`1` (on) or `0` (off, the default)",
    }
    /// T1: the perf-events JSONL file (unset: no recording).
    PerfEvents = "PATCHDIFF_PERF_EVENTS" {
        file: Some("perf_events"),
        choices: [],
        default: None,
        accepted: "an absolute file path",
    }
    /// T2: RSS samples beside the perf events.
    PerfMemory = "PATCHDIFF_PERF_MEMORY" {
        file: Some("perf_memory"),
        choices: ["1", "0"],
        default: Some("1"),
        accepted: "`1` (sample RSS, the default) or `0` (timing events only)",
    }
    /// E1: the MCP wire log (unset: none).
    EvidenceWireLog = "PATCHDIFF_EVIDENCE_WIRE_LOG" {
        file: Some("evidence_wire_log"),
        choices: [],
        default: None,
        accepted: "an absolute file path",
    }
    /// E1: where retired generations' captured stderr is appended (unset: memory only).
    WorkerStderrLog = "PATCHDIFF_WORKER_STDERR_LOG" {
        file: Some("worker_stderr_log"),
        choices: [],
        default: None,
        accepted: "an absolute file path",
    }
    /// The directory holding `discovery_core.mjs` (unset: the bundled worker, unpacked in the
    /// cache).
    WaymarkDir = "PATCHDIFF_WAYMARK_DIR" {
        file: Some("waymark_dir"),
        choices: [],
        default: None,
        accepted: "a directory path",
    }
    /// Where the in-process worker owner keeps generation roots.
    WaymarkWorkRoot = "PATCHDIFF_WAYMARK_WORK_ROOT" {
        file: Some("waymark_work_root"),
        choices: [],
        default: None,
        accepted: "a directory path",
    }
    /// P4: the data directory (databases, runs).
    DataDir = "PATCHDIFF_DATA_DIR" {
        file: Some("data_dir"),
        choices: [],
        default: None,
        accepted: "an absolute path",
    }
    /// P4: the state directory (logs, worker roots).
    StateDir = "PATCHDIFF_STATE_DIR" {
        file: Some("state_dir"),
        choices: [],
        default: None,
        accepted: "an absolute path",
    }
    /// M1: serve Streamable HTTP on a loopback address instead of stdio.
    McpHttp = "PATCHDIFF_MCP_HTTP" {
        file: Some("mcp_http"),
        choices: [],
        default: None,
        accepted: "a loopback address: 127.0.0.1:PORT, [::1]:PORT or localhost:PORT",
    }
    /// M1: most MCP sessions the HTTP transport keeps for its bearer token; a new session at
    /// the cap evicts the least recently used one.
    McpHttpMaxSessions = "PATCHDIFF_MCP_HTTP_MAX_SESSIONS" {
        file: Some("mcp_http_max_sessions"),
        choices: [],
        default: Some("16"),
        accepted: "a whole number of sessions from 1 to 32 (half the 64 connections), default 16",
    }
    /// M1: an HTTP session with no request for this many seconds is closed.
    McpHttpSessionIdleS = "PATCHDIFF_MCP_HTTP_SESSION_IDLE_S" {
        file: Some("mcp_http_session_idle_s"),
        choices: [],
        default: Some("120"),
        accepted: "a whole number of seconds from 30 to 3600, default 120",
    }
    /// M1: an HTTP connection whose client accepts no response bytes for this many seconds is
    /// dropped.
    McpHttpWriteTimeoutS = "PATCHDIFF_MCP_HTTP_WRITE_TIMEOUT_S" {
        file: Some("mcp_http_write_timeout_s"),
        choices: [],
        default: Some("30"),
        accepted: "a whole number of seconds from 1 to 600, default 30",
    }
    // Environment only: never read from the config file.
    /// The config file itself.
    Config = "PATCHDIFF_CONFIG" {
        file: None,
        choices: [],
        default: None,
        accepted: "a readable TOML file",
    }
    /// P4: the config directory (where `patchdiff.toml` is looked for).
    ConfigDir = "PATCHDIFF_CONFIG_DIR" {
        file: None,
        choices: [],
        default: None,
        accepted: "a directory path",
    }
    /// M1: where the HTTP bearer token is written (0600, must not exist).
    McpHttpTokenFile = "PATCHDIFF_MCP_HTTP_TOKEN_FILE" {
        file: None,
        choices: [],
        default: None,
        accepted: "an absolute file path that does not exist",
    }
    /// A3: a successful tool result's text block: `summary` of its ids (content in
    /// `structuredContent`), or its `json` and no `structuredContent` (hosts that read only text).
    McpResultText = "PATCHDIFF_MCP_RESULT_TEXT" {
        file: None, choices: ["summary", "json"], default: Some("summary"),
        accepted: "`summary` (the default) or `json`",
    }
    /// A3: the admission gate file the console sets for an agent host's observed process.
    AgentGate = "PATCHDIFF_AGENT_GATE" {
        file: None, choices: [], default: None,
        accepted: "an absolute file path (the console creates it to admit the agent)",
    }
    /// C7: gate 2, the comparative run (baseline vs candidate). Environment only, so a
    /// committed config file cannot open it; read through [`Settings::gate2`].
    Gate2 = "PATCHDIFF_GATE2" {
        file: None,
        choices: ["closed", "open"],
        default: Some("closed"),
        accepted: "`closed` (the default) or `open`",
    }
    /// A1: the Claude Code CLI.
    ClaudeBinary = "PATCHDIFF_CLAUDE_BINARY" {
        file: None, choices: [], default: Some("claude"), accepted: HOST_BINARY_ACCEPTED,
    }
    /// A1: the Codex CLI.
    CodexBinary = "PATCHDIFF_CODEX_BINARY" {
        file: None, choices: [], default: Some("codex"), accepted: HOST_BINARY_ACCEPTED,
    }
    /// A1: the Gemini CLI (`gemini`, whose script needs `node` on PATH).
    GeminiBinary = "PATCHDIFF_GEMINI_BINARY" {
        file: None, choices: [], default: Some("gemini"), accepted: HOST_BINARY_ACCEPTED,
    }
    /// A1: the opencode CLI.
    OpencodeBinary = "PATCHDIFF_OPENCODE_BINARY" {
        file: None, choices: [], default: Some("opencode"), accepted: HOST_BINARY_ACCEPTED,
    }
    /// A1: the Cursor agent CLI.
    CursorBinary = "PATCHDIFF_CURSOR_BINARY" {
        file: None, choices: [], default: Some("cursor-agent"), accepted: HOST_BINARY_ACCEPTED,
    }
    /// The diagnostics filter (`tracing` env-filter syntax).
    Log = "PATCHDIFF_LOG" {
        file: None,
        choices: [],
        default: Some("warn,rmcp=error"),
        accepted: "a tracing EnvFilter directive",
    }
    /// U4, debug builds only: set, F12 panics, so tests can check that the terminal is
    /// restored on panic.
    ConsoleTestPanic = "PATCHDIFF_CONSOLE_TEST_PANIC" {
        file: None,
        choices: [],
        default: None,
        accepted: "any value (debug builds only)",
    }
    /// `PATH` (not ours): where bare executable names are looked up.
    SearchPath = "PATH" {
        file: None,
        choices: [],
        default: None,
        accepted: "a search path",
    }
    /// `NO_COLOR` (not ours, no-color.org): set and non-empty, the console paints no colour
    /// (U4); unset or empty, it does.
    NoColor = "NO_COLOR" {
        file: None,
        choices: [],
        default: None,
        accepted: "any value; set and non-empty turns colour off",
    }
}

/// The prefix of every variable of ours: a child process is started with none of the
/// operator's, only those its launcher passes (P1).
pub const VARIABLE_PREFIX: &str = "PATCHDIFF_";

/// The commit a build was made from, when the build environment gave one (`PATCHDIFF_BUILD_SHA`
/// at compile time; E1 records it in run manifests). Not a setting: it is fixed at build time.
pub const BUILD_SHA: Option<&str> = option_env!("PATCHDIFF_BUILD_SHA");

impl Key {
    /// This key's row in [`SETTINGS`].
    pub const fn spec(self) -> &'static SettingSpec {
        &SETTINGS[self as usize]
    }

    /// Every key, in the order of [`SETTINGS`].
    pub fn all() -> impl Iterator<Item = Key> {
        SETTINGS.iter().map(|s| s.key)
    }

    /// The environment variable.
    pub const fn variable(self) -> &'static str {
        self.spec().variable
    }

    /// The key the TOML config file sets it by, or `None` for environment-only settings.
    pub const fn file_key(self) -> Option<&'static str> {
        self.spec().file_key
    }

    /// The key whose environment variable is `name`, if it is one of ours.
    pub fn from_variable(name: &str) -> Option<Key> {
        SETTINGS.iter().find(|s| s.variable == name).map(|s| s.key)
    }

    /// The key whose config-file key is `name`, if the file may set it.
    pub fn from_file_key(name: &str) -> Option<Key> {
        SETTINGS
            .iter()
            .find(|s| s.file_key == Some(name))
            .map(|s| s.key)
    }
}

/// Where a resolved value came from (P1: environment > file > default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Environment,
    File,
}

/// P1: the configuration of one process, resolved once in `main` (environment over the TOML
/// file over each setting's default) and passed down; nothing after it reads the environment.
///
/// It holds each set value as given (an `OsString`: paths need not be UTF-8) with its
/// [`Source`], plus the platform [`Paths`] with the overrides applied. The meaning of a value
/// is parsed where it is used (`Profile::parse`, `WaymarkConfig::from_settings`, …), so a
/// process refuses only what it uses: the console does not refuse an MCP-only variable it just
/// forwards. Unset means "the default"; [`Settings::get`] says which.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    values: BTreeMap<Key, (OsString, Source)>,
    /// P4: platform directories with `PATCHDIFF_CONFIG_DIR`/`_DATA_DIR`/`_STATE_DIR` applied.
    pub paths: Paths,
}

impl Settings {
    /// Resolves the process's settings: its environment, then the TOML config file
    /// (`PATCHDIFF_CONFIG`, else `<config_dir>/patchdiff.toml`) for what the environment leaves
    /// unset. Called once, from `main`. Errors as [`Settings::resolve`].
    pub fn load() -> Result<Self, ConfigError> {
        Self::resolve(|name| std::env::var_os(name))
    }

    /// The environment alone, no config file: for library entry points that have no `main`
    /// (benches, test probes, the lazy worker singleton).
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// Settings from an arbitrary variable lookup, no config file (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Self {
        let values: BTreeMap<Key, (OsString, Source)> = Key::all()
            .filter_map(|k| lookup(k.variable()).map(|v| (k, (v, Source::Environment))))
            .collect();
        let paths = Paths::from_values(&values);
        Self { values, paths }
    }

    /// [`Settings::load`] over an arbitrary environment. A missing default file is not an
    /// error; a missing or unreadable explicit file, invalid TOML, an unknown key or a value
    /// of the wrong type is, naming `PATCHDIFF_CONFIG`, the file and key, and what is accepted.
    ///
    /// An invalid `PATCHDIFF_GATE2` is refused here, so no process starts with it (C7, P2).
    pub fn resolve(env: impl Fn(&str) -> Option<OsString>) -> Result<Self, ConfigError> {
        let mut settings = Self::from_lookup(&env);
        settings.gate2()?;
        let (path, explicit) = match settings.path(Key::Config) {
            Some(p) => (p, true),
            None => (settings.paths.config_dir.join("patchdiff.toml"), false),
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(_) if !explicit => return Ok(settings),
            Err(e) => {
                return Err(ConfigError::new(
                    Key::Config.variable(),
                    &path.display().to_string(),
                    &format!("a readable TOML file ({e})"),
                ));
            }
        };
        for (key, value) in parse_config_file(&path, &text)? {
            settings
                .values
                .entry(key)
                .or_insert((value.into(), Source::File));
        }
        // The file may set the data and state directories too.
        settings.paths = Paths::from_values(&settings.values);
        Ok(settings)
    }

    /// The value of `key` (`None`: unset, the default applies).
    pub fn get(&self, key: Key) -> Option<&OsStr> {
        self.values.get(&key).map(|(v, _)| v.as_os_str())
    }

    /// Where `key`'s value came from, if set.
    pub fn source(&self, key: Key) -> Option<Source> {
        self.values.get(&key).map(|(_, s)| *s)
    }

    /// The value of `key` as text. A non-UTF-8 value is refused naming the variable (P2).
    pub fn text(&self, key: Key) -> Result<Option<&str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.to_str().map(Some).ok_or_else(|| {
                ConfigError::new(key.variable(), &v.to_string_lossy(), "UTF-8 text")
                    .with_problem("the value is not UTF-8")
            }),
        }
    }

    /// The value of `key` as a path; an empty value counts as unset.
    pub fn path(&self, key: Key) -> Option<PathBuf> {
        self.get(key).filter(|v| !v.is_empty()).map(PathBuf::from)
    }

    /// The value of the environment variable `name` as these settings hold it (for parsers
    /// written over a lookup, e.g. [`crate::waymark::WaymarkConfig::from_lookup`]).
    pub fn lookup(&self, name: &str) -> Option<OsString> {
        Key::from_variable(name).and_then(|k| self.get(k).map(OsStr::to_os_string))
    }

    /// A copy with `key` set (tests, and a console giving a child one value of its own).
    pub fn with(mut self, key: Key, value: impl Into<OsString>) -> Self {
        self.values.insert(key, (value.into(), Source::Environment));
        self.paths = Paths::from_values(&self.values);
        self
    }

    /// C7: whether gate 2 (the comparative run) is open, and where that came from (`None`:
    /// unset, so the default, closed). Only the environment can set it: the config file
    /// refuses the key. Errors: any value but `closed` or `open`, naming `PATCHDIFF_GATE2`, the
    /// value and the accepted values.
    pub fn gate2(&self) -> Result<Sourced<Gate2>, ConfigError> {
        let value = match self.text(Key::Gate2)? {
            None => Gate2::Closed,
            Some(v) => Gate2::parse(v)?,
        };
        Ok(Sourced {
            value,
            source: self.source(Key::Gate2),
        })
    }

    /// `(variable, value)` pairs for a child process, for the keys given that are set: how the
    /// console hands its resolved configuration to the processes it launches (P1, P3).
    pub fn child_env(&self, keys: &[Key]) -> Vec<(String, String)> {
        keys.iter()
            .filter_map(|k| {
                self.get(*k)
                    .map(|v| (k.variable().to_owned(), v.to_string_lossy().into_owned()))
            })
            .collect()
    }
}

/// The MCP tool profile (M2–M4), from `PATCHDIFF_MCP_PROFILE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// M2: exactly the six observed-edit tools; the Waymark worker runs.
    Observed,
    /// M3: observed tools plus init, export, audit and worker status (operator only).
    Full,
    /// M4: the editing tools without the Waymark worker (it never starts one).
    Workspace,
}

impl Profile {
    pub const VARIABLE: &'static str = Key::McpProfile.variable();

    /// Parses `observed`, `full` or `workspace`.
    pub fn parse(value: &str) -> Result<Self, ConfigError> {
        match value {
            "observed" => Ok(Self::Observed),
            "full" => Ok(Self::Full),
            "workspace" => Ok(Self::Workspace),
            other => Err(ConfigError::new(
                Self::VARIABLE,
                other,
                Key::McpProfile.spec().accepted,
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observed => "observed",
            Self::Full => "full",
            Self::Workspace => "workspace",
        }
    }

    /// Whether this profile runs the Waymark worker (W13: workspace never does).
    pub fn uses_worker(self) -> bool {
        !matches!(self, Self::Workspace)
    }
}

/// A typed setting and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    /// `None`: unset, the default applies.
    pub source: Option<Source>,
}

/// C7: gate 2, the comparative run (baseline vs candidate), from `PATCHDIFF_GATE2`. This
/// configuration runs one owner-initiated canary, so it is closed unless the operator's
/// environment opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate2 {
    /// The default: no comparative run.
    Closed,
    /// A comparative run may be started.
    Open,
}

impl Gate2 {
    /// Parses `closed` or `open` (exactly; P2 names the variable, value and accepted values).
    pub fn parse(value: &str) -> Result<Self, ConfigError> {
        match value {
            "closed" => Ok(Self::Closed),
            "open" => Ok(Self::Open),
            other => Err(ConfigError::new(
                Key::Gate2.variable(),
                other,
                Key::Gate2.spec().accepted,
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
        }
    }
}

/// Reads `PATCHDIFF_STRICT_OBSERVATION_MODE`: `1` on, `0` or unset off (P1, K2).
pub fn strict_observation_from(value: Option<&str>) -> Result<bool, ConfigError> {
    match value {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(ConfigError::new(
            Key::StrictObservationMode.variable(),
            other,
            Key::StrictObservationMode.spec().accepted,
        )),
    }
}

/// Parses `PATCHDIFF_DATABASE_URL` (P1): `sqlite://` followed by an absolute path. A `?query`,
/// a `#fragment`, a `%` escape or a `..` component would be taken literally as part of the file
/// name (or climb out of the directory the operator named), so each is refused, not guessed at.
pub fn parse_database_url(value: &str) -> Result<PathBuf, ConfigError> {
    let accepted = Key::DatabaseUrl.spec().accepted;
    let refused = |why: &str| {
        ConfigError::new(
            Key::DatabaseUrl.variable(),
            value,
            &format!("{accepted}; this value {why}"),
        )
    };
    let Some(path) = value.strip_prefix("sqlite://") else {
        return Err(refused("does not start with sqlite://"));
    };
    if !Path::new(path).is_absolute() {
        return Err(refused("does not name an absolute path"));
    }
    if let Some(c) = path.chars().find(|c| matches!(c, '?' | '#' | '%')) {
        return Err(refused(&format!(
            "holds `{c}`, which a URL would read as a query, fragment or escape"
        )));
    }
    if Path::new(path)
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(refused("holds a `..` component"));
    }
    if path.chars().any(char::is_control) {
        return Err(refused("holds a control character"));
    }
    Ok(PathBuf::from(path))
}

/// Platform paths (P4), each overridable: `PATCHDIFF_CONFIG_DIR`, `PATCHDIFF_DATA_DIR`,
/// `PATCHDIFF_STATE_DIR`.
#[derive(Debug, Clone, Serialize)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Paths {
    /// Resolves the platform directories (XDG on Linux) with the overrides applied.
    fn from_values(values: &BTreeMap<Key, (OsString, Source)>) -> Self {
        let dirs = directories::ProjectDirs::from("dev", "patchdiff", "patchdiff");
        let fallback = std::env::temp_dir().join("patchdiff");
        let pick = |key: Key, platform: Option<&Path>| {
            values
                .get(&key)
                .map(|(v, _)| PathBuf::from(v))
                .or_else(|| platform.map(Path::to_path_buf))
                .unwrap_or_else(|| fallback.clone())
        };
        Self {
            config_dir: pick(Key::ConfigDir, dirs.as_ref().map(|d| d.config_dir())),
            data_dir: pick(Key::DataDir, dirs.as_ref().map(|d| d.data_dir())),
            state_dir: pick(
                Key::StateDir,
                dirs.as_ref()
                    .and_then(|d| d.state_dir())
                    .or(dirs.as_ref().map(|d| d.data_dir())),
            ),
        }
    }

    /// The default embedded database file (P1).
    pub fn default_database(&self) -> PathBuf {
        self.data_dir.join("patchdiff.sqlite")
    }

    /// Where canary runs keep their evidence directories.
    pub fn runs_root(&self) -> PathBuf {
        self.data_dir.join("runs")
    }

    /// Where Waymark generations keep their owned working roots.
    pub fn worker_root(&self) -> PathBuf {
        self.state_dir.join("waymark")
    }
}

/// The keys the TOML config file may set, comma-separated (for errors).
fn file_keys_text() -> String {
    SETTINGS
        .iter()
        .filter_map(|s| s.file_key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The on/off keys, the only ones a TOML boolean may set, comma-separated (for errors).
fn switch_keys_text() -> String {
    SETTINGS
        .iter()
        .filter(|s| s.is_switch())
        .filter_map(|s| s.file_key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses the config file's text into `(key, value)` pairs, values as the environment would
/// spell them (`true` → `1`). Errors name `PATCHDIFF_CONFIG`, the file and key, and what is
/// accepted.
fn parse_config_file(path: &Path, text: &str) -> Result<Vec<(Key, String)>, ConfigError> {
    let shown = path.display().to_string();
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::new(
            Key::Config.variable(),
            &shown,
            &format!("valid TOML ({})", e.message()),
        )
    })?;
    let mut out = Vec::new();
    for (name, value) in table {
        let Some(key) = Key::from_file_key(&name) else {
            let refused = ConfigError::new(
                Key::Config.variable(),
                &format!("{shown}: key `{name}`"),
                &file_keys_text(),
            );
            // An environment-only setting spelt as a file key: say so, since that is on
            // purpose (a committed file must not open gate 2, C7), not a typo.
            let variable = format!("{VARIABLE_PREFIX}{}", name.to_ascii_uppercase());
            return Err(match Key::from_variable(&variable) {
                Some(k) => refused.with_problem(format!(
                    "{} is environment-only: set it in the environment, not the config file",
                    k.variable()
                )),
                None => refused,
            });
        };
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) if key.spec().is_switch() => {
                if b { "1" } else { "0" }.to_owned()
            }
            other => {
                return Err(ConfigError::new(
                    Key::Config.variable(),
                    &format!("{shown}: {name} = {other}"),
                    &format!(
                        "a string or number (true/false only for {})",
                        switch_keys_text()
                    ),
                ));
            }
        };
        out.push((key, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_rejects_unknown_names_listing_accepted_ones() {
        let err = Profile::parse("admin").unwrap_err();
        assert_eq!(err.variable, Key::McpProfile.variable());
        assert!(err.to_string().contains("`observed`, `full`, `workspace`"));
    }

    #[test]
    fn database_url_requires_sqlite_scheme_and_absolute_path() {
        assert_eq!(
            parse_database_url("sqlite:///var/pd.sqlite").unwrap(),
            PathBuf::from("/var/pd.sqlite")
        );
        assert!(parse_database_url("sqlite://relative.sqlite").is_err());
        assert!(parse_database_url("postgres://localhost/pd").is_err());
        assert!(parse_database_url("sqlite:///tmp/pd.sqlite?mode=ro").is_err());
    }

    #[test]
    fn database_url_refuses_fragments_escapes_and_parent_components() {
        for url in [
            "sqlite:///tmp/pd.sqlite#frag",
            "sqlite:///tmp/p%20d.sqlite",
            "sqlite:///tmp/../etc/pd.sqlite",
            "sqlite:///tmp/x/..",
            "sqlite:///tmp/pd\n.sqlite",
        ] {
            let err = parse_database_url(url).expect_err(url);
            assert_eq!(err.variable, Key::DatabaseUrl.variable(), "{url}");
            assert!(err.to_string().contains("this value"), "{err}");
        }
        assert!(parse_database_url("sqlite:///tmp/a..b/pd.sqlite").is_ok());
    }

    #[test]
    fn strict_mode_accepts_only_zero_and_one() {
        assert_eq!(strict_observation_from(None), Ok(false));
        assert_eq!(strict_observation_from(Some("1")), Ok(true));
        assert!(strict_observation_from(Some("yes")).is_err());
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: BTreeMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn config_file_values_yield_to_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(
            &file,
            "waymark_mode = \"oneshot\"\nmcp_profile = \"full\"\nwaymark_active_timeout_ms = 5000\n",
        )
        .unwrap();
        let settings = Settings::resolve(env(&[
            (Key::Config.variable(), file.to_str().unwrap()),
            (Key::McpProfile.variable(), "workspace"),
        ]))
        .unwrap();
        assert_eq!(settings.text(Key::McpProfile).unwrap(), Some("workspace"));
        assert_eq!(settings.source(Key::McpProfile), Some(Source::Environment));
        assert_eq!(settings.text(Key::WaymarkMode).unwrap(), Some("oneshot"));
        assert_eq!(settings.source(Key::WaymarkMode), Some(Source::File));
        assert_eq!(
            settings.lookup(Key::WaymarkActiveTimeoutMs.variable()),
            Some("5000".into())
        );
        assert_eq!(settings.get(Key::NodeBinary), None);
    }

    #[test]
    fn config_file_sets_the_data_and_state_directories() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "data_dir = \"/srv/pd-data\"\n").unwrap();
        let settings = Settings::resolve(env(&[
            (Key::Config.variable(), file.to_str().unwrap()),
            (Key::StateDir.variable(), "/srv/pd-state"),
        ]))
        .unwrap();
        assert_eq!(settings.paths.data_dir, PathBuf::from("/srv/pd-data"));
        assert_eq!(settings.paths.state_dir, PathBuf::from("/srv/pd-state"));
    }

    #[test]
    fn a_missing_default_file_is_no_error_but_a_missing_explicit_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().to_str().unwrap();
        assert!(Settings::resolve(env(&[(Key::ConfigDir.variable(), config_dir)])).is_ok());
        let missing = dir.path().join("absent.toml");
        let err = Settings::resolve(env(&[(Key::Config.variable(), missing.to_str().unwrap())]))
            .unwrap_err();
        assert_eq!(err.variable, Key::Config.variable());
        assert_eq!(err.value, missing.display().to_string());
        assert!(err.accepted.starts_with("a readable TOML file"), "{err}");
    }

    #[test]
    fn config_file_takes_booleans_only_for_switches() {
        let pairs = parse_config_file(
            Path::new("/x.toml"),
            "strict_observation_mode = true\nperf_memory = false\n",
        )
        .unwrap();
        assert_eq!(
            pairs,
            vec![
                (Key::PerfMemory, "0".to_owned()),
                (Key::StrictObservationMode, "1".to_owned()),
            ]
        );
        let err = parse_config_file(Path::new("/x.toml"), "waymark_active_timeout_ms = true")
            .unwrap_err();
        assert!(
            err.to_string().contains("waymark_active_timeout_ms = true"),
            "{err}"
        );
    }

    #[test]
    fn config_file_rejects_unknown_keys() {
        let err = parse_config_file(Path::new("/x.toml"), "colour = \"red\"").unwrap_err();
        assert!(err.to_string().contains("key `colour`"), "{err}");
        // An environment-only setting is not a file key either.
        let err = parse_config_file(Path::new("/x.toml"), "agent_gate = \"/g\"").unwrap_err();
        assert!(err.to_string().contains("key `agent_gate`"), "{err}");
    }

    #[test]
    fn each_row_of_the_settings_table_is_its_keys_row_and_names_agree() {
        for (i, spec) in SETTINGS.iter().enumerate() {
            assert_eq!(spec.key as usize, i, "{spec:?}");
            assert_eq!(Key::from_variable(spec.variable), Some(spec.key));
            if let Some(name) = spec.file_key {
                assert_eq!(Key::from_file_key(name), Some(spec.key));
                assert_eq!(
                    spec.variable,
                    format!("{VARIABLE_PREFIX}{}", name.to_ascii_uppercase())
                );
            }
            if let Some(default) = spec.default
                && !spec.choices.is_empty()
            {
                assert!(spec.choices.contains(&default), "{spec:?}");
            }
            for choice in spec.choices {
                assert!(spec.accepted.contains(choice), "{spec:?}: {choice}");
            }
        }
        let switches: Vec<&str> = SETTINGS
            .iter()
            .filter(|s| s.is_switch())
            .filter_map(|s| s.file_key)
            .collect();
        assert_eq!(switches, ["strict_observation_mode", "perf_memory"]);
    }

    #[test]
    fn the_parsers_apply_the_tables_defaults_when_unset() {
        let default = |k: Key| k.spec().default.expect("a literal default");
        assert_eq!(
            strict_observation_from(None),
            strict_observation_from(Some(default(Key::StrictObservationMode)))
        );
        assert_eq!(
            Profile::parse(default(Key::McpProfile)),
            Ok(Profile::Observed)
        );
        assert_eq!(
            Gate2::parse(default(Key::Gate2)),
            Ok(Settings::from_lookup(|_| None).gate2().unwrap().value)
        );
    }

    #[test]
    /// C7: gate 2 stays closed unless the environment opens it.
    fn gate2_is_closed_unless_the_environment_opens_it() {
        let closed = Settings::resolve(env(&[])).unwrap().gate2().unwrap();
        assert_eq!(closed.value, Gate2::Closed);
        assert_eq!(closed.source, None);
        let open = Settings::resolve(env(&[(Key::Gate2.variable(), "open")]))
            .unwrap()
            .gate2()
            .unwrap();
        assert_eq!(
            open,
            Sourced {
                value: Gate2::Open,
                source: Some(Source::Environment)
            }
        );
    }

    #[test]
    /// C7, P2: only `closed` and `open`; a near miss is refused, not taken for either.
    fn gate2_refuses_any_other_value_at_startup_naming_variable_value_and_accepted_values() {
        for bad in ["Open", "1", "yes", "", " open"] {
            let err = Settings::resolve(env(&[(Key::Gate2.variable(), bad)])).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "invalid PATCHDIFF_GATE2={bad:?}: accepted values are `closed` (the \
                     default) or `open`"
                )
            );
        }
    }

    #[test]
    /// C7: a committed config file cannot open gate 2: the key is refused.
    fn a_config_file_cannot_open_gate2_it_is_refused_as_environment_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "gate2 = \"open\"\n").unwrap();
        let err = Settings::resolve(env(&[(Key::Config.variable(), file.to_str().unwrap())]))
            .unwrap_err();
        assert_eq!(err.variable, Key::Config.variable());
        assert_eq!(err.value, format!("{}: key `gate2`", file.display()));
        assert!(
            err.to_string().ends_with(
                "; PATCHDIFF_GATE2 is environment-only: set it in the environment, \
                           not the config file"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_non_utf8_value_is_refused_naming_its_variable() {
        use std::os::unix::ffi::OsStringExt;
        let settings = Settings::from_lookup(|k| {
            (k == Key::McpProfile.variable()).then(|| OsString::from_vec(vec![0x66, 0xff]))
        });
        let err = settings.text(Key::McpProfile).unwrap_err();
        assert_eq!(err.variable, Key::McpProfile.variable());
        assert_eq!(err.accepted, "UTF-8 text");
    }

    #[test]
    fn child_env_forwards_only_the_keys_asked_for_that_are_set() {
        let settings = Settings::from_lookup(env(&[
            (Key::NodeBinary.variable(), "/opt/node"),
            (Key::McpProfile.variable(), "full"),
        ]));
        assert_eq!(
            settings.child_env(&[Key::NodeBinary, Key::WaymarkDir]),
            vec![(
                Key::NodeBinary.variable().to_owned(),
                "/opt/node".to_owned()
            )]
        );
    }
}

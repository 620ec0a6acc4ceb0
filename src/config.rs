//! Startup configuration (SPEC P1–P4): every `PATCHDIFF_*` variable, the optional TOML config
//! file, and platform paths, resolved once into [`Settings`] in `main` and passed down.
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

/// One setting [`Settings`] holds: its TOML key (when the config file may set it) and its
/// environment variable. A misspelt setting is a compile error, not a silent `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    WaymarkMode,
    NodeBinary,
    WaymarkWorkers,
    WaymarkActiveTimeoutMs,
    /// The store's URL (P1). The PostgreSQL store reads this one key (`database_url`).
    DatabaseUrl,
    McpProfile,
    StrictObservationMode,
    PerfEvents,
    PerfMemory,
    EvidenceWireLog,
    WorkerStderrLog,
    WaymarkDir,
    WaymarkWorkRoot,
    DataDir,
    StateDir,
    McpHttp,
    // Environment only: never read from the config file.
    /// The config file itself.
    Config,
    ConfigDir,
    McpHttpTokenFile,
    AgentGate,
    ClaudeBinary,
    CodexBinary,
    CursorBinary,
    /// The diagnostics filter (`tracing` env-filter syntax).
    Log,
    /// `PATH` (not ours): where bare executable names are looked up.
    SearchPath,
    /// `NO_COLOR` (not ours, no-color.org): set and non-empty, the console paints no colour
    /// (U4); unset or empty, it does.
    NoColor,
}

impl Key {
    /// Every key, in the order the config file documents them.
    pub const ALL: [Key; 26] = [
        Key::WaymarkMode,
        Key::NodeBinary,
        Key::WaymarkWorkers,
        Key::WaymarkActiveTimeoutMs,
        Key::DatabaseUrl,
        Key::McpProfile,
        Key::StrictObservationMode,
        Key::PerfEvents,
        Key::PerfMemory,
        Key::EvidenceWireLog,
        Key::WorkerStderrLog,
        Key::WaymarkDir,
        Key::WaymarkWorkRoot,
        Key::DataDir,
        Key::StateDir,
        Key::McpHttp,
        Key::Config,
        Key::ConfigDir,
        Key::McpHttpTokenFile,
        Key::AgentGate,
        Key::ClaudeBinary,
        Key::CodexBinary,
        Key::CursorBinary,
        Key::Log,
        Key::SearchPath,
        Key::NoColor,
    ];

    /// The environment variable (`PATCHDIFF_` + the upper-cased key, or `PATH`, `NO_COLOR`).
    pub const fn variable(self) -> &'static str {
        match self {
            Key::WaymarkMode => "PATCHDIFF_WAYMARK_MODE",
            Key::NodeBinary => "PATCHDIFF_NODE_BINARY",
            Key::WaymarkWorkers => "PATCHDIFF_WAYMARK_WORKERS",
            Key::WaymarkActiveTimeoutMs => "PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS",
            Key::DatabaseUrl => "PATCHDIFF_DATABASE_URL",
            Key::McpProfile => "PATCHDIFF_MCP_PROFILE",
            Key::StrictObservationMode => "PATCHDIFF_STRICT_OBSERVATION_MODE",
            Key::PerfEvents => "PATCHDIFF_PERF_EVENTS",
            Key::PerfMemory => "PATCHDIFF_PERF_MEMORY",
            Key::EvidenceWireLog => "PATCHDIFF_EVIDENCE_WIRE_LOG",
            Key::WorkerStderrLog => "PATCHDIFF_WORKER_STDERR_LOG",
            Key::WaymarkDir => "PATCHDIFF_WAYMARK_DIR",
            Key::WaymarkWorkRoot => "PATCHDIFF_WAYMARK_WORK_ROOT",
            Key::DataDir => "PATCHDIFF_DATA_DIR",
            Key::StateDir => "PATCHDIFF_STATE_DIR",
            Key::McpHttp => "PATCHDIFF_MCP_HTTP",
            Key::Config => "PATCHDIFF_CONFIG",
            Key::ConfigDir => "PATCHDIFF_CONFIG_DIR",
            Key::McpHttpTokenFile => "PATCHDIFF_MCP_HTTP_TOKEN_FILE",
            Key::AgentGate => "PATCHDIFF_AGENT_GATE",
            Key::ClaudeBinary => "PATCHDIFF_CLAUDE_BINARY",
            Key::CodexBinary => "PATCHDIFF_CODEX_BINARY",
            Key::CursorBinary => "PATCHDIFF_CURSOR_BINARY",
            Key::Log => "PATCHDIFF_LOG",
            Key::SearchPath => "PATH",
            Key::NoColor => "NO_COLOR",
        }
    }

    /// The key the TOML config file sets it by, or `None` for environment-only settings.
    pub const fn file_key(self) -> Option<&'static str> {
        Some(match self {
            Key::WaymarkMode => "waymark_mode",
            Key::NodeBinary => "node_binary",
            Key::WaymarkWorkers => "waymark_workers",
            Key::WaymarkActiveTimeoutMs => "waymark_active_timeout_ms",
            Key::DatabaseUrl => "database_url",
            Key::McpProfile => "mcp_profile",
            Key::StrictObservationMode => "strict_observation_mode",
            Key::PerfEvents => "perf_events",
            Key::PerfMemory => "perf_memory",
            Key::EvidenceWireLog => "evidence_wire_log",
            Key::WorkerStderrLog => "worker_stderr_log",
            Key::WaymarkDir => "waymark_dir",
            Key::WaymarkWorkRoot => "waymark_work_root",
            Key::DataDir => "data_dir",
            Key::StateDir => "state_dir",
            Key::McpHttp => "mcp_http",
            _ => return None,
        })
    }

    /// The key whose environment variable is `name`, if it is one of ours.
    pub fn from_variable(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.variable() == name)
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
        let values: BTreeMap<Key, (OsString, Source)> = Key::ALL
            .into_iter()
            .filter_map(|k| lookup(k.variable()).map(|v| (k, (v, Source::Environment))))
            .collect();
        let paths = Paths::from_values(&values);
        Self { values, paths }
    }

    /// [`Settings::load`] over an arbitrary environment. A missing default file is not an
    /// error; a missing or unreadable explicit file, invalid TOML, an unknown key or a value
    /// of the wrong type is, naming `PATCHDIFF_CONFIG`, the file and key, and what is accepted.
    pub fn resolve(env: impl Fn(&str) -> Option<OsString>) -> Result<Self, ConfigError> {
        let mut settings = Self::from_lookup(&env);
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
                "`observed`, `full`, `workspace`",
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

/// Reads `PATCHDIFF_STRICT_OBSERVATION_MODE`: `1` on, `0` or unset off (P1, K2).
pub fn strict_observation_from(value: Option<&str>) -> Result<bool, ConfigError> {
    match value {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(ConfigError::new(
            "PATCHDIFF_STRICT_OBSERVATION_MODE",
            other,
            "`1` (on) or `0` (off, the default)",
        )),
    }
}

/// Parses `PATCHDIFF_DATABASE_URL` (P1): `sqlite://` followed by an absolute path. A `?query`,
/// a `#fragment`, a `%` escape or a `..` component would be taken literally as part of the file
/// name (or climb out of the directory the operator named), so each is refused, not guessed at.
pub fn parse_database_url(value: &str) -> Result<PathBuf, ConfigError> {
    let accepted = "`sqlite://` followed by an absolute path without `?`, `#`, `%` or `..` \
                    components, e.g. sqlite:///var/lib/patchdiff/pd.sqlite (or \
                    postgres://USER@HOST:PORT/DATABASE for PostgreSQL)";
    let refused = |why: &str| {
        ConfigError::new(
            "PATCHDIFF_DATABASE_URL",
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

/// Keys the TOML config file may set; each maps to the `PATCHDIFF_*` variable of the same name
/// upper-cased (e.g. `waymark_mode` → `PATCHDIFF_WAYMARK_MODE`). The same list as
/// [`Key::file_key`] (a unit test holds them equal).
pub const FILE_KEYS: &[&str] = &[
    "waymark_mode",
    "node_binary",
    "waymark_workers",
    "waymark_active_timeout_ms",
    "database_url",
    "mcp_profile",
    "strict_observation_mode",
    "perf_events",
    "perf_memory",
    "evidence_wire_log",
    "worker_stderr_log",
    "waymark_dir",
    "waymark_work_root",
    "data_dir",
    "state_dir",
    "mcp_http",
];

/// The on/off keys, the only ones a TOML boolean may set (`true` → `1`, `false` → `0`): for any
/// other key a boolean would become a number (`waymark_active_timeout_ms = true` a 1 ms timeout).
pub const SWITCH_KEYS: &[&str] = &["strict_observation_mode", "perf_memory"];

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
        let Some(key) = Key::ALL
            .into_iter()
            .find(|k| k.file_key() == Some(name.as_str()))
        else {
            return Err(ConfigError::new(
                Key::Config.variable(),
                &format!("{shown}: key `{name}`"),
                &FILE_KEYS.join(", "),
            ));
        };
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) if SWITCH_KEYS.contains(&name.as_str()) => {
                if b { "1" } else { "0" }.to_owned()
            }
            other => {
                return Err(ConfigError::new(
                    Key::Config.variable(),
                    &format!("{shown}: {name} = {other}"),
                    &format!(
                        "a string or number (true/false only for {})",
                        SWITCH_KEYS.join(", ")
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
        assert_eq!(err.variable, "PATCHDIFF_MCP_PROFILE");
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
            assert_eq!(err.variable, "PATCHDIFF_DATABASE_URL", "{url}");
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
            ("PATCHDIFF_CONFIG", file.to_str().unwrap()),
            ("PATCHDIFF_MCP_PROFILE", "workspace"),
        ]))
        .unwrap();
        assert_eq!(settings.text(Key::McpProfile).unwrap(), Some("workspace"));
        assert_eq!(settings.source(Key::McpProfile), Some(Source::Environment));
        assert_eq!(settings.text(Key::WaymarkMode).unwrap(), Some("oneshot"));
        assert_eq!(settings.source(Key::WaymarkMode), Some(Source::File));
        assert_eq!(
            settings.lookup("PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS"),
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
            ("PATCHDIFF_CONFIG", file.to_str().unwrap()),
            ("PATCHDIFF_STATE_DIR", "/srv/pd-state"),
        ]))
        .unwrap();
        assert_eq!(settings.paths.data_dir, PathBuf::from("/srv/pd-data"));
        assert_eq!(settings.paths.state_dir, PathBuf::from("/srv/pd-state"));
    }

    #[test]
    fn a_missing_default_file_is_no_error_but_a_missing_explicit_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().to_str().unwrap();
        assert!(Settings::resolve(env(&[("PATCHDIFF_CONFIG_DIR", config_dir)])).is_ok());
        let missing = dir.path().join("absent.toml");
        let err =
            Settings::resolve(env(&[("PATCHDIFF_CONFIG", missing.to_str().unwrap())])).unwrap_err();
        assert_eq!(err.variable, "PATCHDIFF_CONFIG");
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
    fn file_keys_are_exactly_the_keys_with_a_file_spelling() {
        let from_keys: Vec<&str> = Key::ALL.into_iter().filter_map(Key::file_key).collect();
        assert_eq!(from_keys, FILE_KEYS);
        for key in Key::ALL {
            assert_eq!(Key::from_variable(key.variable()), Some(key));
            if let Some(name) = key.file_key() {
                assert_eq!(
                    key.variable(),
                    format!("PATCHDIFF_{}", name.to_ascii_uppercase())
                );
            }
        }
    }

    #[test]
    fn a_non_utf8_value_is_refused_naming_its_variable() {
        use std::os::unix::ffi::OsStringExt;
        let settings = Settings::from_lookup(|k| {
            (k == "PATCHDIFF_MCP_PROFILE").then(|| OsString::from_vec(vec![0x66, 0xff]))
        });
        let err = settings.text(Key::McpProfile).unwrap_err();
        assert_eq!(err.variable, "PATCHDIFF_MCP_PROFILE");
        assert_eq!(err.accepted, "UTF-8 text");
    }

    #[test]
    fn child_env_forwards_only_the_keys_asked_for_that_are_set() {
        let settings = Settings::from_lookup(env(&[
            ("PATCHDIFF_NODE_BINARY", "/opt/node"),
            ("PATCHDIFF_MCP_PROFILE", "full"),
        ]));
        assert_eq!(
            settings.child_env(&[Key::NodeBinary, Key::WaymarkDir]),
            vec![("PATCHDIFF_NODE_BINARY".to_owned(), "/opt/node".to_owned())]
        );
    }
}

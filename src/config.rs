//! Startup configuration (SPEC P1–P4): every `PATCHDIFF_*` variable, the optional TOML config
//! file, and platform paths. Configuration never comes from an MCP argument.
//!
//! An invalid value never starts a half-configured process (P2): [`ConfigError`] names the
//! variable, the value and what is accepted, and the binary exits non-zero.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// P2: an invalid configuration value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {variable}={value:?}: accepted values are {accepted}")]
pub struct ConfigError {
    pub variable: String,
    pub value: String,
    pub accepted: String,
}

impl ConfigError {
    pub fn new(variable: &str, value: &str, accepted: &str) -> Self {
        Self {
            variable: variable.to_owned(),
            value: value.to_owned(),
            accepted: accepted.to_owned(),
        }
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
    pub const VARIABLE: &'static str = "PATCHDIFF_MCP_PROFILE";

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
    pub fn resolve() -> Self {
        let dirs = directories::ProjectDirs::from("dev", "patchdiff", "patchdiff");
        let fallback = std::env::temp_dir().join("patchdiff");
        let pick = |var: &str, platform: Option<&Path>| {
            std::env::var_os(var)
                .map(PathBuf::from)
                .or_else(|| platform.map(Path::to_path_buf))
                .unwrap_or_else(|| fallback.clone())
        };
        Self {
            config_dir: pick(
                "PATCHDIFF_CONFIG_DIR",
                dirs.as_ref().map(|d| d.config_dir()),
            ),
            data_dir: pick("PATCHDIFF_DATA_DIR", dirs.as_ref().map(|d| d.data_dir())),
            state_dir: pick(
                "PATCHDIFF_STATE_DIR",
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
/// upper-cased (e.g. `waymark_mode` → `PATCHDIFF_WAYMARK_MODE`).
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

/// Reads the optional TOML config file (`PATCHDIFF_CONFIG`, else `<config_dir>/patchdiff.toml`)
/// and returns the `(variable, value)` pairs it sets that the environment does not (P1: the
/// environment wins). A missing default file is not an error; a missing explicit file, a parse
/// error, an unknown key or a non-string/number value is.
pub fn config_file_overlay(paths: &Paths) -> Result<Vec<(String, String)>, ConfigError> {
    let (path, explicit) = match std::env::var_os("PATCHDIFF_CONFIG") {
        Some(p) => (PathBuf::from(p), true),
        None => (paths.config_dir.join("patchdiff.toml"), false),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) if !explicit => return Ok(Vec::new()),
        Err(e) => {
            return Err(ConfigError::new(
                "PATCHDIFF_CONFIG",
                &path.display().to_string(),
                &format!("a readable TOML file ({e})"),
            ));
        }
    };
    parse_config_file(&path, &text, |var| std::env::var_os(var).is_some())
}

fn parse_config_file(
    path: &Path,
    text: &str,
    env_has: impl Fn(&str) -> bool,
) -> Result<Vec<(String, String)>, ConfigError> {
    let shown = path.display().to_string();
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::new(
            "PATCHDIFF_CONFIG",
            &shown,
            &format!("valid TOML ({})", e.message()),
        )
    })?;
    let mut out = Vec::new();
    for (key, value) in table {
        if !FILE_KEYS.contains(&key.as_str()) {
            return Err(ConfigError::new(
                "PATCHDIFF_CONFIG",
                &format!("{shown}: key `{key}`"),
                &FILE_KEYS.join(", "),
            ));
        }
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) if SWITCH_KEYS.contains(&key.as_str()) => {
                if b { "1" } else { "0" }.to_owned()
            }
            other => {
                return Err(ConfigError::new(
                    "PATCHDIFF_CONFIG",
                    &format!("{shown}: {key} = {other}"),
                    &format!(
                        "a string or number (true/false only for {})",
                        SWITCH_KEYS.join(", ")
                    ),
                ));
            }
        };
        let variable = format!("PATCHDIFF_{}", key.to_ascii_uppercase());
        if !env_has(&variable) {
            out.push((variable, value));
        }
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

    #[test]
    fn config_file_values_yield_to_the_environment() {
        let text = "waymark_mode = \"oneshot\"\nmcp_profile = \"full\"\nwaymark_active_timeout_ms = 5000\n";
        let pairs = parse_config_file(Path::new("/x.toml"), text, |v| v == "PATCHDIFF_MCP_PROFILE")
            .unwrap();
        assert_eq!(
            pairs,
            vec![
                (
                    "PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS".to_owned(),
                    "5000".to_owned()
                ),
                ("PATCHDIFF_WAYMARK_MODE".to_owned(), "oneshot".to_owned()),
            ]
        );
    }

    #[test]
    fn config_file_takes_booleans_only_for_switches() {
        let pairs = parse_config_file(
            Path::new("/x.toml"),
            "strict_observation_mode = true\nperf_memory = false\n",
            |_| false,
        )
        .unwrap();
        assert_eq!(
            pairs,
            vec![
                ("PATCHDIFF_PERF_MEMORY".to_owned(), "0".to_owned()),
                (
                    "PATCHDIFF_STRICT_OBSERVATION_MODE".to_owned(),
                    "1".to_owned()
                ),
            ]
        );
        let err = parse_config_file(
            Path::new("/x.toml"),
            "waymark_active_timeout_ms = true",
            |_| false,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("waymark_active_timeout_ms = true"),
            "{err}"
        );
    }

    #[test]
    fn config_file_rejects_unknown_keys() {
        let err =
            parse_config_file(Path::new("/x.toml"), "colour = \"red\"", |_| false).unwrap_err();
        assert!(err.to_string().contains("key `colour`"), "{err}");
    }
}

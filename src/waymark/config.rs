//! Startup configuration of the Waymark worker (SPEC P1, P2, W1, W6, W9, W10). Read once from the
//! process's resolved [`Settings`]; an invalid value refuses startup with an error naming the variable, the value and
//! the accepted values.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::clock::Clock;

/// W6: default active discovery timeout (15 s).
pub const DEFAULT_ACTIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// Resident worker script inside the script dir.
pub const RESIDENT_SCRIPT: &str = "waymark_worker.mjs";
/// One-shot runner script inside the script dir.
pub const ONESHOT_SCRIPT: &str = "waymark_oneshot.mjs";

/// W1: how discoveries are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaymarkMode {
    /// One Node child kept alive across discoveries (default).
    Resident,
    /// A Node child per discovery.
    Oneshot,
}

impl WaymarkMode {
    /// `resident` or `oneshot`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resident => "resident",
            Self::Oneshot => "oneshot",
        }
    }
}

impl fmt::Display for WaymarkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use crate::config::ConfigError;
use crate::config::{Key, Settings};

/// P2: [`ConfigError`] for `variable`, saying what is wrong with `value`.
fn invalid(variable: &str, value: &str, accepted: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::new(variable, value, accepted).with_problem(problem)
}

/// Ceilings and limits, each with its SPEC default. Tests lower them; the product uses
/// [`WaymarkLimits::default`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaymarkLimits {
    /// W6: ordinary admission ceiling (2 s).
    pub admission: Duration,
    /// W6: startup readiness ceiling (7 s).
    pub readiness: Duration,
    /// W6: the outer allowance is the active timeout plus this (13 s).
    pub outer_extra: Duration,
    /// W7: how long a lock-holding caller waits for an already-ready worker (250 ms).
    pub lock_wait: Duration,
    /// W5: waiting requests beyond the active one (8).
    pub max_waiting: usize,
    /// W9: RSS limit in bytes (1 GiB).
    pub rss_limit_bytes: u64,
    /// W9: RSS sampling period (100 ms).
    pub rss_interval: Duration,
    /// W9: Node `--max-old-space-size` in MiB (768).
    pub max_old_space_mib: u32,
    /// W10: requests per generation before graceful retirement (10,000).
    pub max_requests: u64,
    /// W10: generation age before graceful retirement (60 min).
    pub max_age: Duration,
    /// W10: launches allowed in any rolling window (3).
    pub max_launches: usize,
    /// W10: the rolling launch window (1 min).
    pub launch_window: Duration,
    /// W3: child stderr captured per generation, bytes (64 KiB).
    pub stderr_cap_bytes: usize,
    /// W11: how long a graceful retirement waits for the child to exit after its stdin closes
    /// before killing its process group (2 s; part of the bounded cleanup in the outer allowance).
    pub graceful_exit: Duration,
}

impl Default for WaymarkLimits {
    fn default() -> Self {
        Self::SPEC
    }
}

impl WaymarkLimits {
    /// The SPEC figures (W3, W5–W7, W9–W11): the one source the supervisor and the console's
    /// display share.
    pub const SPEC: Self = Self {
        admission: Duration::from_secs(2),
        readiness: Duration::from_secs(7),
        outer_extra: Duration::from_secs(13),
        lock_wait: Duration::from_millis(250),
        max_waiting: 8,
        rss_limit_bytes: 1024 * 1024 * 1024,
        rss_interval: Duration::from_millis(100),
        max_old_space_mib: 768,
        max_requests: 10_000,
        max_age: Duration::from_secs(60 * 60),
        max_launches: 3,
        launch_window: Duration::from_secs(60),
        stderr_cap_bytes: 64 * 1024,
        graceful_exit: Duration::from_secs(2),
    };
}

/// Waymark configuration (P1, W1, W6, W9, W10).
#[derive(Debug, Clone)]
pub struct WaymarkConfig {
    /// W1: resident (default) or oneshot.
    pub mode: WaymarkMode,
    /// P1: absolute path of the trusted Node executable.
    pub node_binary: PathBuf,
    /// Directory holding `discovery_core.mjs` and the entry scripts (`integrations/waymark`).
    pub script_dir: PathBuf,
    /// Directory for generation roots (manifests, request files); created 0700 on first launch.
    pub work_root: PathBuf,
    /// W6: active discovery timeout (default 15 s; positive, finite).
    pub active_timeout: Duration,
    /// Ceilings and limits (SPEC defaults).
    pub limits: WaymarkLimits,
    /// Test override of the entry script (e.g. the test-only fault worker). `None`: the mode's
    /// script in `script_dir`.
    pub worker_script: Option<PathBuf>,
    /// Extra arguments passed to the entry script after the standard ones (tests).
    pub worker_args: Vec<String>,
    /// Policy clock for generation age and the launch window (W10).
    pub clock: Clock,
    /// E1: where each retired generation's stderr capture and exit status are appended
    /// (0600); `None`: nowhere.
    pub stderr_log: Option<PathBuf>,
}

impl WaymarkConfig {
    /// A configuration with SPEC defaults for everything but the paths.
    pub fn new(
        mode: WaymarkMode,
        node_binary: PathBuf,
        script_dir: PathBuf,
        work_root: PathBuf,
    ) -> Self {
        Self {
            mode,
            node_binary,
            script_dir,
            work_root,
            active_timeout: DEFAULT_ACTIVE_TIMEOUT,
            limits: WaymarkLimits::default(),
            worker_script: None,
            worker_args: Vec::new(),
            clock: Clock::system(),
            stderr_log: None,
        }
    }

    /// Reads `PATCHDIFF_WAYMARK_MODE`, `PATCHDIFF_NODE_BINARY`, `PATCHDIFF_WAYMARK_WORKERS`,
    /// `PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS` and `PATCHDIFF_WORKER_STDERR_LOG` from the
    /// process's resolved [`Settings`] (P1, P2, W1, W6). Errors name the variable, the value and
    /// the accepted values; nothing is started.
    pub fn from_settings(
        settings: &Settings,
        script_dir: PathBuf,
        work_root: PathBuf,
    ) -> Result<Self, ConfigError> {
        Self::from_lookup(script_dir, work_root, |name| settings.lookup(name))
    }

    /// [`WaymarkConfig::from_settings`] over an arbitrary variable lookup (tests pass a map).
    pub fn from_lookup(
        script_dir: PathBuf,
        work_root: PathBuf,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, ConfigError> {
        let (mode, active_timeout) = Self::settings_from_lookup(&lookup)?;
        let node_value = lookup(Key::NodeBinary.variable());
        let path_var = lookup(Key::SearchPath.variable());
        let node_binary = resolve_node_binary(node_value.as_deref(), path_var.as_deref())?;
        let mut config = Self::new(mode, node_binary, script_dir, work_root);
        config.active_timeout = active_timeout;
        if let Some(log) = lookup(Key::WorkerStderrLog.variable()) {
            let path = PathBuf::from(&log);
            if !path.is_absolute() {
                return Err(invalid(
                    Key::WorkerStderrLog.variable(),
                    &log.to_string_lossy(),
                    "an absolute file path",
                    "a relative evidence path would depend on the working directory",
                ));
            }
            config.stderr_log = Some(path);
        }
        Ok(config)
    }

    /// Validates `PATCHDIFF_WAYMARK_MODE`, `PATCHDIFF_WAYMARK_WORKERS` and
    /// `PATCHDIFF_WAYMARK_ACTIVE_TIMEOUT_MS` without resolving Node (P2, M4): for a process that
    /// never starts the worker (the workspace profile), which must start where Node is absent.
    ///
    /// An explicitly set `PATCHDIFF_NODE_BINARY` is still checked (P2: an invalid value never
    /// starts a process), but an unset one is not looked up on `PATH`.
    pub fn validate_settings(settings: &Settings) -> Result<(), ConfigError> {
        Self::settings_from_lookup(&|name: &str| settings.lookup(name))?;
        if let Some(node) = settings.get(Key::NodeBinary).filter(|v| !v.is_empty()) {
            resolve_node_binary(Some(node), settings.get(Key::SearchPath))?;
        }
        Ok(())
    }

    /// The mode and active timeout from `lookup` (everything but the Node binary).
    fn settings_from_lookup(
        lookup: &impl Fn(&str) -> Option<OsString>,
    ) -> Result<(WaymarkMode, Duration), ConfigError> {
        let text = |name: &'static str| -> Result<Option<String>, ConfigError> {
            match lookup(name) {
                None => Ok(None),
                Some(v) => v.into_string().map(Some).map_err(|v| {
                    invalid(
                        name,
                        &v.to_string_lossy(),
                        "UTF-8 text",
                        "the value is not UTF-8",
                    )
                }),
            }
        };
        let mode = match text(Key::WaymarkMode.variable())?.as_deref() {
            None | Some("resident") => WaymarkMode::Resident,
            Some("oneshot") => WaymarkMode::Oneshot,
            Some(other) => {
                return Err(invalid(
                    Key::WaymarkMode.variable(),
                    other,
                    Key::WaymarkMode.spec().accepted,
                    "unknown Waymark mode",
                ));
            }
        };
        if let Some(workers) = text(Key::WaymarkWorkers.variable())?
            && workers != "1"
        {
            return Err(invalid(
                Key::WaymarkWorkers.variable(),
                &workers,
                Key::WaymarkWorkers.spec().accepted,
                "exactly one Waymark worker is supported",
            ));
        }
        let active_timeout = match text(Key::WaymarkActiveTimeoutMs.variable())? {
            None => DEFAULT_ACTIVE_TIMEOUT,
            Some(v) => parse_active_timeout_ms(&v)?,
        };
        Ok((mode, active_timeout))
    }

    /// The worker directory: `PATCHDIFF_WAYMARK_DIR` if set, else the bundled worker unpacked
    /// and verified in the cache (`crate::assets`) — never a path of the build
    /// machine. Errors (as `PATCHDIFF_WAYMARK_DIR`, P2) when the bundle cannot be unpacked or
    /// the binary was built without the engine (`node_modules`).
    pub fn default_script_dir(settings: &Settings) -> Result<PathBuf, ConfigError> {
        if let Some(dir) = settings.path(Key::WaymarkDir) {
            return Ok(dir);
        }
        crate::assets::Bundle::get()
            .and_then(|b| b.waymark_dir())
            .map_err(|e| {
                ConfigError::new(
                    Key::WaymarkDir.variable(),
                    "(unset)",
                    "a directory holding waymark_worker.mjs and its npm-installed node_modules",
                )
                .with_problem(e.to_string())
            })
    }

    /// `PATCHDIFF_WAYMARK_WORK_ROOT` if set, else `<temp dir>/patchdiff-waymark-<uid>`.
    pub fn default_work_root(settings: &Settings) -> PathBuf {
        match settings.path(Key::WaymarkWorkRoot) {
            Some(dir) => dir,
            None => {
                std::env::temp_dir().join(format!("patchdiff-waymark-{}", nix::unistd::getuid()))
            }
        }
    }

    /// W6: the outer discovery allowance, active timeout + 13 s (28 s by default).
    pub fn outer_allowance(&self) -> Duration {
        self.active_timeout.saturating_add(self.limits.outer_extra)
    }

    /// The entry script the supervisor starts for this mode (or the test override).
    pub fn entry_script(&self) -> PathBuf {
        match &self.worker_script {
            Some(script) => script.clone(),
            None => self.script_dir.join(match self.mode {
                WaymarkMode::Resident => RESIDENT_SCRIPT,
                WaymarkMode::Oneshot => ONESHOT_SCRIPT,
            }),
        }
    }
}

/// W6: the shortest active timeout accepted (1 ms): below it every discovery would time out.
pub const MIN_ACTIVE_TIMEOUT: Duration = Duration::from_millis(1);
/// W6: the longest active timeout accepted (24 h). Derived waits (outer allowance, the store's
/// busy timeout) stay far below `i32::MAX` milliseconds, where SQLite's busy timeout ends.
pub const MAX_ACTIVE_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// W6: parses an active timeout in milliseconds. Accepted: a finite number from 1 to 86400000
/// (24 h); zero, `0.5`, negative, NaN, infinite and anything over 24 h are refused.
pub fn parse_active_timeout_ms(value: &str) -> Result<Duration, ConfigError> {
    const ACCEPTED: &str = Key::WaymarkActiveTimeoutMs.spec().accepted;
    let ms: f64 = value.trim().parse().map_err(|_| {
        invalid(
            Key::WaymarkActiveTimeoutMs.variable(),
            value,
            ACCEPTED,
            "not a number",
        )
    })?;
    if !ms.is_finite() || ms <= 0.0 {
        return Err(invalid(
            Key::WaymarkActiveTimeoutMs.variable(),
            value,
            ACCEPTED,
            "must be positive and finite",
        ));
    }
    let timeout = Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| {
        invalid(
            Key::WaymarkActiveTimeoutMs.variable(),
            value,
            ACCEPTED,
            "out of range",
        )
    })?;
    if timeout < MIN_ACTIVE_TIMEOUT {
        return Err(invalid(
            Key::WaymarkActiveTimeoutMs.variable(),
            value,
            ACCEPTED,
            "under 1 ms, every discovery would time out",
        ));
    }
    if timeout > MAX_ACTIVE_TIMEOUT {
        return Err(invalid(
            Key::WaymarkActiveTimeoutMs.variable(),
            value,
            ACCEPTED,
            "over 24 hours",
        ));
    }
    Ok(timeout)
}

/// P1: resolves `PATCHDIFF_NODE_BINARY` (or `node`) to an absolute path of an executable file.
/// A value containing `/` is a path (made absolute); a bare name is searched on `path_var`.
pub fn resolve_node_binary(
    value: Option<&std::ffi::OsStr>,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, ConfigError> {
    const ACCEPTED: &str = "an executable file: an absolute or relative path, or a name on PATH";
    let raw = value.filter(|v| !v.is_empty()).unwrap_or("node".as_ref());
    let shown = raw.to_string_lossy().into_owned();
    let candidate = Path::new(raw);
    let found = if candidate.components().count() > 1 || candidate.is_absolute() {
        Some(candidate.to_path_buf())
    } else {
        path_var.and_then(|paths| {
            std::env::split_paths(paths)
                .map(|dir| dir.join(candidate))
                .find(|p| is_executable_file(p))
        })
    };
    let Some(path) = found else {
        return Err(invalid(
            Key::NodeBinary.variable(),
            &shown,
            ACCEPTED,
            "not found on PATH",
        ));
    };
    let absolute = std::fs::canonicalize(&path).map_err(|e| {
        invalid(
            Key::NodeBinary.variable(),
            &shown,
            ACCEPTED,
            format!("cannot resolve: {e}"),
        )
    })?;
    if !is_executable_file(&absolute) {
        return Err(invalid(
            Key::NodeBinary.variable(),
            &shown,
            ACCEPTED,
            "not an executable regular file",
        ));
    }
    Ok(absolute)
}

/// A regular file this process may execute (effective ids, `eaccess(X_OK)`) that starts like
/// an executable: an ELF header or a `#!` interpreter line. A data file with an `x` bit would
/// pass startup and fail only at the first spawn.
fn is_executable_file(path: &Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() || nix::unistd::eaccess(path, nix::unistd::AccessFlags::X_OK).is_err() {
        return false;
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    // Unreadable but executable (mode 0111): let exec decide, as a shell would.
    read.is_err() || magic == *b"\x7fELF" || magic.starts_with(b"#!")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let mut map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        map.entry("PATH".into())
            .or_insert_with(|| std::env::var_os("PATH").unwrap_or_default());
        move |k| map.get(k).cloned()
    }

    fn load(vars: &[(&str, &str)]) -> Result<WaymarkConfig, ConfigError> {
        WaymarkConfig::from_lookup("/s".into(), "/w".into(), lookup(vars))
    }

    #[test]
    fn defaults_follow_the_spec_figures() {
        let l = WaymarkLimits::default();
        assert_eq!(l.admission, Duration::from_secs(2));
        assert_eq!(l.readiness, Duration::from_secs(7));
        assert_eq!(l.lock_wait, Duration::from_millis(250));
        assert_eq!(l.max_waiting, 8);
        assert_eq!(l.rss_limit_bytes, 1 << 30);
        assert_eq!(l.rss_interval, Duration::from_millis(100));
        assert_eq!(l.max_old_space_mib, 768);
        assert_eq!(l.max_requests, 10_000);
        assert_eq!(l.max_age, Duration::from_secs(3600));
        assert_eq!(l.max_launches, 3);
        assert_eq!(l.launch_window, Duration::from_secs(60));
        assert_eq!(l.stderr_cap_bytes, 65_536);
        let c = load(&[]).expect("defaults");
        assert_eq!(c.mode, WaymarkMode::Resident);
        assert_eq!(c.active_timeout, Duration::from_secs(15));
        assert_eq!(c.outer_allowance(), Duration::from_secs(28));
        assert!(c.node_binary.is_absolute());
    }

    #[test]
    fn unknown_mode_refuses_startup_naming_variable_value_and_accepted() {
        let e = load(&[(Key::WaymarkMode.variable(), "turbo")]).expect_err("refused");
        assert_eq!(e.variable, Key::WaymarkMode.variable());
        assert_eq!(e.value, "turbo");
        let text = e.to_string();
        assert!(text.contains(Key::WaymarkMode.variable()) && text.contains("resident, oneshot"));
        assert_eq!(
            load(&[(Key::WaymarkMode.variable(), "oneshot")])
                .expect("oneshot")
                .mode,
            WaymarkMode::Oneshot
        );
    }

    #[test]
    fn workers_other_than_one_refuse_startup() {
        for v in ["0", "2", "", "one"] {
            let e = load(&[(Key::WaymarkWorkers.variable(), v)]).expect_err("refused");
            assert_eq!(e.variable, Key::WaymarkWorkers.variable());
        }
        assert!(load(&[(Key::WaymarkWorkers.variable(), "1")]).is_ok());
    }

    #[test]
    fn active_timeout_must_be_positive_and_finite() {
        for v in [
            "0",
            "-5",
            "NaN",
            "inf",
            "-inf",
            "abc",
            "1e400",
            "0.5",
            "0.999",
            "86400001",
            "2147468648",
            "1e12",
        ] {
            let e = load(&[(Key::WaymarkActiveTimeoutMs.variable(), v)]).expect_err(v);
            assert_eq!(e.variable, Key::WaymarkActiveTimeoutMs.variable(), "{v}");
        }
        let c = load(&[(Key::WaymarkActiveTimeoutMs.variable(), "2500")]).expect("ok");
        assert_eq!(c.active_timeout, Duration::from_millis(2500));
        assert_eq!(c.outer_allowance(), Duration::from_millis(15_500));
    }

    #[test]
    fn node_binary_must_be_an_executable_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("not-exec");
        std::fs::write(&plain, "x").expect("write");
        let shown = plain.to_string_lossy().into_owned();
        let e = load(&[(Key::NodeBinary.variable(), &shown)]).expect_err("not executable");
        assert_eq!(e.variable, Key::NodeBinary.variable());
        assert_eq!(e.value, shown);
        let missing = dir.path().join("missing").to_string_lossy().into_owned();
        assert!(load(&[(Key::NodeBinary.variable(), &missing)]).is_err());
        let e = load(&[(Key::NodeBinary.variable(), "definitely-not-a-node-binary")])
            .expect_err("absent");
        assert!(e.problem.as_deref().unwrap_or_default().contains("PATH"));
        let dir_path = dir.path().to_string_lossy().into_owned();
        assert!(load(&[(Key::NodeBinary.variable(), &dir_path)]).is_err());
    }

    #[test]
    fn active_timeout_bounds_are_one_millisecond_and_a_day() {
        let c = load(&[(Key::WaymarkActiveTimeoutMs.variable(), "1")]).expect("1 ms");
        assert_eq!(c.active_timeout, MIN_ACTIVE_TIMEOUT);
        let c = load(&[(Key::WaymarkActiveTimeoutMs.variable(), "86400000")]).expect("24 h");
        assert_eq!(c.active_timeout, MAX_ACTIVE_TIMEOUT);
        let e = load(&[(Key::WaymarkActiveTimeoutMs.variable(), "0.5")]).expect_err("0.5");
        assert!(e.to_string().contains("from 1 to 86400000"), "{e}");
    }

    #[test]
    fn node_binary_with_an_exec_bit_but_no_executable_format_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data-with-x-bit");
        std::fs::write(&data, "just text\n").expect("write");
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let e =
            load(&[(Key::NodeBinary.variable(), &data.to_string_lossy())]).expect_err("no format");
        assert_eq!(e.variable, Key::NodeBinary.variable());
        let script = dir.path().join("node-wrapper");
        std::fs::write(&script, "#!/bin/sh\nexec node \"$@\"\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(load(&[(Key::NodeBinary.variable(), &script.to_string_lossy())]).is_ok());
    }
}

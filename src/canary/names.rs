//! The canary's names (a leaf: it uses nothing of `canary`): which MCP process, which agent
//! host, and the names a run's files and an agent host's configuration use for them. Paths are
//! built from these by [`crate::evidence::RunDir`].

use crate::config::Key;
use crate::mcp::OBSERVED_TOOLS;

pub use crate::evidence::run_dir::process::HOST_OBSERVED;

/// A2: the one MCP server the sealed host may see, as named in its configuration.
pub const SERVER_NAME: &str = "patchdiff";

/// Which MCP process a command addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProcessKind {
    /// The trusted full-profile process (init, export, audit; C2).
    Full,
    /// The observed-profile process the agent reaches.
    Observed,
}

impl ProcessKind {
    /// The process's name in the run directory's file names
    /// ([`crate::evidence::run_dir::process`]).
    pub fn as_str(self) -> &'static str {
        use crate::evidence::run_dir::process;
        match self {
            Self::Full => process::FULL,
            Self::Observed => process::OBSERVED,
        }
    }
}

/// The agent hosts: `host-config` prints their configuration, `agent
/// claude|codex|gemini|opencode` runs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    Claude,
    Codex,
    Gemini,
    Opencode,
    Cursor,
}

impl Host {
    /// The host's name (`agent.<host>.*` files, the `agent` command's argument).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Opencode => "opencode",
            Self::Cursor => "cursor",
        }
    }

    /// The host named `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        <Self as clap::ValueEnum>::from_str(s, false).ok()
    }

    /// The path of one of this host's files in `run` (`agent.<host>.<file>`).
    pub fn file(
        self,
        run: &crate::evidence::RunDir,
        file: crate::evidence::run_dir::AgentFile,
    ) -> std::path::PathBuf {
        run.agent_file(self.as_str(), file)
    }
}

impl Host {
    /// The setting naming the host's executable (`PATCHDIFF_<HOST>_BINARY`).
    pub fn binary_key(self) -> Key {
        match self {
            Self::Claude => Key::ClaudeBinary,
            Self::Codex => Key::CodexBinary,
            Self::Gemini => Key::GeminiBinary,
            Self::Opencode => Key::OpencodeBinary,
            Self::Cursor => Key::CursorBinary,
        }
    }

    /// The variable naming the host's executable.
    pub fn binary_variable(self) -> &'static str {
        self.binary_key().variable()
    }

    /// The executable looked up on `PATH` when the variable is unset.
    pub fn default_binary(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Opencode => "opencode",
            Self::Cursor => "cursor-agent",
        }
    }

    /// How an operator installs the host.
    pub fn install_hint(self) -> &'static str {
        match self {
            Self::Claude => "npm install -g @anthropic-ai/claude-code",
            Self::Codex => "npm install -g @openai/codex",
            Self::Gemini => "npm install -g @google/gemini-cli",
            Self::Opencode => "npm install -g opencode-ai",
            Self::Cursor => "Cursor's agent CLI",
        }
    }

    /// The six observed tools as this host names them to the model: Claude Code
    /// `mcp__patchdiff__<tool>`, Gemini CLI `mcp_patchdiff_<tool>`, opencode
    /// `patchdiff_<tool>`, Codex and Cursor the tool's own name.
    pub fn sealed_tool_names(self) -> Vec<String> {
        OBSERVED_TOOLS
            .iter()
            .map(|t| match self {
                Self::Claude => format!("mcp__{SERVER_NAME}__{t}"),
                Self::Gemini => format!("mcp_{SERVER_NAME}_{t}"),
                Self::Opencode => format!("{SERVER_NAME}_{t}"),
                Self::Codex | Self::Cursor => (*t).to_owned(),
            })
            .collect()
    }
}

/// Builds a run id from the wall clock: `r-YYYYMMDD-HHMMSS-<pid>`.
pub fn new_run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "r-{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        std::process::id()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_are_correct() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
    }
}

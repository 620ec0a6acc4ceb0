//! A run directory and every file it holds (E1): the leaf every run path is built from. Other
//! modules name a run's files through [`RunDir`] or the constants here, never as literals, so
//! what the canary writes, what the seal lists and what `verify` and the console read agree.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::manifest::RunManifest;
use super::{create_private_dir, write_new_private};

/// The names of a run's MCP processes: each has its own wire log, perf events and stderr.
pub mod process {
    /// The trusted full-profile process (init, export, audit; C2).
    pub const FULL: &str = "full";
    /// The observed-profile process the console launches for a scripted agent.
    pub const OBSERVED: &str = "observed";
    /// The observed-profile process an agent host starts from its MCP configuration (A1).
    pub const HOST_OBSERVED: &str = "host-observed";
    /// The full-profile process a scripted replica edits through (`replica TARGET PLAN`, R2).
    pub const REPLICA: &str = "replica";
    /// The processes whose wire logs hold the agent's submissions, in the order the story
    /// lists them.
    pub const AGENT_FACING: [&str; 2] = [OBSERVED, HOST_OBSERVED];
}

/// The run manifest (E1, E2), written once at `init`.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The run's digests, `sha256sum` format: `<hex>  <relative path>` per line, sorted by path;
/// `sha256sum -c SHA256SUMS` in the run directory checks them too (V1).
pub const SUMS_FILE: &str = "SHA256SUMS";
/// The run's final digest (V1): the digest of [`MANIFEST_FILE`] and of [`SUMS_FILE`], created
/// once at `report`. The run manifest itself is written once at `init` and never rewritten
/// (E2), so the final digest lives beside it rather than in it.
pub const SEAL_FILE: &str = "manifest.seal";
/// The operator's signature over [`SEAL_FILE`] (a DSSE envelope, `crate::seal`), written
/// after the seal, so neither `SHA256SUMS` nor the seal lists it.
pub const SIGNATURE_FILE: &str = "SEAL.sig.json";
/// The seal's journal binding (`crate::seal::JournalBinding`): the store's identity and each
/// target's journal digest, or why they could not be read.
pub const JOURNAL_FILE: &str = "journal.json";
/// The agent transcript (the scripted agent's calls), hash-chained.
pub const TRANSCRIPT_FILE: &str = "transcript.jsonl";
/// The directory `export` writes each target's module file into.
pub const EXPORT_DIR: &str = "export";
/// The run's own SQLite database (when no operator database is configured).
pub const DATABASE_FILE: &str = "store.sqlite";
/// The agent brief: the unchanged task texts and the target mapping (C4).
pub const AGENT_BRIEF_FILE: &str = "agent-brief.md";
/// Written once when the admission gate lets an agent host's calls through (A1).
pub const ADMISSION_FILE: &str = "agent.admitted";
/// The report's formats: `report.<ext>` for each.
pub const REPORT_EXTENSIONS: [&str; 4] = ["txt", "json", "md", "junit.xml"];

/// A run's evidence directory and its standard file names.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub run_id: String,
    pub path: PathBuf,
}

impl RunDir {
    /// Creates `<runs_root>/<run_id>` as a private directory (0700). Fails if it exists.
    pub fn create(runs_root: &Path, run_id: &str) -> std::io::Result<Self> {
        create_private_dir(runs_root)?;
        let path = runs_root.join(run_id);
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(Self {
            run_id: run_id.to_owned(),
            path,
        })
    }

    /// An existing run directory (nothing is read or created); its id is the directory's name.
    pub fn at(path: &Path) -> Self {
        Self {
            run_id: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: path.to_path_buf(),
        }
    }

    /// [`MANIFEST_FILE`].
    pub fn manifest(&self) -> PathBuf {
        self.path.join(MANIFEST_FILE)
    }
    /// Wire log of one MCP process, e.g. `observed.mcp.jsonl`.
    pub fn wire_log(&self, process: &str) -> PathBuf {
        self.path.join(wire_log_name(process))
    }
    /// Perf events of one MCP process, e.g. `observed.perf.jsonl`.
    pub fn perf_events(&self, process: &str) -> PathBuf {
        self.path.join(format!("{process}.perf.jsonl"))
    }
    /// Captured stderr of the Waymark worker generations of one process (E1, W3).
    pub fn worker_stderr_log(&self, process: &str) -> PathBuf {
        self.path.join(format!("worker.{process}.stderr.log"))
    }
    /// Captured stderr of one process.
    pub fn stderr_log(&self, process: &str) -> PathBuf {
        self.path.join(format!("{process}.stderr.log"))
    }
    /// [`TRANSCRIPT_FILE`].
    pub fn transcript(&self) -> PathBuf {
        self.path.join(TRANSCRIPT_FILE)
    }
    /// [`EXPORT_DIR`].
    pub fn exports(&self) -> PathBuf {
        self.path.join(EXPORT_DIR)
    }
    /// One target's export, `export/<module file>`.
    pub fn export(&self, module_file: &str) -> PathBuf {
        self.exports().join(module_file)
    }
    /// [`DATABASE_FILE`].
    pub fn database(&self) -> PathBuf {
        self.path.join(DATABASE_FILE)
    }
    /// `report.<ext>`, `ext` one of [`REPORT_EXTENSIONS`].
    pub fn report(&self, ext: &str) -> PathBuf {
        self.path.join(report_name(ext))
    }
    /// [`SUMS_FILE`].
    pub fn sums(&self) -> PathBuf {
        self.path.join(SUMS_FILE)
    }
    /// [`SEAL_FILE`].
    pub fn seal(&self) -> PathBuf {
        self.path.join(SEAL_FILE)
    }
    /// [`SIGNATURE_FILE`].
    pub fn signature(&self) -> PathBuf {
        self.path.join(SIGNATURE_FILE)
    }
    /// [`JOURNAL_FILE`].
    pub fn journal(&self) -> PathBuf {
        self.path.join(JOURNAL_FILE)
    }
    /// [`AGENT_BRIEF_FILE`].
    pub fn agent_brief(&self) -> PathBuf {
        self.path.join(AGENT_BRIEF_FILE)
    }
    /// [`ADMISSION_FILE`].
    pub fn admission(&self) -> PathBuf {
        self.path.join(ADMISSION_FILE)
    }
    /// The run's copy of its suite (`suite/`, [`crate::fixtures::RUN_SUITE_DIR`]).
    pub fn suite(&self) -> PathBuf {
        self.path.join(crate::fixtures::RUN_SUITE_DIR)
    }
    /// One of an agent host's files, `agent.<host>.<file>` ([`AgentFile`]).
    pub fn agent_file(&self, host: &str, file: AgentFile) -> PathBuf {
        self.path.join(file.name(host))
    }

    /// Writes the run manifest (once; E2).
    pub fn write_manifest(&self, manifest: &RunManifest) -> std::io::Result<()> {
        // The manifest passes this process's redactor, like every log we write.
        let text = serde_json::to_string_pretty(manifest)?;
        write_new_private(
            &self.manifest(),
            crate::redact::process().redact(&text).as_bytes(),
        )
    }
}

/// A report's file name, `report.<ext>` (`ext` one of [`REPORT_EXTENSIONS`]).
pub fn report_name(ext: &str) -> String {
    format!("report.{ext}")
}

/// The wire log's file name of one MCP process, `<process>.mcp.jsonl`.
pub fn wire_log_name(process: &str) -> String {
    format!("{process}.mcp.jsonl")
}

/// Whether a run file (relative path) is a wire log, `*.mcp.jsonl`.
pub fn is_wire_log(rel: &str) -> bool {
    rel.ends_with(".mcp.jsonl")
}

/// The files an agent host run leaves in the run directory, each `agent.<host>.<suffix>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentFile {
    /// The host's event stream, hash-chained (`agent.<host>.jsonl`).
    Stream,
    /// The host's stderr (`agent.<host>.stderr.log`).
    Stderr,
    /// The host record (A4) (`agent.<host>.json`).
    Record,
    /// The MCP configuration the host was given (`agent.<host>.mcp.json`).
    McpConfig,
    /// The host's settings file (`agent.<host>.settings.json`).
    Settings,
}

impl AgentFile {
    /// The file's name for `host`, e.g. `agent.claude.jsonl`.
    pub fn name(self, host: &str) -> String {
        let suffix = match self {
            Self::Stream => "jsonl",
            Self::Stderr => "stderr.log",
            Self::Record => "json",
            Self::McpConfig => "mcp.json",
            Self::Settings => "settings.json",
        };
        format!("agent.{host}.{suffix}")
    }
}

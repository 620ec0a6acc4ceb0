//! `host-config` and the agent brief (C4, A5): what a real agent is given — the unchanged task
//! texts and the target mapping — and each host's configuration for the observed process.

use std::path::{Path, PathBuf};

use super::super::error::StepError;
use super::super::host;
use super::super::names::Host;
use crate::evidence::RunDir;
use crate::fixtures::FixtureManifest;

/// Writes `<run>/agent-brief.md` (once,
/// [`crate::evidence::run_dir::AGENT_BRIEF_FILE`]): the unchanged original task texts plus the target
/// mapping, which is all a real agent is given (C4). Returns its path.
pub fn write_agent_brief(run: &RunDir, manifest: &FixtureManifest) -> Result<PathBuf, StepError> {
    let path = run.agent_brief();
    if path.exists() {
        return Ok(path);
    }
    let mut brief = String::from(
        "# Targets\n\nEdit these targets only through the patchdiff MCP tools. Observe a scope \
         before editing inside it; save each target when you are done.\n\n\
         | target | language | file |\n|---|---|---|\n",
    );
    for f in &manifest.fixtures {
        brief.push_str(&format!(
            "| `{}` | {} | `{}` |\n",
            f.target, f.language, f.module_file
        ));
    }
    for f in &manifest.fixtures {
        let task = std::fs::read_to_string(manifest.resolve(&f.task)).map_err(|e| {
            StepError::Failed(format!("cannot read the task of `{}`: {e}", f.target))
        })?;
        brief.push_str(&format!("\n---\n\nTarget `{}`:\n\n{task}", f.target));
    }
    crate::evidence::write_new_private(&path, brief.as_bytes())?;
    Ok(path)
}

/// Writes a host's configuration document `text` (exactly what its config file holds: the `#`
/// hint lines are left out) to a new file at `path`, 0600. An existing file is refused,
/// untouched.
pub fn write_host_config(text: &str, path: &Path) -> Result<(), StepError> {
    let body: String = text
        .split_inclusive('\n')
        .skip_while(|l| l.starts_with('#'))
        .collect();
    crate::evidence::write_new_private(path, body.as_bytes()).map_err(|e| {
        StepError::Refused(format!(
            "cannot write {} ({e}); host-config writes a new file only",
            path.display()
        ))
    })
}

/// The Node binary an agent host's observed process should run (P1: resolved once, here, so
/// the host's `PATH` does not decide), or `None` when none resolves.
pub fn resolved_node_binary(settings: &crate::config::Settings) -> Option<PathBuf> {
    use crate::config::Key;
    crate::waymark::config::resolve_node_binary(
        settings.get(Key::NodeBinary),
        settings.get(Key::SearchPath),
    )
    .ok()
}

/// Renders the host configuration for one host, or all of them.
pub fn host_config_text(host: Option<Host>, exe: &str, env: &[(String, String)]) -> String {
    let claude = || {
        format!(
            "# Claude Code: .mcp.json. Seal the agent to the six observed tools (A2):\n\
             #   claude --strict-mcp-config --mcp-config .mcp.json --tools \"\" --allowedTools {}\n\
             # or in .claude/settings.json: {}\n{}\n",
            Host::Claude.sealed_tool_names().join(","),
            host::claude_settings(),
            serde_json::to_string_pretty(&host::claude_mcp_config(exe, env)).unwrap_or_default()
        )
    };
    let cursor = || {
        format!(
            "# Cursor: .cursor/mcp.json\n{}\n",
            serde_json::to_string_pretty(&host::cursor_mcp_config(exe, env)).unwrap_or_default()
        )
    };
    let codex = || host::codex_server_config(exe, env);
    let gemini = || {
        format!(
            "# Gemini CLI: ~/.gemini/settings.json (tools.core seals it to the six, A2); run it as\n\
             #   gemini --skip-trust --output-format stream-json --allowed-mcp-server-names patchdiff -p …\n{}\n",
            serde_json::to_string_pretty(&host::gemini_settings(exe, env, None))
                .unwrap_or_default()
        )
    };
    let opencode = || {
        format!(
            "# opencode: opencode.json (OPENCODE_CONFIG=…; `permission` seals it to the six, A2); run it as\n\
             #   opencode run --format json --pure --model anthropic/MODEL …\n{}\n",
            serde_json::to_string_pretty(&host::opencode_config(exe, env)).unwrap_or_default()
        )
    };
    match host {
        Some(Host::Claude) => claude(),
        Some(Host::Codex) => codex(),
        Some(Host::Gemini) => gemini(),
        Some(Host::Opencode) => opencode(),
        Some(Host::Cursor) => cursor(),
        None => format!(
            "{}\n{}\n{}\n{}\n{}",
            claude(),
            codex(),
            gemini(),
            opencode(),
            cursor()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canary::client::observed_env;

    #[test]
    fn host_config_for_codex_is_valid_toml_with_the_seed_settings() {
        let env = observed_env(Path::new("/tmp/pd.sqlite"), Path::new("/tmp/perf.jsonl"));
        let text = host_config_text(Some(Host::Codex), "/usr/bin/patchdiff", &env);
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let parsed: toml::Table = body.parse().unwrap();
        let server = &parsed["mcp_servers"]["patchdiff"];
        assert_eq!(server["command"].as_str(), Some("/usr/bin/patchdiff"));
        assert_eq!(
            server["env"][crate::config::Key::McpProfile.variable()].as_str(),
            Some("observed")
        );
        assert_eq!(
            server["env"][crate::config::Key::StrictObservationMode.variable()].as_str(),
            Some("1")
        );
        assert_eq!(
            server["env"][crate::config::Key::WaymarkMode.variable()].as_str(),
            Some("resident")
        );
    }
}

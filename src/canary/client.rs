//! The console's side of an MCP process: spawn `patchdiff mcp` as a child with a profile and
//! its evidence paths, connect a real `rmcp` client over its stdio, call tools (SPEC C2, U1).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Map, Value};

use super::command::ProcessKind;

/// Outcome of one tool call that the server answered with a result (possibly `isError`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub is_error: bool,
    /// Structured content, or `null` when the server sent none.
    pub structured: Value,
    /// Concatenated text content.
    pub text: String,
}

impl ToolReply {
    fn from_result(result: CallToolResult) -> Self {
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        Self {
            is_error: result.is_error == Some(true),
            structured: result.structured_content.unwrap_or(Value::Null),
            text,
        }
    }

    /// The domain error message of an `isError` reply.
    pub fn error_message(&self) -> String {
        self.structured
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| self.text.clone())
    }
}

/// A tool call failed at the protocol level (JSON-RPC error, transport loss).
#[derive(Debug, thiserror::Error)]
#[error("{tool}: {message}")]
pub struct CallError {
    pub tool: String,
    pub message: String,
    /// The JSON-RPC error's `data.code` (e.g. `PROFILE_BOUNDARY`), when the server gave one.
    pub code: Option<String>,
}

/// How a child MCP process is configured.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub kind: ProcessKind,
    /// The `patchdiff` executable to run as `patchdiff mcp`.
    pub exe: PathBuf,
    pub env: Vec<(String, String)>,
    /// File receiving the child's stderr.
    pub stderr: PathBuf,
}

/// A running MCP child with a connected client. Dropping it kills the child.
pub struct McpProcess {
    pub kind: ProcessKind,
    pub pid: Option<u32>,
    pub started: Instant,
    client: RunningService<RoleClient, ()>,
    /// Killed when dropped (`kill_on_drop`); [`McpProcess::stop`] lets it exit first.
    child: tokio::process::Child,
}

/// The longest reply line the console's client accepts, in bytes: the server's own line limit
/// ([`crate::mcp::stdio::MAX_LINE_BYTES`], 193 MiB). Agent-facing results are paged below
/// 32 KiB ([`crate::mcp::delivery`]); what is larger goes to this client only — a replay page
/// of one edit entry of up to 32 MiB of text (K8) at the worst escaping, six bytes per byte.
pub const REPLY_LINE_BYTES: usize = crate::mcp::stdio::MAX_LINE_BYTES;

/// How long the console waits for one answer of its MCP process (the handshake, a tool call,
/// `tools/list`) before giving up on it: 120 s. The longest legitimate call holds its target's
/// boundary for the outer discovery allowance (W6: 28 s by default) plus the store's busy wait
/// (the allowance + 2 s), under a minute together; twice that is a process that no longer
/// answers, and the step fails naming the call rather than waiting without a deadline.
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

impl McpProcess {
    /// Spawns the child and completes the MCP initialize handshake.
    pub async fn launch(spec: &LaunchSpec) -> anyhow::Result<Self> {
        let mut cmd = tokio::process::Command::new(&spec.exe);
        cmd.arg("mcp");
        // The child sees only what we give it plus the basic environment: configuration is
        // explicit (P1), never inherited by accident from the operator's shell.
        for (k, _) in std::env::vars() {
            if k.starts_with(crate::config::VARIABLE_PREFIX) {
                cmd.env_remove(&k);
            }
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let stderr = crate::evidence::open_append_private(&spec.stderr)?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            anyhow::bail!("the {} MCP process has no stdio pipes", spec.kind.as_str());
        };
        // rmcp's own transport drops reply lines over 16 MiB and answers nothing, so a call
        // whose reply is longer would wait forever: this one accepts what our server may send.
        let transport =
            AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(REPLY_LINE_BYTES);
        let handshake = tokio::time::timeout(CALL_DEADLINE, ().serve(transport)).await;
        let failed = |why: String| {
            let said = std::fs::read_to_string(&spec.stderr).unwrap_or_default();
            let last = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            anyhow::anyhow!(
                "the {} MCP process did not complete the MCP handshake ({why}); it said: {} (full stderr: {})",
                spec.kind.as_str(),
                if last.is_empty() { "nothing" } else { last },
                spec.stderr.display()
            )
        };
        let client = match handshake {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Err(_) => {
                return Err(failed(format!(
                    "no answer within {} s",
                    CALL_DEADLINE.as_secs()
                )));
            }
        };
        Ok(Self {
            kind: spec.kind,
            pid,
            started: Instant::now(),
            client,
            child,
        })
    }

    /// Names of the tools the server lists.
    pub async fn tool_names(&self) -> Result<Vec<String>, CallError> {
        let listed = tokio::time::timeout(CALL_DEADLINE, self.client.list_all_tools()).await;
        let tools = listed
            .map_err(|_| no_answer("tools/list"))?
            .map_err(|e| CallError {
                tool: "tools/list".into(),
                message: e.to_string(),
                code: None,
            })?;
        Ok(tools.into_iter().map(|t| t.name.to_string()).collect())
    }

    /// Calls `tool` with `arguments` (a JSON object).
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<ToolReply, CallError> {
        let arguments: Map<String, Value> = match arguments {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return Err(CallError {
                    tool: tool.into(),
                    message: format!("arguments must be a JSON object, got {other}"),
                    code: None,
                });
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        tokio::time::timeout(CALL_DEADLINE, self.client.call_tool(params))
            .await
            .map_err(|_| no_answer(tool))?
            .map(ToolReply::from_result)
            .map_err(|e| {
                let code = match &e {
                    rmcp::service::ServiceError::McpError(data) => data
                        .data
                        .as_ref()
                        .and_then(|d| d.get("code"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    _ => None,
                };
                CallError {
                    tool: tool.into(),
                    message: e.to_string(),
                    code,
                }
            })
    }

    /// Calls `tool` and turns an `isError` reply into an error too.
    pub async fn call_ok(&self, tool: &str, arguments: Value) -> Result<Value, CallError> {
        let reply = self.call(tool, arguments).await?;
        if reply.is_error {
            return Err(CallError {
                tool: tool.into(),
                message: reply.error_message(),
                code: reply
                    .structured
                    .pointer("/error/code")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        }
        Ok(reply.structured)
    }

    /// Closes the client (the child sees stdin close and exits) and waits for it: at most 3 s,
    /// then SIGTERM and 3 s more, then SIGKILL.
    pub async fn stop(mut self) {
        const GRACE: std::time::Duration = std::time::Duration::from_secs(3);
        let _ = tokio::time::timeout(GRACE, self.client.cancel()).await;
        if tokio::time::timeout(GRACE, self.child.wait()).await.is_ok() {
            return;
        }
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            if tokio::time::timeout(GRACE, self.child.wait()).await.is_ok() {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

/// The error of a call that got no answer within [`CALL_DEADLINE`].
fn no_answer(tool: &str) -> CallError {
    CallError {
        tool: tool.into(),
        message: format!(
            "no answer within {} s: the MCP process is stuck or stopped (see its stderr and \
             perf events)",
            CALL_DEADLINE.as_secs()
        ),
        code: Some("NO_ANSWER".into()),
    }
}

/// A process's state letter (`R`, `S`, `Z`, …), or `gone`; a zombie carries its wait status
/// (`Z exit 1`, `Z signal 9`). See [`crate::waymark::process::state_summary`].
pub fn proc_state(pid: u64) -> String {
    match u32::try_from(pid) {
        Ok(pid) => crate::waymark::process::state_summary(pid),
        Err(_) => "gone".to_owned(),
    }
}

/// Parses a `/proc/<pid>/stat` line (procfs's parser) into [`proc_state`]'s form; `?` when it
/// is not one.
pub fn parse_proc_stat(stat: &str) -> String {
    use procfs::FromRead;
    match procfs::process::Stat::from_read(stat.as_bytes()) {
        Ok(stat) => crate::waymark::process::describe_state(stat.state, stat.exit_code),
        Err(_) => "?".to_owned(),
    }
}

/// The environment an agent host gives the observed process it starts (C4): [`observed_env`]
/// plus a wire log, so the real agent's MCP requests and results are kept as evidence (E1), and
/// the resolved Node binary, so the host's `PATH` does not decide which Node runs (P1).
pub fn host_env(
    database: &Path,
    perf_events: &Path,
    wire_log: &Path,
    node_binary: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env = observed_env(database, perf_events);
    env.push((
        crate::config::Key::EvidenceWireLog.variable().into(),
        wire_log.display().to_string(),
    ));
    if let Some(node) = node_binary {
        env.push((
            crate::config::Key::NodeBinary.variable().into(),
            node.display().to_string(),
        ));
    }
    env
}

/// The command-line an agent host should run for the observed process, with its environment.
pub fn observed_env(database: &Path, perf_events: &Path) -> Vec<(String, String)> {
    vec![
        (
            crate::config::Key::McpProfile.variable().into(),
            "observed".into(),
        ),
        (
            crate::config::Key::WaymarkMode.variable().into(),
            "resident".into(),
        ),
        (
            crate::config::Key::StrictObservationMode.variable().into(),
            "1".into(),
        ),
        (
            crate::config::Key::DatabaseUrl.variable().into(),
            format!("sqlite://{}", database.display()),
        ),
        (
            crate::config::Key::PerfEvents.variable().into(),
            perf_events.display().to_string(),
        ),
    ]
}

//! Cursor: only a configuration to print (`host-config cursor`); it has no headless run here.

use serde_json::Value;

use super::common::{mcp_servers_json, templates};

/// Cursor's MCP configuration (`config/hosts/cursor.mcp.json`).
pub fn cursor_mcp_config(exe: &str, env: &[(String, String)]) -> Value {
    mcp_servers_json(templates::CURSOR_MCP, exe, env)
}

//! The MCP boundary: the real `patchdiff mcp` binary over stdio and Streamable HTTP, driven by
//! rmcp, the official Python SDK, the MCP Inspector (opt-in) and raw bytes — its contract,
//! profiles, target boundary, hostile input and worker errors. One test binary; `mcp` (shared)
//! holds the client and the per-test environment, `backends` one test body per store backend.

#[macro_use]
extern crate patchdiff_test_util;

use patchdiff_test_util::{backends, mcp};

mod contract;
mod healthz;
mod host_config;
mod hostile_input;
mod http;
mod http_hostile;
mod inspector;
mod profiles;
mod python_sdk;
mod real_inputs;
mod replica_sync;
mod replicas;
mod rmcp_client;
mod stdio_answers;
mod stdio_fuzz;
mod stdio_streams;
mod target_boundary;
mod worker_errors;

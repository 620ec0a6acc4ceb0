//! The Waymark boundary: the supervisor with real Node workers (discovery, faults, ownership of
//! work roots) and the worker behind a real `patchdiff mcp` (start-up burst, stops). One test
//! binary; `util` holds its paths, configs and event log, `mcp` (shared) the MCP client.

use patchdiff_test_util::mcp;

mod util;

mod discovery;
mod faults;
mod ownership;
mod startup_burst;
mod through_mcp;

//! The Waymark boundary: the supervisor with real Node workers (discovery, faults, ownership of
//! work roots) and the worker behind a real `patchdiff mcp` (start-up burst, stops). One test
//! binary; `real_files` runs discovery on real files from well-known projects; `util` holds its paths, configs and event log, `mcp` (shared) the MCP client.

use patchdiff_test_util::mcp;

mod util;

mod discovery;
mod faults;
mod ownership;
mod real_files;
mod startup_burst;
mod through_mcp;

//! The store boundary: `EditStore` (receipts, revisions, replay, observation, request keys,
//! deadlines) on SQLite and PostgreSQL, through the library and through `store-probe` processes
//! racing on one database. One test binary; `util` holds its helpers, `backends` (shared with
//! the backends bench) one test body per backend, `mcp` the real `patchdiff mcp` client.

#[macro_use]
extern crate patchdiff_test_util;

use patchdiff_test_util::{backends, mcp};

mod util;

#[path = "../../benches/support/delay_proxy.rs"]
mod delay_proxy;

mod basics;
mod deadlines;
mod props;
mod regressions;
mod replica_kills;
mod replicas;
mod round_trips;
mod target_boundary;

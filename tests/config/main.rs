//! The configuration boundary and the documents held to the code: settings examples and the
//! README's table, platform paths, perf-event configuration, an installed binary outside the
//! checkout, and `docs/requirements.md` against the requirement ids the code cites.

use patchdiff_test_util::mcp;

mod examples;
mod install;
mod paths;
mod requirements_doc;
mod telemetry;

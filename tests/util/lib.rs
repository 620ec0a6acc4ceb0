//! Helpers shared by the integration test binaries (`tests/<boundary>/main.rs`) and the backends
//! bench. Each binary keeps the helpers only it uses in its own `util` module.

pub mod backends;
pub mod example_binary;
pub mod mcp;

use std::path::Path;

/// The checkout: the `patchdiff` package's directory (this crate lives in `tests/util`).
pub fn checkout() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("tests/util sits two levels below the checkout")
}

//! patchdiff: an observed-edit backend for AI coding agents, plus the operator console that runs
//! canaries of it. See `ARCHITECTURE.md` for the module map and `docs/requirements.md` for the
//! requirement ids cited in docs.

pub mod assets;
pub mod canary;
pub mod chain;
pub mod config;
pub mod console;
pub mod display;
pub mod doctor;
pub mod evaluate;
pub mod evidence;
pub mod fixtures;
pub mod gate2;
pub use patchdiff_kernel as kernel;
pub mod mcp;
pub mod owned_fs;
pub mod redact;
pub mod replica;
pub mod runs;
pub mod seal;
pub mod store;
pub mod suite;
pub mod telemetry;
pub mod trace;
pub mod verify;
pub mod waymark;

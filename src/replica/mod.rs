//! Replica integrations (R1–R4) on the client side: `patchdiff replica sync DIR`, the reference
//! integration that mirrors leased targets into a directory and edits them beside the agent
//! through a full-profile MCP child. `mirror` holds the pure parts (file names, the text-only
//! check, changes as operations, journal entries applied, the state file's shapes); `sync` the
//! loop, its files and its MCP client. The lease, checkpoint and submission rules themselves are
//! the store's (`store::replica`).

pub mod mirror;
pub mod sync;

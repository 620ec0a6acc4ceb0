//! Gate 2, the comparative mode (SPEC C7): a comparison of two agent configurations over N
//! sealed canary runs per arm. The pure core — exact small-sample statistics (`stats`), what a
//! design can detect (`power`), the pre-registered plan (`plan`) and the ordered verdict rules
//! (`verdict`) — reads no environment and touches no disk. Built on it: resolving an arm from
//! its canary script (`resolve`), the sealed comparison directory and the run matrix of child
//! canary runs (`matrix`), and the report collected from the sealed member runs (`report`).
//! The gate itself (`PATCHDIFF_GATE2`) is checked by `main`. `docs/gate2.md` explains the
//! choices.

pub mod cli;
pub mod collect;
pub mod curtail;
pub mod matrix;
pub mod metrics;
pub mod plan;
pub mod power;
pub mod render;
pub mod report;
pub mod resolve;
pub mod signature;
pub mod stats;
pub mod verdict;

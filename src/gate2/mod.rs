//! Gate 2, the comparative mode (SPEC C7): the pure core of a comparison of two agent
//! configurations over N sealed canary runs per arm — exact small-sample statistics (`stats`),
//! what a design can detect (`power`), the pre-registered plan (`plan`) and the ordered verdict
//! rules (`verdict`). Nothing here runs an agent, reads the environment or touches the disk;
//! the gate itself (`PATCHDIFF_GATE2`) and the run matrix live elsewhere. `docs/gate2.md`
//! explains the choices.

pub mod plan;
pub mod power;
pub mod stats;
pub mod verdict;

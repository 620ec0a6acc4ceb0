//! The canary boundary: whole canaries through the real binary — agent hosts (the real Claude
//! Code CLI offline), evidence, verification, evaluation, comparison, suites, trace export and a
//! hostile agent.

use patchdiff_test_util::{backends, mcp};

mod agent_host;
mod compare_docs;
mod compare_power;
mod compare_runs;
mod compare_step;
mod e2e;
mod evaluate_controls;
mod evaluate_judging;
mod evidence_holds;
mod evidence_run;
mod evidence_wire;
mod host_delivery;
mod host_delivery_more;
mod hostile_agent;
mod more_hosts;
mod runs_cli;
mod suites;
mod trace_export;
mod verify_run;

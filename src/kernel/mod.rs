//! Edit kernel: targets, revisions, observations, operations, operational transform, receipts (SPEC K1–K8). Pure logic, no I/O.

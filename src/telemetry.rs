//! Perf-event telemetry (SPEC T1–T5).

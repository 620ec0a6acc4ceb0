//! Supervisor policy on paused time: the handle's futures, the launch window, retirement
//! reasons and their codes, and — through the scripted child — retirements, the restart limit,
//! phase ceilings, pauses, caller kinds and the quarantine, each in milliseconds.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::launch::admit_in_window;
use super::*;
use crate::waymark::WaymarkLimits;


fn assert_send_sync<T: Send + Sync>(_: &T) {}
fn assert_send<T: Send>(_: T) {}

/// The MCP server spawns discoveries on a multi-thread runtime: the handle must be
/// `Send + Sync` and every public future `Send`.
#[test]
fn waymark_handle_and_futures_are_send() {
    let config = WaymarkConfig::new(
        WaymarkMode::Resident,
        PathBuf::from("/nonexistent/node"),
        PathBuf::from("/nonexistent"),
        PathBuf::from("/nonexistent"),
    );
    let w = Waymark::new(config, Recorder::disabled());
    assert_send_sync(&w);
    assert_send(w.discover(Language::Rust, ""));
    assert_send(w.discover_holding_lock(Language::Rust, ""));
    assert_send(w.prewarm());
    assert_send(w.shutdown());
    let status = w.status();
    assert_eq!(status.generation, None, "status starts nothing (W13)");
    assert_eq!(status.launches_total, 0);
}

#[test]
fn launch_window_admits_three_per_rolling_minute() {
    // W10: at most 3 launches in any rolling 60 s window (spec figures as literals).
    let limits = WaymarkLimits::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut launches = VecDeque::new();
    for s in [0, 10, 20] {
        admit_in_window(&mut launches, at(s), &limits).expect("within the limit");
    }
    let refused = admit_in_window(&mut launches, at(30), &limits).unwrap_err();
    assert_eq!(refused.code, WorkerErrorCode::RestartLimit);
    assert!(
        refused.message.contains("next launch allowed in 30000 ms"),
        "{}",
        refused.message
    );
    assert_eq!(launches.len(), 3, "a refused launch is not counted");
    // At 60 s the first launch leaves the window.
    admit_in_window(&mut launches, at(60), &limits).expect("the window rolled");
    assert_eq!(launches.len(), 3);
}

#[test]
fn retirement_reasons_map_to_stable_worker_codes() {
    let code = |r| error_for_reason(r, 1, "x").code;
    assert_eq!(code(RetirementReason::RssLimit), WorkerErrorCode::RssLimit);
    assert_eq!(code(RetirementReason::Shutdown), WorkerErrorCode::Cancelled);
    assert_eq!(code(RetirementReason::Cancelled), WorkerErrorCode::Cancelled);
    assert_eq!(
        code(RetirementReason::StartupTimeout),
        WorkerErrorCode::StartupTimeout
    );
    for r in [
        RetirementReason::WorkerExited,
        RetirementReason::InvalidFraming,
        RetirementReason::UnsolicitedData,
        RetirementReason::WrongGeneration,
        RetirementReason::WrongRequestId,
        RetirementReason::PipeFailed,
    ] {
        assert_eq!(code(r), WorkerErrorCode::Protocol, "{r}");
    }
}

//! `patchdiff doctor` (issue 26 item 2).
use crate::config::Settings;
pub async fn run(_settings: &Settings, _json: bool) -> i32 { 0 }

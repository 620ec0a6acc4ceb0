//! The operator console (SPEC U1–U5): the interactive ratatui screen and the headless
//! `--script` runner, both driving [`crate::canary::Canary`] through one command set.
//!
//! Structure (interactive): the canary task ([`runner`]) owns the `Canary`; the tailer and store
//! poller ([`sources`]) read what processes wrote; a crossterm reader and signal handlers
//! ([`terminal`]) feed terminal input. All of them send one [`AppEvent`] enum into
//! [`run_loop`] ([`event_loop`]), which updates [`app::App`] (screen-wide state) and its panes
//! ([`panes`]: each pane's state, key table and drawing; the monitor in [`state`], the evidence
//! viewer in [`evidence`]) and redraws with the pure [`ui::draw`]. [`session`] holds the
//! sources of what the screen shows and the command sink. The loop is generic over the ratatui
//! backend, so tests and the bench run it on `TestBackend`. This file only declares modules and
//! re-exports; no module here imports it, so the module graph has no cycle.

pub mod app;
pub mod command_line;
pub mod event_loop;
pub mod evidence;
pub mod headless;
pub mod keys;
pub mod limits;
pub mod logread;
pub mod panes;
pub mod procs;
pub mod ring;
pub mod runner;
pub mod session;
pub mod sources;
pub mod state;
pub mod tail;
pub mod tail_item;
pub mod terminal;
pub mod theme;
pub mod ui;

pub use event_loop::{
    AppEvent, CommandSink, DRAIN_BUDGET, EVENT_QUEUE, IDLE_REDRAW, PROC_SAMPLE, TICK, apply_event,
    run_loop, run_loop_with,
};
pub use session::{
    Sources, StoreAt, attach, attach_with, run_attach, run_interactive, wire_log_beside,
};
pub use terminal::restore_terminal;

pub use crate::canary::client::{parse_proc_stat, proc_state};

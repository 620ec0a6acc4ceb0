//! The console boundary: the terminal UI rendered into a test backend (insta snapshots in
//! `tests/console/snapshots`), the headless console and its CLI, attaching to a run, and the
//! real interactive console in tmux.

mod attach;
mod cli;
mod render;
mod runs_pane;
mod story;
mod tmux;
mod tmux_host;

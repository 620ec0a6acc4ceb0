//! The real terminal (SPEC U4): raw mode and the alternate screen, restored on every exit — quit,
//! panic (a hook that also signals the MCP processes the console started) and signals — and
//! the tasks that feed terminal input and SIGTERM/SIGINT/SIGHUP into the loop.

use std::io::Stdout;

use crossterm::event::EventStream;
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::event_loop::{AppEvent, CHILD_PIDS};

/// Restores the terminal: raw mode off, mouse capture off, main screen, cursor shown. Safe to
/// call more than once (U4).
pub fn restore_terminal() {
    use crossterm::{cursor, event, execute, terminal};
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Raw mode + alternate screen, with a panic hook that restores the terminal first and then
/// sends SIGTERM to the MCP processes the console started (U4).
pub(crate) fn enter_terminal() -> std::io::Result<Terminal<CrosstermBackend<Stdout>>> {
    use crossterm::{execute, terminal};
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        let pids = CHILD_PIDS.lock().map(|p| p.clone()).unwrap_or_default();
        for pid in pids {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        previous(info);
    }));
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    Terminal::new(CrosstermBackend::new(std::io::stdout()))
}

/// Restores the terminal when dropped, also on early return and unwinding.
pub(crate) struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

pub(crate) fn spawn_terminal_input(tx: mpsc::Sender<AppEvent>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = EventStream::new();
        while let Some(Ok(ev)) = stream.next().await {
            if tx.send(AppEvent::Term(ev)).await.is_err() {
                return;
            }
        }
    })
}

/// Forwards the first SIGTERM, SIGINT or SIGHUP to the event loop. The handlers are installed
/// before this returns (not inside the task), so a signal that arrives before the task first
/// runs still restores the terminal instead of killing the console with the default disposition.
pub(crate) fn spawn_signals(tx: mpsc::Sender<AppEvent>) -> JoinHandle<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let installed = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = installed else {
            return;
        };
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        };
        let _ = tx.send(AppEvent::Signal(name)).await;
    })
}

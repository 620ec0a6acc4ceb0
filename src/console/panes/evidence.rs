//! The EVIDENCE pane (SPEC E1, U2): the evidence viewer ([`EvidenceView`]) over the run's wire
//! logs, transcript and host streams — only the lines on screen are read; `/` searches, `n`/`N`
//! move between matches, `f` follows, `t` filters by tool, `o` switches log, Enter opens one
//! message pretty-printed. While an agent host runs, the pane shows the observed process that
//! host started and its title says so ([`owner`], A4).

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::text::Line;

use super::view::{Effect, View};
use crate::console::evidence::{EvidenceView, pretty};
use crate::console::keys::{Binding, DOWN, UP, lookup};
use crate::console::limits::Level;
use crate::evidence::run_dir::process::HOST_OBSERVED;

/// What a key on the pane does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    Search,
    NextMatch,
    PreviousMatch,
    Follow,
    ToolFilter,
    OtherLog,
    Detail,
    Top,
    End,
}

/// The pane's keys: the one table the handler matches and the bar and help show.
pub const KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "select", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(&[KeyCode::Char('/')], "/", "search", Action::Search),
    Binding::new(
        &[KeyCode::Char('n')],
        "n/N",
        "next/prev match",
        Action::NextMatch,
    ),
    Binding::new(&[KeyCode::Char('N')], "", "", Action::PreviousMatch),
    Binding::new(&[KeyCode::Char('f')], "f", "follow", Action::Follow),
    Binding::new(
        &[KeyCode::Char('t')],
        "t",
        "tool filter",
        Action::ToolFilter,
    ),
    Binding::new(&[KeyCode::Char('o')], "o", "other log", Action::OtherLog),
    Binding::new(&[KeyCode::Enter], "⏎", "detail", Action::Detail),
    Binding::new(
        &[KeyCode::Char('g'), KeyCode::Home],
        "g/G",
        "top/end",
        Action::Top,
    ),
    Binding::new(&[KeyCode::Char('G'), KeyCode::End], "", "", Action::End),
    Binding::new(&[KeyCode::PageUp], "PgUp/PgDn", "page", Action::PageUp),
    Binding::new(&[KeyCode::PageDown], "", "", Action::PageDown),
];

/// A key on the focused pane: move, follow, filter, source, search, open a line.
pub fn on_key(ev: &mut EvidenceView, key: &KeyEvent) -> Option<Effect> {
    let page = ev.rows.max(1) as isize;
    match lookup(KEYS, key)? {
        Action::Up => ev.move_by(-1),
        Action::Down => ev.move_by(1),
        Action::PageUp => ev.move_by(-page),
        Action::PageDown => ev.move_by(page),
        Action::Top => ev.home(),
        Action::End => ev.end(),
        Action::Follow => ev.toggle_follow(),
        Action::ToolFilter => ev.cycle_tool_filter(),
        Action::OtherLog => ev.next_source(),
        Action::NextMatch => ev.next_match(true),
        Action::PreviousMatch => ev.next_match(false),
        Action::Search => return Some(Effect::Search),
        Action::Detail => {
            if let Some(line) = ev.selected_line() {
                return Some(Effect::Overlay {
                    title: format!("{} @ byte {}", ev.label(), line.offset),
                    lines: pretty(&line.text),
                });
            }
        }
    }
    Some(Effect::Handled)
}

/// Whose evidence the shown log is, for the pane's title: the observed process an agent host
/// started (`the observed process claude started, pid 12829`: the host's name, and that
/// process's pid once its perf events name it), the attached process, one of the console's own
/// MCP processes (`the console's observed process, pid 4711`), or a host's own stream; `None`
/// for other logs (the transcript, perf events, a worker's stderr).
pub fn owner(ev: &EvidenceView, view: &View) -> Option<String> {
    let name = ev.path()?.file_name()?.to_str()?;
    let pid =
        |p: Option<u64>| p.map_or_else(|| "pid not known yet".to_owned(), |p| format!("pid {p}"));
    let process = name.strip_suffix(".mcp.jsonl");
    if process.is_some() && view.attached.is_some() {
        let attached = super::processes::attached_pid(view);
        return Some(format!("the attached process, {}", pid(attached)));
    }
    let run = view.run();
    if process == Some(HOST_OBSERVED) {
        let host = run.and_then(|c| c.host.as_ref());
        let ended = host.is_some_and(|h| !matches!(h.state.as_str(), "starting" | "running"));
        return Some(format!(
            "the observed process {} started, {}{}",
            host.map_or("an agent host", |h| h.host.as_str()),
            pid(view.monitor.recorders.get("host").copied()),
            if ended { " (host ended)" } else { "" }
        ));
    }
    if let Some(kind) = process {
        let own = run
            .and_then(|c| c.processes.iter().find(|p| p.kind == kind))
            .and_then(|p| p.pid)
            .map(u64::from);
        return Some(format!("the console's {kind} process, {}", pid(own)));
    }
    let host = name.strip_prefix("agent.")?.strip_suffix(".jsonl")?;
    Some(format!("{host}'s own stream"))
}

/// The pane's lines: the log's heading (label, follow, filter, size, status), then the lines
/// on screen, the selected one marked `▶` and search matches `≡`.
pub fn lines<'a>(ev: &EvidenceView, view: &View, height: u16) -> Vec<Line<'a>> {
    let theme = &view.theme;
    let mut out = vec![Line::styled(
        format!(
            "{} · {} · filter {} · {} KiB{}",
            ev.label(),
            if ev.follow { "following" } else { "paused" },
            ev.tool_filter.as_deref().unwrap_or("none"),
            ev.file_len / 1024,
            if ev.status.is_empty() {
                String::new()
            } else {
                format!(" · {}", ev.status)
            }
        ),
        theme.dim(),
    )];
    let room = (height as usize).saturating_sub(1);
    let start = if ev.selected >= room {
        ev.selected + 1 - room
    } else {
        0
    };
    for (i, s) in ev.summaries.iter().enumerate().skip(start).take(room) {
        if i == ev.selected && view.focused {
            out.push(Line::styled(format!("▶ {s}"), theme.selected()));
        } else if ev.is_match(i) {
            // A line holding the search text.
            out.push(Line::styled(format!("≡ {s}"), theme.level(Level::High)));
        } else {
            out.push(Line::raw(format!("  {s}")));
        }
    }
    out
}

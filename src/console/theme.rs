//! How the console paints figures (SPEC U4): [`Theme`] styles that collapse to plain text under
//! `NO_COLOR`, the state symbols, and the duration, size and hash formats every pane shares.
//! Every state shown in colour also has a word or symbol, so `NO_COLOR` loses nothing.

use ratatui::style::{Color, Modifier, Style};

use super::limits::Level;

/// Bytes in a MiB.
pub const MIB: f64 = 1024.0 * 1024.0;

/// A process state in transition or needing a look (starting, stopped, no events yet). `▲`
/// is kept for one meaning only: a figure past 75 % of its ceiling (so the colour means one thing).
pub const PENDING: &str = "◐";
/// A process or worker that ended as expected (a clean exit, an expected retirement).
pub const GONE: &str = "○";
/// The marker in front of the selected row of a list; a glyph, so it survives `NO_COLOR`.
pub const SELECTED: &str = "▶";

/// Styles that collapse to plain text under `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    pub fn level(&self, l: Level) -> Style {
        if !self.color {
            return match l {
                Level::Limit => Style::default().add_modifier(Modifier::BOLD),
                _ => Style::default(),
            };
        }
        Style::default().fg(match l {
            Level::Ok => Color::Green,
            Level::High => Color::Yellow,
            Level::Limit => Color::Red,
        })
    }
    pub fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }
    pub fn title(&self, focused: bool) -> Style {
        let s = Style::default().add_modifier(Modifier::BOLD);
        if focused && self.color {
            s.fg(Color::Cyan)
        } else {
            s
        }
    }
    pub fn selected(&self) -> Style {
        if self.color {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }
}

/// The symbol of a process state: `●` running, `◐` in transition, `✖` failed or exited.
pub fn state_symbol(level: Level) -> &'static str {
    match level {
        Level::Ok => "●",
        Level::High => PENDING,
        Level::Limit => "✖",
    }
}

/// Minutes and seconds (`mm:ss`, or `h:mm:ss` past an hour) of a duration in ms.
pub fn hms(ms: f64) -> String {
    let s = (ms.max(0.0) / 1000.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// A duration in ms as `0.4 s` / `12 ms` / `—`.
pub fn secs(ms: Option<f64>) -> String {
    match ms {
        None => "—".into(),
        Some(ms) if ms < 1.0 => format!("{ms:.2} ms"),
        Some(ms) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{:.1} s", ms / 1000.0),
    }
}

/// Unit squares for small counts: `■■■□□□□□`.
pub fn squares(n: u64, of: u64) -> String {
    let n = n.min(of) as usize;
    format!("{}{}", "■".repeat(n), "□".repeat(of as usize - n))
}

/// The first seven hex digits of a SHA-256.
pub fn short_sha(s: &str) -> &str {
    s.get(..7).unwrap_or(s)
}

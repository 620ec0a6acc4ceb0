//! How the console paints figures (SPEC U4): [`Theme`] styles that collapse to plain text under
//! `NO_COLOR`, the state symbols, and the duration, size and hash formats every pane shares.
//! Every state shown in colour also has a word or symbol, so `NO_COLOR` loses nothing.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

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

/// `line` behind the selection column: `▶ ` and the selected style when `selected`, two
/// spaces otherwise (so rows stay aligned and the marker survives `NO_COLOR`).
pub fn mark<'a>(line: Line<'a>, selected: bool, theme: &Theme) -> Line<'a> {
    let style = line.style;
    let mut spans = vec![Span::raw(if selected {
        format!("{SELECTED} ")
    } else {
        "  ".to_owned()
    })];
    spans.extend(line.spans);
    let out = Line::from(spans);
    if selected {
        out.style(theme.selected())
    } else {
        out.style(style)
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

/// `text` without the requirement ids in parentheses that internal messages carry (` (C7)`,
/// ` (A3, E2)`, ` (W5–W7)`): operators read what to do in words; the ids stay in code and docs.
/// Other parentheses are kept.
pub fn plain_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let after = &rest[open + 1..];
        match after.find(')') {
            Some(close) if is_id_list(&after[..close]) => {
                out.push_str(rest[..open].trim_end_matches(' '));
                rest = &after[close + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `C7`, `A3, E2`, `W5–W7`, `T4-T5`: requirement ids only.
fn is_id_list(inner: &str) -> bool {
    let id = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && (1..=2).contains(&chars.as_str().len())
            && chars.all(|c| c.is_ascii_digit())
    };
    !inner.is_empty()
        && inner.split(',').all(|part| {
            let part = part.trim();
            match part.split_once(['–', '-']) {
                Some((a, b)) => id(a) && (id(b) || b.chars().all(|c| c.is_ascii_digit())),
                None => id(part),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_drops_requirement_ids_and_keeps_other_parentheses() {
        assert_eq!(
            plain_words("an agent host already ran in this run; a run is one canary (C7)"),
            "an agent host already ran in this run; a run is one canary"
        );
        assert_eq!(plain_words("sealed (A3, E2). next"), "sealed. next");
        assert_eq!(plain_words("limits (W5–W7) hold"), "limits hold");
        assert_eq!(
            plain_words("kill (pid 7) (Ctrl-C) f(x)"),
            "kill (pid 7) (Ctrl-C) f(x)"
        );
        assert_eq!(plain_words("(unbalanced"), "(unbalanced");
        assert_eq!(plain_words("exit (ABC)"), "exit (ABC)");
    }
}

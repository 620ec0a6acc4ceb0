//! Key tables (SPEC U3, U4): each pane and the console itself declare their keys once, as a
//! table of [`Binding`]s — the key codes, the label and hint the bottom bar and help show, and
//! the action the handler runs. The handler looks keys up in the same table ([`lookup`]), so
//! help and the bar cannot drift from behaviour.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// One entry of a key table: `keys` (any of them, with Ctrl when `ctrl`) run `action`; the bar
/// and help show `label` and `hint`.
#[derive(Debug, Clone, Copy)]
pub struct Binding<A: 'static> {
    pub keys: &'static [KeyCode],
    pub ctrl: bool,
    pub label: &'static str,
    pub hint: &'static str,
    pub action: A,
}

impl<A: Copy> Binding<A> {
    /// A binding of plain keys (no Ctrl).
    pub const fn new(
        keys: &'static [KeyCode],
        label: &'static str,
        hint: &'static str,
        action: A,
    ) -> Self {
        Self {
            keys,
            ctrl: false,
            label,
            hint,
            action,
        }
    }

    /// The same binding, pressed with Ctrl.
    pub const fn ctrl(self) -> Self {
        Self { ctrl: true, ..self }
    }

    /// Whether `key` is this binding's.
    pub fn matches(&self, key: &KeyEvent) -> bool {
        self.ctrl == key.modifiers.contains(KeyModifiers::CONTROL) && self.keys.contains(&key.code)
    }
}

/// The action `key` runs in `table`, if it is one of its keys.
pub fn lookup<A: Copy>(table: &[Binding<A>], key: &KeyEvent) -> Option<A> {
    table.iter().find(|b| b.matches(key)).map(|b| b.action)
}

/// A table's `(label, hint)` pairs, for the bar and help. A binding with an empty label is
/// shown by the one before it (`↑↓ select` covers both cursor keys).
pub fn hints<A: Copy>(table: &[Binding<A>]) -> Vec<(&'static str, &'static str)> {
    table
        .iter()
        .filter(|b| !b.label.is_empty())
        .map(|b| (b.label, b.hint))
        .collect()
}

/// Cursor keys every list pane shares (`↑`/`k`, `↓`/`j`).
pub const UP: &[KeyCode] = &[KeyCode::Up, KeyCode::Char('k')];
pub const DOWN: &[KeyCode] = &[KeyCode::Down, KeyCode::Char('j')];

/// A list cursor moved one row up or (`down`) down, staying within `0..=last`.
pub fn step_cursor(cursor: usize, down: bool, last: usize) -> usize {
    if down {
        (cursor + 1).min(last)
    } else {
        cursor.saturating_sub(1)
    }
}

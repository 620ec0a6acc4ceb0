//! The RUNS pane (SPEC U2): past runs and gate-2 comparisons under the runs root, walked like
//! k9s walks pods, over the live console — which keeps running underneath, so `Esc` comes
//! back to it without a restart. Screens stack: the list ([`list::RunList`]: a cursor, a sort,
//! a filter line, two marks), a run opened read-only ([`crate::runs::detail::open_dir`]: its
//! verdicts, stories, steps, processes as they ended, evidence files), a comparison opened
//! with a cursor on its per-target strips, and text (a story, a pair of runs side by side).
//! `Esc` pops one screen; from the list it closes the pane. Each screen has one key table the
//! handler matches and the bar and help show. Reading happens on a key (the index, a run's
//! files); drawing ([`draw`]) only paints what was read.

pub mod draw;
pub mod list;

use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent};

use super::view::Effect;
use crate::console::keys::{Binding, DOWN, UP, lookup};
use crate::runs::detail::{RunDetail, open_dir, story};
use crate::runs::{EntryKind, index, resolve};
use list::{Marked, RunList, sort_word};

/// What a key on the pane does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Open,
    Mark,
    Compare,
    Sort,
    Filter,
    Back,
}

const PAGE_UP: &[KeyCode] = &[KeyCode::PageUp];
const PAGE_DOWN: &[KeyCode] = &[KeyCode::PageDown];
const BACK: &[KeyCode] = &[KeyCode::Esc, KeyCode::Char('q')];

/// The list's keys.
pub const LIST_KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "select", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(PAGE_UP, "", "", Action::PageUp),
    Binding::new(PAGE_DOWN, "", "", Action::PageDown),
    Binding::new(&[KeyCode::Enter], "⏎", "open", Action::Open),
    Binding::new(&[KeyCode::Char(' ')], "Space", "mark", Action::Mark),
    Binding::new(
        &[KeyCode::Char('c')],
        "c",
        "compare the two marked",
        Action::Compare,
    ),
    Binding::new(&[KeyCode::Char('s')], "s", "sort", Action::Sort),
    Binding::new(&[KeyCode::Char('/')], "/", "filter", Action::Filter),
    Binding::new(BACK, "Esc", "back to the live console", Action::Back),
];

/// An opened run's keys.
pub const RUN_KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "target", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(PAGE_UP, "PgUp/PgDn", "scroll", Action::PageUp),
    Binding::new(PAGE_DOWN, "", "", Action::PageDown),
    Binding::new(&[KeyCode::Enter], "⏎", "its story", Action::Open),
    Binding::new(BACK, "Esc", "back", Action::Back),
];

/// An opened comparison's keys.
pub const COMPARISON_KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓", "target", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(
        &[KeyCode::Left, KeyCode::Char('h')],
        "←→",
        "member run",
        Action::Left,
    ),
    Binding::new(&[KeyCode::Right, KeyCode::Char('l')], "", "", Action::Right),
    Binding::new(PAGE_UP, "PgUp/PgDn", "scroll", Action::PageUp),
    Binding::new(PAGE_DOWN, "", "", Action::PageDown),
    Binding::new(
        &[KeyCode::Enter],
        "⏎",
        "that run's story of the target",
        Action::Open,
    ),
    Binding::new(BACK, "Esc", "back", Action::Back),
];

/// A text screen's keys (a story, two runs compared).
pub const TEXT_KEYS: &[Binding<Action>] = &[
    Binding::new(UP, "↑↓ PgUp/PgDn", "scroll", Action::Up),
    Binding::new(DOWN, "", "", Action::Down),
    Binding::new(PAGE_UP, "", "", Action::PageUp),
    Binding::new(PAGE_DOWN, "", "", Action::PageDown),
    Binding::new(BACK, "Esc", "back", Action::Back),
];

/// Rows a page key moves.
pub const PAGE: usize = 10;

/// A screen over the list.
#[derive(Debug, Clone, PartialEq)]
pub enum Screen {
    /// A run opened read-only; `cursor` selects one of its targets.
    Run {
        detail: Box<RunDetail>,
        cursor: usize,
        scroll: usize,
    },
    /// A comparison opened; the cursor is on target `row`'s strip cell `cell` (baseline cells
    /// first, then candidate cells).
    Comparison {
        detail: Box<RunDetail>,
        row: usize,
        cell: usize,
        scroll: usize,
    },
    /// Lines to read: a story, or two runs side by side.
    Text {
        title: String,
        lines: Vec<String>,
        scroll: usize,
    },
}

/// The pane's own state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunsPane {
    /// Where runs live (the console's `--runs-dir`); `None` until the session says.
    pub root: Option<PathBuf>,
    /// Whether the pane is shown (over the live panes).
    pub open: bool,
    pub list: RunList,
    /// Screens opened from the list, the last one shown.
    pub stack: Vec<Screen>,
    /// The filter line being typed (`/`), when it is.
    pub filter_input: Option<String>,
}

impl RunsPane {
    /// Reads the index under `root` and shows the list (keeping the sort, filter and marks of
    /// the last time it was open). Errors: none — an unreadable root lists no runs, and an
    /// unreadable entry is listed as such.
    pub fn open_list(&mut self, root: &Path) {
        let (sort, filter, text, marked) = (
            self.list.sort,
            self.list.filter.clone(),
            self.list.filter_text.clone(),
            self.list.marked.clone(),
        );
        let mut list = RunList::new(index(root));
        list.marked = marked;
        if sort != list.sort || filter != list.filter {
            list.sort = sort;
            // The filter was accepted once; it parses again.
            let _ = list.set_filter(&text);
        }
        self.list = list;
        self.root = Some(root.to_owned());
        self.stack.clear();
        self.filter_input = None;
        self.open = true;
    }

    /// Opens the list and, on it, runs `a` and `b` (ids, unique prefixes or paths) side by
    /// side. Errors: either id names no run or several (the message lists candidates), or a
    /// run cannot be read.
    pub fn open_pair(&mut self, root: &Path, a: &str, b: &str) -> Result<(), String> {
        self.open_list(root);
        let (a, b) = (resolve(root, a)?, resolve(root, b)?);
        self.push_pair(&a, &b)
    }

    /// The key table of the screen shown.
    pub fn table(&self) -> &'static [Binding<Action>] {
        match self.stack.last() {
            None => LIST_KEYS,
            Some(Screen::Run { .. }) => RUN_KEYS,
            Some(Screen::Comparison { .. }) => COMPARISON_KEYS,
            Some(Screen::Text { .. }) => TEXT_KEYS,
        }
    }

    /// The shown screen's `(label, hint)` pairs, for the bar.
    pub fn keys(&self) -> Vec<(&'static str, &'static str)> {
        crate::console::keys::hints(self.table())
    }

    /// A key while the pane is open. Every key is the pane's (a command key such as `r` must
    /// not reach the live run from here); `None` only for keys it ignores.
    pub fn on_key(&mut self, key: &KeyEvent) -> Option<Effect> {
        if let Some(text) = self.filter_input.take() {
            return Some(self.filter_key(key, text));
        }
        let action = lookup(self.table(), key)?;
        Some(match self.stack.last_mut() {
            None => self.list_action(action),
            Some(Screen::Run {
                detail,
                cursor,
                scroll,
            }) => match action {
                Action::Up | Action::Down => {
                    let last = detail.targets.len().saturating_sub(1);
                    *cursor =
                        crate::console::keys::step_cursor(*cursor, action == Action::Down, last);
                    Effect::Handled
                }
                Action::PageUp => {
                    *scroll = scroll.saturating_sub(PAGE);
                    Effect::Handled
                }
                Action::PageDown => {
                    *scroll = scroll.saturating_add(PAGE);
                    Effect::Handled
                }
                Action::Open => match detail.targets.get(*cursor) {
                    Some(t) => {
                        let (path, name) = (detail.summary.path.clone(), t.name.clone());
                        let title = format!(
                            "story of {} in {}",
                            crate::display::visible_inline(&name),
                            crate::display::visible_inline(&detail.summary.id)
                        );
                        self.push_story(&path, &name, title)
                    }
                    None => Effect::Status(false, "this run lists no targets".into()),
                },
                Action::Back => self.back(),
                _ => Effect::Handled,
            },
            Some(Screen::Comparison {
                detail,
                row,
                cell,
                scroll,
            }) => {
                let Some(c) = detail.comparison.as_ref() else {
                    return Some(self.back());
                };
                let cells = c.members_a.len() + c.members_b.len();
                match action {
                    Action::Up => *row = row.saturating_sub(1),
                    Action::Down => *row = (*row + 1).min(c.strips.len().saturating_sub(1)),
                    Action::Left => *cell = cell.saturating_sub(1),
                    Action::Right => *cell = (*cell + 1).min(cells.saturating_sub(1)),
                    Action::PageUp => *scroll = scroll.saturating_sub(PAGE),
                    Action::PageDown => *scroll = scroll.saturating_add(PAGE),
                    Action::Open => {
                        let member = if *cell < c.members_a.len() {
                            c.members_a.get(*cell)
                        } else {
                            c.members_b.get(*cell - c.members_a.len())
                        };
                        let (Some(member), Some(strip)) = (member, c.strips.get(*row)) else {
                            return Some(Effect::Status(
                                false,
                                "this comparison has no member run there".into(),
                            ));
                        };
                        let (path, name) = (member.path.clone(), strip.target.clone());
                        let title = format!(
                            "story of {} in {} ({})",
                            crate::display::visible_inline(&name),
                            crate::display::visible_inline(&member.slot),
                            crate::display::visible_inline(&member.run_id)
                        );
                        return Some(self.push_story(&path, &name, title));
                    }
                    Action::Back => return Some(self.back()),
                    _ => {}
                }
                Effect::Handled
            }
            Some(Screen::Text { scroll, .. }) => {
                match action {
                    Action::Up => *scroll = scroll.saturating_sub(1),
                    Action::Down => *scroll = scroll.saturating_add(1),
                    Action::PageUp => *scroll = scroll.saturating_sub(PAGE),
                    Action::PageDown => *scroll = scroll.saturating_add(PAGE),
                    Action::Back => return Some(self.back()),
                    _ => {}
                }
                Effect::Handled
            }
        })
    }

    fn list_action(&mut self, action: Action) -> Effect {
        match action {
            Action::Up => self.list.move_by(-1),
            Action::Down => self.list.move_by(1),
            Action::PageUp => self.list.move_by(-(PAGE as isize)),
            Action::PageDown => self.list.move_by(PAGE as isize),
            Action::Open => return self.open_selected(),
            Action::Mark => {
                let id = self.list.selected().map(|r| r.id.clone());
                return match (self.list.toggle_mark(), id) {
                    (Some(Marked::On { dropped }), Some(id)) => Effect::Status(
                        true,
                        format!(
                            "marked {}{} · {} of 2 marked{}",
                            crate::display::visible_inline(&id),
                            dropped.map_or(String::new(), |d| format!(
                                " (unmarked {})",
                                crate::display::visible_inline(&d)
                            )),
                            self.list.marked.len(),
                            if self.list.marked.len() == 2 {
                                ": c compares them"
                            } else {
                                ""
                            }
                        ),
                    ),
                    (Some(Marked::Off), Some(id)) => Effect::Status(
                        true,
                        format!("unmarked {}", crate::display::visible_inline(&id)),
                    ),
                    (Some(Marked::NotARun), _) => Effect::Status(
                        false,
                        "a comparison is not marked: ⏎ opens it (its strips open its member runs)"
                            .into(),
                    ),
                    _ => Effect::Handled,
                };
            }
            Action::Compare => {
                let Some((a, b)) = self.list.pair() else {
                    return Effect::Status(
                        false,
                        format!(
                            "mark two runs with Space first ({} marked)",
                            self.list.marked.len()
                        ),
                    );
                };
                let (a, b) = (a.path.clone(), b.path.clone());
                return match self.push_pair(&a, &b) {
                    Ok(()) => Effect::Handled,
                    Err(e) => Effect::Status(false, e),
                };
            }
            Action::Sort => {
                let key = self.list.cycle_sort();
                return Effect::Status(true, format!("runs sorted by {}", sort_word(key)));
            }
            Action::Filter => self.filter_input = Some(self.list.filter_text.clone()),
            Action::Back => return self.back(),
            _ => {}
        }
        Effect::Handled
    }

    /// Enter on the list: opens the selected run or comparison read-only.
    fn open_selected(&mut self) -> Effect {
        let Some(entry) = self.list.selected() else {
            return Effect::Status(false, "no run selected (the list is empty)".into());
        };
        let detail = Box::new(open_dir(&entry.path));
        self.stack.push(match entry.kind {
            EntryKind::Comparison if detail.comparison.is_some() => Screen::Comparison {
                detail,
                row: 0,
                cell: 0,
                scroll: 0,
            },
            _ => Screen::Run {
                detail,
                cursor: 0,
                scroll: 0,
            },
        });
        Effect::Handled
    }

    fn push_pair(&mut self, a: &Path, b: &Path) -> Result<(), String> {
        let pair = crate::runs::pair::pair(a, b)?;
        let name = |p: &Path| {
            p.file_name()
                .map(|n| crate::display::visible_inline(&n.to_string_lossy()).into_owned())
                .unwrap_or_default()
        };
        self.stack.push(Screen::Text {
            title: format!("A {} → B {}", name(a), name(b)),
            lines: pair.to_text().lines().map(str::to_owned).collect(),
            scroll: 0,
        });
        Ok(())
    }

    fn push_story(&mut self, run: &Path, name: &str, title: String) -> Effect {
        match story(run, name) {
            Ok(text) => {
                self.stack.push(Screen::Text {
                    title,
                    lines: crate::display::visible(&text)
                        .lines()
                        .map(str::to_owned)
                        .collect(),
                    scroll: 0,
                });
                Effect::Handled
            }
            Err(e) => Effect::Status(false, e),
        }
    }

    /// `Esc`: one screen back; from the list, back to the live console.
    fn back(&mut self) -> Effect {
        if self.stack.pop().is_none() {
            self.open = false;
            return Effect::Status(true, "back to the live console".into());
        }
        Effect::Handled
    }

    fn filter_key(&mut self, key: &KeyEvent, mut text: String) -> Effect {
        match key.code {
            KeyCode::Esc => return Effect::Handled,
            KeyCode::Enter => {
                return match self.list.set_filter(&text) {
                    Ok(()) => Effect::Status(
                        true,
                        format!(
                            "{} of {} entries shown",
                            self.list.shown.len(),
                            self.list.all.len()
                        ),
                    ),
                    Err(e) => Effect::Status(false, e),
                };
            }
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        self.filter_input = Some(text);
        Effect::Handled
    }
}

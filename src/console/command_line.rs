//! The `:` command line's completion (SPEC U3): command names and their arguments from the
//! commands' clap definition, and file paths for the commands whose arguments are files.

pub use crate::canary::command::argument_choices;
use crate::canary::command::complete;

/// Completion candidates for a partial command line: command names, then arguments.
pub fn candidates(text: &str) -> Vec<String> {
    match text.split_once(' ') {
        None => complete(text).into_iter().map(str::to_owned).collect(),
        Some((name, rest)) => {
            let word = rest.rsplit(' ').next().unwrap_or("");
            let mut out: Vec<String> = argument_choices(name)
                .into_iter()
                .filter(|a| a.starts_with(word))
                .collect();
            // Commands whose arguments are files (a plan, an events file, a database).
            if matches!(name, "agent" | "attach") && !word.contains('=') {
                out.extend(path_candidates(word));
            }
            out
        }
    }
}

/// At most this many file names are offered for one Tab.
pub const PATH_CANDIDATES: usize = 64;

/// Files and directories (with a trailing `/`) whose path starts with `word`, as typed
/// (relative to the console's working directory unless absolute). Hidden entries only when the
/// typed name starts with `.`.
pub fn path_candidates(word: &str) -> Vec<String> {
    let (typed_dir, prefix) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    let dir = if typed_dir.is_empty() { "." } else { typed_dir };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let slash = if e.path().is_dir() { "/" } else { "" };
            Some(format!("{typed_dir}{name}{slash}"))
        })
        .collect();
    out.sort();
    out.truncate(PATH_CANDIDATES);
    out
}

/// Tab on a command line: a single candidate is completed (with a trailing space); several are
/// cycled through, remembering what was typed in `cycle`.
pub fn complete_line(
    text: &str,
    cycle: Option<(String, usize)>,
) -> (String, Option<(String, usize)>) {
    let typed = cycle.as_ref().map_or(text, |(t, _)| t.as_str()).to_owned();
    let cands = candidates(&typed);
    if cands.is_empty() {
        return (text.to_owned(), None);
    }
    let prefix = match typed.rsplit_once(' ') {
        Some((head, _)) => format!("{head} "),
        None => String::new(),
    };
    if cands.len() == 1 {
        // A directory stays open for the next Tab; anything else is a whole word.
        let space = if cands[0].ends_with('/') { "" } else { " " };
        return (format!("{prefix}{}{space}", cands[0]), None);
    }
    let next = cycle.map_or(0, |(_, i)| (i + 1) % cands.len());
    (format!("{prefix}{}", cands[next]), Some((typed, next)))
}

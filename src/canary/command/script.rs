//! `--script` files (U5): `--set NAME=VALUE` parameters, `${NAME}` / `${NAME:-DEFAULT}`
//! placeholders filled shell-quoted, and one command per line, every bad line named.

use super::types::Command;

/// each named once. Errors name the argument and what is accepted.
pub fn parse_parameters(sets: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for set in sets {
        let (name, value) = set.split_once('=').ok_or_else(|| {
            format!("--set {set}: expected NAME=VALUE (e.g. --set model=claude-sonnet-4-5)")
        })?;
        if !valid_parameter_name(name) {
            return Err(format!(
                "--set {set}: `{name}` is not a parameter name (letters, digits and `_`, not \
                 starting with a digit)"
            ));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("--set {name}=…: given twice"));
        }
        out.push((name.to_owned(), value.to_owned()));
    }
    Ok(out)
}

fn valid_parameter_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Fills a script's placeholders (one script serves many models) before it is parsed: `${NAME}` takes the
/// value of `--set NAME=VALUE`, `${NAME:-DEFAULT}` falls back to `DEFAULT` (a plain word, no
/// `}`). A value is inserted shell-quoted, so it stays one word whatever it holds. Comments
/// (`#` lines and trailing ` # …`) are left as they are and hold no placeholders. Errors, each
/// naming the line — refused before anything runs: a placeholder with no value and no default
/// (naming the `--set` that would fill it), a malformed `${…}`, and a `--set` that names no
/// placeholder of the script (listing the ones it has).
pub fn fill_placeholders(text: &str, params: &[(String, String)]) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut errors = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        let (body, comment) = if line.trim_start().starts_with('#') {
            ("", line)
        } else {
            match line.find(" #") {
                Some(at) => line.split_at(at),
                None => (line, ""),
            }
        };
        let mut rest = body;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let Some(end) = after.find('}') else {
                errors.push(format!("line {n}: `${{` without a closing `}}`"));
                rest = "";
                break;
            };
            let inner = &after[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            if !valid_parameter_name(name) {
                errors.push(format!(
                    "line {n}: `${{{inner}}}` is not a placeholder (`${{NAME}}` or \
                     `${{NAME:-DEFAULT}}`, NAME of letters, digits and `_`)"
                ));
            } else {
                used.insert(name.to_owned());
                match params
                    .iter()
                    .find(|(p, _)| p == name)
                    .map(|(_, v)| v.as_str())
                    .or(default)
                {
                    Some(value) => {
                        out.push_str(&shlex::try_quote(value).unwrap_or_else(|_| value.into()))
                    }
                    None => errors.push(format!(
                        "line {n}: `${{{name}}}` has no value: give `--set {name}=VALUE`"
                    )),
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out.push_str(comment);
    }
    for (name, _) in params {
        if !used.contains(name) {
            let known: Vec<&str> = used.iter().map(String::as_str).collect();
            errors.push(format!(
                "--set {name}=…: the script has no `${{{name}}}` placeholder ({})",
                if known.is_empty() {
                    "it has none".to_owned()
                } else {
                    format!("it has: {}", known.join(", "))
                }
            ));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("\n"))
    }
}

/// Parses a `--script` file: one command per line; blank lines, `#` comments and trailing
/// `# …` comments are skipped. Every bad line is reported, one per line of the error, each as
/// `line N: …` (1-based); a script with no command is refused.
pub fn parse_script(text: &str) -> Result<Vec<(usize, Command)>, String> {
    let mut commands = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.split_once(" #").map_or(line, |(b, _)| b).trim();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        match Command::parse(body) {
            Ok(c) => commands.push((i + 1, c)),
            Err(e) => errors.push(format!("line {}: {e}", i + 1)),
        }
    }
    // A script is one run, and `report` seals it: a step after it would write into a
    // sealed run, and `new` (another run) is the interactive console's.
    let sealed_at = commands
        .iter()
        .find(|(_, c)| matches!(c, Command::Report))
        .map(|(n, _)| *n);
    for (n, c) in &commands {
        if matches!(c, Command::New) {
            errors.push(format!(
                "line {n}: `new` works only in the interactive console (a script is one run)"
            ));
        } else if let Some(at) = sealed_at.filter(|at| n > at)
            && !c.allowed_after_seal()
        {
            errors.push(format!(
                "line {n}: `{}` comes after `report` (line {at}), which seals the run; nothing \
                 may write to a sealed run (only `target` and `runs` views may follow)",
                c.name()
            ));
        }
    }
    errors.sort_by_key(|e| {
        e.strip_prefix("line ")
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    });
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    if commands.is_empty() {
        return Err(
            "the script has no commands (one console command per line; `#` starts a comment)"
                .into(),
        );
    }
    Ok(commands)
}

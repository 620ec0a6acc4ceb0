//! The one command set (SPEC U3): every console action is a [`Command`], reachable from a key,
//! the `:` command line and `--script` files alike. [`COMMANDS`] is the table that help, key
//! bindings and completion are generated from.

use std::path::PathBuf;
use std::time::Duration;

/// Which MCP process a command addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessKind {
    /// The trusted full-profile process (init, export, audit; C2).
    Full,
    /// The observed-profile process the agent reaches.
    Observed,
}

impl ProcessKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Observed => "observed",
        }
    }
}

/// What `wait` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// The observed process's resident worker reported ready.
    Ready,
    /// Every target has been saved at least once (a real agent host finished).
    Saved,
}

/// Agent host configurations `host-config` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Claude,
    Codex,
    Cursor,
}

impl Host {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Cursor => "cursor",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "claude" => Some(Self::Claude),
            "codex" => Some(Self::Codex),
            "cursor" => Some(Self::Cursor),
            _ => None,
        }
    }
}

/// One console action.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// C1: authenticate fixtures and initialize the five targets (`--reset` wipes history).
    Init { reset: bool },
    /// U1: start (or restart) MCP processes.
    Launch { which: Option<ProcessKind> },
    /// C3: the preflight checks.
    Preflight,
    /// C4: run a scripted agent plan against the observed process.
    Agent { plan: PathBuf },
    /// A1–A4: launch a real agent host CLI headless and sealed against an observed process it
    /// starts itself; `model` defaults to the one given to `record`.
    AgentHost {
        host: Host,
        model: Option<String>,
        max_turns: Option<u32>,
        timeout: Duration,
    },
    /// Wait for a condition, up to a timeout.
    Wait { what: WaitFor, timeout: Duration },
    /// C5: export every target's latest saved version.
    Export,
    /// C5: SAVE/replay consistency and the audit summary.
    Inspect,
    /// C6: run the independent evaluator; each behavioral check runs `repeat` times (V3).
    Evaluate { repeat: u32 },
    /// Write the final report (text, JSON, JUnit XML) to the run directory.
    Report,
    /// U1: stop MCP processes.
    Stop { which: Option<ProcessKind> },
    /// E1: record the agent's identity for the run manifest.
    Record {
        model: Option<String>,
        provider: Option<String>,
        reasoning: Option<String>,
    },
    /// Print the agent-host configuration for the observed process; with `file`, also write
    /// that host's document to a new file (0600, never over an existing one).
    HostConfig {
        host: Option<Host>,
        file: Option<PathBuf>,
    },
    /// Show a target's story: verdicts with the check's output, the agent's submissions with
    /// their receipts, diffs against the expected and original bytes (a view, not a step).
    Target { name: String },
    /// Past runs: list them, compare two, or open one read-only (a view, not a step).
    Runs { action: RunsAction },
    /// Interactive console only: watch an observed process an agent host started, by tailing
    /// its perf-events file (and memory file) and reading its store.
    Attach {
        events: PathBuf,
        database: Option<PathBuf>,
    },
}

/// What `runs` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsAction {
    /// List past runs, newest first.
    List,
    /// Open one run read-only in the console (its perf events and store), by id or path.
    Open(String),
    /// Compare two runs (ids or paths): verdict changes and phase deltas.
    Compare(String, String),
}

/// One row of the command table.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    pub name: &'static str,
    pub usage: &'static str,
    /// The key that runs the command with default arguments in the interactive console.
    pub key: Option<char>,
    pub help: &'static str,
}

/// The command table (U3): the source of `?` help, key bindings and `:` completion.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "record",
        usage: "record model=M provider=P reasoning=R",
        key: Some('c'),
        help: "record the agent's identity for the run manifest (before init)",
    },
    CommandSpec {
        name: "init",
        usage: "init [--reset]",
        key: Some('i'),
        help: "authenticate fixtures and initialize the five targets through the full process",
    },
    CommandSpec {
        name: "launch",
        usage: "launch [full|observed]",
        key: Some('l'),
        help: "start or restart MCP processes (both by default)",
    },
    CommandSpec {
        name: "preflight",
        usage: "preflight",
        key: Some('p'),
        help: "check tools/list = six, a full-profile call refused, worker ready, targets fresh",
    },
    CommandSpec {
        name: "agent",
        usage: "agent PLAN.jsonl|claude|codex [k=v…]",
        key: Some('a'),
        help: "run a scripted plan, or a real agent host sealed (model=M max_turns=N timeout=S)",
    },
    CommandSpec {
        name: "wait",
        usage: "wait ready|saved [SECONDS]",
        key: None,
        help: "wait for the worker to be ready, or for every target to be saved",
    },
    CommandSpec {
        name: "export",
        usage: "export",
        key: Some('e'),
        help: "export every target's latest saved version through the full process",
    },
    CommandSpec {
        name: "inspect",
        usage: "inspect",
        key: Some('n'),
        help: "check SAVE/replay consistency and summarize the audit",
    },
    CommandSpec {
        name: "evaluate",
        usage: "evaluate [repeat=K]",
        key: Some('v'),
        help: "run the independent evaluator (controls, full-byte and behavioral; checks K times)",
    },
    CommandSpec {
        name: "report",
        usage: "report",
        key: Some('r'),
        help: "write the final report (text, JSON, JUnit XML) to the run directory",
    },
    CommandSpec {
        name: "stop",
        usage: "stop [full|observed]",
        key: Some('s'),
        help: "stop MCP processes (both by default)",
    },
    CommandSpec {
        name: "host-config",
        usage: "host-config [claude|codex|cursor [FILE]]",
        key: Some('h'),
        help: "show the agent-host configuration for the observed process (or write it to FILE)",
    },
    CommandSpec {
        name: "target",
        usage: "target NAME",
        key: None,
        help: "a target's story: verdicts, check output, submissions, diffs (Enter on TARGETS)",
    },
    CommandSpec {
        name: "runs",
        usage: "runs [open ID | compare A B]",
        key: Some('u'),
        help: "past runs: list (date, model, verdicts), open one read-only, compare two",
    },
    CommandSpec {
        name: "attach",
        usage: "attach EVENTS.jsonl [DATABASE.sqlite]",
        key: None,
        help: "interactive console: watch an observed process an agent host started (its perf events and store)",
    },
];

/// Default wait timeout when none is given.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(600);

impl Command {
    /// The command's table name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Init { .. } => "init",
            Self::Launch { .. } => "launch",
            Self::Preflight => "preflight",
            Self::Agent { .. } | Self::AgentHost { .. } => "agent",
            Self::Wait { .. } => "wait",
            Self::Export => "export",
            Self::Inspect => "inspect",
            Self::Evaluate { .. } => "evaluate",
            Self::Report => "report",
            Self::Stop { .. } => "stop",
            Self::Record { .. } => "record",
            Self::HostConfig { .. } => "host-config",
            Self::Target { .. } => "target",
            Self::Runs { .. } => "runs",
            Self::Attach { .. } => "attach",
        }
    }

    /// Parses one command line (script line or `:` input). Errors name the command's usage.
    pub fn parse(line: &str) -> Result<Self, String> {
        let mut words = line.split_whitespace();
        let name = words.next().ok_or_else(|| "empty command".to_owned())?;
        let args: Vec<&str> = words.collect();
        let spec = COMMANDS.iter().find(|c| c.name == name).ok_or_else(|| {
            let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
            format!(
                "unknown command `{name}`; commands are: {}",
                names.join(", ")
            )
        })?;
        let usage = || format!("usage: {}", spec.usage);
        let process = |arg: Option<&&str>| -> Result<Option<ProcessKind>, String> {
            match arg.copied() {
                None | Some("all") => Ok(None),
                Some("full") => Ok(Some(ProcessKind::Full)),
                Some("observed") => Ok(Some(ProcessKind::Observed)),
                Some(_) => Err(usage()),
            }
        };
        let command = match name {
            "init" => match args.as_slice() {
                [] => Self::Init { reset: false },
                ["--reset"] => Self::Init { reset: true },
                _ => return Err(usage()),
            },
            "launch" if args.len() <= 1 => Self::Launch {
                which: process(args.first())?,
            },
            "stop" if args.len() <= 1 => Self::Stop {
                which: process(args.first())?,
            },
            "preflight" if args.is_empty() => Self::Preflight,
            "agent" => match args.as_slice() {
                [host, options @ ..] if matches!(*host, "claude" | "codex") => {
                    parse_agent_host(host, options)?
                }
                [plan] => Self::Agent {
                    plan: PathBuf::from(plan),
                },
                _ => return Err(usage()),
            },
            "wait" => {
                let what = match args.first() {
                    Some(&"ready") => WaitFor::Ready,
                    Some(&"saved") => WaitFor::Saved,
                    _ => return Err(usage()),
                };
                let timeout = match args.get(1) {
                    None => DEFAULT_WAIT,
                    Some(s) => match s.parse::<f64>() {
                        Ok(v) if v.is_finite() && v > 0.0 => Duration::from_secs_f64(v),
                        _ => {
                            return Err(format!("wait: `{s}` is not a positive number of seconds"));
                        }
                    },
                };
                if args.len() > 2 {
                    return Err(usage());
                }
                Self::Wait { what, timeout }
            }
            "export" if args.is_empty() => Self::Export,
            "inspect" if args.is_empty() => Self::Inspect,
            "evaluate" => match args.as_slice() {
                [] => Self::Evaluate { repeat: 1 },
                [arg] => match arg.strip_prefix("repeat=").map(str::parse::<u32>) {
                    Some(Ok(k)) if (1..=crate::evaluate::MAX_REPEAT).contains(&k) => {
                        Self::Evaluate { repeat: k }
                    }
                    _ => {
                        return Err(format!(
                            "evaluate: `{arg}` is not repeat=K with K in 1..={}; {}",
                            crate::evaluate::MAX_REPEAT,
                            usage()
                        ));
                    }
                },
                _ => return Err(usage()),
            },
            "report" if args.is_empty() => Self::Report,
            "record" => {
                let (mut model, mut provider, mut reasoning) = (None, None, None);
                for arg in &args {
                    match arg.split_once('=') {
                        Some(("model", v)) => model = Some(v.to_owned()),
                        Some(("provider", v)) => provider = Some(v.to_owned()),
                        Some(("reasoning", v)) => reasoning = Some(v.to_owned()),
                        _ => {
                            return Err(format!(
                                "record: `{arg}` is not model=…, provider=… or reasoning=…; {}",
                                usage()
                            ));
                        }
                    }
                }
                Self::Record {
                    model,
                    provider,
                    reasoning,
                }
            }
            "host-config" => match args.as_slice() {
                [] => Self::HostConfig {
                    host: None,
                    file: None,
                },
                [h] => Self::HostConfig {
                    host: Some(Host::parse(h).ok_or_else(usage)?),
                    file: None,
                },
                [h, file] => Self::HostConfig {
                    host: Some(Host::parse(h).ok_or_else(usage)?),
                    file: Some(PathBuf::from(file)),
                },
                _ => return Err(usage()),
            },
            "target" => match args.as_slice() {
                [name] => Self::Target {
                    name: (*name).to_owned(),
                },
                _ => return Err(usage()),
            },
            "runs" => Self::Runs {
                action: match args.as_slice() {
                    [] => RunsAction::List,
                    ["open", id] => RunsAction::Open((*id).to_owned()),
                    ["compare", a, b] => RunsAction::Compare((*a).to_owned(), (*b).to_owned()),
                    _ => return Err(usage()),
                },
            },
            "attach" => match args.as_slice() {
                [events] => Self::Attach {
                    events: PathBuf::from(events),
                    database: None,
                },
                [events, database] => Self::Attach {
                    events: PathBuf::from(events),
                    database: Some(PathBuf::from(database)),
                },
                _ => return Err(usage()),
            },
            _ => return Err(usage()),
        };
        Ok(command)
    }
}

/// Parses `agent claude|codex [model=M] [max_turns=N] [timeout=SECONDS]`.
fn parse_agent_host(host: &str, options: &[&str]) -> Result<Command, String> {
    let host = Host::parse(host).ok_or_else(|| format!("agent: unknown host `{host}`"))?;
    let (mut model, mut max_turns, mut timeout) =
        (None, None, crate::canary::host::DEFAULT_HOST_TIMEOUT);
    for option in options {
        match option.split_once('=') {
            Some(("model", v)) if !v.is_empty() => model = Some(v.to_owned()),
            Some(("max_turns", v)) => {
                max_turns = Some(v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!(
                        "agent {}: max_turns `{v}` is not a positive whole number",
                        host.as_str()
                    )
                })?)
            }
            Some(("timeout", v)) => {
                timeout = match v.parse::<f64>() {
                    Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
                        Duration::from_secs_f64(s)
                    }
                    _ => {
                        return Err(format!(
                            "agent {}: timeout `{v}` is not a number of seconds in (0, 86400]",
                            host.as_str()
                        ));
                    }
                }
            }
            _ => {
                return Err(format!(
                    "agent {}: `{option}` is not model=…, max_turns=… or timeout=…; usage: agent {} [model=M] [max_turns=N] [timeout=SECONDS]",
                    host.as_str(),
                    host.as_str()
                ));
            }
        }
    }
    Ok(Command::AgentHost {
        host,
        model,
        max_turns,
        timeout,
    })
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

/// Completions for a partial `:` command line: command names with the typed prefix.
pub fn complete(prefix: &str) -> Vec<&'static str> {
    COMMANDS
        .iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with(prefix.trim_start()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command_in_the_table() {
        for spec in COMMANDS {
            let line = match spec.name {
                "agent" => "agent plan.jsonl".to_owned(),
                "wait" => "wait ready 5".to_owned(),
                "attach" => "attach /tmp/e.jsonl /tmp/db.sqlite".to_owned(),
                "target" => "target chess".to_owned(),
                other => other.to_owned(),
            };
            let cmd = Command::parse(&line).unwrap();
            assert_eq!(cmd.name(), spec.name);
        }
    }

    #[test]
    fn agent_hosts_parse_with_their_options_and_refuse_bad_ones() {
        assert_eq!(
            Command::parse("agent claude model=claude-sonnet-4-5 max_turns=40 timeout=90").unwrap(),
            Command::AgentHost {
                host: Host::Claude,
                model: Some("claude-sonnet-4-5".into()),
                max_turns: Some(40),
                timeout: Duration::from_secs(90),
            }
        );
        assert_eq!(
            Command::parse("agent codex").unwrap(),
            Command::AgentHost {
                host: Host::Codex,
                model: None,
                max_turns: None,
                timeout: Duration::from_secs(1800),
            }
        );
        assert_eq!(
            Command::parse("agent plan.jsonl").unwrap(),
            Command::Agent {
                plan: "plan.jsonl".into()
            }
        );
        for bad in [
            "agent claude max_turns=0",
            "agent claude timeout=-1",
            "agent claude timeout=1e9",
            "agent claude turns=3",
            "agent claude model=",
        ] {
            let err = Command::parse(bad).unwrap_err();
            assert!(err.starts_with("agent claude:"), "{bad}: {err}");
        }
    }

    #[test]
    fn evaluate_takes_an_optional_repeat_count() {
        assert_eq!(
            Command::parse("evaluate").unwrap(),
            Command::Evaluate { repeat: 1 }
        );
        assert_eq!(
            Command::parse("evaluate repeat=3").unwrap(),
            Command::Evaluate { repeat: 3 }
        );
        assert!(Command::parse("evaluate repeat=0").is_err());
        assert!(Command::parse("evaluate 3").is_err());
    }

    #[test]
    fn unknown_command_lists_the_known_ones() {
        let err = Command::parse("deploy").unwrap_err();
        assert!(
            err.contains("unknown command `deploy`") && err.contains("preflight"),
            "{err}"
        );
    }

    #[test]
    fn bad_arguments_show_usage() {
        assert_eq!(
            Command::parse("launch everything").unwrap_err(),
            "usage: launch [full|observed]"
        );
        assert!(
            Command::parse("wait ready -1")
                .unwrap_err()
                .contains("positive")
        );
    }

    #[test]
    fn script_errors_name_the_line() {
        let err = parse_script("# demo\ninit\n\nbogus\n").unwrap_err();
        assert!(err.starts_with("line 4:"), "{err}");
    }

    #[test]
    fn every_bad_line_of_a_script_is_reported_and_an_empty_script_is_refused() {
        let err = parse_script("bogus\ninit\nlaunch everything\nwait ready -1\n").unwrap_err();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 3, "{err}");
        assert!(
            lines[0].starts_with("line 1: unknown command `bogus`"),
            "{err}"
        );
        assert!(lines[1].starts_with("line 3: usage: launch"), "{err}");
        assert!(lines[2].starts_with("line 4: wait:"), "{err}");
        for empty in ["", "\n\n", "# only a comment\n"] {
            assert!(parse_script(empty).unwrap_err().contains("no commands"));
        }
        // A trailing comment is not part of the command.
        let ok = parse_script("init   # authenticate fixtures\n").unwrap();
        assert_eq!(ok, vec![(1, Command::Init { reset: false })]);
    }

    #[test]
    fn completion_matches_prefixes() {
        assert_eq!(complete("ex"), vec!["export"]);
        assert_eq!(complete("h"), vec!["host-config"]);
    }
}

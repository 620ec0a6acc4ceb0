//! The one clap definition of the commands' arguments ([`Line`]), from which parsing
//! ([`Command::parse`]), usage lines ([`usage`], [`agent_host_usage`]) and `:`
//! completion ([`argument_choices`]) are generated (U3).

use std::path::PathBuf;
use std::time::Duration;

use super::types::{Command, DEFAULT_WAIT, RunsAction, WaitFor};
use crate::canary::names::{Host, ProcessKind};

/// One console command line, as clap parses it (after `shlex` splitting). This is the one
/// definition of the commands' arguments: [`Command::parse`], [`usage`] and
/// [`argument_choices`] all read it.
#[derive(Debug, clap::Parser)]
#[command(
    name = "console",
    no_binary_name = true,
    disable_help_flag = true,
    disable_help_subcommand = true,
    disable_version_flag = true
)]
pub struct Line {
    #[command(subcommand)]
    pub(super) command: Cli,
}

/// `full`, `observed`, or (hidden) `all`, which is the same as none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Which {
    Full,
    Observed,
    #[value(hide = true)]
    All,
}

impl Which {
    fn kind(which: Option<Self>) -> Option<ProcessKind> {
        match which? {
            Self::Full => Some(ProcessKind::Full),
            Self::Observed => Some(ProcessKind::Observed),
            Self::All => None,
        }
    }
}

/// `agent`'s first argument: a plan file, or one of the hosts `claude`, `codex` (offered as
/// possible values for completion; any other word is a plan path).
#[derive(Debug, Clone, Copy)]
struct PlanOrHost;

impl clap::builder::TypedValueParser for PlanOrHost {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            [Host::Claude, Host::Codex, Host::Gemini, Host::Opencode]
                .into_iter()
                .map(|h| clap::builder::PossibleValue::new(h.as_str())),
        ))
    }
}

/// The commands, in the command table's order. `key=value` arguments are positionals whose keys and
/// values are checked when converting to [`Command`] (so errors can say which key was wrong).
#[derive(Debug, clap::Subcommand)]
pub(super) enum Cli {
    Suite {
        #[arg(value_name = "PATH", value_hint = clap::ValueHint::AnyPath)]
        path: PathBuf,
    },
    Record {
        #[arg(num_args = 0.., value_names = ["model=M", "provider=P", "reasoning=R"])]
        options: Vec<String>,
    },
    Init {
        #[arg(long)]
        reset: bool,
    },
    Launch {
        which: Option<Which>,
    },
    Preflight,
    Agent {
        #[arg(value_name = "PLAN.jsonl", value_parser = PlanOrHost, value_hint = clap::ValueHint::FilePath)]
        plan_or_host: String,
        #[arg(value_name = "k=v…", allow_hyphen_values = true)]
        options: Vec<String>,
    },
    Replica {
        #[arg(value_name = "TARGET")]
        target: String,
        #[arg(value_name = "PLAN.jsonl", value_hint = clap::ValueHint::FilePath)]
        plan: PathBuf,
    },
    Wait {
        what: WaitFor,
        #[arg(value_name = "SECONDS", allow_hyphen_values = true)]
        seconds: Option<String>,
    },
    Export,
    Inspect,
    Evaluate {
        #[arg(value_name = "k=v…", allow_hyphen_values = true)]
        options: Vec<String>,
    },
    Report,
    Stop {
        which: Option<Which>,
    },
    HostConfig {
        host: Option<Host>,
        #[arg(value_name = "FILE", requires = "host", value_hint = clap::ValueHint::FilePath)]
        file: Option<PathBuf>,
    },
    Target {
        #[arg(value_name = "NAME")]
        name: String,
    },
    Runs {
        #[command(subcommand)]
        action: Option<RunsCli>,
    },
    Compare {
        #[arg(value_name = "PLAN.toml", value_hint = clap::ValueHint::FilePath)]
        plan: PathBuf,
    },
    Attach {
        #[arg(value_name = "EVENTS.jsonl", value_hint = clap::ValueHint::FilePath)]
        events: PathBuf,
        #[arg(value_name = "DATABASE.sqlite", value_hint = clap::ValueHint::FilePath)]
        database: Option<PathBuf>,
    },
    New,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum RunsCli {
    Open {
        #[arg(value_name = "ID")]
        id: String,
    },
    Compare {
        #[arg(value_name = "A")]
        a: String,
        #[arg(value_name = "B")]
        b: String,
    },
}

impl Cli {
    /// The [`Command`] the rest of the code uses; checks `key=value` arguments and numbers.
    pub(super) fn into_command(self, usage: impl Fn() -> String) -> Result<Command, String> {
        Ok(match self {
            Self::Suite { path } => Command::Suite { path },
            Self::Init { reset } => Command::Init { reset },
            Self::Launch { which } => Command::Launch {
                which: Which::kind(which),
            },
            Self::Stop { which } => Command::Stop {
                which: Which::kind(which),
            },
            Self::Preflight => Command::Preflight,
            Self::Agent {
                plan_or_host,
                options,
            } => match Host::parse(&plan_or_host) {
                Some(host @ (Host::Claude | Host::Codex | Host::Gemini | Host::Opencode)) => {
                    parse_agent_host(host, &options)?
                }
                _ if options.is_empty() => Command::Agent {
                    plan: PathBuf::from(plan_or_host),
                },
                _ => return Err(usage()),
            },
            Self::Replica { target, plan } => Command::Replica { target, plan },
            Self::Wait { what, seconds } => Command::Wait {
                what,
                timeout: wait_timeout(seconds.as_deref())?,
            },
            Self::Export => Command::Export,
            Self::Inspect => Command::Inspect,
            Self::Evaluate { options } => parse_evaluate(&options, &usage)?,
            Self::Report => Command::Report,
            Self::Record { options } => parse_record(&options, &usage)?,
            Self::HostConfig { host, file } => Command::HostConfig { host, file },
            Self::Target { name } => Command::Target { name },
            Self::Runs { action } => Command::Runs {
                action: match action {
                    None => RunsAction::List,
                    Some(RunsCli::Open { id }) => RunsAction::Open(id),
                    Some(RunsCli::Compare { a, b }) => RunsAction::Compare(a, b),
                },
            },
            Self::Attach { events, database } => Command::Attach { events, database },
            Self::New => Command::New,
            Self::Compare { plan } => Command::Compare { plan },
        })
    }
}

/// The clap definition of the console's command line, built once.
pub fn cli() -> &'static clap::Command {
    static CLI: std::sync::LazyLock<clap::Command> = std::sync::LazyLock::new(|| {
        <Line as clap::CommandFactory>::command()
            .mut_subcommands(|c| c.disable_help_flag(true).disable_help_subcommand(true))
    });
    &CLI
}

/// The usage line of a command (`launch [full|observed]`), generated from its clap definition:
/// possible values are spelled out (`a|b`), other values by their value names, and optional
/// positionals are bracketed together with the ones after them (`[claude|codex|cursor [FILE]]`).
pub fn usage(name: &str) -> String {
    match cli().find_subcommand(name) {
        Some(cmd) => render_usage(cmd),
        None => name.to_owned(),
    }
}

fn render_usage(cmd: &clap::Command) -> String {
    let mut words = vec![cmd.get_name().to_owned()];
    for arg in cmd.get_arguments().filter(|a| !a.is_positional()) {
        if let Some(long) = arg.get_long() {
            words.push(format!("[--{long}]"));
        }
    }
    let mut positionals = String::new();
    let mut open = 0;
    for arg in cmd.get_positionals() {
        let names: Vec<String> = arg
            .get_value_names()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect();
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect();
        let (required, multiple) = (
            arg.is_required_set(),
            arg.get_num_args().is_some_and(|n| n.max_values() > 1),
        );
        let text = if values.is_empty() {
            if multiple && names.len() > 1 {
                // Order-free `key=value` arguments: each one optional.
                let each: Vec<String> = names.iter().map(|n| format!("[{n}]")).collect();
                positionals.push(' ');
                positionals.push_str(&each.join(" "));
                continue;
            }
            names.join(" ")
        } else if arg.get_value_hint() == clap::ValueHint::FilePath {
            // A path or a keyword (`PLAN.jsonl|claude|codex`).
            std::iter::once(names.join(" "))
                .chain(values)
                .collect::<Vec<_>>()
                .join("|")
        } else {
            values.join("|")
        };
        positionals.push(' ');
        if required {
            positionals.push_str(&text);
        } else {
            positionals.push('[');
            positionals.push_str(&text);
            open += 1;
        }
    }
    positionals.push_str(&"]".repeat(open));
    let subcommands: Vec<String> = cmd.get_subcommands().map(render_usage).collect();
    if !subcommands.is_empty() {
        let joined = subcommands.join(" | ");
        if cmd.is_subcommand_required_set() {
            positionals.push_str(&format!(" {joined}"));
        } else {
            positionals.push_str(&format!(" [{joined}]"));
        }
    }
    words.join(" ") + &positionals
}

/// Argument alternatives of a command from its clap definition: the subcommands' names and the
/// positionals' visible possible values (`launch` → `full`, `observed`).
pub fn argument_choices(name: &str) -> Vec<String> {
    let Some(cmd) = cli().find_subcommand(name) else {
        return Vec::new();
    };
    let mut out: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for arg in cmd.get_positionals() {
        out.extend(
            arg.get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_owned()),
        );
    }
    out
}

/// `wait`'s optional seconds: a positive finite number, else [`DEFAULT_WAIT`].
fn wait_timeout(seconds: Option<&str>) -> Result<Duration, String> {
    match seconds {
        None => Ok(DEFAULT_WAIT),
        Some(s) => match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v)),
            _ => Err(format!("wait: `{s}` is not a positive number of seconds")),
        },
    }
}

/// `evaluate [repeat=K] [require=full-byte|behavioral] [check_timeout=S] [fresh_controls]`:
/// K in `1..=MAX_REPEAT` (V3, default 1), S in 1..=3600 seconds; any other argument is refused
/// naming it and the usage.
fn parse_evaluate(options: &[String], usage: impl Fn() -> String) -> Result<Command, String> {
    let (mut repeat, mut require, mut check_timeout, mut fresh_controls) = (1, None, None, false);
    for arg in options {
        match arg.split_once('=') {
            Some(("repeat", k)) => match k.parse::<u32>() {
                Ok(k) if (1..=crate::evaluate::MAX_REPEAT).contains(&k) => repeat = k,
                _ => {
                    return Err(format!(
                        "evaluate: `{arg}` is not repeat=K with K in 1..={}; {}",
                        crate::evaluate::MAX_REPEAT,
                        usage()
                    ));
                }
            },
            Some(("require", rule)) => {
                require = Some(
                    rule.parse::<crate::evaluate::Require>()
                        .map_err(|e| format!("evaluate: require={rule}: {e}"))?,
                );
            }
            Some(("check_timeout", secs)) => {
                let valid = secs
                    .parse::<u64>()
                    .ok()
                    .filter(|s| crate::evaluate::check_timeout_from_secs(*s).is_ok());
                check_timeout = Some(valid.ok_or_else(|| {
                    format!(
                        "evaluate: `{arg}` is not check_timeout=S with S whole seconds in 1..={}; {}",
                        crate::evaluate::MAX_CHECK_TIMEOUT_SECS,
                        usage()
                    )
                })?);
            }
            None if arg == "fresh_controls" || arg == "fresh-controls" => fresh_controls = true,
            _ => {
                return Err(format!(
                    "evaluate: `{arg}` is not repeat=K, require=full-byte|behavioral, \
                     check_timeout=S or fresh_controls; {}",
                    usage()
                ));
            }
        }
    }
    Ok(Command::Evaluate {
        repeat,
        require,
        check_timeout,
        fresh_controls,
    })
}

/// `record [model=M] [provider=P] [reasoning=R]` (E1): any number of these, the last of a
/// repeated key wins; any other argument is refused naming it and the usage.
fn parse_record(options: &[String], usage: impl Fn() -> String) -> Result<Command, String> {
    let (mut model, mut provider, mut reasoning) = (None, None, None);
    for arg in options {
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
    Ok(Command::Record {
        model,
        provider,
        reasoning,
    })
}

/// The options of `agent claude|codex|gemini|opencode` (A1–A4) as clap describes them: the source of their
/// usage line ([`agent_host_usage`]). [`parse_agent_host`] checks each key and value, so its
/// errors can say which one was wrong.
#[derive(Debug, clap::Args)]
struct AgentHostOptions {
    #[arg(num_args = 0.., value_names = ["model=M", "max_turns=N", "timeout=SECONDS"])]
    options: Vec<String>,
}

/// The usage line of `agent HOST` (`agent claude [model=M] [max_turns=N] [timeout=SECONDS]`),
/// generated from [`AgentHostOptions`] like every other usage line.
pub fn agent_host_usage(host: Host) -> String {
    let cmd = <AgentHostOptions as clap::Args>::augment_args(clap::Command::new(host.as_str()));
    format!("agent {}", render_usage(&cmd))
}

/// Parses `agent claude|codex|gemini|opencode [model=M] [max_turns=N] [timeout=SECONDS]`.
fn parse_agent_host(host: Host, options: &[String]) -> Result<Command, String> {
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
                    "agent {}: `{option}` is not model=…, max_turns=… or timeout=…; usage: {}",
                    host.as_str(),
                    agent_host_usage(host)
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

impl Command {
    /// Parses one command line (script line or `:` input), split like a shell line (quotes
    /// allowed in paths), with the clap definition [`Line`]. Errors name the command's usage.
    pub fn parse(line: &str) -> Result<Self, String> {
        let words = shlex::split(line)
            .ok_or_else(|| format!("unbalanced quotes or trailing `\\` in `{}`", line.trim()))?;
        let name = words.first().ok_or_else(|| "empty command".to_owned())?;
        if cli().find_subcommand(name).is_none() {
            let names: Vec<&str> = cli()
                .get_subcommands()
                .map(clap::Command::get_name)
                .collect();
            return Err(format!(
                "unknown command `{name}`; commands are: {}",
                names.join(", ")
            ));
        }
        let usage = || format!("usage: {}", usage(name));
        let matches = cli()
            .clone()
            .try_get_matches_from(&words)
            .map_err(|_| usage())?;
        let Line { command } =
            <Line as clap::FromArgMatches>::from_arg_matches(&matches).map_err(|_| usage())?;
        command.into_command(usage)
    }
}

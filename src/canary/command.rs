//! The one command set (SPEC U3): every console action is a [`Command`], reachable from a key,
//! the `:` command line and `--script` files alike. [`COMMANDS`] holds each command's key and
//! help line; the commands' arguments are defined once, by the clap definition [`Line`]
//! (`shlex`-split lines, `#[derive(Subcommand)]`, `ValueEnum`s), from which parsing, the usage
//! lines ([`usage`]) and `:` completion ([`complete`], [`argument_choices`]) are generated.

use std::path::PathBuf;
use std::time::Duration;

/// Which MCP process a command addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitFor {
    /// The observed process's resident worker reported ready.
    Ready,
    /// Every target has been saved at least once (a real agent host finished).
    Saved,
}

/// Agent host configurations `host-config` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
        <Self as clap::ValueEnum>::from_str(s, false).ok()
    }
}

/// One console action.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// C1: the fixture suite this run uses (its `manifest.json`, or the directory holding it);
    /// before `init`. In a script a relative path is relative to the script.
    Suite { path: PathBuf },
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
    /// C6: run the independent evaluator; each behavioral check runs `repeat` times (V3),
    /// judged by `require` (`full-byte` where exact bytes are the point; default
    /// behavioral), each check run killed after `check_timeout` seconds (default: the
    /// fixture's, else 120 s), controls re-run when `fresh_controls` (else reused from the
    /// control cache).
    Evaluate {
        repeat: u32,
        require: Option<crate::evaluate::Require>,
        check_timeout: Option<u64>,
        fresh_controls: bool,
    },
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
    /// Interactive console only: start the next run in this console once the current one is
    /// sealed.
    New,
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
    /// The key that runs the command with default arguments in the interactive console.
    pub key: Option<char>,
    pub help: &'static str,
}

impl CommandSpec {
    /// The command's usage line, generated from its clap definition (see [`usage`]).
    pub fn usage(&self) -> String {
        usage(self.name)
    }
}

/// The command table (U3): keys and help lines for `?` help and key bindings. The commands'
/// arguments (parsing, usage lines, `:` completion) are defined once, by [`Line`]'s clap
/// definition; a test keeps the two lists of names equal.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "suite",
        key: None,
        help: "the fixture suite the run uses (a suite directory or its manifest.json; before init)",
    },
    CommandSpec {
        name: "record",
        key: Some('c'),
        help: "record the agent's identity for the run manifest (before init)",
    },
    CommandSpec {
        name: "init",
        key: Some('i'),
        help: "authenticate fixtures and initialize the five targets through the full process",
    },
    CommandSpec {
        name: "launch",
        key: Some('l'),
        help: "start or restart MCP processes (both by default)",
    },
    CommandSpec {
        name: "preflight",
        key: Some('p'),
        help: "check tools/list = six, a full-profile call refused, worker ready, targets fresh",
    },
    CommandSpec {
        name: "agent",
        key: Some('a'),
        help: "run a scripted plan, or a real agent host sealed (model=M max_turns=N timeout=S)",
    },
    CommandSpec {
        name: "wait",
        key: None,
        help: "wait for the worker to be ready, or for every target to be saved",
    },
    CommandSpec {
        name: "export",
        key: Some('e'),
        help: "export every target's latest saved version through the full process",
    },
    CommandSpec {
        name: "inspect",
        key: Some('n'),
        help: "check SAVE/replay consistency and summarize the audit",
    },
    CommandSpec {
        name: "evaluate",
        key: Some('v'),
        help: "independent evaluator: repeat=K require=full-byte check_timeout=S fresh_controls",
    },
    CommandSpec {
        name: "report",
        key: Some('r'),
        help: "write the final report (text, JSON, JUnit XML) to the run directory",
    },
    CommandSpec {
        name: "stop",
        key: Some('s'),
        help: "stop MCP processes (both by default)",
    },
    CommandSpec {
        name: "host-config",
        key: Some('h'),
        help: "show the agent-host configuration for the observed process (or write it to FILE)",
    },
    CommandSpec {
        name: "target",
        key: None,
        help: "a target's story: verdicts, check output, submissions, diffs (Enter on TARGETS)",
    },
    CommandSpec {
        name: "runs",
        key: Some('u'),
        help: "past runs: list (date, model, verdicts), open one read-only, compare two",
    },
    CommandSpec {
        name: "attach",
        key: None,
        help: "interactive console: watch an observed process an agent host started (its perf events and store)",
    },
    CommandSpec {
        name: "new",
        key: None,
        help: "interactive console: start the next run once this one is sealed by `report`",
    },
];

/// Default wait timeout when none is given.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(600);

impl Command {
    /// The command's table name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Suite { .. } => "suite",
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
            Self::New => "new",
        }
    }

    /// Whether the command is a view (`target`, `runs`): it writes nothing into the run, is
    /// not a step of its report, and needs no run directory.
    pub fn is_view(&self) -> bool {
        matches!(self, Self::Target { .. } | Self::Runs { .. })
    }

    /// Whether the command may follow `report` on the same run — the views, which
    /// write nothing into it (`target`, `runs`), and `new`, which starts another run.
    pub fn allowed_after_seal(&self) -> bool {
        matches!(self, Self::Target { .. } | Self::Runs { .. } | Self::New)
    }

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
    command: Cli,
}

/// `full`, `observed`, or (hidden) `all`, which is the same as none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Which {
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
            [Host::Claude, Host::Codex]
                .into_iter()
                .map(|h| clap::builder::PossibleValue::new(h.as_str())),
        ))
    }
}

/// The commands, in [`COMMANDS`]' order. `key=value` arguments are positionals whose keys and
/// values are checked when converting to [`Command`] (so errors can say which key was wrong).
#[derive(Debug, clap::Subcommand)]
enum Cli {
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
    Attach {
        #[arg(value_name = "EVENTS.jsonl", value_hint = clap::ValueHint::FilePath)]
        events: PathBuf,
        #[arg(value_name = "DATABASE.sqlite", value_hint = clap::ValueHint::FilePath)]
        database: Option<PathBuf>,
    },
    New,
}

#[derive(Debug, clap::Subcommand)]
enum RunsCli {
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
    fn into_command(self, usage: impl Fn() -> String) -> Result<Command, String> {
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
                Some(host @ (Host::Claude | Host::Codex)) => parse_agent_host(host, &options)?,
                _ if options.is_empty() => Command::Agent {
                    plan: PathBuf::from(plan_or_host),
                },
                _ => return Err(usage()),
            },
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

/// The options of `agent claude|codex` (A1–A4) as clap describes them: the source of their
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

/// Parses `agent claude|codex [model=M] [max_turns=N] [timeout=SECONDS]`.
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

/// Parses `--set NAME=VALUE` arguments (one script, many models): `NAME` of `[A-Za-z_][A-Za-z0-9_]*`,
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

/// Completions for a partial `:` command line: command names (from the clap definition) with
/// the typed prefix.
pub fn complete(prefix: &str) -> Vec<&'static str> {
    cli()
        .get_subcommands()
        .map(clap::Command::get_name)
        .filter(|n| n.starts_with(prefix.trim_start()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// U3: every command of the table parses from a command line.
    #[test]
    fn parses_every_command_in_the_table() {
        for spec in COMMANDS {
            let line = match spec.name {
                "agent" => "agent plan.jsonl".to_owned(),
                "wait" => "wait ready 5".to_owned(),
                "attach" => "attach /tmp/e.jsonl /tmp/db.sqlite".to_owned(),
                "target" => "target chess".to_owned(),
                "suite" => "suite my-suite".to_owned(),
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
    fn evaluate_takes_repeat_rule_timeout_and_fresh_controls() {
        let evaluate = |repeat, require, check_timeout, fresh_controls| Command::Evaluate {
            repeat,
            require,
            check_timeout,
            fresh_controls,
        };
        assert_eq!(
            Command::parse("evaluate").unwrap(),
            evaluate(1, None, None, false)
        );
        assert_eq!(
            Command::parse("evaluate repeat=3").unwrap(),
            evaluate(3, None, None, false)
        );
        assert_eq!(
            Command::parse("evaluate require=full-byte check_timeout=30 fresh_controls").unwrap(),
            evaluate(1, Some(crate::evaluate::Require::FullByte), Some(30), true)
        );
        for (bad, says) in [
            ("evaluate repeat=0", "repeat=K"),
            ("evaluate 3", "is not repeat=K"),
            ("evaluate require=bytes", "`bytes` is not a rule"),
            ("evaluate check_timeout=0", "check_timeout=S"),
            ("evaluate check_timeout=3601", "check_timeout=S"),
        ] {
            let err = Command::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
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
    fn the_table_and_the_clap_definition_name_the_same_commands_in_order() {
        let table: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        let clap: Vec<&str> = cli()
            .get_subcommands()
            .map(clap::Command::get_name)
            .collect();
        assert_eq!(table, clap);
        cli().clone().debug_assert();
    }

    #[test]
    fn usage_lines_are_generated_from_the_clap_definition() {
        let usages: Vec<String> = COMMANDS.iter().map(CommandSpec::usage).collect();
        assert_eq!(
            usages,
            [
                "suite PATH",
                "record [model=M] [provider=P] [reasoning=R]",
                "init [--reset]",
                "launch [full|observed]",
                "preflight",
                "agent PLAN.jsonl|claude|codex [k=v…]",
                "wait ready|saved [SECONDS]",
                "export",
                "inspect",
                "evaluate [k=v…]",
                "report",
                "stop [full|observed]",
                "host-config [claude|codex|cursor [FILE]]",
                "target NAME",
                "runs [open ID | compare A B]",
                "attach EVENTS.jsonl [DATABASE.sqlite]",
                "new",
            ]
        );
    }

    #[test]
    fn argument_choices_come_from_possible_values_and_subcommands() {
        assert_eq!(argument_choices("launch"), ["full", "observed"]);
        assert_eq!(argument_choices("agent"), ["claude", "codex"]);
        assert_eq!(argument_choices("wait"), ["ready", "saved"]);
        assert_eq!(
            argument_choices("host-config"),
            ["claude", "codex", "cursor"]
        );
        assert_eq!(argument_choices("runs"), ["open", "compare"]);
        assert!(argument_choices("attach").is_empty());
        assert!(argument_choices("nope").is_empty());
    }

    #[test]
    fn lines_are_split_like_a_shell() {
        assert_eq!(
            Command::parse("attach '/tmp/my events.jsonl' \"/tmp/d b.sqlite\"").unwrap(),
            Command::Attach {
                events: "/tmp/my events.jsonl".into(),
                database: Some("/tmp/d b.sqlite".into()),
            }
        );
        assert!(
            Command::parse("attach 'open")
                .unwrap_err()
                .contains("unbalanced")
        );
    }

    #[test]
    fn the_old_syntax_still_parses() {
        let cases = [
            ("launch all", Command::Launch { which: None }),
            (
                "stop observed",
                Command::Stop {
                    which: Some(ProcessKind::Observed),
                },
            ),
            ("init --reset", Command::Init { reset: true }),
            (
                "record model=m provider=p reasoning=high",
                Command::Record {
                    model: Some("m".into()),
                    provider: Some("p".into()),
                    reasoning: Some("high".into()),
                },
            ),
            // As before, a repeated key is allowed and the last one wins.
            (
                "record model=a model=b provider=c reasoning=d",
                Command::Record {
                    model: Some("b".into()),
                    provider: Some("c".into()),
                    reasoning: Some("d".into()),
                },
            ),
            (
                "host-config cursor out.json",
                Command::HostConfig {
                    host: Some(Host::Cursor),
                    file: Some("out.json".into()),
                },
            ),
            (
                "runs compare a b",
                Command::Runs {
                    action: RunsAction::Compare("a".into(), "b".into()),
                },
            ),
            (
                "wait saved 2.5",
                Command::Wait {
                    what: WaitFor::Saved,
                    timeout: Duration::from_millis(2500),
                },
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(Command::parse(line).unwrap(), expected, "{line}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_with_the_generated_usage() {
        for (bad, usage) in [
            ("init --force", "usage: init [--reset]"),
            ("preflight now", "usage: preflight"),
            (
                "host-config vim",
                "usage: host-config [claude|codex|cursor [FILE]]",
            ),
            ("runs open", "usage: runs [open ID | compare A B]"),
            ("target", "usage: target NAME"),
            (
                "agent plan.jsonl extra",
                "usage: agent PLAN.jsonl|claude|codex [k=v…]",
            ),
            ("wait soon", "usage: wait ready|saved [SECONDS]"),
            ("launch --help", "usage: launch [full|observed]"),
            (
                "record foo",
                "record: `foo` is not model=…, provider=… or reasoning=…; \
                 usage: record [model=M] [provider=P] [reasoning=R]",
            ),
            (
                "agent codex turns=3",
                "agent codex: `turns=3` is not model=…, max_turns=… or timeout=…; \
                 usage: agent codex [model=M] [max_turns=N] [timeout=SECONDS]",
            ),
        ] {
            assert_eq!(Command::parse(bad).unwrap_err(), usage, "{bad}");
        }
    }

    #[test]
    fn a_script_step_after_report_is_refused_naming_its_line() {
        let err = parse_script("init\nreport\ntarget chess\nlaunch\nstop\n").unwrap_err();
        assert_eq!(
            err.lines().collect::<Vec<_>>(),
            [
                "line 4: `launch` comes after `report` (line 2), which seals the run; nothing \
                 may write to a sealed run (only `target` and `runs` views may follow)",
                "line 5: `stop` comes after `report` (line 2), which seals the run; nothing \
                 may write to a sealed run (only `target` and `runs` views may follow)",
            ]
        );
        assert!(parse_script("init\nreport\nruns\n").is_ok());
        assert!(
            parse_script("report\nnew\n")
                .unwrap_err()
                .contains("line 2: `new` works only in the interactive console")
        );
    }

    #[test]
    fn placeholders_take_set_values_quoted_or_their_default() {
        let script =
            "record model=${model} # ${not_one}\nagent claude model=${model:-x} timeout=${t:-60}\n";
        let filled = fill_placeholders(script, &[("model".into(), "my model".into())]).unwrap();
        assert_eq!(
            filled,
            "record model='my model' # ${not_one}\nagent claude model='my model' timeout=60\n"
        );
        let parsed = parse_script(&filled).unwrap();
        assert!(matches!(
            &parsed[0].1,
            Command::Record { model: Some(m), .. } if m == "my model"
        ));
    }

    #[test]
    fn an_unset_placeholder_and_an_unused_set_are_refused_naming_them() {
        let err = fill_placeholders("record model=${model}\ninit\n", &[]).unwrap_err();
        assert_eq!(
            err,
            "line 1: `${model}` has no value: give `--set model=VALUE`"
        );
        let err = fill_placeholders(
            "record model=${model}\n",
            &[
                ("model".into(), "m".into()),
                ("host".into(), "claude".into()),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err,
            "--set host=…: the script has no `${host}` placeholder (it has: model)"
        );
        assert!(
            fill_placeholders("init ${oops\n", &[])
                .unwrap_err()
                .contains("line 1")
        );
        assert!(
            parse_parameters(&["model".into()])
                .unwrap_err()
                .contains("NAME=VALUE")
        );
        assert!(
            parse_parameters(&["a=1".into(), "a=2".into()])
                .unwrap_err()
                .contains("twice")
        );
    }

    #[test]
    fn completion_matches_prefixes() {
        assert_eq!(complete("ex"), vec!["export"]);
        assert_eq!(complete("h"), vec!["host-config"]);
    }
}

//! The one command set (SPEC U3): every console action is a [`Command`], reachable from a key,
//! the `:` command line and `--script` files alike. [`COMMANDS`] holds each command's key and
//! help line; the commands' arguments are defined once, by the clap definition [`Line`]
//! (`shlex`-split lines, `#[derive(Subcommand)]`, `ValueEnum`s), from which parsing, the usage
//! lines ([`usage`]) and `:` completion ([`complete`], [`argument_choices`]) are generated.

mod cli;
mod script;
mod types;

pub use super::names::{Host, ProcessKind};
pub use cli::{Line, agent_host_usage, argument_choices, cli, usage};
pub use script::{fill_placeholders, parse_parameters, parse_script};
pub use types::{Command, DEFAULT_WAIT, RunsAction, WaitFor};

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
        name: "replica",
        key: None,
        help: "a scripted replica beside the next agent step: leases TARGET, submits PLAN (R1-R3)",
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
        name: "compare",
        key: None,
        help: "two agents compared: a plan's runs, a line each, then the report (PATCHDIFF_GATE2=open)",
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
    use std::time::Duration;

    /// U3: every command of the table parses from a command line.
    #[test]
    fn parses_every_command_in_the_table() {
        for spec in COMMANDS {
            let line = match spec.name {
                "agent" => "agent plan.jsonl".to_owned(),
                "replica" => "replica calendar replica.jsonl".to_owned(),
                "wait" => "wait ready 5".to_owned(),
                "attach" => "attach /tmp/e.jsonl /tmp/db.sqlite".to_owned(),
                "target" => "target chess".to_owned(),
                "suite" => "suite my-suite".to_owned(),
                "compare" => "compare plan.toml".to_owned(),
                other => other.to_owned(),
            };
            let cmd = Command::parse(&line).unwrap();
            assert_eq!(cmd.name(), spec.name);
        }
    }

    #[test]
    fn compare_takes_one_plan_path_and_its_usage_names_it() {
        assert_eq!(
            Command::parse("compare 'my plans/aa.toml'").unwrap(),
            Command::Compare {
                plan: "my plans/aa.toml".into()
            }
        );
        assert_eq!(usage("compare"), "compare PLAN.toml");
        for bad in ["compare", "compare a.toml b.toml"] {
            assert_eq!(
                Command::parse(bad).unwrap_err(),
                "usage: compare PLAN.toml",
                "{bad}"
            );
        }
        let compare = Command::parse("compare a.toml").unwrap();
        assert!(!compare.is_view() && !compare.needs_run_dir());
        assert!(Command::parse("init").unwrap().needs_run_dir());
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
                "agent PLAN.jsonl|claude|codex|gemini|opencode [k=v…]",
                "replica TARGET PLAN.jsonl",
                "wait ready|saved [SECONDS]",
                "export",
                "inspect",
                "evaluate [k=v…]",
                "report",
                "stop [full|observed]",
                "host-config [claude|codex|gemini|opencode|cursor [FILE]]",
                "target NAME",
                "runs [open ID | compare A B]",
                "compare PLAN.toml",
                "attach EVENTS.jsonl [DATABASE.sqlite]",
                "new",
            ]
        );
    }

    #[test]
    fn argument_choices_come_from_possible_values_and_subcommands() {
        assert_eq!(argument_choices("launch"), ["full", "observed"]);
        assert_eq!(
            argument_choices("agent"),
            ["claude", "codex", "gemini", "opencode"]
        );
        assert_eq!(argument_choices("wait"), ["ready", "saved"]);
        assert_eq!(
            argument_choices("host-config"),
            ["claude", "codex", "gemini", "opencode", "cursor"]
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
                "usage: host-config [claude|codex|gemini|opencode|cursor [FILE]]",
            ),
            ("runs open", "usage: runs [open ID | compare A B]"),
            ("target", "usage: target NAME"),
            (
                "agent plan.jsonl extra",
                "usage: agent PLAN.jsonl|claude|codex|gemini|opencode [k=v…]",
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

//! What `patchdiff mcp` is given as stdin and stdout (M1, `patchdiff::mcp::pipes`): a Unix
//! socket pair as Node hosts give (Claude Code, Gemini CLI, opencode), served non-blocking under
//! the reactor with the descriptors' flags put back at exit; and plain files, served through
//! tokio's own stdio as before. (Pipes are what every other test here uses.)

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::mcp::*;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use serde_json::{Value, json};

/// A guard against a missing answer, not a synchronization: answers come in milliseconds.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

fn initialize_line() -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "socketpair", "version": "1"}}})
    .to_string()
        + "\n"
        + r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        + "\n"
}

const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

fn nonblocking(fd: impl AsFd) -> bool {
    let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFL).expect("F_GETFL");
    OFlag::from_bits_truncate(flags).contains(OFlag::O_NONBLOCK)
}

fn mcp_command(env: &TestEnv) -> Command {
    let mut cmd = Command::new(exe());
    cmd.arg("mcp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.vars("observed"))
        .stderr(Stdio::null());
    cmd
}

/// The tool names of a `tools/list` answer.
fn tool_names(answer: &Value) -> Vec<String> {
    answer["result"]["tools"]
        .as_array()
        .expect("a tools/list result")
        .iter()
        .map(|t| t["name"].as_str().expect("a tool name").to_owned())
        .collect()
}

/// How the server's stdin and stdout are given.
#[derive(Clone, Copy)]
enum Layout {
    /// Two socket pairs, as Node's `child_process` gives.
    TwoPairs,
    /// One socket for both, as socat's `EXEC:` or inetd give: one description.
    OneSocket,
}

/// A `patchdiff mcp` child on Unix sockets, initialized.
struct OnSockets {
    child: std::process::Child,
    to_server: UnixStream,
    answers: std::io::Lines<BufReader<UnixStream>>,
    /// Second descriptors on the server's stdin and stdout descriptions, as a wrapper that
    /// passed its own stdio through would hold: the server's flag changes show on them.
    shared: [UnixStream; 2],
    _env: TestEnv,
}

impl OnSockets {
    fn start(profile: &str, layout: Layout) -> Self {
        let env = TestEnv::new();
        let (to_server, server_in) = UnixStream::pair().expect("socketpair");
        let (from_server, server_out) = match layout {
            Layout::TwoPairs => UnixStream::pair().expect("socketpair"),
            Layout::OneSocket => (
                to_server.try_clone().expect("dup"),
                server_in.try_clone().expect("dup"),
            ),
        };
        let shared = [
            server_in.try_clone().expect("dup"),
            server_out.try_clone().expect("dup"),
        ];
        for fd in &shared {
            assert!(!nonblocking(fd), "a fresh socket is blocking");
        }
        let mut cmd = mcp_command(&env);
        cmd.env("PATCHDIFF_MCP_PROFILE", profile);
        let child = cmd
            .stdin(Stdio::from(OwnedFd::from(server_in)))
            .stdout(Stdio::from(OwnedFd::from(server_out)))
            .spawn()
            .expect("spawn patchdiff mcp");
        from_server
            .set_read_timeout(Some(ANSWER_WITHIN))
            .expect("timeout");
        let mut served = Self {
            child,
            to_server,
            answers: BufReader::new(from_server).lines(),
            shared,
            _env: env,
        };
        served
            .to_server
            .write_all(initialize_line().as_bytes())
            .expect("write");
        let init = served.answer();
        assert_eq!(init["id"], 0, "{init}");
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        for fd in &served.shared {
            assert!(
                nonblocking(fd),
                "while serving, stdin and stdout are non-blocking under the reactor"
            );
        }
        served
    }

    fn answer(&mut self) -> Value {
        let line = self
            .answers
            .next()
            .expect("the server closed its stdout instead of answering")
            .expect("an answer within the guard time");
        serde_json::from_str(&line).expect("the answer is JSON")
    }

    /// Closes the server's stdin, which ends serving, then [`Self::exited_with_flags_put_back`].
    fn close_stdin(self) {
        self.to_server
            .shutdown(std::net::Shutdown::Write)
            .expect("shutdown");
        self.exited_with_flags_put_back("stdin closed");
    }

    /// Waits for the server to exit, successfully, and checks both descriptions are blocking
    /// again, as they were before it started.
    fn exited_with_flags_put_back(mut self, how: &str) {
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "patchdiff mcp exited {status} ({how})");
        for (fd, name) in self.shared.iter().zip(["stdin", "stdout"]) {
            assert!(
                !nonblocking(fd),
                "after the server exits ({how}), its {name}'s description is blocking again"
            );
        }
    }
}

#[test]
fn over_a_socket_pair_as_node_hosts_give_the_server_answers_non_blocking_and_puts_the_flags_back() {
    let mut served = OnSockets::start("observed", Layout::TwoPairs);
    writeln!(served.to_server, "{TOOLS_LIST}").expect("write");
    let list = served.answer();
    assert_eq!(list["id"], 1, "{list}");
    assert!(
        tool_names(&list).contains(&"patchdiff_read_target".to_owned()),
        "{list}"
    );
    served.close_stdin();
}

#[test]
fn stdin_and_stdout_on_one_socket_get_their_original_flags_back_not_the_other_streams() {
    let mut served = OnSockets::start("observed", Layout::OneSocket);
    writeln!(served.to_server, "{TOOLS_LIST}").expect("write");
    assert_eq!(served.answer()["id"], 1);
    served.close_stdin();
}

/// The workspace profile starts no worker, so nothing at shutdown gives a dropped serving loop
/// time to end by itself: the loop must be awaited. Several rounds, as a lost race shows only
/// sometimes.
#[test]
fn a_server_ended_by_sigterm_puts_its_stdio_flags_back_with_or_without_a_worker() {
    for (round, profile) in ["workspace", "workspace", "workspace", "observed"]
        .into_iter()
        .enumerate()
    {
        let served = OnSockets::start(profile, Layout::TwoPairs);
        let pid = nix::unistd::Pid::from_raw(served.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        served.exited_with_flags_put_back(&format!("SIGTERM, {profile} profile, round {round}"));
    }
}

#[test]
fn from_a_file_to_a_file_the_server_answers_through_tokios_stdio() {
    let env = TestEnv::new();
    let requests = env.path().join("requests.jsonl");
    let answers = env.path().join("answers.jsonl");
    std::fs::write(&requests, initialize_line() + TOOLS_LIST + "\n").expect("write requests");
    let stdin = std::fs::File::open(&requests).expect("open requests");
    let stdout = std::fs::File::create(&answers).expect("create answers");
    let mut child = mcp_command(&env)
        .stdin(stdin)
        .stdout(stdout)
        .spawn()
        .expect("spawn patchdiff mcp");
    let status = child.wait().expect("wait");
    assert!(status.success(), "patchdiff mcp exited {status}");
    let written = std::fs::read_to_string(&answers).expect("read answers");
    let answers: Vec<Value> = written
        .lines()
        .map(|l| serde_json::from_str(l).expect("an answer is JSON"))
        .collect();
    assert_eq!(answers.len(), 2, "one answer per request: {written}");
    assert_eq!(answers[0]["id"], 0);
    assert!(
        tool_names(&answers[1]).contains(&"patchdiff_observe_scope".to_owned()),
        "{written}"
    );
}

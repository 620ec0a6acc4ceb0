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

/// A `patchdiff mcp` child on two Unix socket pairs, as Node's `child_process` gives a server
/// its stdin and stdout, initialized.
struct OnSockets {
    child: std::process::Child,
    to_server: UnixStream,
    answers: std::io::Lines<BufReader<UnixStream>>,
    /// A second descriptor on the server's stdin description, as a wrapper that passed its own
    /// stdin through would hold: the server's flag changes show on it.
    shared_in: UnixStream,
    _env: TestEnv,
}

impl OnSockets {
    fn start() -> Self {
        let env = TestEnv::new();
        let (to_server, server_in) = UnixStream::pair().expect("socketpair");
        let (from_server, server_out) = UnixStream::pair().expect("socketpair");
        let shared_in = server_in.try_clone().expect("dup");
        assert!(!nonblocking(&shared_in), "a fresh socket is blocking");
        let child = mcp_command(&env)
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
            shared_in,
            _env: env,
        };
        served
            .to_server
            .write_all(initialize_line().as_bytes())
            .expect("write");
        let init = served.answer();
        assert_eq!(init["id"], 0, "{init}");
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
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
}

#[test]
fn over_a_socket_pair_as_node_hosts_give_the_server_answers_non_blocking_and_puts_the_flags_back() {
    let mut served = OnSockets::start();
    assert!(
        nonblocking(&served.shared_in),
        "while serving, stdin is read non-blocking under the reactor"
    );
    writeln!(served.to_server, "{TOOLS_LIST}").expect("write");
    let list = served.answer();
    assert_eq!(list["id"], 1, "{list}");
    assert!(
        tool_names(&list).contains(&"patchdiff_read_target".to_owned()),
        "{list}"
    );

    // Closing stdin ends serving; the server puts the description's flags back as it found them.
    let OnSockets {
        mut child,
        to_server,
        shared_in,
        ..
    } = served;
    drop(to_server);
    let status = child.wait().expect("wait");
    assert!(status.success(), "patchdiff mcp exited {status}");
    assert!(
        !nonblocking(&shared_in),
        "after the server exits, its stdin's description is blocking again"
    );
}

#[test]
fn a_server_ended_by_sigterm_also_puts_its_stdins_flags_back() {
    let mut served = OnSockets::start();
    assert!(nonblocking(&served.shared_in));
    let pid = nix::unistd::Pid::from_raw(served.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = served.child.wait().expect("wait");
    assert!(status.success(), "patchdiff mcp exited {status} on SIGTERM");
    assert!(
        !nonblocking(&served.shared_in),
        "a SIGTERM ends serving the same way as stdin closing, flags put back"
    );
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

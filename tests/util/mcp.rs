//! Shared helpers for the MCP integration tests: an isolated environment per test (temp data,
//! state and config dirs, its own database), a fixture target, and an `rmcp` client driving the
//! real `patchdiff mcp` binary as a child process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ErrorData, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The binary under test, `target/<profile>/patchdiff`: beside the `deps/` directory holding
/// the running test binary (cargo builds the package's binaries before its integration tests
/// and benches). A library cannot read `CARGO_BIN_EXE_patchdiff`, which cargo sets only while
/// compiling a test binary.
pub fn exe() -> &'static str {
    static EXE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let test = std::env::current_exe().expect("the test binary's path");
        let exe = test
            .parent()
            .and_then(Path::parent)
            .expect("test binaries live in target/<profile>/deps")
            .join("patchdiff");
        assert!(
            exe.is_file(),
            "{} is missing: run the tests with cargo, which builds it",
            exe.display()
        );
        exe.to_str().expect("a UTF-8 target directory").to_owned()
    });
    &EXE
}

/// A JavaScript target with a structural scope (`Calendar.addWindow`) in which one line occurs
/// twice, for the ambiguous-`old_text` domain error.
pub const CALENDAR_JS: &str = "class Calendar {\n  constructor() { this.windows = []; }\n  addWindow(w) {\n    this.windows.push(w);\n    this.windows.push(w);\n  }\n  count() { return this.windows.length; }\n}\nfunction parseLine(line) { return line.split(','); }\n";

/// `integrations/waymark` (with `node_modules` installed).
pub fn waymark_dir() -> PathBuf {
    crate::checkout().join("integrations/waymark")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One test's private world: its own directories and database.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    /// `PATCHDIFF_DATABASE_URL` for its processes when not the SQLite file in `dir` (issue 15:
    /// a PostgreSQL database of its own).
    pub database_url: Option<String>,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            database_url: None,
        }
    }

    /// A world whose processes use `database_url` (e.g. `postgres://…/t_1`) as their store.
    pub fn with_database_url(database_url: Option<String>) -> Self {
        Self {
            database_url,
            ..Self::new()
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn database(&self) -> PathBuf {
        self.path().join("pd.sqlite")
    }

    /// The complete environment for a `patchdiff mcp` child of `profile` (nothing inherited
    /// from the test runner's `PATCHDIFF_*` variables).
    pub fn vars(&self, profile: &str) -> BTreeMap<String, String> {
        let p = self.path();
        let mut v = BTreeMap::new();
        let mut set = |k: &str, val: String| {
            v.insert(k.to_owned(), val);
        };
        set("PATCHDIFF_MCP_PROFILE", profile.into());
        set(
            "PATCHDIFF_DATABASE_URL",
            self.database_url
                .clone()
                .unwrap_or_else(|| format!("sqlite://{}", self.database().display())),
        );
        set(
            "PATCHDIFF_CONFIG_DIR",
            p.join("config").display().to_string(),
        );
        set("PATCHDIFF_DATA_DIR", p.join("data").display().to_string());
        set("PATCHDIFF_STATE_DIR", p.join("state").display().to_string());
        set("PATCHDIFF_WAYMARK_DIR", waymark_dir().display().to_string());
        set(
            "PATCHDIFF_WAYMARK_WORK_ROOT",
            p.join("state/waymark").display().to_string(),
        );
        set("PATCHDIFF_WAYMARK_MODE", "resident".into());
        set("PATCHDIFF_STRICT_OBSERVATION_MODE", "1".into());
        v
    }

    /// Writes a fixture file and returns `(path, sha256)`.
    pub fn fixture(&self, name: &str, content: &str) -> (PathBuf, String) {
        let path = self.path().join(name);
        std::fs::write(&path, content).expect("write fixture");
        (path, sha256_hex(content.as_bytes()))
    }

    /// Initializes `target` from `content` through a full-profile process.
    pub async fn init_target(&self, target: &str, content: &str) {
        let (fixture, sha) = self.fixture(&format!("{target}.fixture.js"), content);
        let full = Mcp::launch(&self.vars("full")).await;
        let r = full
            .call(
                "patchdiff_init_target",
                json!({"target": target, "fixture": fixture, "sha256": sha, "language": "javascript"}),
            )
            .await
            .expect("init_target is a full-profile tool");
        assert!(!r.is_error.unwrap_or(false), "init failed: {r:?}");
        full.stop().await;
    }
}

/// An rmcp client connected to a `patchdiff mcp` child.
pub struct Mcp {
    pub pid: u32,
    client: RunningService<RoleClient, ()>,
}

impl Mcp {
    /// Spawns `patchdiff mcp` with exactly `vars` (plus PATH/HOME) and completes the handshake.
    pub async fn launch(vars: &BTreeMap<String, String>) -> Self {
        Self::launch_with_stderr(vars, Stdio::inherit()).await
    }

    pub async fn launch_with_stderr(vars: &BTreeMap<String, String>, stderr: Stdio) -> Self {
        let mut cmd = tokio::process::Command::new(exe());
        cmd.arg("mcp").env_clear();
        for k in ["PATH", "HOME", "LANG"] {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        cmd.envs(vars);
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(stderr)
            .spawn()
            .expect("spawn patchdiff mcp");
        let pid = transport.id().expect("child pid");
        let client = ().serve(transport).await.expect("MCP handshake");
        Self { pid, client }
    }

    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.client.peer()
    }

    pub async fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        names
    }

    /// Calls a tool; `Err` carries the JSON-RPC error.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<CallToolResult, ErrorData> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(match arguments {
            Value::Object(m) => m,
            _ => Map::new(),
        });
        match self.client.call_tool(params).await {
            Ok(r) => Ok(r),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(other) => panic!("{tool}: transport failure, not a JSON-RPC error: {other}"),
        }
    }

    /// Calls a tool that must succeed and returns its structured content.
    pub async fn ok(&self, tool: &str, arguments: Value) -> Value {
        let r = self
            .call(tool, arguments)
            .await
            .unwrap_or_else(|e| panic!("{tool}: JSON-RPC error {e:?}"));
        assert_ne!(r.is_error, Some(true), "{tool}: isError result {r:?}");
        r.structured_content.expect("structured content")
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

/// Pids of the direct children of `pid` (all threads), from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// Text of all text content blocks.
pub fn texts(r: &CallToolResult) -> Vec<String> {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// A `patchdiff mcp --http 127.0.0.1:0` child with its bearer token. Dropping it kills the
/// child; [`HttpServer::stop`] closes its stdin, which shuts it down cleanly.
pub struct HttpServer {
    pub child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    pub addr: std::net::SocketAddr,
    pub token: String,
}

impl HttpServer {
    pub async fn start(env: &TestEnv, profile: &str) -> Self {
        Self::start_with(env, profile, &[]).await
    }

    /// [`HttpServer::start`] with extra environment variables.
    pub async fn start_with(env: &TestEnv, profile: &str, extra: &[(&str, String)]) -> Self {
        use tokio::io::AsyncBufReadExt;
        let token_file = env.path().join(format!("{profile}.token"));
        let mut cmd = tokio::process::Command::new(exe());
        cmd.args(["mcp", "--http", "127.0.0.1:0", "--token-file"])
            .arg(&token_file)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.vars(profile))
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn patchdiff mcp --http");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let banner = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("listening banner within 30 s")
            .expect("read banner")
            .expect("banner line before exit");
        let url = banner
            .strip_prefix("patchdiff mcp: listening on ")
            .unwrap_or_else(|| panic!("unexpected banner {banner:?}"))
            .to_owned();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .expect("socket address in banner");
        let token = std::fs::read_to_string(&token_file).expect("token file");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "token file must be private");
        Self {
            child,
            url,
            addr,
            token,
        }
    }

    /// Sends one raw HTTP/1.1 POST to the endpoint and returns `(status, headers+body text)`.
    pub async fn post(&self, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        self.post_within(headers, body, std::time::Duration::from_secs(10))
            .await
    }

    /// [`HttpServer::post`] waiting up to `within` for the response (a large body's).
    pub async fn post_within(
        &self,
        headers: &[(&str, &str)],
        body: &str,
        within: std::time::Duration,
    ) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.addr)
            .await
            .expect("connect");
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).await.expect("send");
        // Read the status line and headers (the body of an SSE stream may stay open).
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let read = tokio::time::timeout(within, async {
            loop {
                let n = stream.read(&mut chunk).await.expect("read");
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                // Non-SSE responses end at EOF (`Connection: close`); an SSE response is
                // complete once it carries one whole `data:` event.
                let text = String::from_utf8_lossy(&buf);
                if let Some(end) = text.find("\r\n\r\n") {
                    let head = text[..end].to_ascii_lowercase();
                    let body = &text[end + 4..];
                    let whole_event = body
                        .find("data: {")
                        .is_some_and(|i| body[i..].contains("\n\n"));
                    if head.contains("text/event-stream") && whole_event {
                        break;
                    }
                }
            }
        })
        .await;
        assert!(read.is_ok(), "no HTTP response within {within:?}");
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {text:?}"));
        (status, text)
    }

    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        let status = tokio::time::timeout(std::time::Duration::from_secs(30), self.child.wait())
            .await
            .expect("HTTP server exits when stdin closes")
            .expect("wait");
        assert!(status.success(), "HTTP server exit: {status}");
    }
}

/// A JSON-RPC initialize request body.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-test","version":"0"}}}"#;

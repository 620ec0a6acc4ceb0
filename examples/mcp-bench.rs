//! Round-trip bench (not a test): p50/p99 of `patchdiff_read_target` on a 10 KB target over
//! stdio, measured with an `rmcp` client, and each server's CPU time per call (all its threads),
//! side by side in one run with
//! - a bare `rmcp` server (this binary, `--serve-bare BYTES TRANSPORT`) whose one tool returns
//!   the same structured result (same fields, same content bytes) with no store or profile work,
//!   served twice: on rmcp's own stdio transport (tokio's blocking-pool stdin/stdout; the goal
//!   is patchdiff ≤ 1.1× this at p50), and on the reactor pipes `patchdiff mcp` itself serves on
//!   (`patchdiff::mcp::pipes`), where the ratio is our handler's own cost alone;
//! - an `echo` tool returning the same 10 KB on a minimal official Python SDK server
//!   (`tests/python/echo_server.py`), skipped when the SDK is not installed.
//!
//! Then the wire-log bytes written per whole `read_target` of a 1 MiB target, before (one result
//! carrying the content twice) and after (pages, each message once) — issue 23 item 8.
//!
//! Run: `cargo run --release --example mcp-bench -- [--calls N] [--bytes B]` (defaults 500 calls,
//! 10240 bytes); it builds the `patchdiff` binary of the same profile first. The Python row needs `python3` with the SDK (`tests/requirements.txt`); needs the Waymark
//! `node_modules` (the observed process prewarms its worker, as in production). Builds its own
//! temporary database.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, bail};

#[path = "shared/patchdiff_exe.rs"]
mod patchdiff_exe;
use patchdiff_exe::patchdiff_exe;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

const WARMUP: usize = 50;

struct Args {
    calls: usize,
    bytes: usize,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        calls: 500,
        bytes: 10 * 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--calls" => args.calls = value.parse().context("--calls N")?,
            "--bytes" => args.bytes = value.parse().context("--bytes B")?,
            other => bail!("unknown flag {other}; accepted: --calls N, --bytes B"),
        }
    }
    if args.calls == 0 {
        bail!("--calls must be positive");
    }
    Ok(args)
}

/// A JavaScript target of about `bytes` bytes (a class with many small methods).
fn target_source(bytes: usize) -> String {
    let mut s = String::from("class Calendar {\n");
    let mut i = 0;
    while s.len() + 60 < bytes {
        s.push_str(&format!(
            "  m{i:04}(w) {{ return this.windows[{i}] || w; }}\n"
        ));
        i += 1;
    }
    s.push_str("}\n");
    s
}

async fn connect(cmd: tokio::process::Command) -> anyhow::Result<RunningService<RoleClient, ()>> {
    Ok(connect_pid(cmd).await?.0)
}

/// [`connect`], also giving the server's process id (for its CPU time, [`cpu_ms`]).
async fn connect_pid(
    mut cmd: tokio::process::Command,
) -> anyhow::Result<(RunningService<RoleClient, ()>, u32)> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    let pid = transport.id().context("the server exited at once")?;
    Ok((().serve(transport).await?, pid))
}

/// CPU time (user + system, all threads) process `pid` has used, in milliseconds, from
/// `/proc/PID/stat` (clock-tick resolution: 10 ms at the usual 100 Hz).
fn cpu_ms(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = stat
        .rsplit_once(')')
        .context("/proc stat without a command")?
        .1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks * 1000.0 / hz)
}

fn patchdiff_cmd(exe: &Path, vars: &BTreeMap<String, String>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("mcp").env_clear();
    for k in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.envs(vars);
    cmd
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> anyhow::Result<Value> {
    let mut p = CallToolRequestParams::new(tool.to_owned());
    p.arguments = Some(match args {
        Value::Object(m) => m,
        _ => Map::new(),
    });
    let r = client.call_tool(p).await?;
    if r.is_error == Some(true) {
        bail!("{tool} returned isError: {:?}", r.content);
    }
    r.structured_content
        .with_context(|| format!("{tool}: no structured content"))
}

/// Round-trip times in milliseconds of `calls` calls after [`WARMUP`] unmeasured ones.
async fn measure(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: &Value,
    calls: usize,
    expect_bytes: usize,
) -> anyhow::Result<Vec<f64>> {
    let first = call(client, tool, args.clone()).await?;
    let got = first["content"].as_str().map_or(0, str::len);
    if got + 64 < expect_bytes {
        bail!("{tool} returned {got} content bytes, expected about {expect_bytes}");
    }
    for _ in 0..WARMUP {
        call(client, tool, args.clone()).await?;
    }
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        call(client, tool, args.clone()).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Nearest-rank percentile of sorted `times`.
fn pct(times: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * times.len() as f64).ceil() as usize;
    times[rank.clamp(1, times.len()) - 1]
}

/// One server measured: its client, its process (for CPU time) and what is called on it.
struct Row {
    label: &'static str,
    client: RunningService<RoleClient, ()>,
    pid: u32,
    tool: &'static str,
    args: Value,
    /// Round-trip times of the measured calls, ms.
    times: Vec<f64>,
    /// The server's CPU time over every call made on it (measured and warm-up), ms.
    cpu_ms: f64,
}

impl Row {
    async fn start(
        label: &'static str,
        cmd: tokio::process::Command,
        tool: &'static str,
        args: Value,
    ) -> anyhow::Result<Self> {
        let (client, pid) = connect_pid(cmd).await?;
        Ok(Self {
            label,
            client,
            pid,
            tool,
            args,
            times: Vec::new(),
            cpu_ms: 0.0,
        })
    }

    /// One round: `calls` measured calls after the warm-up, and the CPU the server spent.
    async fn round(&mut self, calls: usize, expect_bytes: usize) -> anyhow::Result<()> {
        let before = cpu_ms(self.pid)?;
        let times = measure(&self.client, self.tool, &self.args, calls, expect_bytes).await?;
        self.cpu_ms += cpu_ms(self.pid)? - before;
        self.times.extend(times);
        Ok(())
    }
}

/// The bare baseline: an `rmcp` server whose only work per call is returning `body`
/// (structured content plus a one-line summary, as `patchdiff mcp` returns results).
#[derive(Clone)]
struct Bare {
    body: Value,
}

impl rmcp::ServerHandler for Bare {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        Ok(rmcp::model::ListToolsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            tools: Vec::new(),
            meta: None,
            next_cursor: None,
            ttl_ms: None,
            cache_scope: None,
        })
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let mut r =
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(format!(
                "revision {}, sha256 {}; the result is the structured content",
                self.body["revision"], self.body["sha256"]
            ))]);
        r.structured_content = Some(self.body.clone());
        Ok(rmcp::model::CallToolResponse::Complete(r))
    }
}

/// `--serve-bare BYTES TRANSPORT`: serves [`Bare`] over stdio with a read_target-shaped body,
/// through rmcp's own stdio (`rmcp-stdio`: tokio's blocking-pool stdin/stdout) or the reactor
/// pipes `patchdiff mcp` serves on (`reactor-pipes`, `patchdiff::mcp::pipes`).
async fn serve_bare(bytes: usize, transport: &str) -> anyhow::Result<()> {
    let source = target_source(bytes);
    let total = source.len();
    let body = json!({
        "revision": 0, "sha256": hex::encode(Sha256::digest(source.as_bytes())),
        "target": "calendar", "version": 0, "language": "javascript", "offset": 0,
        "next_offset": null, "has_more": false, "total": total, "start_line": 1,
        "end_line": source.lines().count(), "parses_cleanly": true, "content": source,
    });
    let service = match transport {
        "rmcp-stdio" => Bare { body }.serve(rmcp::transport::stdio()).await?,
        "reactor-pipes" => Bare { body }.serve(patchdiff::mcp::pipes::stdio()).await?,
        other => bail!("unknown transport {other}; accepted: rmcp-stdio, reactor-pipes"),
    };
    service.waiting().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--serve-bare") {
        let bytes = argv
            .get(2)
            .and_then(|b| b.parse().ok())
            .unwrap_or(10 * 1024);
        let transport = argv.get(3).map_or("rmcp-stdio", String::as_str);
        return serve_bare(bytes, transport).await;
    }
    let args = parse_args()?;
    let exe = patchdiff_exe()?;
    let dir = tempfile::tempdir()?;
    let root = concat!(env!("CARGO_MANIFEST_DIR"));
    let source = target_source(args.bytes);
    let fixture = dir.path().join("calendar.js");
    std::fs::write(&fixture, &source)?;
    let sha = hex::encode(Sha256::digest(source.as_bytes()));
    let mut vars = BTreeMap::new();
    for (k, v) in [
        (
            "PATCHDIFF_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("pd.sqlite").display()),
        ),
        (
            "PATCHDIFF_STATE_DIR",
            dir.path().join("state").display().to_string(),
        ),
        (
            "PATCHDIFF_DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
        (
            "PATCHDIFF_CONFIG_DIR",
            dir.path().join("config").display().to_string(),
        ),
        (
            "PATCHDIFF_WAYMARK_DIR",
            format!("{root}/integrations/waymark"),
        ),
        ("PATCHDIFF_WAYMARK_MODE", "resident".to_owned()),
        ("PATCHDIFF_STRICT_OBSERVATION_MODE", "1".to_owned()),
    ] {
        vars.insert(k.to_owned(), v);
    }

    let mut full_vars = vars.clone();
    full_vars.insert("PATCHDIFF_MCP_PROFILE".into(), "full".into());
    let full = connect(patchdiff_cmd(&exe, &full_vars)).await?;
    call(
        &full,
        "patchdiff_init_target",
        json!({"target": "calendar", "fixture": fixture, "sha256": sha, "language": "javascript"}),
    )
    .await?;
    full.cancel().await?;

    vars.insert("PATCHDIFF_MCP_PROFILE".into(), "observed".into());
    let bare_cmd = |transport: &str| {
        let mut cmd = tokio::process::Command::new(std::env::current_exe().expect("own path"));
        cmd.args(["--serve-bare", &args.bytes.to_string(), transport]);
        cmd
    };
    let mut rows = vec![
        Row::start(
            "patchdiff mcp / patchdiff_read_target",
            patchdiff_cmd(&exe, &vars),
            "patchdiff_read_target",
            json!({"target": "calendar"}),
        )
        .await
        .context("starting patchdiff mcp")?,
        Row::start(
            "bare rmcp, rmcp's stdio / same bytes",
            bare_cmd("rmcp-stdio"),
            "read",
            json!({}),
        )
        .await
        .context("starting the bare rmcp server")?,
        Row::start(
            "bare rmcp, reactor pipes / same bytes",
            bare_cmd("reactor-pipes"),
            "read",
            json!({}),
        )
        .await
        .context("starting the bare rmcp server on reactor pipes")?,
    ];
    let mut py = tokio::process::Command::new("python3");
    py.arg(format!("{root}/tests/python/echo_server.py"))
        .arg(args.bytes.to_string());
    match Row::start(
        "Python SDK MCPServer / echo",
        py,
        "echo",
        json!({"text": "calendar"}),
    )
    .await
    {
        Ok(row) => rows.push(row),
        Err(e) => eprintln!(
            "mcp-bench: Python SDK echo server not started ({e:#}); its row is skipped (pip install -r tests/requirements.txt)"
        ),
    }

    // Interleave rounds so all see the same machine load.
    let rounds = 5;
    let per_round = args.calls.div_ceil(rounds);
    for _ in 0..rounds {
        for row in &mut rows {
            row.round(per_round, args.bytes).await?;
        }
    }
    let calls_each = rounds * (per_round + WARMUP + 1);
    for row in &mut rows {
        row.times.sort_by(f64::total_cmp);
    }
    let profile = if cfg!(debug_assertions) {
        "debug (use --release for figures)"
    } else {
        "release"
    };
    println!(
        "mcp-bench: {} calls each, {} B structured result, rmcp client over stdio, {profile} build",
        rows[0].times.len(),
        args.bytes
    );
    println!(
        "{:<44} {:>9} {:>9} {:>14}",
        "server / tool", "p50 ms", "p99 ms", "CPU ms/call"
    );
    for row in &rows {
        println!(
            "{:<44} {:>9.3} {:>9.3} {:>14.3}",
            row.label,
            pct(&row.times, 50.0),
            pct(&row.times, 99.0),
            row.cpu_ms / calls_each as f64
        );
    }
    let ratio = |a: &Row, b: &Row, p: f64| pct(&a.times, p) / pct(&b.times, p);
    let (ours, stock, piped) = (&rows[0], &rows[1], &rows[2]);
    println!(
        "ratio patchdiff/bare rmcp on rmcp's stdio (goal <= 1.1): p50 {:.2}, p99 {:.2}",
        ratio(ours, stock, 50.0),
        ratio(ours, stock, 99.0)
    );
    println!(
        "ratio patchdiff/bare rmcp on the same reactor pipes (the handler's own cost): p50 {:.2}, p99 {:.2}; CPU {:.2}",
        ratio(ours, piped, 50.0),
        ratio(ours, piped, 99.0),
        ours.cpu_ms / piped.cpu_ms
    );
    if let Some(python) = rows.get(3) {
        println!(
            "ratio patchdiff/python: p50 {:.2}, p99 {:.2}",
            ratio(ours, python, 50.0),
            ratio(ours, python, 99.0)
        );
    }
    for row in rows {
        row.client.cancel().await?;
    }
    wire_log_per_read(&exe, &vars, dir.path()).await
}

/// Issue 23 item 8: wire-log bytes written per whole read of a 1 MiB target, side by side —
/// before: one result carrying the content twice (structured content and its JSON text copy,
/// as `patchdiff mcp` answered until the change), recorded through the real `WireLog`; after:
/// the real observed process's wire log while the target is read page by page.
async fn wire_log_per_read(
    exe: &Path,
    vars: &BTreeMap<String, String>,
    dir: &Path,
) -> anyhow::Result<()> {
    const BYTES: usize = 1024 * 1024;
    let source = target_source(BYTES);
    let fixture = dir.join("big.js");
    std::fs::write(&fixture, &source)?;
    let sha = hex::encode(Sha256::digest(source.as_bytes()));
    let mut full_vars = vars.clone();
    full_vars.insert("PATCHDIFF_MCP_PROFILE".into(), "full".into());
    let full = connect(patchdiff_cmd(exe, &full_vars)).await?;
    call(
        &full,
        "patchdiff_init_target",
        json!({"target": "big", "fixture": fixture, "sha256": sha, "language": "javascript"}),
    )
    .await?;
    full.cancel().await?;

    // Before: the request and the one result as they were written, content twice.
    let before_log = dir.join("before.mcp.jsonl");
    let log = patchdiff::evidence::WireLog::open(&before_log)?;
    let body = json!({
        "content": source, "language": "javascript", "parses_cleanly": true, "revision": 0,
        "sha256": sha, "target": "big", "version": 0,
    });
    let mut old = rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
        body.to_string(),
    )]);
    old.structured_content = Some(body);
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "patchdiff_read_target", "arguments": {"target": "big"}}});
    let result = json!({"jsonrpc": "2.0", "id": 1, "result": old});
    log.record(
        patchdiff::evidence::Direction::Request,
        request.to_string().as_bytes(),
    );
    log.record(
        patchdiff::evidence::Direction::Result,
        result.to_string().as_bytes(),
    );
    let before = std::fs::metadata(&before_log)?.len();

    // After: the real server's wire log over every page of the same content.
    let after_log = dir.join("after.mcp.jsonl");
    let mut observed = vars.clone();
    observed.insert(
        "PATCHDIFF_EVIDENCE_WIRE_LOG".into(),
        after_log.display().to_string(),
    );
    let ours = connect(patchdiff_cmd(exe, &observed)).await?;
    let start = std::fs::metadata(&after_log).map_or(0, |m| m.len());
    let (mut offset, mut pages, mut read) = (0u64, 0usize, String::new());
    loop {
        let page = call(
            &ours,
            "patchdiff_read_target",
            json!({"target": "big", "offset": offset}),
        )
        .await?;
        read.push_str(page["content"].as_str().unwrap_or_default());
        pages += 1;
        match page["next_offset"].as_u64() {
            Some(next) if page["has_more"] == true => offset = next,
            _ => break,
        }
    }
    ours.cancel().await?;
    if read != source {
        bail!(
            "the pages do not add up to the target ({} of {} bytes)",
            read.len(),
            source.len()
        );
    }
    let after = std::fs::metadata(&after_log)?.len() - start;
    println!();
    println!("wire-log bytes per read_target of a {BYTES} B target (requests + results):");
    println!(
        "{:<60} {:>12}",
        "before: one result, structured + JSON text copy", before
    );
    println!(
        "{:<60} {:>12}",
        format!("after: {pages} pages, each message once"),
        after
    );
    println!(
        "ratio after/before {:.2}; per page {} B",
        after as f64 / before as f64,
        after / pages as u64
    );
    Ok(())
}

//! Store backends for the contract suites (issue 15): one test body runs against SQLite and
//! PostgreSQL. [`backend_tests!`] turns a list of `fn name(b: Backend)` into `mod sqlite { … }`
//! and `mod postgres { … }`, so both backends get the same assertions under their own test names
//! (`sqlite::name`, `postgres::name`).
//!
//! PostgreSQL comes from, in this order:
//! 1. `PATCHDIFF_TEST_POSTGRES` — a `postgres://` URL of a server whose role may `CREATE
//!    DATABASE`; each test gets its own database `t_<pid>_<n>`, dropped when the test ends;
//! 2. a scratch cluster started once per test binary with `initdb` + `pg_ctl` (found on `PATH`,
//!    else in `/usr/lib/postgresql/<major>/bin`, highest major first) in a temp dir, listening
//!    on a free loopback port with its socket in that dir. `initdb` refuses to run as root, so
//!    when the euid is 0 the dir is handed to the `postgres` user and the tools run through
//!    `runuser -u postgres --`. The cluster keeps PostgreSQL's defaults (`fsync = on`,
//!    `synchronous_commit = on`): commits are as durable as in production. It is stopped with
//!    `pg_ctl stop -m immediate` and its dir removed at process exit (an `atexit` hook, because
//!    statics are never dropped) or when a [`ScratchCluster`] owned by a bench is dropped.
//!
//! When neither exists the PostgreSQL variant prints a loud `SKIPPED` line and passes — except
//! in CI (`CI=true` or `CI=1`), where a missing PostgreSQL fails the test.
//!
//! Databases are created with `psql` (the PostgreSQL client, installed with the server tools).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use patchdiff::store::EditStore;

/// The backend a contract test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Generates `mod sqlite` and `mod postgres`, each with one `#[test]` per listed function
/// `fn name(b: Backend)` of the enclosing module. The PostgreSQL variant skips (loudly, and
/// fails instead under CI) when no PostgreSQL is available.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::backends::Backend::Sqlite)
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $name() {
                    if $crate::backends::postgres_or_skip(concat!(module_path!(), "::", stringify!($name))) {
                        super::$name($crate::backends::Backend::Postgres)
                    }
                }
            )*
        }
    };
}

/// [`backend_tests!`] for `async fn name(b: Backend)` bodies (each on its own tokio runtime).
#[macro_export]
macro_rules! backend_tokio_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::backends::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    if $crate::backends::postgres_or_skip(concat!(module_path!(), "::", stringify!($name))) {
                        super::$name($crate::backends::Backend::Postgres).await
                    }
                }
            )*
        }
    };
}

/// True when `CI` says this is a CI run (`true` or `1`): a missing PostgreSQL is then a failure.
pub fn in_ci() -> bool {
    matches!(
        std::env::var("CI")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Ok("true" | "1")
    )
}

/// Whether a PostgreSQL variant can run. Prints a `SKIPPED` line naming `test` and the reason
/// when not; panics instead under CI.
pub fn postgres_or_skip(test: &str) -> bool {
    match server() {
        Ok(_) => true,
        Err(why) if in_ci() => panic!(
            "{test}: PostgreSQL is required in CI (CI={}) but unavailable: {why}",
            std::env::var("CI").unwrap_or_default()
        ),
        Err(why) => {
            // Straight to fd 2: libtest captures `eprintln!` of passing tests, and a skip must
            // be seen.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "\n*** SKIPPED {test} on PostgreSQL: {why}.\n*** Set PATCHDIFF_TEST_POSTGRES=postgres://… or install PostgreSQL (initdb, pg_ctl, psql).\n"
            );
            false
        }
    }
}

/// A PostgreSQL server tests create databases on.
pub enum Server {
    /// `PATCHDIFF_TEST_POSTGRES`.
    External { url: String },
    /// A cluster this process started.
    Scratch(ScratchCluster),
}

impl Server {
    /// The URL of the server's maintenance database (`postgres`), for `CREATE DATABASE`.
    pub fn admin_url(&self) -> String {
        match self {
            Server::External { url } => url.clone(),
            Server::Scratch(c) => c.url("postgres"),
        }
    }

    /// `admin_url` with its database replaced by `db`.
    pub fn url_for(&self, db: &str) -> String {
        with_database(&self.admin_url(), db)
    }
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// The process-wide PostgreSQL server, started on first use.
pub fn server() -> Result<&'static Server, String> {
    SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var("PATCHDIFF_TEST_POSTGRES")
                && !url.is_empty()
            {
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                    return Err(format!(
                        "PATCHDIFF_TEST_POSTGRES={url:?} is not a postgres:// or postgresql:// URL"
                    ));
                }
                return Ok(Server::External { url });
            }
            let cluster = ScratchCluster::start()?;
            extern "C" fn stop_at_exit() {
                if let Some(Ok(Server::Scratch(c))) = SERVER.get() {
                    c.stop();
                }
            }
            // SAFETY: registers a plain `extern "C" fn()` to run at process exit.
            unsafe { libc::atexit(stop_at_exit) };
            Ok(Server::Scratch(cluster))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Replaces the database (path) of a `postgres://` URL, keeping user, host, port and query.
pub fn with_database(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let (before_query, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or(before_query);
    let mut out = format!("{scheme}://{authority}/{db}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// A fresh, empty database on the server: its URL. Dropped (on an external server) with the
/// returned guard.
pub struct Database {
    pub url: String,
    name: String,
    drop_on_exit: bool,
}

impl Drop for Database {
    fn drop(&mut self) {
        if self.drop_on_exit
            && let Ok(server) = server()
        {
            let _ = psql(
                &server.admin_url(),
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            );
        }
    }
}

/// Creates database `t_<pid>_<n>` (unique across test binaries sharing a server).
pub fn fresh_database() -> Database {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let server = server().expect("PostgreSQL availability is checked before the test body");
    let name = format!(
        "t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    psql(&server.admin_url(), &format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
    Database {
        url: server.url_for(&name),
        name,
        drop_on_exit: matches!(server, Server::External { .. }),
    }
}

/// Runs one SQL command through `psql` against `url`.
pub fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new(pg_tool("psql").unwrap_or_else(|| PathBuf::from("psql")))
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-d",
            url,
            "-c",
            sql,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "psql {sql:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A PostgreSQL tool (`initdb`, `pg_ctl`, `psql`): on `PATH`, else in
/// `/usr/lib/postgresql/<major>/bin` (highest major first).
pub fn pg_tool(name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            Some((major, e.path().join("bin").join(name)))
        })
        .filter(|(_, p)| p.is_file())
        .collect();
    majors.sort();
    majors.pop().map(|(_, p)| p)
}

/// A PostgreSQL cluster in a temp dir, on a free loopback port. Stopped (`-m immediate`) and
/// its dir removed on drop.
pub struct ScratchCluster {
    dir: PathBuf,
    pub port: u16,
    pg_ctl: PathBuf,
    as_postgres: bool,
}

impl ScratchCluster {
    /// `initdb` + `pg_ctl start` with PostgreSQL's default durability settings. Errors say
    /// which tool is missing or what it printed.
    pub fn start() -> Result<ScratchCluster, String> {
        let initdb =
            pg_tool("initdb").ok_or("no initdb on PATH or in /usr/lib/postgresql/*/bin")?;
        let pg_ctl =
            pg_tool("pg_ctl").ok_or("no pg_ctl on PATH or in /usr/lib/postgresql/*/bin")?;
        pg_tool("psql").ok_or("no psql on PATH or in /usr/lib/postgresql/*/bin")?;
        let as_postgres = nix::unistd::geteuid().is_root();
        let dir = tempfile::Builder::new()
            .prefix("patchdiff-pg-")
            .tempdir()
            .map_err(|e| format!("temp dir for the scratch cluster: {e}"))?
            .keep();
        if as_postgres {
            let user = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .ok_or("running as root and there is no `postgres` user to run initdb as")?;
            nix::unistd::chown(&dir, Some(user.uid), Some(user.gid))
                .map_err(|e| format!("chown {} to postgres: {e}", dir.display()))?;
        }
        let mut cluster = ScratchCluster {
            dir,
            port: 0,
            pg_ctl,
            as_postgres,
        };
        let data = cluster.dir.join("data");
        // --no-sync only skips flushing initdb's own files; the running cluster keeps fsync on.
        cluster.run(
            &initdb,
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
                "--no-instructions".as_ref(),
            ],
        )?;
        // A free port can be taken between probing and binding: try a few.
        let mut last = String::new();
        for _ in 0..5 {
            cluster.port = free_port()?;
            let opts = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
                cluster.port,
                cluster.dir.display()
            );
            let log = cluster.dir.join("postgres.log");
            let pg_ctl = cluster.pg_ctl.clone();
            match cluster.run(
                &pg_ctl,
                &[
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-o".as_ref(),
                    opts.as_ref(),
                    "-l".as_ref(),
                    log.as_os_str(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                    "start".as_ref(),
                ],
            ) {
                Ok(_) => return Ok(cluster),
                Err(e) => {
                    last = format!(
                        "{e}; log: {}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    )
                }
            }
        }
        Err(format!("pg_ctl start failed 5 times: {last}"))
    }

    /// `postgres://postgres@127.0.0.1:PORT/db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    fn run(&self, tool: &Path, args: &[&std::ffi::OsStr]) -> Result<String, String> {
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(tool);
            c
        } else {
            Command::new(tool)
        };
        let out = cmd
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", tool.display()))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{} failed ({}): {}{}",
                tool.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// `pg_ctl stop -m immediate`, then removes the dir. Idempotent.
    pub fn stop(&self) {
        let data = self.dir.join("data");
        if data.join("postmaster.pid").exists() {
            let _ = self.run(
                &self.pg_ctl,
                &[
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-m".as_ref(),
                    "immediate".as_ref(),
                    "-w".as_ref(),
                    "stop".as_ref(),
                ],
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ScratchCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free loopback port: {e}"))
}

/// One test's store world on `backend`: a temp dir (SQLite file, fixtures, state) and, on
/// PostgreSQL, its own fresh database.
pub struct Scratch {
    pub backend: Backend,
    pub dir: tempfile::TempDir,
    database: Option<Database>,
}

impl Scratch {
    pub fn new(backend: Backend) -> Scratch {
        Scratch {
            backend,
            dir: tempfile::tempdir().expect("temp dir"),
            database: match backend {
                Backend::Sqlite => None,
                Backend::Postgres => Some(fresh_database()),
            },
        }
    }

    /// The SQLite database file (also used as the path argument on PostgreSQL, where it is
    /// ignored).
    pub fn sqlite_path(&self) -> PathBuf {
        self.dir.path().join("pd.sqlite")
    }

    /// `postgres://…` on PostgreSQL, `None` on SQLite.
    pub fn postgres_url(&self) -> Option<&str> {
        self.database.as_ref().map(|d| d.url.as_str())
    }

    /// What `PATCHDIFF_DATABASE_URL` is set to for processes using this world.
    pub fn database_url(&self) -> String {
        match self.postgres_url() {
            Some(url) => url.to_owned(),
            None => format!("sqlite://{}", self.sqlite_path().display()),
        }
    }

    /// The `DB` argument of `store-probe`: the SQLite path or the PostgreSQL URL.
    pub fn probe_arg(&self) -> String {
        match self.postgres_url() {
            Some(url) => url.to_owned(),
            None => self.sqlite_path().display().to_string(),
        }
    }

    /// A new store handle on this world's database (a new connection set, as another process
    /// would have; after dropping the others, a reopen).
    pub fn open(&self) -> Arc<dyn EditStore> {
        open(&self.sqlite_path(), self.postgres_url())
    }
}

impl Scratch {
    /// [`Scratch::open`] with how long a submission waits for its target's boundary (SQLite:
    /// the busy timeout and `flock` wait; PostgreSQL: the lock wait of the per-target lock)
    /// before failing with `STORAGE` "target … stayed busy".
    pub fn open_with_lock_wait(&self, wait: std::time::Duration) -> Arc<dyn EditStore> {
        match self.postgres_url() {
            None => {
                let s = patchdiff::store::SqliteStore::open(&self.sqlite_path())
                    .expect("open SQLite store");
                s.set_busy_timeout(wait).expect("set busy timeout");
                Arc::new(s)
            }
            Some(url) => {
                let s = patchdiff::store::PostgresStore::connect(url)
                    .unwrap_or_else(|e| panic!("connect PostgreSQL store: {e}"));
                s.set_busy_timeout(wait);
                Arc::new(s)
            }
        }
    }
}

/// Opens the backend the way the MCP server does (`open_backend`).
pub fn open(path: &Path, url: Option<&str>) -> Arc<dyn EditStore> {
    patchdiff::store::open_backend(path, url).unwrap_or_else(|e| {
        panic!(
            "opening the {} store: {e}",
            if url.is_some() {
                "PostgreSQL"
            } else {
                "SQLite"
            }
        )
    })
}

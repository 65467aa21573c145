//! A PostgreSQL server for the tests: `TEST_DATABASE_URL` when set, otherwise a throwaway
//! cluster started from the machine's PostgreSQL binaries in a temporary directory, on a
//! free loopback port, as the `postgres` user when the tests run as root. A watchdog
//! process stops it and removes its directory when the test process exits.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where per-test databases are created: an admin URL without the database name.
pub struct PgServer {
    /// e.g. `postgres://postgres@127.0.0.1:5433`
    pub base_url: String,
    /// The database to connect to for `CREATE DATABASE`.
    pub admin_db: String,
}

static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();

/// The shared server, or why there is none.
pub fn server() -> Result<&'static PgServer, &'static str> {
    SERVER.get_or_init(find_or_start).as_ref().map_err(String::as_str)
}

fn find_or_start() -> Result<PgServer, String> {
    if let Ok(url) = std::env::var("TEST_DATABASE_URL") {
        let (base, db) = url.rsplit_once('/').ok_or_else(|| format!("TEST_DATABASE_URL has no database: {url}"))?;
        return Ok(PgServer { base_url: base.to_owned(), admin_db: db.to_owned() });
    }
    start_cluster()
}

fn bindir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("SESSIOND_PG_BINDIR") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("no PostgreSQL installation found (/usr/lib/postgresql: {e})"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| "no initdb under /usr/lib/postgresql/*/bin".to_owned())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.trim_ascii() == b"0").unwrap_or(false)
}

/// A command run as the cluster's owner.
fn as_owner(root: bool, program: &Path) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(mut cmd: Command, what: &str) -> Result<(), String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn start_cluster() -> Result<PgServer, String> {
    let bin = bindir()?;
    let root = is_root();
    let dir = tempfile::Builder::new()
        .prefix("sessiond-pg-")
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?
        .keep();
    let data = dir.join("data");
    if root {
        run(
            {
                let mut c = Command::new("chown");
                c.arg("postgres:postgres").arg(&dir);
                c
            },
            "chown of the cluster directory",
        )?;
    }
    let mut initdb = as_owner(root, &bin.join("initdb"));
    initdb.arg("-D").arg(&data).args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "-N"]);
    run(initdb, "initdb")?;

    // Another test process may take the port between our probe and the start: retry.
    let mut last_err = String::new();
    for _ in 0..5 {
        let port = free_port()?;
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=300",
            dir.display()
        );
        let mut start = as_owner(root, &bin.join("pg_ctl"));
        start.arg("-D").arg(&data).args(["-o", &opts, "-w", "-t", "30", "-l"]).arg(dir.join("log")).arg("start");
        match run(start, "pg_ctl start") {
            Ok(()) => {
                spawn_watchdog(root, &bin, &dir);
                return Ok(PgServer {
                    base_url: format!("postgres://postgres@127.0.0.1:{port}"),
                    admin_db: "postgres".into(),
                });
            }
            Err(e) => last_err = e,
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Err(last_err)
}

/// Stops the cluster and removes its directory once this process is gone, however it ends.
fn spawn_watchdog(root: bool, bin: &Path, dir: &Path) {
    let stop = if root { "runuser -u postgres -- " } else { "" };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop}'{pg_ctl}' -D '{data}' stop -m immediate >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        pg_ctl = bin.join("pg_ctl").display(),
        data = dir.join("data").display(),
        dir = dir.display(),
    );
    let _ = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

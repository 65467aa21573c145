//! What the benchmarks share: a fresh database of either kind, and medians.

#[path = "../../tests/integration/support/pg.rs"]
#[allow(dead_code)]
mod pg;

pub mod nginx;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A fresh, empty database URL: a temporary SQLite file, or a new database on the
/// PostgreSQL server the tests use (`TEST_DATABASE_URL` or a throwaway cluster).
pub async fn database(backend: &str) -> (String, Option<tempfile::TempDir>) {
    match backend {
        "sqlite" => {
            let dir = tempfile::tempdir().expect("tempdir");
            (format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display()), Some(dir))
        }
        _ => {
            let server = pg::server().expect("PostgreSQL for the benchmark");
            let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
            let admin = Database::connect(format!("{}/{}", server.base_url, server.admin_db)).await.expect("connect");
            admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create database");
            (format!("{}/{name}", server.base_url), None)
        }
    }
}

pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// How many runs each figure is the median of: `--runs N` on the command line, default 3.
pub fn runs() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(3)
}

/// The median of several runs' figures, and the runs themselves (`a / b / c`).
pub fn over_runs(figures: &[f64], decimals: usize) -> (f64, String) {
    let mut sorted = figures.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let runs = figures.iter().map(|f| format!("{f:.decimals$}")).collect::<Vec<_>>().join(" / ");
    (median, runs)
}

/// The line that opens every benchmark's output: when, on which commit, how many runs.
pub fn stamp(command: &str) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let dirty = if git(&["status", "--porcelain", "--untracked-files=no"]).is_empty() { "" } else { " (modified)" };
    println!(
        "`{command}` — {} UTC, commit {}{dirty}, {} runs per figure, {} cores",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        git(&["rev-parse", "--short", "HEAD"]),
        runs(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
}

/// POSTs a GraphQL request as `token` through the router; a response with errors panics.
pub async fn graphql(router: &axum::Router, token: &str, query: &str, variables: Value) -> Value {
    let req = Request::post("/graphql")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(json!({"query": query, "variables": variables}).to_string()))
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    let v: Value = serde_json::from_slice(&resp.into_body().collect().await.expect("body").to_bytes()).expect("json");
    assert!(v.get("errors").is_none(), "{v}");
    v
}

/// A demo database of `backend` with `sessions` generated sessions (seed 1), served by the
/// in-process router, with a count of the statements it runs.
pub struct Bench {
    pub router: axum::Router,
    pub db: sea_orm::DatabaseConnection,
    statements: Arc<AtomicUsize>,
    /// Seconds `sessiond generate` took to add the sessions (debug or release, as built).
    pub generated_in: Option<f64>,
    _dir: Option<tempfile::TempDir>,
}

impl Bench {
    pub async fn new(backend: &str, sessions: u64) -> Bench {
        use sessiond::config::{DbArgs, HttpLimits};
        use sessiond::domain::directory::generate::{GenerateOptions, generate};
        let (url, dir) = database(backend).await;
        let (mut db, _) = sessiond::server::open_database(&DbArgs::of(url), true).await.expect("open");
        let mut generated_in = None;
        if sessions > 0 {
            let t = Instant::now();
            let opts = GenerateOptions { sessions, seed: 1, now: sessiond::domain::model::clock::now() };
            generate(&db, &opts).await.expect("generate");
            generated_in = Some(t.elapsed().as_secs_f64());
        }
        if backend == "postgres" && sessions > 0 {
            // Steady state: what autovacuum would have done after a bulk load. (Not on an
            // empty database: statistics saying "no rows" would mislead the planner as a
            // benchmark fills it.)
            db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
        }
        // The live feeds read on their own clone, taken before the counter is attached: they
        // run when they like, so their statements would blur the counts.
        let options = HttpLimits::default().live_options();
        let connections = sessiond::domain::live::LiveConnections::shared(&db);
        let live = sessiond::domain::live::Live::start(connections, options).await.expect("live feeds");
        let statements = Arc::new(AtomicUsize::new(0));
        let counter = statements.clone();
        db.set_metric_callback(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let launch = sessiond::domain::launch::LaunchLimits::of(sessiond::config::DEFAULT_MAX_LAUNCH_COUNT);
        let router =
            sessiond::http::app(sessiond::http::AppState::with(db.clone(), live, HttpLimits::default(), launch));
        Bench { router, db, statements, generated_in, _dir: dir }
    }

    /// Statements run so far.
    pub fn statements(&self) -> usize {
        self.statements.load(Ordering::Relaxed)
    }
}

/// sessiond itself, a release build in its own process on a fresh database: what a
/// benchmark of the whole server (sockets, streaming, memory) measures. Killed on drop.
pub struct Server {
    child: std::process::Child,
    pub base: String,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts the server on a new demo database of `backend`, first running `sessiond` with
    /// each of `prepare` (e.g. `generate`) on it.
    pub async fn start(backend: &str, prepare: &[&[&str]]) -> Server {
        // Nothing really runs: the figures are the server's alone.
        let flags = ["--runtime", "simulated", "--max-ws-connections", "5000", "--sim-step-ms", "20"];
        Self::start_with(backend, prepare, &flags).await
    }

    /// The same, with more flags for `serve`.
    pub async fn start_with(backend: &str, prepare: &[&[&str]], flags: &[&str]) -> Server {
        let (url, dir) = database(backend).await;
        for args in prepare {
            let status = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
                .args(*args)
                .args(["--database-url", &url])
                .env("SESSIOND_LOG", "error")
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run sessiond");
            assert!(status.success(), "sessiond {args:?}");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
        #[allow(clippy::zombie_processes)] // `Server` waits for it when dropped
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(["serve", "--demo", "--database-url", &url, "--bind", &format!("127.0.0.1:{port}")])
            .args(["--db-max-connections", "8"])
            .args(flags)
            .env("SESSIOND_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start sessiond");
        let server = Server { child, base: format!("127.0.0.1:{port}"), url, _dir: dir };
        let http = reqwest::Client::new();
        for _ in 0..600 {
            if http.get(format!("http://{}/readyz", server.base)).send().await.is_ok_and(|r| r.status().is_success()) {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("sessiond did not become ready");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Applies declaration file `file` to its database (`sessiond apply -f`).
    pub fn apply(&self, file: &std::path::Path) {
        let applied = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
            .args(["apply", "-f"])
            .arg(file)
            .args(["--database-url", &self.url])
            .output()
            .expect("apply");
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    }

    /// Resident memory of the server process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }

    /// POSTs a GraphQL request as alice.
    pub async fn gql(&self, query: &str, variables: Value) -> Value {
        reqwest::Client::new()
            .post(format!("http://{}/graphql", self.base))
            .bearer_auth("demo-alice")
            .json(&json!({"query": query, "variables": variables}))
            .send()
            .await
            .expect("POST /graphql")
            .json()
            .await
            .expect("JSON")
    }
}

/// Resident memory of process `pid`, in KiB (0 once it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// A figure of `/proc/<pid>/status` in KiB (`VmRSS`, `RssAnon`…), 0 once the process is gone.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|rest| rest.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Clock ticks of a process (user + system), from `/proc/<pid>/stat`.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { return 0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

/// The `p` percentile (0–1) of `xs`.
pub fn percentile(mut xs: Vec<f64>, p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let i = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[i.min(xs.len() - 1)]
}

/// Processes by pid: (parent, name, CPU ticks so far).
pub fn processes() -> std::collections::HashMap<u32, (u32, String, u64)> {
    let mut out = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let name = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        // After the name: state, ppid, …, utime (14th field of the line), stime (15th).
        out.insert(pid, (num(1) as u32, name, num(11) + num(12)));
    }
    out
}

/// `root` and its descendants, parents first.
pub fn tree(root: u32) -> Vec<u32> {
    let all = processes();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        let mut children: Vec<u32> = all.iter().filter(|(_, (pp, _, _))| *pp == parent).map(|(p, _)| *p).collect();
        children.sort();
        out.extend(children);
        i += 1;
    }
    out
}

pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// CPU seconds so far of the process tree at `root`, and of every `postgres` process.
pub fn cpu_seconds(root: u32) -> (f64, f64) {
    let all = processes();
    let hz = clock_ticks();
    let ours: u64 = tree(root).iter().filter_map(|p| all.get(p)).map(|(_, _, t)| t).sum();
    let pg: u64 = all.values().filter(|(_, name, _)| name == "postgres").map(|(_, _, t)| t).sum();
    (ours as f64 / hz, pg as f64 / hz)
}

//! The local runtime on this machine: a release server (its own process, SQLite,
//! `--runtime local`) really running sessions in bubblewrap sandboxes.
//!
//! - **Launch to RUNNING**: 50 batch sessions running `true`, one after the other; for each,
//!   the time from its creation to its RUNNING transition (so on top of the scheduler's
//!   wake-up and the runtime's tick), p50 and p99.
//! - **50 sessions at once**: 50 interactive sessions (`sleep`) launched in one call; the
//!   time until all run, each supervisor's memory (`VmRSS`, and `RssAnon`: its own heap),
//!   the server's and the supervisors' CPU over 20 s while nothing happens, and the time
//!   from terminating them all to all TERMINATED.
//!
//! `cargo bench --bench local_runtime [-- --runs N]` (default 3 runs per figure; needs
//! bubblewrap).

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, cpu_ticks, over_runs, percentile, runs, stamp, status_kib};

const SESSIONS: usize = 50;
const IDLE_WINDOW: Duration = Duration::from_secs(20);

/// A small image: 50 sessions fit the machine's 2 cores (0.04 each; limits are whole cores).
const TINY: &str = "INSERT INTO images (name, supported_types, minimum_slots, apps, created_at)
  VALUES ('bench:tiny', '[\"INTERACTIVE\",\"BATCH\"]', '{\"cpu\": 0.01, \"mem\": 16777216}', '[\"terminal\"]', CURRENT_TIMESTAMP)";
const ROOMY_POLICY: &str = "UPDATE keypair_resource_policies SET max_concurrent_sessions = 1000,
  max_pending_sessions = 1000, total_resource_slots = '{}'";

fn input(name: &str, batch: bool) -> Value {
    let mut i = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0,
        "name": name, "image": "bench:tiny", "resourceGroup": "local",
        "resources": [{"slot": "cpu", "amount": 0.04}, {"slot": "mem", "amount": 64 << 20}],
    });
    if batch {
        i["type"] = json!("BATCH");
        i["startupCommand"] = json!("true");
    }
    i
}

/// The supervisors running now (`sessiond supervise`).
fn supervisors() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let words: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            (words.get(1) == Some(&&b"supervise"[..])).then_some(pid)
        })
        .collect()
}

async fn wait_all(server: &Server, ids: &[String], done: &[&str]) -> Vec<Value> {
    let query = "query($id: ID!) { session(id: $id) { status createdAt statusTransitions { toStatus occurredAt } } }";
    let mut out = Vec::new();
    for id in ids {
        loop {
            let r = server.gql(query, json!({"id": id})).await;
            let s = r["data"]["session"].clone();
            if done.contains(&s["status"].as_str().unwrap_or("")) {
                out.push(s);
                break;
            }
            assert!(!["ERROR", "CANCELLED"].contains(&s["status"].as_str().unwrap_or("")), "{r}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    out
}

fn at(s: &Value, status: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    s["statusTransitions"].as_array()?.iter().find(|t| t["toStatus"] == status)?["occurredAt"].as_str()?.parse().ok()
}

/// The runtime directory; when the benchmark ends, however it ends, every session still
/// running is asked to stop (supervisors outlive the server).
struct Machine(tempfile::TempDir);

impl Drop for Machine {
    fn drop(&mut self) {
        let sessions = self.0.path().join("runtime").join("sessions");
        for d in std::fs::read_dir(&sessions).into_iter().flatten().flatten() {
            std::fs::write(d.path().join("stop"), b"").ok();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !supervisors().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench local_runtime");
    let machine = Machine(tempfile::tempdir().expect("tempdir"));
    let root = &machine.0;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    let dir = root.path().join("runtime");
    let server =
        Server::start_with("sqlite", &[], &["--runtime", "local", "--runtime-dir", dir.to_str().expect("utf8")]).await;
    let db = Database::connect(&server.url).await.expect("database");
    db.execute_unprepared(TINY).await.expect("image");
    db.execute_unprepared(ROOMY_POLICY).await.expect("policy");

    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let many =
        "mutation($i: LaunchSessionInput!, $n: Int!) { launchSessions(input: $i, count: $n) { sessions { id } } }";
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    let mut startups = Vec::new();
    let mut all_running = Vec::new();
    let mut supervisor_rss = Vec::new();
    let mut supervisor_anon = Vec::new();
    let mut server_idle = Vec::new();
    let mut supervisors_idle = Vec::new();
    let mut stops = Vec::new();
    let tick = 100.0; // clock ticks per second (USER_HZ)
    for run in 0..runs() {
        // Launch to RUNNING, one batch `true` after the other.
        let mut waits = Vec::new();
        for n in 0..SESSIONS {
            let r = server.gql(launch, json!({"i": input(&format!("true-{run}-{n}"), true)})).await;
            let id = r["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
            let s = wait_all(&server, &[id], &["TERMINATED"]).await.remove(0);
            let created: chrono::DateTime<chrono::Utc> =
                s["createdAt"].as_str().and_then(|c| c.parse().ok()).expect("createdAt");
            let running = at(&s, "RUNNING").expect("went through RUNNING");
            waits.push((running - created).num_microseconds().unwrap_or(0) as f64 / 1000.0);
        }
        p50s.push(percentile(waits.clone(), 0.5));
        p99s.push(percentile(waits, 0.99));

        // 50 at once.
        let started = Instant::now();
        let r = server.gql(many, json!({"i": input(&format!("sleep-{run}"), false), "n": SESSIONS})).await;
        let ids: Vec<String> = r["data"]["launchSessions"]["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect();
        let running = wait_all(&server, &ids, &["RUNNING"]).await;
        all_running.push(started.elapsed().as_secs_f64() * 1000.0);
        let first = running.iter().filter_map(|s| at(s, "RUNNING")).min().expect("one ran");
        let created = running
            .iter()
            .filter_map(|s| s["createdAt"].as_str()?.parse::<chrono::DateTime<chrono::Utc>>().ok())
            .min()
            .expect("created");
        startups.push((first - created).num_milliseconds() as f64);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let sups = supervisors();
        assert_eq!(sups.len(), SESSIONS, "one supervisor per session");
        let mut rss: Vec<f64> = sups.iter().map(|p| status_kib(*p, "VmRSS") as f64 / 1024.0).collect();
        let mut anon: Vec<f64> = sups.iter().map(|p| status_kib(*p, "RssAnon") as f64 / 1024.0).collect();
        supervisor_rss.push(percentile(std::mem::take(&mut rss), 0.5));
        supervisor_anon.push(percentile(std::mem::take(&mut anon), 0.5));
        let (s0, p0) = (cpu_ticks(server.pid()), sups.iter().map(|p| cpu_ticks(*p)).sum::<u64>());
        tokio::time::sleep(IDLE_WINDOW).await;
        let (s1, p1) = (cpu_ticks(server.pid()), sups.iter().map(|p| cpu_ticks(*p)).sum::<u64>());
        let window = IDLE_WINDOW.as_secs_f64();
        server_idle.push((s1 - s0) as f64 / tick / window * 100.0);
        supervisors_idle.push((p1.saturating_sub(p0)) as f64 / tick / window * 100.0);

        let asked = Instant::now();
        let r = server
            .gql("mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }", json!({"ids": ids}))
            .await;
        assert!(r.get("errors").is_none(), "{r}");
        wait_all(&server, &ids, &["TERMINATED"]).await;
        stops.push(asked.elapsed().as_secs_f64() * 1000.0);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !supervisors().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let row = |what: &str, figures: &[f64], unit: &str, decimals: usize| {
        let (median, runs) = over_runs(figures, decimals);
        println!("| {what} | {median:.decimals$} {unit} | {runs} |");
    };
    println!("| figure | median | runs |");
    println!("|---|---|---|");
    row("launch to RUNNING, batch `true`, p50 of 50", &p50s, "ms", 0);
    row("launch to RUNNING, batch `true`, p99 of 50", &p99s, "ms", 0);
    row("50 sessions in one launch: the first RUNNING after creation", &startups, "ms", 0);
    row("50 sessions in one launch: all RUNNING", &all_running, "ms", 0);
    row("a supervisor's resident memory (median of 50)", &supervisor_rss, "MiB", 1);
    row("a supervisor's own heap, RssAnon (median of 50)", &supervisor_anon, "MiB", 2);
    row("server CPU with 50 sessions running, idle", &server_idle, "% of a core", 2);
    row("the 50 supervisors' CPU, idle, together", &supervisors_idle, "% of a core", 2);
    row("terminate 50: all TERMINATED", &stops, "ms", 0);
}

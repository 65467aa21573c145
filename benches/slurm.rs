//! The Slurm engine against a real cluster on this machine (the tests' cluster: munge,
//! slurmctld, two slurmd and slurmrestd, here declaring 50 CPUs and 64 GiB per node: a
//! hundred sessions of a core each run at once) and a release server (its own process,
//! SQLite).
//!
//! - **Launch to RUNNING**: 50 batch sessions (`true`), one after the other; for each, the
//!   time from its creation to its RUNNING transition, p50 and p99.
//! - **500 submitted**: 5 × `launchSessions(count: 100)` of interactive sessions; the time
//!   until every one is RUNNING or placed in Slurm's queue (SCHEDULED with its Slurm reason).
//! - **Idle**: the server's CPU over 20 s while 100 of them run and 400 wait in Slurm's
//!   queue, and nothing changes.
//! - **Reconcile with 1 000 tagged jobs**: 500 more launched (1 000 jobs in Slurm), then one
//!   look of a fresh engine (as after a restart) in this process, on the server's database:
//!   its time and its SQL statements.
//!
//! `cargo bench --bench slurm [-- --runs N]` (default 3 runs per figure; needs root and
//! Debian's slurm-wlm, slurmrestd and munge).

#[allow(dead_code)]
#[path = "../tests/integration/support/slurm.rs"]
mod cluster;
#[path = "../tests/integration/support/required.rs"]
mod required;
#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::domain::runtime::Runtime;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, cpu_ticks, over_runs, percentile, runs, stamp};

const SEQUENTIAL: usize = 50;
const IDLE_WINDOW: Duration = Duration::from_secs(20);

const TINY: &str = "INSERT INTO images (name, supported_types, minimum_slots, apps, created_at)
  VALUES ('bench:tiny', '[\"INTERACTIVE\",\"BATCH\"]', '{\"cpu\": 0.01, \"mem\": 16777216}', '[\"terminal\"]', CURRENT_TIMESTAMP)";
const ROOMY: &[&str] = &[
    "UPDATE keypair_resource_policies SET max_concurrent_sessions = 5000, max_pending_sessions = 5000, total_resource_slots = '{}'",
    "UPDATE domains SET total_resource_slots = '{}'",
];

fn input(name: &str, batch: bool) -> Value {
    let mut i = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0,
        "name": name, "image": "bench:tiny", "resourceGroup": "hpc",
        "resources": [{"slot": "cpu", "amount": 0.01}, {"slot": "mem", "amount": 16 << 20}],
    });
    if batch {
        i["type"] = json!("BATCH");
        i["startupCommand"] = json!("true");
    }
    i
}

const STATE: &str = "query($id: ID!) { session(id: $id) { status createdAt pendingReasons { code }
  statusTransitions { toStatus occurredAt } } }";

/// Running, or waiting in Slurm's queue with its reason.
fn placed(s: &Value) -> bool {
    s["status"] == "RUNNING"
        || (s["status"] == "SCHEDULED" && s["pendingReasons"].as_array().is_some_and(|r| !r.is_empty()))
}

async fn wait_for(server: &Server, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    loop {
        let s = server.gql(STATE, json!({"id": id})).await["data"]["session"].clone();
        if done(&s) {
            return s;
        }
        assert!(!["ERROR", "CANCELLED"].contains(&s["status"].as_str().unwrap_or("")), "{s}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn at(s: &Value, status: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    s["statusTransitions"].as_array()?.iter().find(|t| t["toStatus"] == status)?["occurredAt"].as_str()?.parse().ok()
}

async fn launch_many(server: &Server, name: &str, n: usize) -> Vec<String> {
    let many =
        "mutation($i: LaunchSessionInput!, $n: Int!) { launchSessions(input: $i, count: $n) { sessions { id } } }";
    let r = server.gql(many, json!({"i": input(name, false), "n": n})).await;
    r["data"]["launchSessions"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

async fn terminate_all(server: &Server, ids: &[String]) {
    for chunk in ids.chunks(500) {
        let r = server
            .gql(
                "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }",
                json!({"ids": chunk}),
            )
            .await;
        assert!(r.get("errors").is_none(), "{r}");
    }
    for id in ids {
        wait_for(server, id, |s| s["status"] == "TERMINATED").await;
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench slurm");
    let c = cluster::start_sized(50, 65536).expect("a Slurm cluster (root, slurm-wlm, slurmrestd, munge)");
    let server = Server::start_with("sqlite", &[], &["--terminate-grace-ms", "2000"]).await;
    let db = Database::connect(&server.url).await.expect("database");
    db.execute_unprepared(TINY).await.expect("image");
    for sql in ROOMY {
        db.execute_unprepared(sql).await.expect("limits");
    }
    let declaration = tempfile::NamedTempFile::new().expect("declaration");
    let text = format!(
        "{}\n[engines.demo]\nkind = \"simulated\"\n[resource_groups.default]\nengine = \"demo\"\n\
         [resource_groups.hpc]\nengine = \"cluster\"\n[domains.default]\n\
         [projects.\"default/default\"]\nresource_groups = [\"default\", \"hpc\"]\n",
        c.engine_toml("cluster")
    );
    std::fs::write(declaration.path(), text).expect("write");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_sessiond"))
        .args(["apply", "-f"])
        .arg(declaration.path())
        .args(["--database-url", &server.url])
        .env("SESSIOND_LOG", "error")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("apply");
    assert!(status.success());
    let engines = "{ runtime { engines { name nodes } } }";
    while server.gql(engines, json!({})).await.to_string().matches("\"nodes\":2").count() == 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let (mut p50s, mut p99s, mut placed_500, mut idle, mut reconcile_ms, mut statements) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let tick = 100.0; // USER_HZ
    for run in 0..runs() {
        c.cancel_all();
        let mut waits = Vec::new();
        for n in 0..SEQUENTIAL {
            let r = server.gql(launch, json!({"i": input(&format!("true-{run}-{n}"), true)})).await;
            let id = r["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
            let s = wait_for(&server, &id, |s| s["status"] == "TERMINATED").await;
            let created: chrono::DateTime<chrono::Utc> =
                s["createdAt"].as_str().and_then(|c| c.parse().ok()).expect("createdAt");
            let running = at(&s, "RUNNING").expect("went through RUNNING");
            waits.push((running - created).num_microseconds().unwrap_or(0) as f64 / 1000.0);
        }
        p50s.push(percentile(waits.clone(), 0.5));
        p99s.push(percentile(waits, 0.99));

        // 500 at once, in five calls of 100.
        let started = Instant::now();
        let mut ids = Vec::new();
        for k in 0..5 {
            ids.extend(launch_many(&server, &format!("many-{run}-{k}"), 100).await);
        }
        for id in &ids {
            wait_for(&server, id, placed).await;
        }
        placed_500.push(started.elapsed().as_secs_f64() * 1000.0);

        // Idle: the server's CPU while what runs keeps running.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = cpu_ticks(server.pid());
        // `SESSIOND_BENCH_PERF=<dir>`: the window profiled with `perf record` as well.
        let profile = std::env::var("SESSIOND_BENCH_PERF").ok().map(|dir| {
            std::process::Command::new("perf")
                .args(["record", "-F", "499", "-g", "-o"])
                .arg(std::path::Path::new(&dir).join(format!("slurm-idle-{run}.data")))
                .args(["-p", &server.pid().to_string(), "--", "sleep"])
                .arg(IDLE_WINDOW.as_secs().to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("perf")
        });
        tokio::time::sleep(IDLE_WINDOW).await;
        if let Some(mut perf) = profile {
            perf.wait().ok();
        }
        idle.push((cpu_ticks(server.pid()) - before) as f64 / tick / IDLE_WINDOW.as_secs_f64() * 100.0);

        // 1 000 tagged jobs, then one look of a fresh engine.
        for k in 0..5 {
            ids.extend(launch_many(&server, &format!("more-{run}-{k}"), 100).await);
        }
        for id in &ids {
            wait_for(&server, id, placed).await;
        }
        let mut counted = Database::connect(&server.url).await.expect("database");
        let n = Arc::new(AtomicUsize::new(0));
        let counter = n.clone();
        counted.set_metric_callback(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let engines = sessiond::domain::runtime::engines::stored(&counted).await.expect("engines");
        let sessiond::domain::runtime::engines::EngineSettings::Slurm(settings) = engines["cluster"].settings.clone()
        else {
            panic!("a Slurm engine")
        };
        let engine = sessiond::domain::runtime::slurm::SlurmEngine::new(
            "cluster".into(),
            "hpc".into(),
            *settings,
            Duration::from_secs(2),
            Default::default(),
        );
        let bus = sessiond::domain::live::events::EventBus::start(
            Database::connect(&server.url).await.expect("database"),
            16,
        )
        .await
        .expect("an event bus");
        n.store(0, Ordering::Relaxed);
        let look = Instant::now();
        engine.drive(&counted, &bus).await.expect("a look");
        reconcile_ms.push(look.elapsed().as_secs_f64() * 1000.0);
        statements.push(n.load(Ordering::Relaxed) as f64);
        terminate_all(&server, &ids).await;
    }
    let (p50, p50_runs) = over_runs(&p50s, 0);
    let (p99, p99_runs) = over_runs(&p99s, 0);
    println!(
        "launch to RUNNING through Slurm ({SEQUENTIAL} one after the other): p50 {p50} ms ({p50_runs}), p99 {p99} ms ({p99_runs})"
    );
    let (all, all_runs) = over_runs(&placed_500, 0);
    println!("500 sessions (5 × count 100) all RUNNING or placed in Slurm's queue: {all} ms ({all_runs})");
    let (cpu, cpu_runs) = over_runs(&idle, 2);
    println!("server CPU while 100 Slurm sessions run idle and 400 wait: {cpu} % of a core ({cpu_runs})");
    let (ms, ms_runs) = over_runs(&reconcile_ms, 0);
    let (st, st_runs) = over_runs(&statements, 0);
    println!("a fresh engine's look at 1 000 tagged jobs: {ms} ms ({ms_runs}), {st} statements ({st_runs})");
}

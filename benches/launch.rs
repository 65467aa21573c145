//! "Launch Multiple Sessions" at count 1, 10 and 100: SQL statements and the median time
//! of one `launchSessions` through the in-process HTTP router, on SQLite and PostgreSQL.
//!
//! `cargo bench --bench launch`. After each launch its sessions and their rows are
//! deleted (not timed), so that every launch sees the same, empty database; the demo
//! policy's pending limit is raised so that a count of 100 is admitted.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::time::Instant;

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!, $n: Int!) { launchSessions(input: $i, count: $n) { launchGroup { id } sessions { id name status } } }";
/// Launches timed per run (after 3 untimed ones).
const LAUNCHES: usize = 30;

async fn launch(router: &axum::Router, name: &str, n: i64) -> Value {
    let input = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0,
        "name": name, "image": "python:3.12",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 1u64 << 30}],
    });
    graphql(router, "demo-alice", LAUNCH, json!({"i": input, "n": n})).await
}

use support::{Bench, graphql, median, over_runs, runs, stamp};

/// Removes every launched session and what hangs off it, children first.
async fn clear(db: &sea_orm::DatabaseConnection) {
    for table in ["scheduling_history", "session_status_transitions", "session_logs", "sessions", "launch_groups"] {
        db.execute_unprepared(&format!("DELETE FROM {table}")).await.expect("clear");
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench launch");
    println!("| database | count | statements | median (ms) | runs (ms) | × count 1 |");
    println!("|---|---|---|---|---|---|");
    for backend in ["sqlite", "postgres"] {
        let bench = Bench::new(backend, 0).await;
        let (router, db) = (&bench.router, &bench.db);
        db.execute_unprepared("UPDATE keypair_resource_policies SET max_pending_sessions = 1000000")
            .await
            .expect("raise");
        let mut serial = 0;
        let mut single = None;
        for n in [1i64, 10, 100] {
            let mut medians = Vec::new();
            let mut per_launch = 0;
            for _ in 0..runs() {
                let mut times = Vec::with_capacity(LAUNCHES);
                for launch_no in 0..LAUNCHES + 3 {
                    serial += 1;
                    let before = bench.statements();
                    let t = Instant::now();
                    launch(router, &format!("bench-{serial}"), n).await;
                    let took = t.elapsed();
                    per_launch = bench.statements() - before;
                    if launch_no >= 3 {
                        times.push(took);
                    }
                    clear(db).await;
                }
                medians.push(median(times).as_secs_f64() * 1e3);
            }
            let (m, all) = over_runs(&medians, 2);
            let base = *single.get_or_insert(m);
            println!("| {backend} | {n} | {per_launch} | {m:.2} | {all} | {:.1}× |", m / base);
        }
    }
}

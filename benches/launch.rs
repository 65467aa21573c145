//! "Launch Multiple Sessions" at count 1, 10 and 100: SQL statements and the median time
//! of one `launchSessions` through the in-process HTTP router, on SQLite and PostgreSQL.
//!
//! `cargo bench --bench launch`. Between runs the launched sessions are cancelled (not
//! timed) so that every run sees the same database size; the demo policy's pending limit
//! is raised so that a count of 100 is admitted.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::time::Instant;

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::domain::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!, $n: Int!) { launchSessions(input: $i, count: $n) { launchGroup { id } sessions { id name status } } }";
const RUNS: usize = 30;

async fn launch(router: &axum::Router, name: &str, n: i64) -> Value {
    let input = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0,
        "name": name, "image": "python:3.12",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 1u64 << 30}],
    });
    graphql(router, "demo-alice", LAUNCH, json!({"i": input, "n": n})).await
}

use support::{Bench, graphql, median};

#[tokio::main]
async fn main() {
    println!("| database | count | statements | median (ms) | per session (ms) |");
    println!("|---|---|---|---|---|");
    for backend in ["sqlite", "postgres"] {
        let bench = Bench::new(backend, 0).await;
        let (router, db) = (&bench.router, &bench.db);
        db.execute_unprepared("UPDATE keypair_resource_policies SET max_pending_sessions = 1000000")
            .await
            .expect("raise");
        let mut serial = 0;
        for n in [1i64, 10, 100] {
            let mut times = Vec::with_capacity(RUNS);
            let mut per_launch = 0;
            for run in 0..RUNS + 3 {
                serial += 1;
                let before = bench.statements();
                let t = Instant::now();
                launch(router, &format!("bench-{serial}"), n).await;
                let took = t.elapsed();
                per_launch = bench.statements() - before;
                if run >= 3 {
                    times.push(took);
                }
                db.execute_unprepared("UPDATE sessions SET status = 'CANCELLED' WHERE status = 'PENDING'")
                    .await
                    .expect("cancel");
            }
            let m = median(times).as_secs_f64() * 1e3;
            println!("| {backend} | {n} | {per_launch} | {m:.2} | {:.3} |", m / n as f64);
        }
    }
}

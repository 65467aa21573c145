//! "Launch Multiple Sessions" at count 1, 10 and 100: SQL statements and the median time
//! of one `launchSessions` through the in-process HTTP router, on SQLite and PostgreSQL.
//!
//! `cargo bench --bench launch`. Between runs the launched sessions are cancelled (not
//! timed) so that every run sees the same database size; the demo policy's pending limit
//! is raised so that a count of 100 is admitted.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::config::{DbArgs, HttpLimits};
use sessiond::domain::events::EventBus;
use sessiond::domain::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use sessiond::graphql::launch::LaunchLimits;
use sessiond::http::{AppState, app};
use sessiond::server::open_database;

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

use support::{database, graphql, median};

#[tokio::main]
async fn main() {
    println!("| database | count | statements | median (ms) | per session (ms) |");
    println!("|---|---|---|---|---|");
    for backend in ["sqlite", "postgres"] {
        let (url, _dir) = database(backend).await;
        let (mut db, _) =
            open_database(&DbArgs { database_url: url, db_max_connections: 8 }, true).await.expect("open");
        db.execute_unprepared("UPDATE keypair_resource_policies SET max_pending_sessions = 1000000")
            .await
            .expect("raise");
        let statements = Arc::new(AtomicUsize::new(0));
        let counter = statements.clone();
        db.set_metric_callback(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let router = app(AppState::with(
            db.clone(),
            EventBus::default(),
            HttpLimits::default(),
            LaunchLimits { max_launch_count: 100 },
        ));
        let mut serial = 0;
        for n in [1i64, 10, 100] {
            let mut times = Vec::with_capacity(RUNS);
            let mut per_launch = 0;
            for run in 0..RUNS + 3 {
                serial += 1;
                let before = statements.load(Ordering::Relaxed);
                let t = Instant::now();
                launch(&router, &format!("bench-{serial}"), n).await;
                let took = t.elapsed();
                per_launch = statements.load(Ordering::Relaxed) - before;
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

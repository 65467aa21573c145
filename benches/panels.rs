//! The resource panels over 100 000 generated sessions: SQL statements and the median
//! latency of each view, on SQLite and PostgreSQL. `cargo bench --bench panels`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::config::{DbArgs, HttpLimits};
use sessiond::domain::generate::{GenerateOptions, generate};
use sessiond::domain::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use sessiond::http::{AppState, app};
use sessiond::server::open_database;
use support::{database, graphql, median};

const PANEL: &str = "query($p: ID!, $view: ResourcePanelView!) {
  resourcePanel(projectId: $p, view: $view) { resourceGroup slots { slot used limit remaining bindingLayer layers { layer limit used remaining } } }
}";

async fn post(router: &axum::Router, vars: &Value) {
    graphql(router, "demo-alice", PANEL, vars.clone()).await;
}

#[tokio::main]
async fn main() {
    println!("| database | sessions | view | statements | median (ms) |");
    println!("|---|---|---|---|---|");
    for backend in ["sqlite", "postgres"] {
        let (url, _dir) = database(backend).await;
        let (mut db, _) =
            open_database(&DbArgs { database_url: url, db_max_connections: 8 }, true).await.expect("open");
        generate(&db, &GenerateOptions { sessions: 100_000, seed: 1, now: sessiond::domain::clock::now() })
            .await
            .expect("generate");
        if backend == "postgres" {
            db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
        }
        let statements = Arc::new(AtomicUsize::new(0));
        let counter = statements.clone();
        db.set_metric_callback(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let router = app(AppState::new(db.clone(), HttpLimits::default()));
        let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
        for view in ["MY_TOTAL", "MY_IN_RESOURCE_GROUP", "TOTAL_IN_RESOURCE_GROUP"] {
            let vars = json!({"p": p, "view": view});
            for _ in 0..20 {
                post(&router, &vars).await;
            }
            let before = statements.load(Ordering::Relaxed);
            post(&router, &vars).await;
            let per = statements.load(Ordering::Relaxed) - before;
            let mut times = Vec::new();
            for _ in 0..200 {
                let t = Instant::now();
                post(&router, &vars).await;
                times.push(t.elapsed());
            }
            println!("| {backend} | 100000 | {view} | {per} | {:.2} |", median(times).as_secs_f64() * 1e3);
        }
    }
}

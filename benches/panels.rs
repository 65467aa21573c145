//! The resource panels over 100 000 generated sessions: SQL statements and the median
//! latency of each view, on SQLite and PostgreSQL. `cargo bench --bench panels`.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::time::Instant;

use serde_json::{Value, json};

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Bench, graphql, median, over_runs, runs, stamp};

const PANEL: &str = "query($p: ID!, $view: ResourcePanelView!) {
  resourcePanel(projectId: $p, view: $view) { resourceGroup slots { slot used limit remaining bindingLayer layers { layer limit used remaining } } }
}";

async fn post(router: &axum::Router, vars: &Value) {
    graphql(router, "demo-alice", PANEL, vars.clone()).await;
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench panels");
    println!("| database | sessions | view | statements | median (ms) | runs (ms) |");
    println!("|---|---|---|---|---|---|");
    for backend in ["sqlite", "postgres"] {
        let bench = Bench::new(backend, 100_000).await;
        let router = &bench.router;
        let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
        for view in ["MY_TOTAL", "MY_IN_RESOURCE_GROUP", "TOTAL_IN_RESOURCE_GROUP"] {
            let vars = json!({"p": p, "view": view});
            for _ in 0..20 {
                post(router, &vars).await;
            }
            let before = bench.statements();
            post(router, &vars).await;
            let per = bench.statements() - before;
            let mut medians = Vec::new();
            for _ in 0..runs() {
                let mut times = Vec::new();
                for _ in 0..200 {
                    let t = Instant::now();
                    post(router, &vars).await;
                    times.push(t.elapsed());
                }
                medians.push(median(times).as_secs_f64() * 1e3);
            }
            let (m, all) = over_runs(&medians, 2);
            println!("| {backend} | 100000 | {view} | {per} | {m:.2} | {all} |");
        }
    }
}

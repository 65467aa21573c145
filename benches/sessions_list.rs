//! The session list at scale: statements per page and the median latency of a 50-row page
//! with every relation selected, over 1 000 and 100 000 generated sessions, on SQLite and
//! PostgreSQL, through the in-process HTTP router (auth, visibility, GraphQL included).
//!
//! `cargo bench --bench sessions_list` (add `-- --quick` for 1 000 sessions only). Prints a
//! Markdown table for BENCHMARKS.md. PostgreSQL: `TEST_DATABASE_URL`, or a throwaway
//! cluster as in the tests.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::time::Instant;

use serde_json::{Value, json};

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};

const PAGE: &str = "query($p: ID!, $scope: SessionScope, $after: String, $count: Boolean!) {
  sessions(projectId: $p, scope: $scope, first: 50, after: $after) {
    totalCount @include(if: $count) pageInfo { hasNextPage endCursor }
    edges { node {
      id name type status result exitCode agent createdAt startedAt terminatedAt elapsedSeconds
      owner { email } project { name } resourceGroup { name strategy } image { name apps }
      launchGroup { name count } requestedSlots { cpu memory accelerators { slot amount } }
      occupiedSlots { cpu memory } statusTransitions { toStatus occurredAt }
    } }
  }
}";

/// Requests timed per run (the first page), and for the third page.
const REQUESTS: usize = 200;

async fn post(router: &axum::Router, token: &str, vars: &Value) -> Value {
    graphql(router, token, PAGE, vars.clone()).await
}

/// The median latency (ms) of `requests` requests of `vars`.
async fn timed(router: &axum::Router, token: &str, vars: &Value, requests: usize) -> f64 {
    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        let t = Instant::now();
        post(router, token, vars).await;
        times.push(t.elapsed());
    }
    median(times).as_secs_f64() * 1e3
}

use support::{Bench, graphql, median, over_runs, runs, stamp};

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[u64] = if quick { &[1_000] } else { &[1_000, 100_000] };
    stamp("cargo bench --bench sessions_list");
    println!(
        "| database | sessions | scope | totalCount | statements/page | median page (ms) | runs (ms) | 3rd page (ms) | ÷ 1 000 sessions |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut at_1k = std::collections::HashMap::new();
    let mut generated = Vec::new();
    for backend in ["sqlite", "postgres"] {
        for &n in sizes {
            let bench = Bench::new(backend, n).await;
            generated.push((backend, n, bench.generated_in.unwrap_or_default()));
            let router = &bench.router;
            let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
            for (scope, token, count) in [
                ("MINE", "demo-alice", false),
                ("MINE", "demo-alice", true),
                ("PROJECT", "demo-admin", false),
                ("PROJECT", "demo-admin", true),
            ] {
                let vars = json!({"p": p, "scope": scope, "count": count});
                for _ in 0..20 {
                    post(router, token, &vars).await;
                }
                let before = bench.statements();
                post(router, token, &vars).await;
                let per_page = bench.statements() - before;
                // A page deep in the list costs the same (keyset, not OFFSET).
                let mut after = Value::Null;
                for _ in 0..2 {
                    let v = post(router, token, &json!({"p": p, "scope": scope, "after": after, "count": false})).await;
                    after = v["data"]["sessions"]["pageInfo"]["endCursor"].clone();
                }
                let deep_vars = json!({"p": p, "scope": scope, "after": after, "count": count});
                let (mut firsts, mut deeps) = (Vec::new(), Vec::new());
                for _ in 0..runs() {
                    firsts.push(timed(router, token, &vars, REQUESTS).await);
                    deeps.push(timed(router, token, &deep_vars, REQUESTS / 2).await);
                }
                let (first, first_runs) = over_runs(&firsts, 2);
                let (deep, _) = over_runs(&deeps, 2);
                let key = (backend, scope, count);
                let ratio = match at_1k.get(&key) {
                    Some(base) if n != 1_000 => format!("{:.2}×", first / base),
                    _ => String::new(),
                };
                if n == 1_000 {
                    at_1k.insert(key, first);
                }
                println!(
                    "| {backend} | {n} | {scope} | {} | {per_page} | {first:.2} | {first_runs} | {deep:.2} | {ratio} |",
                    if count { "yes" } else { "no" },
                );
            }
        }
    }
    println!();
    println!("| database | sessions | `sessiond generate` (s, this build) |");
    println!("|---|---|---|");
    for (backend, n, secs) in generated {
        println!("| {backend} | {n} | {secs:.1} |");
    }
}

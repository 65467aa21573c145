//! The CSV export of a large list: a release server (its own process) on a database of
//! generated sessions exports 100 000+ rows of one project (an administrator's PROJECT
//! scope, the default columns plus owner and creation time). Reports rows per second over
//! the whole download and the server's resident-memory growth during it (sampled every
//! 5 ms). `cargo bench --bench export [-- --runs N]`; each figure is the median of the runs.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sessiond::domain::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, over_runs, rss_kib, runs, stamp};

/// Generated sessions: the demo project `default` gets a little under half of them.
const GENERATED: &str = "235000";

struct Figures {
    rows: u64,
    rows_per_second: f64,
    growth_mib: f64,
    bytes: u64,
}

async fn export_once(server: &Server, pid: u32, url: &str) -> Figures {
    let before = rss_kib(pid);
    let peak = Arc::new(AtomicU64::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let started = Instant::now();
    let mut resp = reqwest::Client::new()
        .get(format!("http://{}{url}", server.base))
        .bearer_auth("demo-admin")
        .send()
        .await
        .expect("GET export");
    assert!(resp.status().is_success(), "{}", resp.status());
    let (mut bytes, mut lines) = (0u64, 0u64);
    while let Some(chunk) = resp.chunk().await.expect("a chunk") {
        bytes += chunk.len() as u64;
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.await.expect("sampler");
    let rows = lines - 1; // the header
    Figures {
        rows,
        rows_per_second: rows as f64 / elapsed.as_secs_f64(),
        growth_mib: (peak.load(Ordering::Relaxed).saturating_sub(before)) as f64 / 1024.0,
        bytes,
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench export");
    println!("| database | rows | MB | rows/s | memory growth (MiB) | runs rows/s | runs growth (MiB) |");
    println!("|---|---|---|---|---|---|---|");
    let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let url = format!(
        "/export/sessions.csv?projectId={p}&scope=PROJECT&columns=NAME,STATUS,ACCELERATORS,CPU,MEMORY,ELAPSED,OWNER,CREATED_AT"
    );
    for backend in ["sqlite", "postgres"] {
        let server = Server::start(backend, &[&["generate", "--sessions", GENERATED]]).await;
        let pid = server.pid();
        if backend == "postgres" {
            // Steady state after a bulk load: what autovacuum would have done.
            use sea_orm::ConnectionTrait;
            let db = sea_orm::Database::connect(&server.url).await.expect("connect");
            db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
        }
        // A first export warms the caches, as a running server's would be.
        export_once(&server, pid, &url).await;
        let mut all = Vec::new();
        for _ in 0..runs() {
            all.push(export_once(&server, pid, &url).await);
        }
        let (rate, rate_runs) = over_runs(&all.iter().map(|f| f.rows_per_second).collect::<Vec<_>>(), 0);
        let (growth, growth_runs) = over_runs(&all.iter().map(|f| f.growth_mib).collect::<Vec<_>>(), 1);
        let (rows, mb) = (all[0].rows, all[0].bytes as f64 / 1e6);
        println!("| {backend} | {rows} | {mb:.1} | {rate:.0} | {growth:.1} | {rate_runs} | {growth_runs} |");
    }
}

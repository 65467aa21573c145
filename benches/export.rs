//! The CSV export of a large list: a release server (its own process) on a database of
//! generated sessions exports 100 000+ rows of one project (an administrator's PROJECT
//! scope, the default columns plus owner and creation time). Reports rows per second over
//! the whole download and the server's memory growth during it (sampled every 5 ms): its
//! anonymous memory (heap, what the export itself holds) and its whole resident set (which
//! also counts the pages of the memory-mapped SQLite file that the download touched: page
//! cache the kernel holds either way). `cargo bench --bench export [-- --runs N]`; each
//! figure is the median of the runs.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, encode};
use support::{Server, over_runs, runs, stamp, status_kib};

/// Generated sessions: the demo project `default` gets a little under half of them.
const GENERATED: &str = "235000";

struct Figures {
    rows: u64,
    rows_per_second: f64,
    /// Peak minus starting `RssAnon`, MiB.
    anon_growth: f64,
    /// Peak minus starting `VmRSS`, MiB.
    rss_growth: f64,
    bytes: u64,
}

async fn export_once(server: &Server, pid: u32, url: &str) -> Figures {
    let fields = ["RssAnon", "VmRSS"];
    let before = fields.map(|f| status_kib(pid, f));
    let peaks = Arc::new(before.map(AtomicU64::new));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peaks, done) = (peaks.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                for (peak, field) in peaks.iter().zip(fields) {
                    peak.fetch_max(status_kib(pid, field), Ordering::Relaxed);
                }
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
    let growth = |i: usize| peaks[i].load(Ordering::Relaxed).saturating_sub(before[i]) as f64 / 1024.0;
    let rows = lines - 1; // the header
    Figures {
        rows,
        rows_per_second: rows as f64 / elapsed.as_secs_f64(),
        anon_growth: growth(0),
        rss_growth: growth(1),
        bytes,
    }
}

#[tokio::main]
async fn main() {
    stamp("cargo bench --bench export");
    println!(
        "| database | rows | MB | rows/s | heap growth (MiB) | RSS growth (MiB) | runs rows/s | runs heap growth | runs RSS growth |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
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
        let (anon, anon_runs) = over_runs(&all.iter().map(|f| f.anon_growth).collect::<Vec<_>>(), 1);
        let (rss, rss_runs) = over_runs(&all.iter().map(|f| f.rss_growth).collect::<Vec<_>>(), 1);
        let (rows, mb) = (all[0].rows, all[0].bytes as f64 / 1e6);
        assert!(rows >= 100_000, "the export holds at least 100 000 rows: {rows}");
        println!(
            "| {backend} | {rows} | {mb:.1} | {rate:.0} | {anon:.1} | {rss:.1} | {rate_runs} | {anon_runs} | {rss_runs} |"
        );
    }
}

//! One scheduling pass of the pure core over n pending sessions and 1 000 agents, for
//! FIFO and DRF: how its time grows with n. Then the whole pass against each database
//! (`scheduling::pass`: read, decide, write): the first over n sessions nobody has looked
//! at (every reason written), then passes that find nothing changed (nothing written).
//! `cargo bench --bench scheduler` (`-- --core` or `-- --database` for one part).
//!
//! The snapshot: 1 000 agents (16 CPU, 64 GiB; every fourth with 4 GPUs) in one group, 200
//! owners with their own keypairs, 20 projects in 2 domains with limits, sessions of 1–8
//! CPUs, some with a GPU, four priority levels (0, 5, 10, 20). About a third fits: the rest waits, most of it
//! behind the first session that finds no room.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

/// The server's allocator, so that the pass costs here what it costs there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::HashMap;
use std::time::Instant;

use support::{over_runs, runs, stamp};

use sessiond::domain::model::SchedulerStrategy;
use sessiond::domain::model::slots::{ResourceRequest, ResourceSlots};
use sessiond::domain::scheduling::planner::{
    Agent, Group, KeypairQuota, Outcome, PendingSession, Quota, Snapshot, schedule,
};
use uuid::Uuid;

const GIB: f64 = (1u64 << 30) as f64;

fn snapshot(n: usize, strategy: SchedulerStrategy) -> Snapshot {
    let agents: Vec<Agent> = (0..1000)
        .map(|i| {
            let mut free = ResourceSlots::from_pairs([("cpu", 16.0), ("mem", 64.0 * GIB)]);
            if i % 4 == 0 {
                free.set("cuda.device", 4.0);
            }
            Agent { id: format!("agent-{i:04}"), capacity: free.clone(), free }
        })
        .collect();
    let capacity = agents.iter().fold(ResourceSlots::new(), |acc, a| acc.add(&a.free));
    let owner = |i: usize| Uuid::from_u128(1 + (i % 200) as u128);
    let keypair = |i: usize| Uuid::from_u128(10_000 + (i % 200) as u128);
    let project = |i: usize| Uuid::from_u128(20_000 + (i % 20) as u128);
    let domain = |i: usize| Uuid::from_u128(30_000 + (i % 2) as u128);
    let pending: Vec<PendingSession> = (0..n)
        .map(|i| {
            let mut per = ResourceSlots::from_pairs([
                ("cpu", [1.0, 2.0, 4.0, 8.0][i % 4]),
                ("mem", [2.0, 4.0, 8.0][i % 3] * GIB),
            ]);
            if i % 7 == 0 {
                per.set("cuda.device", 1.0);
            }
            PendingSession {
                id: Uuid::from_u128(1_000_000 + i as u128),
                owner: owner(i),
                keypair: keypair(i),
                project: project(i),
                domain: domain(i),
                priority: [0, 5, 10, 20][i % 4],
                created: i as i64,
                request: ResourceRequest::new(per, 1),
            }
        })
        .collect();
    let mut keypairs = HashMap::new();
    for i in 0..200 {
        keypairs.insert(
            keypair(i),
            KeypairQuota {
                quota: Quota {
                    limit: ResourceSlots::from_pairs([("cpu", 64.0), ("cuda.device", 8.0)]),
                    used: ResourceSlots::new(),
                },
                max_concurrent: 30,
                active: 0,
            },
        );
    }
    let projects = (0..20)
        .map(|i| (project(i), Quota { limit: ResourceSlots::from_pairs([("cpu", 600.0)]), used: ResourceSlots::new() }))
        .collect();
    let domains = (0..2)
        .map(|i| (domain(i), Quota { limit: ResourceSlots::from_pairs([("cpu", 8000.0)]), used: ResourceSlots::new() }))
        .collect();
    Snapshot {
        groups: vec![Group { name: "default".into(), strategy, agents, pending, capacity }],
        keypairs,
        projects,
        domains,
        owner_usage: HashMap::new(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parts = ["--core", "--database"];
    let only = |part: &str| !args.iter().any(|a| parts.contains(&a.as_str())) || args.iter().any(|a| a == part);
    stamp("cargo bench --bench scheduler");
    if only("--core") {
        core();
    }
    if only("--database") {
        // `--backend sqlite|postgres` and `--pending N` narrow it down (for a profile).
        let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
        let backends: Vec<String> =
            value("--backend").map_or_else(|| vec!["sqlite".to_owned(), "postgres".to_owned()], |b| vec![b]);
        let sizes: Vec<u64> =
            value("--pending").and_then(|n| n.parse().ok()).map_or(vec![10_000, 100_000], |n| vec![n]);
        tokio::runtime::Runtime::new().expect("runtime").block_on(database(&backends, &sizes));
    }
}

fn core() {
    println!("| strategy | pending | agents | scheduled | median pass (ms) | runs (ms) | µs per session |");
    println!("|---|---|---|---|---|---|---|");
    for strategy in [SchedulerStrategy::Fifo, SchedulerStrategy::Drf] {
        for n in [1_000usize, 10_000, 100_000] {
            let snap = snapshot(n, strategy);
            let mut medians = Vec::new();
            let mut scheduled = 0;
            for _ in 0..runs() {
                let mut times = Vec::new();
                for _ in 0..5 {
                    let t = Instant::now();
                    let d = schedule(&snap);
                    times.push(t.elapsed());
                    scheduled = d.iter().filter(|d| matches!(d.outcome, Outcome::Schedule { .. })).count();
                }
                times.sort();
                medians.push(times[times.len() / 2].as_secs_f64() * 1e3);
            }
            let (m, all) = over_runs(&medians, 0);
            println!("| {strategy} | {n} | 1000 | {scheduled} | {m:.0} | {all} | {:.1} |", m * 1e3 / n as f64);
        }
    }
}

/// A demo database with `n` generated sessions, every one of them PENDING, and 1 000 more
/// agents (16 CPU, 64 GiB; every fourth with 4 GPUs) in group `default`.
async fn waiting(backend: &str, n: u64) -> (sea_orm::DatabaseConnection, String, Option<tempfile::TempDir>) {
    use sea_orm::{ConnectionTrait, EntityTrait};
    use sessiond::config::DbArgs;
    let (url, dir) = support::database(backend).await;
    let (db, _) = sessiond::server::open_database(&DbArgs::of(url.clone()), true).await.expect("open");
    let opts = sessiond::domain::directory::generate::GenerateOptions {
        sessions: n,
        seed: 1,
        now: sessiond::domain::model::clock::now(),
    };
    sessiond::domain::directory::generate::generate(&db, &opts).await.expect("generate");
    db.execute_unprepared(
        "UPDATE sessions SET status = 'PENDING', agent_id = NULL, occupied_slots = '{}', terminated_at = NULL, \
         scheduled_at = NULL, started_at = NULL, queue_position = NULL, pending_reasons = '[]', starts_at = NULL",
    )
    .await
    .expect("every session pending");
    let now = sessiond::domain::model::clock::now();
    let agents: Vec<entity::agent::ActiveModel> = (0..1000)
        .map(|i| {
            let mut slots = ResourceSlots::from_pairs([("cpu", 16.0), ("mem", 64.0 * GIB)]);
            if i % 4 == 0 {
                slots.set("cuda.device", 4.0);
            }
            entity::agent::ActiveModel {
                id: sea_orm::Set(format!("bench-{i:04}")),
                resource_group: sea_orm::Set("default".to_owned()),
                available_slots: sea_orm::Set(slots.to_json()),
                status: sea_orm::Set("ALIVE".to_owned()),
                schedulable: sea_orm::Set(true),
                pulled_images: sea_orm::Set(serde_json::json!([])),
                created_at: sea_orm::Set(now),
                last_heartbeat_at: sea_orm::Set(now),
            }
        })
        .collect();
    for chunk in agents.chunks(200) {
        entity::agent::Entity::insert_many(chunk.to_vec()).exec_without_returning(&db).await.expect("agents");
    }
    if backend == "postgres" {
        db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
    }
    (db, url, dir)
}

async fn database(backends: &[String], sizes: &[u64]) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    println!();
    println!("| database | pending | agents | pass | statements | median (ms) | runs (ms) |");
    println!("|---|---|---|---|---|---|---|");
    for backend in backends.iter().map(String::as_str) {
        for &n in sizes {
            let mut firsts = Vec::new();
            let mut agains = Vec::new();
            let (mut first_statements, mut again_statements) = (0, 0);
            for _ in 0..runs() {
                let (mut db, url, _dir) = waiting(backend, n).await;
                // The bus reads on a connection of its own: its polls are not the pass's.
                let feed = sea_orm::Database::connect(url.as_str()).await.expect("connect");
                let bus = sessiond::domain::live::events::EventBus::start(feed, 1024).await.expect("bus");
                let counter = Arc::new(AtomicUsize::new(0));
                let c = counter.clone();
                db.set_metric_callback(move |_| {
                    c.fetch_add(1, Ordering::Relaxed);
                });
                // As the server's scheduler: the waiting sessions read inline on SQLite,
                // counted with the pool's statements.
                let inline = sessiond::domain::store::inline::InlineReads::of(&db);
                if let Some(inline) = &inline {
                    let c = counter.clone();
                    inline.observe(move |_| {
                        c.fetch_add(1, Ordering::Relaxed);
                    });
                }
                let pass = || sessiond::domain::scheduling::pass_reading(&db, inline.as_ref(), &bus);
                let t = Instant::now();
                pass().await.expect("first pass");
                firsts.push(t.elapsed().as_secs_f64() * 1e3);
                first_statements = counter.swap(0, Ordering::Relaxed);
                let mut times = Vec::new();
                for _ in 0..3 {
                    let t = Instant::now();
                    pass().await.expect("pass");
                    times.push(t.elapsed());
                    again_statements = counter.swap(0, Ordering::Relaxed);
                }
                agains.push(support::median(times).as_secs_f64() * 1e3);
            }
            let (m, all) = over_runs(&firsts, 0);
            println!("| {backend} | {n} | 1000+ | first | {first_statements} | {m:.0} | {all} |");
            let (m, all) = over_runs(&agains, 0);
            println!("| {backend} | {n} | 1000+ | nothing changed | {again_statements} | {m:.0} | {all} |");
        }
    }
}

//! One scheduling pass of the pure core over n pending sessions and 1 000 agents, for
//! FIFO and DRF: how its time grows with n. `cargo bench --bench scheduler`.
//!
//! The snapshot: 1 000 agents (16 CPU, 64 GiB; every fourth with 4 GPUs) in one group, 200
//! owners with their own keypairs, 20 projects in 2 domains with limits, sessions of 1–8
//! CPUs, some with a GPU, four priority levels (0, 5, 10, 20). About a third fits: the rest waits, most of it
//! behind the first session that finds no room.

#[allow(dead_code)] // each benchmark uses a part of it
mod support;

use std::collections::HashMap;
use std::time::Instant;

use support::{over_runs, runs, stamp};

use sessiond::domain::model::SchedulerStrategy;
use sessiond::domain::scheduler::{Agent, Group, KeypairQuota, Outcome, PendingSession, Quota, Snapshot, schedule};
use sessiond::domain::slots::{ResourceRequest, ResourceSlots};
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
    stamp("cargo bench --bench scheduler");
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

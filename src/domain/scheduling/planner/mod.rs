//! The scheduler's pure core: from a snapshot (pending sessions, agents with free capacity,
//! usage and limits per keypair, project and domain) to decisions. No database, no clock:
//! the pass in [`crate::domain::scheduling`] loads the snapshot and applies the decisions.
//!
//! Per resource group, pending sessions are taken by priority (highest first), then by the
//! group's strategy: FIFO (oldest first), LIFO (newest first) or DRF (the owner with the
//! lowest dominant share first). Every check runs for every session and every failure is
//! kept. A session that finds no agent with room blocks the rest of its priority band
//! (`QUEUED_BEHIND`); a quota failure blocks nobody. Each allocation updates the snapshot,
//! so one pass never over-commits an agent or a quota.

mod fit;
mod index;
mod queue;
mod verdict;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use crate::domain::model::SchedulerStrategy;
use crate::domain::model::slots::{ResourceRequest, ResourceSlots};
use crate::domain::sessions::occupancy::PendingReason;
use fit::allocate;
use index::{AgentIndex, Placer};
pub use queue::dominant_share;
use queue::{Queue, order_band};
use verdict::{Placed, Verdicts};

#[derive(Clone, Debug)]
pub struct PendingSession {
    pub id: Uuid,
    pub owner: Uuid,
    pub keypair: Uuid,
    pub project: Uuid,
    pub domain: Uuid,
    pub priority: i32,
    /// Creation order: microseconds since the epoch (ties broken by id).
    pub created: i64,
    pub request: ResourceRequest,
}

#[derive(Clone, Debug)]
pub struct Agent {
    pub id: String,
    /// Capacity minus what sessions hold now.
    pub free: ResourceSlots,
    /// All it has, held or not.
    pub capacity: ResourceSlots,
}

#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    pub strategy: SchedulerStrategy,
    pub agents: Vec<Agent>,
    pub pending: Vec<PendingSession>,
    /// Sum of the alive agents' capacity, for DRF shares.
    pub capacity: ResourceSlots,
}

/// A quota layer: its limit (absent slot: unlimited) and what is used now.
#[derive(Clone, Debug, Default)]
pub struct Quota {
    pub limit: ResourceSlots,
    pub used: ResourceSlots,
}

#[derive(Clone, Debug, Default)]
pub struct KeypairQuota {
    pub quota: Quota,
    pub max_concurrent: u64,
    /// Sessions holding resources now.
    pub active: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub groups: Vec<Group>,
    pub keypairs: HashMap<Uuid, KeypairQuota>,
    pub projects: HashMap<Uuid, Quota>,
    pub domains: HashMap<Uuid, Quota>,
    /// What each owner holds now in each group, for DRF.
    pub owner_usage: HashMap<(String, Uuid), ResourceSlots>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub failures: Vec<PendingReason>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Start it: one agent per container.
    Schedule { agents: Vec<String> },
    /// Keep it pending for these reasons, at this place in its group's queue (1 = next).
    Wait { reasons: Arc<WaitReasons>, position: usize },
}

/// Why a session waits (every failure of its checks, in order), and the digest of those
/// reasons as stored ([`reasons_digest`](crate::domain::sessions::occupancy::reasons_digest)): shared
/// by every session of the pass that waits for the same reasons.
#[derive(Debug, PartialEq)]
pub struct WaitReasons {
    pub reasons: Vec<PendingReason>,
    pub digest: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub session: Uuid,
    pub group: String,
    pub outcome: Outcome,
    /// Every check that ran, in order, with its failures.
    pub checks: Arc<[Check]>,
}

/// Decides one pass over every group.
pub fn schedule(snapshot: &Snapshot) -> Vec<Decision> {
    schedule_with::<AgentIndex>(snapshot, Verdicts::new())
}

fn schedule_with<P: Placer>(snapshot: &Snapshot, mut verdicts: Verdicts) -> Vec<Decision> {
    let mut state = snapshot.clone();
    let mut decisions = Vec::new();
    for g in 0..state.groups.len() {
        decisions.extend(schedule_group::<P>(&mut state, g, &mut verdicts));
    }
    decisions
}

fn schedule_group<P: Placer>(state: &mut Snapshot, g: usize, verdicts: &mut Verdicts) -> Vec<Decision> {
    let group_name = state.groups[g].name.clone();
    let strategy = state.groups[g].strategy;
    let capacity = state.groups[g].capacity.clone();
    let mut bands: BTreeMap<std::cmp::Reverse<i32>, Vec<PendingSession>> = BTreeMap::new();
    for s in std::mem::take(&mut state.groups[g].pending) {
        bands.entry(std::cmp::Reverse(s.priority)).or_default().push(s);
    }
    let mut placer = P::new(&state.groups[g].agents);
    let mut decisions = Vec::new();
    for (_, mut band) in bands {
        order_band(&mut band, strategy);
        let mut blocked = false;
        let mut queue = Queue::new(band, strategy, state, &group_name, &capacity);
        while let Some(s) = queue.next() {
            // The whole session's request, once per shape: every check, the placement and
            // the allocation use it.
            let shape = verdicts.shape(&s.request);
            let total = &*shape.total;
            // Whether it may start wherever it goes (quotas, concurrency); then whether it
            // waits its turn, and where it goes. It starts only if every check passed.
            let admission = verdicts.admission(state, &s, &shape);
            let (admitted, admission) = (admission.admitted, admission.clone());
            let (placed, agent) = if blocked {
                (Placed::Behind, None)
            } else {
                match placer.place(&state.groups[g].agents, total) {
                    Some(agent) => (Placed::Room, Some(agent)),
                    // Fits no agent that takes sessions, even empty (only drained or silent
                    // ones): it waits for them, and blocks nobody behind it meanwhile.
                    None if !placer.fits_some_capacity(&state.groups[g].agents, total) => {
                        (Placed::NoRoomAnywhere, None)
                    }
                    None => {
                        // Head-of-line: the rest of the band waits behind it. A session
                        // that may not start anyway (over a quota) blocks nobody.
                        blocked = admitted;
                        (Placed::NoRoom, None)
                    }
                }
            };
            let verdict = verdicts.verdict(&admission, g, &group_name, placed);
            let outcome = match agent {
                Some(agent) if verdict.reasons.reasons.is_empty() => {
                    let before = state.groups[g].agents[agent].free.get("cpu");
                    allocate(state, g, &s, total, agent, &group_name);
                    verdicts.started(&s);
                    placer.moved(&state.groups[g].agents, agent, before);
                    let agents = vec![state.groups[g].agents[agent].id.clone(); s.request.cluster_size as usize];
                    Outcome::Schedule { agents }
                }
                _ => Outcome::Wait { reasons: verdict.reasons, position: 0 },
            };
            queue.taken(&s, state, &group_name, &capacity);
            decisions.push(Decision { session: s.id, group: group_name.clone(), outcome, checks: verdict.checks });
        }
    }
    // Queue positions: the waiting sessions of the group, in the order they were taken.
    let mut position = 0;
    for d in decisions.iter_mut() {
        if let Outcome::Wait { position: p, .. } = &mut d.outcome {
            position += 1;
            *p = position;
        }
    }
    decisions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::sessions::occupancy::LimitLayer;

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn session(n: u128, owner: u128, cpu: f64, created: i64) -> PendingSession {
        PendingSession {
            id: uuid(n),
            owner: uuid(owner),
            keypair: uuid(owner + 100),
            project: uuid(1000),
            domain: uuid(2000),
            priority: 0,
            created,
            request: ResourceRequest::new(ResourceSlots::from_pairs([("cpu", cpu)]), 1),
        }
    }

    fn snapshot(strategy: SchedulerStrategy, agents: &[(&str, f64)], pending: Vec<PendingSession>) -> Snapshot {
        let agents: Vec<Agent> = agents
            .iter()
            .map(|(id, cpu)| Agent {
                id: (*id).to_owned(),
                free: ResourceSlots::from_pairs([("cpu", *cpu)]),
                capacity: ResourceSlots::from_pairs([("cpu", *cpu)]),
            })
            .collect();
        let capacity = agents.iter().fold(ResourceSlots::new(), |acc, a| acc.add(&a.free));
        Snapshot { groups: vec![Group { name: "g".into(), strategy, agents, pending, capacity }], ..Default::default() }
    }

    /// Keypair `keypair` may hold `cpu` CPUs (and run 10 sessions at once).
    fn limit_cpu(snap: &mut Snapshot, keypair: Uuid, cpu: f64) {
        let quota = Quota { limit: ResourceSlots::from_pairs([("cpu", cpu)]), used: ResourceSlots::new() };
        snap.keypairs.insert(keypair, KeypairQuota { quota, max_concurrent: 10, active: 0 });
    }

    fn scheduled(d: &[Decision]) -> Vec<Uuid> {
        d.iter().filter(|d| matches!(d.outcome, Outcome::Schedule { .. })).map(|d| d.session).collect()
    }

    fn codes(d: &Decision) -> Vec<&'static str> {
        match &d.outcome {
            Outcome::Wait { reasons, .. } => reasons.reasons.iter().map(|r| r.code).collect(),
            Outcome::Schedule { .. } => Vec::new(),
        }
    }

    #[test]
    fn fifo_takes_the_oldest_and_lifo_the_newest() {
        let pending = vec![session(1, 1, 2.0, 30), session(2, 1, 2.0, 10), session(3, 1, 2.0, 20)];
        let fifo = schedule(&snapshot(SchedulerStrategy::Fifo, &[("a", 4.0)], pending.clone()));
        assert_eq!(scheduled(&fifo), [uuid(2), uuid(3)]);
        let lifo = schedule(&snapshot(SchedulerStrategy::Lifo, &[("a", 4.0)], pending));
        assert_eq!(scheduled(&lifo), [uuid(1), uuid(3)]);
    }

    #[test]
    fn priority_comes_first() {
        let mut urgent = session(9, 1, 4.0, 99);
        urgent.priority = 10;
        let snap = snapshot(SchedulerStrategy::Fifo, &[("a", 4.0)], vec![session(1, 1, 4.0, 1), urgent]);
        assert_eq!(scheduled(&schedule(&snap)), [uuid(9)]);
    }

    #[test]
    fn out_of_capacity_blocks_its_band_but_a_quota_failure_blocks_nobody() {
        // Session 1 is over its keypair quota; 2 fits; 3 does not fit; 4 would fit but is behind 3.
        let mut snap = snapshot(
            SchedulerStrategy::Fifo,
            &[("a", 4.0)],
            vec![session(1, 1, 1.0, 1), session(2, 2, 2.0, 2), session(3, 3, 3.0, 3), session(4, 4, 1.0, 4)],
        );
        limit_cpu(&mut snap, uuid(101), 0.5);
        let d = schedule(&snap);
        assert_eq!(scheduled(&d), [uuid(2)]);
        assert_eq!(codes(&d[0]), ["QUOTA_EXCEEDED"]);
        assert_eq!(codes(&d[2]), ["NO_CAPACITY"]);
        assert_eq!(codes(&d[3]), ["QUEUED_BEHIND"]);
        let positions: Vec<usize> = d
            .iter()
            .filter_map(|d| if let Outcome::Wait { position, .. } = d.outcome { Some(position) } else { None })
            .collect();
        assert_eq!(positions, [1, 2, 3]);
    }

    #[test]
    fn every_failing_check_is_reported() {
        let mut snap = snapshot(SchedulerStrategy::Fifo, &[("a", 1.0)], vec![session(1, 1, 2.0, 1)]);
        let tight = Quota { limit: ResourceSlots::from_pairs([("cpu", 1.0)]), used: ResourceSlots::new() };
        snap.keypairs.insert(uuid(101), KeypairQuota { quota: tight.clone(), max_concurrent: 0, active: 0 });
        snap.projects.insert(uuid(1000), tight.clone());
        snap.domains.insert(uuid(2000), tight);
        let d = schedule(&snap);
        assert_eq!(
            codes(&d[0]),
            ["QUOTA_EXCEEDED", "QUOTA_EXCEEDED", "QUOTA_EXCEEDED", "CONCURRENCY_LIMIT", "NO_CAPACITY"]
        );
        let Outcome::Wait { reasons, .. } = &d[0].outcome else { panic!("waits") };
        let reasons = &reasons.reasons;
        let layers: Vec<_> = reasons.iter().map(|r| r.layer).collect();
        assert_eq!(
            layers,
            [
                Some(LimitLayer::Keypair),
                Some(LimitLayer::Project),
                Some(LimitLayer::Domain),
                Some(LimitLayer::Keypair),
                Some(LimitLayer::ResourceGroup)
            ]
        );
        assert_eq!(
            (reasons[0].slot.as_deref(), reasons[0].requested, reasons[0].remaining),
            (Some("cpu"), Some(2.0), Some(1.0))
        );
    }

    #[test]
    fn a_session_starts_exactly_when_every_check_it_ran_passed() {
        // Quotas, concurrency, the queue and capacity binding in turn over one pass.
        let pending: Vec<_> = (0..12).map(|i| session(i, 1 + i % 3, 1.0 + (i % 2) as f64, i as i64)).collect();
        let mut snap = snapshot(SchedulerStrategy::Fifo, &[("a", 3.0), ("b", 2.0)], pending);
        snap.projects
            .insert(uuid(1000), Quota { limit: ResourceSlots::from_pairs([("cpu", 4.0)]), used: ResourceSlots::new() });
        snap.keypairs.insert(uuid(102), KeypairQuota { quota: Quota::default(), max_concurrent: 1, active: 0 });
        let decisions = schedule(&snap);
        let (mut started, mut waited) = (0, 0);
        for d in &decisions {
            let passed = verdict::all_passed(&d.checks);
            match d.outcome {
                Outcome::Schedule { .. } => started += usize::from(passed),
                Outcome::Wait { .. } => waited += usize::from(!passed),
            }
            assert_eq!(matches!(d.outcome, Outcome::Schedule { .. }), passed, "{:?}", d.checks);
        }
        assert!(started > 0 && waited > 0);
    }

    #[test]
    fn one_pass_never_overcommits_an_agent_or_a_quota() {
        let pending: Vec<_> = (0..10).map(|i| session(i, 1, 1.0, i as i64)).collect();
        let mut snap = snapshot(SchedulerStrategy::Fifo, &[("a", 3.0), ("b", 2.0)], pending);
        snap.projects
            .insert(uuid(1000), Quota { limit: ResourceSlots::from_pairs([("cpu", 4.0)]), used: ResourceSlots::new() });
        let d = schedule(&snap);
        assert_eq!(scheduled(&d).len(), 4, "the project quota of 4 CPUs binds before the 5 CPUs of the agents");
        let mut per_agent: HashMap<String, usize> = HashMap::new();
        for d in &d {
            if let Outcome::Schedule { agents } = &d.outcome {
                for a in agents {
                    *per_agent.entry(a.clone()).or_default() += 1;
                }
            }
        }
        assert!(per_agent["a"] <= 3 && per_agent["b"] <= 2);
    }

    #[test]
    fn a_cluster_goes_to_one_agent_with_room_for_all_of_it() {
        let mut big = session(1, 1, 2.0, 1);
        big.request.cluster_size = 3;
        let d = schedule(&snapshot(SchedulerStrategy::Fifo, &[("a", 4.0), ("b", 4.0)], vec![big.clone()]));
        assert_eq!(codes(&d[0]), ["NO_CAPACITY"], "6 CPUs fit no single agent");
        let d = schedule(&snapshot(SchedulerStrategy::Fifo, &[("a", 4.0), ("b", 6.0)], vec![big]));
        let Outcome::Schedule { agents } = &d[0].outcome else { panic!("scheduled") };
        assert_eq!(agents, &["b", "b", "b"]);
    }

    #[test]
    fn a_session_over_its_quota_blocks_nobody_even_without_room() {
        let mut snap =
            snapshot(SchedulerStrategy::Fifo, &[("a", 2.0)], vec![session(1, 1, 4.0, 1), session(2, 2, 2.0, 2)]);
        limit_cpu(&mut snap, uuid(101), 1.0);
        let d = schedule(&snap);
        assert_eq!(codes(&d[0]), ["QUOTA_EXCEEDED", "NO_CAPACITY"]);
        assert_eq!(scheduled(&d), [uuid(2)]);
    }

    #[test]
    fn drf_serves_the_user_with_the_lowest_dominant_share() {
        // Alice (1) already holds 6 of 10 CPUs; Bob (2) holds none. Both queue sessions,
        // Alice's first. DRF gives Bob's sessions the room before Alice's next.
        let pending = vec![session(1, 1, 2.0, 1), session(2, 1, 2.0, 2), session(3, 2, 2.0, 3), session(4, 2, 2.0, 4)];
        let mut snap = snapshot(SchedulerStrategy::Drf, &[("a", 4.0)], pending);
        snap.groups[0].capacity = ResourceSlots::from_pairs([("cpu", 10.0)]);
        snap.owner_usage.insert(("g".into(), uuid(1)), ResourceSlots::from_pairs([("cpu", 6.0)]));
        let d = schedule(&snap);
        assert_eq!(scheduled(&d), [uuid(3), uuid(4)]);
        // FIFO would have served Alice first.
        snap.groups[0].strategy = SchedulerStrategy::Fifo;
        assert_eq!(scheduled(&schedule(&snap)), [uuid(1), uuid(2)]);
    }

    #[test]
    fn drf_follows_the_owners_shares_as_they_change() {
        // Owners 1, 2 and 3 already hold 0, 20 and 40 of the group's 100 CPUs; their
        // sessions were created 3's first. Room for three sessions of 10 CPUs.
        let pending = vec![
            session(11, 3, 10.0, 1),
            session(12, 2, 10.0, 2),
            session(13, 1, 10.0, 3),
            session(14, 1, 10.0, 4),
            session(15, 2, 10.0, 5),
            session(16, 3, 10.0, 6),
        ];
        let mut snap = snapshot(SchedulerStrategy::Drf, &[("a", 30.0)], pending);
        snap.groups[0].capacity = ResourceSlots::from_pairs([("cpu", 100.0)]);
        snap.owner_usage.insert(("g".into(), uuid(2)), ResourceSlots::from_pairs([("cpu", 20.0)]));
        snap.owner_usage.insert(("g".into(), uuid(3)), ResourceSlots::from_pairs([("cpu", 40.0)]));
        let d = schedule(&snap);
        // 1 (share 0), 1 again (0.1), then 2 (0.2); 2's next (0.3) finds no room, 3's wait behind.
        assert_eq!(scheduled(&d), [uuid(13), uuid(14), uuid(12)]);
        let order: Vec<Uuid> = d.iter().map(|d| d.session).collect();
        assert_eq!(order, [13, 14, 12, 15, 11, 16].map(uuid), "the rest wait in share order");
    }

    #[test]
    fn the_concurrency_limit_counts_what_this_pass_starts() {
        let pending = vec![session(1, 1, 1.0, 1), session(2, 1, 1.0, 2), session(3, 1, 1.0, 3)];
        let mut snap = snapshot(SchedulerStrategy::Fifo, &[("a", 100.0)], pending);
        // One running already; three may run at once.
        snap.keypairs.insert(uuid(101), KeypairQuota { quota: Quota::default(), max_concurrent: 3, active: 1 });
        let d = schedule(&snap);
        assert_eq!(scheduled(&d), [uuid(1), uuid(2)]);
        assert_eq!(codes(&d[2]), ["CONCURRENCY_LIMIT"]);
    }

    /// A random snapshot: 1–3 groups of 0–40 agents (some without GPUs, some full, ties of
    /// free CPU), 0–120 sessions of 1–8 owners with clusters, GPUs and several priorities,
    /// quotas at every layer, concurrency limits.
    fn random_snapshot(seed: u64) -> Snapshot {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let strategies = [SchedulerStrategy::Fifo, SchedulerStrategy::Lifo, SchedulerStrategy::Drf];
        let mut snap = Snapshot::default();
        let owners = rng.random_range(1..=8u128);
        for o in 1..=owners {
            if rng.random_bool(0.5) {
                let limit = ResourceSlots::from_pairs([("cpu", [4.0, 8.0, 16.0][rng.random_range(0..3)])]);
                snap.keypairs.insert(
                    uuid(o + 100),
                    KeypairQuota {
                        quota: Quota {
                            limit,
                            used: ResourceSlots::from_pairs([("cpu", rng.random_range(0..4) as f64)]),
                        },
                        max_concurrent: rng.random_range(1..6),
                        active: rng.random_range(0..3),
                    },
                );
            }
        }
        for p in 0..3u128 {
            if rng.random_bool(0.3) {
                let limit = ResourceSlots::from_pairs([("cpu", 12.0), ("cuda.device", 2.0)]);
                snap.projects.insert(uuid(1000 + p), Quota { limit, used: ResourceSlots::new() });
            }
        }
        if rng.random_bool(0.3) {
            snap.domains.insert(
                uuid(2000),
                Quota { limit: ResourceSlots::from_pairs([("cpu", 20.0)]), used: ResourceSlots::new() },
            );
        }
        for g in 0..rng.random_range(1..=3) {
            let agents: Vec<Agent> = (0..rng.random_range(0..=40))
                .map(|i| {
                    let mut capacity = ResourceSlots::from_pairs([
                        ("cpu", [2.0, 4.0, 8.0, 16.0][rng.random_range(0..4)]),
                        ("mem", [4.0, 16.0, 64.0][rng.random_range(0..3)]),
                    ]);
                    if rng.random_bool(0.3) {
                        capacity.set("cuda.device", [1.0, 2.0, 4.0][rng.random_range(0..3)]);
                    }
                    // Some already (partly or wholly) taken.
                    let held = capacity.scale([0.0, 0.0, 0.25, 0.5, 1.0][rng.random_range(0..5)]);
                    Agent {
                        id: format!("a{g}-{:02}", rng.random_range(0..100) * 100 + i),
                        free: capacity.sub(&held),
                        capacity,
                    }
                })
                .collect();
            let capacity = agents.iter().fold(ResourceSlots::new(), |acc, a| acc.add(&a.capacity));
            let pending = (0..rng.random_range(0..=120))
                .map(|n| {
                    let owner = rng.random_range(1..=owners);
                    let mut per = ResourceSlots::from_pairs([
                        ("cpu", [0.5, 1.0, 2.0, 4.0, 8.0][rng.random_range(0..5)]),
                        ("mem", [1.0, 4.0, 16.0][rng.random_range(0..3)]),
                    ]);
                    if rng.random_bool(0.2) {
                        per.set("cuda.device", 1.0);
                    }
                    PendingSession {
                        id: uuid(10_000 * (g as u128 + 1) + n),
                        owner: uuid(owner),
                        keypair: uuid(owner + 100),
                        project: uuid(1000 + rng.random_range(0..3u128)),
                        domain: uuid(2000),
                        priority: [0, 0, 5, 10][rng.random_range(0..4)],
                        created: rng.random_range(0..50),
                        request: ResourceRequest::new(per, rng.random_range(1..=3)),
                    }
                })
                .collect();
            let strategy = strategies[rng.random_range(0..3)];
            snap.groups.push(Group { name: format!("g{g}"), strategy, agents, pending, capacity });
        }
        snap
    }

    /// The pass as it was before the index and the kept verdicts: a scan of every agent,
    /// and every session's checks, reasons and digest worked out for it alone.
    fn schedule_as_before(snapshot: &Snapshot) -> Vec<Decision> {
        schedule_with::<index::scan::Scan>(snapshot, Verdicts::fresh())
    }

    #[test]
    fn the_index_and_the_kept_verdicts_decide_exactly_as_before() {
        let mut started = 0;
        let mut over_quota = 0;
        for seed in 0..400 {
            let snap = random_snapshot(seed);
            let now = schedule(&snap);
            assert_eq!(now, schedule_as_before(&snap), "seed {seed}");
            // Each half alone, too.
            assert_eq!(now, schedule_with::<AgentIndex>(&snap, Verdicts::fresh()), "seed {seed}");
            assert_eq!(now, schedule_with::<index::scan::Scan>(&snap, Verdicts::new()), "seed {seed}");
            started += scheduled(&now).len();
            over_quota += now.iter().filter(|d| codes(d).contains(&"QUOTA_EXCEEDED")).count();
        }
        assert!(started > 1000, "the snapshots schedule something: {started}");
        assert!(over_quota > 1000, "and hold sessions at their quotas: {over_quota}");
    }

    #[test]
    fn reasons_are_worked_out_once_per_situation_not_per_session() {
        // 3 000 sessions of 3 owners in 2 shapes; owner 1 may hold 3 CPUs, the agent 10.
        let pending: Vec<_> =
            (0..3000u128).map(|i| session(i, 1 + i % 3, [1.0, 2.0][(i % 2) as usize], i as i64)).collect();
        let mut snap = snapshot(SchedulerStrategy::Fifo, &[("a", 10.0)], pending);
        limit_cpu(&mut snap, uuid(101), 3.0);
        let d = schedule(&snap);
        assert_eq!(d, schedule_as_before(&snap));
        let waits: Vec<&Arc<WaitReasons>> = d
            .iter()
            .filter_map(|d| if let Outcome::Wait { reasons, .. } = &d.outcome { Some(reasons) } else { None })
            .collect();
        assert!(waits.len() > 2900, "{}", waits.len());
        let lists: std::collections::HashSet<*const WaitReasons> = waits.iter().map(|r| Arc::as_ptr(r)).collect();
        let checks: std::collections::HashSet<*const Check> = d.iter().map(|d| d.checks.as_ptr()).collect();
        // Owner 1's keypair in its three states (0, 1 and 3 CPUs held: 2 sessions started),
        // the two others in the states their starts leave; two shapes; placed, no room,
        // behind.
        assert!(lists.len() <= 24 && checks.len() <= 24, "{} lists, {} check lists", lists.len(), checks.len());
        let digests: std::collections::HashSet<i64> = waits.iter().map(|r| r.digest).collect();
        assert!(digests.len() >= 3, "quota, no room and the queue: {digests:?}");
    }

    #[test]
    fn dominant_share_is_the_largest_fraction() {
        let cap = ResourceSlots::from_pairs([("cpu", 10.0), ("mem", 100.0)]);
        assert_eq!(dominant_share(&ResourceSlots::from_pairs([("cpu", 1.0), ("mem", 50.0)]), &cap), 0.5);
        let no_gpus = ResourceSlots::from_pairs([("cpu", 4.0), ("cuda.device", 0.0)]);
        let usage = ResourceSlots::from_pairs([("cpu", 1.0), ("cuda.device", 1.0)]);
        assert_eq!(dominant_share(&usage, &no_gpus), 0.25, "a slot the group has none of shares nothing");
    }
}

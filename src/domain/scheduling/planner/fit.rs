//! Whether a session may start (its keypair's, project's and domain's quotas and
//! concurrency), where it goes (the agent), and what starting it takes from the snapshot.

use super::{Check, PendingSession, Quota, Snapshot};
use crate::domain::model::slots::ResourceSlots;
use crate::domain::sessions::occupancy::{LimitLayer, PendingReason, quota_failures};

/// The checks of whether a session may start at all, wherever it would go: its keypair's,
/// project's and domain's quotas and its keypair's concurrency.
pub(super) fn admission_checks(state: &Snapshot, s: &PendingSession, requested: &ResourceSlots) -> Vec<Check> {
    let empty = Quota::default();
    let kp = state.keypairs.get(&s.keypair);
    let keypair_quota = kp.map_or(&empty, |k| &k.quota);
    let mut concurrency = Vec::new();
    if let Some(k) = kp
        && k.active + 1 > k.max_concurrent
    {
        concurrency.push(PendingReason {
            code: "CONCURRENCY_LIMIT",
            message: format!("the keypair may run {} sessions at once; {} are running", k.max_concurrent, k.active),
            layer: Some(LimitLayer::Keypair),
            slot: None,
            requested: Some(1.0),
            remaining: Some(k.max_concurrent.saturating_sub(k.active) as f64),
        });
    }
    let project = state.projects.get(&s.project).unwrap_or(&empty);
    let domain = state.domains.get(&s.domain).unwrap_or(&empty);
    vec![
        Check {
            name: "keypair_quota",
            failures: quota_failures(LimitLayer::Keypair, &keypair_quota.limit, &keypair_quota.used, requested),
        },
        Check {
            name: "project_quota",
            failures: quota_failures(LimitLayer::Project, &project.limit, &project.used, requested),
        },
        Check {
            name: "domain_quota",
            failures: quota_failures(LimitLayer::Domain, &domain.limit, &domain.used, requested),
        },
        Check { name: "concurrency", failures: concurrency },
    ]
}

/// Starts `s` on the agent at position `agent` of group `g`: every container there (clusters
/// are single-node, so that the agent's occupancy is exactly what the session holds), and
/// its request counted against every quota and its owner's share.
pub(super) fn allocate(
    state: &mut Snapshot,
    g: usize,
    s: &PendingSession,
    requested: &ResourceSlots,
    agent: usize,
    group: &str,
) {
    let a = &mut state.groups[g].agents[agent];
    for _ in 0..s.request.cluster_size {
        a.free = a.free.sub(&s.request.per_container);
    }
    if let Some(k) = state.keypairs.get_mut(&s.keypair) {
        k.quota.used = k.quota.used.add(requested);
        k.active += 1;
    }
    if let Some(p) = state.projects.get_mut(&s.project) {
        p.used = p.used.add(requested);
    }
    if let Some(d) = state.domains.get_mut(&s.domain) {
        d.used = d.used.add(requested);
    }
    let usage = state.owner_usage.entry((group.to_owned(), s.owner)).or_default();
    *usage = usage.add(requested);
}

//! Whether a session may start (its keypair's, project's and domain's quotas and
//! concurrency), where it goes (the agent), and what starting it takes from the snapshot.

use super::{Agent, Check, PendingSession, Quota, Snapshot};
use crate::domain::occupancy::{LimitLayer, PendingReason, quota_failures};
use crate::domain::slots::ResourceSlots;

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

/// The agent a session goes to: the least loaded one (most free CPU) with room for all of
/// its containers. Clusters are single-node: every container on that agent, so that the
/// agent's occupancy is exactly what the session holds.
pub(super) fn place(agents: &[Agent], s: &PendingSession, total: &ResourceSlots) -> Option<Vec<String>> {
    let best = agents
        .iter()
        .filter(|a| total.fits_in(&a.free, false))
        .max_by(|a, b| a.free.get("cpu").total_cmp(&b.free.get("cpu")).then_with(|| b.id.cmp(&a.id)))?;
    Some(vec![best.id.clone(); s.request.cluster_size as usize])
}

pub(super) fn allocate(
    state: &mut Snapshot,
    g: usize,
    s: &PendingSession,
    requested: &ResourceSlots,
    agents: &[String],
    group: &str,
) {
    for id in agents {
        if let Some(a) = state.groups[g].agents.iter_mut().find(|a| &a.id == id) {
            a.free = a.free.sub(&s.request.per_container);
        }
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

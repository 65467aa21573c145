//! What a scheduling pass reads: the waiting sessions (inline on SQLite: one hand-off for
//! the statement, not a copy of each value across threads), the snapshot the pure core
//! decides on (groups, agents, running sessions, quotas of every holder), and how many wait
//! in each group.

use std::collections::HashMap;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use uuid::Uuid;

use entity::{domain, keypair, keypair_resource_policy, project, resource_group, session};

use crate::domain::model::SchedulerStrategy;
use crate::domain::model::slots::{ResourceRequest, ResourceSlots};
use crate::domain::model::status::SessionStatus;
use crate::domain::scheduling::planner::{Agent, Group, KeypairQuota, PendingSession, Quota, Snapshot};
use crate::domain::sessions::occupancy::{self, UuidColumn};
use crate::domain::store::inline::{self, Decode, InlineReads, RowAt};
use crate::domain::{DomainResult, directory::catalog};

/// What the pass reads of a waiting session: what it decides by, not the whole row.
#[derive(Clone, Debug)]
pub(super) struct Waiting {
    pub(super) id: Uuid,
    pub(super) resource_group: String,
    pub(super) created_at: chrono::DateTime<chrono::Utc>,
    pub(super) starts_at: Option<chrono::DateTime<chrono::Utc>>,
    pub(super) requested_slots: Value,
    pub(super) cluster_size: i32,
    pub(super) owner_id: Uuid,
    pub(super) keypair_id: Uuid,
    pub(super) project_id: Uuid,
    pub(super) domain_id: Uuid,
    pub(super) priority: i32,
    pub(super) pending_digest: i64,
    pub(super) queue_position: Option<i32>,
}

/// The columns [`waiting`] selects, in the order [`WaitingRows`] reads them.
const WAITING_COLUMNS: [session::Column; 13] = {
    use session::Column as C;
    [
        C::Id,
        C::ResourceGroup,
        C::CreatedAt,
        C::StartsAt,
        C::RequestedSlots,
        C::ClusterSize,
        C::OwnerId,
        C::KeypairId,
        C::ProjectId,
        C::DomainId,
        C::Priority,
        C::PendingDigest,
        C::QueuePosition,
    ]
};

/// [`Waiting`] read by position: column `i` is `WAITING_COLUMNS[i]`.
#[derive(Clone, Copy)]
struct WaitingRows;

impl Decode for WaitingRows {
    type Out = Waiting;
    fn decode<R: RowAt>(&self, row: &R) -> DomainResult<Waiting> {
        Ok(Waiting {
            id: row.at(0)?,
            resource_group: row.at(1)?,
            created_at: row.at(2)?,
            starts_at: row.at(3)?,
            requested_slots: row.at(4)?,
            cluster_size: row.at(5)?,
            owner_id: row.at(6)?,
            keypair_id: row.at(7)?,
            project_id: row.at(8)?,
            domain_id: row.at(9)?,
            priority: row.at(10)?,
            pending_digest: row.at(11)?,
            queue_position: row.at(12)?,
        })
    }
}

/// The PENDING sessions (of `group`, or of every group), as the pass reads them: on a
/// blocking thread of their own when `inline` is given (a pass inside its write transaction
/// has written nothing yet, and holds the only write lock: another connection reads what it
/// would).
pub(super) async fn waiting(
    db: &impl ConnectionTrait,
    inline: Option<&InlineReads>,
    group: Option<&str>,
) -> DomainResult<Vec<Waiting>> {
    use sea_orm::{QuerySelect, QueryTrait};
    use session::Column as C;
    let read = session::Entity::find()
        .select_only()
        .columns(WAITING_COLUMNS)
        .filter(C::Status.eq(SessionStatus::Pending.as_str()))
        .apply_if(group, |q, g| q.filter(C::ResourceGroup.eq(g)))
        .build(db.get_database_backend());
    inline::all_blocking(db, inline, read, WaitingRows).await
}

pub(super) async fn load_snapshot(
    db: &impl sea_orm::ConnectionTrait,
    groups: &[resource_group::Model],
    pending: &[Waiting],
    extra: Vec<PendingSession>,
) -> DomainResult<Snapshot> {
    let group_names: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
    let agents = catalog::schedulable_agents(db, Some(&group_names)).await?;
    let mut snapshot = Snapshot::default();
    for g in groups {
        // A group whose strategy is not one of ours is left alone (its sessions keep
        // waiting), loudly, rather than scheduled by a rule nobody chose.
        let strategy = match SchedulerStrategy::stored(&g.scheduler) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(group = %g.name, error = ?e, "resource group not scheduled");
                continue;
            }
        };
        let held = occupancy::occupied_per_agent(db, &g.name).await?;
        let mut capacity = ResourceSlots::new();
        let mut group_agents = Vec::new();
        for a in agents.iter().filter(|a| a.resource_group == g.name) {
            capacity = capacity.add(&a.capacity);
            group_agents.push(Agent {
                id: a.id.clone(),
                free: a.capacity.sub(held.get(&a.id).unwrap_or(&ResourceSlots::new())),
                capacity: a.capacity.clone(),
            });
        }
        // A session whose stored request cannot be read waits, loudly, instead of
        // stopping the pass for everyone.
        let mut group_pending: Vec<PendingSession> = pending
            .iter()
            .filter(|s| s.resource_group == g.name)
            .filter_map(|s| match ResourceRequest::from_stored(&s.requested_slots, s.cluster_size) {
                Ok(request) => Some(PendingSession {
                    id: s.id,
                    owner: s.owner_id,
                    keypair: s.keypair_id,
                    project: s.project_id,
                    domain: s.domain_id,
                    priority: s.priority,
                    created: s.created_at.timestamp_micros(),
                    request,
                }),
                Err(e) => {
                    tracing::error!(session = %s.id, error = ?e, "pending session not scheduled");
                    None
                }
            })
            .collect();
        if extra_group(&g.name, groups) {
            group_pending.extend(extra.iter().cloned());
        }
        snapshot.groups.push(Group {
            name: g.name.clone(),
            strategy,
            agents: group_agents,
            pending: group_pending,
            capacity,
        });
    }
    // Limits and usage of every keypair, project and domain with a pending session.
    let used_kp = occupancy::occupied_by(db, UuidColumn::Keypair).await?;
    let used_project = occupancy::occupied_by(db, UuidColumn::Project).await?;
    let used_domain = occupancy::occupied_by(db, UuidColumn::Domain).await?;
    let active = occupancy::active_by_keypair(db).await?;
    let policies: HashMap<String, keypair_resource_policy::Model> =
        keypair_resource_policy::Entity::find().all(db).await?.into_iter().map(|p| (p.name.clone(), p)).collect();
    let kp_ids: Vec<Uuid> = pending.iter().map(|s| s.keypair_id).chain(extra.iter().map(|s| s.keypair)).collect();
    let project_ids: Vec<Uuid> = pending.iter().map(|s| s.project_id).chain(extra.iter().map(|s| s.project)).collect();
    let domain_ids: Vec<Uuid> = pending.iter().map(|s| s.domain_id).chain(extra.iter().map(|s| s.domain)).collect();
    for kp in
        keypair::Entity::find().filter(keypair::Column::Id.is_in(crate::domain::padded(dedup(kp_ids)))).all(db).await?
    {
        let Some(policy) = policies.get(&kp.resource_policy) else { continue };
        snapshot.keypairs.insert(
            kp.id,
            KeypairQuota {
                quota: Quota {
                    limit: ResourceSlots::from_json(&policy.total_resource_slots)?,
                    used: used_kp.get(&kp.id).cloned().unwrap_or_default(),
                },
                max_concurrent: u64::try_from(policy.max_concurrent_sessions).unwrap_or(0),
                active: active.get(&kp.id).copied().unwrap_or(0),
            },
        );
    }
    for p in project::Entity::find()
        .filter(project::Column::Id.is_in(crate::domain::padded(dedup(project_ids))))
        .all(db)
        .await?
    {
        let quota = Quota {
            limit: ResourceSlots::from_json(&p.total_resource_slots)?,
            used: used_project.get(&p.id).cloned().unwrap_or_default(),
        };
        snapshot.projects.insert(p.id, quota);
    }
    for d in domain::Entity::find()
        .filter(domain::Column::Id.is_in(crate::domain::padded(dedup(domain_ids))))
        .all(db)
        .await?
    {
        let quota = Quota {
            limit: ResourceSlots::from_json(&d.total_resource_slots)?,
            used: used_domain.get(&d.id).cloned().unwrap_or_default(),
        };
        snapshot.domains.insert(d.id, quota);
    }
    snapshot.owner_usage = occupancy::occupied_by_group_owner(db).await?;
    Ok(snapshot)
}

/// Hypothetical sessions go to the one group a dry run loads.
fn extra_group(name: &str, groups: &[resource_group::Model]) -> bool {
    groups.len() == 1 && groups[0].name == name
}

fn dedup(mut ids: Vec<Uuid>) -> Vec<Uuid> {
    ids.sort();
    ids.dedup();
    ids
}

/// How many sessions wait in each resource group (groups with none left out).
pub async fn pending_by_group(db: &impl ConnectionTrait) -> DomainResult<Vec<(String, u64)>> {
    use sea_orm::QuerySelect;
    let rows: Vec<(String, i64)> = session::Entity::find()
        .select_only()
        .column(session::Column::ResourceGroup)
        .column_as(session::Column::Id.count(), "n")
        .filter(session::Column::Status.eq(SessionStatus::Pending.as_str()))
        .group_by(session::Column::ResourceGroup)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|(group, n)| (group, u64::try_from(n).unwrap_or(0))).collect())
}

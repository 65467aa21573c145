//! What the platform is configured with, for superadministrators to see: domains with
//! their projects, keypair policies, resource groups with their agents (capacity, what is
//! held, health) and images. It is changed only through `sessiond apply`.

use std::collections::HashMap;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryOrder, QuerySelect, Select};
use uuid::Uuid;

use entity::{agent, domain, image, keypair_resource_policy, project, project_member, resource_group, user};

use crate::domain::directory::auth::Viewer;
use crate::domain::model::Role;
use crate::domain::model::slots::ResourceSlots;
use crate::domain::{DomainError, DomainResult, directory::catalog, sessions::occupancy};

pub struct Configuration {
    pub domains: Vec<ConfiguredDomain>,
    pub keypair_policies: Vec<keypair_resource_policy::Model>,
    pub resource_groups: Vec<ConfiguredGroup>,
    pub images: Vec<image::Model>,
}

pub struct ConfiguredDomain {
    pub name: String,
    pub limits: ResourceSlots,
    pub users: u64,
    pub projects: Vec<ConfiguredProject>,
}

pub struct ConfiguredProject {
    pub id: Uuid,
    pub name: String,
    pub limits: ResourceSlots,
    /// Allowed groups in order: the first is the default.
    pub resource_groups: Vec<String>,
    pub members: u64,
}

pub struct ConfiguredGroup {
    pub group: resource_group::Model,
    /// The engine that runs its sessions, and how it is doing.
    pub engine: Option<crate::domain::runtime::declared::EngineReport>,
    pub agents: Vec<ConfiguredAgent>,
}

pub struct ConfiguredAgent {
    pub id: String,
    pub capacity: ResourceSlots,
    /// What its sessions hold now.
    pub occupied: ResourceSlots,
    pub status: String,
    /// It answers (its status is alive).
    pub alive: bool,
    /// It takes new sessions (not drained).
    pub schedulable: bool,
    pub last_heartbeat_at: chrono::DateTime<chrono::Utc>,
}

/// Everything configured, in a fixed number of statements (eleven), whatever its size. Only a
/// superadministrator may see it.
pub async fn read(db: &impl ConnectionTrait, viewer: &Viewer) -> DomainResult<Configuration> {
    if viewer.role != Role::Superadmin {
        return Err(DomainError::Forbidden("only a superadministrator sees the configuration".to_owned()));
    }
    let domains = domain::Entity::find().order_by_asc(domain::Column::Name).all(db).await?;
    let projects = project::Entity::find().order_by_asc(project::Column::Name).all(db).await?;
    let links = entity::resource_group_project::Entity::find()
        .order_by_asc(entity::resource_group_project::Column::Position)
        .order_by_asc(entity::resource_group_project::Column::ResourceGroup)
        .all(db)
        .await?;
    let members = counted(db, project_member::Entity::find(), project_member::Column::ProjectId).await?;
    let users = counted(db, user::Entity::find(), user::Column::DomainId).await?;
    let mut out_domains = Vec::new();
    for d in domains {
        let mut ps = Vec::new();
        for p in projects.iter().filter(|p| p.domain_id == d.id) {
            ps.push(ConfiguredProject {
                id: p.id,
                name: p.name.clone(),
                limits: ResourceSlots::from_json(&p.total_resource_slots)?,
                resource_groups: links
                    .iter()
                    .filter(|l| l.project_id == p.id)
                    .map(|l| l.resource_group.clone())
                    .collect(),
                members: members.get(&p.id).copied().unwrap_or(0),
            });
        }
        out_domains.push(ConfiguredDomain {
            limits: ResourceSlots::from_json(&d.total_resource_slots)?,
            users: users.get(&d.id).copied().unwrap_or(0),
            name: d.name,
            projects: ps,
        });
    }
    let occupied = occupancy::occupied_per_agent_everywhere(db).await?;
    let agents = agent::Entity::find().order_by_asc(agent::Column::Id).all(db).await?;
    let groups = resource_group::Entity::find().order_by_asc(resource_group::Column::Name).all(db).await?;
    let engines = crate::domain::runtime::declared::reports(crate::domain::runtime::engines::stored_from(
        entity::engine::Entity::find().all(db).await?,
        &groups,
    ));
    let mut resource_groups = Vec::new();
    for g in groups {
        let mut list = Vec::new();
        for a in agents.iter().filter(|a| a.resource_group == g.name) {
            list.push(ConfiguredAgent {
                id: a.id.clone(),
                capacity: ResourceSlots::from_json(&a.available_slots)?,
                occupied: occupied.get(&a.id).cloned().unwrap_or_default(),
                status: a.status.clone(),
                alive: a.status == catalog::ALIVE,
                schedulable: a.schedulable,
                last_heartbeat_at: a.last_heartbeat_at,
            });
        }
        let engine = engines.iter().find(|e| g.engine.as_ref() == Some(&e.name)).cloned();
        resource_groups.push(ConfiguredGroup { group: g, engine, agents: list });
    }
    Ok(Configuration {
        domains: out_domains,
        keypair_policies: keypair_resource_policy::Entity::find()
            .order_by_asc(keypair_resource_policy::Column::Name)
            .all(db)
            .await?,
        resource_groups,
        images: catalog::images(db).await?,
    })
}

/// Rows of `query` counted by `key`, in one grouped statement.
async fn counted<E: EntityTrait>(
    db: &impl ConnectionTrait,
    query: Select<E>,
    key: impl ColumnTrait,
) -> DomainResult<HashMap<Uuid, u64>> {
    let rows: Vec<(Uuid, i64)> =
        query.select_only().column(key).column_as(key.count(), "n").group_by(key).into_tuple().all(db).await?;
    Ok(rows.into_iter().map(|(k, n)| (k, u64::try_from(n).unwrap_or(0))).collect())
}

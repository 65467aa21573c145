//! What the platform offers to launch on: images, the resource groups a project may use,
//! and the agents that can take sessions. One definition each, for launch, the scheduler
//! and the panels alike.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use entity::{agent, image, resource_group, resource_group_project};

use super::DomainResult;
use super::slots::ResourceSlots;

/// Every image, by name.
pub async fn images(db: &impl ConnectionTrait) -> DomainResult<Vec<image::Model>> {
    Ok(image::Entity::find().order_by_asc(image::Column::Name).all(db).await?)
}

/// The resource groups project `project_id` may use, in the project's order: its default
/// (the first) first. Visibility of the project is the caller's to check.
pub async fn project_resource_groups(
    db: &impl ConnectionTrait,
    project_id: Uuid,
) -> DomainResult<Vec<resource_group::Model>> {
    let links = resource_group_project::Entity::find()
        .filter(resource_group_project::Column::ProjectId.eq(project_id))
        .order_by_asc(resource_group_project::Column::Position)
        .all(db)
        .await?;
    if links.is_empty() {
        return Ok(Vec::new());
    }
    let groups = resource_group::Entity::find()
        .filter(resource_group::Column::Name.is_in(links.iter().map(|l| l.resource_group.clone())))
        .all(db)
        .await?;
    Ok(links.iter().filter_map(|l| groups.iter().find(|g| g.name == l.resource_group).cloned()).collect())
}

/// An agent that can take sessions now: alive and not drained.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulableAgent {
    pub id: String,
    pub resource_group: String,
    pub capacity: ResourceSlots,
}

/// The schedulable agents of `groups` (of every group when `None`), by id.
pub async fn schedulable_agents(
    db: &impl ConnectionTrait,
    groups: Option<&[String]>,
) -> DomainResult<Vec<SchedulableAgent>> {
    let mut query = agent::Entity::find()
        .filter(agent::Column::Status.eq(ALIVE))
        .filter(agent::Column::Schedulable.eq(true))
        .order_by_asc(agent::Column::Id);
    if let Some(groups) = groups {
        query = query.filter(agent::Column::ResourceGroup.is_in(groups.iter().cloned()));
    }
    query
        .all(db)
        .await?
        .into_iter()
        .map(|a| {
            Ok(SchedulableAgent {
                capacity: ResourceSlots::from_json(&a.available_slots)?,
                id: a.id,
                resource_group: a.resource_group,
            })
        })
        .collect()
}

/// The stored status of an agent that answers.
pub const ALIVE: &str = "ALIVE";

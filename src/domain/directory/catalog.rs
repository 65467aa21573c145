//! What the platform offers to launch on: images, the resource groups a project may use,
//! and the agents that can take sessions. One definition each, for launch, the scheduler
//! and the panels alike.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, JoinType, QueryFilter, QueryOrder, QuerySelect, RelationDef};
use uuid::Uuid;

use entity::{agent, image, resource_group, resource_group_project};

use crate::domain::DomainResult;
use crate::domain::model::slots::ResourceSlots;

/// Every image and resource group, as read at one revision of the directory (kept by
/// [`crate::domain::directory::credentials::Credentials::catalog`]): what a page of sessions shows of its
/// sessions' images and groups, without a statement per page. Both change only through
/// `apply` (and the local runtime's own group), which move the revision.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub resource_groups: std::collections::HashMap<String, resource_group::Model>,
    pub images: std::collections::HashMap<String, image::Model>,
}

impl Snapshot {
    /// Reads both tables: two statements.
    pub async fn read(db: &impl ConnectionTrait) -> DomainResult<Self> {
        let (groups, images) = tokio::try_join!(resource_group::Entity::find().all(db), image::Entity::find().all(db))?;
        Ok(Self {
            resource_groups: groups.into_iter().map(|g| (g.name.clone(), g)).collect(),
            images: images.into_iter().map(|i| (i.name.clone(), i)).collect(),
        })
    }
}

/// The slot names the database knows: the only ones a request or a limit may name.
pub async fn known_slots(db: &impl ConnectionTrait) -> DomainResult<std::collections::BTreeSet<String>> {
    Ok(entity::slot_type::Entity::find().all(db).await?.into_iter().map(|s| s.name).collect())
}

/// Every image, by name.
pub async fn images(db: &impl ConnectionTrait) -> DomainResult<Vec<image::Model>> {
    Ok(image::Entity::find().order_by_asc(image::Column::Name).all(db).await?)
}

/// How each image that declares one runs on a machine of the local runtime.
pub async fn local_environments(
    db: &impl ConnectionTrait,
) -> DomainResult<std::collections::BTreeMap<String, crate::domain::runtime::environments::LocalImage>> {
    let mut out = std::collections::BTreeMap::new();
    for i in image::Entity::find().filter(image::Column::LocalEnvironment.is_not_null()).all(db).await? {
        let Some(stored) = i.local_environment else { continue };
        let local = serde_json::from_value(stored)
            .map_err(|e| crate::domain::DomainError::invariant(format!("image {}: local environment: {e}", i.name)))?;
        out.insert(i.name, local);
    }
    Ok(out)
}

/// Every image's apps, by image name.
pub async fn apps(
    db: &impl ConnectionTrait,
) -> DomainResult<std::collections::BTreeMap<String, Vec<crate::domain::apps::AppSpec>>> {
    Ok(image::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|i| (i.name.clone(), crate::domain::apps::of_image(&i)))
        .collect())
}

/// The declared registries, by name.
pub async fn registries(
    db: &impl ConnectionTrait,
) -> DomainResult<std::collections::BTreeMap<String, crate::domain::runtime::image::registry::Registry>> {
    let mut out = std::collections::BTreeMap::new();
    for r in entity::registry::Entity::find().all(db).await? {
        let registry = serde_json::from_value(r.settings)
            .map_err(|e| crate::domain::DomainError::invariant(format!("registry {}: {e}", r.name)))?;
        out.insert(r.name, registry);
    }
    Ok(out)
}

/// The resource groups project `project_id` may use, in the project's order: its default
/// (the first) first. Visibility of the project is the caller's to check.
pub async fn project_resource_groups(
    db: &impl ConnectionTrait,
    project_id: Uuid,
) -> DomainResult<Vec<resource_group::Model>> {
    // One statement: the groups joined to the project's links, in the links' order.
    let links: RelationDef = resource_group::Entity::belongs_to(resource_group_project::Entity)
        .from(resource_group::Column::Name)
        .to(resource_group_project::Column::ResourceGroup)
        .into();
    Ok(resource_group::Entity::find()
        .join(JoinType::InnerJoin, links)
        .filter(resource_group_project::Column::ProjectId.eq(project_id))
        .order_by_asc(resource_group_project::Column::Position)
        .order_by_asc(resource_group::Column::Name)
        .all(db)
        .await?)
}

/// An agent and its capacity: from [`schedulable_agents`], one that can take sessions now
/// (alive and not drained); from [`every_agent`], any.
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
        query = query.filter(agent::Column::ResourceGroup.is_in(crate::domain::padded(groups.iter().cloned())));
    }
    with_capacity(query.all(db).await?)
}

fn with_capacity(agents: Vec<agent::Model>) -> DomainResult<Vec<SchedulableAgent>> {
    agents
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

/// Every agent of `group` with its capacity, drained or not answering included: what the
/// group could ever hold, for telling a request that waits from one that never fits.
pub async fn every_agent(db: &impl ConnectionTrait, group: &str) -> DomainResult<Vec<SchedulableAgent>> {
    with_capacity(
        agent::Entity::find()
            .filter(agent::Column::ResourceGroup.eq(group.to_owned()))
            .order_by_asc(agent::Column::Id)
            .all(db)
            .await?,
    )
}

/// The stored status of an agent that answers.
pub const ALIVE: &str = "ALIVE";

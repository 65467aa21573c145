//! The records a session refers to (owner, project, resource group, image, launch group,
//! status transitions), each kind loaded for many sessions in one statement. A list page
//! resolves its relations through these, whatever its size.

use std::collections::HashMap;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use entity::{image, launch_group, project, resource_group, session_status_transition, user};

use crate::domain::DomainResult;

pub async fn users(db: &impl ConnectionTrait, ids: &[Uuid]) -> DomainResult<HashMap<Uuid, user::Model>> {
    if ids.is_empty() {
        return Ok(HashMap::new()); // no statement for nothing
    }
    let rows =
        user::Entity::find().filter(user::Column::Id.is_in(crate::domain::padded(ids.iter().copied()))).all(db).await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

pub async fn projects(db: &impl ConnectionTrait, ids: &[Uuid]) -> DomainResult<HashMap<Uuid, project::Model>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = project::Entity::find()
        .filter(project::Column::Id.is_in(crate::domain::padded(ids.iter().copied())))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

pub async fn launch_groups(
    db: &impl ConnectionTrait,
    ids: &[Uuid],
) -> DomainResult<HashMap<Uuid, launch_group::Model>> {
    let rows = launch_group::Entity::find()
        .filter(launch_group::Column::Id.is_in(crate::domain::padded(ids.iter().copied())))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

pub async fn resource_groups(
    db: &impl ConnectionTrait,
    names: &[String],
) -> DomainResult<HashMap<String, resource_group::Model>> {
    let rows = resource_group::Entity::find()
        .filter(resource_group::Column::Name.is_in(crate::domain::padded(names.iter().cloned())))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (r.name.clone(), r)).collect())
}

pub async fn images(db: &impl ConnectionTrait, names: &[String]) -> DomainResult<HashMap<String, image::Model>> {
    let rows = image::Entity::find()
        .filter(image::Column::Name.is_in(crate::domain::padded(names.iter().cloned())))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (r.name.clone(), r)).collect())
}

/// Every status change of each session, oldest first; an empty list for a session without.
pub async fn transitions(
    db: &impl ConnectionTrait,
    session_ids: &[Uuid],
) -> DomainResult<HashMap<Uuid, Vec<session_status_transition::Model>>> {
    let rows = session_status_transition::Entity::find()
        .filter(session_status_transition::Column::SessionId.is_in(crate::domain::padded(session_ids.iter().copied())))
        .filter(session_status_transition::Column::Kind.eq(crate::domain::model::EventKind::StatusChange.as_str()))
        .order_by_asc(session_status_transition::Column::Id)
        .all(db)
        .await?;
    let mut out: HashMap<Uuid, Vec<_>> = session_ids.iter().map(|id| (*id, Vec::new())).collect();
    for r in rows {
        out.entry(r.session_id).or_default().push(r);
    }
    Ok(out)
}

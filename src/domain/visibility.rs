//! Who may see what. Every read path asks this module; nothing else decides visibility.
//! Something the viewer may not see is reported exactly like something that does not exist.

use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use entity::{project, project_member, user};

use super::auth::Viewer;
use super::model::Role;
use super::{DomainError, DomainResult};

/// The projects the viewer may open: those it is a member of, plus every project of its
/// domain for an ADMIN and every project for a SUPERADMIN. Ordered by name.
pub async fn visible_projects(db: &impl ConnectionTrait, viewer: &Viewer) -> DomainResult<Vec<project::Model>> {
    let query = project::Entity::find().order_by_asc(project::Column::Name).order_by_asc(project::Column::Id);
    let query = match viewer.role {
        Role::Superadmin => query,
        Role::Admin => query.filter(
            Condition::any()
                .add(project::Column::DomainId.eq(viewer.domain_id))
                .add(project::Column::Id.in_subquery(member_projects(viewer.user_id))),
        ),
        Role::User => query.filter(project::Column::Id.in_subquery(member_projects(viewer.user_id))),
    };
    Ok(query.all(db).await?)
}

fn member_projects(user_id: Uuid) -> sea_orm::sea_query::SelectStatement {
    use sea_orm::sea_query::Query;
    Query::select()
        .column(project_member::Column::ProjectId)
        .from(project_member::Entity)
        .and_where(project_member::Column::UserId.eq(user_id))
        .take()
}

/// The project `id` if the viewer may see it, else `NOT_FOUND`.
pub async fn visible_project(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<project::Model> {
    let not_found = DomainError::NotFound("project");
    let Some(p) = project::Entity::find_by_id(id).one(db).await? else {
        return Err(not_found);
    };
    if viewer.administers_domain(p.domain_id) || is_member(db, viewer.user_id, id).await? {
        Ok(p)
    } else {
        Err(not_found)
    }
}

pub async fn is_member(db: &impl ConnectionTrait, user_id: Uuid, project_id: Uuid) -> DomainResult<bool> {
    Ok(project_member::Entity::find_by_id((project_id, user_id)).one(db).await?.is_some())
}

/// The user `id` if the viewer may see it: itself, anyone of its domain for an ADMIN,
/// anyone for a SUPERADMIN. Otherwise `NOT_FOUND`.
pub async fn visible_user(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<user::Model> {
    let not_found = DomainError::NotFound("user");
    let Some(u) = user::Entity::find_by_id(id).one(db).await? else {
        return Err(not_found);
    };
    if u.id == viewer.user_id || viewer.administers_domain(u.domain_id) { Ok(u) } else { Err(not_found) }
}

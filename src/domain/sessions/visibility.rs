//! Who may see what. Every read path asks this module; nothing else decides visibility.
//! Something the viewer may not see is reported exactly like something that does not exist.

use sea_orm::{ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait};
use uuid::Uuid;

use entity::{launch_group, project, project_member, session, user};

use crate::domain::directory::auth::Viewer;
use crate::domain::model::Role;
use crate::domain::store::inline::{self, Decode, FirstColumn, InlineReads, RowAt};
use crate::domain::{DomainError, DomainResult};

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

/// What the top of the Sessions page shows of its viewer: the projects it may open, by
/// name, each with whether it is a member, and its page settings.
pub struct Home {
    pub projects: Vec<(project::Model, bool)>,
    pub settings: crate::domain::sessions::settings::UserSettings,
}

/// [`Home`] in one statement: the viewer's settings row joined with the projects it may see
/// ([`visible_projects`]'s rule) and its membership of each.
pub async fn home(db: &impl ConnectionTrait, viewer: &Viewer) -> DomainResult<Home> {
    use entity::user_setting;
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, JoinType, Order, Query};
    use sea_orm::{FromQueryResult, IdenStatic, Iterable};
    let member = Query::select()
        .expr(Expr::val(1))
        .from(project_member::Entity)
        .and_where(
            Expr::col((project_member::Entity, project_member::Column::ProjectId))
                .equals((project::Entity, project::Column::Id)),
        )
        .and_where(Expr::col((project_member::Entity, project_member::Column::UserId)).eq(viewer.user_id))
        .take();
    let in_membership = Expr::col((project::Entity, project::Column::Id)).in_subquery(member_projects(viewer.user_id));
    let visible = match viewer.role {
        Role::Superadmin => Expr::val(true).eq(true),
        Role::Admin => Expr::col((project::Entity, project::Column::DomainId)).eq(viewer.domain_id).or(in_membership),
        Role::User => in_membership,
    };
    let me = Alias::new("me");
    let select = Query::select()
        .columns(project::Column::iter().map(|c| (project::Entity, c)))
        .expr_as(Expr::exists(member), Alias::new("member"))
        .column((user_setting::Entity, user_setting::Column::ResourcePanelView))
        .column((user_setting::Entity, user_setting::Column::SessionListColumns))
        // One row at least, whatever the viewer may open: the settings come with it.
        .from_subquery(Query::select().expr_as(Expr::val(1), Alias::new("one")).take(), me)
        .join(
            JoinType::LeftJoin,
            user_setting::Entity,
            Expr::col((user_setting::Entity, user_setting::Column::UserId)).eq(viewer.user_id),
        )
        .join(JoinType::LeftJoin, project::Entity, visible)
        .order_by((project::Entity, project::Column::Name), Order::Asc)
        .order_by((project::Entity, project::Column::Id), Order::Asc)
        .take();
    let rows = db.query_all_raw(db.get_database_backend().build(&select)).await?;
    let mut settings = None;
    let mut projects = Vec::with_capacity(rows.len());
    for row in &rows {
        if settings.is_none() {
            let view: Option<String> = row.try_get("", user_setting::Column::ResourcePanelView.as_str())?;
            let columns: Option<serde_json::Value> =
                row.try_get("", user_setting::Column::SessionListColumns.as_str())?;
            settings = Some(crate::domain::sessions::settings::stored(view.zip(columns)));
        }
        if row.try_get::<Option<Uuid>>("", project::Column::Id.as_str())?.is_some() {
            projects.push((project::Model::from_query_result(row, "")?, row.try_get::<bool>("", "member")?));
        }
    }
    Ok(Home { projects, settings: settings.unwrap_or_default() })
}

fn member_projects(user_id: Uuid) -> sea_orm::sea_query::SelectStatement {
    use sea_orm::sea_query::Query;
    Query::select()
        .column(project_member::Column::ProjectId)
        .from(project_member::Entity)
        .and_where(project_member::Column::UserId.eq(user_id))
        .take()
}

/// A project the viewer may see, and whether the viewer is one of its members.
#[derive(Clone, Debug)]
pub struct ProjectAccess {
    pub project: project::Model,
    /// Known once asked: a member sees the project through its membership, so that is
    /// known at once; an administrator's membership is looked up only when a rule needs it.
    member: Option<bool>,
}

impl ProjectAccess {
    /// Whether the viewer is a member of the project (looked up at most once).
    pub async fn is_member(&mut self, db: &impl ConnectionTrait, viewer: &Viewer) -> DomainResult<bool> {
        if let Some(member) = self.member {
            return Ok(member);
        }
        let member = is_member(db, None, viewer.user_id, self.project.id).await?;
        self.member = Some(member);
        Ok(member)
    }

    /// Refuses a viewer who is not a member: launching needs membership, even for an ADMIN.
    pub async fn require_member(&mut self, db: &impl ConnectionTrait, viewer: &Viewer, why: &str) -> DomainResult<()> {
        if self.is_member(db, viewer).await? {
            Ok(())
        } else {
            Err(DomainError::Forbidden(format!("you are not a member of project `{}`: {why}", self.project.name)))
        }
    }
}

/// The project `id` with the viewer's access to it, if the viewer may see it (a member, an
/// ADMIN of its domain, a SUPERADMIN), else `NOT_FOUND`.
pub async fn project_access(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<ProjectAccess> {
    project_access_in(db, None, viewer, id).await
}

/// [`project_access`], read on the caller's thread when `inline` is given and takes it.
pub async fn project_access_in(
    db: &impl ConnectionTrait,
    inline: Option<&InlineReads>,
    viewer: &Viewer,
    id: Uuid,
) -> DomainResult<ProjectAccess> {
    let not_found = DomainError::NotFound("project");
    let backend = db.get_database_backend();
    let read = project::Entity::find_by_id(id).build(backend);
    let Some(project) = inline::all(db, inline, read, &Projects).await?.into_iter().next() else {
        return Err(not_found);
    };
    if viewer.administers_domain(project.domain_id) {
        return Ok(ProjectAccess { project, member: None });
    }
    if is_member(db, inline, viewer.user_id, id).await? {
        Ok(ProjectAccess { project, member: Some(true) })
    } else {
        Err(not_found)
    }
}

/// A project's columns, in the entity's order (as `Entity::find()` selects them).
struct Projects;

impl Decode for Projects {
    type Out = project::Model;
    fn decode<R: RowAt>(&self, row: &R) -> DomainResult<project::Model> {
        Ok(project::Model {
            id: row.at(0)?,
            domain_id: row.at(1)?,
            name: row.at(2)?,
            total_resource_slots: row.at(3)?,
            created_at: row.at(4)?,
        })
    }
}

/// The project `id` if the viewer may see it, else `NOT_FOUND`.
pub async fn visible_project(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<project::Model> {
    Ok(project_access(db, viewer, id).await?.project)
}

async fn is_member(
    db: &impl ConnectionTrait,
    inline: Option<&InlineReads>,
    user_id: Uuid,
    project_id: Uuid,
) -> DomainResult<bool> {
    let membership = project_member::Entity::find_by_id((project_id, user_id))
        .select_only()
        .column(project_member::Column::ProjectId)
        .build(db.get_database_backend());
    Ok(!inline::all(db, inline, membership, &FirstColumn::<Uuid>::default()).await?.is_empty())
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

/// Whose sessions of a project a list shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionScope {
    /// The viewer's own sessions in the project, whatever the viewer's role.
    Mine,
    /// Every user's sessions in the project: for an ADMIN of its domain or a SUPERADMIN.
    Project,
}

impl SessionScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mine => "MINE",
            Self::Project => "PROJECT",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Mine, Self::Project].into_iter().find(|s| s.as_str() == text)
    }
}

/// The sessions of one project a viewer may see in one scope: as a SQL condition for the
/// lists, counts and replays, and as a test of one session for the live events. Both come
/// from the same two fields, so they cannot disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopedSessions {
    pub project_id: Uuid,
    /// `Some(viewer)` for scope MINE; `None` for every owner (scope PROJECT).
    pub owner_id: Option<Uuid>,
}

impl ScopedSessions {
    pub fn condition(&self) -> Condition {
        let c = Condition::all().add(session::Column::ProjectId.eq(self.project_id));
        match self.owner_id {
            Some(owner) => c.add(session::Column::OwnerId.eq(owner)),
            None => c,
        }
    }

    pub fn admits(&self, s: &session::Model) -> bool {
        s.project_id == self.project_id && self.owner_id.is_none_or(|o| o == s.owner_id)
    }
}

/// The sessions of `project_id` the viewer may list in `scope`: `NOT_FOUND` for a project
/// the viewer cannot see, `FORBIDDEN` for a scope it may not use. Every session list and
/// every live feed of session events starts here.
pub async fn session_scope(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    project_id: Uuid,
    scope: SessionScope,
) -> DomainResult<ScopedSessions> {
    Ok(scoped_project(db, None, viewer, project_id, scope).await?.0)
}

/// [`session_scope`], with the project it read.
pub async fn scoped_project(
    db: &impl ConnectionTrait,
    inline: Option<&InlineReads>,
    viewer: &Viewer,
    project_id: Uuid,
    scope: SessionScope,
) -> DomainResult<(ScopedSessions, project::Model)> {
    let mut access = project_access_in(db, inline, viewer, project_id).await?;
    let owner_id = match scope {
        SessionScope::Mine => {
            access.require_member(db, viewer, "its administrators list its sessions with scope PROJECT").await?;
            Some(viewer.user_id)
        }
        SessionScope::Project if viewer.administers_domain(access.project.domain_id) => None,
        SessionScope::Project => {
            return Err(DomainError::Forbidden(
                "listing every user's sessions needs an administrator of the project's domain".to_owned(),
            ));
        }
    };
    Ok((ScopedSessions { project_id: access.project.id, owner_id }, access.project))
}

/// The session lists of a project the viewer may read: its own (MINE) as a member, and
/// everyone's (PROJECT) as an administrator of its domain; the rule [`scoped_project`]
/// enforces, for a client to offer only what will be answered.
pub fn scopes_in(viewer: &Viewer, project: &project::Model, is_member: bool) -> Vec<SessionScope> {
    let mut scopes = Vec::with_capacity(2);
    if is_member {
        scopes.push(SessionScope::Mine);
    }
    if viewer.administers_domain(project.domain_id) {
        scopes.push(SessionScope::Project);
    }
    scopes
}

/// Which of `projects` `user_id` is a member of (one statement).
pub async fn member_of(
    db: &impl ConnectionTrait,
    user_id: Uuid,
    projects: &[Uuid],
) -> DomainResult<std::collections::HashSet<Uuid>> {
    let found: Vec<Uuid> = project_member::Entity::find()
        .select_only()
        .column(project_member::Column::ProjectId)
        .filter(project_member::Column::UserId.eq(user_id))
        .filter(project_member::Column::ProjectId.is_in(crate::domain::padded(projects.iter().copied())))
        .into_tuple()
        .all(db)
        .await?;
    Ok(found.into_iter().collect())
}

/// Whether the viewer may see one session: its owner, an ADMIN of its domain, a SUPERADMIN.
pub fn may_see_session(viewer: &Viewer, owner_id: Uuid, domain_id: Uuid) -> bool {
    owner_id == viewer.user_id || viewer.administers_domain(domain_id)
}

/// The session `id` if the viewer may see it, else `NOT_FOUND`, exactly as for no session.
pub async fn visible_session(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<session::Model> {
    match session::Entity::find_by_id(id).one(db).await? {
        Some(s) if may_see_session(viewer, s.owner_id, s.domain_id) => Ok(s),
        _ => Err(DomainError::NotFound("session")),
    }
}

/// The session `id` if the viewer may work on it, else `NOT_FOUND`, exactly as for no
/// session. An ADMIN of its domain and a SUPERADMIN may; its owner only while still a
/// member of its project. An owner removed from the project keeps reading his session and
/// may terminate it (what he started stays his to stop), and nothing more: renaming,
/// reprioritising, extending, exempting, following its logs or use and its terminal are
/// refused to him as if it did not exist, as the list, launch and templates refuse him.
pub async fn session_to_work_on(db: &impl ConnectionTrait, viewer: &Viewer, id: Uuid) -> DomainResult<session::Model> {
    let s = visible_session(db, viewer, id).await?;
    if viewer.administers_domain(s.domain_id) || is_member(db, None, viewer.user_id, s.project_id).await? {
        Ok(s)
    } else {
        Err(DomainError::NotFound("session"))
    }
}

/// Of `sessions` the viewer may see, those it may work on ([`session_to_work_on`]), in one
/// statement whatever their number.
pub async fn sessions_to_work_on(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    sessions: Vec<session::Model>,
) -> DomainResult<Vec<session::Model>> {
    let projects: std::collections::BTreeSet<Uuid> =
        sessions.iter().filter(|s| !viewer.administers_domain(s.domain_id)).map(|s| s.project_id).collect();
    let member_of: std::collections::HashSet<Uuid> = if projects.is_empty() {
        std::collections::HashSet::new()
    } else {
        project_member::Entity::find()
            .select_only()
            .column(project_member::Column::ProjectId)
            .filter(project_member::Column::UserId.eq(viewer.user_id))
            .filter(project_member::Column::ProjectId.is_in(crate::domain::padded(projects)))
            .into_tuple::<Uuid>()
            .all(db)
            .await?
            .into_iter()
            .collect()
    };
    Ok(sessions
        .into_iter()
        .filter(|s| viewer.administers_domain(s.domain_id) || member_of.contains(&s.project_id))
        .collect())
}

/// The launch group `id` if the viewer may see its sessions, else `NOT_FOUND`.
pub async fn visible_launch_group(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    id: Uuid,
) -> DomainResult<launch_group::Model> {
    let Some(group) = launch_group::Entity::find_by_id(id).one(db).await? else {
        return Err(DomainError::NotFound("launch group"));
    };
    let domain_id = project::Entity::find_by_id(group.project_id).one(db).await?.map(|p| p.domain_id);
    match domain_id {
        Some(domain_id) if may_see_session(viewer, group.owner_id, domain_id) => Ok(group),
        _ => Err(DomainError::NotFound("launch group")),
    }
}

/// The sessions of a launch group the viewer may see (all or none: they share an owner).
pub fn launch_group_scope(group: &launch_group::Model) -> Condition {
    Condition::all().add(session::Column::LaunchGroupId.eq(group.id))
}

/// The resource groups a visible project may use, its default (first) first.
pub async fn project_resource_groups(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    project_id: Uuid,
) -> DomainResult<Vec<entity::resource_group::Model>> {
    let project = visible_project(db, viewer, project_id).await?;
    crate::domain::directory::catalog::project_resource_groups(db, project.id).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::directory::auth::tests::viewer;

    #[test]
    fn a_session_is_seen_by_its_owner_and_the_administrators_of_its_domain() {
        let (alice, bob, domain, other) = (1, 2, Uuid::from_u128(10), Uuid::from_u128(20));
        let owned_by = |user: u128| Uuid::from_u128(user);
        let cases = [
            (viewer(Role::User, alice, 10), owned_by(alice), domain, true),
            (viewer(Role::User, bob, 10), owned_by(alice), domain, false),
            (viewer(Role::Admin, 3, 10), owned_by(alice), domain, true),
            (viewer(Role::Admin, 3, 20), owned_by(alice), domain, false),
            (viewer(Role::Admin, alice, 20), owned_by(alice), domain, true),
            (viewer(Role::Superadmin, 4, 20), owned_by(alice), domain, true),
            (viewer(Role::User, alice, 10), owned_by(alice), other, true),
        ];
        for (i, (v, owner, domain, expected)) in cases.into_iter().enumerate() {
            assert_eq!(may_see_session(&v, owner, domain), expected, "case {i}");
        }
    }
}

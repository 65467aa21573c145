//! `viewer`: who is asking, the projects they may open, and their page settings.

use async_graphql::{Context, Enum, ID, Object, SimpleObject};
use uuid::Uuid;

use crate::domain::{self, auth, model, settings, visibility};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::limits::STATEMENT_COST;
use super::types::{ResourcePanelView, SessionColumnKey};

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "Role", remote = "crate::domain::model::Role")]
pub enum Role {
    User,
    Admin,
    Superadmin,
}

/// A person with an account.
pub struct User {
    pub id: Uuid,
    pub email: String,
    pub full_name: String,
    pub role: model::Role,
}

impl From<&auth::Viewer> for User {
    fn from(v: &auth::Viewer) -> Self {
        Self { id: v.user_id, email: v.email.clone(), full_name: v.full_name.clone(), role: v.role }
    }
}

impl TryFrom<entity::user::Model> for User {
    type Error = domain::DomainError;

    fn try_from(u: entity::user::Model) -> Result<Self, Self::Error> {
        Ok(Self { role: model::Role::stored(&u.role)?, id: u.id, email: u.email, full_name: u.full_name })
    }
}

#[Object(serial)]
impl User {
    pub async fn id(&self) -> ID {
        encode(NodeKind::User, self.id)
    }
    async fn email(&self) -> &str {
        &self.email
    }
    async fn full_name(&self) -> &str {
        &self.full_name
    }
    async fn role(&self) -> Role {
        self.role.into()
    }
}

/// A project: the unit sessions, members and quotas belong to.
pub struct Project(pub entity::project::Model);

#[Object(serial)]
impl Project {
    pub async fn id(&self) -> ID {
        encode(NodeKind::Project, self.0.id)
    }
    /// Unique within its domain; the page's URL is `/project/<name>/session`.
    async fn name(&self) -> &str {
        &self.0.name
    }
}

/// One column of the session table, in display order.
#[derive(SimpleObject)]
pub struct SessionColumn {
    pub column: SessionColumnKey,
    pub visible: bool,
}

/// The viewer's Sessions page settings.
pub struct UserSettings(pub settings::UserSettings);

#[Object]
impl UserSettings {
    /// Which resource panel the page shows.
    async fn resource_panel_view(&self) -> ResourcePanelView {
        self.0.resource_panel_view.into()
    }
    /// Every column exactly once, in display order.
    async fn session_list_columns(&self) -> Vec<SessionColumn> {
        self.0
            .session_list_columns
            .iter()
            .map(|c| SessionColumn { column: c.column.into(), visible: c.visible })
            .collect()
    }
}

/// The authenticated caller.
pub struct Viewer;

#[Object]
impl Viewer {
    async fn user(&self, ctx: &Context<'_>) -> ApiResult<User> {
        Ok(viewer(ctx)?.into())
    }
    /// The projects the viewer may open, by name.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn projects(&self, ctx: &Context<'_>) -> ApiResult<Vec<Project>> {
        let projects = visibility::visible_projects(db(ctx)?, viewer(ctx)?).await?;
        Ok(projects.into_iter().map(Project).collect())
    }
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn settings(&self, ctx: &Context<'_>) -> ApiResult<UserSettings> {
        Ok(UserSettings(settings::user_settings(db(ctx)?, viewer(ctx)?.user_id).await?))
    }
}

#[derive(Default)]
pub struct ViewerQuery;

#[Object]
impl ViewerQuery {
    /// The caller, as authenticated by the bearer token.
    async fn viewer(&self, ctx: &Context<'_>) -> ApiResult<Viewer> {
        viewer(ctx)?;
        Ok(Viewer)
    }
}

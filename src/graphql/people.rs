//! The people and projects the API names: `User` (a person with an account) and `Project`.

use async_graphql::{Context, Enum, ID, Object};
use uuid::Uuid;

use crate::domain::{self, directory::auth, model, sessions::visibility};

use super::context::{loaders, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::loaders::MemberOf;
use super::session_list::SessionScope;

/// What a user may administer.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(name = "Role", remote = "crate::domain::model::Role")]
pub enum Role {
    /// Works in the projects they are a member of, and sees their own sessions there.
    User,
    /// Administers every project of their own domain: sees and manages everyone's sessions
    /// there.
    Admin,
    /// Administers every domain, and sees the platform's configuration.
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

/// A person with an account.
#[Object(serial)]
impl User {
    /// The user's global id (opaque).
    pub async fn id(&self) -> ID {
        encode(NodeKind::User, self.id)
    }
    /// Their e-mail address: unique, and what `SessionFilter.ownerEmail` matches.
    async fn email(&self) -> &str {
        &self.email
    }
    /// The name the page shows for them.
    async fn full_name(&self) -> &str {
        &self.full_name
    }
    /// What they may administer.
    async fn role(&self) -> Role {
        self.role.into()
    }
}

/// A project: the unit sessions, members and quotas belong to.
pub struct Project(pub entity::project::Model);

/// A project: the unit sessions, members and quotas belong to.
#[Object(serial)]
impl Project {
    /// The project's global id (opaque): what the `projectId` arguments take.
    pub async fn id(&self) -> ID {
        encode(NodeKind::Project, self.0.id)
    }
    /// Unique within its domain; the page's URL is `/project/<name>/session`.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The session lists of it the viewer may read: MINE as a member, PROJECT as an
    /// administrator of its domain (a superadmin's). `sessions` refuses any other.
    async fn session_scopes(&self, ctx: &Context<'_>) -> ApiResult<Vec<SessionScope>> {
        let viewer = viewer(ctx)?;
        let member = loaders(ctx)?.load_one(MemberOf(viewer.user_id, self.0.id)).await?.unwrap_or(false);
        Ok(visibility::scopes_in(viewer, &self.0, member).into_iter().map(Into::into).collect())
    }
}

//! `Actor`: who made a status change or a line of a session's history.

use async_graphql::{Context, Enum, Object};
use uuid::Uuid;

use super::context::loaders;
use super::errors::ApiResult;
use super::loaders::UserId;
use super::people::User;

/// Whether a person or the system made a change.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum ActorKind {
    /// A person, through the API (launch, terminate, modify, extend, exempt).
    User,
    /// sessiond itself, by a rule (`rule`).
    System,
}

/// Who made a change: a user, or the system by one of its rules.
pub struct Actor {
    user_id: Option<Uuid>,
    rule: Option<String>,
}

impl Actor {
    /// The actor stored with a row: a user, or (none) the system by `rule`.
    pub fn stored(user_id: Option<Uuid>, rule: Option<String>) -> Self {
        Self { user_id, rule }
    }
}

/// Who made a change: a user, or the system by one of its rules.
#[Object]
impl Actor {
    /// USER when a person made it (see `user`), SYSTEM otherwise (see `rule`).
    async fn kind(&self) -> ActorKind {
        if self.user_id.is_some() { ActorKind::User } else { ActorKind::System }
    }
    /// The user who made it, with their e-mail and role, shown to whoever may see the
    /// session ("force-terminated by admin@…"); null for the system, or for a user since
    /// deleted.
    async fn user(&self, ctx: &Context<'_>) -> ApiResult<Option<User>> {
        let Some(id) = self.user_id else { return Ok(None) };
        let found = loaders(ctx)?.load_one(UserId(id)).await?;
        Ok(found.map(User::try_from).transpose()?)
    }
    /// The system's rule that fired: `scheduler`, `pending timeout`, `lifetime`, `idle
    /// check`, `batch timeout`, or the engine that saw it happen (`local runtime`,
    /// `simulated runtime`, `Slurm engine NAME`). Null for a user, and for changes recorded
    /// before actors were.
    async fn rule(&self) -> Option<&str> {
        self.rule.as_deref()
    }
}

//! What a session shows beside its plain fields: its expiry, environment, applications,
//! origin and status transitions.

use std::sync::Arc;

use async_graphql::{Context, Enum, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};

use entity::session;

use crate::domain::expiry;

use super::actor::Actor;
use super::context::loaders;
use super::errors::ApiResult;
use super::loaders::ExtensionLimitsOf;
use super::types::{ExpiryReason, SessionStatus};

/// When a running session will be reclaimed, and whether that can be pushed back.
pub struct SessionExpiry(pub Arc<session::Model>, pub expiry::Expiry);

#[Object]
impl SessionExpiry {
    async fn at(&self) -> DateTime<Utc> {
        self.1.at
    }
    async fn reason(&self) -> ExpiryReason {
        self.1.reason.into()
    }
    /// Whether `extendSession` may push it back now: a lifetime (not a batch timeout), and
    /// the keypair's policy allows another extension.
    async fn extendable(&self, ctx: &Context<'_>) -> ApiResult<bool> {
        let limits = loaders(ctx)?.load_one(ExtensionLimitsOf(self.0.keypair_id)).await?.unwrap_or_default();
        Ok(limits.extendable(&self.0)?)
    }
    /// How many times the session was extended.
    async fn extensions(&self) -> i32 {
        self.0.extensions
    }
    /// What the extensions added to its lifetime, in seconds.
    async fn extended_seconds(&self) -> i64 {
        self.0.extended_seconds
    }
}

#[derive(SimpleObject)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

/// An application the session offers once RUNNING.
#[derive(SimpleObject)]
pub struct SessionApp {
    pub name: String,
    pub url: Option<String>,
    /// It is a web app that `openSessionApp` opens in a browser now (declared with a port,
    /// its session running here, this server serving apps); its owner only.
    pub opens: bool,
    /// Of a web app that opens: whether its port answers yet. Null otherwise.
    pub status: Option<AppStatus>,
    /// Why a FAILED app is taken to have failed.
    pub status_info: Option<String>,
}

/// Where a web app of a running session is.
#[derive(async_graphql::Enum, Clone, Copy, PartialEq, Eq)]
pub enum AppStatus {
    /// Its port does not answer yet (for two minutes after its session started).
    Starting,
    /// Its port answers.
    Ready,
    /// Its port does not answer, or cannot be reached.
    Failed,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum LaunchOriginKind {
    /// Launched again from another session (`relaunchSession`).
    Session,
    /// Launched from a session template.
    Template,
}

/// What a session was launched from.
#[derive(SimpleObject)]
pub struct LaunchOrigin {
    pub kind: LaunchOriginKind,
    /// The session's or template's id (it may since be gone, or not the viewer's to see).
    pub id: ID,
    /// Its name when this one was launched from it.
    pub name: String,
}

#[derive(SimpleObject)]
pub struct StatusTransition {
    /// Position in the global sequence of status changes.
    pub cursor: String,
    pub from_status: Option<SessionStatus>,
    pub to_status: SessionStatus,
    pub reason: Option<String>,
    pub occurred_at: DateTime<Utc>,
    /// Who made it: the user, or the system's rule.
    pub actor: Actor,
}

//! What a session shows beside its plain fields: its expiry, environment, applications,
//! origin and status transitions.

use std::sync::Arc;

use async_graphql::{Context, Enum, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};

use entity::session;

use crate::domain::reclaim::expiry;

use super::actor::Actor;
use super::context::loaders;
use super::errors::ApiResult;
use super::loaders::ExtensionLimitsOf;
use super::types::{ExpiryReason, SessionStatus};

/// When a running session will be reclaimed, and whether that can be pushed back.
pub struct SessionExpiry(pub Arc<session::Model>, pub expiry::Expiry);

/// When a running session will be reclaimed, and whether that can be pushed back.
#[Object]
impl SessionExpiry {
    /// When it will be reclaimed (RFC 3339, UTC), unless extended or, for an idle expiry,
    /// active before then.
    async fn at(&self) -> DateTime<Utc> {
        self.1.at
    }
    /// Why: its lifetime, its batch timeout, or idleness.
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

/// An environment variable given at launch.
#[derive(SimpleObject)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value, as given.
    pub value: String,
}

/// An application the session offers once RUNNING.
#[derive(SimpleObject)]
pub struct SessionApp {
    /// The app's name as its image declares it, e.g. `terminal`, `jupyter`.
    pub name: String,
    /// For the `terminal` of an interactive session this server reaches, and for its owner
    /// only: the WebSocket path `/sessions/<id>/terminal`. Null otherwise.
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

/// What kind of thing a session was launched from.
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
    /// A session (relaunched) or a template.
    pub kind: LaunchOriginKind,
    /// The session's or template's global id (it may since be gone, or not the viewer's to
    /// see).
    pub origin_id: ID,
    /// Its name when this one was launched from it.
    pub name: String,
}

/// One change of a session's status.
#[derive(SimpleObject)]
pub struct StatusTransition {
    /// Position in the global sequence of status changes.
    pub cursor: String,
    /// The status it left; null for its first status, at launch.
    pub from_status: Option<SessionStatus>,
    /// The status it reached.
    pub to_status: SessionStatus,
    /// Why, in words or a code (e.g. `user-requested`, `PENDING_TIMEOUT`); null when none
    /// was given.
    pub reason: Option<String>,
    /// When it happened (RFC 3339, UTC).
    pub occurred_at: DateTime<Utc>,
    /// Who made it: the user, or the system's rule.
    pub actor: Actor,
}

//! The live feeds: `sessionEvents`, `sessionLogs` and `sessionUtilization`. Served over the
//! WebSocket route only.

use async_graphql::{Context, ID, Object, Subscription};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use crate::domain::DomainError;
use crate::domain::live::events::SessionEvent as DomEvent;
use crate::domain::live::logs;
use crate::domain::live::usage::feed::{self as usage_feed, Reading};
use crate::domain::live::watch::{self, WatchRequest};

use std::sync::Arc;

use super::context::{db, live, viewer};
use super::cursor;
use super::errors::{ApiError, ApiResult};
use super::ids::{NodeKind, decode_uuid, encode, project_uuid};
use super::loaders::Related;
use super::people::{Project, User};
use super::session::Session;
use super::session_list::SessionScope;
use super::types::{SessionEventKind, SessionStatus, SlotUse};

/// One sample of what a session uses.
pub struct UtilizationSample(Reading);

/// One sample of what a session uses.
#[Object]
impl UtilizationSample {
    /// When its engine took it.
    async fn sampled_at(&self) -> DateTime<Utc> {
        self.0.sampled_at
    }
    /// Per slot: the latest value, and the average and maximum since the session started.
    async fn utilization(&self) -> Vec<SlotUse> {
        self.0.uses.iter().cloned().map(SlotUse::from).collect()
    }
}

/// One status change of one session, or a warning that it will be reclaimed soon.
pub struct SessionEvent(DomEvent);

/// One event of a session: a status change, an expiry warning, another change, or the
/// progress of its image's pull.
#[Object]
impl SessionEvent {
    /// Position in the global sequence of status changes: pass it as `after` to resume.
    async fn cursor(&self) -> String {
        cursor::sequence(self.0.seq)
    }
    /// A status change, or an expiry warning (`fromStatus` and `toStatus` are then both
    /// the status it has).
    async fn kind(&self) -> SessionEventKind {
        self.0.kind.into()
    }
    /// The global id of the session it is about.
    async fn session_id(&self) -> ID {
        encode(NodeKind::Session, self.0.session.id)
    }
    /// The status it left (null for its first status, at launch); for the other kinds, the
    /// status it has.
    async fn from_status(&self) -> Option<SessionStatus> {
        self.0.from.map(Into::into)
    }
    /// The status it reached; for the other kinds, the status it has.
    async fn to_status(&self) -> SessionStatus {
        self.0.to.into()
    }
    /// Why, in words or a code: the status change's reason (e.g. `user-requested`), or
    /// what a warning or a modification says; null when none was given.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    /// When it happened (RFC 3339, UTC).
    async fn occurred_at(&self) -> DateTime<Utc> {
        self.0.at
    }
    /// Who made the change: the user, or the system's rule (the scheduler, an engine, a
    /// timeout, an idle check).
    async fn actor(&self) -> super::actor::Actor {
        super::actor::Actor::stored(self.0.actor.0, self.0.actor.1.clone())
    }
    /// The session as it was when the event was read (it may have moved on since the
    /// change): enough to update a row of the list without asking again. Its owner,
    /// project, resource group and image are read once per change for every subscriber.
    async fn session(&self, ctx: &Context<'_>) -> ApiResult<Option<Session>> {
        let look = ctx.look_ahead();
        let wanted = ["owner", "project", "resourceGroup", "image", "apps"].iter().any(|f| look.field(f).exists());
        let mut related = Related::default();
        if wanted {
            let s = &self.0.session;
            let r = self.0.relations(db(ctx)?).await?;
            related.owner = r.users.get(&s.owner_id).cloned().map(User::try_from).transpose()?.map(Arc::new);
            related.project = r.projects.get(&s.project_id).cloned().map(|p| Arc::new(Project(p)));
            related.resource_group = r.resource_groups.get(&s.resource_group).cloned();
            related.image = r.images.get(&s.image).cloned();
        }
        Ok(Some(Session(self.0.session.clone(), related)))
    }
}

#[derive(Default)]
pub struct SessionSubscription;

#[Subscription]
impl SessionSubscription {
    /// Every status change of the sessions the caller may see in the project and scope
    /// (exactly those `sessions` lists with the same arguments), or of one of them with
    /// `sessionId`. With `after` (the cursor of the last event received), the events missed
    /// since are replayed first; without it, the feed starts with the next change. A client
    /// that falls too far behind gets a `LAGGED` error carrying the cursor to resume from.
    async fn session_events(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The project whose sessions to follow, as for `sessions`.")] project_id: ID,
        #[graphql(default_with = "Some(SessionScope::Mine)", desc = "Whose sessions, as for `sessions`.")]
        scope: Option<SessionScope>,
        #[graphql(desc = "Only this session's events (one of that list).")] session_id: Option<ID>,
        #[graphql(desc = "The cursor of the last event received (or of a status transition): replay from there.")]
        after: Option<String>,
    ) -> Result<BoxStream<'static, Result<SessionEvent, ApiError>>, ApiError> {
        let session_id = session_id
            .map(|id| decode_uuid(&id, NodeKind::Session).ok_or(DomainError::NotFound("session")))
            .transpose()?;
        let request = WatchRequest {
            project_id: project_uuid(&project_id)?,
            scope: scope.unwrap_or_default().into(),
            session_id,
            after: after.as_deref().map(|a| cursor::decode_sequence(a, "after")).transpose()?,
        };
        let feed = watch::watch(db(ctx)?, live(ctx)?, viewer(ctx)?, request).await?;
        Ok(feed.map(|e| e.map(SessionEvent).map_err(ApiError::from)).boxed())
    }

    /// A session's log, live: its last `tail` lines, then each new line as it is written
    /// (the output of a session the local runtime runs, the runtime's own lines), until the
    /// session has ended. For its owner, or an administrator who may see it.
    async fn session_logs(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session to follow: one the caller may work on.")] session_id: ID,
        #[graphql(default = 100, desc = "How many past lines to send first: 0 to 1000.")] tail: i32,
    ) -> Result<BoxStream<'static, Result<String, ApiError>>, ApiError> {
        let id = decode_uuid(&session_id, NodeKind::Session).ok_or(DomainError::NotFound("session"))?;
        let live = live(ctx)?;
        let feed = logs::follow(db(ctx)?, &live.logs, &live.credentials, viewer(ctx)?, id, i64::from(tail)).await?;
        Ok(feed.map(|line| line.map_err(ApiError::from)).boxed())
    }

    /// What a session uses, live: its latest sample, then each new one as its engine takes
    /// it (about every 2 s while it runs), until it has ended. For its owner, or an
    /// administrator who may see it.
    async fn session_utilization(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session to follow: one the caller may work on.")] session_id: ID,
    ) -> Result<BoxStream<'static, Result<UtilizationSample, ApiError>>, ApiError> {
        let id = decode_uuid(&session_id, NodeKind::Session).ok_or(DomainError::NotFound("session"))?;
        let live = live(ctx)?;
        let feed = usage_feed::follow(db(ctx)?, &live.usage, &live.credentials, viewer(ctx)?, id).await?;
        Ok(feed.map(|r| r.map(UtilizationSample).map_err(ApiError::from)).boxed())
    }
}

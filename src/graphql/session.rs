//! The `Session` type with its plain fields and relations, launch groups, and pages of
//! sessions (a launch group's sessions are one). The values it shows beside its plain fields
//! are `session_values.rs`'s; the paging arguments and the page's read `session_paging.rs`'s.

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};

use entity::session;

use crate::domain::DomainResult;
use crate::domain::model::status::SessionStatus as DomStatus;
use crate::domain::sessions::{self as dom, SessionPosition, SessionSet};
use crate::domain::{DomainError, live::logs, model::clock, reclaim::expiry};

use super::actor::Actor;
use super::context::{db, loaders, viewer};
use super::cursor;
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::loaders::{
    CallbacksOf, DependenciesOf, DependentsOf, ImageName, LaunchGroupId, ProjectId, Related, ResourceGroupName,
    TransitionsOf, UserId, prefetch_relations,
};
use super::people::{Project, User};
use super::resource::{Image, ResourceGroup};
use super::scalars::BigInt;
use super::scheduling::{self, SchedulingHistoryConnection};
use super::session_paging::{PageArgs, page_complexity, read_page};
use super::session_values::{
    AppStatus, EnvVar, LaunchOrigin, LaunchOriginKind, SessionApp, SessionExpiry, StatusTransition,
};
use super::types::{
    IdleCheck, PageInfo, PendingReason, ResourceSlots, SessionResult, SessionStatus, SessionType, SlotUse,
    UtilizationPoint,
};
use crate::domain::store::inline::InlineReads;

/// Those of `sessions` the viewer may see.
pub(super) fn visible(ctx: &Context<'_>, sessions: Vec<session::Model>) -> ApiResult<Vec<Session>> {
    let viewer = super::context::viewer(ctx)?;
    Ok(sessions
        .into_iter()
        .filter(|s| crate::domain::sessions::visibility::may_see_session(viewer, s.owner_id, s.domain_id))
        .map(Session::new)
        .collect())
}

fn parse_status(text: &str) -> ApiResult<DomStatus> {
    Ok(DomStatus::stored(text)?)
}

/// A compute session.
///
/// Its fields (like those of the other per-row objects: edges, users, projects, slots) are
/// resolved one after the other (`serial`): in a list every relation is already loaded for
/// the whole page, so nothing waits, and async-graphql's concurrent resolution would cost a
/// task set and a task per field of every row (~10 % of the CPU of a 50-row page). A single
/// session's relations are loaded together first, likewise
/// ([`super::loaders::prefetch_relations`]). The owner and project the page loaded come with
/// the row ([`Related`]): no loader call each.
pub struct Session(pub Arc<session::Model>, pub Related);

impl Session {
    pub fn new(model: session::Model) -> Self {
        Self(Arc::new(model), Related::default())
    }
}

/// The plain fields of a session: each declared once, with its GraphQL name, type, and how
/// it is read from the stored row (`|s, now|`: the row, and the instant elapsed times count
/// to), through the domain's reading of a session ([`dom`]'s facts) that the CSV export
/// uses too. From this list come the functions the `Session` object's resolvers call
/// ([`plain`]) and the compiled list's getters ([`super::compiled`]); a test holds the
/// list and the object's fields equal. The relations and the fields with arguments are
/// resolvers of their own.
macro_rules! session_plain_fields {
    ($then:ident { }) => {
        $then! {
            { }
            "id" id: ID = |s, now| encode(NodeKind::Session, s.id);
            "name" name: &str = |s, now| &s.name;
            "type" session_type: ApiResult<SessionType> = |s, now| Ok(dom::session_type(s)?.into());
            "status" status: ApiResult<SessionStatus> = |s, now| Ok(dom::status(s)?.into());
            "statusInfo" status_info: Option<&str> = |s, now| s.status_info.as_deref();
            "result" result: ApiResult<SessionResult> = |s, now| Ok(dom::result(s)?.into());
            "exitCode" exit_code: Option<i32> = |s, now| s.exit_code;
            "agent" agent: Option<&str> = |s, now| s.agent_id.as_deref();
            "requestedSlots" requested_slots: ApiResult<ResourceSlots> =
                |s, now| Ok(ResourceSlots(dom::requested_slots(s)?));
            "occupiedSlots" occupied_slots: ApiResult<ResourceSlots> =
                |s, now| Ok(ResourceSlots(dom::occupied_slots(s)?));
            "clusterSize" cluster_size: i32 = |s, now| s.cluster_size;
            "priority" priority: i32 = |s, now| s.priority;
            "startupCommand" startup_command: Option<&str> = |s, now| s.startup_command.as_deref();
            "batchTimeoutSeconds" batch_timeout_seconds: Option<i32> =
                |s, now| s.batch_timeout_seconds.map(|t| i32::try_from(t).unwrap_or(i32::MAX));
            "createdAt" created_at: DateTime<Utc> = |s, now| s.created_at;
            "startsAt" starts_at: Option<DateTime<Utc>> = |s, now| s.starts_at;
            "scheduledAt" scheduled_at: Option<DateTime<Utc>> = |s, now| s.scheduled_at;
            "startedAt" started_at: Option<DateTime<Utc>> = |s, now| s.started_at;
            "terminatedAt" terminated_at: Option<DateTime<Utc>> = |s, now| s.terminated_at;
            "elapsedSeconds" elapsed_seconds: i64 = |s, now| dom::elapsed_seconds(s, now);
            "queuePosition" queue_position: ApiResult<Option<i32>> = |s, now| Ok(dom::queue_position(s)?);
            "utilization" utilization: Vec<SlotUse> =
                |s, now| crate::domain::live::usage::of(s).into_iter().map(SlotUse::from).collect();
            "utilizationSampledAt" utilization_sampled_at: Option<DateTime<Utc>> = |s, now| s.utilization_sampled_at;
            "idleChecks" idle_checks: ApiResult<Vec<IdleCheck>> =
                |s, now| Ok(crate::domain::reclaim::idle::checks(s, now)?.into_iter().map(IdleCheck::from).collect());
            "exemptIdle" exempt_idle: bool = |s, now| s.exempt_idle;
        }
    };
}
pub(super) use session_plain_fields;

/// The plain fields' functions, from their declaration.
macro_rules! plain_functions {
    (
        { }
        $( $(#[$doc:meta])* $gql:literal $name:ident : $ty:ty = |$s:ident, $now:ident| $body:expr; )*
    ) => {
        /// The plain fields of a session, as functions of its stored row.
        pub(super) mod plain {
            use super::*;
            $(
                #[allow(unused_variables)]
                pub fn $name($s: &session::Model, $now: DateTime<Utc>) -> $ty {
                    $body
                }
            )*
        }
    };
}
session_plain_fields!(plain_functions {});

// Each plain field's resolver calls its declared function (`plain`); the compiled list
// calls the same ones. The other resolvers follow.
/// A compute session: one or more containers of an image, launched by a user in a project
/// and run on an agent of a resource group.
#[Object(serial)]
impl Session {
    /// The session's global id (opaque).
    pub async fn id(&self) -> ID {
        plain::id(&self.0, clock::now())
    }
    /// 4 to 64 letters, digits, `_`, `.` and `-`; unique among its owner's live sessions
    /// (one that ended frees its name).
    async fn name(&self) -> &str {
        plain::name(&self.0, clock::now())
    }
    /// What kind of work it does; fixed at launch.
    #[graphql(name = "type")]
    async fn session_type(&self) -> ApiResult<SessionType> {
        plain::session_type(&self.0, clock::now())
    }
    /// Where it is in its lifecycle.
    async fn status(&self) -> ApiResult<SessionStatus> {
        plain::status(&self.0, clock::now())
    }
    /// Why its status last changed, in words or a code, e.g. `user-requested`,
    /// `force-terminated`, `PENDING_TIMEOUT`, `OOM killed`; null when no reason was given.
    async fn status_info(&self) -> Option<&str> {
        plain::status_info(&self.0, clock::now())
    }
    /// How it ended: UNDEFINED until then.
    async fn result(&self) -> ApiResult<SessionResult> {
        plain::result(&self.0, clock::now())
    }
    /// The exit code of its command once it ended (124 for a batch timeout), as its engine
    /// reported it; null while it runs, or when none was reported.
    async fn exit_code(&self) -> Option<i32> {
        plain::exit_code(&self.0, clock::now())
    }
    /// The agent (node) the session runs on, once scheduled.
    async fn agent(&self) -> Option<&str> {
        plain::agent(&self.0, clock::now())
    }
    /// What the whole session asks for: each container's request × the cluster size.
    async fn requested_slots(&self) -> ApiResult<ResourceSlots> {
        plain::requested_slots(&self.0, clock::now())
    }
    /// What the session was allocated: its request, from SCHEDULED on (kept after it
    /// ends, for the record; only sessions in SCHEDULED…TERMINATING count as
    /// occupancy). Empty for a session that never started.
    async fn occupied_slots(&self) -> ApiResult<ResourceSlots> {
        plain::occupied_slots(&self.0, clock::now())
    }
    /// How many containers it has (1 to 64), all on one agent.
    async fn cluster_size(&self) -> i32 {
        plain::cluster_size(&self.0, clock::now())
    }
    /// −100 … 100: among the pending sessions of its resource group, higher priorities are
    /// scheduled first.
    async fn priority(&self) -> i32 {
        plain::priority(&self.0, clock::now())
    }
    /// The command a batch session runs; other types run their image's own command. Null
    /// when none was given.
    async fn startup_command(&self) -> Option<&str> {
        plain::startup_command(&self.0, clock::now())
    }
    /// A batch session is stopped this many seconds after it started; null: no timeout.
    async fn batch_timeout_seconds(&self) -> Option<i32> {
        plain::batch_timeout_seconds(&self.0, clock::now())
    }
    /// When it was launched (RFC 3339, UTC).
    async fn created_at(&self) -> DateTime<Utc> {
        plain::created_at(&self.0, clock::now())
    }
    /// A batch session waits until then (pending reason NOT_YET); null: at once.
    async fn starts_at(&self) -> Option<DateTime<Utc>> {
        plain::starts_at(&self.0, clock::now())
    }
    /// When it was given an agent (SCHEDULED); null before.
    async fn scheduled_at(&self) -> Option<DateTime<Utc>> {
        plain::scheduled_at(&self.0, clock::now())
    }
    /// When it started RUNNING; null before, and for a session that never ran.
    async fn started_at(&self) -> Option<DateTime<Utc>> {
        plain::started_at(&self.0, clock::now())
    }
    /// When it reached a terminal status (TERMINATED, CANCELLED or ERROR); null before.
    async fn terminated_at(&self) -> Option<DateTime<Utc>> {
        plain::terminated_at(&self.0, clock::now())
    }
    /// Whole seconds from creation to termination, or to now while not terminated.
    async fn elapsed_seconds(&self) -> i64 {
        plain::elapsed_seconds(&self.0, clock::now())
    }
    /// Place among the pending sessions of its resource group in scheduling order (1
    /// is next), once the scheduler has ordered it; for a SCHEDULED session waiting in
    /// Slurm, its place in the order Slurm will start the partition's jobs; null
    /// otherwise.
    async fn queue_position(&self) -> ApiResult<Option<i32>> {
        plain::queue_position(&self.0, clock::now())
    }
    /// What it really uses, per slot (cpu in cores busy, mem in bytes, accelerators where
    /// its engine can read them): at the latest sample, on average and at most since it
    /// started. Sampled while it runs (at most every 2 s, as its engine looks; not on
    /// Slurm yet), kept once it ends. Empty before the first sample.
    async fn utilization(&self) -> Vec<SlotUse> {
        plain::utilization(&self.0, clock::now())
    }
    /// When `utilization` was last sampled.
    async fn utilization_sampled_at(&self) -> Option<DateTime<Utc>> {
        plain::utilization_sampled_at(&self.0, clock::now())
    }
    /// The idle checks of a running interactive session under its keypair policy's
    /// `idleTimeoutSeconds`: per check what it measures, its threshold, whether it sees
    /// activity, and the seconds until the session is reclaimed as idle (one timer: any
    /// activity resets it). Empty otherwise, and for an exempted session.
    async fn idle_checks(&self) -> ApiResult<Vec<IdleCheck>> {
        plain::idle_checks(&self.0, clock::now())
    }
    /// What it used over the `window` seconds (60 to 3600) before its latest sample, a
    /// point a minute, oldest first: a sparkline. An hour is kept, whatever the session's
    /// length. Costly in long lists (a statement per session).
    #[graphql(complexity = "DETAIL_COST + child_complexity")]
    async fn utilization_history(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 3600, desc = "Seconds before the latest sample to cover: 60 to 3600.")] window: i32,
    ) -> ApiResult<Vec<UtilizationPoint>> {
        let points = crate::domain::live::usage::history(db(ctx)?, &self.0, i64::from(window)).await?;
        Ok(points.into_iter().map(UtilizationPoint::from).collect())
    }
    /// Whether an administrator exempted it from idle checks (`exemptFromIdle`).
    async fn exempt_idle(&self) -> bool {
        plain::exempt_idle(&self.0, clock::now())
    }
    /// The user who launched it.
    async fn owner(&self, ctx: &Context<'_>) -> ApiResult<Arc<User>> {
        if let Some(owner) = &self.1.owner {
            return Ok(Arc::clone(owner));
        }
        let u = loaders(ctx)?.load_one(UserId(self.0.owner_id)).await?;
        Ok(Arc::new(User::try_from(u.ok_or_else(|| DomainError::invariant("session without owner"))?)?))
    }
    /// The project it was launched in.
    async fn project(&self, ctx: &Context<'_>) -> ApiResult<Arc<Project>> {
        if let Some(project) = &self.1.project {
            return Ok(Arc::clone(project));
        }
        let p = loaders(ctx)?.load_one(ProjectId(self.0.project_id)).await?;
        Ok(Arc::new(Project(p.ok_or_else(|| DomainError::invariant("session without project"))?)))
    }
    /// The resource group it is scheduled in.
    async fn resource_group(&self, ctx: &Context<'_>) -> ApiResult<ResourceGroup> {
        if let Some(g) = &self.1.resource_group {
            return Ok(ResourceGroup(g.clone()));
        }
        let g = loaders(ctx)?.load_one(ResourceGroupName(self.0.resource_group.clone())).await?;
        Ok(ResourceGroup(g.ok_or_else(|| DomainError::invariant("session without resource group"))?))
    }
    /// The image it runs, with the digest it ran once pulled.
    async fn image(&self, ctx: &Context<'_>) -> ApiResult<Image> {
        if let Some(i) = &self.1.image {
            return Ok(Image(i.clone(), self.0.image_digest.clone()));
        }
        let i = loaders(ctx)?.load_one(ImageName(self.0.image.clone())).await?;
        Ok(Image(i.ok_or_else(|| DomainError::invariant("session without image"))?, self.0.image_digest.clone()))
    }
    /// The folders bound into its sandbox, as launched, in order.
    async fn mounts(&self) -> ApiResult<Vec<super::folders::SessionMount>> {
        let mounts = crate::domain::storage::mounts::of(&self.0)?;
        Ok(mounts.into_iter().map(super::folders::SessionMount).collect())
    }
    /// The environment variables given at launch, in their order (not the image's own).
    async fn environment(&self) -> Vec<EnvVar> {
        self.0
            .environment
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                Some(EnvVar { name: e.get("name")?.as_str()?.to_owned(), value: e.get("value")?.as_str()?.to_owned() })
            })
            .collect()
    }
    /// How far its image's pull is, while PULLING (updated at most once a second; a
    /// `PULL_PROGRESS` event tells each update). Null otherwise.
    async fn pull(&self) -> Option<PullProgress> {
        dom::pull(&self.0).map(PullProgress)
    }
    /// When the session will be reclaimed, and why: the earliest of its lifetime's end, its
    /// batch timeout and its idle timeout. Null unless it is RUNNING with one of them.
    async fn expiry(&self) -> ApiResult<Option<SessionExpiry>> {
        Ok(expiry::of(&self.0)?.map(|e| SessionExpiry(Arc::clone(&self.0), e)))
    }
    /// The launch group it was created in by `launchSessions`; null for a session launched
    /// alone.
    async fn launch_group(&self, ctx: &Context<'_>) -> ApiResult<Option<LaunchGroup>> {
        let Some(id) = self.0.launch_group_id else { return Ok(None) };
        Ok(loaders(ctx)?.load_one(LaunchGroupId(id)).await?.map(LaunchGroup))
    }
    /// Every current cause that keeps a PENDING session from starting, as found by the
    /// latest scheduling pass; for a SCHEDULED one, why its engine has not started it
    /// (Slurm's reason as a code, with Slurm's text; `ENGINE_UNREACHABLE`); empty otherwise.
    async fn pending_reasons(&self) -> ApiResult<Vec<PendingReason>> {
        Ok(dom::pending_reasons(&self.0)?.into_iter().map(TryInto::try_into).collect::<DomainResult<_>>()?)
    }
    /// Scheduling decisions, newest first. For the detail panel: costly in long lists (it
    /// is not batched), so a query may ask for it on about 100 sessions at once.
    #[graphql(complexity = "DETAIL_COST + child_complexity")]
    async fn scheduling_history(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "How many entries: default 50, at most 500.")] first: Option<i32>,
        #[graphql(desc = "Start after this entry's cursor (e.g. `pageInfo.endCursor`).")] after: Option<String>,
    ) -> ApiResult<SchedulingHistoryConnection> {
        scheduling::history(db(ctx)?, self.0.id, first, after).await
    }
    /// What it was launched from: the session it was launched again from
    /// (`relaunchSession`) or the template (`launchSessions(templateId: …)`), with its name
    /// then; null for a plain launch.
    async fn launched_from(&self) -> Option<LaunchOrigin> {
        let (kind, id) = match (self.0.launched_from_session_id, self.0.launched_from_template_id) {
            (Some(id), _) => (LaunchOriginKind::Session, encode(NodeKind::Session, id)),
            (None, Some(id)) => (LaunchOriginKind::Template, encode(NodeKind::SessionTemplate, id)),
            (None, None) => return None,
        };
        Some(LaunchOrigin { kind, origin_id: id, name: self.0.launched_from_name.clone().unwrap_or_default() })
    }
    /// Who made its latest status change: the user (launching, terminating), or the
    /// system's rule (the scheduler, an engine, a timeout, an idle check).
    async fn status_changed_by(&self) -> Actor {
        Actor::stored(self.0.status_actor_user_id, self.0.status_actor_rule.clone())
    }
    /// The sessions it waits for (`dependsOn` at launch) that the viewer may see, oldest
    /// first.
    async fn depends_on(&self, ctx: &Context<'_>) -> ApiResult<Vec<Session>> {
        let found = loaders(ctx)?.load_one(DependenciesOf(self.0.id)).await?.unwrap_or_default();
        visible(ctx, found)
    }
    /// The sessions that wait for it that the viewer may see, oldest first.
    async fn dependents(&self, ctx: &Context<'_>) -> ApiResult<Vec<Session>> {
        let found = loaders(ctx)?.load_one(DependentsOf(self.0.id)).await?.unwrap_or_default();
        visible(ctx, found)
    }
    /// Its completion callbacks (`callbackUrl` at launch): one per event, oldest first,
    /// each with every try to deliver it.
    async fn callbacks(&self, ctx: &Context<'_>) -> ApiResult<Vec<super::callbacks::SessionCallback>> {
        let found = loaders(ctx)?.load_one(CallbacksOf(self.0.id)).await?.unwrap_or_default();
        found.into_iter().map(super::callbacks::SessionCallback::of).collect()
    }
    /// Every status change, oldest first.
    async fn status_transitions(&self, ctx: &Context<'_>) -> ApiResult<Vec<StatusTransition>> {
        let rows = loaders(ctx)?.load_one(TransitionsOf(self.0.id)).await?.unwrap_or_default();
        rows.into_iter()
            .map(|t| {
                Ok(StatusTransition {
                    cursor: cursor::sequence(t.id),
                    from_status: t.from_status.as_deref().map(parse_status).transpose()?.map(Into::into),
                    to_status: parse_status(&t.to_status)?.into(),
                    reason: t.reason,
                    occurred_at: t.occurred_at,
                    actor: Actor::stored(t.actor_user_id, t.actor_rule),
                })
            })
            .collect()
    }
    /// The applications of its image, once RUNNING. The `terminal` of an interactive
    /// session that really runs where this server reaches it (its own machine, or a Slurm
    /// job it can join with `srun`) has a `url` for its owner: a WebSocket
    /// (`/sessions/<id>/terminal`). Anyone else sees no `url`: it would refuse them.
    async fn apps(&self, ctx: &Context<'_>) -> ApiResult<Vec<SessionApp>> {
        if !dom::offers_apps(&self.0)? {
            return Ok(Vec::new());
        }
        let image = match &self.1.image {
            Some(i) => Some(i.clone()),
            None => loaders(ctx)?.load_one(ImageName(self.0.image.clone())).await?,
        };
        let apps = image.as_ref().map(crate::domain::apps::of_image).unwrap_or_default();
        let runtime = ctx.data_opt::<crate::domain::runtime::RuntimeInfo>();
        let local = runtime.and_then(|r| r.local.as_ref());
        let offered = crate::domain::runtime::terminal::offered_to(local, &self.0, viewer(ctx)?);
        let terminal = offered.then(|| format!("/sessions/{}/terminal", encode(NodeKind::Session, self.0.id).0));
        // Its web apps open for its owner, while this server reaches them (on this machine,
        // or through its Slurm job's relay) and serves them.
        let served = self.0.owner_id == viewer(ctx)?.user_id
            && crate::domain::runtime::apps::reachable(local, &self.0)
            && runtime.is_some_and(|r| r.apps_url.is_some());
        let mut out = Vec::new();
        for a in apps {
            let url = if a.name == crate::domain::apps::TERMINAL { terminal.clone() } else { None };
            let opens = served && a.port.is_some();
            let (status, status_info) = if opens {
                use crate::domain::apps::Readiness;
                match crate::domain::apps::readiness(local, &self.0, &a, clock::now()).await {
                    Readiness::Starting => (Some(AppStatus::Starting), None),
                    Readiness::Ready => (Some(AppStatus::Ready), None),
                    Readiness::Failed(why) => (Some(AppStatus::Failed), Some(why)),
                }
            } else {
                (None, None)
            };
            out.push(SessionApp { opens, name: a.name, url, status, status_info });
        }
        Ok(out)
    }
    /// The last `tail` log lines (1–1000), oldest first. For the detail panel, like
    /// `schedulingHistory`.
    #[graphql(complexity = "DETAIL_COST")]
    async fn logs(
        &self,
        ctx: &Context<'_>,
        #[graphql(default_with = "Some(logs::DEFAULT_TAIL as i32)", desc = "How many of the last lines: 1 to 1000.")]
        tail: Option<i32>,
    ) -> ApiResult<Vec<String>> {
        let tail = tail.map_or(i64::from(logs::DEFAULT_TAIL), i64::from);
        Ok(logs::tail(db(ctx)?, self.0.id, tail).await?)
    }
}

/// The complexity of a field no list page should select for hundreds of sessions.
pub const DETAIL_COST: usize = 500;

/// The sessions created together by one "Launch Multiple Sessions".
pub struct LaunchGroup(pub entity::launch_group::Model);

/// The sessions created together by one "Launch Multiple Sessions" (`launchSessions`).
#[Object]
impl LaunchGroup {
    /// The group's global id (opaque), as `SessionFilter.launchGroupId` takes it.
    pub async fn id(&self) -> ID {
        encode(NodeKind::LaunchGroup, self.0.id)
    }
    /// The name the launch was given; its sessions are `<name>-1` … `<name>-<count>`.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// How many sessions were launched together.
    async fn count(&self) -> i32 {
        self.0.count
    }
    /// When it was launched (RFC 3339, UTC).
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The group's sessions, newest first.
    #[graphql(complexity = "page_complexity(first, child_complexity)")]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "How many sessions: default 50, at most 500.")] first: Option<i32>,
        #[graphql(desc = "Start after this session's cursor (e.g. `pageInfo.endCursor`).")] after: Option<String>,
    ) -> ApiResult<SessionConnection> {
        let args = PageArgs { first, after, ..Default::default() };
        session_connection(ctx, SessionSet::of_launch_group(&self.0), &[], args).await
    }
}

/// One session of a page, with its cursor.
#[derive(SimpleObject)]
#[graphql(serial, complex)]
pub struct SessionEdge {
    /// The session.
    pub node: Session,
    #[graphql(skip)]
    pub position: SessionPosition,
}

#[ComplexObject]
impl SessionEdge {
    /// Where the page after (or before) this session starts.
    async fn cursor(&self) -> String {
        cursor::encode(&self.position)
    }
}

/// A page of sessions. `totalCount` costs a statement only when asked for.
//
// Resolved one field after the other (`serial`), like the session itself: async-graphql
// writes the fields of a concurrent object in the order they finish, so a `totalCount`
// (a statement) would come out after the page's fields wherever it was asked, and its
// place would change from one answer to the next. Serial, every answer keeps the order
// of the selection, as the GraphQL spec asks; nothing else here waits.
#[derive(SimpleObject)]
#[graphql(complex, serial)]
pub struct SessionConnection {
    /// The page's sessions in the list's order, each with its cursor.
    pub edges: Vec<SessionEdge>,
    /// Whether more sessions come before or after, and the page's cursors.
    pub page_info: PageInfo,
    #[graphql(skip)]
    pub set: Arc<SessionSet>,
}

#[ComplexObject]
impl SessionConnection {
    /// The sessions of the page, without cursors.
    async fn nodes(&self) -> Vec<Session> {
        self.edges.iter().map(|e| Session(Arc::clone(&e.node.0), e.node.1.clone())).collect()
    }
    /// How many sessions the whole list has, over all pages.
    #[graphql(complexity = 0)]
    async fn total_count(&self, ctx: &Context<'_>) -> ApiResult<i64> {
        super::limits::aggregate(ctx, async {
            let n = self.set.count(db(ctx)?).await?;
            Ok((i64::try_from(n).unwrap_or(i64::MAX), n))
        })
        .await
    }
}

/// Reads one page of `set`.
pub async fn session_connection(
    ctx: &Context<'_>,
    set: SessionSet,
    orders: &[dom::SessionOrder],
    args: PageArgs,
) -> ApiResult<SessionConnection> {
    let mut page = read_page(db(ctx)?, ctx.data_opt::<InlineReads>(), &set, orders, args).await?;
    let related = prefetch_relations(ctx, page.rows.iter().map(|r| (&r.session, &r.owner)), set.project()).await?;
    let edges: Vec<SessionEdge> = std::mem::take(&mut page.rows)
        .into_iter()
        .map(|row| {
            let relations = related.of(&row.session);
            let node = Session(Arc::new(row.session), relations);
            SessionEdge { node, position: row.position }
        })
        .collect();
    let page_info = PageInfo::of(&page, &edges, |e| cursor::encode(&e.position));
    Ok(SessionConnection { page_info, edges, set: Arc::new(set) })
}

/// How far a session's image pull is: its blobs' bytes (config and layers, compressed) and
/// its layers, fetched or found on the machine, of the total.
pub struct PullProgress(pub crate::domain::runtime::image::Progress);

/// How far a session's image pull is, in bytes of its blobs (config and layers, compressed)
/// and in layers.
#[Object]
impl PullProgress {
    /// Bytes of the image's blobs fetched, or found on the machine already.
    async fn bytes_done(&self) -> BigInt {
        big(self.0.bytes_done)
    }
    /// Bytes of all the image's blobs; 0 until known.
    async fn bytes_total(&self) -> BigInt {
        big(self.0.bytes_total)
    }
    /// Layers fetched so far.
    async fn layers_done(&self) -> i32 {
        int(self.0.layers_done)
    }
    /// Layers the image has; 0 until known.
    async fn layers_total(&self) -> i32 {
        int(self.0.layers_total)
    }
    /// The share of the bytes done, in whole percent (0 before the total is known).
    async fn percent(&self) -> i32 {
        percent(&self.0)
    }
}

/// A pull's figures as the schema gives them (for the compiled list too).
pub(super) fn big(n: u64) -> BigInt {
    BigInt(i64::try_from(n).unwrap_or(i64::MAX))
}
pub(super) fn int(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
pub(super) fn percent(p: &crate::domain::runtime::image::Progress) -> i32 {
    p.percent().map_or(0, i32::from)
}

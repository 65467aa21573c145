//! The session list, its counts, one session, launch groups, and the `Session` type with
//! its relations.

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, Enum, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use entity::session;

use crate::domain::paging::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PageRequest};
use crate::domain::sessions::{self as dom, SessionPosition, SessionSet};
use crate::domain::slots::ResourceSlots as Slots;
use crate::domain::status::{SessionResult as DomResult, SessionStatus as DomStatus};
use crate::domain::visibility::{self, SessionScope as DomScope};
use crate::domain::{DomainError, clock, logs, model};

use super::context::{db, loaders, viewer};
use super::cursor;
use super::errors::{ApiResult, camel, with_paths};
use super::ids::{NodeKind, decode_uuid, encode, project_uuid};
use super::limits::{AGGREGATE_COST, STATEMENT_COST};
use super::loaders::{
    ImageName, LaunchGroupId, ProjectId, Related, ResourceGroupName, TransitionsOf, UserId, prefetch_one,
    prefetch_relations,
};
use super::resource::{Image, ResourceGroup};
use super::scheduling::{self, SchedulingHistoryConnection};
use super::types::{PageInfo, PendingReason, ResourceSlots, SessionResult, SessionStatus, SessionType};
use super::viewer::{Project, User};

#[derive(Enum, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionScope {
    /// The caller's own sessions in the project, whatever the caller's role.
    #[default]
    Mine,
    /// Every user's sessions in the project: administrators of its domain only.
    Project,
}

impl From<SessionScope> for DomScope {
    fn from(s: SessionScope) -> Self {
        match s {
            SessionScope::Mine => DomScope::Mine,
            SessionScope::Project => DomScope::Project,
        }
    }
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum SessionTab {
    /// Every non-terminal status, PENDING included.
    Running,
    /// TERMINATED, CANCELLED and ERROR.
    Finished,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::sessions::SessionOrderField")]
pub enum SessionOrderField {
    CreatedAt,
    Name,
    Status,
    Type,
    Elapsed,
    TerminatedAt,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum OrderDirection {
    Asc,
    Desc,
}

#[derive(InputObject)]
pub struct SessionOrder {
    pub field: SessionOrderField,
    pub direction: OrderDirection,
}

/// Narrows a session list; every given condition must hold.
#[derive(InputObject, Default)]
pub struct SessionFilter {
    pub types: Option<Vec<SessionType>>,
    pub tab: Option<SessionTab>,
    pub statuses: Option<Vec<SessionStatus>>,
    /// Case-insensitive part of the name.
    pub name_contains: Option<String>,
    pub resource_group: Option<String>,
    /// Only with scope PROJECT.
    pub owner_email: Option<String>,
    pub launch_group_id: Option<ID>,
    /// Created at or after this instant.
    pub created_after: Option<DateTime<Utc>>,
    /// Created before this instant.
    pub created_before: Option<DateTime<Utc>>,
}

/// The API path of a domain field of the list's arguments: paging as it is, the rest
/// inside `filter`.
pub(super) fn list_path(field: &str) -> String {
    if ["first", "last", "after", "before"].contains(&field) {
        field.to_owned()
    } else if field == "order_by" {
        "orderBy".to_owned()
    } else {
        format!("filter.{}", camel(field))
    }
}

impl SessionFilter {
    pub(super) fn to_domain(&self) -> ApiResult<dom::SessionFilter> {
        let launch_group_id = match &self.launch_group_id {
            None => None,
            Some(id) => Some(decode_uuid(id, NodeKind::LaunchGroup).ok_or_else(|| {
                DomainError::bad_input("INVALID_ID", Some(list_path("launch_group_id")), "not a launch group id")
            })?),
        };
        Ok(dom::SessionFilter {
            types: self.types.as_ref().map(|ts| ts.iter().map(|t| (*t).into()).collect()),
            tab: self.tab.map(|t| match t {
                SessionTab::Running => dom::SessionTab::Running,
                SessionTab::Finished => dom::SessionTab::Finished,
            }),
            statuses: self.statuses.as_ref().map(|ss| ss.iter().map(|s| (*s).into()).collect()),
            name_contains: self.name_contains.clone(),
            resource_group: self.resource_group.clone(),
            owner_email: self.owner_email.clone(),
            launch_group_id,
            created_after: self.created_after,
            created_before: self.created_before,
        })
    }
}

pub(super) fn to_domain_orders(order_by: Option<Vec<SessionOrder>>) -> Vec<dom::SessionOrder> {
    order_by
        .unwrap_or_default()
        .into_iter()
        .map(|o| dom::SessionOrder { field: o.field.into(), descending: o.direction == OrderDirection::Desc })
        .collect()
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
}

#[derive(SimpleObject)]
pub struct StatusTransition {
    /// Position in the global sequence of status changes.
    pub cursor: String,
    pub from_status: Option<SessionStatus>,
    pub to_status: SessionStatus,
    pub reason: Option<String>,
    pub occurred_at: DateTime<Utc>,
}

fn parse_status(text: &str) -> ApiResult<DomStatus> {
    Ok(DomStatus::stored(text)?)
}

/// The fields of a session that are a conversion of its stored value, as the API shows
/// them: the resolvers below and the compiled list ([`super::compiled`]) both call these.
pub(super) mod shown {
    use super::*;

    pub fn session_type(s: &session::Model) -> ApiResult<SessionType> {
        Ok(model::SessionType::stored(&s.session_type)?.into())
    }
    pub fn status(s: &session::Model) -> ApiResult<SessionStatus> {
        Ok(parse_status(&s.status)?.into())
    }
    pub fn result(s: &session::Model) -> ApiResult<SessionResult> {
        Ok(DomResult::stored(&s.result)?.into())
    }
    pub fn batch_timeout_seconds(s: &session::Model) -> Option<i32> {
        s.batch_timeout_seconds.map(|t| i32::try_from(t).unwrap_or(i32::MAX))
    }
}

/// A compute session.
///
/// Its fields (like those of the other per-row objects: edges, users, projects, slots) are
/// resolved one after the other (`serial`): in a list every relation is already loaded for
/// the whole page, so nothing waits, and async-graphql's concurrent resolution would cost a
/// task set and a task per field of every row (~10 % of the CPU of a 50-row page). A single
/// session's relations are loaded together first, likewise ([`prefetch_relations`]). The
/// owner and project the page loaded come with the row ([`Related`]): no loader call each.
pub struct Session(pub Arc<session::Model>, pub Related);

impl Session {
    pub fn new(model: session::Model) -> Self {
        Self(Arc::new(model), Related::default())
    }
}

#[Object(serial)]
impl Session {
    pub async fn id(&self) -> ID {
        encode(NodeKind::Session, self.0.id)
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    #[graphql(name = "type")]
    async fn session_type(&self) -> ApiResult<SessionType> {
        shown::session_type(&self.0)
    }
    async fn status(&self) -> ApiResult<SessionStatus> {
        shown::status(&self.0)
    }
    async fn status_info(&self) -> Option<&str> {
        self.0.status_info.as_deref()
    }
    async fn result(&self) -> ApiResult<SessionResult> {
        shown::result(&self.0)
    }
    async fn exit_code(&self) -> Option<i32> {
        self.0.exit_code
    }
    async fn owner(&self, ctx: &Context<'_>) -> ApiResult<Arc<User>> {
        if let Some(owner) = &self.1.owner {
            return Ok(Arc::clone(owner));
        }
        let u = loaders(ctx)?.load_one(UserId(self.0.owner_id)).await?;
        Ok(Arc::new(User::try_from(u.ok_or_else(|| DomainError::invariant("session without owner"))?)?))
    }
    async fn project(&self, ctx: &Context<'_>) -> ApiResult<Arc<Project>> {
        if let Some(project) = &self.1.project {
            return Ok(Arc::clone(project));
        }
        let p = loaders(ctx)?.load_one(ProjectId(self.0.project_id)).await?;
        Ok(Arc::new(Project(p.ok_or_else(|| DomainError::invariant("session without project"))?)))
    }
    async fn resource_group(&self, ctx: &Context<'_>) -> ApiResult<ResourceGroup> {
        let g = loaders(ctx)?.load_one(ResourceGroupName(self.0.resource_group.clone())).await?;
        Ok(ResourceGroup(g.ok_or_else(|| DomainError::invariant("session without resource group"))?))
    }
    async fn image(&self, ctx: &Context<'_>) -> ApiResult<Image> {
        let i = loaders(ctx)?.load_one(ImageName(self.0.image.clone())).await?;
        Ok(Image(i.ok_or_else(|| DomainError::invariant("session without image"))?))
    }
    /// The agent (node) the session runs on, once scheduled.
    async fn agent(&self) -> Option<&str> {
        self.0.agent_id.as_deref()
    }
    /// What the whole session asks for: each container's request × the cluster size.
    async fn requested_slots(&self) -> ApiResult<ResourceSlots> {
        Ok(ResourceSlots(Slots::from_json(&self.0.requested_slots)?))
    }
    /// What the session was allocated: its request, from SCHEDULED on (kept after it ends,
    /// for the record; only sessions in SCHEDULED…TERMINATING count as occupancy). Empty
    /// for a session that never started.
    async fn occupied_slots(&self) -> ApiResult<ResourceSlots> {
        Ok(ResourceSlots(Slots::from_json(&self.0.occupied_slots)?))
    }
    async fn cluster_size(&self) -> i32 {
        self.0.cluster_size
    }
    async fn priority(&self) -> i32 {
        self.0.priority
    }
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
    async fn startup_command(&self) -> Option<&str> {
        self.0.startup_command.as_deref()
    }
    async fn batch_timeout_seconds(&self) -> Option<i32> {
        shown::batch_timeout_seconds(&self.0)
    }
    async fn launch_group(&self, ctx: &Context<'_>) -> ApiResult<Option<LaunchGroup>> {
        let Some(id) = self.0.launch_group_id else { return Ok(None) };
        Ok(loaders(ctx)?.load_one(LaunchGroupId(id)).await?.map(LaunchGroup))
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn scheduled_at(&self) -> Option<DateTime<Utc>> {
        self.0.scheduled_at
    }
    async fn started_at(&self) -> Option<DateTime<Utc>> {
        self.0.started_at
    }
    async fn terminated_at(&self) -> Option<DateTime<Utc>> {
        self.0.terminated_at
    }
    /// Whole seconds from creation to termination, or to now while not terminated.
    async fn elapsed_seconds(&self) -> i64 {
        dom::elapsed_seconds(&self.0, clock::now())
    }
    /// Every current cause that keeps a PENDING session from starting, as found by the
    /// latest scheduling pass; empty otherwise.
    async fn pending_reasons(&self) -> ApiResult<Vec<PendingReason>> {
        Ok(dom::pending_reasons(&self.0)?.into_iter().map(Into::into).collect())
    }
    /// Place among the pending sessions of its resource group in scheduling order (1 is
    /// next), once the scheduler has ordered it; null when not pending.
    async fn queue_position(&self) -> ApiResult<Option<i32>> {
        Ok(dom::queue_position(&self.0)?)
    }
    /// Scheduling decisions, newest first. For the detail panel: costly in long lists (it
    /// is not batched), so a query may ask for it on about 100 sessions at once.
    #[graphql(complexity = "DETAIL_COST + child_complexity")]
    async fn scheduling_history(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> ApiResult<SchedulingHistoryConnection> {
        scheduling::history(db(ctx)?, self.0.id, first, after).await
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
                })
            })
            .collect()
    }
    /// The applications of its image, once RUNNING. The `terminal` of an interactive
    /// session that really runs here has a `url`: a WebSocket for its owner
    /// (`/sessions/<id>/terminal`).
    async fn apps(&self, ctx: &Context<'_>) -> ApiResult<Vec<SessionApp>> {
        if !dom::offers_apps(&self.0)? {
            return Ok(Vec::new());
        }
        let image = loaders(ctx)?.load_one(ImageName(self.0.image.clone())).await?;
        let apps = image.as_ref().map(dom::image_apps).unwrap_or_default();
        let local = ctx.data_opt::<crate::domain::runtime::RuntimeInfo>().and_then(|r| r.local.as_ref());
        let terminal = crate::domain::runtime::local::terminal::offered(local, &self.0)
            .then(|| format!("/sessions/{}/terminal", encode(NodeKind::Session, self.0.id).0));
        Ok(apps
            .into_iter()
            .map(|name| {
                let url = if name == "terminal" { terminal.clone() } else { None };
                SessionApp { name, url }
            })
            .collect())
    }
    /// The last `tail` log lines (1–1000), oldest first. For the detail panel, like
    /// `schedulingHistory`.
    #[graphql(complexity = "DETAIL_COST")]
    async fn logs(
        &self,
        ctx: &Context<'_>,
        #[graphql(default_with = "Some(logs::DEFAULT_TAIL as i32)")] tail: Option<i32>,
    ) -> ApiResult<Vec<String>> {
        let tail = tail.map_or(i64::from(logs::DEFAULT_TAIL), i64::from);
        Ok(logs::tail(db(ctx)?, self.0.id, tail).await?)
    }
}

/// The complexity of a field no list page should select for hundreds of sessions.
pub const DETAIL_COST: usize = 500;

/// A page of sessions costs its statement, the count it may be asked for (`totalCount`
/// costs nothing itself: what a connection selects is counted per session), and its size
/// times what each session selects. A size over the maximum counts as the maximum: the
/// resolver refuses it with BAD_USER_INPUT.
pub fn page_complexity(size: Option<i32>, per_session: usize) -> usize {
    let size = size.map_or(DEFAULT_PAGE_SIZE, |n| u64::try_from(n).unwrap_or(0).min(MAX_PAGE_SIZE)) as usize;
    size.max(1).saturating_mul(per_session).saturating_add(STATEMENT_COST + AGGREGATE_COST)
}

/// The sessions created together by one "Launch Multiple Sessions".
pub struct LaunchGroup(pub entity::launch_group::Model);

#[Object]
impl LaunchGroup {
    pub async fn id(&self) -> ID {
        encode(NodeKind::LaunchGroup, self.0.id)
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// How many sessions were launched together.
    async fn count(&self) -> i32 {
        self.0.count
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The group's sessions, newest first.
    #[graphql(complexity = "page_complexity(first, child_complexity)")]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> ApiResult<SessionConnection> {
        let args = PageArgs { first, after, ..Default::default() };
        session_connection(ctx, SessionSet::of_launch_group(&self.0), None, args).await
    }
}

#[derive(SimpleObject)]
#[graphql(serial, complex)]
pub struct SessionEdge {
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
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct SessionConnection {
    pub edges: Vec<SessionEdge>,
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
        Ok(i64::try_from(self.set.count(db(ctx)?).await?).unwrap_or(i64::MAX))
    }
}

/// Relay paging arguments as the client sent them.
#[derive(Default)]
pub struct PageArgs {
    pub first: Option<i32>,
    pub after: Option<String>,
    pub last: Option<i32>,
    pub before: Option<String>,
}

/// Reads one page of `set`.
pub async fn session_connection(
    ctx: &Context<'_>,
    set: SessionSet,
    order_by: Option<Vec<SessionOrder>>,
    args: PageArgs,
) -> ApiResult<SessionConnection> {
    let mut page = read_page(db(ctx)?, &set, order_by, args).await?;
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

/// Reads one page of `set` as the arguments ask: what the list resolvers and the compiled
/// list ([`super::compiled`]) both read.
pub(super) async fn read_page(
    db: &sea_orm::DatabaseConnection,
    set: &SessionSet,
    order_by: Option<Vec<SessionOrder>>,
    args: PageArgs,
) -> ApiResult<dom::SessionPage> {
    let request: PageRequest<SessionPosition> =
        cursor::page_request(args.first, args.last, args.after.as_deref(), args.before.as_deref(), list_path)?;
    Ok(set.page(db, &to_domain_orders(order_by), &request, clock::now()).await.map_err(|e| with_paths(e, list_path))?)
}

#[derive(SimpleObject)]
pub struct SessionTypeCount {
    #[graphql(name = "type")]
    pub session_type: SessionType,
    pub count: i64,
}

/// Badge counts of a list.
#[derive(SimpleObject)]
pub struct SessionCounts {
    /// Non-terminal sessions (the Running tab).
    pub running: i64,
    /// Terminal sessions (the Finished tab).
    pub finished: i64,
    pub all: i64,
    /// Every type, zero counts included.
    pub by_type: Vec<SessionTypeCount>,
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The sessions of a project the viewer may list in `scope`, filtered: what the list and
/// the counts read.
pub async fn project_session_set(
    ctx: &Context<'_>,
    project_id: &ID,
    scope: Option<SessionScope>,
    filter: Option<SessionFilter>,
) -> ApiResult<SessionSet> {
    project_set(db(ctx)?, viewer(ctx)?, project_id, scope, filter).await
}

/// The same without a GraphQL context.
pub(super) async fn project_set(
    db: &sea_orm::DatabaseConnection,
    viewer: &crate::domain::auth::Viewer,
    project_id: &ID,
    scope: Option<SessionScope>,
    filter: Option<SessionFilter>,
) -> ApiResult<SessionSet> {
    let filter = filter.unwrap_or_default().to_domain()?;
    let scope = scope.unwrap_or_default().into();
    dom::project_sessions(db, viewer, project_uuid(project_id)?, scope, &filter)
        .await
        .map_err(|e| with_paths(e, list_path).into())
}

#[derive(Default)]
pub struct SessionQuery;

#[Object]
impl SessionQuery {
    /// Sessions of a project: the caller's own (MINE) or everyone's (PROJECT, for
    /// administrators). Newest first unless `orderBy` says otherwise; ties by id.
    #[allow(clippy::too_many_arguments)]
    #[graphql(complexity = "page_complexity(first.or(last), child_complexity)")]
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        project_id: ID,
        #[graphql(default_with = "Some(SessionScope::Mine)")] scope: Option<SessionScope>,
        filter: Option<SessionFilter>,
        order_by: Option<Vec<SessionOrder>>,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> ApiResult<SessionConnection> {
        let set = project_session_set(ctx, &project_id, scope, filter).await?;
        session_connection(ctx, set, order_by, PageArgs { first, after, last, before }).await
    }

    /// Counts for the tab and type badges of the same list, in one statement.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn session_counts(
        &self,
        ctx: &Context<'_>,
        project_id: ID,
        #[graphql(default_with = "Some(SessionScope::Mine)")] scope: Option<SessionScope>,
        filter: Option<SessionFilter>,
    ) -> ApiResult<SessionCounts> {
        let set = project_session_set(ctx, &project_id, scope, filter).await?;
        let c = set.counts(db(ctx)?).await?;
        Ok(SessionCounts {
            running: count(c.running),
            finished: count(c.finished),
            all: count(c.all),
            by_type: c
                .by_type
                .into_iter()
                .map(|(t, n)| SessionTypeCount { session_type: t.into(), count: count(n) })
                .collect(),
        })
    }

    /// One session, or null when it does not exist or the caller may not see it.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn session(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Session>> {
        let Some(uuid) = decode_uuid(&id, NodeKind::Session) else { return Ok(None) };
        match visibility::visible_session(db(ctx)?, viewer(ctx)?, uuid).await {
            Ok(s) => {
                let related = prefetch_one(ctx, &s).await?;
                Ok(Some(Session(Arc::new(s), related)))
            }
            Err(DomainError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

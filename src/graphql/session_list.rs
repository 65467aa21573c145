//! The session list: its arguments (scope, tab, filter, order), its pages and edges, its
//! counts, and the queries that read them (`sessions`, `sessionCounts`, `session`).

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, Enum, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::domain::paging::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PageRequest};
use crate::domain::sessions::{self as dom, SessionPosition, SessionSet};
use crate::domain::visibility::{self, SessionScope as DomScope};
use crate::domain::{DomainError, clock};

use super::context::{db, viewer};
use super::cursor;
use super::errors::{ApiResult, camel, with_paths};
use super::ids::{NodeKind, decode_uuid, project_uuid};
use super::limits::{AGGREGATE_COST, STATEMENT_COST};
use super::loaders::{prefetch_one, prefetch_relations};
use super::session::Session;
use super::types::{PageInfo, SessionStatus, SessionType};

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
#[graphql(remote = "crate::domain::sessions::SessionTab")]
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
    /// Cores used at the latest sample (`utilization`): `DESC` for the heaviest first. A
    /// session not sampled yet counts as 0; an ended one keeps its last sample.
    CpuUsed,
    /// Memory used at the latest sample, as `CPU_USED`.
    MemUsed,
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

/// A filter field's value as the GraphQL input holds it, and the domain's value it is.
pub trait ApiFilterValue: Sized {
    type Api: async_graphql::InputType + Clone;
    fn domain(value: Self::Api, field: &str) -> ApiResult<Self>;
}

/// A list of a domain vocabulary's values, as a list of its GraphQL enum.
macro_rules! vocabulary_list {
    ($($domain:ty => $api:ty),*) => {$(
        impl ApiFilterValue for Vec<$domain> {
            type Api = Vec<$api>;
            fn domain(value: Vec<$api>, _: &str) -> ApiResult<Self> {
                Ok(value.into_iter().map(Into::into).collect())
            }
        }
    )*};
}
vocabulary_list!(crate::domain::model::SessionType => SessionType, crate::domain::status::SessionStatus => SessionStatus);

impl ApiFilterValue for dom::SessionTab {
    type Api = SessionTab;
    fn domain(value: SessionTab, _: &str) -> ApiResult<Self> {
        Ok(value.into())
    }
}

impl ApiFilterValue for String {
    type Api = String;
    fn domain(value: String, _: &str) -> ApiResult<Self> {
        Ok(value)
    }
}

impl ApiFilterValue for DateTime<Utc> {
    type Api = DateTime<Utc>;
    fn domain(value: DateTime<Utc>, _: &str) -> ApiResult<Self> {
        Ok(value)
    }
}

/// A public id, read as the domain reads it from a link.
impl ApiFilterValue for dom::LaunchGroupRef {
    type Api = ID;
    fn domain(value: ID, field: &str) -> ApiResult<Self> {
        use crate::domain::sessions::FilterValue;
        Self::read(field, &value).map_err(|p| with_paths(DomainError::BadInput(vec![p]), list_path).into())
    }
}

/// The GraphQL input from the domain's declaration of the filter's fields.
macro_rules! api_filter {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty ),* $(,)?) => {
        /// Narrows a session list; every given condition must hold.
        #[derive(InputObject, Default)]
        pub struct SessionFilter {
            $( $(#[$doc])* pub $field: Option<<$ty as ApiFilterValue>::Api>, )*
        }

        impl SessionFilter {
            pub(super) fn to_domain(&self) -> ApiResult<dom::SessionFilter> {
                Ok(dom::SessionFilter {
                    $( $field: match &self.$field {
                        None => None,
                        Some(v) => Some(<$ty as ApiFilterValue>::domain(v.clone(), stringify!($field))?),
                    }, )*
                })
            }
        }
    };
}
crate::domain::sessions::session_filter_fields!(api_filter);

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

pub(super) fn to_domain_orders(order_by: Option<Vec<SessionOrder>>) -> Vec<dom::SessionOrder> {
    order_by
        .unwrap_or_default()
        .into_iter()
        .map(|o| dom::SessionOrder { field: o.field.into(), descending: o.direction == OrderDirection::Desc })
        .collect()
}

/// A page of sessions costs its statement, the count it may be asked for (`totalCount`
/// costs nothing itself: what a connection selects is counted per session), and its size
/// times what each session selects. A size over the maximum counts as the maximum: the
/// resolver refuses it with BAD_USER_INPUT.
pub fn page_complexity(size: Option<i32>, per_session: usize) -> usize {
    let size = size.map_or(DEFAULT_PAGE_SIZE, |n| u64::try_from(n).unwrap_or(0).min(MAX_PAGE_SIZE)) as usize;
    size.max(1).saturating_mul(per_session).saturating_add(STATEMENT_COST + AGGREGATE_COST)
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
///
/// Resolved one field after the other (`serial`), like the session itself: async-graphql
/// writes the fields of a concurrent object in the order they finish, so a `totalCount`
/// (a statement) would come out after the page's fields wherever it was asked, and its
/// place would change from one answer to the next. Serial, every answer keeps the order
/// of the selection, as the GraphQL spec asks; nothing else here waits.
#[derive(SimpleObject)]
#[graphql(complex, serial)]
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
        super::limits::aggregate(ctx, async {
            let n = self.set.count(db(ctx)?).await?;
            Ok((i64::try_from(n).unwrap_or(i64::MAX), n))
        })
        .await
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
        let c = super::limits::aggregate(ctx, async {
            let c = set.counts(db(ctx)?).await?;
            let scanned = c.all;
            Ok((c, scanned))
        })
        .await?;
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

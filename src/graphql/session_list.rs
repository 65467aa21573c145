//! The session list: its arguments (scope, tab, filter, order), its counts, and the queries
//! that read them (`sessions`, `sessionCounts`, `session`). Its pages are `session.rs`'s.

use std::sync::Arc;

use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::domain::DomainError;
use crate::domain::sessions::visibility::{self, SessionScope as DomScope};
use crate::domain::sessions::{self as dom, SessionSet};
use crate::domain::store::inline::InlineReads;

use super::context::{db, viewer};
use super::errors::{ApiResult, with_paths};
use super::ids::{NodeKind, decode_uuid, project_uuid};
use super::limits::{AGGREGATE_COST, STATEMENT_COST};
use super::loaders::prefetch_one;
use super::session::{Session, SessionConnection, session_connection};
use super::session_paging::{PageArgs, list_path, page_complexity};
use super::types::{SessionStatus, SessionType};

/// Whose sessions of a project a list shows (see `Project.sessionScopes`).
#[derive(Enum, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionScope {
    /// The caller's own sessions in the project: for its members, whatever their role (FORBIDDEN
    /// to an administrator who is no member).
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

impl From<DomScope> for SessionScope {
    fn from(s: DomScope) -> Self {
        match s {
            DomScope::Mine => SessionScope::Mine,
            DomScope::Project => SessionScope::Project,
        }
    }
}

/// A tab of the Sessions page: live sessions, or those that ended.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::sessions::SessionTab")]
pub enum SessionTab {
    /// Every non-terminal status, PENDING included.
    Running,
    /// TERMINATED, CANCELLED and ERROR.
    Finished,
}

/// What a session list can be ordered by.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::sessions::SessionOrderField")]
pub enum SessionOrderField {
    /// When it was launched.
    CreatedAt,
    /// Its name, compared byte by byte (upper case before lower case).
    Name,
    /// Its status, in lifecycle order: PENDING, SCHEDULED, … TERMINATED, CANCELLED, ERROR.
    Status,
    /// Its type, in the order INTERACTIVE, BATCH, INFERENCE, UPLOAD.
    Type,
    /// Time from creation to termination, or to now while not terminated.
    Elapsed,
    /// When it ended; sessions not ended come after all others in ascending order.
    TerminatedAt,
    /// Cores used at the latest sample (`utilization`): `DESC` for the heaviest first. A
    /// session not sampled yet counts as 0; an ended one keeps its last sample.
    CpuUsed,
    /// Memory used at the latest sample, as `CPU_USED`.
    MemUsed,
}

/// Which way an order runs.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum OrderDirection {
    /// Smallest, earliest or first first.
    Asc,
    /// Largest, latest or last first.
    Desc,
}

/// One key of a list's order; later keys break the ties of earlier ones, then the id.
#[derive(InputObject)]
pub struct SessionOrder {
    /// What to order by; a field given twice counts once, where it first appears.
    pub field: SessionOrderField,
    /// Which way.
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
vocabulary_list!(crate::domain::model::SessionType => SessionType, crate::domain::model::status::SessionStatus => SessionStatus);

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

pub(super) fn to_domain_orders(order_by: Option<Vec<SessionOrder>>) -> Vec<dom::SessionOrder> {
    order_by
        .unwrap_or_default()
        .into_iter()
        .map(|o| dom::SessionOrder { field: o.field.into(), descending: o.direction == OrderDirection::Desc })
        .collect()
}

/// How many sessions of a list are of one type.
#[derive(SimpleObject)]
pub struct SessionTypeCount {
    /// The type.
    #[graphql(name = "type")]
    pub session_type: SessionType,
    /// How many of the list's sessions are of it (0 included).
    pub count: i64,
}

/// Badge counts of a list.
#[derive(SimpleObject)]
pub struct SessionCounts {
    /// Non-terminal sessions (the Running tab).
    pub running: i64,
    /// Terminal sessions (the Finished tab).
    pub finished: i64,
    /// Every session of the list: running and finished.
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
    project_set(db(ctx)?, ctx.data_opt::<InlineReads>(), viewer(ctx)?, project_id, scope, filter).await
}

/// The same without a GraphQL context.
pub(super) async fn project_set(
    db: &sea_orm::DatabaseConnection,
    inline: Option<&InlineReads>,
    viewer: &crate::domain::directory::auth::Viewer,
    project_id: &ID,
    scope: Option<SessionScope>,
    filter: Option<SessionFilter>,
) -> ApiResult<SessionSet> {
    let filter = filter.unwrap_or_default().to_domain()?;
    let scope = scope.unwrap_or_default().into();
    dom::project_sessions(db, inline, viewer, project_uuid(project_id)?, scope, &filter)
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
        #[graphql(desc = "A project the caller may open (NOT_FOUND otherwise).")] project_id: ID,
        #[graphql(
            default_with = "Some(SessionScope::Mine)",
            desc = "MINE (a member's own sessions) or PROJECT (everyone's, for an administrator); FORBIDDEN otherwise."
        )]
        scope: Option<SessionScope>,
        #[graphql(desc = "Which sessions to list; every given condition must hold. None: all of the scope.")]
        filter: Option<SessionFilter>,
        #[graphql(desc = "Order keys, first key first (at most 32); ties by id. None: CREATED_AT descending.")]
        order_by: Option<Vec<SessionOrder>>,
        #[graphql(desc = "How many from the start or after `after`: default 50, at most 500. Not with `last`.")]
        first: Option<i32>,
        #[graphql(desc = "Start after this cursor, of a list with the same `orderBy`.")] after: Option<String>,
        #[graphql(desc = "How many sessions just before `before` (or at the end): at most 500. Not with `first`.")]
        last: Option<i32>,
        #[graphql(desc = "End before this cursor, of a list with the same `orderBy`.")] before: Option<String>,
    ) -> ApiResult<SessionConnection> {
        let set = project_session_set(ctx, &project_id, scope, filter).await?;
        session_connection(ctx, set, &to_domain_orders(order_by), PageArgs { first, after, last, before }).await
    }

    /// Counts for the tab and type badges of the same list, in one statement.
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn session_counts(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The project, as for `sessions`.")] project_id: ID,
        #[graphql(default_with = "Some(SessionScope::Mine)", desc = "Whose sessions, as for `sessions`.")]
        scope: Option<SessionScope>,
        #[graphql(desc = "Which sessions, as for `sessions`; with a `tab` in it, the other tab's count is 0.")]
        filter: Option<SessionFilter>,
    ) -> ApiResult<SessionCounts> {
        let set = project_session_set(ctx, &project_id, scope, filter).await?;
        let c = super::limits::aggregate(ctx, async {
            let c = set.counts(db(ctx)?).await?;
            let scanned = c.scanned;
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
    async fn session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session's global id.")] id: ID,
    ) -> ApiResult<Option<Session>> {
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

//! Reading session lists: filters, tabs, ordering, keyset pagination and counts.
//!
//! A [`SessionSet`] is the sessions a viewer may see (from [`visibility`]) narrowed by a
//! [`SessionFilter`]; the list and its counts read through it.
//! Pages are keyset (seek) pages ([`super::paging`]): a [`SessionPosition`] holds the
//! sort-key values of its row, so a page costs the same wherever it is. The sort-key values
//! are computed by the database and read back with the row, so a position compares exactly
//! as the database orders.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func, LikeExpr, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, FromQueryResult, IdenStatic, Order, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, Value,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use entity::{session, user};

use super::auth::Viewer;
use super::model::{SessionType, string_enum};
use super::occupancy::PendingReason;
use super::paging::{Page, PageRequest};
use super::status::SessionStatus;
use super::visibility::{self, SessionScope};
use super::{DomainError, DomainResult, InputProblem};

const MAX_NAME_FILTER: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionTab {
    /// Every non-terminal status, PENDING included.
    Running,
    /// TERMINATED, CANCELLED and ERROR.
    Finished,
}

impl SessionTab {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Finished => "FINISHED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Running, Self::Finished].into_iter().find(|t| t.as_str() == text)
    }

    pub fn statuses(self) -> Vec<SessionStatus> {
        SessionStatus::ALL.iter().copied().filter(|s| s.is_terminal() == (self == Self::Finished)).collect()
    }
}

#[derive(Clone, Debug, Default)]
pub struct SessionFilter {
    pub types: Option<Vec<SessionType>>,
    pub tab: Option<SessionTab>,
    pub statuses: Option<Vec<SessionStatus>>,
    /// Case-insensitive substring of the name.
    pub name_contains: Option<String>,
    pub resource_group: Option<String>,
    /// Only with scope PROJECT.
    pub owner_email: Option<String>,
    pub launch_group_id: Option<Uuid>,
    /// Inclusive lower bound of the creation time.
    pub created_after: Option<DateTime<Utc>>,
    /// Exclusive upper bound of the creation time.
    pub created_before: Option<DateTime<Utc>>,
}

string_enum!(
    SessionOrderField {
        CreatedAt = "CREATED_AT",
        Name = "NAME",
        Status = "STATUS",
        Type = "TYPE",
        Elapsed = "ELAPSED",
        TerminatedAt = "TERMINATED_AT",
    }
);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOrder {
    pub field: SessionOrderField,
    pub descending: bool,
}

impl SessionOrder {
    pub const DEFAULT: SessionOrder = SessionOrder { field: SessionOrderField::CreatedAt, descending: true };
}

/// A page of sessions, each with its position (where the next page starts).
pub type SessionPage = Page<(session::Model, SessionPosition)>;

/// Every current cause that keeps a session from starting, as the latest scheduling pass
/// found it: only while the session is PENDING.
pub fn pending_reasons(s: &session::Model) -> DomainResult<Vec<PendingReason>> {
    Ok(if SessionStatus::stored(&s.status)? == SessionStatus::Pending {
        PendingReason::list_from_json(&s.pending_reasons)
    } else {
        Vec::new()
    })
}

/// Its place among the pending sessions of its resource group (1 is next), once the
/// scheduler has ordered it; none when not PENDING.
pub fn queue_position(s: &session::Model) -> DomainResult<Option<i32>> {
    queue_position_of(&s.status, s.queue_position)
}

/// [`queue_position`] of a session in status `status` with the stored position `position`.
pub fn queue_position_of(status: &str, position: Option<i32>) -> DomainResult<Option<i32>> {
    Ok(if SessionStatus::stored(status)? == SessionStatus::Pending { position } else { None })
}

/// Whether a session offers its image's applications now: once RUNNING.
pub fn offers_apps(s: &session::Model) -> DomainResult<bool> {
    Ok(SessionStatus::stored(&s.status)? == SessionStatus::Running)
}

/// The applications of an image (e.g. jupyter, terminal).
pub fn image_apps(image: &entity::image::Model) -> Vec<String> {
    image.apps.as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_owned)).collect()
}

/// Whole seconds from creation to termination, or to `now` while not terminated.
pub fn elapsed_seconds(s: &session::Model, now: DateTime<Utc>) -> i64 {
    elapsed_between(s.created_at, s.terminated_at, now)
}

/// [`elapsed_seconds`] of a session created at `created_at` and terminated at `terminated_at`.
pub fn elapsed_between(created_at: DateTime<Utc>, terminated_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> i64 {
    std::cmp::max((terminated_at.unwrap_or(now) - created_at).num_seconds(), 0)
}

/// Badge counts of a session set.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SessionCounts {
    pub running: u64,
    pub finished: u64,
    pub all: u64,
    /// Every type, zero counts included, in the order of [`SessionType::ALL`].
    pub by_type: Vec<(SessionType, u64)>,
}

/// The sessions a viewer may see, narrowed by a filter.
#[derive(Clone, Debug)]
pub struct SessionSet {
    condition: Condition,
}

/// The sessions of a project in `scope`, filtered: every check of the list's arguments.
pub async fn project_sessions(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    project_id: Uuid,
    scope: SessionScope,
    filter: &SessionFilter,
) -> DomainResult<SessionSet> {
    let mut problems = Vec::new();
    if scope == SessionScope::Mine && filter.owner_email.is_some() {
        problems.push(InputProblem::new(
            "OWNER_FILTER_NEEDS_PROJECT_SCOPE",
            Some("owner_email".to_owned()),
            "the owner filter applies to the PROJECT scope; the MINE scope lists only your own sessions",
        ));
    }
    if filter.name_contains.as_ref().is_some_and(|n| n.chars().count() > MAX_NAME_FILTER) {
        problems.push(InputProblem::new(
            "TOO_LONG",
            Some("name_contains".to_owned()),
            format!("the name filter is limited to {MAX_NAME_FILTER} characters"),
        ));
    }
    for (field, text) in [
        ("name_contains", &filter.name_contains),
        ("owner_email", &filter.owner_email),
        ("resource_group", &filter.resource_group),
    ] {
        if text.as_ref().is_some_and(|t| t.contains('\0')) {
            problems.push(InputProblem::new(
                "NUL_CHARACTER",
                Some(field.to_owned()),
                "text may not contain a NUL character",
            ));
        }
    }
    if let (Some(after), Some(before)) = (filter.created_after, filter.created_before)
        && after > before
    {
        problems.push(InputProblem::new(
            "EMPTY_RANGE",
            Some("created_after".to_owned()),
            "the creation range starts after it ends",
        ));
    }
    if !problems.is_empty() {
        return Err(DomainError::BadInput(problems));
    }
    let scope = visibility::session_scope(db, viewer, project_id, scope).await?;
    Ok(SessionSet { condition: scope.condition().add(filter_condition(filter)) })
}

fn filter_condition(f: &SessionFilter) -> Condition {
    let mut c = Condition::all();
    if let Some(types) = &f.types {
        c = c.add(session::Column::SessionType.is_in(types.iter().map(|t| t.as_str())));
    }
    if let Some(tab) = f.tab {
        c = c.add(session::Column::Status.is_in(tab.statuses().into_iter().map(SessionStatus::as_str)));
    }
    if let Some(statuses) = &f.statuses {
        c = c.add(session::Column::Status.is_in(statuses.iter().map(|s| s.as_str())));
    }
    if let Some(needle) = f.name_contains.as_deref().filter(|n| !n.is_empty()) {
        let pattern = format!("%{}%", escape_like(&needle.to_lowercase()));
        c = c.add(
            Expr::expr(Func::lower(Expr::col((session::Entity, session::Column::Name))))
                .like(LikeExpr::new(pattern).escape('\\')),
        );
    }
    if let Some(group) = &f.resource_group {
        c = c.add(session::Column::ResourceGroup.eq(group.as_str()));
    }
    if let Some(email) = &f.owner_email {
        c = c.add(
            session::Column::OwnerId.in_subquery(
                Query::select()
                    .column(user::Column::Id)
                    .from(user::Entity)
                    .and_where(user::Column::Email.eq(email.as_str()))
                    .take(),
            ),
        );
    }
    if let Some(group) = f.launch_group_id {
        c = c.add(session::Column::LaunchGroupId.eq(group));
    }
    if let Some(after) = f.created_after {
        c = c.add(session::Column::CreatedAt.gte(after));
    }
    if let Some(before) = f.created_before {
        c = c.add(session::Column::CreatedAt.lt(before));
    }
    c
}

fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

impl SessionSet {
    /// The sessions of a launch group the viewer may see.
    pub fn of_launch_group(group: &entity::launch_group::Model) -> Self {
        Self { condition: visibility::launch_group_scope(group) }
    }

    /// How many sessions the set has: a bare `COUNT(*)` that an index can answer.
    pub async fn count(&self, db: &impl ConnectionTrait) -> DomainResult<u64> {
        let n: Option<i64> = session::Entity::find()
            .select_only()
            .column_as(Expr::col((session::Entity, session::Column::Id)).count(), "n")
            .filter(self.condition.clone())
            .into_tuple()
            .one(db)
            .await?;
        Ok(n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
    }

    /// Running, finished, all and per-type counts in one grouped statement.
    pub async fn counts(&self, db: &impl ConnectionTrait) -> DomainResult<SessionCounts> {
        #[derive(FromQueryResult)]
        struct Group {
            session_type: String,
            status: String,
            n: i64,
        }
        let groups = session::Entity::find()
            .select_only()
            .column(session::Column::SessionType)
            .column(session::Column::Status)
            .column_as(Expr::col(session::Column::Id).count(), "n")
            .filter(self.condition.clone())
            .group_by(session::Column::SessionType)
            .group_by(session::Column::Status)
            .into_model::<Group>()
            .all(db)
            .await?;
        let mut counts = SessionCounts::default();
        let mut by_type: BTreeMap<SessionType, u64> = SessionType::ALL.iter().map(|t| (*t, 0)).collect();
        for g in groups {
            let n = u64::try_from(g.n).unwrap_or(0);
            let status = SessionStatus::stored(&g.status)?;
            let ty = SessionType::stored(&g.session_type)?;
            if status.is_terminal() {
                counts.finished += n;
            } else {
                counts.running += n;
            }
            counts.all += n;
            *by_type.entry(ty).or_default() += n;
        }
        counts.by_type = SessionType::ALL.iter().map(|t| (*t, by_type[t])).collect();
        Ok(counts)
    }

    /// One page in `orders` (then by id), after or before a position of the same ordering.
    pub async fn page(
        &self,
        db: &impl ConnectionTrait,
        orders: &[SessionOrder],
        request: &PageRequest<SessionPosition>,
        now: DateTime<Utc>,
    ) -> DomainResult<SessionPage> {
        let walk = self.walk(db.get_database_backend(), orders, request, now, None)?;
        let rows = db.query_all_raw(walk.statement.clone()).await?;
        let mut walked = Vec::with_capacity(rows.len());
        for row in rows {
            walked.push((session::Model::from_query_result(&row, "")?, walk.position(&row)?));
        }
        Ok(request.finish(walked))
    }

    /// The next `request.size` sessions after `request.after`, reading only `columns`,
    /// each row made a value by `read`, and the position the following ones start after
    /// (`None`: these were the last). For walking a whole list forwards: no position is made
    /// for the rows in between.
    pub async fn next_rows<R>(
        &self,
        db: &impl ConnectionTrait,
        orders: &[SessionOrder],
        request: &PageRequest<SessionPosition>,
        now: DateTime<Utc>,
        columns: &[session::Column],
        read: impl FnMut(sea_orm::QueryResult) -> DomainResult<R>,
    ) -> DomainResult<(Vec<R>, Option<SessionPosition>)> {
        if request.backward || request.before.is_some() {
            return Err(DomainError::invariant("next_rows walks forwards"));
        }
        let walk = self.walk(db.get_database_backend(), orders, request, now, Some(columns))?;
        let mut rows = db.query_all_raw(walk.statement.clone()).await?;
        let size = usize::try_from(request.size).unwrap_or(usize::MAX);
        let next = if rows.len() > size {
            rows.truncate(size);
            rows.last().map(|row| walk.position(row)).transpose()?
        } else {
            None
        };
        Ok((rows.into_iter().map(read).collect::<DomainResult<_>>()?, next))
    }

    /// The statement of a page, and how its rows' positions are made.
    fn walk(
        &self,
        backend: DbBackend,
        orders: &[SessionOrder],
        request: &PageRequest<SessionPosition>,
        now: DateTime<Utc>,
        columns: Option<&[session::Column]>,
    ) -> DomainResult<Walk> {
        let keys = order_keys(orders);
        let signature = signature(&keys);
        let after = request.after.as_ref().map(|p| p.check(&signature, "after")).transpose()?;
        let before = request.before.as_ref().map(|p| p.check(&signature, "before")).transpose()?;
        // Elapsed time is measured against one instant for the whole walk through the list,
        // carried by the positions, so that pages stay consistent while time passes.
        let now = after.or(before).and_then(|p| p.now).map_or(now, micros_to_time);
        let backward = request.backward;

        let exprs: Vec<Expr> = keys.iter().map(|k| sort_expr(k.field, backend, now)).collect();
        let mut query = session::Entity::find().filter(self.condition.clone());
        if let Some(columns) = columns {
            query = query.select_only().column(session::Column::Id);
            for c in columns.iter().filter(|c| c.as_str() != session::Column::Id.as_str()) {
                query = query.column(*c);
            }
        }
        for (i, expr) in exprs.iter().enumerate() {
            query = query.expr_as(expr.clone(), format!("sk{i}"));
        }
        if let Some(p) = after {
            query = query.filter(seek(&keys, &exprs, p, true)?);
        }
        if let Some(p) = before {
            query = query.filter(seek(&keys, &exprs, p, false)?);
        }
        for (key, expr) in keys.iter().zip(&exprs) {
            // Reading backwards: walk the reversed order; the page is flipped back at the end.
            query = query.order_by(expr.clone(), if key.descending != backward { Order::Desc } else { Order::Asc });
        }
        let id_desc = keys.first().is_some_and(|k| k.descending);
        query = query.order_by(session::Column::Id, if id_desc != backward { Order::Desc } else { Order::Asc });
        query = query.limit(request.fetch_limit());
        Ok(Walk { statement: query.build(backend), keys, signature, now })
    }
}

/// A page's statement, and what its rows' positions hold.
struct Walk {
    statement: sea_orm::Statement,
    keys: Vec<SessionOrder>,
    signature: String,
    now: DateTime<Utc>,
}

impl Walk {
    /// The position of a row of the page.
    fn position(&self, row: &sea_orm::QueryResult) -> DomainResult<SessionPosition> {
        Ok(SessionPosition {
            o: self.signature.clone(),
            k: self.keys.iter().enumerate().map(|(i, k)| key_value(row, i, k.field)).collect::<DomainResult<_>>()?,
            id: row.try_get("", session::Column::Id.as_str())?,
            now: self.keys.iter().any(|k| k.field == SessionOrderField::Elapsed).then(|| self.now.timestamp_micros()),
        })
    }
}

/// The requested orders without repeated fields (the first wins), default CREATED_AT DESC.
fn order_keys(orders: &[SessionOrder]) -> Vec<SessionOrder> {
    let mut keys: Vec<SessionOrder> = Vec::new();
    for o in orders {
        if !keys.iter().any(|k| k.field == o.field) {
            keys.push(*o);
        }
    }
    if keys.is_empty() {
        keys.push(SessionOrder::DEFAULT);
    }
    keys
}

fn signature(keys: &[SessionOrder]) -> String {
    keys.iter()
        .map(|k| format!("{}:{}", k.field, if k.descending { "DESC" } else { "ASC" }))
        .collect::<Vec<_>>()
        .join(",")
}

/// Far past any real session: unterminated sessions sort after terminated ones ascending.
fn not_terminated() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 0, 0, 0).single().unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn rank_expr(column: session::Column, names: &[&'static str]) -> Expr {
    let mut case = Expr::case(Expr::col((session::Entity, column)).eq(names[0]), 0);
    for (i, name) in names.iter().enumerate().skip(1) {
        case = case.case(Expr::col((session::Entity, column)).eq(*name), i32::try_from(i).unwrap_or(i32::MAX));
    }
    case.finally(i32::MAX).into()
}

/// The SQL value a field sorts by. Statuses sort in lifecycle order and types in their
/// declared order; names compare bytewise on both databases.
fn sort_expr(field: SessionOrderField, backend: DbBackend, now: DateTime<Utc>) -> Expr {
    use SessionOrderField::*;
    match field {
        CreatedAt => Expr::col((session::Entity, session::Column::CreatedAt)),
        Name => match backend {
            DbBackend::Postgres => Expr::cust(r#""sessions"."name" COLLATE "C""#),
            _ => Expr::col((session::Entity, session::Column::Name)),
        },
        Status => {
            rank_expr(session::Column::Status, &SessionStatus::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        }
        Type => {
            rank_expr(session::Column::SessionType, &SessionType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>())
        }
        // Milliseconds from creation to termination, or to `now` while not terminated.
        Elapsed => match backend {
            DbBackend::Postgres => Expr::cust_with_values(
                r#"CAST(ROUND(EXTRACT(EPOCH FROM (COALESCE("sessions"."terminated_at", $1) - "sessions"."created_at")) * 1000) AS BIGINT)"#,
                [now],
            ),
            _ => Expr::cust_with_values(
                r#"CAST(ROUND((unixepoch(COALESCE("sessions"."terminated_at", ?), 'subsec') - unixepoch("sessions"."created_at", 'subsec')) * 1000) AS INTEGER)"#,
                [now],
            ),
        },
        TerminatedAt => match backend {
            DbBackend::Postgres => {
                Expr::cust_with_values(r#"COALESCE("sessions"."terminated_at", $1)"#, [not_terminated()])
            }
            _ => Expr::cust_with_values(r#"COALESCE("sessions"."terminated_at", ?)"#, [not_terminated()]),
        },
    }
}

fn key_value(row: &sea_orm::QueryResult, i: usize, field: SessionOrderField) -> DomainResult<serde_json::Value> {
    use SessionOrderField::*;
    let col = format!("sk{i}");
    Ok(match field {
        CreatedAt | TerminatedAt => {
            let t: DateTime<Utc> = row.try_get("", &col)?;
            serde_json::Value::from(t.timestamp_micros())
        }
        Name => serde_json::Value::from(row.try_get::<String>("", &col)?),
        Status | Type => serde_json::Value::from(row.try_get::<i32>("", &col)?),
        Elapsed => serde_json::Value::from(row.try_get::<i64>("", &col)?),
    })
}

fn micros_to_time(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Instants a position may carry: years 1900 to 9999, which both databases hold.
fn plausible_micros(us: i64) -> Option<DateTime<Utc>> {
    const MIN: i64 = -2_208_988_800_000_000; // 1900-01-01
    const MAX: i64 = 253_402_300_799_000_000; // 9999-12-31
    (MIN..=MAX).contains(&us).then(|| DateTime::from_timestamp_micros(us)).flatten()
}

/// A position's value of a key as an SQL value of the key's type.
fn bind(field: SessionOrderField, v: &serde_json::Value) -> Option<Value> {
    use SessionOrderField::*;
    match field {
        CreatedAt | TerminatedAt => v.as_i64().and_then(plausible_micros).map(Value::from),
        Name => v.as_str().map(|s| Value::from(s.to_owned())),
        Status | Type => v.as_i64().and_then(|n| i32::try_from(n).ok()).map(Value::from),
        Elapsed => v.as_i64().map(Value::from),
    }
}

/// Rows strictly after (or before) the position's row in the keys' order, then by id.
fn seek(keys: &[SessionOrder], exprs: &[Expr], position: &SessionPosition, after: bool) -> DomainResult<Condition> {
    let malformed = || {
        DomainError::bad_input(
            "INVALID_CURSOR",
            Some(if after { "after" } else { "before" }.to_owned()),
            "malformed position",
        )
    };
    let values = keys
        .iter()
        .zip(&position.k)
        .map(|(k, v)| bind(k.field, v).ok_or_else(malformed))
        .collect::<DomainResult<Vec<_>>>()?;
    let beyond = |expr: Expr, descending: bool, value: Value| -> Expr {
        if descending == after { expr.lt(value) } else { expr.gt(value) }
    };
    let mut any = Condition::any();
    for i in 0..=keys.len() {
        let mut all = Condition::all();
        for j in 0..i {
            all = all.add(exprs[j].clone().eq(values[j].clone()));
        }
        all = if i < keys.len() {
            all.add(beyond(exprs[i].clone(), keys[i].descending, values[i].clone()))
        } else {
            let id_desc = keys.first().is_some_and(|k| k.descending);
            all.add(beyond(Expr::col((session::Entity, session::Column::Id)), id_desc, Value::from(position.id)))
        };
        any = any.add(all);
    }
    // Implied by the alternatives above, but a range an index can start from: without it
    // the database reads every row before the position again for each page.
    let Some(first) = keys.first() else { return Ok(any) };
    let bound = if first.descending == after {
        exprs[0].clone().lte(values[0].clone())
    } else {
        exprs[0].clone().gte(values[0].clone())
    };
    Ok(Condition::all().add(bound).add(any))
}

/// Where a page starts: the ordering it belongs to, a row's sort values and id, and the
/// instant elapsed times are measured against. Clients get it back opaquely and return it
/// unchanged; [`SessionPosition::check`] refuses one that was tampered with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionPosition {
    o: String,
    k: Vec<serde_json::Value>,
    id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    now: Option<i64>,
}

impl SessionPosition {
    fn check(&self, signature: &str, field: &str) -> DomainResult<&Self> {
        let bad =
            |why: &str| DomainError::bad_input("INVALID_CURSOR", Some(field.to_owned()), format!("`{field}`: {why}"));
        if self.o != signature {
            return Err(bad("it belongs to another ordering; start again from the first page"));
        }
        let nul = self.k.iter().any(|v| v.as_str().is_some_and(|s| s.contains('\0')));
        if nul
            || self.k.len() != signature.split(',').count()
            || self.now.is_some_and(|n| plausible_micros(n).is_none())
        {
            return Err(bad("malformed position"));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_default_and_deduplicate() {
        assert_eq!(order_keys(&[]), [SessionOrder::DEFAULT]);
        let name = SessionOrder { field: SessionOrderField::Name, descending: false };
        let name_desc = SessionOrder { field: SessionOrderField::Name, descending: true };
        assert_eq!(order_keys(&[name, name_desc]), [name]);
    }

    #[test]
    fn positions_belong_to_one_ordering() {
        let p = SessionPosition { o: "NAME:ASC".into(), k: vec!["x".into()], id: Uuid::nil(), now: None };
        assert!(p.check("NAME:ASC", "after").is_ok());
        assert!(matches!(p.check("CREATED_AT:DESC", "after"), Err(DomainError::BadInput(_))));
        let short = SessionPosition { k: vec![], ..p.clone() };
        assert!(matches!(short.check("NAME:ASC", "after"), Err(DomainError::BadInput(_))));
        let far = SessionPosition { now: Some(i64::MAX), ..p };
        assert!(matches!(far.check("NAME:ASC", "before"), Err(DomainError::BadInput(_))));
    }

    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(escape_like("a_b%c\\"), "a\\_b\\%c\\\\");
    }

    #[test]
    fn tabs_split_the_statuses() {
        assert_eq!(
            SessionTab::Running.statuses().len() + SessionTab::Finished.statuses().len(),
            SessionStatus::ALL.len()
        );
        assert!(SessionTab::Running.statuses().contains(&SessionStatus::Pending));
    }
}

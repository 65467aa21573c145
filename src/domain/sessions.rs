//! Reading session lists: filters, tabs, ordering, keyset pagination and counts.
//!
//! A [`SessionSet`] is the sessions a viewer may see (from [`visibility`]) narrowed by a
//! [`SessionFilter`]; the list, the counts and later the CSV export all read through it.
//! Pages are keyset (seek) pages: a cursor holds the sort-key values of its row, so a page
//! costs the same whatever its position. The sort-key values are computed by the database
//! and read back with the row, so a cursor compares exactly as the database orders.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, TimeZone, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func, LikeExpr, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, FromQueryResult, Order, QueryFilter, QueryOrder,
    QuerySelect, QueryTrait, Value,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use entity::{session, user};

use super::auth::Viewer;
use super::model::{SessionType, string_enum};
use super::status::SessionStatus;
use super::visibility::{self, SessionScope};
use super::{DomainError, DomainResult, InputProblem};

pub const DEFAULT_PAGE_SIZE: u64 = 50;
pub const MAX_PAGE_SIZE: u64 = 500;
const MAX_NAME_FILTER: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionTab {
    /// Every non-terminal status, PENDING included.
    Running,
    /// TERMINATED, CANCELLED and ERROR.
    Finished,
}

impl SessionTab {
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

/// Relay paging arguments as the client sent them.
#[derive(Clone, Debug, Default)]
pub struct PageArgs {
    pub first: Option<i32>,
    pub after: Option<String>,
    pub last: Option<i32>,
    pub before: Option<String>,
}

/// One page of sessions, each with its cursor.
#[derive(Debug)]
pub struct SessionPage {
    pub rows: Vec<(session::Model, String)>,
    pub has_next_page: bool,
    pub has_previous_page: bool,
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
            Some("filter.ownerEmail".to_owned()),
            "`ownerEmail` filters the PROJECT scope; the MINE scope lists only your own sessions",
        ));
    }
    if filter.name_contains.as_ref().is_some_and(|n| n.chars().count() > MAX_NAME_FILTER) {
        problems.push(InputProblem::new(
            "TOO_LONG",
            Some("filter.nameContains".to_owned()),
            format!("`nameContains` is limited to {MAX_NAME_FILTER} characters"),
        ));
    }
    if let (Some(after), Some(before)) = (filter.created_after, filter.created_before)
        && after > before
    {
        problems.push(InputProblem::new(
            "EMPTY_RANGE",
            Some("filter.createdAfter".to_owned()),
            "`createdAfter` is later than `createdBefore`",
        ));
    }
    if !problems.is_empty() {
        return Err(DomainError::BadInput(problems));
    }
    let scope = visibility::session_scope(db, viewer, project_id, scope).await?;
    Ok(SessionSet { condition: scope.add(filter_condition(filter)) })
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
            let status = SessionStatus::parse(&g.status)
                .ok_or_else(|| DomainError::invariant(format!("stored status {}", g.status)))?;
            let ty = SessionType::parse(&g.session_type)
                .ok_or_else(|| DomainError::invariant(format!("stored type {}", g.session_type)))?;
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

    /// One page in `orders` (then by id), per Relay's `first`/`after`/`last`/`before`.
    pub async fn page(
        &self,
        db: &impl ConnectionTrait,
        orders: &[SessionOrder],
        args: &PageArgs,
        now: DateTime<Utc>,
    ) -> DomainResult<SessionPage> {
        let keys = order_keys(orders);
        let (limit, backward) = page_size(args)?;
        let signature = signature(&keys);
        let after = args.after.as_deref().map(|c| Cursor::decode(c, &signature, "after")).transpose()?;
        let before = args.before.as_deref().map(|c| Cursor::decode(c, &signature, "before")).transpose()?;
        // Elapsed time is measured against one instant for the whole walk through the list,
        // carried by the cursors, so that pages stay consistent while time passes.
        let now = after.as_ref().or(before.as_ref()).and_then(|c| c.now).map_or(now, micros_to_time);

        let backend = db.get_database_backend();
        let exprs: Vec<Expr> = keys.iter().map(|k| sort_expr(k.field, backend, now)).collect();
        let mut query = session::Entity::find().filter(self.condition.clone());
        for (i, expr) in exprs.iter().enumerate() {
            query = query.expr_as(expr.clone(), format!("sk{i}"));
        }
        if let Some(c) = &after {
            query = query.filter(seek(&keys, &exprs, c, true)?);
        }
        if let Some(c) = &before {
            query = query.filter(seek(&keys, &exprs, c, false)?);
        }
        for (key, expr) in keys.iter().zip(&exprs) {
            // Reading backwards: walk the reversed order, then flip the page.
            query = query.order_by(expr.clone(), if key.descending != backward { Order::Desc } else { Order::Asc });
        }
        let id_desc = keys.first().is_some_and(|k| k.descending);
        query = query.order_by(session::Column::Id, if id_desc != backward { Order::Desc } else { Order::Asc });
        query = query.limit(limit + 1);

        let rows = db.query_all_raw(query.build(backend)).await?;
        let has_more = rows.len() as u64 > limit;
        let mut page = Vec::with_capacity(rows.len().min(limit as usize));
        for row in rows.iter().take(limit as usize) {
            let model = session::Model::from_query_result(row, "")?;
            let values =
                keys.iter().enumerate().map(|(i, k)| key_value(row, i, k.field)).collect::<DomainResult<Vec<_>>>()?;
            let cursor = Cursor {
                o: signature.clone(),
                k: values,
                id: model.id,
                now: keys.iter().any(|k| k.field == SessionOrderField::Elapsed).then(|| now.timestamp_micros()),
            };
            page.push((model, cursor.encode()));
        }
        if backward {
            page.reverse();
        }
        Ok(SessionPage {
            rows: page,
            has_next_page: if backward { before.is_some() } else { has_more },
            has_previous_page: if backward { has_more } else { after.is_some() },
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

/// The page size and whether the page is read backwards (`last`).
fn page_size(args: &PageArgs) -> DomainResult<(u64, bool)> {
    let check = |n: i32, field: &str| -> DomainResult<u64> {
        let n = u64::try_from(n).map_err(|_| {
            DomainError::bad_input("OUT_OF_RANGE", Some(field.to_owned()), format!("`{field}` cannot be negative"))
        })?;
        if n > MAX_PAGE_SIZE {
            return Err(DomainError::bad_input(
                "OUT_OF_RANGE",
                Some(field.to_owned()),
                format!("`{field}` is at most {MAX_PAGE_SIZE}"),
            ));
        }
        Ok(n)
    };
    match (args.first, args.last) {
        (Some(_), Some(_)) => Err(DomainError::bad_input(
            "AMBIGUOUS_PAGE",
            Some("last".to_owned()),
            "give `first` (with `after`) or `last` (with `before`), not both",
        )),
        (Some(n), None) => Ok((check(n, "first")?, false)),
        (None, Some(n)) => Ok((check(n, "last")?, true)),
        (None, None) => Ok((DEFAULT_PAGE_SIZE, args.before.is_some() && args.after.is_none())),
    }
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

/// Instants a cursor may carry: years 1900 to 9999, which both databases hold.
fn plausible_micros(us: i64) -> Option<DateTime<Utc>> {
    const MIN: i64 = -2_208_988_800_000_000; // 1900-01-01
    const MAX: i64 = 253_402_300_799_000_000; // 9999-12-31
    (MIN..=MAX).contains(&us).then(|| DateTime::from_timestamp_micros(us)).flatten()
}

/// The cursor's value of a key as an SQL value of the key's type.
fn bind(field: SessionOrderField, v: &serde_json::Value) -> Option<Value> {
    use SessionOrderField::*;
    match field {
        CreatedAt | TerminatedAt => v.as_i64().and_then(plausible_micros).map(Value::from),
        Name => v.as_str().map(|s| Value::from(s.to_owned())),
        Status | Type => v.as_i64().and_then(|n| i32::try_from(n).ok()).map(Value::from),
        Elapsed => v.as_i64().map(Value::from),
    }
}

/// Rows strictly after (or before) the cursor's row in the keys' order, then by id.
fn seek(keys: &[SessionOrder], exprs: &[Expr], cursor: &Cursor, after: bool) -> DomainResult<Condition> {
    let malformed = || {
        DomainError::bad_input(
            "INVALID_CURSOR",
            Some(if after { "after" } else { "before" }.to_owned()),
            "malformed cursor",
        )
    };
    let values = keys
        .iter()
        .zip(&cursor.k)
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
            all.add(beyond(Expr::col((session::Entity, session::Column::Id)), id_desc, Value::from(cursor.id)))
        };
        any = any.add(all);
    }
    Ok(any)
}

/// What a cursor carries: the ordering it belongs to, its row's sort values and id, and the
/// instant elapsed times are measured against.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    o: String,
    k: Vec<serde_json::Value>,
    id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    now: Option<i64>,
}

impl Cursor {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str, signature: &str, field: &str) -> DomainResult<Cursor> {
        let bad =
            |why: &str| DomainError::bad_input("INVALID_CURSOR", Some(field.to_owned()), format!("`{field}`: {why}"));
        let bytes = URL_SAFE_NO_PAD.decode(text.as_bytes()).map_err(|_| bad("malformed cursor"))?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| bad("malformed cursor"))?;
        if cursor.o != signature {
            return Err(bad("the cursor belongs to another ordering; start again from the first page"));
        }
        if cursor.k.len() != signature.split(',').count() || cursor.now.is_some_and(|n| plausible_micros(n).is_none()) {
            return Err(bad("malformed cursor"));
        }
        Ok(cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_are_bounded() {
        let args = |first, last| PageArgs { first, last, ..Default::default() };
        assert_eq!(page_size(&args(None, None)).ok(), Some((50, false)));
        assert_eq!(page_size(&args(Some(500), None)).ok(), Some((500, false)));
        assert_eq!(page_size(&args(None, Some(3))).ok(), Some((3, true)));
        assert!(page_size(&args(Some(501), None)).is_err());
        assert!(page_size(&args(Some(-1), None)).is_err());
        assert!(page_size(&args(Some(1), Some(1))).is_err());
    }

    #[test]
    fn order_keys_default_and_deduplicate() {
        assert_eq!(order_keys(&[]), [SessionOrder::DEFAULT]);
        let name = SessionOrder { field: SessionOrderField::Name, descending: false };
        let name_desc = SessionOrder { field: SessionOrderField::Name, descending: true };
        assert_eq!(order_keys(&[name, name_desc]), [name]);
    }

    #[test]
    fn cursors_round_trip_and_belong_to_one_ordering() {
        let c = Cursor { o: "NAME:ASC".into(), k: vec!["x".into()], id: Uuid::nil(), now: None };
        let text = c.encode();
        assert!(Cursor::decode(&text, "NAME:ASC", "after").is_ok());
        assert!(Cursor::decode(&text, "CREATED_AT:DESC", "after").is_err());
        assert!(Cursor::decode("!!", "NAME:ASC", "after").is_err());
        assert!(Cursor::decode(&URL_SAFE_NO_PAD.encode("{}"), "NAME:ASC", "after").is_err());
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

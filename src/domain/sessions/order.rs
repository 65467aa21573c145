//! Orders of a session list and keyset positions: the SQL value each order sorts by, the
//! condition that seeks past a position, and positions themselves (checked when they come
//! back from a client).

use chrono::{DateTime, TimeZone, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{Condition, DbBackend, Value};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use entity::session;

use crate::domain::model::status::SessionStatus;
use crate::domain::model::{SessionType, string_enum};
use crate::domain::store::inline::RowAt;
use crate::domain::{DomainError, DomainResult};

string_enum!(
    SessionOrderField {
        CreatedAt = "CREATED_AT",
        Name = "NAME",
        Status = "STATUS",
        Type = "TYPE",
        Elapsed = "ELAPSED",
        TerminatedAt = "TERMINATED_AT",
        CpuUsed = "CPU_USED",
        MemUsed = "MEM_USED",
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

/// A page's statement, and what its rows' positions hold.
pub(super) struct Walk {
    pub(super) statement: sea_orm::Statement,
    pub(super) keys: Vec<SessionOrder>,
    pub(super) signature: String,
    pub(super) now: DateTime<Utc>,
    /// The index of the first sort key's column in a row (the session's id is column 0).
    pub(super) first_key: usize,
}

impl Walk {
    /// The position of a row of the page.
    pub(super) fn position<R: RowAt>(&self, row: &R) -> DomainResult<SessionPosition> {
        Ok(SessionPosition {
            o: self.signature.clone(),
            k: self
                .keys
                .iter()
                .enumerate()
                .map(|(i, k)| key_value(row, self.first_key + i, k.field))
                .collect::<DomainResult<_>>()?,
            id: row.at(0)?,
            now: self.keys.iter().any(|k| k.field == SessionOrderField::Elapsed).then(|| self.now.timestamp_micros()),
        })
    }
}

/// Most orderings a list request may name (there are fewer fields than this; repeats
/// are allowed and the first wins).
pub const MAX_ORDERS: usize = 32;

/// The requested orders without repeated fields (the first wins), default CREATED_AT DESC.
pub(super) fn order_keys(orders: &[SessionOrder]) -> Vec<SessionOrder> {
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

pub(super) fn signature(keys: &[SessionOrder]) -> String {
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
pub(super) fn sort_expr(field: SessionOrderField, backend: DbBackend, now: DateTime<Utc>) -> Expr {
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
        // The latest sample's (0 before any; an ended session keeps its last).
        CpuUsed => Expr::col((session::Entity, session::Column::CpuUsed)),
        MemUsed => Expr::col((session::Entity, session::Column::MemUsed)),
    }
}

/// The sort key value in column `at` of a row.
pub(super) fn key_value<R: RowAt>(row: &R, at: usize, field: SessionOrderField) -> DomainResult<serde_json::Value> {
    use SessionOrderField::*;
    Ok(match field {
        CreatedAt | TerminatedAt => {
            let t: DateTime<Utc> = row.at(at)?;
            serde_json::Value::from(t.timestamp_micros())
        }
        Name => serde_json::Value::from(row.at::<String>(at)?),
        Status | Type => serde_json::Value::from(row.at::<i32>(at)?),
        Elapsed => serde_json::Value::from(row.at::<i64>(at)?),
        CpuUsed | MemUsed => serde_json::Value::from(row.at::<f64>(at)?),
    })
}

pub(super) fn micros_to_time(us: i64) -> DateTime<Utc> {
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
        CpuUsed | MemUsed => v.as_f64().filter(|x| x.is_finite()).map(Value::from),
    }
}

/// Rows strictly after (or before) the position's row in the keys' order, then by id.
pub(super) fn seek(
    keys: &[SessionOrder],
    exprs: &[Expr],
    position: &SessionPosition,
    after: bool,
) -> DomainResult<Condition> {
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
    pub(super) now: Option<i64>,
}

impl SessionPosition {
    pub(super) fn check(&self, signature: &str, field: &str) -> DomainResult<&Self> {
        let bad =
            |why: &str| DomainError::bad_input("INVALID_CURSOR", Some(field.to_owned()), format!("`{field}`: {why}"));
        if self.o != signature {
            return Err(bad("it belongs to another ordering; start again from the first page"));
        }
        let nul = self.k.iter().any(|v| v.as_str().is_some_and(|s| s.chars().any(char::is_control)));
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
}

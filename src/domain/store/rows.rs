//! Writing many rows in one statement whose text does not depend on how many.
//!
//! A multi-row `VALUES` list binds one parameter per column and row (a launch of 100
//! sessions: over 5 000) and is a statement of its own for each row count, prepared again
//! each time. Instead the rows go as one JSON parameter, expanded into rows by the database:
//! one statement text per table and column set, one parameter, whatever the count.
//! - PostgreSQL: `jsonb_populate_recordset`, into rows of the table's own type.
//! - SQLite: `jsonb_each`, each row an array of its values as SQLite stores them when sqlx
//!   binds them ([`bound`]: instants as RFC 3339 text, JSON as text, booleans as integers,
//!   uuids as 16-byte blobs, which travel in hex and are read back by `unhex`). Rows with a
//!   value JSON cannot carry exactly (a non-finite float) go through sea-orm's own insert.

use std::fmt::Write;

use chrono::SecondsFormat;
use rusqlite::types::Value as Stored;
use sea_orm::sea_query::sea_value_to_json_value;
use sea_orm::{
    ActiveModelTrait, ActiveValue, ConnectionTrait, DbBackend, DbErr, EntityName, EntityTrait, Iterable, QueryResult,
    QueryTrait, Statement, Value,
};

use crate::domain::store::inline::bound;

/// Inserts `rows` (each with the same columns set) in one statement; with `returning`, the
/// rows of that column come back.
pub async fn insert_all<A>(
    db: &impl ConnectionTrait,
    rows: Vec<A>,
    returning: Option<<A::Entity as EntityTrait>::Column>,
) -> Result<Vec<QueryResult>, DbErr>
where
    A: ActiveModelTrait + Send,
{
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let backend = db.get_database_backend();
    let columns: Vec<<A::Entity as EntityTrait>::Column> =
        <A::Entity as EntityTrait>::Column::iter().filter(|c| !rows[0].is_not_set(*c)).collect();
    let values = |row: &A| -> Vec<Value> {
        columns
            .iter()
            .map(|c| match row.get(*c) {
                ActiveValue::Set(v) | ActiveValue::Unchanged(v) => v,
                // Set in the first row only: as sea-orm's insert, NULL.
                ActiveValue::NotSet => Value::String(None),
            })
            .collect()
    };
    let table = <A::Entity as Default>::default().table_name().to_owned();
    let names: Vec<&str> = columns.iter().map(sea_orm::IdenStatic::as_str).collect();
    let quoted = names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    let returned = returning.map(|c| format!(" RETURNING \"{}\"", sea_orm::IdenStatic::as_str(&c))).unwrap_or_default();
    let statement = if backend == DbBackend::Postgres {
        let records = rows.iter().map(|row| {
            let fields = names.iter().zip(values(row)).map(|(n, v)| ((*n).to_owned(), postgres_json(&v)));
            serde_json::Value::Object(fields.collect())
        });
        let sql = format!(
            "INSERT INTO \"{table}\" ({quoted}) SELECT {quoted} FROM jsonb_populate_recordset(NULL::\"{table}\", $1::jsonb){returned}"
        );
        Statement::from_sql_and_values(backend, sql, [serde_json::Value::Array(records.collect()).into()])
    } else {
        let values: Vec<Vec<Value>> = rows.iter().map(values).collect();
        match SqliteRows::of(&names, &values) {
            Some(r) => {
                let sql =
                    format!("INSERT INTO \"{table}\" ({quoted}) SELECT {} FROM jsonb_each(?){returned}", r.select);
                Statement::from_sql_and_values(backend, sql, [r.json.into()])
            }
            None => {
                let mut insert = <A::Entity as EntityTrait>::insert_many(rows).into_query();
                if let Some(c) = returning {
                    insert.returning_col(c);
                }
                backend.build(&insert)
            }
        }
    };
    if returning.is_some() {
        db.query_all_raw(statement).await
    } else {
        db.execute_raw(statement).await.map(|_| Vec::new())
    }
}

/// Rows for SQLite's `jsonb_each`: the JSON text of an array of rows (each an array of
/// values as SQLite stores them), and the select list that reads a row back as the columns
/// named, by position (`SELECT <select> FROM jsonb_each(?)`). `jsonb_each`, not
/// `json_each`: each row is then read as SQLite's binary JSON, parsed once with the whole
/// parameter, where `json_each` would render a row back to text for every column read from
/// it (a launch of 100 sessions took 2.7 ms more).
pub(crate) struct SqliteRows {
    pub(crate) json: String,
    pub(crate) select: String,
}

impl SqliteRows {
    /// `rows` of the columns `names`, each row's values in that order; none when a value
    /// cannot travel exactly as JSON.
    pub(crate) fn of(names: &[&str], rows: &[Vec<Value>]) -> Option<Self> {
        // A uuid or bytes column holds blobs whatever the row (its type, not its value).
        let blob: Vec<bool> = rows
            .first()
            .map(|r| r.iter().map(|v| matches!(v, Value::Uuid(_) | Value::Bytes(_))).collect())
            .unwrap_or_default();
        // The text written directly, without a tree of JSON values per row.
        let mut json = String::with_capacity(rows.len() * 64 * names.len().max(1));
        json.push('[');
        for (r, row) in rows.iter().enumerate() {
            json.push_str(if r == 0 { "[" } else { ",[" });
            for (i, v) in row.iter().enumerate() {
                if i > 0 {
                    json.push(',');
                }
                match bound(v)? {
                    Stored::Null => json.push_str("null"),
                    Stored::Integer(n) => write!(json, "{n}").ok()?,
                    Stored::Real(f) => write!(json, "{}", serde_json::Number::from_f64(f)?).ok()?,
                    Stored::Text(t) => json.push_str(&serde_json::to_string(&t).ok()?),
                    Stored::Blob(b) => {
                        json.push('"');
                        for byte in b {
                            write!(json, "{byte:02x}").ok()?;
                        }
                        json.push('"');
                    }
                }
            }
            json.push(']');
        }
        json.push(']');
        let select = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if blob.get(i).copied().unwrap_or(false) {
                    format!("unhex(value ->> {i}) AS \"{n}\"")
                } else {
                    format!("value ->> {i} AS \"{n}\"")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        Some(Self { json, select })
    }
}

/// A column's value as PostgreSQL reads it back from JSON: timestamps in RFC 3339 with
/// their microseconds, everything else as sea-query renders it.
fn postgres_json(v: &Value) -> serde_json::Value {
    match v {
        Value::ChronoDateTimeUtc(Some(t)) => serde_json::Value::String(t.to_rfc3339_opts(SecondsFormat::Micros, true)),
        other => sea_value_to_json_value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_travel_as_sqlite_stores_them_or_not_at_all() {
        let id = uuid::Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-03T04:05:06.5Z").expect("instant").to_utc();
        let rows = vec![
            vec![Value::from(id), Value::from("a \"b\"\n"), Value::from(true), Value::from(0.5), Value::from(at)],
            vec![Value::Uuid(None), Value::String(None), Value::from(false), Value::from(-2.0), Value::from(at)],
        ];
        let r = SqliteRows::of(&["id", "t", "b", "f", "at"], &rows).expect("all travel");
        assert_eq!(
            r.json,
            r#"[["0102030405060708090a0b0c0d0e0f10","a \"b\"\n",1,0.5,"2026-12-03T04:05:06.500+00:00"],[null,null,0,-2.0,"2026-12-03T04:05:06.500+00:00"]]"#
        );
        assert_eq!(
            r.select,
            r#"unhex(value ->> 0) AS "id", value ->> 1 AS "t", value ->> 2 AS "b", value ->> 3 AS "f", value ->> 4 AS "at""#
        );
        // JSON has no infinities: sea-orm's insert takes such rows.
        assert!(SqliteRows::of(&["f"], &[vec![Value::from(f64::INFINITY)]]).is_none());
    }
}

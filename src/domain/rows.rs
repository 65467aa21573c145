//! Inserting many rows in one statement whose text does not depend on how many.
//!
//! A multi-row `VALUES` list binds one parameter per column and row (a launch of 100
//! sessions: over 5 000) and is a statement of its own for each row count, planned again
//! each time. On PostgreSQL the rows go instead as one JSON parameter, expanded by
//! `jsonb_populate_recordset` into rows of the table's own type: one statement text per
//! table and column set, one parameter, whatever the count. SQLite keeps sea-orm's insert
//! (it binds cheaply, in-process).

use chrono::SecondsFormat;
use sea_orm::sea_query::sea_value_to_json_value;
use sea_orm::{
    ActiveModelTrait, ActiveValue, ConnectionTrait, DbBackend, DbErr, EntityName, EntityTrait, Iterable, QueryResult,
    QueryTrait, Statement, Value,
};

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
    if db.get_database_backend() != DbBackend::Postgres {
        let insert = <A::Entity as EntityTrait>::insert_many(rows);
        return match returning {
            None => insert.exec_without_returning(db).await.map(|_| Vec::new()),
            Some(column) => {
                let mut statement = insert.into_query();
                statement.returning_col(column);
                db.query_all_raw(db.get_database_backend().build(&statement)).await
            }
        };
    }
    let columns: Vec<<A::Entity as EntityTrait>::Column> =
        <A::Entity as EntityTrait>::Column::iter().filter(|c| !rows[0].is_not_set(*c)).collect();
    let records: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let fields = columns.iter().map(|c| {
                let value = match row.get(*c) {
                    ActiveValue::Set(v) | ActiveValue::Unchanged(v) => json(&v),
                    ActiveValue::NotSet => serde_json::Value::Null,
                };
                (sea_orm::IdenStatic::as_str(c).to_owned(), value)
            });
            serde_json::Value::Object(fields.collect())
        })
        .collect();
    let table = <A::Entity as Default>::default().table_name().to_owned();
    let names: Vec<String> = columns.iter().map(|c| format!("\"{}\"", sea_orm::IdenStatic::as_str(c))).collect();
    let names = names.join(", ");
    let returning =
        returning.map(|c| format!(" RETURNING \"{}\"", sea_orm::IdenStatic::as_str(&c))).unwrap_or_default();
    let sql = format!(
        "INSERT INTO \"{table}\" ({names}) SELECT {names} FROM jsonb_populate_recordset(NULL::\"{table}\", $1::jsonb){returning}"
    );
    let statement =
        Statement::from_sql_and_values(DbBackend::Postgres, sql, [serde_json::Value::Array(records).into()]);
    if returning.is_empty() {
        db.execute_raw(statement).await.map(|_| Vec::new())
    } else {
        db.query_all_raw(statement).await
    }
}

/// A column's value as PostgreSQL reads it back from JSON: timestamps in RFC 3339 with
/// their microseconds, everything else as sea-query renders it.
fn json(v: &Value) -> serde_json::Value {
    match v {
        Value::ChronoDateTimeUtc(Some(t)) => serde_json::Value::String(t.to_rfc3339_opts(SecondsFormat::Micros, true)),
        other => sea_value_to_json_value(other),
    }
}

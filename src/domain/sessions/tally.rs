//! The counts of a project's sessions by owner, type and status, kept by the database in
//! the transaction of every change of a session (the triggers of the `session_tallies`
//! migration): a count reads a few rows per owner of the project, however many sessions it
//! holds.
//!
//! Writers only add rows to `session_tally_changes`, so they never wait for each other;
//! [`fold`] moves those rows into `session_tallies` now and then. A count is the tallies
//! plus the changes not folded yet, read in one statement, so it is exact whether or not
//! the fold has run.

use std::time::Duration;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, Value};
use uuid::Uuid;

use crate::domain::DomainResult;
use crate::domain::model::SessionType;
use crate::domain::model::status::SessionStatus;

/// The sessions of one type in one status, and how many there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    pub session_type: SessionType,
    pub status: SessionStatus,
    pub n: u64,
}

/// How often [`fold_forever`] folds.
pub const FOLD_EVERY: Duration = Duration::from_secs(1);

/// The counts of `project`'s sessions (of `owner`'s only, if given) by type and status:
/// one statement over the tallies and the changes not folded yet. With them, how many rows
/// the statement read.
pub async fn read(db: &impl ConnectionTrait, project: Uuid, owner: Option<Uuid>) -> DomainResult<(Vec<Tally>, u64)> {
    let backend = db.get_database_backend();
    let mut values: Vec<Value> = Vec::new();
    let mut at = |v: Uuid| {
        values.push(v.into());
        match backend {
            DbBackend::Postgres => format!("${}", values.len()),
            _ => "?".to_owned(),
        }
    };
    let mut scope = |table: &str, column: &str| {
        let mut text =
            format!("SELECT session_type, status, {column} AS n FROM {table} WHERE project_id = {}", at(project));
        if let Some(owner) = owner {
            text.push_str(&format!(" AND owner_id = {}", at(owner)));
        }
        text
    };
    let tallies = scope("session_tallies", "n");
    let changes = scope("session_tally_changes", "delta");
    let sql = format!(
        "SELECT session_type, status, CAST(SUM(n) AS BIGINT) AS n, COUNT(*) AS read FROM ({tallies} UNION ALL {changes}) AS t \
         GROUP BY session_type, status"
    );
    let rows = db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
    let mut out = Vec::with_capacity(rows.len());
    let mut read = 0;
    for row in rows {
        read += row.try_get::<i64>("", "read")?.unsigned_abs();
        let n: i64 = row.try_get("", "n")?;
        if n <= 0 {
            continue;
        }
        let session_type = SessionType::stored(&row.try_get::<String>("", "session_type")?)?;
        let status = SessionStatus::stored(&row.try_get::<String>("", "status")?)?;
        out.push(Tally { session_type, status, n: n.unsigned_abs() });
    }
    Ok((out, read))
}

/// Moves the changes written so far into the tallies, in one transaction (none when there
/// are none): what is taken
/// from the changes is exactly what is added to the tallies. Safe on several replicas at
/// once (each change is taken once; the tallies are written in one order).
pub async fn fold(db: &DatabaseConnection) -> DomainResult<()> {
    const KEY: &str = "project_id, owner_id, session_type, status";
    const ADD: &str = "ON CONFLICT (project_id, owner_id, session_type, status) \
                       DO UPDATE SET n = session_tallies.n + excluded.n";
    let backend = db.get_database_backend();
    // Nothing written since the last fold (an idle server): no write lock, no statement more.
    let pending = Statement::from_string(backend, "SELECT 1 AS one FROM session_tally_changes LIMIT 1");
    if db.query_one_raw(pending).await?.is_none() {
        return Ok(());
    }
    let txn = crate::domain::begin_write(db).await?;
    match backend {
        // The rows deleted are the rows added: one statement, whatever commits meanwhile.
        DbBackend::Postgres => {
            txn.execute_unprepared(&format!(
                "WITH taken AS (DELETE FROM session_tally_changes RETURNING {KEY}, delta) \
                 INSERT INTO session_tallies ({KEY}, n) SELECT {KEY}, SUM(delta) FROM taken \
                 GROUP BY {KEY} ORDER BY {KEY} {ADD}"
            ))
            .await?;
        }
        // The write lock is taken at the start (`BEGIN IMMEDIATE`): the second statement
        // deletes what the first read.
        _ => {
            txn.execute_unprepared(&format!(
                "INSERT INTO session_tallies ({KEY}, n) SELECT {KEY}, SUM(delta) FROM session_tally_changes \
                 WHERE true GROUP BY {KEY} {ADD}"
            ))
            .await?;
            txn.execute_unprepared("DELETE FROM session_tally_changes").await?;
        }
    }
    txn.execute_unprepared("DELETE FROM session_tallies WHERE n = 0").await?;
    txn.commit().await?;
    Ok(())
}

/// Folds every [`FOLD_EVERY`] until the task is aborted.
pub async fn fold_forever(db: DatabaseConnection) {
    let mut every = tokio::time::interval(FOLD_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(e) = fold(&db).await {
            tracing::warn!(error = ?e, "folding the session tallies failed; trying again");
        }
    }
}

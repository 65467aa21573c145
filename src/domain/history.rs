//! Scheduling history: one row per decision about a session. A decision that repeats the
//! last one (same phase, error code and target status) is merged into it: attempts + 1,
//! `updated_at` bumped, the latest message and sub-steps kept.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{ActiveValue::NotSet, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use serde_json::Value;
use uuid::Uuid;

use entity::scheduling_history as history;

use super::DomainResult;
use super::status::SessionStatus;

/// One decision to record.
#[derive(Clone, Debug)]
pub struct Entry {
    pub session_id: Uuid,
    /// `enqueue`, `schedule`, `prepare`, `start`, `terminate`, `timeout`, `error`.
    pub phase: &'static str,
    pub from: Option<SessionStatus>,
    pub to: Option<SessionStatus>,
    /// `SUCCESS`, `FAILURE`, `NEED_RETRY`, `EXPIRED`, `GIVE_UP`, `SKIPPED`.
    pub result: &'static str,
    pub error_code: Option<String>,
    pub message: String,
    pub sub_steps: Value,
}

/// Records `entries` (at most one per session), merging repeats into the last row.
pub async fn record(db: &impl ConnectionTrait, entries: Vec<Entry>, now: DateTime<Utc>) -> DomainResult<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = entries.iter().map(|e| e.session_id).collect();
    // The last row of each session, in one statement.
    let latest = Query::select()
        .expr(Expr::col(history::Column::Id).max())
        .from(history::Entity)
        .and_where(history::Column::SessionId.is_in(ids))
        .group_by_col(history::Column::SessionId)
        .take();
    let last: HashMap<Uuid, history::Model> = history::Entity::find()
        .filter(history::Column::Id.in_subquery(latest))
        .all(db)
        .await?
        .into_iter()
        .map(|h| (h.session_id, h))
        .collect();
    let mut inserts = Vec::new();
    for e in entries {
        let to = e.to.map(|s| s.as_str().to_owned());
        match last.get(&e.session_id) {
            Some(prev) if prev.phase == e.phase && prev.error_code == e.error_code && prev.to_status == to => {
                history::Entity::update_many()
                    .col_expr(history::Column::Attempts, Expr::col(history::Column::Attempts).add(1))
                    .col_expr(history::Column::UpdatedAt, Expr::value(now))
                    .col_expr(history::Column::Message, Expr::value(e.message))
                    .col_expr(history::Column::SubSteps, Expr::value(e.sub_steps))
                    .col_expr(history::Column::Result, Expr::value(e.result))
                    .filter(history::Column::Id.eq(prev.id))
                    .exec(db)
                    .await?;
            }
            _ => inserts.push(history::ActiveModel {
                id: NotSet,
                session_id: Set(e.session_id),
                phase: Set(e.phase.to_owned()),
                from_status: Set(e.from.map(|s| s.as_str().to_owned())),
                to_status: Set(to),
                result: Set(e.result.to_owned()),
                error_code: Set(e.error_code),
                message: Set(e.message),
                sub_steps: Set(e.sub_steps),
                attempts: Set(1),
                created_at: Set(now),
                updated_at: Set(now),
            }),
        }
    }
    if !inserts.is_empty() {
        history::Entity::insert_many(inserts).exec_without_returning(db).await?;
    }
    Ok(())
}

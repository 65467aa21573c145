//! Scheduling history: one row per decision about a session. A decision that repeats the
//! last one (same phase, error code and target status) is merged into it: attempts + 1,
//! `updated_at` bumped, the latest message and sub-steps kept. Past [`MERGE_ANY_PAST`]
//! lines, a repeating decision merges into the last line of its phase and target status
//! whatever its code, so however long a session waits, and however its reasons alternate,
//! its history stays bounded. (The scheduler writes a waiting session's line only when its
//! reasons change: a pass that changes nothing writes nothing.)

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Query};
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, ConnectionTrait, EntityTrait, Order, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::scheduling_history as history;

use super::DomainResult;
use super::actor::Actor;
use super::model::string_enum;
use super::paging::{Page, PageRequest};
use super::status::SessionStatus;

string_enum!(
    /// How a scheduling decision (or one of its checks) came out.
    SchedulingResult {
        Success = "SUCCESS",
        Failure = "FAILURE",
        NeedRetry = "NEED_RETRY",
        Expired = "EXPIRED",
        GiveUp = "GIVE_UP",
        Skipped = "SKIPPED",
    }
);

/// One check within a decision, as stored in the entry's `sub_steps`.
#[derive(Clone, Debug, PartialEq)]
pub struct SubStep {
    pub name: String,
    pub result: SchedulingResult,
    pub error_code: Option<String>,
    pub message: Option<String>,
    pub duration_ms: Option<f64>,
}

impl SubStep {
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "result": self.result.as_str(),
            "errorCode": self.error_code,
            "message": self.message,
            "durationMs": self.duration_ms,
        })
    }

    /// The sub-steps stored with an entry; malformed ones are left out.
    pub fn list_from_json(stored: &Value) -> Vec<SubStep> {
        stored
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                Some(SubStep {
                    name: s.get("name")?.as_str()?.to_owned(),
                    result: SchedulingResult::parse(s.get("result")?.as_str()?)?,
                    error_code: s.get("errorCode").and_then(|v| v.as_str()).map(str::to_owned),
                    message: s.get("message").and_then(|v| v.as_str()).map(str::to_owned),
                    duration_ms: s.get("durationMs").and_then(|v| v.as_f64()),
                })
            })
            .collect()
    }
}

/// A page of one session's history, newest first, with the number of entries in all.
pub struct HistoryPage {
    /// Each entry with its position (its id).
    pub page: Page<history::Model>,
    pub total: u64,
}

/// One page of the history of a session the caller may see (visibility is checked by
/// whoever found the session), newest first; positions are entry ids.
pub async fn page(
    db: &impl ConnectionTrait,
    session_id: Uuid,
    request: &PageRequest<i64>,
) -> DomainResult<HistoryPage> {
    let base = history::Entity::find().filter(history::Column::SessionId.eq(session_id));
    let total = base.clone().count(db).await?;
    // Newest first; reading backwards walks oldest first and the page is flipped back.
    let mut query = base
        .order_by(history::Column::Id, if request.backward { Order::Asc } else { Order::Desc })
        .limit(request.fetch_limit());
    if let Some(id) = request.after {
        query = query.filter(history::Column::Id.lt(id));
    }
    if let Some(id) = request.before {
        query = query.filter(history::Column::Id.gt(id));
    }
    Ok(HistoryPage { page: request.finish(query.all(db).await?), total })
}

/// One decision to record.
#[derive(Clone, Debug)]
pub struct Entry {
    pub session_id: Uuid,
    /// `enqueue`, `schedule`, `prepare`, `start`, `terminate`, `timeout`, `error`.
    pub phase: &'static str,
    pub from: Option<SessionStatus>,
    pub to: Option<SessionStatus>,
    pub result: SchedulingResult,
    pub error_code: Option<String>,
    pub message: String,
    pub sub_steps: Value,
    /// Whether the same decision again (phase, error and target status) merges into the
    /// session's last line, counting attempts (a scheduler retrying), rather than adding one:
    /// so a session's history stays bounded however long it waits.
    pub repeats: bool,
    /// Who made the decision.
    pub actor: Actor,
}

impl Entry {
    /// A line of session `session_id`'s history that changes no status (an extension, a
    /// warning, an exemption): a success, with its words.
    pub fn note(session_id: Uuid, phase: &'static str, message: String, actor: Actor) -> Self {
        Self {
            session_id,
            phase,
            from: None,
            to: None,
            result: SchedulingResult::Success,
            error_code: None,
            message,
            sub_steps: Value::Array(Vec::new()),
            // Each note says who did what: none stands for another.
            repeats: false,
            actor,
        }
    }
}

/// Lines a session's history holds before a repeating decision merges into the last line
/// of its phase and target status whatever its error code.
pub const MERGE_ANY_PAST: i64 = 16;

/// The most sessions one round of [`record`] reads the last lines of (an `IN` list of their
/// ids: SQLite binds at most 32 766 values in a statement).
const SESSIONS_PER_ROUND: usize = 4096;

/// Records `entries` (at most one per session), merging repeats into the last row
/// ([`Entry::repeats`], [`MERGE_ANY_PAST`]).
pub async fn record(db: &impl ConnectionTrait, mut entries: Vec<Entry>, now: DateTime<Utc>) -> DomainResult<()> {
    while entries.len() > SESSIONS_PER_ROUND {
        let rest = entries.split_off(SESSIONS_PER_ROUND);
        record_round(db, std::mem::replace(&mut entries, rest), now).await?;
    }
    record_round(db, entries, now).await
}

async fn record_round(db: &impl ConnectionTrait, entries: Vec<Entry>, now: DateTime<Utc>) -> DomainResult<()> {
    use sea_orm::FromQueryResult;
    use sea_orm::sea_query::{Alias, Asterisk, JoinType};
    if entries.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = entries.iter().map(|e| e.session_id).collect();
    // The last row of each session and how many it has, in one statement.
    let (last_id, lines, c) = (Alias::new("last_id"), Alias::new("lines"), Alias::new("c"));
    let latest = Query::select()
        .column(history::Column::SessionId)
        .expr_as(Expr::col(history::Column::Id).max(), last_id.clone())
        .expr_as(Expr::col(history::Column::Id).count(), lines.clone())
        .from(history::Entity)
        .and_where(history::Column::SessionId.is_in(super::padded(ids)))
        .group_by_col(history::Column::SessionId)
        .take();
    let select = Query::select()
        .column((history::Entity, Asterisk))
        .expr_as(Expr::col((c.clone(), lines.clone())), lines)
        .from(history::Entity)
        .join_subquery(
            JoinType::InnerJoin,
            latest,
            c.clone(),
            Expr::col((history::Entity, history::Column::Id)).equals((c, last_id)),
        )
        .take();
    let mut last: HashMap<Uuid, (history::Model, i64)> = HashMap::new();
    for row in db.query_all_raw(db.get_database_backend().build(&select)).await? {
        let h = history::Model::from_query_result(&row, "")?;
        let n: i64 = row.try_get("", "lines")?;
        last.insert(h.session_id, (h, n));
    }
    let mut inserts = Vec::new();
    for e in entries {
        let to = e.to.map(|s| s.as_str().to_owned());
        match last.get(&e.session_id) {
            Some((prev, lines))
                if e.repeats
                    && prev.phase == e.phase
                    && prev.to_status == to
                    && (prev.error_code == e.error_code || *lines >= MERGE_ANY_PAST) =>
            {
                history::Entity::update_many()
                    .col_expr(history::Column::Attempts, Expr::col(history::Column::Attempts).add(1))
                    .col_expr(history::Column::UpdatedAt, Expr::value(now))
                    .col_expr(history::Column::ErrorCode, Expr::value(e.error_code))
                    .col_expr(history::Column::Message, Expr::value(e.message))
                    .col_expr(history::Column::SubSteps, Expr::value(e.sub_steps))
                    .col_expr(history::Column::Result, Expr::value(e.result.as_str()))
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
                result: Set(e.result.as_str().to_owned()),
                error_code: Set(e.error_code),
                message: Set(e.message),
                sub_steps: Set(e.sub_steps),
                attempts: Set(1),
                created_at: Set(now),
                updated_at: Set(now),
                actor_user_id: Set(e.actor.user_id()),
                actor_rule: Set(e.actor.rule()),
            }),
        }
    }
    // One statement of one parameter whatever the count.
    super::rows::insert_all(db, inserts, None).await?;
    Ok(())
}

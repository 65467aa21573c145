//! Scheduling history: one row per decision about a session. A decision that repeats the
//! last one (same phase, error code and target status) is merged into it: attempts + 1,
//! `updated_at` bumped, the latest message and sub-steps kept. Past [`MERGE_ANY_PAST`]
//! lines, a repeating decision merges into the last line of its phase and target status
//! whatever its code, so however long a session waits, and however its reasons alternate,
//! its history stays bounded.
//!
//! A waiting session's line is written only when its reasons change: a pass that changes
//! nothing writes no line. Its attempts are counted all the same: the line keeps the number
//! of the pass that wrote it (`pass`), each resource group counts its passes
//! (`scheduler_passes`, moved once per pass), and the passes since are attempts of the same
//! decision ([`counted`]). When the line stops counting (a new decision, or the session
//! leaves PENDING) the count is kept in the line ([`stop_counting`]).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, ConnectionTrait, EntityTrait, Order, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::scheduling_history as history;

use crate::domain::model::actor::Actor;
use crate::domain::model::status::SessionStatus;
use crate::domain::model::string_enum;
use crate::domain::store::paging::{Page, PageRequest};
use crate::domain::{DomainError, DomainResult};

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
    let mut page = request.finish(query.all(db).await?);
    if page.rows.iter().any(|line| line.pass.is_some()) {
        let passes = passes_of(db, session_id).await?;
        for line in &mut page.rows {
            counted(line, passes.as_ref());
        }
    }
    Ok(HistoryPage { page, total })
}

/// History entry `id` if the viewer may see its session, else NOT_FOUND (exactly as for no
/// entry), counted as a page of its session's history counts it.
pub async fn visible_entry(
    db: &impl ConnectionTrait,
    viewer: &crate::domain::directory::auth::Viewer,
    id: i64,
) -> DomainResult<history::Model> {
    let Some(mut line) = history::Entity::find_by_id(id).one(db).await? else {
        return Err(DomainError::NotFound("scheduling history entry"));
    };
    match crate::domain::sessions::visibility::visible_session(db, viewer, line.session_id).await {
        Ok(_) => {}
        Err(DomainError::NotFound(_)) => return Err(DomainError::NotFound("scheduling history entry")),
        Err(e) => return Err(e),
    }
    if line.pass.is_some() {
        let passes = passes_of(db, line.session_id).await?;
        counted(&mut line, passes.as_ref());
    }
    Ok(line)
}

/// Where the scheduling passes of a session's resource group stand: how many have run, and
/// when the last one did; `None` unless the session still waits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Passes {
    pub completed: i64,
    pub last_at: Option<DateTime<Utc>>,
}

/// The passes of session `session_id`'s resource group, if it is PENDING (one statement).
async fn passes_of(db: &impl ConnectionTrait, session_id: Uuid) -> DomainResult<Option<Passes>> {
    let select = Query::select()
        .column((Alias::new("sp"), Alias::new("passes")))
        .column((Alias::new("sp"), Alias::new("last_pass_at")))
        .from_as(entity::session::Entity, Alias::new("s"))
        .join_as(
            sea_orm::sea_query::JoinType::InnerJoin,
            Alias::new(PASSES_TABLE),
            Alias::new("sp"),
            Expr::col((Alias::new("sp"), Alias::new("resource_group")))
                .equals((Alias::new("s"), entity::session::Column::ResourceGroup)),
        )
        .and_where(Expr::col((Alias::new("s"), entity::session::Column::Id)).eq(session_id))
        .and_where(Expr::col((Alias::new("s"), entity::session::Column::Status)).eq(SessionStatus::Pending.as_str()))
        .take();
    let Some(row) = db.query_one_raw(db.get_database_backend().build(&select)).await? else { return Ok(None) };
    Ok(Some(Passes { completed: row.try_get("", "passes")?, last_at: row.try_get("", "last_pass_at")? }))
}

/// `line` as it counts now: a line that still counts (its session waits on its decision)
/// has one more attempt for each pass of its group since the pass that wrote it, the last
/// of them its last try. A line whose session no longer waits counts no more.
pub fn counted(line: &mut history::Model, passes: Option<&Passes>) {
    let (Some(written), Some(passes)) = (line.pass, passes) else { return };
    if passes.completed > written {
        let since = i32::try_from(passes.completed - written).unwrap_or(i32::MAX);
        line.attempts = line.attempts.saturating_add(since);
        line.last_tried_at = passes.last_at.or(line.last_tried_at);
    }
}

/// The table of each resource group's scheduling passes (`passes`, `last_pass_at`).
pub const PASSES_TABLE: &str = "scheduler_passes";

/// How many scheduling passes each resource group has completed (a group not listed: none).
pub async fn passes_completed(db: &impl ConnectionTrait) -> DomainResult<HashMap<String, i64>> {
    let select = Query::select()
        .columns([Alias::new("resource_group"), Alias::new("passes")])
        .from(Alias::new(PASSES_TABLE))
        .take();
    let rows = db.query_all_raw(db.get_database_backend().build(&select)).await?;
    rows.iter().map(|r| Ok((r.try_get("", "resource_group")?, r.try_get("", "passes")?))).collect()
}

/// Counts a pass of every resource group, ending at `now`: the last statement of a pass
/// before its status changes, one row per group whatever the queue.
pub async fn count_pass(db: &impl ConnectionTrait, now: DateTime<Utc>) -> DomainResult<()> {
    use sea_orm::sea_query::OnConflict;
    let (group, passes, last_at) = (Alias::new("resource_group"), Alias::new("passes"), Alias::new("last_pass_at"));
    let every_group = Query::select()
        .column(entity::resource_group::Column::Name)
        .expr(Expr::val(1_i64))
        .expr(Expr::val(now))
        .from(entity::resource_group::Entity)
        // SQLite reads `ON CONFLICT` after a SELECT without WHERE as a join's ON.
        .and_where(Expr::cust("TRUE"))
        .take();
    let insert = Query::insert()
        .into_table(Alias::new(PASSES_TABLE))
        .columns([group.clone(), passes.clone(), last_at.clone()])
        .select_from(every_group)
        .map_err(crate::domain::DomainError::internal)?
        .on_conflict(
            OnConflict::column(group)
                .value(passes, Expr::cust(format!("{PASSES_TABLE}.passes + 1")))
                .update_column(last_at)
                .to_owned(),
        )
        .take();
    db.execute_raw(db.get_database_backend().build(&insert)).await?;
    Ok(())
}

/// Stops the counting lines of `sessions` (those that leave PENDING, or wait on a new
/// decision): each keeps the attempts and the last try counted so far. One statement per
/// [`SESSIONS_PER_ROUND`] sessions; none for none.
pub async fn stop_counting(db: &impl ConnectionTrait, sessions: &[Uuid]) -> DomainResult<()> {
    // The passes of the line's session's group, read in the statement: the group's counter
    // is moved only at the end of a pass, so inside one it still says the passes before it.
    let completed = format!(
        "(SELECT sp.passes FROM sessions s JOIN {PASSES_TABLE} sp ON sp.resource_group = s.resource_group \
         WHERE s.id = scheduling_history.session_id)"
    );
    let last_at = format!(
        "(SELECT sp.last_pass_at FROM sessions s JOIN {PASSES_TABLE} sp ON sp.resource_group = s.resource_group \
         WHERE s.id = scheduling_history.session_id)"
    );
    for ids in sessions.chunks(SESSIONS_PER_ROUND) {
        let update = Query::update()
            .table(history::Entity)
            .value(
                history::Column::Attempts,
                Expr::cust(format!("attempts + COALESCE(CASE WHEN {completed} > pass THEN {completed} - pass END, 0)")),
            )
            .value(
                history::Column::LastTriedAt,
                Expr::cust(format!("CASE WHEN {completed} > pass THEN {last_at} ELSE last_tried_at END")),
            )
            .value(history::Column::Pass, Expr::value(Option::<i64>::None))
            .and_where(history::Column::Pass.is_not_null())
            .and_where(history::Column::SessionId.is_in(crate::domain::padded(ids.iter().copied())))
            .take();
        db.execute_raw(db.get_database_backend().build(&update)).await?;
    }
    Ok(())
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
    /// For a decision that a session still waits, the number of the scheduling pass that
    /// made it: the line then counts that pass's successors as attempts while it waits.
    pub pass: Option<i64>,
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
            pass: None,
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
    use sea_orm::sea_query::{Asterisk, JoinType};
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
        .and_where(history::Column::SessionId.is_in(crate::domain::padded(ids)))
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
    let mut superseded = Vec::new();
    for e in entries {
        let to = e.to.map(|s| s.as_str().to_owned());
        match last.get(&e.session_id) {
            Some((prev, lines))
                if e.repeats
                    && prev.phase == e.phase
                    && prev.to_status == to
                    && (prev.error_code == e.error_code || *lines >= MERGE_ANY_PAST) =>
            {
                // A line that still counted: the passes it waited through, this one included.
                let more = match (prev.pass, e.pass) {
                    (Some(written), Some(now_at)) => i32::try_from(Ord::max(now_at - written, 1)).unwrap_or(i32::MAX),
                    _ => 1,
                };
                history::Entity::update_many()
                    .col_expr(history::Column::Attempts, Expr::col(history::Column::Attempts).add(more))
                    .col_expr(history::Column::Pass, Expr::value(e.pass))
                    .col_expr(history::Column::LastTriedAt, Expr::value(Option::<DateTime<Utc>>::None))
                    .col_expr(history::Column::UpdatedAt, Expr::value(now))
                    .col_expr(history::Column::ErrorCode, Expr::value(e.error_code))
                    .col_expr(history::Column::Message, Expr::value(e.message))
                    .col_expr(history::Column::SubSteps, Expr::value(e.sub_steps))
                    .col_expr(history::Column::Result, Expr::value(e.result.as_str()))
                    .filter(history::Column::Id.eq(prev.id))
                    .exec(db)
                    .await?;
            }
            _ => {
                if e.pass.is_some() {
                    // A new decision it waits on: the one before stops counting.
                    superseded.push(e.session_id);
                }
                inserts.push(history::ActiveModel {
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
                    pass: Set(e.pass),
                    last_tried_at: Set(None),
                });
            }
        }
    }
    stop_counting(db, &superseded).await?;
    // One statement of one parameter whatever the count.
    crate::domain::store::rows::insert_all(db, inserts, None).await?;
    Ok(())
}

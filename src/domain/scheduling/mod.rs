//! The scheduling pass around the pure core: load a snapshot, cancel sessions pending past
//! their group's timeout, decide (in [`crate::domain::scheduling::planner`]), and apply every decision of the
//! pass in one transaction, with history rows; events are published after the commit. On
//! PostgreSQL only one replica schedules at a time (a transaction-scoped advisory lock).
//! What a pass reads (the waiting sessions, the snapshot, counts per group) is [`read`].

use std::collections::HashMap;
use std::time::Duration;

use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter, Statement};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{resource_group, session};

use crate::domain::lifecycle::history::{self, Entry, SchedulingResult, SubStep};
use crate::domain::lifecycle::{self, Change};
use crate::domain::live::events::EventBus;
use crate::domain::model::actor::{Actor, rules};
use crate::domain::model::status::SessionStatus;
use crate::domain::sessions::occupancy::{PendingReason, reasons_digest};
use crate::domain::store::inline::InlineReads;
use crate::domain::{DomainResult, model::clock};
use dependencies::Standing;
use planner::{Check, Outcome, PendingSession};
use read::{Waiting, load_snapshot, waiting};

pub mod dependencies;
pub mod planner;
mod read;

pub use read::pending_by_group;

/// The advisory lock key of the scheduler ("sessiond" in ASCII, folded).
const SCHEDULER_LOCK: i64 = 0x7365_7373_696f_6e64;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    pub scheduled: usize,
    pub waiting: usize,
    pub timed_out: usize,
    /// Another replica held the lock: nothing was done.
    pub skipped: bool,
}

fn sub_steps(checks: &[Check]) -> Value {
    Value::Array(
        checks
            .iter()
            .map(|c| {
                SubStep {
                    name: c.name.to_owned(),
                    result: if c.failures.is_empty() { SchedulingResult::Success } else { SchedulingResult::Failure },
                    error_code: c.failures.first().map(|f| f.code.to_owned()),
                    message: (!c.failures.is_empty())
                        .then(|| c.failures.iter().map(|f| f.message.as_str()).collect::<Vec<_>>().join("; ")),
                    duration_ms: None,
                }
                .to_json()
            })
            .collect(),
    )
}

/// Why a session set to start at `at` waits: NOT_YET.
pub fn not_yet(at: chrono::DateTime<chrono::Utc>) -> PendingReason {
    PendingReason {
        code: "NOT_YET",
        message: format!("set to start at {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        layer: None,
        slot: None,
        requested: None,
        remaining: None,
    }
}

/// The history line of a session that still waits, and why, written by pass number `pass`
/// of its group: the passes after it count as attempts while the session waits on it.
fn wait_line(session_id: Uuid, reasons: &[PendingReason], sub_steps: Value, pass: i64) -> Entry {
    Entry {
        session_id,
        phase: "schedule",
        from: Some(SessionStatus::Pending),
        to: Some(SessionStatus::Pending),
        result: SchedulingResult::NeedRetry,
        error_code: reasons.first().map(|r| r.code.to_owned()),
        message: reasons.iter().map(|r| r.message.as_str()).collect::<Vec<_>>().join("; "),
        sub_steps,
        repeats: true,
        actor: Actor::system(rules::SCHEDULER),
        pass: Some(pass),
    }
}

/// Why a session waits for others to succeed: DEPENDENCY, naming them.
pub fn dependency(names: &[String]) -> PendingReason {
    PendingReason {
        code: "DEPENDENCY",
        message: format!("waiting for {} to succeed", names.join(", ")),
        layer: None,
        slot: None,
        requested: None,
        remaining: None,
    }
}

/// One pass over every resource group.
pub async fn pass(db: &DatabaseConnection, bus: &EventBus) -> DomainResult<PassReport> {
    pass_reading(db, None, bus).await
}

/// [`pass`], the waiting sessions read through `inline` when it is given (SQLite: one
/// hand-off for 100 000 rows instead of a copy of each value across threads).
pub async fn pass_reading(
    db: &DatabaseConnection,
    inline: Option<&InlineReads>,
    bus: &EventBus,
) -> DomainResult<PassReport> {
    let now = clock::now();
    // Nothing pending: nothing to decide, and no write lock to take.
    let any: Option<Uuid> = {
        use sea_orm::QuerySelect;
        session::Entity::find()
            .select_only()
            .column(session::Column::Id)
            .filter(session::Column::Status.eq(SessionStatus::Pending.as_str()))
            .into_tuple()
            .one(db)
            .await?
    };
    if any.is_none() {
        return Ok(PassReport::default());
    }
    let txn = crate::domain::begin_write(db).await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        let row = txn
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_try_advisory_xact_lock($1) AS locked",
                [SCHEDULER_LOCK.into()],
            ))
            .await?;
        let locked: bool = row.map(|r| r.try_get("", "locked")).transpose()?.unwrap_or(false);
        if !locked {
            return Ok(PassReport { skipped: true, ..Default::default() });
        }
    }
    let groups = resource_group::Entity::find().all(&txn).await?;
    // This pass's number in each group: what the waiting sessions' lines count from.
    let completed = history::passes_completed(&txn).await?;
    let pass_of = |group: &str| completed.get(group).copied().unwrap_or(0) + 1;
    let pending = waiting(&txn, inline, None).await?;

    // Pending too long: cancelled.
    let timeouts: HashMap<&str, i64> = groups
        .iter()
        .filter_map(|g| g.pending_timeout_seconds.filter(|t| *t > 0).map(|t| (g.name.as_str(), t)))
        .collect();
    let (expired, pending): (Vec<_>, Vec<_>) = pending.into_iter().partition(|s| {
        timeouts.get(s.resource_group.as_str()).is_some_and(|t| (now - s.created_at).num_seconds() >= *t)
    });
    let mut report = PassReport::default();
    // Entries of status changes are recorded only for the changes that happen.
    let mut change_entries: HashMap<Uuid, Entry> = HashMap::new();
    let mut entries = Vec::new();
    // The status changes to make: read whole (in one statement) once all are known.
    let mut changes: Vec<Planned> = Vec::new();
    let mut waits = Vec::new();
    for s in expired {
        change_entries.insert(
            s.id,
            Entry {
                session_id: s.id,
                phase: "timeout",
                from: Some(SessionStatus::Pending),
                to: Some(SessionStatus::Cancelled),
                result: SchedulingResult::Expired,
                error_code: Some("PENDING_TIMEOUT".into()),
                message: format!("pending longer than the pending timeout of resource group `{}`", s.resource_group),
                sub_steps: json!([]),
                repeats: true,
                actor: Actor::system(rules::PENDING_TIMEOUT),
                pass: None,
            },
        );
        changes.push(Planned {
            id: s.id,
            to: SessionStatus::Cancelled,
            reason: Some("PENDING_TIMEOUT".to_owned()),
            actor: Actor::system(rules::PENDING_TIMEOUT),
            agent: None,
        });
    }

    // A dependency failed: cancelled. One still running: waits, as does a session with a
    // later start time, without a place in the queue.
    let waits_for = dependencies::of_pending(&txn).await?;
    let mut unmet: HashMap<Uuid, Vec<String>> = HashMap::new();
    let mut ready = Vec::with_capacity(pending.len());
    for s in pending {
        match waits_for.get(&s.id).map(|d| dependencies::standing(d)).transpose()? {
            Some(Standing::Failed(name)) => {
                let reason = format!("dependency failed: {name}");
                change_entries.insert(
                    s.id,
                    Entry {
                        session_id: s.id,
                        phase: "dependency",
                        from: Some(SessionStatus::Pending),
                        to: Some(SessionStatus::Cancelled),
                        result: SchedulingResult::Failure,
                        error_code: Some("DEPENDENCY_FAILED".into()),
                        message: format!("{name}, which it waited for, ended without success"),
                        sub_steps: json!([]),
                        repeats: true,
                        actor: Actor::system(rules::DEPENDENCY),
                        pass: None,
                    },
                );
                changes.push(Planned {
                    id: s.id,
                    to: SessionStatus::Cancelled,
                    reason: Some(reason),
                    actor: Actor::system(rules::DEPENDENCY),
                    agent: None,
                });
            }
            Some(Standing::Waiting(names)) => {
                unmet.insert(s.id, names);
                ready.push(s);
            }
            Some(Standing::Met) | None => ready.push(s),
        }
    }
    let (held, pending): (Vec<_>, Vec<_>) =
        ready.into_iter().partition(|s| s.starts_at.is_some_and(|t| t > now) || unmet.contains_key(&s.id));
    for s in &held {
        report.waiting += 1;
        let reason = match (s.starts_at.filter(|t| *t > now), unmet.get(&s.id)) {
            (Some(at), _) => not_yet(at),
            (None, names) => dependency(names.map(Vec::as_slice).unwrap_or_default()),
        };
        let reasons = [reason];
        let at = Place { position: None, pass: pass_of(&s.resource_group) };
        still_waits(s, &reasons, reasons_digest(&reasons), || json!([]), at, &mut entries, &mut waits);
    }

    let snapshot = load_snapshot(&txn, &groups, &pending, Vec::new()).await?;
    let decisions = planner::schedule(&snapshot);
    let by_id: HashMap<Uuid, &Waiting> = pending.iter().map(|s| (s.id, s)).collect();
    for d in decisions {
        let Some(s) = by_id.get(&d.session) else { continue };
        match d.outcome {
            Outcome::Schedule { agents } => {
                change_entries.insert(
                    s.id,
                    Entry {
                        session_id: s.id,
                        phase: "schedule",
                        from: Some(SessionStatus::Pending),
                        to: Some(SessionStatus::Scheduled),
                        result: SchedulingResult::Success,
                        error_code: None,
                        message: format!("scheduled on agent {}", agents.join(", ")),
                        sub_steps: sub_steps(&d.checks),
                        repeats: true,
                        actor: Actor::system(rules::SCHEDULER),
                        pass: None,
                    },
                );
                changes.push(Planned {
                    id: s.id,
                    to: SessionStatus::Scheduled,
                    reason: None,
                    actor: Actor::system(rules::SCHEDULER),
                    agent: agents.first().cloned(),
                });
            }
            Outcome::Wait { reasons, position } => {
                report.waiting += 1;
                let position = i32::try_from(position).ok();
                let (digest, reasons) = (reasons.digest, &reasons.reasons);
                let at = Place { position, pass: pass_of(&s.resource_group) };
                still_waits(s, reasons, digest, || sub_steps(&d.checks), at, &mut entries, &mut waits);
            }
        }
    }
    write_waits(&txn, waits).await?;
    let changes = whole(&txn, changes).await?;
    let mut transitions = lifecycle::Transitions::default();
    let applied = lifecycle::apply(&txn, changes, now, &mut transitions).await?;
    for a in applied {
        if let lifecycle::Applied::Changed(s) = a {
            if s.status == SessionStatus::Scheduled.as_str() {
                report.scheduled += 1;
            } else {
                report.timed_out += 1;
            }
            entries.extend(change_entries.remove(&s.id));
        }
    }
    history::record(&txn, entries, now).await?;
    history::count_pass(&txn, now).await?;
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(report)
}

/// A waiting session's reasons stored with their digest ([`PendingReason::stored`]), and its
/// place in the queue: what the pass, and an engine for the sessions waiting in it, write.
pub(crate) type Wait = (Uuid, (Value, i64), Option<i32>);

/// Where a waiting session stands in a pass: its place in the queue, and the pass's number
/// in its group.
struct Place {
    position: Option<i32>,
    pass: i64,
}

/// `s` waits, for `reasons` (of `digest`), at `at`: what did not change is not written (no
/// row, no line of history). The stored digest says whether the reasons
/// changed, without reading or building any JSON; the line of history (its sub-steps built
/// only then) is written only when they did, the row when they or the place did.
fn still_waits(
    s: &Waiting,
    reasons: &[PendingReason],
    digest: i64,
    sub_steps: impl FnOnce() -> Value,
    at: Place,
    entries: &mut Vec<Entry>,
    waits: &mut Vec<Wait>,
) {
    let changed = s.pending_digest != digest;
    if changed {
        entries.push(wait_line(s.id, reasons, sub_steps(), at.pass));
    }
    if changed || s.queue_position != at.position {
        waits.push((s.id, (PendingReason::list_to_json(reasons), digest), at.position));
    }
}

/// A status change the pass will make.
struct Planned {
    id: Uuid,
    to: SessionStatus,
    reason: Option<String>,
    actor: Actor,
    agent: Option<String>,
}

/// The most sessions read whole in one statement (SQLite binds at most 32 766 values).
const WHOLE_PER_STATEMENT: usize = 4096;

/// The changes `planned`, each with its session read whole: one statement per
/// [`WHOLE_PER_STATEMENT`] sessions, none when nothing changes.
async fn whole(db: &impl ConnectionTrait, planned: Vec<Planned>) -> DomainResult<Vec<Change>> {
    let mut sessions: HashMap<Uuid, session::Model> = HashMap::with_capacity(planned.len());
    for ids in planned.chunks(WHOLE_PER_STATEMENT) {
        let ids = crate::domain::padded(ids.iter().map(|p| p.id));
        for s in session::Entity::find().filter(session::Column::Id.is_in(ids)).all(db).await? {
            sessions.insert(s.id, s);
        }
    }
    Ok(planned
        .into_iter()
        .filter_map(|p| {
            let mut change = Change::new(sessions.remove(&p.id)?, p.to, p.reason, p.actor);
            change.agent = p.agent;
            Some(change)
        })
        .collect())
}

/// The most waiting sessions one statement of [`write_waits`] updates.
const WAITS_PER_STATEMENT: usize = 10_000;

/// Writes each waiting session's reasons and place in the queue (id, reasons, position), in
/// id order as every writer locks rows, so that concurrent transactions cannot deadlock; a
/// session no longer PENDING is left alone. Up to [`WAITS_PER_STATEMENT`] sessions per
/// statement, its text the same whatever their number, from one JSON parameter: on
/// PostgreSQL two statements (the rows locked in id order, then updated), on SQLite one
/// (its one writer locks the whole database).
async fn write_waits(txn: &impl ConnectionTrait, mut waits: Vec<Wait>) -> DomainResult<()> {
    waits.sort_by_key(|w| w.0);
    let backend = txn.get_database_backend();
    for chunk in waits.chunks(WAITS_PER_STATEMENT) {
        if backend == DbBackend::Postgres {
            let rows: Vec<Value> =
                chunk.iter().map(|(id, (r, d), p)| json!({"id": id, "r": r, "d": d, "p": p})).collect();
            let rows = Value::Array(rows);
            let lock = "SELECT s.id FROM sessions s WHERE s.id IN \
                 (SELECT w.id FROM jsonb_to_recordset($1::jsonb) AS w(id uuid)) ORDER BY s.id FOR UPDATE";
            txn.execute_raw(Statement::from_sql_and_values(backend, lock, [rows.clone().into()])).await?;
            let update = "UPDATE sessions SET pending_reasons = w.r, pending_digest = w.d, queue_position = w.p \
                 FROM jsonb_to_recordset($1::jsonb) AS w(id uuid, r jsonb, d bigint, p integer) \
                 WHERE sessions.id = w.id AND sessions.status = 'PENDING'";
            txn.execute_raw(Statement::from_sql_and_values(backend, update, [rows.into()])).await?;
            continue;
        }
        let rows: Vec<Vec<sea_orm::Value>> = chunk
            .iter()
            .map(|(id, (r, d), p)| vec![(*id).into(), r.clone().into(), (*d).into(), (*p).into()])
            .collect();
        let w = crate::domain::store::rows::SqliteRows::of(&["id", "r", "d", "p"], &rows)
            .ok_or_else(|| crate::domain::DomainError::invariant("a waiting session's reasons as JSON"))?;
        txn.execute_raw(Statement::from_sql_and_values(backend, sqlite_waits_update(&w.select), [w.json.into()]))
            .await?;
    }
    Ok(())
}

/// SQLite's update of waiting sessions from the rows `select` reads out of `jsonb_each`.
/// `+status`: not through the status index. With it the planner took every pending session
/// and scanned the JSON rows for each (100 000 × 10 000); without it, it takes each JSON
/// row and finds its session by id.
fn sqlite_waits_update(select: &str) -> String {
    format!(
        "UPDATE sessions SET pending_reasons = w.r, pending_digest = w.d, queue_position = w.p \
         FROM (SELECT {select} FROM jsonb_each(?)) AS w WHERE sessions.id = w.id AND +sessions.status = 'PENDING'"
    )
}

/// What the scheduler would decide now for `extra` sessions of `group`, queued behind the
/// sessions already pending there: the dry run of a launch, by the code that schedules.
pub async fn dry_run(
    db: &DatabaseConnection,
    group: &str,
    extra: Vec<PendingSession>,
) -> DomainResult<Vec<planner::Decision>> {
    let groups: Vec<_> = resource_group::Entity::find().filter(resource_group::Column::Name.eq(group)).all(db).await?;
    let pending = waiting(db, None, Some(group)).await?;
    let ids: Vec<Uuid> = extra.iter().map(|s| s.id).collect();
    let snapshot = load_snapshot(db, &groups, &pending, extra).await?;
    Ok(planner::schedule(&snapshot).into_iter().filter(|d| ids.contains(&d.session)).collect())
}

/// Schedules until the event bus closes: a pass at once when woken by a launch or a
/// session's end, else every `interval`. `on_pass` is told how long each pass took.
pub async fn run(db: DatabaseConnection, bus: EventBus, interval: Duration, on_pass: impl Fn(Duration) + Send) {
    let mut events = bus.subscribe();
    let inline = InlineReads::of(&db);
    loop {
        let started = std::time::Instant::now();
        let result = pass_reading(&db, inline.as_ref(), &bus).await;
        on_pass(started.elapsed());
        match result {
            Ok(r) if r.scheduled + r.timed_out > 0 => {
                tracing::debug!(
                    scheduled = r.scheduled,
                    waiting = r.waiting,
                    timed_out = r.timed_out,
                    "scheduling pass"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = ?e, "scheduling pass failed"),
        }
        let deadline = tokio::time::sleep(interval);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                woke = events.recv() => match woke {
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    // Lagging only means many events: one pass serves them all.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                    // New work, or resources freed: pass now. Other steps change nothing here.
                    Ok(e) if e.to == SessionStatus::Pending || e.to.is_terminal() => break,
                    Ok(_) => {}
                },
                () = &mut deadline => break,
            }
        }
        // Let a burst (a batch launch, a mass termination) settle, then drain it.
        tokio::time::sleep(Duration::from_millis(5)).await;
        while events.try_recv().is_ok() {}
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, DbBackend, Statement, Value};

    /// On the schema the migrations make, every index of `sessions` included.
    #[tokio::test]
    async fn sqlite_finds_each_waiting_session_by_id() {
        let db = sea_orm::Database::connect("sqlite::memory:").await.expect("SQLite");
        crate::db::migrate(&db).await.expect("migrated");
        let rows = vec![vec![
            Value::from(uuid::Uuid::nil()),
            Value::from(serde_json::json!([])),
            Value::from(1_i64),
            Value::Int(Some(1)),
        ]];
        let w = crate::domain::store::rows::SqliteRows::of(&["id", "r", "d", "p"], &rows).expect("rows");
        let plan = |sql: String| {
            let db = &db;
            let json = w.json.clone();
            async move {
                let explain = Statement::from_sql_and_values(
                    DbBackend::Sqlite,
                    format!("EXPLAIN QUERY PLAN {sql}"),
                    [json.into()],
                );
                let steps = db.query_all_raw(explain).await.expect("plan");
                steps.iter().map(|r| r.try_get::<String>("", "detail").expect("detail")).collect::<Vec<_>>()
            }
        };
        let update = super::sqlite_waits_update(&w.select);
        let steps = plan(update.clone()).await;
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert!(steps[0].starts_with("SCAN jsonb_each"), "{steps:?}");
        assert!(steps[1].starts_with("SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 (id=?)"), "{steps:?}");
        // Through a status index, every waiting session would scan the rows.
        let trap = plan(update.replace("+sessions.status", "sessions.status")).await;
        assert!(trap[0].starts_with("SEARCH sessions USING INDEX ix_sessions_status"), "{trap:?}");
        db.execute_raw(Statement::from_sql_and_values(DbBackend::Sqlite, update, [w.json.clone().into()]))
            .await
            .expect("runs");
    }
}

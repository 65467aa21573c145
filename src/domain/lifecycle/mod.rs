//! The one writer of changes to sessions. A status changes through [`apply`]: it refuses
//! illegal transitions, keeps each session's timestamps in step with its status and writes
//! the completion callbacks a change owes into their outbox. Anything else about a session
//! (a rename, a priority, an extension, an exemption, a warning of its expiry) changes
//! through [`modify`]: an update guarded by what the change was decided on, a line of its
//! history with who made it, and an event of its kind. Both leave their event rows in
//! [`Transitions`], which [`commit`] writes as the last statements of the transaction
//! (the history lines just before), and which then tells the event bus. A launch writes its
//! new sessions itself and commits their first events here too.
//!
//! The folder holds what goes through it: ending sessions ([`terminate`]), changing them after
//! launch ([`modify`]), their scheduling history ([`history`]) and the completion callbacks
//! their ends owe ([`callbacks`]).

pub mod callbacks;
pub mod history;
pub mod modify;
pub mod terminate;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, EntityTrait, QueryFilter, Set, Statement};

use entity::{session, session_status_transition as transition};

use crate::domain::live::events::{CHANNEL, EventBus, EventKind};
use crate::domain::model::actor::Actor;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::{DomainError, DomainResult};

/// The events of one transaction (status transitions and other changes), the completion
/// callbacks they owe and the history lines of the other changes, written by [`commit`].
#[derive(Debug, Default)]
pub struct Transitions {
    rows: Vec<transition::ActiveModel>,
    callbacks: Vec<entity::session_callback::ActiveModel>,
    /// History lines of changes other than of status, with the instant of each change.
    notes: Vec<(crate::domain::lifecycle::history::Entry, DateTime<Utc>)>,
}

impl Transitions {
    pub fn push(&mut self, row: transition::ActiveModel) {
        self.rows.push(row);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The PostgreSQL advisory lock (two-key space, apart from the launches' one-key locks)
/// under which transitions are numbered: held from numbering to commit, it makes sequence
/// order commit order across concurrent transactions and replicas.
const SEQUENCE_LOCK: (i32, i32) = (0x7365_7373, 1);

/// Writes `transitions` as the last statements of `txn`, commits, and then tells the bus.
/// Returns how many transitions were written.
///
/// On PostgreSQL the rows are numbered under [`SEQUENCE_LOCK`] and a `NOTIFY` on
/// [`CHANNEL`] (delivered at commit) wakes every replica's bus. Between the lock and the
/// commit run only the insert (whose foreign-key check takes a share lock on rows this
/// transaction already updated or inserted) and the `NOTIFY`: nothing that waits on another
/// transaction, so the lock cannot deadlock. Keep it so: no statement may follow the
/// transitions. The price: status-changing commits are serialised for that short moment.
pub async fn commit(txn: DatabaseTransaction, transitions: Transitions, bus: &EventBus) -> DomainResult<usize> {
    let n = transitions.rows.len();
    // The history lines of other changes, before the lock too: a statement or two per
    // instant of change (one, in every writer today), whatever the number of sessions.
    let mut notes = transitions.notes;
    while let Some((_, at)) = notes.first() {
        let at = *at;
        let (now, later): (Vec<_>, Vec<_>) = notes.into_iter().partition(|(_, t)| *t == at);
        crate::domain::lifecycle::history::record(&txn, now.into_iter().map(|(e, _)| e).collect(), at).await?;
        notes = later;
    }
    if !transitions.callbacks.is_empty() {
        // Before the lock: see above.
        crate::domain::store::rows::insert_all(&txn, transitions.callbacks, None).await?;
    }
    if n > 0 {
        let postgres = txn.get_database_backend() == DbBackend::Postgres;
        if postgres {
            txn.execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_advisory_xact_lock($1, $2)",
                [SEQUENCE_LOCK.0.into(), SEQUENCE_LOCK.1.into()],
            ))
            .await?;
        }
        // One statement whatever the count (a launch's statements do not grow with its size).
        let inserted =
            crate::domain::store::rows::insert_all(&txn, transitions.rows, Some(transition::Column::Id)).await?;
        if postgres {
            let ids = inserted.iter().map(|row| row.try_get::<i64>("", "id")).collect::<Result<Vec<_>, _>>()?;
            let last = ids.into_iter().max().unwrap_or(0);
            txn.execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_notify($1, $2)",
                [CHANNEL.into(), last.to_string().into()],
            ))
            .await?;
        }
    }
    // Pokes the bus once the commit is over, even if this future is dropped while it runs.
    let _poke = (n > 0).then(|| bus.poke_on_drop());
    txn.commit().await?;
    Ok(n)
}

/// A status change to make.
#[derive(Clone, Debug)]
pub struct Change {
    pub session: session::Model,
    pub to: SessionStatus,
    pub reason: Option<String>,
    /// The agent it was scheduled on (with `to: SCHEDULED`), or its engine placed it on.
    pub agent: Option<String>,
    /// How it ended (with a terminal `to`): result and exit code.
    pub result: Option<(SessionResult, Option<i32>)>,
    /// Who makes it.
    pub actor: Actor,
}

impl Change {
    pub fn new(session: session::Model, to: SessionStatus, reason: impl Into<Option<String>>, actor: Actor) -> Self {
        Self { session, to, reason: reason.into(), agent: None, result: None, actor }
    }
}

pub fn transition_row(
    session_id: uuid::Uuid,
    from: Option<SessionStatus>,
    to: SessionStatus,
    reason: Option<String>,
    at: DateTime<Utc>,
    actor: &Actor,
) -> transition::ActiveModel {
    transition::ActiveModel {
        id: sea_orm::ActiveValue::NotSet,
        actor_user_id: Set(actor.user_id()),
        actor_rule: Set(actor.rule()),
        session_id: Set(session_id),
        from_status: Set(from.map(|s| s.as_str().to_owned())),
        to_status: Set(to.as_str().to_owned()),
        reason: Set(reason),
        occurred_at: Set(at),
        kind: Set(EventKind::StatusChange.as_str().to_owned()),
    }
}

/// A change of a session other than of its status: a rename, a new priority, an extension,
/// an exemption from idle checks, a warning of its expiry.
#[derive(Clone, Debug)]
pub struct Modification {
    pub session_id: uuid::Uuid,
    /// Its status, which stays: the update holds only while it is still this one.
    pub status: SessionStatus,
    /// Whether the update holds only while the session still has `status` (a change that
    /// does not depend on it, a rename or an exemption, does not wait for it).
    pub guard_status: bool,
    /// What it sets.
    pub set: Vec<(session::Column, sea_orm::sea_query::SimpleExpr)>,
    /// What else must still hold of the session as the change was decided on (a counter, a
    /// value it replaces): a concurrent change is detected, not overwritten.
    pub guard: Vec<sea_orm::sea_query::SimpleExpr>,
    /// Its event's kind: MODIFIED, or EXPIRY_WARNING.
    pub kind: EventKind,
    /// The history's phase for it (`modified`, `extend`, `idle-exemption`, `expiry-warning`).
    pub phase: &'static str,
    /// What changed and who changed it, in words: the history line and the event's reason.
    pub message: String,
    pub actor: Actor,
    /// Whether the scheduling history records it: every decision does; a pull's progress
    /// (its event alone says how far) does not.
    pub history: bool,
}

impl Modification {
    /// A MODIFIED change of session `session_id`, in `status`, guarded by that status.
    pub fn new(
        session_id: uuid::Uuid,
        status: SessionStatus,
        phase: &'static str,
        message: String,
        actor: Actor,
    ) -> Self {
        Self {
            session_id,
            status,
            guard_status: true,
            set: Vec::new(),
            guard: Vec::new(),
            kind: EventKind::Modified,
            phase,
            message,
            actor,
            history: true,
        }
    }
}

/// What [`modify`] did.
#[derive(Clone, Debug)]
pub enum Written {
    /// Changed: the session as it now is.
    Done(Box<session::Model>),
    /// The session moved on meanwhile (its status or a guard no longer holds): nothing
    /// was written.
    Moved,
    /// A unique index refused it (another live session of the owner took the name):
    /// nothing was written, and the transaction goes on.
    Conflict,
}

/// Makes change `m` inside the caller's transaction: the guarded update, then (only if it
/// held) its history line and its event, added to `transitions` for [`commit`]. Every change
/// of a session that is not of its status goes through here, as every status change goes
/// through [`apply`].
pub async fn modify(
    txn: &DatabaseTransaction,
    m: Modification,
    now: DateTime<Utc>,
    transitions: &mut Transitions,
) -> DomainResult<Written> {
    use sea_orm::{SqlErr, TransactionTrait};
    let mut update = session::Entity::update_many().filter(session::Column::Id.eq(m.session_id));
    for (column, value) in m.set {
        update = update.col_expr(column, value);
    }
    if m.guard_status {
        update = update.filter(session::Column::Status.eq(m.status.as_str()));
    }
    for condition in m.guard {
        update = update.filter(condition);
    }
    // A write a unique index may refuse (a rename racing another to one name) runs in a
    // savepoint, so that the refusal leaves the transaction usable (PostgreSQL aborts it).
    let savepoint = txn.begin().await?;
    let done = match update.exec(&savepoint).await {
        Ok(done) => done,
        Err(e) if matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
            savepoint.rollback().await?;
            return Ok(Written::Conflict);
        }
        Err(e) => return Err(e.into()),
    };
    savepoint.commit().await?;
    if done.rows_affected != 1 {
        return Ok(Written::Moved);
    }
    transitions.push(transition::ActiveModel {
        kind: Set(m.kind.as_str().to_owned()),
        ..transition_row(m.session_id, Some(m.status), m.status, Some(m.message.clone()), now, &m.actor)
    });
    if m.history {
        transitions
            .notes
            .push((crate::domain::lifecycle::history::Entry::note(m.session_id, m.phase, m.message, m.actor), now));
    }
    let after = session::Entity::find_by_id(m.session_id)
        .one(txn)
        .await?
        .ok_or_else(|| DomainError::invariant(format!("session {} vanished", m.session_id)))?;
    Ok(Written::Done(Box::new(after)))
}

/// What happened to one requested change.
#[derive(Clone, Debug)]
pub enum Applied {
    /// The session now has the new status.
    Changed(session::Model),
    /// The session's status changed concurrently; here is what it is now.
    Moved(session::Model),
}

/// Applies `changes` inside the caller's transaction, adding their transition rows to
/// `transitions` for [`commit`]. Each update is guarded by the status the change was
/// computed from, so a concurrent change is detected, not overwritten.
///
/// Rows are updated in session-id order, whoever calls, so that two transactions changing
/// the same sessions lock them in the same order and cannot deadlock. `Applied` comes back
/// in that order too.
pub async fn apply(
    txn: &impl ConnectionTrait,
    mut changes: Vec<Change>,
    now: DateTime<Utc>,
    transitions: &mut Transitions,
) -> DomainResult<Vec<Applied>> {
    changes.sort_by_key(|c| c.session.id);
    // A session scheduled or ended waits for nothing: no reasons, and their digest.
    let (no_reasons, no_reasons_digest) = crate::domain::sessions::occupancy::PendingReason::stored(&[]);
    let mut applied = Vec::with_capacity(changes.len());
    // Sessions that stop waiting: their scheduling history stops counting attempts.
    let mut left_pending = Vec::new();
    for c in changes {
        let from = SessionStatus::stored(&c.session.status)?;
        if !from.can_become(c.to) {
            return Err(DomainError::invariant(format!("illegal transition {from} → {} of {}", c.to, c.session.id)));
        }
        let mut update = session::Entity::update_many()
            .col_expr(session::Column::Status, Expr::value(c.to.as_str()))
            .col_expr(session::Column::StatusChangedAt, Expr::value(now))
            .col_expr(session::Column::StatusInfo, Expr::value(c.reason.clone()))
            .col_expr(session::Column::StatusActorUserId, Expr::value(c.actor.user_id()))
            .col_expr(session::Column::StatusActorRule, Expr::value(c.actor.rule()))
            .filter(session::Column::Id.eq(c.session.id))
            .filter(session::Column::Status.eq(from.as_str()));
        if c.to.is_terminal() {
            update = update.col_expr(session::Column::TerminatedAt, Expr::value(now));
        }
        if c.to == SessionStatus::Scheduled {
            update = update
                .col_expr(session::Column::ScheduledAt, Expr::value(now))
                .col_expr(session::Column::OccupiedSlots, Expr::value(c.session.requested_slots.clone()))
                .col_expr(session::Column::AgentId, Expr::value(c.agent.clone()))
                .col_expr(session::Column::PendingReasons, Expr::value(no_reasons.clone()))
                .col_expr(session::Column::PendingDigest, Expr::value(no_reasons_digest))
                .col_expr(session::Column::QueuePosition, Expr::value(Option::<i32>::None));
        }
        if c.to != SessionStatus::Scheduled
            && let Some(agent) = &c.agent
        {
            // Placed by its engine (Slurm chooses the node).
            update = update.col_expr(session::Column::AgentId, Expr::value(agent.clone()));
        }
        if c.to.is_terminal() {
            update = update
                .col_expr(session::Column::PendingReasons, Expr::value(no_reasons.clone()))
                .col_expr(session::Column::PendingDigest, Expr::value(no_reasons_digest))
                .col_expr(session::Column::QueuePosition, Expr::value(Option::<i32>::None));
        }
        if let Some((result, exit_code)) = c.result {
            update = update
                .col_expr(session::Column::Result, Expr::value(result.as_str()))
                .col_expr(session::Column::ExitCode, Expr::value(exit_code));
        }
        if c.to == SessionStatus::Running {
            update = update.col_expr(session::Column::StartedAt, Expr::value(now));
        }
        let result = update.exec(txn).await?;
        let current = session::Entity::find_by_id(c.session.id)
            .one(txn)
            .await?
            .ok_or_else(|| DomainError::invariant(format!("session {} vanished", c.session.id)))?;
        if result.rows_affected == 1 {
            if from == SessionStatus::Pending {
                left_pending.push(c.session.id);
            }
            transitions.push(transition_row(c.session.id, Some(from), c.to, c.reason, now, &c.actor));
            transitions.callbacks.extend(crate::domain::lifecycle::callbacks::outbox_row(&current, c.to, now));
            applied.push(Applied::Changed(current));
        } else {
            applied.push(Applied::Moved(current));
        }
    }
    crate::domain::lifecycle::history::stop_counting(txn, &left_pending).await?;
    Ok(applied)
}

//! Status changes: the one writer of session statuses. It refuses illegal transitions,
//! keeps each session's timestamps in step with its status, writes the completion
//! callbacks a change owes into their outbox, and writes the append-only transition rows
//! as the last statements of their transaction ([`commit`]), which then tells the event
//! bus.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, EntityTrait, QueryFilter, Set, Statement};

use entity::{session, session_status_transition as transition};

use super::actor::Actor;
use super::events::{CHANNEL, EventBus, EventKind};
use super::status::{SessionResult, SessionStatus};
use super::{DomainError, DomainResult};

/// The status transitions of one transaction, and the completion callbacks they owe,
/// written by [`commit`].
#[derive(Debug, Default)]
pub struct Transitions {
    rows: Vec<transition::ActiveModel>,
    callbacks: Vec<entity::session_callback::ActiveModel>,
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
    if !transitions.callbacks.is_empty() {
        // Before the lock: see above.
        super::rows::insert_all(&txn, transitions.callbacks, None).await?;
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
        let inserted = super::rows::insert_all(&txn, transitions.rows, Some(transition::Column::Id)).await?;
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

/// The event row warning that session `session_id`, in `status`, will be reclaimed:
/// `reason` says when and why. It goes out with the status changes, in their sequence.
pub fn warning_row(
    session_id: uuid::Uuid,
    status: SessionStatus,
    reason: String,
    at: DateTime<Utc>,
    actor: &Actor,
) -> transition::ActiveModel {
    transition::ActiveModel {
        kind: Set(EventKind::ExpiryWarning.as_str().to_owned()),
        ..transition_row(session_id, Some(status), status, Some(reason), at, actor)
    }
}

/// A change of a session other than of its status: a rename, a new priority, an extension,
/// an exemption from idle checks.
#[derive(Clone, Debug)]
pub struct Modified {
    pub session_id: uuid::Uuid,
    /// Its status, which stays.
    pub status: SessionStatus,
    /// The history's phase for it (`modified`, `extend`, `idle-exemption`).
    pub phase: &'static str,
    /// What changed and who changed it, in words.
    pub message: String,
    pub actor: Actor,
}

/// Records `modified` inside the caller's transaction: each its history line with who made
/// it, and a MODIFIED event row added to `transitions`, sent with the status changes when
/// the caller commits them ([`commit`]). Every change of a session that is not of its
/// status goes through here, as every status change goes through [`apply`].
pub async fn record_modified(
    txn: &impl ConnectionTrait,
    modified: Vec<Modified>,
    now: DateTime<Utc>,
    transitions: &mut Transitions,
) -> DomainResult<()> {
    let mut notes = Vec::with_capacity(modified.len());
    for m in modified {
        transitions.push(transition::ActiveModel {
            kind: Set(EventKind::Modified.as_str().to_owned()),
            ..transition_row(m.session_id, Some(m.status), m.status, Some(m.message.clone()), now, &m.actor)
        });
        notes.push(super::history::Entry::note(m.session_id, m.phase, m.message, m.actor));
    }
    super::history::record(txn, notes, now).await
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
    let (no_reasons, no_reasons_digest) = super::occupancy::PendingReason::stored(&[]);
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
            transitions.callbacks.extend(super::callbacks::outbox_row(&current, c.to, now));
            applied.push(Applied::Changed(current));
        } else {
            applied.push(Applied::Moved(current));
        }
    }
    super::history::stop_counting(txn, &left_pending).await?;
    Ok(applied)
}

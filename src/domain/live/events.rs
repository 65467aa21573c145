//! Status-change events: the one feed of every committed status transition, in sequence
//! order, for the scheduler, the runtime and the live subscriptions of this process.
//!
//! The transition table is the source of truth. A writer commits its transitions with
//! [`crate::domain::lifecycle::commit`], which pokes this process's bus; on PostgreSQL the same
//! commit sends a `NOTIFY` that pokes the bus of every replica. A poked bus reads the
//! transitions after the last one it fanned out, in sequence order, and broadcasts them.
//! Sequence order is commit order (SQLite has one writer; on PostgreSQL transitions are
//! numbered under a lock held until commit), so a reader that has seen sequence `n` has
//! seen everything before it: that is what makes a resume cursor exact.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use tokio::sync::{Notify, broadcast};
use uuid::Uuid;

use entity::{image, project, resource_group, session, session_status_transition as transition, user};

pub use crate::domain::model::EventKind;
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainResult, sessions::relations};

/// The PostgreSQL channel on which commits announce new transitions (payload: the highest
/// sequence number of the commit).
pub const CHANNEL: &str = "sessiond_events";

/// Default number of events a subscriber may fall behind before it is dropped as lagging.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Transitions the bus reads per statement.
pub const READ_BATCH: u64 = 500;

/// One status change of one session, or a warning of its expiry.
#[derive(Clone, Debug)]
pub struct SessionEvent {
    /// The transition's global sequence number: events are ordered by it.
    pub seq: i64,
    pub kind: EventKind,
    pub from: Option<SessionStatus>,
    pub to: SessionStatus,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
    /// Who made the change: a user's id, or the system's rule.
    pub actor: (Option<Uuid>, Option<String>),
    /// The session as read with the event: its state then (possibly already further on).
    pub session: Arc<session::Model>,
    /// The records the sessions of the same read refer to, loaded once for all of them and
    /// for every consumer ([`SessionEvent::relations`]).
    related: Arc<Shared>,
}

/// The owners, projects, resource groups and images of the sessions of one read.
#[derive(Debug, Default)]
pub struct Relations {
    pub users: HashMap<Uuid, user::Model>,
    pub projects: HashMap<Uuid, project::Model>,
    pub resource_groups: HashMap<String, resource_group::Model>,
    pub images: HashMap<String, image::Model>,
}

/// What one read's events share: the keys of their relations, and the relations once the
/// first consumer asked for them.
#[derive(Debug, Default)]
struct Shared {
    users: Vec<Uuid>,
    projects: Vec<Uuid>,
    resource_groups: Vec<String>,
    images: Vec<String>,
    /// Where they load, when not on the asker's connection.
    db: Option<DatabaseConnection>,
    loaded: tokio::sync::OnceCell<Relations>,
}

impl Shared {
    fn of<'a>(sessions: impl Iterator<Item = &'a session::Model>) -> Self {
        let (mut users, mut projects, mut groups, mut images) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for s in sessions {
            users.insert(s.owner_id);
            projects.insert(s.project_id);
            groups.insert(s.resource_group.clone());
            images.insert(s.image.clone());
        }
        Self {
            users: users.into_iter().collect(),
            projects: projects.into_iter().collect(),
            resource_groups: groups.into_iter().collect(),
            images: images.into_iter().collect(),
            db: None,
            loaded: tokio::sync::OnceCell::new(),
        }
    }
}

impl SessionEvent {
    /// The event of a committed transition of `s`; `None` for a stored status we do not know.
    fn of(t: transition::Model, s: Arc<session::Model>, related: Arc<Shared>) -> Option<Self> {
        Some(Self {
            seq: t.id,
            kind: EventKind::parse(&t.kind)?,
            from: t.from_status.as_deref().and_then(SessionStatus::parse),
            to: SessionStatus::parse(&t.to_status)?,
            reason: t.reason,
            at: t.occurred_at,
            actor: (t.actor_user_id, t.actor_rule),
            session: s,
            related,
        })
    }

    /// The records the event's session refers to. Loaded (four statements on `db`) by the
    /// first consumer of any event of the same read that asks, and shared by every other:
    /// a thousand subscribers of one change cost one load, not a thousand.
    pub async fn relations(&self, db: &DatabaseConnection) -> DomainResult<&Relations> {
        let r = &self.related;
        let db = r.db.as_ref().unwrap_or(db);
        r.loaded
            .get_or_try_init(|| async {
                let (users, projects, resource_groups, images) = tokio::try_join!(
                    relations::users(db, &r.users),
                    relations::projects(db, &r.projects),
                    relations::resource_groups(db, &r.resource_groups),
                    relations::images(db, &r.images),
                )?;
                Ok::<_, crate::domain::DomainError>(Relations { users, projects, resource_groups, images })
            })
            .await
    }

    /// How many loads of relations this event's read has made (0 or 1): for tests.
    pub fn relations_loaded(&self) -> bool {
        self.related.loaded.initialized()
    }
}

/// What one read of the transition table found.
#[derive(Debug, Default)]
pub struct Read {
    pub events: Vec<SessionEvent>,
    /// The sequence number of the last row read (also of rows that made no event: a status
    /// this version does not know), so that the next read starts after it.
    pub last_row: Option<i64>,
    /// The read hit its limit: there may be more.
    pub full: bool,
}

/// Up to `limit` committed transitions with a sequence number in `(after, up_to]` whose
/// session matches `sessions`, in sequence order, as events.
/// `relations_on`: where the events' relations load when asked for (else on the
/// connection of whoever asks first).
pub async fn read_after(
    db: &impl ConnectionTrait,
    after: i64,
    up_to: Option<i64>,
    sessions: Condition,
    limit: u64,
    relations_on: Option<&DatabaseConnection>,
) -> DomainResult<Read> {
    let mut query = transition::Entity::find()
        .find_also_related(session::Entity)
        .filter(transition::Column::Id.gt(after))
        .filter(sessions)
        .order_by_asc(transition::Column::Id)
        .limit(limit);
    if let Some(up_to) = up_to {
        query = query.filter(transition::Column::Id.lte(up_to));
    }
    let rows = query.all(db).await?;
    let full = rows.len() as u64 == limit;
    let last_row = rows.last().map(|(t, _)| t.id);
    let mut related = Shared::of(rows.iter().filter_map(|(_, s)| s.as_ref()));
    related.db = relations_on.cloned();
    let related = Arc::new(related);
    let events = rows.into_iter().filter_map(|(t, s)| SessionEvent::of(t, Arc::new(s?), related.clone())).collect();
    Ok(Read { events, last_row, full })
}

/// The highest committed sequence number (0 before the first transition).
pub async fn last_sequence(db: &impl ConnectionTrait) -> DomainResult<i64> {
    let last: Option<Option<i64>> = transition::Entity::find()
        .select_only()
        .column_as(transition::Column::Id.max(), "last")
        .into_tuple()
        .one(db)
        .await?;
    Ok(last.flatten().unwrap_or(0))
}

/// This process's event bus. Cheap to clone; the feed stops when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct EventBus {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tx: broadcast::Sender<SessionEvent>,
    poke: Arc<Notify>,
    /// The sequence number of the last event broadcast.
    fanned_out: AtomicI64,
    /// Notifications received from the database (other replicas' commits and our own).
    notifications: AtomicU64,
}

impl EventBus {
    /// A bus fed from `db`, starting after the transitions already committed. `capacity`
    /// bounds how far a subscriber may fall behind (see [`broadcast`]). On PostgreSQL it also
    /// listens for the commits of other replicas.
    pub async fn start(db: DatabaseConnection, capacity: usize) -> DomainResult<Self> {
        let start = last_sequence(&db).await?;
        let inner = Arc::new(Inner {
            tx: broadcast::channel(capacity.max(1)).0,
            poke: Arc::new(Notify::new()),
            fanned_out: AtomicI64::new(start),
            notifications: AtomicU64::new(0),
        });
        let poke = inner.poke.clone();
        let postgres = db.get_database_backend() == DbBackend::Postgres;
        if postgres {
            tokio::spawn(listen(db.clone(), Arc::downgrade(&inner)));
        }
        tokio::spawn(feed(db, Arc::downgrade(&inner), poke, postgres));
        Ok(Self { inner })
    }

    /// Says that transitions were committed: the feed reads and broadcasts them. Call after
    /// the commit, never inside a transaction.
    pub fn committed(&self) {
        self.inner.poke.notify_one();
    }

    /// A guard that pokes the bus when dropped: held across a commit, it tells the bus even
    /// when the committing future is dropped (a timeout, a client gone) after the commit
    /// went through. A poke without new transitions costs one read.
    pub fn poke_on_drop(&self) -> PokeOnDrop<'_> {
        PokeOnDrop(self)
    }

    /// Every event broadcast from now on, in sequence order.
    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.inner.tx.subscribe()
    }

    /// The sequence number of the last event broadcast.
    pub fn fanned_out(&self) -> i64 {
        self.inner.fanned_out.load(Ordering::Acquire)
    }

    /// How many commit notifications this bus has received (PostgreSQL only).
    pub fn notifications(&self) -> u64 {
        self.inner.notifications.load(Ordering::Relaxed)
    }
}

pub struct PokeOnDrop<'a>(&'a EventBus);

impl Drop for PokeOnDrop<'_> {
    fn drop(&mut self) {
        self.0.committed();
    }
}

/// Reads new transitions whenever poked, and broadcasts them in order. On PostgreSQL it also
/// looks every second, in case a notification was lost while the listener reconnected.
async fn feed(db: DatabaseConnection, bus: std::sync::Weak<Inner>, poke: Arc<Notify>, look_anyway: bool) {
    loop {
        let poked = tokio::time::timeout(Duration::from_secs(1), poke.notified()).await.is_ok();
        let Some(inner) = bus.upgrade() else { return };
        if !poked && !look_anyway {
            continue;
        }
        loop {
            let after = inner.fanned_out.load(Ordering::Acquire);
            let read = match read_after(&db, after, None, Condition::all(), READ_BATCH, None).await {
                Ok(read) => read,
                Err(e) => {
                    tracing::error!(error = ?e, "reading new status transitions failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    inner.poke.notify_one();
                    break;
                }
            };
            for e in read.events {
                let seq = e.seq;
                // No receiver is fine: nobody is listening right now.
                let _ = inner.tx.send(e);
                inner.fanned_out.store(seq, Ordering::Release);
            }
            if let Some(last) = read.last_row {
                inner.fanned_out.fetch_max(last, Ordering::AcqRel);
            }
            if !read.full {
                break;
            }
        }
    }
}

/// Pokes the bus on every notification of [`CHANNEL`] (the commits of every replica),
/// reconnecting when the connection drops. The listener has a connection of its own, not
/// one of the pool's.
async fn listen(db: DatabaseConnection, bus: std::sync::Weak<Inner>) {
    use sea_orm::sqlx::postgres::{PgListener, PgPoolOptions};
    let options = (*db.get_postgres_connection_pool().connect_options()).clone();
    let own = PgPoolOptions::new().max_connections(1).connect_lazy_with(options);
    while bus.strong_count() > 0 {
        let mut listener = match PgListener::connect_with(&own).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other replicas' events; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // Reconnecting is done here, outside the timeout below, which then only ever
        // interrupts the (cancel-safe) wait for a notification.
        listener.eager_reconnect(false);
        if let Err(e) = listener.listen(CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // Anything committed while we were not listening.
        if let Some(inner) = bus.upgrade() {
            inner.poke.notify_one();
        }
        loop {
            let next = tokio::time::timeout(Duration::from_secs(1), listener.try_recv()).await;
            let Some(inner) = bus.upgrade() else { return };
            match next {
                // Nothing for a second: check that the bus still exists.
                Err(_) => {}
                Ok(Ok(Some(_))) => {
                    inner.notifications.fetch_add(1, Ordering::Relaxed);
                    inner.poke.notify_one();
                }
                Ok(Ok(None)) => break, // the connection dropped: listen anew
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "listening for other replicas' events failed; reconnecting");
                    break;
                }
            }
        }
    }
}

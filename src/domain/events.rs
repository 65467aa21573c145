//! The in-process event bus: every status change is published here after its transaction
//! commits; the scheduler and the runtime wake on it. One bus per process.

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;
use uuid::Uuid;

use entity::{session, session_status_transition};

use super::status::SessionStatus;

/// One status change of one session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionEvent {
    /// The transition's global sequence number: events are ordered by it.
    pub seq: i64,
    pub session_id: Uuid,
    pub project_id: Uuid,
    pub owner_id: Uuid,
    pub domain_id: Uuid,
    pub resource_group: String,
    pub from: Option<SessionStatus>,
    pub to: SessionStatus,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

impl SessionEvent {
    /// The event of a committed transition of `s`; `None` for a stored status we do not know.
    pub fn of(s: &session::Model, t: &session_status_transition::Model) -> Option<Self> {
        Some(Self {
            seq: t.id,
            session_id: s.id,
            project_id: s.project_id,
            owner_id: s.owner_id,
            domain_id: s.domain_id,
            resource_group: s.resource_group.clone(),
            from: t.from_status.as_deref().and_then(SessionStatus::parse),
            to: SessionStatus::parse(&t.to_status)?,
            reason: t.reason.clone(),
            at: t.occurred_at,
        })
    }
}

#[derive(Clone, Debug)]
pub struct EventBus {
    tx: broadcast::Sender<SessionEvent>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(4096)
    }
}

impl EventBus {
    pub fn new(capacity: usize) -> Self {
        Self { tx: broadcast::channel(capacity).0 }
    }

    /// Publishes committed events, in sequence order. Never call inside a transaction.
    pub fn publish(&self, events: impl IntoIterator<Item = SessionEvent>) {
        let mut events: Vec<_> = events.into_iter().collect();
        events.sort_by_key(|e| e.seq);
        for e in events {
            // No receiver is fine: nobody is listening right now.
            let _ = self.tx.send(e);
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.tx.subscribe()
    }
}

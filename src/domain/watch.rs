//! Watching sessions live: every status change of the sessions a viewer may see in one
//! project and scope (optionally one session), in sequence order, resumable.
//!
//! The feed subscribes to the bus *before* it reads anything, then replays from the table
//! what came after the resume point, then goes on with the bus, dropping what the replay
//! already gave. Sequence order is commit order (see [`super::events`]), so nothing is
//! missed and nothing comes twice at the switch.
//!
//! A consumer that falls more than the bus's capacity behind is ended with
//! [`DomainError::Lagged`] carrying the last sequence number it was given (or skipped as
//! not its own): it resumes from there. Memory per watcher is one bus receiver and at most
//! one replay batch.

use std::collections::VecDeque;

use futures_util::Stream;
use sea_orm::DatabaseConnection;
use tokio::sync::broadcast::{self, error::RecvError};
use uuid::Uuid;

use super::auth::Viewer;
use super::events::{self, EventBus, READ_BATCH, SessionEvent};
use super::visibility::{self, ScopedSessions, SessionScope};
use super::{DomainError, DomainResult};

/// What to watch.
#[derive(Clone, Debug)]
pub struct WatchRequest {
    pub project_id: Uuid,
    pub scope: SessionScope,
    /// Only this session's events.
    pub session_id: Option<Uuid>,
    /// Resume after this sequence number (missed events are replayed first); `None` starts
    /// with the next event.
    pub after: Option<i64>,
}

/// The live feed of `request` for `viewer`. Refused like the session list with the same
/// project and scope (`NOT_FOUND`, `FORBIDDEN`); a session the viewer may not see in that
/// scope is `NOT_FOUND`; a resume point beyond the last event is bad input.
pub async fn watch(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    request: WatchRequest,
) -> DomainResult<impl Stream<Item = DomainResult<SessionEvent>> + Send + 'static> {
    let sessions = visibility::session_scope(db, viewer, request.project_id, request.scope).await?;
    if let Some(id) = request.session_id {
        let s = visibility::visible_session(db, viewer, id).await?;
        if !sessions.admits(&s) {
            return Err(DomainError::NotFound("session"));
        }
    }
    // Subscribe first: whatever commits from now on reaches the receiver.
    let rx = bus.subscribe();
    let last = events::last_sequence(db).await?;
    let (from, replay) = match request.after {
        None => (last, false),
        Some(after) if after > last => {
            return Err(DomainError::bad_input(
                "INVALID_CURSOR",
                Some("after".to_owned()),
                "`after`: no event has this cursor yet",
            ));
        }
        Some(after) => (after, after < last),
    };
    let state = Feed {
        db: db.clone(),
        rx,
        sessions,
        session_id: request.session_id,
        seen: from,
        replay: replay.then(|| Replay { batch: VecDeque::new(), exhausted: false }),
        ended: false,
    };
    Ok(futures_util::stream::unfold(state, |mut feed| async move {
        let item = feed.next().await?;
        Some((item, feed))
    }))
}

struct Replay {
    batch: VecDeque<SessionEvent>,
    /// The last read returned less than a full batch.
    exhausted: bool,
}

struct Feed {
    db: DatabaseConnection,
    rx: broadcast::Receiver<SessionEvent>,
    sessions: ScopedSessions,
    session_id: Option<Uuid>,
    /// Every event up to this sequence number was delivered or is not this feed's.
    seen: i64,
    /// `Some` while replaying from the table.
    replay: Option<Replay>,
    ended: bool,
}

impl Feed {
    fn wants(&self, e: &SessionEvent) -> bool {
        self.sessions.admits(&e.session) && self.session_id.is_none_or(|id| id == e.session.id)
    }

    async fn next(&mut self) -> Option<DomainResult<SessionEvent>> {
        if self.ended {
            return None;
        }
        while let Some(replay) = &mut self.replay {
            if let Some(e) = replay.batch.pop_front() {
                self.seen = e.seq;
                return Some(Ok(e));
            }
            if replay.exhausted {
                self.replay = None;
                break;
            }
            let mut condition = self.sessions.condition();
            if let Some(id) = self.session_id {
                condition = condition.add(sea_orm::ColumnTrait::eq(&entity::session::Column::Id, id));
            }
            match events::read_after(&self.db, self.seen, condition, READ_BATCH).await {
                Ok(batch) => {
                    replay.exhausted = (batch.len() as u64) < READ_BATCH;
                    replay.batch = batch.into();
                }
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
            }
        }
        loop {
            match self.rx.recv().await {
                Ok(e) if e.seq <= self.seen => {} // replayed already, or from before the start
                Ok(e) => {
                    self.seen = e.seq;
                    if self.wants(&e) {
                        return Some(Ok(e));
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    self.ended = true;
                    return Some(Err(DomainError::Lagged(self.seen)));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

//! Watching sessions live: every status change of the sessions a viewer may see in one
//! project and scope (optionally one session), in sequence order, resumable.
//!
//! The feed subscribes to the bus *before* it reads anything, then replays from the table
//! what came after the resume point, then goes on with the bus, dropping what the replay
//! already gave. Sequence order is commit order (see [`crate::domain::live::events`]), so nothing is
//! missed and nothing comes twice at the switch.
//!
//! A consumer that falls more than the bus's capacity behind is ended with
//! [`DomainError::Lagged`] carrying the last sequence number it was given (or skipped as
//! not its own): it resumes from there. Memory per watcher is one bus receiver and at most
//! one replay batch; a replay reads bounded windows of the sequence, so resuming from an
//! old cursor is many short statements, paced by the consumer and by the replays' own
//! budget ([`crate::domain::live::replay`]): never on the requests' connections. A user runs a few
//! replays at once at most ([`crate::domain::live::shares`]).
//!
//! When credentials change anywhere ([`crate::domain::directory::credentials`]), a feed checks again that its
//! viewer may still watch (a token revoked, a role or membership lost) and ends with the
//! error if not.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::Stream;
use sea_orm::DatabaseConnection;
use tokio::sync::broadcast::{self, error::RecvError};
use uuid::Uuid;

use crate::domain::directory::auth::Viewer;
use crate::domain::directory::credentials::Credentials;
use crate::domain::live::Live;
use crate::domain::live::events::{self, SessionEvent};
use crate::domain::live::replay::Replays;
use crate::domain::live::shares::{Held, Share};
use crate::domain::sessions::visibility::{self, ScopedSessions, SessionScope};
use crate::domain::{DomainError, DomainResult};

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
/// scope is `NOT_FOUND`; a resume point beyond the last event is bad input; a replay over
/// the viewer's share of them is `LIMIT_EXCEEDED`.
pub async fn watch(
    db: &DatabaseConnection,
    live: &Live,
    viewer: &Viewer,
    request: WatchRequest,
) -> DomainResult<impl Stream<Item = DomainResult<SessionEvent>> + Send + 'static> {
    // A resume point behind what the bus has sent is a replay for sure: one over the
    // viewer's share is refused before it costs a statement.
    let share = || live.shares.take(viewer.user_id, Share::Replay);
    let early = request.after.filter(|after| *after < live.bus.fanned_out()).map(|_| share()).transpose()?;
    // Before the first check: a change from here on is seen, and checked again.
    let mut changes = live.credentials.changes();
    changes.mark_unchanged();
    let sessions = admitted(db, viewer, &request).await?;
    // Subscribe first: whatever commits from now on reaches the receiver.
    let rx = live.bus.subscribe();
    let last = events::last_sequence(db).await?;
    let (from, replay_to) = match request.after {
        None => (last, None),
        Some(after) if after > last => {
            return Err(DomainError::bad_input(
                "INVALID_CURSOR",
                Some("after".to_owned()),
                "`after`: no event has this cursor yet",
            ));
        }
        // Everything after `last` comes through the receiver.
        Some(after) => (after, (after < last).then_some(last)),
    };
    let replaying = match (replay_to, early) {
        (None, _) => None,
        (Some(_), Some(held)) => Some(held),
        (Some(_), None) => Some(share()?),
    };
    let state = Feed {
        db: db.clone(),
        replays: live.replays.clone(),
        credentials: live.credentials.clone(),
        changes,
        viewer: viewer.clone(),
        request,
        rx,
        sessions,
        seen: from,
        replay_to,
        replaying,
        batch: VecDeque::new(),
        checked: Instant::now(),
        ended: false,
    };
    Ok(futures_util::stream::unfold(state, |mut feed| async move {
        let item = feed.next().await?;
        Some((item, feed))
    }))
}

/// The sessions `request` may watch, refused like the list (and a session outside them
/// like a missing one).
async fn admitted(db: &DatabaseConnection, viewer: &Viewer, request: &WatchRequest) -> DomainResult<ScopedSessions> {
    let sessions = visibility::session_scope(db, viewer, request.project_id, request.scope).await?;
    if let Some(id) = request.session_id {
        let s = visibility::visible_session(db, viewer, id).await?;
        if !sessions.admits(&s) {
            return Err(DomainError::NotFound("session"));
        }
    }
    Ok(sessions)
}

/// Events a replay holds at most at once.
const REPLAY_BATCH: u64 = 100;
/// Sequence numbers one replay statement looks through at most, matching or not: a narrow
/// feed resuming from an old cursor costs many small statements, never one long scan.
const REPLAY_WINDOW: i64 = 5_000;
/// How often a live feed checks again that its viewer may still watch (a member removed
/// from the project stops getting its events).
const RECHECK: Duration = Duration::from_secs(30);

struct Feed {
    db: DatabaseConnection,
    replays: Replays,
    credentials: Credentials,
    changes: tokio::sync::watch::Receiver<i64>,
    viewer: Viewer,
    request: WatchRequest,
    rx: broadcast::Receiver<SessionEvent>,
    sessions: ScopedSessions,
    /// Every event up to this sequence number was delivered or is not this feed's.
    seen: i64,
    /// While replaying: the last sequence number to replay from the table.
    replay_to: Option<i64>,
    /// The viewer's share of replays, held while replaying.
    replaying: Option<Held>,
    batch: VecDeque<SessionEvent>,
    /// When the viewer's right to watch was last checked.
    checked: Instant,
    ended: bool,
}

impl Feed {
    /// After credentials changed (a little later, spread among all feeds): the viewer as
    /// they are now, and whether they may still watch. The database failing to say is no
    /// refusal: the feed goes on, and checks again with its next event.
    async fn check_again(&mut self) -> DomainResult<()> {
        tokio::time::sleep(Credentials::spread()).await;
        self.changes.mark_unchanged();
        self.checked = Instant::now();
        let checked = async {
            let viewer = self
                .credentials
                .viewer_of_keypair(self.viewer.keypair_id)
                .await?
                .ok_or(DomainError::Unauthenticated)?;
            let sessions = admitted(&self.db, &viewer, &self.request).await?;
            Ok::<_, DomainError>((viewer, sessions))
        };
        match checked.await {
            Ok((viewer, sessions)) => {
                self.viewer = viewer;
                self.sessions = sessions;
                Ok(())
            }
            Err(DomainError::Unavailable(_) | DomainError::Internal(_)) => {
                self.checked = Instant::now().checked_sub(RECHECK).unwrap_or_else(Instant::now);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn wants(&self, e: &SessionEvent) -> bool {
        self.sessions.admits(&e.session) && self.request.session_id.is_none_or(|id| id == e.session.id)
    }

    fn end(&mut self, e: DomainError) -> Option<DomainResult<SessionEvent>> {
        self.ended = true;
        Some(Err(e))
    }

    async fn next(&mut self) -> Option<DomainResult<SessionEvent>> {
        if self.ended {
            return None;
        }
        loop {
            if let Some(e) = self.batch.pop_front() {
                return Some(Ok(e));
            }
            let Some(to) = self.replay_to else { break };
            if self.seen >= to {
                self.replay_to = None;
                self.replaying = None;
                break;
            }
            // A replay may take a while: it stops too when the viewer may no longer watch.
            if self.changes.has_changed().unwrap_or(false)
                && let Err(e) = self.check_again().await
            {
                return self.end(e);
            }
            let mut condition = self.sessions.condition();
            if let Some(id) = self.request.session_id {
                condition = condition.add(sea_orm::ColumnTrait::eq(&entity::session::Column::Id, id));
            }
            let window_end = to.min(self.seen.saturating_add(REPLAY_WINDOW));
            match self.replays.read(self.seen, window_end, condition, REPLAY_BATCH).await {
                Ok(read) => {
                    // A full batch continues after its last row; otherwise the window is done.
                    self.seen = if read.full { read.last_row.unwrap_or(window_end) } else { window_end };
                    self.batch = read.events.into();
                }
                Err(e) => return self.end(e),
            }
        }
        loop {
            let e = tokio::select! {
                e = self.rx.recv() => match e {
                    Ok(e) => e,
                    Err(RecvError::Lagged(_)) => return self.end(DomainError::Lagged(self.seen)),
                    Err(RecvError::Closed) => return None,
                },
                changed = self.changes.changed() => {
                    if changed.is_ok()
                        && let Err(e) = self.check_again().await
                    {
                        return self.end(e);
                    }
                    continue;
                }
            };
            if e.seq <= self.seen {
                continue; // replayed already, or from before the start
            }
            if self.checked.elapsed() >= RECHECK {
                self.checked = Instant::now();
                match admitted(&self.db, &self.viewer, &self.request).await {
                    Ok(sessions) => self.sessions = sessions,
                    Err(DomainError::Unavailable(_) | DomainError::Internal(_)) => {}
                    Err(e) => return self.end(e),
                }
            }
            self.seen = e.seq;
            if self.wants(&e) {
                return Some(Ok(e));
            }
        }
    }
}

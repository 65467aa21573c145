//! What a session uses, live: `sessionUtilization` follows one session's samples as its
//! engine takes them, apart from `sessionEvents` (which it would flood). One reader per
//! server, shared by every follower of every session, as the log feed: each look is one
//! statement per [`PROBE_BATCH`] followed sessions, whatever the number of followers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tokio::sync::broadcast;
use uuid::Uuid;

use entity::session;

use super::SlotUse;
use crate::domain::directory::auth::Viewer;
use crate::domain::directory::credentials::Credentials;
use crate::domain::live::follow::{produced, still_follows};
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainResult, padded, sessions::visibility};

/// How often the feed looks at the followed sessions: twice per sample.
pub const FEED_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// Sessions one look reads per statement.
const PROBE_BATCH: usize = 256;
/// Samples a follower may fall behind before it misses some (it gets the newest next).
const FOLLOWER_BUFFER: usize = 16;

/// One sample of a session as a follower gets it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub sampled_at: DateTime<Utc>,
    /// Per slot: the latest value, and the average and maximum since it started.
    pub uses: Vec<SlotUse>,
}

impl Reading {
    fn of(s: &session::Model) -> Option<Self> {
        Some(Self { sampled_at: s.utilization_sampled_at?, uses: super::of(s) })
    }
}

/// What the feed tells the followers of one session.
#[derive(Clone, Debug)]
enum News {
    Sampled(Arc<Reading>),
    /// It has ended: no sample will come.
    Ended,
}

/// The one reader of followed sessions' samples. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UsageFeed(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    followed: Mutex<HashMap<Uuid, Followed>>,
    /// Looks taken, and the statements they ran (counted together when a look ends).
    figures: Mutex<(u64, u64)>,
}

#[derive(Debug)]
struct Followed {
    /// The latest sample told.
    told: Option<DateTime<Utc>>,
    news: broadcast::Sender<News>,
}

impl UsageFeed {
    /// A feed reading from `db` until the last clone is dropped.
    pub fn start(db: DatabaseConnection) -> Self {
        let inner = Arc::new(Inner { followed: Default::default(), figures: Mutex::new((0, 0)) });
        tokio::spawn(run(db, Arc::downgrade(&inner)));
        Self(inner)
    }

    /// How many looks the feed has taken, and how many statements they ran.
    pub fn figures(&self) -> (u64, u64) {
        *self.0.figures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows `id`, whose latest sample the follower already has (`told`).
    fn subscribe(&self, id: Uuid, told: Option<DateTime<Utc>>) -> broadcast::Receiver<News> {
        let mut followed = self.0.followed.lock().unwrap_or_else(PoisonError::into_inner);
        let f = followed.entry(id).or_insert_with(|| Followed { told, news: broadcast::channel(FOLLOWER_BUFFER).0 });
        f.news.subscribe()
    }
}

async fn run(db: DatabaseConnection, inner: std::sync::Weak<Inner>) {
    let mut ticks = tokio::time::interval(FEED_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let ids: Vec<Uuid> = {
            let mut followed = inner.followed.lock().unwrap_or_else(PoisonError::into_inner);
            followed.retain(|_, f| f.news.receiver_count() > 0);
            followed.keys().copied().collect()
        };
        if ids.is_empty() {
            continue;
        }
        let mut ran = 0;
        if let Err(e) = look(&db, &inner, &ids, &mut ran).await {
            tracing::warn!(error = ?e, "reading followed sessions' use failed; retrying");
        }
        let mut figures = inner.figures.lock().unwrap_or_else(PoisonError::into_inner);
        *figures = (figures.0 + 1, figures.1 + ran);
    }
}

/// One look at the followed sessions `ids`: each new sample told, each end too.
async fn look(db: &DatabaseConnection, inner: &Inner, ids: &[Uuid], ran: &mut u64) -> DomainResult<()> {
    for chunk in ids.chunks(PROBE_BATCH) {
        let rows: HashMap<Uuid, session::Model> = session::Entity::find()
            .filter(session::Column::Id.is_in(padded(chunk.iter().copied())))
            .all(db)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        *ran += 1;
        let mut followed = inner.followed.lock().unwrap_or_else(PoisonError::into_inner);
        for id in chunk {
            let Some(f) = followed.get_mut(id) else { continue };
            let s = rows.get(id);
            if let Some(reading) = s.and_then(Reading::of).filter(|r| Some(r.sampled_at) != f.told) {
                f.told = Some(reading.sampled_at);
                let _ = f.news.send(News::Sampled(Arc::new(reading)));
            }
            let ended = s.is_none_or(|s| SessionStatus::stored(&s.status).is_ok_and(SessionStatus::is_terminal));
            if ended {
                let _ = f.news.send(News::Ended);
                followed.remove(id);
            }
        }
    }
    Ok(())
}

/// What session `session_id` uses, followed, for a viewer who may work on it (otherwise
/// not found, [`visibility::session_to_work_on`]): its latest sample, then each new one,
/// until it has ended. When the viewer's credentials change, that right is checked again,
/// and the feed ends with the error if it is gone.
pub async fn follow(
    db: &DatabaseConnection,
    feed: &UsageFeed,
    credentials: &Credentials,
    viewer: &Viewer,
    session_id: Uuid,
) -> DomainResult<BoxStream<'static, DomainResult<Reading>>> {
    let mut changes = credentials.changes();
    changes.mark_unchanged();
    let s = visibility::session_to_work_on(db, viewer, session_id).await?;
    let first = Reading::of(&s);
    if SessionStatus::stored(&s.status)?.is_terminal() {
        return Ok(futures_util::stream::iter(first.map(Ok)).boxed());
    }
    let mut news = feed.subscribe(session_id, first.as_ref().map(|r| r.sampled_at));
    let db = db.clone();
    let credentials = credentials.clone();
    let keypair = viewer.keypair_id;
    let mut told = first.as_ref().map(|r| r.sampled_at);
    let next = produced(move |out| async move {
        loop {
            let item = tokio::select! {
                item = news.recv() => item,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if let Err(e) = still_follows(&db, &credentials, &mut changes, keypair, session_id).await {
                        let _ = out.send(Err(e)).await;
                        return;
                    }
                    continue;
                }
            };
            match item {
                Ok(News::Sampled(r)) if told.is_none_or(|t| r.sampled_at > t) => {
                    told = Some(r.sampled_at);
                    if out.send(Ok(Reading::clone(&r))).await.is_err() {
                        return;
                    }
                }
                Ok(News::Sampled(_)) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Ok(News::Ended) | Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    Ok(futures_util::stream::iter(first.map(Ok)).chain(next).boxed())
}

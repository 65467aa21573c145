//! A session's log: the lines its runtime wrote, oldest first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use tokio::sync::broadcast;
use uuid::Uuid;

use entity::session_log;

use crate::domain::directory::credentials::Credentials;
use crate::domain::live::follow::{produced, still_follows};
use crate::domain::{DomainError, DomainResult};

pub const DEFAULT_TAIL: u32 = 100;
pub const MAX_TAIL: u32 = 1000;

/// The last `tail` lines (1 to [`MAX_TAIL`]) of a session the caller may see (visibility is
/// checked by whoever found the session), oldest first.
pub async fn tail(db: &impl ConnectionTrait, session_id: Uuid, tail: i64) -> DomainResult<Vec<String>> {
    let tail = u64::try_from(tail).ok().filter(|n| (1..=u64::from(MAX_TAIL)).contains(n)).ok_or_else(|| {
        DomainError::bad_input("OUT_OF_RANGE", Some("tail".to_owned()), format!("`tail` is between 1 and {MAX_TAIL}"))
    })?;
    let mut lines: Vec<String> = session_log::Entity::find()
        .filter(session_log::Column::SessionId.eq(session_id))
        .order_by_desc(session_log::Column::Id)
        .limit(tail)
        .all(db)
        .await?
        .into_iter()
        .map(|l| l.line)
        .collect();
    lines.reverse();
    Ok(lines)
}

/// How often the log feed looks for new lines while anyone follows a log.
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);
/// Most lines one read of one followed log takes.
const FOLLOW_BATCH: u64 = 500;
/// Sessions one look of the feed probes per statement.
const PROBE_BATCH: usize = 256;
/// Batches of lines a follower may fall behind before it misses some (it is told so).
const FOLLOWER_BUFFER: usize = 256;
/// Reads of one live session's new lines in one look at most: 20 000 lines a second.
const MAX_READS: u32 = 10;

/// What the log feed tells the followers of one session.
#[derive(Clone, Debug)]
enum News {
    /// New lines, with their ids, in order.
    Lines(Arc<[(i64, String)]>),
    /// The session has ended and its last line is out.
    Ended,
}

/// The one reader of the logs people follow, shared by every follower of every session:
/// each look costs one statement for all followed sessions (their status and newest line),
/// and one more for each session that has new lines, whatever the number of followers.
/// Runs on the background connection, never on the requests' pool. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LogFeed(Arc<FeedInner>);

#[derive(Debug)]
struct FeedInner {
    followed: Mutex<HashMap<Uuid, Followed>>,
    /// Looks taken, and the statements they ran: for tests and metrics. Counted together
    /// when a look ends, so that a reader never sees a look without its statements.
    figures: Mutex<(u64, u64)>,
}

#[derive(Debug)]
struct Followed {
    /// Every line up to this id was sent; `None` until the first follower read its tail.
    after: Option<i64>,
    news: broadcast::Sender<News>,
}

impl LogFeed {
    /// A feed reading from `db` (the background connection) until the last clone is dropped.
    pub fn start(db: DatabaseConnection) -> Self {
        let inner = Arc::new(FeedInner { followed: Default::default(), figures: Mutex::new((0, 0)) });
        tokio::spawn(run_feed(db, Arc::downgrade(&inner)));
        Self(inner)
    }

    /// How many looks the feed has taken, and how many statements they ran.
    pub fn figures(&self) -> (u64, u64) {
        *self.0.figures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sessions followed now.
    pub fn followed(&self) -> usize {
        self.0.followed.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn subscribe(&self, session_id: Uuid) -> broadcast::Receiver<News> {
        let mut followed = self.0.followed.lock().unwrap_or_else(PoisonError::into_inner);
        let f = followed
            .entry(session_id)
            .or_insert_with(|| Followed { after: None, news: broadcast::channel(FOLLOWER_BUFFER).0 });
        f.news.subscribe()
    }

    /// The feed reads `session_id` after line `after` at the latest: a follower that read
    /// its tail earlier than another gets the lines in between too (each follower drops
    /// those it has shown).
    fn read_after(&self, session_id: Uuid, after: i64) {
        let mut followed = self.0.followed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = followed.get_mut(&session_id) {
            f.after = Some(f.after.map_or(after, |a| a.min(after)));
        }
    }
}

/// The feed's loop: a look every [`FOLLOW_EVERY`] while anyone follows a log.
async fn run_feed(db: DatabaseConnection, inner: std::sync::Weak<FeedInner>) {
    let mut ticks = tokio::time::interval(FOLLOW_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(e) = look(&db, &inner).await {
            tracing::warn!(error = ?e, "reading followed logs failed; retrying");
        }
    }
}

/// One look: which followed sessions have new lines or have ended, then their new lines.
async fn look(db: &DatabaseConnection, inner: &FeedInner) -> DomainResult<()> {
    let watched: Vec<(Uuid, i64)> = {
        let mut followed = inner.followed.lock().unwrap_or_else(PoisonError::into_inner);
        followed.retain(|_, f| f.news.receiver_count() > 0);
        followed.iter().filter_map(|(id, f)| Some((*id, f.after?))).collect()
    };
    if watched.is_empty() {
        return Ok(());
    }
    let mut ran = 0;
    let read = read_news(db, inner, &watched, &mut ran).await;
    let mut figures = inner.figures.lock().unwrap_or_else(PoisonError::into_inner);
    *figures = (figures.0 + 1, figures.1 + ran);
    read
}

/// The news of the `watched` sessions (each with the last line its followers have), told
/// to their followers; `ran` counts the statements.
async fn read_news(
    db: &DatabaseConnection,
    inner: &FeedInner,
    watched: &[(Uuid, i64)],
    ran: &mut u64,
) -> DomainResult<()> {
    for chunk in watched.chunks(PROBE_BATCH) {
        let ids: Vec<Uuid> = chunk.iter().map(|(id, _)| *id).collect();
        let probed = probe(db, &ids).await?;
        *ran += 1;
        for (id, after) in chunk {
            let (ended, newest) = match probed.get(id) {
                Some((status, newest)) => (status.is_terminal(), *newest),
                None => (true, None), // gone
            };
            let mut after = *after;
            let mut reads = 0;
            if newest.is_some_and(|n| n > after) {
                loop {
                    let lines = session_log::Entity::find()
                        .filter(session_log::Column::SessionId.eq(*id))
                        .filter(session_log::Column::Id.gt(after))
                        .order_by_asc(session_log::Column::Id)
                        .limit(FOLLOW_BATCH)
                        .all(db)
                        .await?;
                    *ran += 1;
                    let full = lines.len() as u64 == FOLLOW_BATCH;
                    if let Some(last) = lines.last() {
                        after = last.id;
                    }
                    let lines: Arc<[(i64, String)]> = lines.into_iter().map(|l| (l.id, l.line)).collect();
                    tell(inner, *id, Some(after), News::Lines(lines));
                    reads += 1;
                    // An ended session's log is read to its end; a live one's up to
                    // MAX_READS batches a look (faster than any session writes).
                    if !full || (!ended && reads >= MAX_READS) {
                        break;
                    }
                }
            } else if ended {
                // Read after its end was seen: nothing more will come.
                tell(inner, *id, None, News::Ended);
                inner.followed.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
            }
        }
    }
    Ok(())
}

fn tell(inner: &FeedInner, id: Uuid, after: Option<i64>, news: News) {
    let mut followed = inner.followed.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(f) = followed.get_mut(&id) {
        if after.is_some() {
            f.after = after;
        }
        let _ = f.news.send(news); // nobody listening: dropped at the next look
    }
}

/// The status and newest log line of each of `ids` that exists, in one statement.
async fn probe(
    db: &DatabaseConnection,
    ids: &[Uuid],
) -> DomainResult<HashMap<Uuid, (crate::domain::model::status::SessionStatus, Option<i64>)>> {
    use sea_orm::FromQueryResult;
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
    #[derive(FromQueryResult)]
    struct Row {
        id: Uuid,
        status: String,
        newest: Option<i64>,
    }
    let newest = Query::select()
        .expr(Expr::col((Alias::new("l"), session_log::Column::Id)).max())
        .from_as(session_log::Entity, Alias::new("l"))
        .and_where(
            Expr::col((Alias::new("l"), session_log::Column::SessionId))
                .equals((entity::session::Entity, entity::session::Column::Id)),
        )
        .to_owned();
    let select = Query::select()
        .column((entity::session::Entity, entity::session::Column::Id))
        .column((entity::session::Entity, entity::session::Column::Status))
        .expr_as(Expr::SubQuery(None, Box::new(newest.into())), Alias::new("newest"))
        .from(entity::session::Entity)
        .and_where(
            Expr::col((entity::session::Entity, entity::session::Column::Id))
                .is_in(crate::domain::padded(ids.iter().copied())),
        )
        .to_owned();
    let backend = db.get_database_backend();
    let rows = Row::find_by_statement(backend.build(&select)).all(db).await?;
    rows.into_iter()
        .map(|r| Ok((r.id, (crate::domain::model::status::SessionStatus::stored(&r.status)?, r.newest))))
        .collect()
}

/// The log of a session the viewer may see, followed: its last `tail` lines (0 to
/// [`MAX_TAIL`]), then each new line as the runtime writes it, until the session has ended
/// and its last line is out. A session the viewer may not see is not found. New lines come
/// from the shared [`LogFeed`]; when the viewer's credentials change, the right to see the
/// session is checked again, and the feed ends with the error if it is gone.
pub async fn follow(
    db: &DatabaseConnection,
    feed: &LogFeed,
    credentials: &Credentials,
    viewer: &crate::domain::directory::auth::Viewer,
    session_id: Uuid,
    tail: i64,
) -> DomainResult<BoxStream<'static, DomainResult<String>>> {
    let tail = u64::try_from(tail).ok().filter(|n| *n <= u64::from(MAX_TAIL)).ok_or_else(|| {
        DomainError::bad_input("OUT_OF_RANGE", Some("tail".to_owned()), format!("`tail` is between 0 and {MAX_TAIL}"))
    })?;
    // Before the check: a change of credentials from here on is seen, and checked again.
    let mut changes = credentials.changes();
    changes.mark_unchanged();
    // Subscribe first: every line committed after the tail below reaches the receiver, and
    // an end after the check below is heard.
    let mut news = feed.subscribe(session_id);
    let session = crate::domain::sessions::visibility::session_to_work_on(db, viewer, session_id).await?;
    // Ended already: its tail is all there will be.
    let ended = crate::domain::model::status::SessionStatus::stored(&session.status)?.is_terminal();
    let mut first: Vec<session_log::Model> = session_log::Entity::find()
        .filter(session_log::Column::SessionId.eq(session_id))
        .order_by_desc(session_log::Column::Id)
        .limit(tail.max(1))
        .all(db)
        .await?;
    let shown_to = first.first().map_or(0, |l| l.id);
    feed.read_after(session_id, shown_to);
    first.reverse();
    let shown: Vec<DomainResult<String>> =
        if tail == 0 { Vec::new() } else { first.into_iter().map(|l| Ok(l.line)).collect() };
    let db = db.clone();
    let credentials = credentials.clone();
    let keypair = viewer.keypair_id;
    let new_lines = produced(move |out| async move {
        if ended {
            return;
        }
        let mut seen = shown_to;
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
            let lines = match item {
                Ok(News::Lines(lines)) => lines,
                Ok(News::Ended) | Err(broadcast::error::RecvError::Closed) => return,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let note = format!("[{n} batch(es) of lines not shown here: this follower fell behind]");
                    if out.send(Ok(note)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            for (id, line) in lines.iter() {
                if *id > seen {
                    seen = *id;
                    if out.send(Ok(line.clone())).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    Ok(futures_util::stream::iter(shown).chain(new_lines).boxed())
}

/// How long and how much of finished sessions' logs is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// A finished session's log goes this many days after its end (`None`: kept).
    pub days: Option<u32>,
    /// Lines one user's finished sessions keep together at most (`None`: no budget); past
    /// it the oldest go first.
    pub lines_per_user: Option<u64>,
}

/// Lines one retention statement deletes at most: a long log goes in short transactions.
const RETIRE_BATCH: u64 = 10_000;
/// Between two such statements.
const RETIRE_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Deletes what `retention` no longer keeps of finished sessions' logs (a live session's
/// log is never touched: it is capped as it is written). Returns the lines deleted.
pub async fn retire(
    db: &DatabaseConnection,
    retention: Retention,
    now: chrono::DateTime<chrono::Utc>,
) -> DomainResult<u64> {
    use entity::session;
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
    let finished: Vec<&str> =
        crate::domain::model::status::SessionStatus::TERMINAL.iter().map(|s| s.as_str()).collect();
    let backend = db.get_database_backend();
    let mut deleted = 0;
    // Deletes, batch by batch, the lines `which` selects (ids of lines, oldest first).
    let delete_all = async |which: sea_orm::sea_query::SelectStatement, mut budget: u64| -> DomainResult<u64> {
        let mut gone = 0;
        while budget > 0 {
            let batch = std::cmp::min(budget, RETIRE_BATCH);
            let ids = which.clone().limit(batch).to_owned();
            let delete = Query::delete()
                .from_table(session_log::Entity)
                .and_where(Expr::col(session_log::Column::Id).in_subquery(ids))
                .to_owned();
            let n = db.execute_raw(backend.build(&delete)).await?.rows_affected();
            gone += n;
            budget = budget.saturating_sub(n);
            if n < batch {
                break;
            }
            // Room for the rest of the server's work between two batches.
            tokio::time::sleep(RETIRE_PAUSE).await;
        }
        Ok(gone)
    };
    let lines_of = |owner: Option<uuid::Uuid>| {
        let mut q = Query::select();
        q.column((Alias::new("l"), session_log::Column::Id))
            .from_as(session_log::Entity, Alias::new("l"))
            .inner_join(
                session::Entity,
                Expr::col((session::Entity, session::Column::Id))
                    .equals((Alias::new("l"), session_log::Column::SessionId)),
            )
            .and_where(Expr::col((session::Entity, session::Column::Status)).is_in(finished.clone()));
        if let Some(owner) = owner {
            q.and_where(Expr::col((session::Entity, session::Column::OwnerId)).eq(owner));
        }
        q.order_by((Alias::new("l"), session_log::Column::Id), sea_orm::Order::Asc);
        q
    };
    if let Some(days) = retention.days {
        let cutoff = now - chrono::TimeDelta::days(i64::from(days));
        // Since it became finished (`terminated_at` says so too, where it is set).
        let old = lines_of(None)
            .and_where(Expr::col((session::Entity, session::Column::StatusChangedAt)).lt(cutoff))
            .to_owned();
        deleted += delete_all(old, u64::MAX).await?;
    }
    if let Some(budget) = retention.lines_per_user {
        #[derive(sea_orm::FromQueryResult)]
        struct Over {
            owner_id: uuid::Uuid,
            lines: i64,
        }
        let per_owner = lines_of(None)
            .clear_order_by()
            .clear_selects()
            .column((session::Entity, session::Column::OwnerId))
            .expr_as(Expr::col((Alias::new("l"), session_log::Column::Id)).count(), Alias::new("lines"))
            .group_by_col((session::Entity, session::Column::OwnerId))
            .to_owned();
        let over: Vec<Over> =
            <Over as sea_orm::FromQueryResult>::find_by_statement(backend.build(&per_owner)).all(db).await?;
        for o in over {
            let excess = u64::try_from(o.lines).unwrap_or(0).saturating_sub(budget);
            if excess > 0 {
                deleted += delete_all(lines_of(Some(o.owner_id)), excess).await?;
            }
        }
    }
    Ok(deleted)
}

/// Applies `retention` now and then every `every`, until the process ends.
pub async fn retire_forever(db: DatabaseConnection, retention: Retention, every: std::time::Duration) {
    if retention.days.is_none() && retention.lines_per_user.is_none() {
        return;
    }
    loop {
        match retire(&db, retention, crate::domain::model::clock::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("log retention: {n} line(s) of finished sessions deleted"),
            Err(e) => tracing::warn!(error = ?e, "log retention failed; trying again later"),
        }
        tokio::time::sleep(every).await;
    }
}

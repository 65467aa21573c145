//! A session's log: the lines its runtime wrote, oldest first.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use entity::session_log;

use super::{DomainError, DomainResult};

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

/// How often a followed log is read for new lines.
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);
/// Most lines one read of a followed log takes.
const FOLLOW_BATCH: u64 = 500;

/// The log of a session the viewer may see, followed: its last `tail` lines (0 to
/// [`MAX_TAIL`]), then each new line as the runtime writes it, until the session has ended
/// and its last line is out. A session the viewer may not see is not found.
pub async fn follow(
    db: &sea_orm::DatabaseConnection,
    viewer: &super::auth::Viewer,
    session_id: Uuid,
    tail: i64,
) -> DomainResult<futures_util::stream::BoxStream<'static, DomainResult<String>>> {
    use futures_util::StreamExt;
    let tail = u64::try_from(tail).ok().filter(|n| *n <= u64::from(MAX_TAIL)).ok_or_else(|| {
        DomainError::bad_input("OUT_OF_RANGE", Some("tail".to_owned()), format!("`tail` is between 0 and {MAX_TAIL}"))
    })?;
    super::visibility::visible_session(db, viewer, session_id).await?;
    let mut first: Vec<session_log::Model> = session_log::Entity::find()
        .filter(session_log::Column::SessionId.eq(session_id))
        .order_by_desc(session_log::Column::Id)
        .limit(tail.max(1))
        .all(db)
        .await?;
    let after = first.first().map_or(0, |l| l.id);
    first.reverse();
    let shown: Vec<DomainResult<String>> =
        if tail == 0 { Vec::new() } else { first.into_iter().map(|l| Ok(l.line)).collect() };
    struct Follow {
        db: sea_orm::DatabaseConnection,
        after: i64,
        over: bool,
    }
    let state = Follow { db: db.clone(), after, over: false };
    let new_lines = futures_util::stream::unfold(state, move |mut f| async move {
        loop {
            if f.over {
                return None;
            }
            let ended = match status_of(&f.db, session_id).await {
                Ok(status) => status.is_none_or(super::status::SessionStatus::is_terminal),
                Err(e) => return Some((vec![Err(e)], Follow { over: true, ..f })),
            };
            let lines = session_log::Entity::find()
                .filter(session_log::Column::SessionId.eq(session_id))
                .filter(session_log::Column::Id.gt(f.after))
                .order_by_asc(session_log::Column::Id)
                .limit(FOLLOW_BATCH)
                .all(&f.db)
                .await;
            match lines {
                Err(e) => return Some((vec![Err(e.into())], Follow { over: true, ..f })),
                Ok(lines) if lines.is_empty() => {
                    if ended {
                        return None; // read after the end was seen: nothing more will come
                    }
                    tokio::time::sleep(FOLLOW_EVERY).await;
                }
                Ok(lines) => {
                    f.after = lines.last().map_or(f.after, |l| l.id);
                    let out = lines.into_iter().map(|l| Ok(l.line)).collect();
                    return Some((out, f));
                }
            }
        }
    })
    .flat_map(futures_util::stream::iter);
    Ok(futures_util::stream::iter(shown).chain(new_lines).boxed())
}

/// A session's status, `None` when it is gone.
async fn status_of(db: &impl ConnectionTrait, id: Uuid) -> DomainResult<Option<super::status::SessionStatus>> {
    let status: Option<String> = entity::session::Entity::find_by_id(id)
        .select_only()
        .column(entity::session::Column::Status)
        .into_tuple()
        .one(db)
        .await?;
    status.map(|s| super::status::SessionStatus::stored(&s)).transpose()
}

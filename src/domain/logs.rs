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

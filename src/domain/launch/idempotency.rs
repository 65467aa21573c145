//! Idempotent launches: a retry with the same key returns the first call's result and
//! creates nothing new, for at least [`IDEMPOTENCY_RETENTION`].

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{idempotency_key, launch_group, session};

use super::Launched;
use crate::domain::auth::Viewer;
use crate::domain::{DomainError, DomainResult};

/// Idempotency keys are honoured for at least this long.
pub const IDEMPOTENCY_RETENTION: TimeDelta = TimeDelta::hours(24);

pub fn stored_result(l: &Launched, batch: bool) -> Value {
    json!({
        "batch": batch,
        "launchGroupId": l.launch_group.as_ref().map(|g| g.id),
        "sessionIds": l.sessions.iter().map(|s| s.id).collect::<Vec<_>>(),
    })
}

async fn replay(db: &impl ConnectionTrait, stored: &Value) -> DomainResult<Launched> {
    let ids: Vec<Uuid> =
        stored["sessionIds"].as_array().into_iter().flatten().filter_map(|v| v.as_str()?.parse().ok()).collect();
    let group_id: Option<Uuid> = stored["launchGroupId"].as_str().and_then(|s| s.parse().ok());
    let mut sessions = session::Entity::find().filter(session::Column::Id.is_in(ids.clone())).all(db).await?;
    sessions.sort_by_key(|s| ids.iter().position(|id| *id == s.id));
    let launch_group = match group_id {
        Some(id) => launch_group::Entity::find_by_id(id).one(db).await?,
        None => None,
    };
    Ok(Launched { launch_group, sessions })
}

/// The result of an earlier launch with this key, if it is recent enough. A key first used
/// for a single launch cannot replay a batch launch, or the reverse.
pub async fn remembered(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    key: &str,
    batch: bool,
    now: DateTime<Utc>,
) -> DomainResult<Option<Launched>> {
    let row = idempotency_key::Entity::find_by_id((viewer.user_id, key.to_owned())).one(db).await?;
    match row {
        Some(r) if now - r.created_at < IDEMPOTENCY_RETENTION => {
            if r.response["batch"].as_bool() != Some(batch) {
                return Err(DomainError::bad_input(
                    "IDEMPOTENCY_KEY_REUSED",
                    Some("idempotency_key".to_owned()),
                    "this idempotency key was used for another kind of launch",
                ));
            }
            Ok(Some(replay(db, &r.response).await?))
        }
        _ => Ok(None),
    }
}

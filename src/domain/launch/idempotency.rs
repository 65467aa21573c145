//! Idempotent launches: a retry with the same key returns the first call's result and
//! creates nothing new, for at least [`IDEMPOTENCY_RETENTION`]. A retry is authorized and
//! validated like a first call, and must send the same launch: the key remembers a
//! fingerprint of it, and the same key with another launch is refused.

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use entity::{idempotency_key, launch_group, session};

use super::{Launched, Plan};
use crate::domain::directory::auth::Viewer;
use crate::domain::{DomainError, DomainResult};

/// Idempotency keys are honoured for at least this long.
pub const IDEMPOTENCY_RETENTION: TimeDelta = TimeDelta::hours(24);

/// What identifies a launch: every field of its request, single or batch, and the batch's
/// size, hashed (SHA-256, hex).
pub fn fingerprint(plan: &Plan, batch: bool) -> String {
    let r = &plan.launch;
    let request = json!({
        "project": r.project_id,
        "name": r.name,
        "type": r.session_type.as_str(),
        "image": r.image,
        "resourceGroup": r.resource_group,
        "resources": r.resources,
        "clusterSize": r.cluster_size,
        "environment": r.environment,
        "startupCommand": r.startup_command,
        "batchTimeoutSeconds": r.batch_timeout_seconds,
        "priority": r.priority,
        "startsAt": r.starts_at,
        "dependsOn": r.depends_on,
        "callbackUrl": r.callback_url,
        "callbackOnRunning": r.callback_on_running,
        "mounts": plan.mounts,
        "batch": batch,
        "count": plan.names.len(),
    });
    crate::domain::directory::secrets::hex(&Sha256::digest(request.to_string().as_bytes()))
}

pub fn stored_result(l: &Launched, batch: bool, fingerprint: &str) -> Value {
    json!({
        "request": fingerprint,
        "batch": batch,
        "launchGroupId": l.launch_group.as_ref().map(|g| g.id),
        "sessionIds": l.sessions.iter().map(|s| s.id).collect::<Vec<_>>(),
    })
}

async fn replay(db: &impl ConnectionTrait, stored: &Value) -> DomainResult<Launched> {
    let ids: Vec<Uuid> =
        stored["sessionIds"].as_array().into_iter().flatten().filter_map(|v| v.as_str()?.parse().ok()).collect();
    let group_id: Option<Uuid> = stored["launchGroupId"].as_str().and_then(|s| s.parse().ok());
    let mut sessions = session::Entity::find()
        .filter(session::Column::Id.is_in(crate::domain::padded(ids.iter().copied())))
        .all(db)
        .await?;
    sessions.sort_by_key(|s| ids.iter().position(|id| *id == s.id));
    let launch_group = match group_id {
        Some(id) => launch_group::Entity::find_by_id(id).one(db).await?,
        None => None,
    };
    Ok(Launched { launch_group, sessions })
}

/// The result of an earlier launch with this key, if it is recent enough. The key must
/// have been used for the same launch (`fingerprint`): a key first used for another
/// launch, or for a single launch where this is a batch, is refused.
pub async fn remembered(
    db: &impl ConnectionTrait,
    viewer: &Viewer,
    key: &str,
    fingerprint: &str,
    now: DateTime<Utc>,
) -> DomainResult<Option<Launched>> {
    let row = idempotency_key::Entity::find_by_id((viewer.user_id, key.to_owned())).one(db).await?;
    match row {
        Some(r) if now - r.created_at < IDEMPOTENCY_RETENTION => {
            if r.response["request"].as_str() != Some(fingerprint) {
                return Err(DomainError::IdempotencyKeyReused);
            }
            Ok(Some(replay(db, &r.response).await?))
        }
        _ => Ok(None),
    }
}

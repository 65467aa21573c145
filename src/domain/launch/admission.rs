//! The refusals of a launch that depend on the caller's policy and other sessions: a
//! priority above the policy's `max_priority`, the keypair's pending-session limit
//! (`QUOTA_EXCEEDED`) and names already live (`NAME_TAKEN`; the unique index still decides
//! races). Run inside the launch transaction, and by the dry run.
//! What it finds admissible comes with what the policy gives each session (its lifetime and
//! idle checks).

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter};

use entity::session;

use super::Plan;
use crate::domain::directory::auth::Viewer;
use crate::domain::model::status::SessionStatus;
use crate::domain::reclaim::expiry::Granted;
use crate::domain::{DomainError, DomainResult};

/// A live session of `owner` named one of `names` (but session `except`), if there is one:
/// names are unique among an owner's live sessions (the unique index still decides races).
pub async fn live_name_taken(
    db: &impl ConnectionTrait,
    owner: uuid::Uuid,
    names: &[String],
    except: Option<uuid::Uuid>,
) -> DomainResult<Option<session::Model>> {
    let mut query = session::Entity::find()
        .filter(session::Column::OwnerId.eq(owner))
        .filter(session::Column::Name.is_in(crate::domain::padded(names.iter().cloned())))
        .filter(session::Column::Status.is_not_in(SessionStatus::TERMINAL.iter().map(|s| s.as_str())));
    if let Some(id) = except {
        query = query.filter(session::Column::Id.ne(id));
    }
    Ok(query.one(db).await?)
}

/// `Ok` with what the keypair's policy gives each session.
pub async fn admissible(db: &impl ConnectionTrait, viewer: &Viewer, plan: &Plan) -> DomainResult<Granted> {
    let policy = entity::keypair_resource_policy::Entity::find_by_id(viewer.resource_policy.clone()).one(db).await?;
    let granted = Granted::of(policy.as_ref());
    if let Some(policy) = policy {
        if let Some(most) = policy.max_priority.filter(|most| plan.launch.priority > *most) {
            return Err(DomainError::bad_input(
                "OUT_OF_RANGE",
                Some("priority".to_owned()),
                format!("your keypair's policy allows priorities up to {most}"),
            ));
        }
        let pending = session::Entity::find()
            .filter(session::Column::KeypairId.eq(viewer.keypair_id))
            .filter(session::Column::Status.eq(SessionStatus::Pending.as_str()))
            .count(db)
            .await?;
        let limit = u64::try_from(policy.max_pending_sessions).unwrap_or(0);
        if pending + plan.names.len() as u64 > limit {
            return Err(DomainError::QuotaExceeded(format!(
                "your keypair may have {limit} pending sessions; {pending} are pending and this launch adds {}",
                plan.names.len()
            )));
        }
    }
    match live_name_taken(db, viewer.user_id, &plan.names, None).await? {
        Some(s) => Err(DomainError::NameTaken(s.name)),
        None => Ok(granted),
    }
}

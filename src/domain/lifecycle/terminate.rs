//! Ending sessions: PENDING ones are cancelled at once; started ones go TERMINATING (the
//! runtime finishes them) or, with `force`, TERMINATED at once; terminal ones are skipped;
//! ones the viewer may not see are NOT_FOUND, exactly like unknown ones.

use std::collections::{BTreeSet, HashMap};

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

use entity::session;

use crate::domain::directory::auth::Viewer;
use crate::domain::lifecycle::{self, Applied, Change};
use crate::domain::live::events::EventBus;
use crate::domain::model::actor::Actor;
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, InputProblem, model::clock, sessions::visibility};

/// The most sessions one request may end.
pub const MAX_TERMINATE_IDS: usize = 500;

/// One outcome of a termination request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminateOutcome {
    Cancelled,
    Terminating,
    Terminated,
    Skipped,
    NotFound,
}

/// Ends sessions: PENDING ones are cancelled at once; started ones go TERMINATING (the
/// runtime finishes them) or, with `force`, TERMINATED at once; terminal ones are skipped;
/// ones the viewer may not see are NOT_FOUND. One outcome per requested id, in order.
pub async fn terminate(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    ids: &[Option<Uuid>],
    force: bool,
) -> DomainResult<Vec<(TerminateOutcome, Option<session::Model>)>> {
    if let Some(p) = InputProblem::too_many("ids", ids.len(), MAX_TERMINATE_IDS, "sessions at once") {
        return Err(DomainError::BadInput(vec![p]));
    }
    let now = clock::now();
    let wanted: Vec<Uuid> = ids.iter().flatten().copied().collect::<BTreeSet<_>>().into_iter().collect();
    let txn = crate::domain::begin_write(db).await?;
    let found =
        session::Entity::find().filter(session::Column::Id.is_in(crate::domain::padded(wanted))).all(&txn).await?;
    let visible: HashMap<Uuid, session::Model> = found
        .into_iter()
        .filter(|s| visibility::may_see_session(viewer, s.owner_id, s.domain_id))
        .map(|s| (s.id, s))
        .collect();
    // A session may move between the read and the update (the scheduler, the runtime):
    // then the change is worked out again from where it now is.
    let target = |s: &session::Model| -> DomainResult<Option<SessionStatus>> {
        Ok(match SessionStatus::stored(&s.status)? {
            SessionStatus::Pending => Some(SessionStatus::Cancelled),
            s if s.is_terminal() => None,
            SessionStatus::Terminating if !force => None,
            _ if force => Some(SessionStatus::Terminated),
            _ => Some(SessionStatus::Terminating),
        })
    };
    let reason = if force { "force-terminated" } else { "user-requested" };
    let mut current = visible;
    let mut changed: BTreeSet<Uuid> = BTreeSet::new();
    let mut transitions = lifecycle::Transitions::default();
    for _ in 0..3 {
        let mut changes = Vec::new();
        for s in current.values().filter(|s| !changed.contains(&s.id)) {
            if let Some(to) = target(s)? {
                changes.push(Change::new(s.clone(), to, reason.to_owned(), Actor::User(viewer.user_id)));
            }
        }
        if changes.is_empty() {
            break;
        }
        let applied = lifecycle::apply(&txn, changes, now, &mut transitions).await?;
        let mut moved = false;
        for a in applied {
            match a {
                Applied::Changed(s) => {
                    changed.insert(s.id);
                    current.insert(s.id, s);
                }
                Applied::Moved(s) => {
                    moved = true;
                    current.insert(s.id, s);
                }
            }
        }
        if !moved {
            break;
        }
    }
    lifecycle::commit(txn, transitions, bus).await?;

    let after: HashMap<Uuid, (bool, session::Model)> =
        current.into_iter().map(|(id, s)| (id, (changed.contains(&id), s))).collect();
    Ok(ids
        .iter()
        .map(|id| match id.and_then(|id| after.get(&id)) {
            None => (TerminateOutcome::NotFound, None),
            Some((changed, s)) => {
                let outcome = match (changed, SessionStatus::parse(&s.status)) {
                    (true, Some(SessionStatus::Cancelled)) => TerminateOutcome::Cancelled,
                    (true, Some(SessionStatus::Terminating)) => TerminateOutcome::Terminating,
                    (true, Some(SessionStatus::Terminated)) => TerminateOutcome::Terminated,
                    _ => TerminateOutcome::Skipped,
                };
                (outcome, Some(s.clone()))
            }
        })
        .collect())
}

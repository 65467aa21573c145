//! A session's `terminal` app, whichever engine runs it: a shell in the local runtime's
//! sandbox ([`local::terminal`]) or in a Slurm job's allocation ([`slurm::terminal`]). It is
//! offered while an interactive session is RUNNING where this server can reach it, and only
//! its owner may open it.

use uuid::Uuid;

use entity::session;

use super::local::terminal::{LocalAccess, Shell, allowed, not_offered};
use super::{local, slurm};
use crate::domain::DomainResult;
use crate::domain::directory::auth::Viewer;
use crate::domain::model::SessionType;
use crate::domain::model::status::SessionStatus;

/// Whether session `s` offers its terminal now.
pub fn offered(local: Option<&LocalAccess>, s: &session::Model) -> bool {
    local::terminal::offered(local, s)
        || (s.session_type == SessionType::Interactive.as_str()
            && s.status == SessionStatus::Running.as_str()
            && slurm::terminal_of(&s.resource_group).is_some())
}

/// Whether session `s` offers its terminal now to `viewer`: only its owner may open it (an
/// administrator who sees another's session is not offered one that would refuse him).
pub fn offered_to(local: Option<&LocalAccess>, s: &session::Model, viewer: &Viewer) -> bool {
    s.owner_id == viewer.user_id && offered(local, s)
}

/// Opens a shell in session `id` for `viewer`, `cols` × `rows`. A session the viewer may
/// not see, or does not own, is not found; one whose terminal is not offered now is
/// refused.
pub async fn open(
    db: &sea_orm::DatabaseConnection,
    viewer: &Viewer,
    local: Option<&LocalAccess>,
    id: Uuid,
    cols: u16,
    rows: u16,
) -> DomainResult<Shell> {
    let s = allowed(db, viewer, id).await?;
    if local::terminal::offered(local, &s) {
        return local::terminal::open(local, &s, cols, rows);
    }
    match slurm::terminal_of(&s.resource_group) {
        Some(access) if offered(local, &s) => slurm::terminal::open(db, &access, &s, cols, rows).await,
        _ => Err(not_offered("the terminal is open while an interactive session runs where this server reaches it")),
    }
}

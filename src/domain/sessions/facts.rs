//! What a session shows, each value read from its stored row in one place: its kind,
//! status, result and resources as the domain's types, why it waits, its place in the
//! queue, its applications, its elapsed time. The GraphQL fields, the compiled list and the
//! CSV export all read a session through these.

use chrono::{DateTime, Utc};

use entity::session;

use crate::domain::DomainResult;
use crate::domain::model::SessionType;
use crate::domain::model::slots::ResourceSlots;
use crate::domain::model::status::{SessionResult, SessionStatus};
use crate::domain::sessions::occupancy::PendingReason;

/// Its kind (interactive, batch, inference, upload).
pub fn session_type(s: &session::Model) -> DomainResult<SessionType> {
    SessionType::stored(&s.session_type)
}

/// Its status.
pub fn status(s: &session::Model) -> DomainResult<SessionStatus> {
    SessionStatus::stored(&s.status)
}

/// How it ended (UNDEFINED while it runs).
pub fn result(s: &session::Model) -> DomainResult<SessionResult> {
    SessionResult::stored(&s.result)
}

/// What the whole session asks for: each container's request × the cluster size.
pub fn requested_slots(s: &session::Model) -> DomainResult<ResourceSlots> {
    ResourceSlots::from_json(&s.requested_slots)
}

/// What it was allocated, from SCHEDULED on (kept after it ends).
pub fn occupied_slots(s: &session::Model) -> DomainResult<ResourceSlots> {
    ResourceSlots::from_json(&s.occupied_slots)
}

/// Every current cause that keeps a session from starting, as the latest scheduling pass
/// found it while PENDING, or as its engine reports it while SCHEDULED.
pub fn pending_reasons(s: &session::Model) -> DomainResult<Vec<PendingReason>> {
    Ok(if waits(&s.status)? { PendingReason::list_from_json(&s.pending_reasons) } else { Vec::new() })
}

/// Whether a session in `status` may be waiting with reasons: PENDING (for the scheduler),
/// or SCHEDULED while its engine has not started it (Slurm's queue, an engine that does not
/// answer).
fn waits(status: &str) -> DomainResult<bool> {
    Ok(matches!(SessionStatus::stored(status)?, SessionStatus::Pending | SessionStatus::Scheduled))
}

/// Its place among the pending sessions of its resource group (1 is next), once the
/// scheduler has ordered it (or, SCHEDULED, its place in its engine's queue: the order Slurm
/// will start jobs in); none otherwise.
pub fn queue_position(s: &session::Model) -> DomainResult<Option<i32>> {
    queue_position_of(&s.status, s.queue_position)
}

/// [`queue_position`] of a session in status `status` with the stored position `position`.
pub fn queue_position_of(status: &str, position: Option<i32>) -> DomainResult<Option<i32>> {
    Ok(if waits(status)? { position } else { None })
}

/// Whether a session offers its image's applications now: once RUNNING.
pub fn offers_apps(s: &session::Model) -> DomainResult<bool> {
    Ok(status(s)? == SessionStatus::Running)
}

/// The applications of an image (e.g. jupyter, terminal).
pub fn image_apps(image: &entity::image::Model) -> Vec<String> {
    crate::domain::apps::of_image(image).into_iter().map(|a| a.name).collect()
}

/// The OCI reference an image is pulled from, as declared with it; `None` for an image
/// that runs on a root of the machine.
pub fn image_reference(image: &entity::image::Model) -> Option<String> {
    let declared = image.local_environment.clone()?;
    serde_json::from_value::<crate::domain::runtime::environments::LocalImage>(declared).ok()?.reference
}

/// The digest of an image: what a session of it ran (`ran`, its reference resolved when it
/// was pulled), else the digest its reference pins (`…@sha256:…`), if it names one.
pub fn image_digest(image: &entity::image::Model, ran: Option<&str>) -> Option<String> {
    match ran {
        Some(d) => Some(d.to_owned()),
        None => image_reference(image)?.rsplit_once('@').map(|(_, d)| d.to_owned()),
    }
}

/// How far a session's image pull is, as the session shows it: while it is PULLING only.
pub fn pull(s: &session::Model) -> Option<crate::domain::runtime::image::Progress> {
    (s.status == crate::domain::model::status::SessionStatus::Pulling.as_str())
        .then(|| crate::domain::runtime::reconcile::stored_progress(s).map(|(p, _)| p))
        .flatten()
}

/// A session's status in words, as a file shows it: `PULLING 43 %` while its image is
/// pulled, the status alone otherwise.
pub fn status_text(s: &session::Model) -> DomainResult<String> {
    let status = status(s)?.as_str();
    Ok(match pull(s).and_then(|p| p.percent()) {
        Some(percent) => format!("{status} {percent} %"),
        None => status.to_owned(),
    })
}

/// Whole seconds from creation to termination, or to `now` while not terminated.
pub fn elapsed_seconds(s: &session::Model, now: DateTime<Utc>) -> i64 {
    elapsed_between(s.created_at, s.terminated_at, now)
}

/// [`elapsed_seconds`] of a session created at `created_at` and terminated at `terminated_at`.
pub fn elapsed_between(created_at: DateTime<Utc>, terminated_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> i64 {
    std::cmp::max((terminated_at.unwrap_or(now) - created_at).num_seconds(), 0)
}

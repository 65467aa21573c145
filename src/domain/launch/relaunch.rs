//! Launching again: a new session from a session's stored launch (image, type, resource
//! group, resources per container, cluster size, environment, startup command, batch
//! timeout, priority), any of it overridden, through the same validation, quotas and
//! idempotency as a launch. Only the owner relaunches: anyone else's session is NOT_FOUND,
//! exactly like none. The new session says where it came from (`launched_from_*`), and
//! runs the digest its image ran as, unless asked for what the image's reference names now.

use sea_orm::{DatabaseConnection, EntityTrait};
use uuid::Uuid;

use entity::session;

use super::{LaunchLimits, LaunchRequest, Launched, Origin};
use crate::domain::directory::auth::Viewer;
use crate::domain::live::events::EventBus;
use crate::domain::model::SessionType;
use crate::domain::model::slots::ResourceRequest;
use crate::domain::runtime::env_vars;
use crate::domain::{DomainError, DomainResult};

/// What a relaunch changes; `None`: as the session was launched.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub name: Option<String>,
    pub session_type: Option<SessionType>,
    pub image: Option<String>,
    pub resource_group: Option<String>,
    /// Per container: (slot, amount); replaces the whole request.
    pub resources: Option<Vec<(String, f64)>>,
    pub cluster_size: Option<i32>,
    pub environment: Option<Vec<(String, String)>>,
    /// `Some(None)`: none.
    pub startup_command: Option<Option<String>>,
    /// `Some(None)`: none.
    pub batch_timeout_seconds: Option<Option<i64>>,
    pub priority: Option<i32>,
    pub idempotency_key: Option<String>,
    /// `Some(None)`: none.
    pub callback_url: Option<Option<String>>,
    pub callback_on_running: Option<bool>,
    /// Run what the image's reference names now, not the digest the session ran.
    pub newest_image: bool,
    /// Replaces every mount.
    pub mounts: Option<Vec<crate::domain::storage::mounts::MountRequest>>,
}

impl Overrides {
    /// `r` with what these change.
    pub fn apply(self, r: &mut LaunchRequest) {
        if let Some(name) = self.name {
            r.name = name;
        }
        r.session_type = self.session_type.unwrap_or(r.session_type);
        if let Some(image) = self.image {
            if image != r.image {
                r.image_digest = None;
            }
            r.image = image;
        }
        if self.newest_image {
            r.image_digest = None;
        }
        if let Some(group) = self.resource_group {
            r.resource_group = Some(group);
        }
        if let Some(resources) = self.resources {
            r.resources = resources;
        }
        r.cluster_size = self.cluster_size.unwrap_or(r.cluster_size);
        if let Some(environment) = self.environment {
            r.environment = environment;
        }
        if let Some(command) = self.startup_command {
            r.startup_command = command;
        }
        if let Some(timeout) = self.batch_timeout_seconds {
            r.batch_timeout_seconds = timeout;
        }
        r.priority = self.priority.unwrap_or(r.priority);
        r.idempotency_key = self.idempotency_key;
        if let Some(url) = self.callback_url {
            r.callback_url = url;
        }
        r.callback_on_running = self.callback_on_running.unwrap_or(r.callback_on_running);
        if let Some(mounts) = self.mounts {
            r.mounts = mounts;
        }
    }
}

/// The launch that made session `s`, as a request.
fn stored_request(s: &session::Model) -> DomainResult<LaunchRequest> {
    let request = ResourceRequest::from_stored(&s.requested_slots, s.cluster_size)?;
    Ok(LaunchRequest {
        project_id: s.project_id,
        name: s.name.clone(),
        session_type: SessionType::stored(&s.session_type)?,
        image: s.image.clone(),
        resource_group: Some(s.resource_group.clone()),
        resources: request.per_container.iter().map(|(slot, amount)| (slot.to_owned(), amount)).collect(),
        cluster_size: s.cluster_size,
        environment: env_vars(s),
        startup_command: s.startup_command.clone(),
        batch_timeout_seconds: s.batch_timeout_seconds,
        priority: s.priority,
        idempotency_key: None,
        origin: None,
        // The start time was that run's: a relaunch starts when asked.
        starts_at: None,
        // What it waited for has happened.
        depends_on: Vec::new(),
        callback_url: s.callback_url.clone(),
        callback_on_running: s.callback_on_running,
        // The same image as ran, unless asked for the newest.
        image_digest: s.image_digest.clone(),
        // The same folders at the same paths (checked again: access may have changed).
        mounts: crate::domain::storage::mounts::of(s)?.iter().map(|m| m.request()).collect(),
    })
}

/// Launches again what made the viewer's session `id`, with `o` changed.
pub async fn relaunch(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    id: Uuid,
    o: Overrides,
    limits: LaunchLimits,
) -> DomainResult<Launched> {
    let s = session::Entity::find_by_id(id)
        .one(db)
        .await?
        .filter(|s| s.owner_id == viewer.user_id)
        .ok_or(DomainError::NotFound("session"))?;
    let mut r = stored_request(&s)?;
    o.apply(&mut r);
    r.origin = Some(Origin::Session { id: s.id, name: s.name.clone() });
    super::launch(db, bus, viewer, &r, None, limits).await
}

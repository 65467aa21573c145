//! Launching sessions: one, or N identical ones ("Launch Multiple Sessions").
//!
//! - [`validate`]: every check of the request, each a small function returning its
//!   problems, all reported together; the result is a [`Plan`].
//! - [`admission`]: the refusals that depend on the caller's other sessions.
//! - [`write`]: all rows of a launch in one transaction, a constant number of statements.
//! - [`idempotency`]: a retry with the same key and launch gets the first result.
//! - [`check`]: the dry run, with the same checks and the scheduler's verdict.
//! - [`relaunch`]: a session's launch again, any of it changed.

pub mod admission;
pub mod check;
pub mod idempotency;
pub mod relaunch;
pub mod templates;
pub mod validate;
pub mod write;

use uuid::Uuid;

use entity::{image, launch_group, project, resource_group, session};

use crate::domain::directory::auth::Viewer;
use crate::domain::live::events::EventBus;
use crate::domain::model::SessionType;
use crate::domain::model::slots::ResourceRequest;
use crate::domain::{DomainError, DomainResult, model::clock};

pub use check::{LaunchCheck, check};
pub use validate::{session_names, valid_name};

/// What the launcher sends. Field names in input problems are these fields' names
/// (`resources[1]`, `startup_command`, …), and `count` for the batch size.
#[derive(Clone, Debug)]
pub struct LaunchRequest {
    pub project_id: Uuid,
    pub name: String,
    pub session_type: SessionType,
    pub image: String,
    pub resource_group: Option<String>,
    /// Per container: (slot, amount).
    pub resources: Vec<(String, f64)>,
    pub cluster_size: i32,
    pub environment: Vec<(String, String)>,
    pub startup_command: Option<String>,
    pub batch_timeout_seconds: Option<i64>,
    pub priority: i32,
    pub idempotency_key: Option<String>,
    /// Where it comes from, when it is launched again ([`relaunch`]).
    pub origin: Option<Origin>,
    /// A batch session waits until then; none: at once.
    pub starts_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A batch session waits for these sessions of its project to succeed (an id that
    /// names no session is `None`).
    pub depends_on: Vec<Option<Uuid>>,
    /// Told of the session's end by a signed POST ([`crate::domain::lifecycle::callbacks`]).
    pub callback_url: Option<String>,
    /// ... and of its start (RUNNING) too.
    pub callback_on_running: bool,
    /// The digest of the image to run (a relaunch's: what ran before); none: what the
    /// image's reference names when it is pulled.
    pub image_digest: Option<String>,
    /// Folders bound into its sandbox ([`crate::domain::storage::mounts`]).
    pub mounts: Vec<crate::domain::storage::mounts::MountRequest>,
}

/// What a session was launched from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Another session's launch ([`relaunch`]), and that session's name then.
    Session { id: Uuid, name: String },
    /// A template ([`crate::domain::launch::templates`]), and its name then.
    Template { id: Uuid, name: String },
}

impl Origin {
    pub fn name(&self) -> &str {
        match self {
            Self::Session { name, .. } | Self::Template { name, .. } => name,
        }
    }
}

/// The configured bounds of a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchLimits {
    /// The most sessions one "Launch Multiple Sessions" creates.
    pub max_count: u32,
    /// Where completion callbacks may go (`--callback-allow`); empty: nowhere.
    pub callbacks: std::sync::Arc<crate::domain::lifecycle::callbacks::Allow>,
    /// The most folders a launch mounts (`--max-mounts`).
    pub max_mounts: u32,
}

impl LaunchLimits {
    /// At most `max_count` sessions a launch, no callback, the default number of mounts.
    pub fn of(max_count: u32) -> Self {
        Self {
            max_count,
            callbacks: Default::default(),
            max_mounts: crate::domain::storage::mounts::DEFAULT_MAX_MOUNTS,
        }
    }
}

/// A validated launch: everything needed to write it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub project: project::Model,
    pub image: image::Model,
    pub resource_group: resource_group::Model,
    /// Per container and cluster size; its total is what the session is charged.
    pub request: ResourceRequest,
    pub names: Vec<String>,
    /// The folders its sessions mount, checked.
    pub mounts: Vec<crate::domain::storage::mounts::Mount>,
    pub launch: LaunchRequest,
}

/// What a launch created.
#[derive(Clone, Debug)]
pub struct Launched {
    pub launch_group: Option<launch_group::Model>,
    pub sessions: Vec<session::Model>,
}

/// Launches one session (`count: None`) or a batch of `count` sessions in one launch group.
pub async fn launch(
    db: &sea_orm::DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    request: &LaunchRequest,
    count: Option<i64>,
    limits: LaunchLimits,
) -> DomainResult<Launched> {
    let now = clock::now();
    let batch = count.is_some();
    // Authorized and validated before anything else, a retry included.
    let plan = validate::validate(db, viewer, request, count, limits).await?;
    let fingerprint = idempotency::fingerprint(&plan, batch);
    if let Some(key) = request.idempotency_key.as_deref()
        && let Some(previous) = idempotency::remembered(db, viewer, key, &fingerprint, now).await?
    {
        return Ok(previous);
    }
    let launched = match write::write(db, viewer, &plan, batch, now, bus).await {
        Ok(done) => done,
        Err(write::WriteError::Taken(name)) => {
            // Another request won: maybe a retry with the same idempotency key, which must
            // get that request's result; otherwise the name is taken.
            if let Some(key) = request.idempotency_key.as_deref()
                && let Some(previous) = idempotency::remembered(db, viewer, key, &fingerprint, now).await?
            {
                return Ok(previous);
            }
            let name = if !name.is_empty() {
                name
            } else if plan.names.len() == 1 {
                plan.names[0].clone()
            } else {
                format!("{}-…", plan.launch.name)
            };
            return Err(DomainError::NameTaken(name));
        }
        Err(write::WriteError::Other(e)) => return Err(e),
    };
    Ok(launched)
}

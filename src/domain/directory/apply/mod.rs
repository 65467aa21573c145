//! `sessiond apply`: the platform's configuration — domains, projects, users and their
//! keypairs, keypair resource policies, resource groups, agents and images — declared in
//! TOML files and made so in the database. One transaction; a second apply of the same
//! files changes nothing; nothing is deleted without `prune`, and never what a live session
//! uses. The demo (`serve --demo`) is this path with the bundled `demo.toml`.
//!
//! Limits changed here hold from the scheduler's next pass: it reads them each pass. A
//! limit lowered below what is in use stops nothing that runs; it only keeps new sessions
//! waiting (the resource panels show the use above the limit).
//!
//! The format (every section optional; names are the keys):
//!
//! ```toml
//! [domains.acme]
//! limits = { cpu = 64, mem = "256 GiB" }        # absent slot: unlimited
//!
//! [projects."acme/ml"]                           # "DOMAIN/NAME"
//! limits = { "cuda.device" = 4 }
//! resource_groups = ["gpu", "cpu"]               # allowed, in order: the first is the default
//!
//! [keypair_policies.default]
//! limits = { cpu = 16, mem = "64 GiB" }
//! max_concurrent_sessions = 10                   # default 10
//! max_pending_sessions = 20                      # default 20
//! max_session_lifetime_seconds = 86400           # default: none
//!
//! [resource_groups.gpu]
//! description = "A100 nodes"
//! scheduler = "FIFO"                             # FIFO (default), LIFO, DRF
//! pending_timeout_seconds = 3600                 # default: none
//! session_types = ["INTERACTIVE", "BATCH"]       # default: all
//!
//! [agents.gpu1]
//! resource_group = "gpu"
//! slots = { cpu = 32, mem = "256 GiB", "cuda.device" = 4 }
//! schedulable = true                             # default true; false drains it
//! [agents.local]
//! resource_group = "cpu"
//! this_machine = true                            # the local runtime's machine, capacity detected
//!
//! [users."ann@acme.io"]
//! domain = "acme"
//! role = "ADMIN"                                 # USER (default), ADMIN, SUPERADMIN
//! name = "Ann Lee"                               # default: from the email
//! projects = ["ml"]                              # projects of its domain
//! keypairs = [{ access_key = "AKANN", policy = "default", secret_sha256 = "…" }]
//!
//! [images."python:3.12"]
//! types = ["INTERACTIVE", "BATCH"]
//! minimum = { cpu = 0.5, mem = "512 MiB" }
//! apps = ["jupyter", "terminal"]
//! prepare = "python3 --version"                  # local runtime: root, command, prepare, env
//! ```
//!
//! Keypairs are optional: `sessiond token create` makes tokens for declared users, and
//! `apply` neither revokes nor deletes keypairs it does not declare.

pub mod file;
pub mod keys;
mod members;
mod prune;
mod reader;
mod resources;
mod sections;
mod shown;
mod write;

use std::collections::BTreeMap;
use std::fmt;

use crate::domain::model::slots::ResourceSlots;
use crate::domain::model::{Role, SchedulerStrategy, SessionType};
use crate::domain::runtime::environments::LocalImage;
use crate::domain::{DomainError, begin_write};

pub use file::images_file;
pub use reader::{Problem, Source};

pub const DEFAULT_CONCURRENT: i64 = 10;
pub const DEFAULT_PENDING: i64 = 20;

/// The demo's declaration, bundled: `serve --demo` applies it to an empty database.
pub const DEMO: &str = include_str!("../../../../demo.toml");

/// Everything declared, by name, as it is to be stored.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Declared {
    pub domains: BTreeMap<String, DomainDecl>,
    /// By `domain/name`.
    pub projects: BTreeMap<String, ProjectDecl>,
    /// By email, lower case.
    pub users: BTreeMap<String, UserDecl>,
    pub policies: BTreeMap<String, PolicyDecl>,
    pub groups: BTreeMap<String, GroupDecl>,
    pub engines: BTreeMap<String, EngineDecl>,
    pub agents: BTreeMap<String, AgentDecl>,
    pub registries: BTreeMap<String, crate::domain::runtime::image::registry::Registry>,
    pub storage: BTreeMap<String, crate::domain::storage::Storage>,
    pub images: BTreeMap<String, ImageDecl>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DomainDecl {
    pub limits: ResourceSlots,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProjectDecl {
    pub domain: String,
    pub name: String,
    pub limits: ResourceSlots,
    pub resource_groups: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UserDecl {
    pub domain: String,
    pub full_name: String,
    pub role: Role,
    /// Names of projects of its domain.
    pub projects: Vec<String>,
    pub keypairs: Vec<KeypairDecl>,
    /// Where it is declared, for problems found later.
    pub file: String,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KeypairDecl {
    pub access_key: String,
    pub policy: String,
    pub secret_hash: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PolicyDecl {
    pub limits: ResourceSlots,
    pub max_concurrent_sessions: i32,
    pub max_pending_sessions: i32,
    pub max_session_lifetime_seconds: Option<i64>,
    pub max_extension_seconds: Option<i64>,
    pub max_extensions: Option<i32>,
    pub idle_timeout_seconds: Option<i64>,
    pub idle_utilization: ResourceSlots,
    pub idle_counts_terminal: bool,
    pub max_priority: Option<i32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecl {
    pub description: String,
    pub scheduler: SchedulerStrategy,
    pub pending_timeout_seconds: Option<i64>,
    pub session_types: Vec<SessionType>,
    /// The engine that runs its sessions.
    pub engine: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EngineDecl {
    pub settings: crate::domain::runtime::engines::EngineSettings,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AgentDecl {
    pub resource_group: String,
    /// `None`: this machine, its capacity detected when applied.
    pub slots: Option<ResourceSlots>,
    pub schedulable: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ImageDecl {
    pub types: Vec<SessionType>,
    pub minimum: ResourceSlots,
    pub apps: Vec<crate::domain::apps::Declared>,
    pub local: Option<LocalImage>,
}

/// What applying does to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Create,
    Update,
    Delete,
}

/// One change of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub action: Action,
    /// `domain`, `project`, `user`, `keypair`, `keypair policy`, `resource group`, `agent`, `image`.
    pub kind: &'static str,
    pub name: String,
    /// What changes, e.g. `limits: cpu 48 → 64`.
    pub details: Vec<String>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = match self.action {
            Action::Create => '+',
            Action::Update => '~',
            Action::Delete => '-',
        };
        write!(f, "{sign} {} {}", self.kind, self.name)?;
        if !self.details.is_empty() {
            write!(f, ": {}", self.details.join("; "))?;
        }
        Ok(())
    }
}

/// What an apply did (or, dry, would do).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Stored objects the files do not declare, kept because `prune` was not asked for.
    pub undeclared: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Delete what the files do not declare (refused for what live sessions use).
    pub prune: bool,
    /// Work out the plan and write nothing.
    pub dry_run: bool,
    /// Who makes the changes: named in the history of each live session whose lifetime or
    /// idle checks they change.
    pub actor: crate::domain::model::actor::Actor,
}

impl Default for Options {
    fn default() -> Self {
        Self::new(false, false)
    }
}

impl Options {
    /// As the system (rule `apply`): no `--as`.
    pub fn new(prune: bool, dry_run: bool) -> Self {
        Self {
            prune,
            dry_run,
            actor: crate::domain::model::actor::Actor::system(crate::domain::model::actor::rules::APPLY),
        }
    }
}

/// The actor of an `apply` made by the user with `email`: a SUPERADMIN, as declarations
/// change every domain.
pub async fn actor_of(
    db: &impl sea_orm::ConnectionTrait,
    email: &str,
) -> Result<crate::domain::model::actor::Actor, String> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let found = entity::user::Entity::find()
        .filter(entity::user::Column::Email.eq(email))
        .one(db)
        .await
        .map_err(|e| format!("reading the users failed: {e}"))?;
    match found {
        Some(u) if u.role == crate::domain::model::Role::Superadmin.as_str() => {
            Ok(crate::domain::model::actor::Actor::User(u.id))
        }
        Some(_) => Err(format!("--as {email}: only a SUPERADMIN applies declarations")),
        None => Err(format!("--as {email}: no such user")),
    }
}

/// Why nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `prune` would delete what live sessions use; each entry says what and by how many.
    #[error("refused: {}", .0.join("; "))]
    Refused(Vec<String>),
    #[error(transparent)]
    Failed(#[from] DomainError),
}

impl From<sea_orm::DbErr> for ApplyError {
    fn from(e: sea_orm::DbErr) -> Self {
        Self::Failed(e.into())
    }
}

/// Makes the database hold what `declared` says, in one transaction, and returns the plan
/// it carried out. With `dry_run` the same work is done and rolled back.
pub async fn apply(
    db: &sea_orm::DatabaseConnection,
    declared: &Declared,
    options: Options,
) -> Result<Plan, ApplyError> {
    let txn = begin_write(db).await?;
    let plan = write::write(&txn, declared, options.prune, &options.actor).await?;
    if options.dry_run || plan.changes.is_empty() {
        txn.rollback().await?;
    } else {
        // Users, roles, keypairs or memberships may have changed: open connections check
        // their credentials again.
        crate::domain::directory::auth::changed(&txn).await?;
        txn.commit().await?;
    }
    Ok(plan)
}

pub use crate::domain::directory::catalog::known_slots;

/// Reads the declaration at `path` (a file or a directory of `*.toml` files) against the
/// database's slots. Problems come back rendered, one per line.
pub async fn read(db: &impl sea_orm::ConnectionTrait, path: &std::path::Path) -> Result<Declared, ApplyInputError> {
    let sources = file::sources(path).map_err(ApplyInputError::Unreadable)?;
    let slots = known_slots(db).await.map_err(ApplyInputError::Failed)?;
    file::parse(&sources, &slots).map_err(ApplyInputError::Invalid)
}

/// Why a declaration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ApplyInputError {
    #[error("{0}")]
    Unreadable(String),
    #[error("{} problem(s):\n{}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
    #[error(transparent)]
    Failed(DomainError),
}

/// The demo's declaration, read against the slots every database has.
pub async fn demo(db: &impl sea_orm::ConnectionTrait) -> Result<Declared, ApplyInputError> {
    let slots = known_slots(db).await.map_err(ApplyInputError::Failed)?;
    file::parse(&[Source { name: "demo.toml".to_owned(), text: DEMO.to_owned() }], &slots)
        .map_err(ApplyInputError::Invalid)
}

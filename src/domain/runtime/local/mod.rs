//! The local runtime: this machine is an agent, and its sessions really run, each in a
//! sandbox ([`sandbox`]) owned by a supervisor process of its own ([`supervisor`]) with
//! enforced limits ([`limits`]).
//!
//! The runtime keeps no state in memory. Every tick it reads, for each live session of its
//! agent, what the session's supervisor reported ([`files`]) and moves the stored status to
//! match, several steps at once when the session went further meanwhile (each step with its
//! transition, in one transaction). So after a restart of the server, or a crash, every
//! session continues from what really happened: a supervisor outlives the server, and one
//! that vanished without an exit record is reported as ERROR, never left stuck.
//!
//! A session's output is copied into its log (the `session_logs` table) as it comes; the
//! byte offset copied so far is kept beside the output, written after the commit.
//!
//! Here: setting up (probe, registration of this machine, starting a supervisor) and each
//! look's writing. `observe` turns what a supervisor reports into status steps and log
//! lines, `output` copies the output, `machine` is this machine's capacity and the
//! session directories, [`terminal`] the shell inside a running session.

pub mod dial;
pub(crate) mod disk;
pub mod enter;
pub mod files;
pub mod limits;
pub(crate) mod machine;
pub(crate) mod observe;
pub mod sandbox;
pub mod signal;
pub mod supervisor;
pub mod terminal;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set, Unchanged};
use serde_json::Value;
use uuid::Uuid;

use entity::{agent, engine, project, resource_group, resource_group_project, session};

use super::engines::EngineKind;
use super::reconcile;
use super::{Runtime, RuntimeInfo, RuntimeKind, env_vars};
use crate::domain::live::events::EventBus;
use crate::domain::model::status::SessionStatus;
use crate::domain::model::{SchedulerStrategy, SessionType};
use crate::domain::runtime::environments::{self as images, Images};
use crate::domain::storage::mounts::Bind;
use crate::domain::{DomainResult, directory::catalog, model::clock};
use files::{Prepare, SessionDir, Spec};
use limits::Enforcement;
use limits::Limits;
pub(crate) use machine::prepare_dirs;
use machine::{accelerator_devices, capacity, open_to_traverse, remove_session_dir};
use observe::Plan;

/// The engine that is this machine, stored when the local runtime first registers.
pub const LOCAL_ENGINE: &str = "local";
/// The rule its status changes name as their actor.
const ENGINE_RULE: &str = "local runtime";

/// Processes and threads one session may have.
const MAX_PIDS: u64 = 1024;

/// How the local runtime is set up.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// Where sessions' directories live.
    pub dir: PathBuf,
    /// This machine's agent id.
    pub agent: String,
    /// The resource group it serves (created, open to every project, when it is new).
    pub resource_group: String,
    /// Local environments from `--images-file`; they win over those stored with the images.
    pub images: Images,
    /// Between SIGTERM and killing what is left of a session.
    pub grace: Duration,
    /// The `sessiond` executable that runs `supervise`.
    pub executable: PathBuf,
    pub tick: Duration,
    /// Bytes each session's work directory may hold.
    pub work_dir_limit: u64,
    /// Bytes the machine's image store may hold (`--image-cache-limit`).
    pub image_cache_limit: u64,
}

pub struct LocalRuntime {
    config: LocalConfig,
    enforcement: Enforcement,
    /// A session is starting or stopping: look again soon, not at the next tick.
    hurry: std::sync::atomic::AtomicBool,
    /// The local environments stored with the images (`sessiond apply`), read at start and
    /// again whenever a session is to start.
    stored: std::sync::Mutex<Images>,
    /// What the sandboxes of the sessions about to start bind (their mounts), read with
    /// the images.
    binds: std::sync::Mutex<HashMap<Uuid, Result<Vec<Bind>, String>>>,
    /// Each running session's CPU time at its previous sample, and when: its use since is
    /// the cores it kept busy.
    cpu_seen: std::sync::Mutex<HashMap<Uuid, (f64, std::time::Instant)>>,
}

/// How soon the runtime looks again while a session starts or stops.
const HURRY: Duration = Duration::from_millis(25);

impl LocalRuntime {
    /// Checks that sessions can run here (a sandbox starts) and how limits are enforced.
    /// `Err` says why the local runtime cannot be used.
    pub fn probe(config: LocalConfig) -> Result<(Self, RuntimeInfo), String> {
        for dir in [config.dir.clone(), config.dir.join("sessions"), config.dir.join("images")] {
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            open_to_traverse(&dir).map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))?;
        }
        // What pulls interrupted by a stop of the machine left half-written.
        if let Ok(store) = crate::domain::runtime::image::store::Store::open(&config.dir) {
            store.clean();
        }
        sandbox::probe(&config.dir.join(format!("probe-{}", std::process::id())))?;
        let enforcement = Enforcement::detect();
        let info = RuntimeInfo {
            kind: RuntimeKind::Local,
            reason: "sessions run in bubblewrap sandboxes on this machine".to_owned(),
            agent: Some(config.agent.clone()),
            enforced: [enforcement.describe(), vec![limits::disk_line(config.work_dir_limit)]].concat(),
            local: Some(terminal::LocalAccess {
                agent: config.agent.clone(),
                dir: config.dir.clone(),
                enforcement: enforcement.clone(),
                executable: config.executable.clone(),
                dialers: std::sync::Arc::new(dial::Dialers::new(&config.executable, &config.dir)),
            }),
            apps_url: None,
        };
        Ok((
            Self {
                config,
                enforcement,
                hurry: false.into(),
                stored: Default::default(),
                binds: Default::default(),
                cpu_seen: Default::default(),
            },
            info,
        ))
    }

    /// This machine's agent id.
    pub fn agent(&self) -> &str {
        &self.config.agent
    }

    /// Registers this machine as its agent: capacity detected, alive, its prepared images.
    /// An agent already stored (declared with `sessiond apply`, or registered before) keeps
    /// its resource group and whether it is schedulable (drained); a new one joins the
    /// configured group, which is created, open to every project, when it does not exist.
    pub async fn register(&self, db: &DatabaseConnection) -> DomainResult<()> {
        self.read_images(db).await?;
        let now = clock::now();
        let txn = crate::domain::begin_write(db).await?;
        if let Some(stored) = agent::Entity::find_by_id(self.config.agent.clone()).one(&txn).await? {
            if stored.resource_group != self.config.resource_group {
                tracing::info!(
                    "agent {} stays in resource group {} (where it is stored), not {}",
                    stored.id,
                    stored.resource_group,
                    self.config.resource_group
                );
            }
            agent::ActiveModel {
                id: Unchanged(stored.id),
                available_slots: Set(capacity()),
                status: Set(catalog::ALIVE.to_owned()),
                pulled_images: Set(self.prepared_images()),
                last_heartbeat_at: Set(now),
                ..Default::default()
            }
            .update(&txn)
            .await?;
            txn.commit().await?;
            return Ok(());
        }
        let group = &self.config.resource_group;
        if resource_group::Entity::find_by_id(group.clone()).one(&txn).await?.is_none() {
            // A group of its own, run by this machine as an engine (`--runtime local` declares
            // it; a deployment declares both with `apply`).
            if engine::Entity::find_by_id(LOCAL_ENGINE.to_owned()).one(&txn).await?.is_none() {
                engine::ActiveModel {
                    name: Set(LOCAL_ENGINE.to_owned()),
                    kind: Set(EngineKind::Local.as_str().to_owned()),
                    settings: Set(serde_json::json!({})),
                    created_at: Set(now),
                }
                .insert(&txn)
                .await?;
            }
            resource_group::ActiveModel {
                name: Set(group.clone()),
                description: Set("This machine: sessions really run here".to_owned()),
                scheduler: Set(SchedulerStrategy::Fifo.as_str().to_owned()),
                pending_timeout_seconds: Set(None),
                allowed_session_types: Set(Value::from(
                    SessionType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
                )),
                engine: Set(Some(LOCAL_ENGINE.to_owned())),
                created_at: Set(now),
            }
            .insert(&txn)
            .await?;
            let allowed = resource_group_project::Entity::find().all(&txn).await?;
            let mut rows = Vec::new();
            for p in project::Entity::find().all(&txn).await? {
                let position =
                    allowed.iter().filter(|a| a.project_id == p.id).map(|a| a.position + 1).max().unwrap_or(0);
                rows.push(resource_group_project::ActiveModel {
                    resource_group: Set(group.clone()),
                    project_id: Set(p.id),
                    position: Set(position),
                });
            }
            if !rows.is_empty() {
                resource_group_project::Entity::insert_many(rows).exec_without_returning(&txn).await?;
            }
            // The catalog changed: servers read it again (`Credentials::catalog`).
            crate::domain::directory::auth::changed(&txn).await?;
        }
        agent::Entity::insert(agent::ActiveModel {
            id: Set(self.config.agent.clone()),
            resource_group: Set(group.clone()),
            available_slots: Set(capacity()),
            status: Set(catalog::ALIVE.to_owned()),
            schedulable: Set(true),
            pulled_images: Set(self.prepared_images()),
            created_at: Set(now),
            last_heartbeat_at: Set(now),
        })
        .exec_without_returning(&txn)
        .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Reads the local environments stored with the images.
    async fn read_images(&self, db: &DatabaseConnection) -> DomainResult<()> {
        let stored = catalog::local_environments(db).await?;
        let registries = catalog::registries(db).await?;
        let apps = catalog::apps(db).await?;
        *self.stored.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Images { images: stored, registries, apps };
        Ok(())
    }

    /// How `image` runs here: as `--images-file` says, else as stored with the image.
    fn image(&self, image: &str) -> images::LocalImage {
        match self.config.images.images.get(image) {
            Some(local) => local.clone(),
            None => self.stored.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(image),
        }
    }

    /// Images whose prepare step has run here, or whose OCI image is in the machine's store
    /// (all images without either count as pulled).
    fn prepared_images(&self) -> Value {
        let (stored, registries) = {
            let s = self.stored.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (s.images.clone(), s.registries.clone())
        };
        let store = crate::domain::runtime::image::store::Store::open(&self.config.dir).ok();
        let in_store = |image: &images::LocalImage| {
            let Ok(Some(pull)) = images::image_pull(image, None, &registries, &self.config.dir, 0) else {
                return false;
            };
            store.as_ref().is_some_and(|s| {
                s.resolved(&pull.target.reference)
                    .or_else(|| pull.target.parsed().ok().and_then(|r| r.digest().map(str::to_owned)))
                    .is_some_and(|d| s.unpacked(&d).is_some())
            })
        };
        let mut names: Vec<String> = stored
            .into_iter()
            .chain(self.config.images.images.clone())
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .filter(|(name, image)| match image.reference {
                Some(_) => in_store(image),
                None => image.prepare.is_none() || files::image_ready(&self.config.dir, name).exists(),
            })
            .map(|(name, _)| name)
            .collect();
        names.sort();
        Value::from(names)
    }

    /// Writes a scheduled session's spec and starts its supervisor.
    fn start(&self, s: &session::Model) -> Result<(), String> {
        let sd = SessionDir::of(&self.config.dir, s.id);
        std::fs::create_dir_all(sd.work()).map_err(|e| format!("cannot create the session's directory: {e}"))?;
        if sandbox::is_root() {
            prepare_dirs(&sd.root, &sd.work()).map_err(|e| format!("cannot hand the work directory over: {e}"))?;
        }
        let image = self.image(&s.image);
        let (registries, apps) = {
            let stored = self.stored.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (stored.registries.clone(), stored.apps.get(&s.image).cloned().unwrap_or_default())
        };
        let pinned = s.image_digest.as_deref();
        let pull = images::image_pull(&image, pinned, &registries, &self.config.dir, self.config.image_cache_limit)?;
        let marker = files::image_ready(&self.config.dir, &s.image);
        let slots = &s.requested_slots;
        let accelerators = slots.get("cuda.device").and_then(Value::as_f64).unwrap_or(0.0);
        let spec = session_spec(
            s,
            &image,
            (!marker.exists()).then_some(marker),
            self.config.work_dir_limit,
            self.config.grace,
            accelerator_devices(accelerators as usize),
            self.enforcement.clone(),
        )
        .pulling(pull)
        .with_apps(s, &apps)
        .mounting(
            self.binds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&s.id).or_else(|| {
                // Mounts not read for it (never: they are read with its start): not started without them.
                s.mounts.as_ref().filter(|m| !m.is_null()).map(|_| Err("its mounts were not read".to_owned()))
            }),
        )?;
        files::write_json(&sd.spec(), &spec).map_err(|e| format!("cannot write the session's spec: {e}"))?;
        let log = {
            use std::os::unix::fs::OpenOptionsExt;
            let mut open = std::fs::OpenOptions::new();
            open.write(true).create(true).truncate(true).mode(0o600);
            open.open(sd.supervisor_log()).map_err(|e| format!("cannot create its log: {e}"))?
        };
        let log2 = log.try_clone().map_err(|e| format!("cannot create its log: {e}"))?;
        signal::children_start_with_defaults();
        tokio::process::Command::new(&self.config.executable)
            .arg("supervise")
            .arg(&sd.root)
            .process_group(0) // not ended with the server's group (Ctrl-C, a restart)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log2)
            .kill_on_drop(false)
            .spawn()
            .map(drop) // tokio reaps it when it ends
            .map_err(|e| format!("cannot start the supervisor: {e}"))
    }
}

impl Runtime for LocalRuntime {
    fn tick(&self) -> Duration {
        if self.hurry.load(std::sync::atomic::Ordering::Relaxed) { HURRY } else { self.config.tick }
    }

    async fn drive(&self, db: &DatabaseConnection, bus: &EventBus) -> DomainResult<usize> {
        use SessionStatus::*;
        let driven = [Scheduled, Preparing, Pulling, Prepared, Creating, Running, Terminating];
        let live = session::Entity::find()
            .filter(session::Column::AgentId.eq(self.config.agent.clone()))
            .filter(session::Column::Status.is_in(driven.iter().map(|s| s.as_str())))
            .all(db)
            .await?;
        let live_ids: HashSet<Uuid> = live.iter().map(|s| s.id).collect();
        let moving = live.iter().any(|s| s.status != Running.as_str());
        let starting: Vec<&session::Model> = live.iter().filter(|s| s.status == Scheduled.as_str()).collect();
        if !starting.is_empty() {
            self.read_images(db).await?;
            let binds = crate::domain::storage::mounts::binds(db, &starting).await?;
            *self.binds.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = binds;
        }
        let now = clock::now();
        // What supervisors say of their images' pulls: recorded apart from the statuses.
        let pulls = reconcile::pulls_seen(&live, |id| SessionDir::of(&self.config.dir, id));
        if !pulls.is_empty() {
            reconcile::pulls(db, bus, ENGINE_RULE, pulls).await?;
        }
        let mut plans: Vec<Plan> = live.into_iter().filter_map(|s| self.plan(s, now)).collect();

        let leftover: Vec<Uuid> = std::fs::read_dir(self.config.dir.join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| Uuid::parse_str(n).ok()))
            .filter(|id| !live_ids.contains(id))
            .collect();
        if !leftover.is_empty() {
            let rows = session::Entity::find()
                .filter(session::Column::Id.is_in(crate::domain::padded(leftover.iter().copied())))
                .all(db)
                .await?;
            for id in &leftover {
                match rows.iter().find(|r| r.id == *id) {
                    Some(s) => plans.extend(self.plan_leftover(s.clone())),
                    // No such session (a database replaced under the runtime): stop it, then drop it.
                    None => {
                        let sd = SessionDir::of(&self.config.dir, *id);
                        match sd.read_state() {
                            Some(st) if st.exit.is_none() && st.supervisor.alive() => {
                                std::fs::write(sd.stop(), b"").ok();
                            }
                            _ => {
                                std::fs::remove_dir_all(&sd.root).ok();
                            }
                        }
                    }
                }
            }
        }
        self.hurry.store(moving || !leftover.is_empty(), std::sync::atomic::Ordering::Relaxed);
        if plans.is_empty() {
            return Ok(0);
        }
        self.write(db, bus, plans).await
    }
}

impl LocalRuntime {
    async fn write(&self, db: &DatabaseConnection, bus: &EventBus, plans: Vec<Plan>) -> DomainResult<usize> {
        let changed = reconcile::write(db, bus, ENGINE_RULE, &plans, |_, _| Some(self.prepared_images())).await?;
        for p in plans {
            if let Some((file, copied)) = p.after.copied {
                files::write_json(&file, &copied).ok();
            }
            if let Some(dir) = p.after.remove {
                remove_session_dir(&self.config.dir, &dir);
                // Its supervisor removes the session's cgroups; one that could not (killed
                // itself) leaves them to this.
                self.enforcement.remove(p.session.id);
                self.cpu_seen.lock().unwrap_or_else(|e| e.into_inner()).remove(&p.session.id);
            }
        }
        Ok(changed)
    }
}

/// What a supervisor runs for session `s` of `image`: its command, environment, whole-core,
/// memory, process and disk limits, batch timeout and grace; the image's prepare step when
/// `prepare_marker` is given (it has not run where the session runs).
pub(crate) fn session_spec(
    s: &session::Model,
    image: &images::LocalImage,
    prepare_marker: Option<PathBuf>,
    work_dir_limit: u64,
    grace: Duration,
    devices: Vec<PathBuf>,
    enforcement: Enforcement,
) -> Spec {
    let batch = s.session_type == SessionType::Batch.as_str();
    let image_env: Vec<(String, String)> = image.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut env = image_env.clone();
    env.extend(env_vars(s));
    let slots = &s.requested_slots;
    let cpu = slots.get("cpu").and_then(Value::as_f64).unwrap_or(1.0);
    let memory = slots.get("mem").and_then(Value::as_f64).unwrap_or(0.0);
    Spec {
        session_id: s.id,
        command: if batch { s.startup_command.clone().unwrap_or_default() } else { image.interactive_command() },
        batch,
        env,
        image_env,
        root: image.root_dir(),
        prepare: image.prepare.clone().zip(prepare_marker).map(|(command, marker)| Prepare { command, marker }),
        pull: None,
        workdir: None,
        limits: Limits {
            // Whole cores: a fraction of a core is rounded up.
            cores: u32::try_from(cpu.ceil().max(1.0) as u64).unwrap_or(u32::MAX),
            memory: if memory > 0.0 { memory as u64 } else { 512 << 20 },
            pids: MAX_PIDS,
            disk: work_dir_limit,
        },
        batch_timeout_seconds: s.batch_timeout_seconds,
        grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        devices,
        enforcement,
        slurm_gpus: false,
        report_usage: false,
        apps: Vec::new(),
        relay: None,
        mounts: Vec::new(),
    }
}

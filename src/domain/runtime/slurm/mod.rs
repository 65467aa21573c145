//! The Slurm engine: each session is one Slurm job, submitted through slurmrestd to the
//! engine's partition, where Slurm places it (sessiond admits: quotas, pending limits,
//! `checkLaunch`; Slurm picks the node). The engine only starts (submits), stops (signals,
//! then cancels) and looks (lists the jobs); what a look sees becomes [`reconcile`] plans.
//!
//! - Its group's agents are the partition's nodes ([`nodes`]), refreshed every few seconds:
//!   CPUs, memory, and a `gpu` gres as `cuda.device`; idle, mixed and allocated nodes are
//!   alive, drained and down ones not schedulable, a node gone from the list not alive.
//! - A job carries its session's tag in its comment (`sessiond:<session id>`), and the job id
//!   is kept in `engine_jobs` once submitted. A look lists the jobs, so after a restart of
//!   sessiond or of slurmctld every session finds its job again (a job submitted just before
//!   a crash is adopted by its tag, never submitted twice); a tagged job with no session is
//!   reported, never killed.
//! - When Slurm does not answer, sessions keep their status, the nodes turn not alive after
//!   [`NODE_TIMEOUT`], and scheduled sessions wait; the engine catches up when it answers.
//! - On a node with `sessiond` and bubblewrap a job runs `sessiond supervise` (the local
//!   runtime's sandbox, its spec written here into the shared directory, its state read
//!   back as the local runtime reads it); elsewhere it runs plainly and says so.
//! - An interactive session's terminal is `srun --overlap --pty` into its job
//!   ([`terminal`]); its web apps are reached through its supervisor's relay ([`relay`]).

pub mod client;
mod job;
mod nodes;
pub mod relay;
mod submit;
pub mod terminal;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::{ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

use entity::{engine_job, session};

use super::Runtime;
use super::engines::SlurmSettings;
use super::reconcile;
use crate::domain::live::events::EventBus;
// A scheduled session's reasons to wait and its place in Slurm's queue.
use crate::domain::model::status::SessionStatus;
use crate::domain::scheduling::Wait;
use crate::domain::{DomainResult, directory::catalog, model::clock, reclaim::expiry};
use client::{Client, SlurmError};
pub use job::TAG;

/// A look's plan for one session, with how far its output is copied once written.
type Plan = reconcile::Plan<Option<(std::path::PathBuf, super::output::Copied)>>;

/// How long nodes stay alive while Slurm does not answer.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a claim to submit a session's job holds without a job id.
const CLAIM_SECONDS: i64 = 60;
/// How often the nodes are listed.
const NODES_EVERY: Duration = Duration::from_secs(2);

/// What others may read of an engine's health: whether it answers, and why not.
#[derive(Clone, Debug)]
pub struct Health {
    pub answering: bool,
    pub reason: String,
    pub api_version: Option<String>,
    pub nodes: usize,
    /// Tagged jobs with no session (reported, never killed).
    pub orphans: usize,
    /// The resource group it runs.
    pub group: String,
    /// How its sessions' terminals open here, or why they cannot.
    pub terminal: Result<terminal::SrunAccess, String>,
    /// The shared directory of its sessions' relays, when its jobs run sessiond's sandbox.
    pub relays: Option<String>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            answering: false,
            reason: String::new(),
            api_version: None,
            nodes: 0,
            orphans: 0,
            group: String::new(),
            terminal: Err("not started".to_owned()),
            relays: None,
        }
    }
}

/// How the terminal of a session of resource group `group` opens here, if a running Slurm
/// engine runs that group and can open one.
pub fn terminal_of(group: &str) -> Option<terminal::SrunAccess> {
    let all = registry().read().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.values().find(|h| h.group == group).and_then(|h| h.terminal.clone().ok())
}

/// The shared directory where the sessions of resource group `group` say where their
/// relays listen, if a running Slurm engine runs them in sessiond's sandbox.
pub fn relays_of(group: &str) -> Option<String> {
    let all = registry().read().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.values().find(|h| h.group == group).and_then(|h| h.relays.clone())
}

/// The health of every running engine, by name.
pub type Registry = Arc<std::sync::RwLock<BTreeMap<String, Health>>>;

/// The health of the running Slurm engines, for `{ runtime }`, `configuration` and metrics.
pub fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

pub struct SlurmEngine {
    name: String,
    group: String,
    client: Client,
    grace: Duration,
    tick: Duration,
    registry: Registry,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    last_answer: Option<Instant>,
    nodes_at: Option<Instant>,
    /// Sessions whose job was sent SIGTERM, and when.
    signalled: HashMap<Uuid, Instant>,
    /// The last Slurm reason logged for a waiting session.
    waiting: HashMap<Uuid, String>,
    /// Orphan jobs already reported.
    reported: HashSet<i64>,
    hurry: bool,
}

impl SlurmEngine {
    pub fn new(name: String, group: String, settings: SlurmSettings, grace: Duration, registry: Registry) -> Self {
        let access = terminal::probe(&settings);
        if let Err(why) = &access {
            tracing::info!(engine = %name, "{why}");
        }
        {
            let mut all = registry.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let h = all.entry(name.clone()).or_default();
            h.group = group.clone();
            h.terminal = access;
            h.relays = settings.sessiond_on_nodes().map(|_| settings.output_dir.clone());
        }
        Self {
            name,
            group,
            client: Client::new(settings),
            grace,
            tick: Duration::from_millis(500),
            registry,
            state: Mutex::new(State { last_answer: Some(Instant::now()), ..State::default() }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn health(&self, f: impl FnOnce(&mut Health)) {
        let mut all = self.registry.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(all.entry(self.name.clone()).or_default());
    }

    /// Slurm answered, or not (`why`).
    fn answered(&self, result: Result<(), &SlurmError>) {
        match result {
            Ok(()) => {
                self.state().last_answer = Some(Instant::now());
                let version = self.client.version();
                self.health(|h| {
                    h.answering = true;
                    h.reason = "slurmrestd answers".to_owned();
                    h.api_version = version;
                });
            }
            Err(e) => {
                let text = e.to_string();
                let was = self.registry.read().ok().and_then(|r| r.get(&self.name).map(|h| h.answering));
                if was != Some(false) {
                    tracing::warn!(engine = %self.name, "Slurm engine: {text}");
                }
                self.health(|h| {
                    h.answering = false;
                    h.reason = text;
                });
            }
        }
    }

    async fn drive_sessions(&self, db: &DatabaseConnection, bus: &EventBus) -> DomainResult<usize> {
        use SessionStatus::*;
        let driven = [Scheduled, Preparing, Pulling, Prepared, Creating, Running, Terminating];
        let live = session::Entity::find()
            .filter(session::Column::ResourceGroup.eq(self.group.clone()))
            .filter(session::Column::Status.is_in(driven.iter().map(|s| s.as_str())))
            .all(db)
            .await?;
        // Claims and job ids read after this are compared with a list taken after it.
        let listed_at = clock::now();
        let jobs = match self.client.jobs().await {
            Ok(jobs) => {
                self.answered(Ok(()));
                jobs
            }
            Err(e) => {
                // Sessions keep their status until Slurm answers again; scheduled ones say
                // why they wait.
                let reasons = waiting_reasons("ENGINE_UNREACHABLE", &e.to_string());
                let waits: Vec<Wait> = live
                    .iter()
                    .filter(|s| s.status == Scheduled.as_str() && s.pending_reasons != reasons.0)
                    .map(|s| (s.id, reasons.clone(), None))
                    .collect();
                self.answered(Err(&e));
                write_waits(db, waits).await?;
                return Ok(0);
            }
        };
        let order = job::queue_order(&jobs, &self.client.settings().partition);
        let tagged: HashMap<Uuid, &client::Job> =
            jobs.iter().filter_map(|j| Some((job::tagged(&j.comment)?, j))).collect();
        let live_ids: HashSet<Uuid> = live.iter().map(|s| s.id).collect();
        self.orphans(db, &tagged, &live_ids).await?;
        if live.is_empty() {
            self.state().hurry = false;
            return Ok(0);
        }
        let known: HashMap<Uuid, engine_job::Model> = engine_job::Entity::find()
            .filter(engine_job::Column::SessionId.is_in(crate::domain::padded(live_ids.iter().copied())))
            .all(db)
            .await?
            .into_iter()
            .map(|j| (j.session_id, j))
            .collect();
        // What the jobs to submit may live at most: their sessions' lifetimes with every
        // extension their policies allow (Slurm's own limit is the backstop).
        let to_submit: Vec<Uuid> =
            live.iter().filter(|s| s.status == Scheduled.as_str()).map(|s| s.keypair_id).collect();
        let limits = if to_submit.is_empty() { HashMap::new() } else { expiry::limits(db, &to_submit).await? };
        let (images, registries, apps) = if live.iter().any(|s| s.status == Scheduled.as_str()) {
            (catalog::local_environments(db).await?, catalog::registries(db).await?, catalog::apps(db).await?)
        } else {
            (BTreeMap::new(), BTreeMap::new(), BTreeMap::new())
        };
        // What the supervisors on the nodes say of their images' pulls.
        let output_dir = self.client.settings().output_dir.clone();
        let pulls = reconcile::pulls_seen(&live, |id| job::session_dir(&output_dir, id));
        if !pulls.is_empty() {
            reconcile::pulls(db, bus, &format!("Slurm engine {}", self.name), pulls).await?;
        }
        let now = clock::now();
        let mut plans: Vec<Plan> = Vec::new();
        let mut adopted = Vec::new();
        let mut waits: Vec<Wait> = Vec::new();
        let mut moving = false;
        for s in live {
            let status = SessionStatus::parse(&s.status).unwrap_or(Scheduled);
            let job = tagged.get(&s.id).copied();
            // Look again soon while something is about to change: a submit, a start, a stop;
            // not for sessions that wait in Slurm's queue (that may take hours).
            moving |= status != Running && !(status == Scheduled && job.is_some_and(|j| j.job_state == "PENDING"));
            if let Some(j) = job
                && known.get(&s.id).is_none_or(|k| k.job_id.is_empty())
            {
                // Submitted before a crash, or by another replica: adopt it.
                adopted.push((s.id, j.job_id.to_string()));
            }
            let claim = known.get(&s.id);
            let job_id = job.map(|j| j.job_id.to_string()).or_else(|| claim.map(|k| k.job_id.clone()));
            match (status, job, job_id.filter(|id| !id.is_empty())) {
                (Terminating, None, None) if claim.is_none() => plans.push(Plan::steps(
                    s.clone(),
                    vec![(Terminated, s.status_info.clone(), None)],
                    "session terminated before its job was submitted".to_owned(),
                )),
                (Terminating, Some(j), Some(id)) if job::active(j) => self.stop(&s, &id).await,
                (Scheduled, None, None) if claim.is_none() => {
                    let lifetime =
                        expiry::longest_lifetime(&s, &limits.get(&s.keypair_id).copied().unwrap_or_default());
                    if let Some(plan) = self.submit(db, &s, (&images, &registries, &apps), lifetime).await? {
                        plans.push(plan);
                    }
                }
                (_, None, None) => {
                    // Claimed by a submission that never finished (a crash, another replica's
                    // failed request): released after a while, so it is submitted again.
                    if let Some(k) = claim
                        && k.submitted_at < listed_at - chrono::TimeDelta::seconds(CLAIM_SECONDS)
                    {
                        engine_job::Entity::delete_by_id(k.session_id)
                            .filter(engine_job::Column::JobId.eq(""))
                            .exec(db)
                            .await?;
                    }
                }
                // Submitted after the list was taken: seen next time.
                (_, None, Some(_)) if claim.is_some_and(|k| k.submitted_at >= listed_at) => {}
                (_, None, Some(id)) => plans.push(Plan::steps(
                    s,
                    vec![(
                        Error,
                        Some(format!("the Slurm job {id} vanished (slurmctld no longer knows it)")),
                        Some((crate::domain::model::status::SessionResult::Failure, None)),
                    )],
                    format!("error: the Slurm job {id} vanished"),
                )),
                (_, Some(j), _) => {
                    if job::active(j)
                        && let Some((reason, log)) = expiry::due(&s, now)?
                    {
                        plans.push(Plan::steps(s, vec![(Terminating, Some(reason), None)], log));
                        continue;
                    }
                    if status == Scheduled && j.job_state == "PENDING" {
                        let reasons = match job::reason_code(&j.state_reason) {
                            _ if j.state_reason.is_empty() || j.state_reason == "None" => {
                                crate::domain::sessions::occupancy::PendingReason::stored(&[])
                            }
                            code => waiting_reasons(code, &format!("Slurm: {}", j.state_reason)),
                        };
                        let position = order.get(&j.job_id).copied();
                        if s.pending_reasons != reasons.0 || s.queue_position != position {
                            waits.push((s.id, reasons, position));
                        }
                    }
                    let waiting = {
                        let mut st = self.state();
                        job::waiting_line(j).filter(|line| st.waiting.insert(s.id, line.clone()).as_ref() != Some(line))
                    };
                    let output_dir = &self.client.settings().output_dir;
                    let usage = job::sample(output_dir, &s, now);
                    let keep = usage.as_ref().map(|_| s.clone());
                    match job::plan(output_dir, s, j, waiting) {
                        Some(mut plan) => {
                            plan.usage = usage;
                            plans.push(plan);
                        }
                        None => plans.extend(keep.zip(usage).map(|(s, u)| Plan::sampled(s, u))),
                    }
                }
            }
        }
        for (id, job_id) in adopted {
            record(db, &self.name, id, job_id).await?;
        }
        write_waits(db, waits).await?;
        self.state().hurry = moving;
        if plans.is_empty() {
            return Ok(0);
        }
        let changed = reconcile::write(db, bus, &format!("Slurm engine {}", self.name), &plans, |_, _| None).await?;
        for p in &plans {
            if let Some((file, copied)) = &p.after {
                super::local::files::write_json(file, copied).ok();
            }
            if p.steps.last().is_some_and(|(to, _, _)| to.is_terminal()) {
                let mut st = self.state();
                st.signalled.remove(&p.session.id);
                st.waiting.remove(&p.session.id);
                // Its sandbox's directory goes with the session (its output is in the log).
                let sd = job::session_dir(&self.client.settings().output_dir, p.session.id);
                std::fs::remove_dir_all(&sd.root).ok();
            }
        }
        Ok(changed)
    }

    /// A stopping session's job. In sessiond's sandbox: its supervisor is asked (the `stop`
    /// file: SIGTERM, its grace, then everything killed), the job cancelled only if it is
    /// still there well after. Plainly: SIGTERM first, cancelled once the grace is over.
    async fn stop(&self, s: &session::Model, job_id: &str) {
        let signalled = self.state().signalled.get(&s.id).copied();
        let sd = job::session_dir(&self.client.settings().output_dir, s.id);
        let supervised = sd.read_state().is_some_and(|state| state.exit.is_none());
        let backstop = if supervised { self.grace + Duration::from_secs(5) } else { self.grace };
        let result = match signalled {
            None if supervised => {
                self.state().signalled.insert(s.id, Instant::now());
                match std::fs::write(sd.stop(), b"") {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        tracing::warn!(engine = %self.name, session = %s.id, "cannot ask its supervisor to stop: {e}");
                        self.client.kill(job_id, Some("SIGTERM")).await
                    }
                }
            }
            None => {
                self.state().signalled.insert(s.id, Instant::now());
                self.client.kill(job_id, Some("SIGTERM")).await
            }
            Some(at) if at.elapsed() >= backstop => self.client.kill(job_id, None).await,
            Some(_) => Ok(()),
        };
        if let Err(e) = result {
            tracing::warn!(engine = %self.name, session = %s.id, job = job_id, "stopping the job: {e}");
        }
    }

    /// Tagged jobs whose session is not live: cancelled when the session ended, reported
    /// when there is no such session at all.
    async fn orphans(
        &self,
        db: &DatabaseConnection,
        tagged: &HashMap<Uuid, &client::Job>,
        live: &HashSet<Uuid>,
    ) -> DomainResult<()> {
        let others: Vec<Uuid> =
            tagged.iter().filter(|(id, j)| !live.contains(id) && job::active(j)).map(|(id, _)| *id).collect();
        let mut count = 0;
        if !others.is_empty() {
            let stored: HashMap<Uuid, session::Model> = session::Entity::find()
                .filter(session::Column::Id.is_in(crate::domain::padded(others.iter().copied())))
                .all(db)
                .await?
                .into_iter()
                .map(|s| (s.id, s))
                .collect();
            for id in others {
                let j = tagged[&id];
                match stored.get(&id) {
                    // Ended here (terminated while Slurm did not answer): its job goes too.
                    Some(s) if SessionStatus::parse(&s.status).is_some_and(SessionStatus::is_terminal) => {
                        if let Err(e) = self.client.kill(&j.job_id.to_string(), None).await {
                            tracing::warn!(engine = %self.name, job = j.job_id, "cancelling an ended session's job: {e}");
                        }
                    }
                    Some(_) => {} // another group's, or moved meanwhile
                    None => {
                        count += 1;
                        if self.state().reported.insert(j.job_id) {
                            tracing::warn!(
                                engine = %self.name,
                                job = j.job_id,
                                "Slurm job {} carries the tag of session {id}, which does not exist here; \
                                 it is left running",
                                j.job_id
                            );
                        }
                    }
                }
            }
        }
        self.health(|h| h.orphans = count);
        Ok(())
    }
}

/// The stored pending reasons of a session waiting in its engine, and their digest.
fn waiting_reasons(code: &'static str, message: &str) -> (serde_json::Value, i64) {
    let reason = crate::domain::sessions::occupancy::PendingReason {
        code,
        message: message.to_owned(),
        layer: None,
        slot: None,
        requested: None,
        remaining: None,
    };
    crate::domain::sessions::occupancy::PendingReason::stored(&[reason])
}

/// Stores why scheduled sessions wait, each only while it is still SCHEDULED.
async fn write_waits(db: &DatabaseConnection, waits: Vec<Wait>) -> DomainResult<()> {
    use sea_orm::sea_query::Expr;
    for (id, (reasons, digest), position) in waits {
        session::Entity::update_many()
            .col_expr(session::Column::PendingReasons, Expr::value(reasons))
            .col_expr(session::Column::PendingDigest, Expr::value(digest))
            .col_expr(session::Column::QueuePosition, Expr::value(position))
            .filter(session::Column::Id.eq(id))
            .filter(session::Column::Status.eq(SessionStatus::Scheduled.as_str()))
            .exec(db)
            .await?;
    }
    Ok(())
}

/// Records a session's job id (adopting a job found by its tag).
async fn record(db: &DatabaseConnection, engine: &str, id: Uuid, job_id: String) -> DomainResult<()> {
    let row = engine_job::ActiveModel {
        session_id: Set(id),
        engine: Set(engine.to_owned()),
        job_id: Set(job_id.clone()),
        submitted_at: Set(clock::now()),
    };
    engine_job::Entity::insert(row)
        .on_conflict(
            sea_orm::sea_query::OnConflict::column(engine_job::Column::SessionId)
                .update_column(engine_job::Column::JobId)
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    tracing::debug!(session = %id, job = %job_id, "job recorded");
    Ok(())
}

impl Runtime for SlurmEngine {
    fn tick(&self) -> Duration {
        if self.state().hurry { Duration::from_millis(100) } else { self.tick }
    }

    async fn drive(&self, db: &DatabaseConnection, bus: &EventBus) -> DomainResult<usize> {
        let due = self.state().nodes_at.is_none_or(|at| at.elapsed() >= NODES_EVERY);
        if due {
            self.state().nodes_at = Some(Instant::now());
            self.refresh_nodes(db).await?;
        }
        self.drive_sessions(db, bus).await
    }
}

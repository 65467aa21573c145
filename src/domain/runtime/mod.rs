//! Engines start, stop and look at sessions on agents. A resource group's engine is
//! declared (`[engines.NAME]` of `sessiond apply`) and is one of:
//!
//! - [`local`]: the machine itself is an agent, and its sessions really run, each in a
//!   sandbox under a supervisor process of its own, with enforced limits;
//! - [`slurm`]: a Slurm cluster, through slurmrestd: a session is a job, its nodes agents;
//! - [`simulated`]: nothing runs; sessions walk through their statuses on timers. For the
//!   demo and tests only, and it says so.
//!
//! Whether this machine's local runtime can run is chosen at start (`--runtime
//! auto|local|simulated`) and reported by [`RuntimeInfo`], so nothing is silently pretend.

pub mod apps;
pub mod declared;
pub mod engines;
pub mod environments;
pub mod image;
pub mod local;
pub mod output;
pub mod reconcile;
pub mod simulated;
pub mod slurm;
pub mod terminal;

use std::future::Future;
use std::time::Duration;

use sea_orm::DatabaseConnection;

use entity::session;

use crate::domain::DomainResult;
use crate::domain::live::events::EventBus;

pub use simulated::{SimulatedRuntime, simulated_use_at};

/// Exit code of a batch session stopped at its timeout (as `timeout(1)` reports).
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// Starts and stops sessions. `drive` advances what is due and returns how many sessions
/// changed status.
pub trait Runtime: Send + Sync + 'static {
    fn drive(&self, db: &DatabaseConnection, bus: &EventBus) -> impl Future<Output = DomainResult<usize>> + Send;

    /// How often `drive` should run.
    fn tick(&self) -> Duration;
}

/// Drives sessions until the process ends: every tick, and at once when a session is
/// scheduled or asked to terminate.
pub async fn run<R: Runtime>(runtime: R, db: DatabaseConnection, bus: EventBus) {
    let mut events = bus.subscribe();
    loop {
        if let Err(e) = runtime.drive(&db, &bus).await {
            tracing::error!(error = ?e, "runtime step failed");
        }
        tokio::select! {
            woke = events.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = woke {
                    return;
                }
            }
            () = tokio::time::sleep(runtime.tick()) => {}
        }
    }
}

/// Which runtime runs the sessions of this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeKind {
    Local,
    Simulated,
}

/// What this server runs sessions with, and why: shown at start and in the API.
#[derive(Clone, Debug)]
pub struct RuntimeInfo {
    pub kind: RuntimeKind,
    /// Why this runtime was chosen (or why the local one could not be).
    pub reason: String,
    /// The agent that is this machine, when sessions really run on it.
    pub agent: Option<String>,
    /// The limits the local runtime enforces on each session, and how.
    pub enforced: Vec<String>,
    /// What the terminals of the local runtime's sessions need.
    pub local: Option<local::terminal::LocalAccess>,
    /// Where the browser reaches the sessions' apps (the apps' listener's public address),
    /// when this server serves them.
    pub apps_url: Option<String>,
}

impl RuntimeInfo {
    pub fn simulated(reason: impl Into<String>) -> Self {
        Self {
            kind: RuntimeKind::Simulated,
            reason: reason.into(),
            agent: None,
            enforced: Vec::new(),
            local: None,
            apps_url: None,
        }
    }
}

/// The value of a session's environment variable `name`, if it sets it.
pub(crate) fn env_var(s: &session::Model, name: &str) -> Option<String> {
    env_vars(s).into_iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

/// A session's environment variables, in order.
pub(crate) fn env_vars(s: &session::Model) -> Vec<(String, String)> {
    s.environment
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e.get("name")?.as_str()?.to_owned(), e.get("value")?.as_str()?.to_owned())))
        .collect()
}

//! What runs sessions on this server: `Query.runtime`.

use async_graphql::{Context, Enum, Object, SimpleObject};

use super::context::viewer;
use super::errors::ApiResult;
use crate::domain::DomainError;
use crate::domain::runtime::declared::{self, EngineReport};
use crate::domain::runtime::engines::EngineKind as DomainEngineKind;
use crate::domain::runtime::{RuntimeInfo, RuntimeKind as DomainKind};

/// How sessions run.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// Sessions really run, sandboxed, on this machine's agent.
    Local,
    /// Nothing runs: sessions walk through their statuses on timers.
    Simulated,
}

/// The runtime this server drives its machine with. Agents other than `agent` are
/// simulated.
#[derive(SimpleObject)]
pub struct Runtime {
    /// Whether sessions really run on this machine, or are simulated.
    pub kind: RuntimeKind,
    /// Why this runtime was chosen, or why the local one could not be.
    pub reason: String,
    /// The agent that is this machine, when sessions really run on it.
    pub agent: Option<String>,
    /// Each limit the local runtime enforces on a session, and how.
    pub enforced_limits: Vec<String>,
    /// Every declared engine: which resource groups it runs, and whether it answers.
    pub engines: Vec<Engine>,
}

/// What runs a resource group's sessions.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// Nothing runs: for the demo and tests only.
    Simulated,
    /// The server's own machine, in a sandbox.
    Local,
    /// A Slurm cluster, through slurmrestd.
    Slurm,
}

/// A declared engine and how it is doing.
#[derive(SimpleObject, Clone)]
pub struct Engine {
    /// As declared; unique on the platform.
    pub name: String,
    /// What it is.
    pub kind: EngineKind,
    /// The resource groups whose sessions it runs (a Slurm engine runs one).
    pub resource_groups: Vec<String>,
    /// It answers (a Slurm engine: slurmrestd answered its last request).
    pub answering: bool,
    /// What it is, or why it does not answer.
    pub reason: String,
    /// The REST API version in use (Slurm).
    pub api_version: Option<String>,
    /// Nodes of its partition, each an agent of its group (Slurm).
    pub nodes: Option<i32>,
    /// Jobs tagged by sessiond that have no session here: reported, never killed (Slurm).
    pub orphan_jobs: Option<i32>,
}

impl From<EngineReport> for Engine {
    fn from(e: EngineReport) -> Self {
        Engine {
            name: e.name,
            kind: match e.kind {
                DomainEngineKind::Simulated => EngineKind::Simulated,
                DomainEngineKind::Local => EngineKind::Local,
                DomainEngineKind::Slurm => EngineKind::Slurm,
            },
            resource_groups: e.groups,
            answering: e.answering,
            reason: e.reason,
            api_version: e.api_version,
            nodes: e.nodes.map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
            orphan_jobs: e.orphan_jobs.map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        }
    }
}

#[derive(Default)]
pub struct RuntimeQuery;

#[Object]
impl RuntimeQuery {
    /// What runs sessions here (any authenticated caller).
    async fn runtime(&self, ctx: &Context<'_>) -> ApiResult<Runtime> {
        viewer(ctx)?;
        let info = ctx
            .data_opt::<RuntimeInfo>()
            .ok_or_else(|| DomainError::invariant("the schema was built without its runtime"))?;
        Ok(Runtime {
            kind: match info.kind {
                DomainKind::Local => RuntimeKind::Local,
                DomainKind::Simulated => RuntimeKind::Simulated,
            },
            reason: info.reason.clone(),
            agent: info.agent.clone(),
            enforced_limits: info.enforced.clone(),
            engines: declared::report(super::context::db(ctx)?).await?.into_iter().map(Engine::from).collect(),
        })
    }
}

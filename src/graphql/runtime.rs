//! What runs sessions on this server: `Query.runtime`.

use async_graphql::{Context, Enum, Object, SimpleObject};

use super::context::viewer;
use super::errors::ApiResult;
use crate::domain::DomainError;
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
    pub kind: RuntimeKind,
    /// Why this runtime was chosen, or why the local one could not be.
    pub reason: String,
    /// The agent that is this machine, when sessions really run on it.
    pub agent: Option<String>,
    /// Each limit the local runtime enforces on a session, and how.
    pub enforced_limits: Vec<String>,
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
        })
    }
}

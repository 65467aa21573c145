//! `Query.configuration`: what the platform is configured with, read-only, for
//! superadministrators. Changes go through `sessiond apply`.

use async_graphql::{Context, ID, Object, SimpleObject};

use crate::domain::configuration::{self, ConfiguredAgent, ConfiguredGroup, ConfiguredProject};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::limits::AGGREGATE_COST;
use super::resource::{Image, ResourceGroup};
use super::types::SlotAmount;

/// The configuration, as `sessiond apply` last left it.
#[derive(SimpleObject)]
pub struct Configuration {
    pub domains: Vec<ConfiguredDomain>,
    pub keypair_policies: Vec<KeypairPolicy>,
    pub resource_groups: Vec<ConfiguredResourceGroup>,
    pub images: Vec<Image>,
}

#[derive(SimpleObject)]
pub struct ConfiguredDomain {
    pub name: String,
    /// The domain's limits; a slot not listed is unlimited.
    pub limits: Vec<SlotAmount>,
    /// How many users belong to it.
    pub user_count: u64,
    pub projects: Vec<ConfiguredProjectView>,
}

#[derive(SimpleObject)]
#[graphql(name = "ConfiguredProject")]
pub struct ConfiguredProjectView {
    pub id: ID,
    pub name: String,
    /// The project's limits; a slot not listed is unlimited.
    pub limits: Vec<SlotAmount>,
    /// The resource groups it may use, its default first.
    pub resource_groups: Vec<String>,
    pub member_count: u64,
}

#[derive(SimpleObject)]
pub struct KeypairPolicy {
    pub name: String,
    /// A slot not listed is unlimited.
    pub limits: Vec<SlotAmount>,
    pub max_concurrent_sessions: i32,
    pub max_pending_sessions: i32,
    /// Null: sessions may run for ever.
    pub max_session_lifetime_seconds: Option<i64>,
    /// How far one extension may push a lifetime back (null: no extension).
    pub max_extension_seconds: Option<i64>,
    /// How many extensions one session may have (null: no extension).
    pub max_extensions: Option<i32>,
    /// An interactive session without activity this long is reclaimed (null: never).
    pub idle_timeout_seconds: Option<i64>,
    /// Per slot, the use at or above which a session is active.
    pub idle_utilization: Vec<SlotAmount>,
    /// Whether input into a session's terminal is activity.
    pub idle_counts_terminal: bool,
    /// The highest priority its sessions may have, at launch or set by an administrator
    /// (null: the API's bound, 100).
    pub max_priority: Option<i32>,
}

#[derive(SimpleObject)]
pub struct ConfiguredResourceGroup {
    pub group: ResourceGroup,
    /// The engine that runs its sessions (none: nothing runs them), and whether it answers.
    pub engine: Option<super::runtime::Engine>,
    pub agents: Vec<Agent>,
}

/// A machine of a resource group.
#[derive(SimpleObject)]
pub struct Agent {
    pub id: String,
    pub capacity: Vec<SlotAmount>,
    /// What its sessions hold now.
    pub occupied: Vec<SlotAmount>,
    /// The stored status, e.g. ALIVE.
    pub status: String,
    /// It answers.
    pub alive: bool,
    /// It takes new sessions (false: drained).
    pub schedulable: bool,
    pub last_heartbeat_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Default)]
pub struct ConfigurationQuery;

#[Object]
impl ConfigurationQuery {
    /// Domains, projects, keypair policies, resource groups with their agents, and images.
    /// SUPERADMIN only (FORBIDDEN otherwise).
    #[graphql(complexity = "AGGREGATE_COST + child_complexity")]
    async fn configuration(&self, ctx: &Context<'_>) -> ApiResult<Configuration> {
        let c = super::limits::aggregate(ctx, async { Ok((configuration::read(db(ctx)?, viewer(ctx)?).await?, 0)) })
            .await?;
        Ok(Configuration {
            domains: c
                .domains
                .into_iter()
                .map(|d| ConfiguredDomain {
                    name: d.name,
                    limits: SlotAmount::list(&d.limits),
                    user_count: d.users,
                    projects: d.projects.into_iter().map(project).collect(),
                })
                .collect(),
            keypair_policies: c
                .keypair_policies
                .into_iter()
                .map(|p| {
                    Ok(KeypairPolicy {
                        limits: SlotAmount::list(&crate::domain::slots::ResourceSlots::from_json(
                            &p.total_resource_slots,
                        )?),
                        name: p.name,
                        max_concurrent_sessions: p.max_concurrent_sessions,
                        max_pending_sessions: p.max_pending_sessions,
                        max_session_lifetime_seconds: p.max_session_lifetime_seconds,
                        max_extension_seconds: p.max_extension_seconds,
                        max_extensions: p.max_extensions,
                        idle_timeout_seconds: p.idle_timeout_seconds,
                        idle_utilization: SlotAmount::list(&crate::domain::slots::ResourceSlots::from_json(
                            &p.idle_utilization,
                        )?),
                        idle_counts_terminal: p.idle_counts_terminal,
                        max_priority: p.max_priority,
                    })
                })
                .collect::<ApiResult<_>>()?,
            resource_groups: c.resource_groups.into_iter().map(group).collect(),
            images: c.images.into_iter().map(Image::catalog).collect(),
        })
    }
}

fn project(p: ConfiguredProject) -> ConfiguredProjectView {
    ConfiguredProjectView {
        id: encode(NodeKind::Project, p.id),
        name: p.name,
        limits: SlotAmount::list(&p.limits),
        resource_groups: p.resource_groups,
        member_count: p.members,
    }
}

fn group(g: ConfiguredGroup) -> ConfiguredResourceGroup {
    ConfiguredResourceGroup {
        group: ResourceGroup(g.group),
        engine: g.engine.map(super::runtime::Engine::from),
        agents: g.agents.into_iter().map(agent).collect(),
    }
}

fn agent(a: ConfiguredAgent) -> Agent {
    Agent {
        id: a.id,
        capacity: SlotAmount::list(&a.capacity),
        occupied: SlotAmount::list(&a.occupied),
        status: a.status,
        alive: a.alive,
        schedulable: a.schedulable,
        last_heartbeat_at: a.last_heartbeat_at,
    }
}

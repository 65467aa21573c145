//! `Query.configuration`: what the platform is configured with, read-only, for
//! superadministrators. Changes go through `sessiond apply`.

use async_graphql::{Context, ID, Object, SimpleObject};

use crate::domain::DomainResult;
use crate::domain::directory::configuration::{self, ConfiguredAgent, ConfiguredGroup, ConfiguredProject};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::limits::AGGREGATE_COST;
use super::resource::{Image, ResourceGroup};
use super::types::SlotAmount;

/// The configuration, as `sessiond apply` last left it.
#[derive(SimpleObject)]
pub struct Configuration {
    /// Every domain, by name, with its projects.
    pub domains: Vec<ConfiguredDomain>,
    /// Every keypair policy, by name.
    pub keypair_policies: Vec<KeypairPolicy>,
    /// Every resource group, by name, with its engine and agents.
    pub resource_groups: Vec<ConfiguredResourceGroup>,
    /// Every image of the catalog, by name.
    pub images: Vec<Image>,
}

/// A domain: users and projects under common limits, administered by its ADMINs.
#[derive(SimpleObject)]
pub struct ConfiguredDomain {
    /// Unique on the platform.
    pub name: String,
    /// The domain's limits; a slot not listed is unlimited.
    pub limits: Vec<SlotAmount>,
    /// How many users belong to it.
    pub user_count: u64,
    /// Its projects, by name.
    pub projects: Vec<ConfiguredProjectView>,
}

/// A project of a domain, with its limits, resource groups and number of members.
#[derive(SimpleObject)]
#[graphql(name = "ConfiguredProject")]
pub struct ConfiguredProjectView {
    /// The project's global id (the `Project` node's).
    pub project_id: ID,
    /// Unique within its domain.
    pub name: String,
    /// The project's limits; a slot not listed is unlimited.
    pub limits: Vec<SlotAmount>,
    /// The resource groups it may use, its default first.
    pub resource_groups: Vec<String>,
    /// How many users are its members.
    pub member_count: u64,
}

/// The rules a keypair's sessions follow: what they may hold together, how many may run
/// or wait at once, how long they live, and when they count as idle.
#[derive(SimpleObject)]
pub struct KeypairPolicy {
    /// Unique on the platform; keypairs name the policy they follow.
    pub name: String,
    /// A slot not listed is unlimited.
    pub limits: Vec<SlotAmount>,
    /// How many of one keypair's sessions may hold resources at once (SCHEDULED through
    /// TERMINATING); more wait PENDING with CONCURRENCY_LIMIT.
    pub max_concurrent_sessions: i32,
    /// How many of one keypair's sessions may be PENDING at once; a launch beyond it is
    /// refused with QUOTA_EXCEEDED.
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

/// A resource group with the engine that runs its sessions and its agents.
#[derive(SimpleObject)]
pub struct ConfiguredResourceGroup {
    /// The group's own settings.
    pub group: ResourceGroup,
    /// The engine that runs its sessions (none: nothing runs them), and whether it answers.
    pub engine: Option<super::runtime::Engine>,
    /// Its agents, by name, drained and unanswering ones included.
    pub agents: Vec<Agent>,
}

/// Whether an agent's engine hears from it.
#[derive(async_graphql::Enum, Clone, Copy, PartialEq, Eq)]
pub enum AgentStatus {
    /// It answers (a Slurm node: up in Slurm).
    Alive,
    /// It is gone or does not answer.
    Lost,
}

/// A machine of a resource group.
#[derive(SimpleObject)]
pub struct Agent {
    /// The agent's name, unique on the platform (as declared, or reported by its engine).
    pub name: String,
    /// What it has in all, per slot (cpu in cores, mem in bytes), as declared or as its
    /// engine reports it.
    pub capacity: Vec<SlotAmount>,
    /// What its sessions hold now.
    pub occupied: Vec<SlotAmount>,
    /// Whether its engine last heard from it in time.
    pub status: AgentStatus,
    /// It answers.
    pub alive: bool,
    /// It takes new sessions (false: drained).
    pub schedulable: bool,
    /// When it last reported in, or was last declared (RFC 3339, UTC).
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
                        limits: SlotAmount::list(&crate::domain::model::slots::ResourceSlots::from_json(
                            &p.total_resource_slots,
                        )?),
                        name: p.name,
                        max_concurrent_sessions: p.max_concurrent_sessions,
                        max_pending_sessions: p.max_pending_sessions,
                        max_session_lifetime_seconds: p.max_session_lifetime_seconds,
                        max_extension_seconds: p.max_extension_seconds,
                        max_extensions: p.max_extensions,
                        idle_timeout_seconds: p.idle_timeout_seconds,
                        idle_utilization: SlotAmount::list(&crate::domain::model::slots::ResourceSlots::from_json(
                            &p.idle_utilization,
                        )?),
                        idle_counts_terminal: p.idle_counts_terminal,
                        max_priority: p.max_priority,
                    })
                })
                .collect::<DomainResult<_>>()?,
            resource_groups: c.resource_groups.into_iter().map(group).collect::<DomainResult<_>>()?,
            images: c.images.into_iter().map(Image::catalog).collect(),
        })
    }
}

fn project(p: ConfiguredProject) -> ConfiguredProjectView {
    ConfiguredProjectView {
        project_id: encode(NodeKind::Project, p.id),
        name: p.name,
        limits: SlotAmount::list(&p.limits),
        resource_groups: p.resource_groups,
        member_count: p.members,
    }
}

fn group(g: ConfiguredGroup) -> DomainResult<ConfiguredResourceGroup> {
    Ok(ConfiguredResourceGroup {
        group: ResourceGroup(g.group),
        engine: g.engine.map(super::runtime::Engine::from),
        agents: g.agents.into_iter().map(agent).collect::<DomainResult<_>>()?,
    })
}

fn agent(a: ConfiguredAgent) -> DomainResult<Agent> {
    Ok(Agent {
        name: a.id,
        capacity: SlotAmount::list(&a.capacity),
        occupied: SlotAmount::list(&a.occupied),
        status: super::types::named(&a.status)?,
        alive: a.alive,
        schedulable: a.schedulable,
        last_heartbeat_at: a.last_heartbeat_at,
    })
}

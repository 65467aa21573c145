//! The `keypair_resource_policies` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "keypair_resource_policies")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub total_resource_slots: Json,
    pub max_concurrent_sessions: i32,
    pub max_pending_sessions: i32,
    pub max_session_lifetime_seconds: Option<i64>,
    /// How far one extension may push a session's expiry back; none: extensions refused.
    pub max_extension_seconds: Option<i64>,
    /// How many extensions a session may have; none: extensions refused.
    pub max_extensions: Option<i32>,
    /// An interactive session showing no activity this long is reclaimed; none: never.
    pub idle_timeout_seconds: Option<i64>,
    /// Per slot, the use below which a session counts as idle (`{"cpu": 0.05}`).
    pub idle_utilization: Json,
    /// Whether input into a session's terminal counts as activity.
    pub idle_counts_terminal: bool,
    /// The highest priority its sessions may have; none: the API's bound.
    pub max_priority: Option<i32>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

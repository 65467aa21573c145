//! The `resource_groups` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "resource_groups")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub description: String,
    /// `FIFO`, `LIFO` or `DRF`.
    pub scheduler: String,
    pub pending_timeout_seconds: Option<i64>,
    pub allowed_session_types: Json,
    /// The engine that runs its sessions (`engines.name`); none: nothing runs them.
    pub engine: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

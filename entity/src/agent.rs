//! The `agents` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "agents")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub resource_group: String,
    pub available_slots: Json,
    /// `ALIVE` or `LOST`.
    pub status: String,
    pub schedulable: bool,
    pub pulled_images: Json,
    pub created_at: DateTimeUtc,
    pub last_heartbeat_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

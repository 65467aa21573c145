//! The `utilization_points` table: what a session used, a point a minute over its last hour.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "utilization_points")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub session_id: Uuid,
    /// When the sample was taken.
    pub at: DateTimeUtc,
    /// Per slot, what it used then: `{"cpu": 0.5, "mem": 1073741824}`.
    pub utilization: Json,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

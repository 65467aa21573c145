//! The `resource_group_projects` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "resource_group_projects")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub resource_group: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub project_id: Uuid,
    /// Order of the groups offered to a project; the first is its default.
    pub position: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! The `folders` table: directories sessiond names under a declared storage.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "folders")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub storage: String,
    pub project_id: Uuid,
    pub name: String,
    /// `USER` or `PROJECT`.
    pub scope: String,
    /// Its owner (USER), or the administrator who made it (PROJECT).
    pub owner_id: Uuid,
    /// Where its name is unique in its project: `project`, or `user:<owner>`.
    pub namespace: String,
    pub quota_bytes: i64,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! The `session_templates` table: named launch inputs of a user, per project, optionally
//! shared with the project by an administrator.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_templates")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub owner_id: Uuid,
    pub project_id: Uuid,
    /// Unique per owner and project; also the name of the sessions launched from it.
    pub name: String,
    /// Its project's members see it and launch from it.
    pub shared: bool,
    /// The launch input (`type`, `image`, `resourceGroup`, `resources` per container,
    /// `clusterSize`, `environment`, `startupCommand`, `batchTimeoutSeconds`, `priority`).
    pub input: Json,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

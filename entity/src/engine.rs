//! The `engines` table: what runs the sessions of the resource groups that name it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "engines")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    /// `simulated`, `local` or `slurm`.
    pub kind: String,
    /// The kind's settings (for Slurm: url, partition, user, token_file or token_env; never
    /// a token itself).
    pub settings: Json,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

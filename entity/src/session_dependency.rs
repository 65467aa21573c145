//! The `session_dependencies` table: a batch session waits for another to succeed.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_dependencies")]
pub struct Model {
    /// The session that waits.
    #[sea_orm(primary_key, auto_increment = false)]
    pub session_id: Uuid,
    /// The session it waits for.
    #[sea_orm(primary_key, auto_increment = false)]
    pub depends_on_id: Uuid,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

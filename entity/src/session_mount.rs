//! The `session_mounts` table: which sessions mount a folder (the sessions' own `mounts`
//! say how), so that a folder mounted by a live session is found without reading sessions.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_mounts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub folder_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub session_id: Uuid,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

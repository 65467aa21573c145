//! The `folder_access` table: a member's access to a PROJECT folder, as an administrator
//! granted it (a member without a row reads it).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "folder_access")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub folder_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    pub writable: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

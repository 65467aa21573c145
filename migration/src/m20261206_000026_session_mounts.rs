//! A session's mounts: the folders bound into its sandbox, as it was launched with them
//! (`sessions.mounts`: each folder's id and name then, its path under the work directory,
//! and whether read-only), and the index of which sessions mount a folder
//! (`session_mounts`), by which a folder is not deleted while a live session mounts it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261206_000026_session_mounts"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").add_column(json_null("mounts")).take()).await?;
        m.create_table(
            Table::create()
                .table("session_mounts")
                .col(uuid("folder_id"))
                .col(uuid("session_id"))
                .primary_key(Index::create().col("folder_id").col("session_id"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("session_mounts").take()).await?;
        m.alter_table(Table::alter().table("sessions").drop_column("mounts").take()).await
    }
}

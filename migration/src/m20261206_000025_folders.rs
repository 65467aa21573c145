//! Folders: directories sessiond names under a declared storage, for data that outlives
//! sessions. A USER folder is its owner's; a PROJECT folder is made by an administrator of
//! the project, and each member reads it, or writes it too as the administrator grants
//! (`folder_access`).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261206_000025_folders"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("folders")
                .col(uuid("id").primary_key())
                .col(string("storage"))
                .col(uuid("project_id"))
                .col(string("name"))
                .col(string("scope"))
                .col(uuid("owner_id"))
                // Where names are unique: `project`, or `user:<owner>`.
                .col(string("namespace"))
                .col(big_integer("quota_bytes"))
                .col(timestamp_with_time_zone("created_at"))
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("folders_name")
                .table("folders")
                .col("project_id")
                .col("namespace")
                .col("name")
                .unique()
                .take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table("folder_access")
                .col(uuid("folder_id"))
                .col(uuid("user_id"))
                .col(boolean("writable"))
                .primary_key(Index::create().col("folder_id").col("user_id"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("folder_access").take()).await?;
        m.drop_table(Table::drop().table("folders").take()).await
    }
}

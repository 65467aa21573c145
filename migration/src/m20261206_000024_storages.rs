//! The storage a site declares (`[storage.NAME]` of `sessiond apply`): where folders of
//! sessions' data are made, their default quota and the projects that may use it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261206_000024_storages"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("storages")
                .col(string("name").primary_key())
                .col(json("settings"))
                .col(timestamp_with_time_zone("created_at"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("storages").take()).await
    }
}

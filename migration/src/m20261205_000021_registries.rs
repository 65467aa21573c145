//! The OCI registries a site declares (`[registries.NAME]` of `sessiond apply`): where each
//! is, and how to sign in, as the paths of files that hold the credentials (a password or
//! a token is never stored).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000021_registries"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("registries")
                .col(string("name").primary_key())
                .col(json("settings"))
                .col(timestamp_with_time_zone("created_at"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("registries").take()).await
    }
}

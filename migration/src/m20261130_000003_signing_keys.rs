//! Server secrets, generated on first start and shared by every replica: the key that
//! signs short-lived export links.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000003_signing_keys"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("signing_keys")
                .col(string("name").primary_key())
                .col(string("secret"))
                .col(timestamp_with_time_zone("created_at"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("signing_keys").take()).await
    }
}

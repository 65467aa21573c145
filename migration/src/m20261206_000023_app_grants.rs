//! What opens a session's app in a browser (`openSessionApp`): a ticket, short-lived and
//! used once, traded by the apps' listener for a cookie grant scoped to that app. Only a
//! hash of each secret is stored.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261206_000023_app_grants"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("app_grants")
                .col(string("secret_hash").primary_key())
                .col(string("kind"))
                .col(uuid("session_id"))
                .col(string("app"))
                .col(uuid("user_id"))
                .col(uuid("keypair_id"))
                .col(timestamp_with_time_zone("expires_at"))
                .col(timestamp_with_time_zone_null("used_at"))
                .col(timestamp_with_time_zone("created_at"))
                .take(),
        )
        .await?;
        m.create_index(Index::create().name("app_grants_expires").table("app_grants").col("expires_at").take()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("app_grants").take()).await
    }
}

//! The highest priority a keypair policy's sessions may have: at launch, and when an
//! administrator reprioritises a pending session. None: the API's own bound.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000011_max_priority"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("keypair_resource_policies").add_column(integer_null("max_priority")).take())
            .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("keypair_resource_policies").drop_column("max_priority").take()).await
    }
}

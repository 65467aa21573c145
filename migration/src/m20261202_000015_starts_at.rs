//! A batch session's start time: the scheduler leaves it alone until then (pending reason
//! NOT_YET).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000015_starts_at"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").add_column(timestamp_with_time_zone_null("starts_at")).take())
            .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").drop_column("starts_at").take()).await
    }
}

//! The scheduler's latest verdict on a pending session: its place in its group's queue.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261129_000002_queue_position"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").add_column(integer_null("queue_position")).take()).await?;
        // The runtime finds the sessions it drives by status.
        m.create_index(
            Index::create()
                .name("ix_sessions_status_changed")
                .table("sessions")
                .col("status")
                .col("status_changed_at")
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(Index::drop().name("ix_sessions_status_changed").table("sessions").to_owned()).await?;
        m.alter_table(Table::alter().table("sessions").drop_column("queue_position").take()).await
    }
}

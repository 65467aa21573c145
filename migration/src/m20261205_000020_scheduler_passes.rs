//! How many scheduling passes each resource group has had, so that a waiting session's
//! history counts the passes it waited through without a write per pass:
//!
//! - `scheduler_passes`: per resource group, the passes completed and when the last one
//!   ran, moved once at the end of each pass (one row per group, whatever the queue).
//! - `scheduling_history.pass`: on the line of a session that still waits, the number of
//!   the pass that wrote it; the passes since then are attempts of the same decision. It is
//!   cleared (and the count kept in `attempts`, the last try in `last_tried_at`) when the
//!   line stops counting: a new decision, or the session leaves PENDING.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000020_scheduler_passes"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("scheduler_passes")
                .col(string("resource_group").primary_key())
                .col(big_integer("passes").default(0))
                .col(timestamp_with_time_zone_null("last_pass_at"))
                .take(),
        )
        .await?;
        m.alter_table(Table::alter().table("scheduling_history").add_column(big_integer_null("pass")).take()).await?;
        m.alter_table(
            Table::alter()
                .table("scheduling_history")
                .add_column(timestamp_with_time_zone_null("last_tried_at"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("scheduling_history").drop_column("last_tried_at").take()).await?;
        m.alter_table(Table::alter().table("scheduling_history").drop_column("pass").take()).await?;
        m.drop_table(Table::drop().table("scheduler_passes").take()).await
    }
}

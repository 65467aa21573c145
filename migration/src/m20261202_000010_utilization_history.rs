//! What a session used over its last hour, for a sparkline: a point a minute (each the
//! sample that opens its minute), at most an hour's worth per session whatever its length,
//! gone with the session. And its latest use of cpu and mem as numbers a list orders by.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000010_utilization_history"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("utilization_points")
                .col(big_pk_auto("id"))
                .col(uuid("session_id"))
                .col(timestamp_with_time_zone("at"))
                .col(json_binary("utilization"))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_utilization_points_session")
                        .from("utilization_points", "session_id")
                        .to("sessions", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_utilization_points_session")
                .table("utilization_points")
                .col("session_id")
                .col("at")
                .take(),
        )
        .await?;
        // SQLite alters one column at a time.
        for column in [double("cpu_used").default(0.0).take(), double("mem_used").default(0.0).take()] {
            m.alter_table(Table::alter().table("sessions").add_column(column).take()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in ["cpu_used", "mem_used"] {
            m.alter_table(Table::alter().table("sessions").drop_column(column).take()).await?;
        }
        m.drop_table(Table::drop().table("utilization_points").take()).await
    }
}

//! What a live session uses, as its engine's looks sample it: per slot the latest value,
//! the average and the maximum since it started (`{"cpu": [current, average, maximum]}`),
//! over how many samples, and when the latest was taken. Kept after it ends, for the record.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000008_utilization"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // SQLite alters one column at a time.
        for column in [
            ColumnDef::new("utilization").json_binary().not_null().default(Expr::value("{}")).take(),
            integer("utilization_samples").default(0).take(),
            timestamp_with_time_zone_null("utilization_sampled_at"),
        ] {
            m.alter_table(Table::alter().table("sessions").add_column(column).take()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in ["utilization", "utilization_samples", "utilization_sampled_at"] {
            m.alter_table(Table::alter().table("sessions").drop_column(column).take()).await?;
        }
        Ok(())
    }
}

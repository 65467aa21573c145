//! Idle checks: a keypair policy may reclaim an interactive session that shows no activity
//! for a while (`idle_timeout_seconds`): no use above `idle_utilization`, and no terminal
//! input when `idle_counts_terminal`. A session keeps its policy's checks (`idle`), when
//! it was last seen active (`active_at`: use above a threshold, or an extension) and last
//! typed into (`typed_at`), and whether an administrator exempted it (`exempt_idle`).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000009_idle"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // SQLite alters one column at a time.
        for column in [
            json_binary_null("idle"),
            timestamp_with_time_zone_null("active_at"),
            timestamp_with_time_zone_null("typed_at"),
            boolean("exempt_idle").default(false).take(),
        ] {
            m.alter_table(Table::alter().table("sessions").add_column(column).take()).await?;
        }
        for column in [
            big_integer_null("idle_timeout_seconds"),
            ColumnDef::new("idle_utilization").json_binary().not_null().default(Expr::value("{}")).take(),
            boolean("idle_counts_terminal").default(false).take(),
        ] {
            m.alter_table(Table::alter().table("keypair_resource_policies").add_column(column).take()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in ["idle_timeout_seconds", "idle_utilization", "idle_counts_terminal"] {
            m.alter_table(Table::alter().table("keypair_resource_policies").drop_column(column).take()).await?;
        }
        for column in ["idle", "active_at", "typed_at", "exempt_idle"] {
            m.alter_table(Table::alter().table("sessions").drop_column(column).take()).await?;
        }
        Ok(())
    }
}

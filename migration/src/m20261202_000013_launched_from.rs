//! Where a session came from: the session it was launched again from (`relaunchSession`),
//! and that session's name then (it may be renamed or gone since).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000013_launched_from"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // SQLite alters one column at a time.
        for column in [uuid_null("launched_from_session_id"), string_null("launched_from_name")] {
            m.alter_table(Table::alter().table("sessions").add_column(column).take()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in ["launched_from_session_id", "launched_from_name"] {
            m.alter_table(Table::alter().table("sessions").drop_column(column).take()).await?;
        }
        Ok(())
    }
}

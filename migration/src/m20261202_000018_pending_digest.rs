//! A digest of a waiting session's pending reasons, written with them: the scheduling pass
//! compares it, an integer, instead of reading and parsing every waiting session's reasons
//! on every pass. 0 until a writer sets it (the next pass then writes the reasons once).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000018_pending_digest"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").add_column(big_integer("pending_digest").default(0)).take())
            .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").drop_column("pending_digest").take()).await
    }
}

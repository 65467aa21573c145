//! What a session's image pull shows: `pull_progress` (bytes and layers fetched of the
//! total, while PULLING, with when it was written) and `image_digest` (the manifest digest
//! its image's reference resolved to when it was pulled: what ran).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000022_session_pull"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").add_column(json_null("pull_progress")).take()).await?;
        m.alter_table(Table::alter().table("sessions").add_column(string_null("image_digest")).take()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").drop_column("image_digest").take()).await?;
        m.alter_table(Table::alter().table("sessions").drop_column("pull_progress").take()).await
    }
}

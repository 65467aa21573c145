//! Engines: what runs a resource group's sessions (`simulated`, `local`, `slurm`), declared
//! with `sessiond apply`, each group naming its own (null: none, and nothing runs there).
//! `engine_jobs` remembers which job of an engine is which session's, written once the
//! engine accepted it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000006_engines"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("engines")
                .col(string("name").primary_key())
                .col(string("kind"))
                .col(ColumnDef::new("settings").json_binary().not_null())
                .col(timestamp_with_time_zone("created_at"))
                .take(),
        )
        .await?;
        m.alter_table(
            Table::alter().table("resource_groups").add_column(ColumnDef::new("engine").string().null()).take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table("engine_jobs")
                .col(uuid("session_id").primary_key())
                .col(string("engine"))
                .col(string("job_id"))
                .col(timestamp_with_time_zone("submitted_at"))
                .take(),
        )
        .await?;
        m.create_index(Index::create().name("engine_jobs_engine").table("engine_jobs").col("engine").take()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("engine_jobs").take()).await?;
        m.alter_table(Table::alter().table("resource_groups").drop_column("engine").take()).await?;
        m.drop_table(Table::drop().table("engines").take()).await
    }
}

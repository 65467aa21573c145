//! A batch session may wait for others (`dependsOn`): it is scheduled once every one has
//! TERMINATED with SUCCESS, and cancelled when one fails. Only existing sessions can be
//! named, so the dependencies never make a circle.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000016_dependencies"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("session_dependencies")
                .col(uuid("session_id"))
                .col(uuid("depends_on_id"))
                .primary_key(Index::create().col("session_id").col("depends_on_id"))
                .foreign_key(
                    ForeignKey::create()
                        .from("session_dependencies", "session_id")
                        .to("sessions", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from("session_dependencies", "depends_on_id")
                        .to("sessions", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_session_dependencies_depends_on")
                .table("session_dependencies")
                .col("depends_on_id")
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("session_dependencies").take()).await
    }
}

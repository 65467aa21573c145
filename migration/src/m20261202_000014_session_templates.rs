//! Session templates: named launch inputs a user keeps per project (unique by owner,
//! project and name), optionally shared with the project. Gone with their owner or project.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000014_session_templates"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("session_templates")
                .col(uuid("id").primary_key())
                .col(uuid("owner_id"))
                .col(uuid("project_id"))
                .col(string("name"))
                .col(boolean("shared").default(false))
                .col(json("input"))
                .col(timestamp_with_time_zone("created_at"))
                .col(timestamp_with_time_zone("updated_at"))
                .foreign_key(
                    ForeignKey::create()
                        .from("session_templates", "owner_id")
                        .to("users", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .foreign_key(
                    ForeignKey::create()
                        .from("session_templates", "project_id")
                        .to("projects", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_session_templates_owner_project_name")
                .table("session_templates")
                .col("owner_id")
                .col("project_id")
                .col("name")
                .unique()
                .take(),
        )
        .await?;
        m.create_index(
            Index::create().name("ix_session_templates_project").table("session_templates").col("project_id").take(),
        )
        .await?;
        // Where a session came from may be a template.
        m.alter_table(Table::alter().table("sessions").add_column(uuid_null("launched_from_template_id")).take()).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").drop_column("launched_from_template_id").take()).await?;
        m.drop_table(Table::drop().table("session_templates").take()).await
    }
}

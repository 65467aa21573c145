//! Completion callbacks: a session may name a URL that is told of its end (and, when asked,
//! of its start). Each such event is a row of the `session_callbacks` outbox, written in the
//! transaction of the status change, and each try to deliver it a row of
//! `session_callback_attempts`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000017_callbacks"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("sessions").add_column(text_null("callback_url")).take()).await?;
        m.alter_table(
            Table::alter().table("sessions").add_column(boolean("callback_on_running").default(false)).take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table("session_callbacks")
                .col(pk_uuid("id"))
                .col(uuid("session_id"))
                .col(uuid("owner_id"))
                .col(string("event"))
                .col(text("url"))
                .col(text("payload"))
                .col(string("state"))
                .col(integer("attempts").default(0))
                .col(timestamp_with_time_zone("created_at"))
                .col(timestamp_with_time_zone("next_attempt_at"))
                .col(uuid_null("claim"))
                .col(timestamp_with_time_zone_null("finished_at"))
                .foreign_key(
                    ForeignKey::create()
                        .from("session_callbacks", "session_id")
                        .to("sessions", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_session_callbacks_due")
                .table("session_callbacks")
                .col("state")
                .col("next_attempt_at")
                .take(),
        )
        .await?;
        m.create_index(
            Index::create().name("ix_session_callbacks_session").table("session_callbacks").col("session_id").take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table("session_callback_attempts")
                .col(big_pk_auto("id"))
                .col(uuid("callback_id"))
                .col(integer("attempt"))
                .col(timestamp_with_time_zone("attempted_at"))
                .col(integer("duration_ms"))
                .col(string("outcome"))
                .col(integer_null("status_code"))
                .col(text_null("error"))
                .foreign_key(
                    ForeignKey::create()
                        .from("session_callback_attempts", "callback_id")
                        .to("session_callbacks", "id")
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_session_callback_attempts_callback")
                .table("session_callback_attempts")
                .col("callback_id")
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("session_callback_attempts").take()).await?;
        m.drop_table(Table::drop().table("session_callbacks").take()).await?;
        m.alter_table(Table::alter().table("sessions").drop_column("callback_on_running").take()).await?;
        m.alter_table(Table::alter().table("sessions").drop_column("callback_url").take()).await
    }
}

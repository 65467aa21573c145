//! When a live session will be reclaimed, and how far it may be pushed back: each session
//! keeps the lifetime its keypair's policy gave it (kept in step with the policy by
//! `apply`), what extensions added, and the expiry it was last warned of; a policy says how
//! long one extension may be and how many a session may have. A session's events are its
//! status changes and the warnings of its coming expiry.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000007_expiry"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // SQLite alters one column at a time.
        for column in [
            big_integer_null("lifetime_seconds"),
            big_integer("extended_seconds").default(0).take(),
            integer("extensions").default(0).take(),
            timestamp_with_time_zone_null("expiry_warned_for"),
        ] {
            m.alter_table(Table::alter().table("sessions").add_column(column).take()).await?;
        }
        // A session's event is a status change or a warning of its coming expiry.
        m.alter_table(
            Table::alter()
                .table("session_status_transitions")
                .add_column(string("kind").default("STATUS").take())
                .take(),
        )
        .await?;
        for column in [big_integer_null("max_extension_seconds"), integer_null("max_extensions")] {
            m.alter_table(Table::alter().table("keypair_resource_policies").add_column(column).take()).await?;
        }
        // Sessions live at this migration keep the lifetime their policy gives them now.
        let backend = m.get_database_backend();
        m.get_connection()
            .execute_raw(sea_orm::Statement::from_string(
                backend,
                "UPDATE sessions SET lifetime_seconds = (SELECT p.max_session_lifetime_seconds \
                 FROM keypairs k JOIN keypair_resource_policies p ON p.name = k.resource_policy \
                 WHERE k.id = sessions.keypair_id)",
            ))
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("session_status_transitions").drop_column("kind").take()).await?;
        for column in ["max_extension_seconds", "max_extensions"] {
            m.alter_table(Table::alter().table("keypair_resource_policies").drop_column(column).take()).await?;
        }
        for column in ["lifetime_seconds", "extended_seconds", "extensions", "expiry_warned_for"] {
            m.alter_table(Table::alter().table("sessions").drop_column(column).take()).await?;
        }
        Ok(())
    }
}

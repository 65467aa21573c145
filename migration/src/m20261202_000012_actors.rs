//! Who did it: each status change and each line of a session's history names its actor,
//! a user (`actor_user_id`: launch, terminate, modify, extend, exempt) or the system with
//! the rule that fired (`actor_rule`: the scheduler, an engine, a timeout, an idle check).
//! Rows written before this migration name neither, and read as the system's.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000012_actors"
    }
}

const TABLES: [&str; 2] = ["session_status_transitions", "scheduling_history"];

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // SQLite alters one column at a time.
        for table in TABLES {
            for column in [uuid_null("actor_user_id"), string_null("actor_rule")] {
                m.alter_table(Table::alter().table(table).add_column(column).take()).await?;
            }
        }
        // A session's latest status change, and who made it, with the session (the list
        // and the export read it with the row).
        for column in [uuid_null("status_actor_user_id"), string_null("status_actor_rule")] {
            m.alter_table(Table::alter().table("sessions").add_column(column).take()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for table in TABLES {
            for column in ["actor_user_id", "actor_rule"] {
                m.alter_table(Table::alter().table(table).drop_column(column).take()).await?;
            }
        }
        for column in ["status_actor_user_id", "status_actor_rule"] {
            m.alter_table(Table::alter().table("sessions").drop_column(column).take()).await?;
        }
        Ok(())
    }
}

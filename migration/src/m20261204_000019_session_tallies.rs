//! How many sessions each project holds, by owner, type and status, kept by the database
//! itself in the transaction of every change of a session: the page's counts read these
//! few rows instead of every session of the project.
//!
//! - `session_tally_changes`: what each insert, delete, or change of project, owner, type
//!   or status adds (+1) and takes (-1), written by triggers on `sessions`. Rows are only
//!   ever added, so concurrent writers never wait for one another here.
//! - `session_tallies`: the changes folded in, one row per (project, owner, type, status).
//!
//! A count is a tally plus the changes not folded yet, so it is exact whenever the fold
//! runs. The existing sessions are counted once, here.

use sea_orm::DbBackend;
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261204_000019_session_tallies"
    }
}

const KEY: &str = "project_id, owner_id, session_type, status";

const POSTGRES_TRIGGERS: &[&str] = &[
    // Inserts and deletes come in bulk (a launch of many, a prune): one statement of
    // changes per statement, from its transition table.
    "CREATE FUNCTION session_tally_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO session_tally_changes (project_id, owner_id, session_type, status, delta)
       SELECT project_id, owner_id, session_type, status, COUNT(*) FROM added
       GROUP BY project_id, owner_id, session_type, status;
       RETURN NULL;
     END $$",
    "CREATE FUNCTION session_tally_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO session_tally_changes (project_id, owner_id, session_type, status, delta)
       SELECT project_id, owner_id, session_type, status, -COUNT(*) FROM removed
       GROUP BY project_id, owner_id, session_type, status;
       RETURN NULL;
     END $$",
    "CREATE FUNCTION session_tally_changed() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO session_tally_changes (project_id, owner_id, session_type, status, delta) VALUES
         (OLD.project_id, OLD.owner_id, OLD.session_type, OLD.status, -1),
         (NEW.project_id, NEW.owner_id, NEW.session_type, NEW.status, 1);
       RETURN NULL;
     END $$",
    "CREATE TRIGGER session_tally_inserted AFTER INSERT ON sessions
     REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION session_tally_inserted()",
    "CREATE TRIGGER session_tally_deleted AFTER DELETE ON sessions
     REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION session_tally_deleted()",
    // Most updates change none of the key (a heartbeat, a rename): the condition is all
    // they cost.
    "CREATE TRIGGER session_tally_changed AFTER UPDATE OF project_id, owner_id, session_type, status ON sessions
     FOR EACH ROW WHEN (OLD.project_id IS DISTINCT FROM NEW.project_id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
       OR OLD.session_type IS DISTINCT FROM NEW.session_type OR OLD.status IS DISTINCT FROM NEW.status)
     EXECUTE FUNCTION session_tally_changed()",
];

const SQLITE_TRIGGERS: &[&str] = &[
    "CREATE TRIGGER session_tally_inserted AFTER INSERT ON sessions BEGIN
       INSERT INTO session_tally_changes (project_id, owner_id, session_type, status, delta)
       VALUES (NEW.project_id, NEW.owner_id, NEW.session_type, NEW.status, 1);
     END",
    "CREATE TRIGGER session_tally_deleted AFTER DELETE ON sessions BEGIN
       INSERT INTO session_tally_changes (project_id, owner_id, session_type, status, delta)
       VALUES (OLD.project_id, OLD.owner_id, OLD.session_type, OLD.status, -1);
     END",
    "CREATE TRIGGER session_tally_changed AFTER UPDATE OF project_id, owner_id, session_type, status ON sessions
     WHEN OLD.project_id IS NOT NEW.project_id OR OLD.owner_id IS NOT NEW.owner_id
       OR OLD.session_type IS NOT NEW.session_type OR OLD.status IS NOT NEW.status
     BEGIN
       INSERT INTO session_tally_changes (project_id, owner_id, session_type, status, delta)
       VALUES (OLD.project_id, OLD.owner_id, OLD.session_type, OLD.status, -1),
              (NEW.project_id, NEW.owner_id, NEW.session_type, NEW.status, 1);
     END",
];

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table("session_tallies")
                .col(uuid("project_id"))
                .col(uuid("owner_id"))
                .col(string("session_type"))
                .col(string("status"))
                .col(big_integer("n"))
                .primary_key(Index::create().col("project_id").col("owner_id").col("session_type").col("status"))
                .take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table("session_tally_changes")
                .col(big_pk_auto("id"))
                .col(uuid("project_id"))
                .col(uuid("owner_id"))
                .col(string("session_type"))
                .col(string("status"))
                .col(big_integer("delta"))
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_session_tally_changes_project")
                .table("session_tally_changes")
                .col("project_id")
                .col("owner_id")
                .take(),
        )
        .await?;
        let db = m.get_connection();
        let triggers = match m.get_database_backend() {
            DbBackend::Postgres => POSTGRES_TRIGGERS,
            _ => SQLITE_TRIGGERS,
        };
        for statement in triggers {
            db.execute_unprepared(statement).await?;
        }
        db.execute_unprepared(&format!(
            "INSERT INTO session_tallies ({KEY}, n) SELECT {KEY}, COUNT(*) FROM sessions GROUP BY {KEY}"
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        let postgres = m.get_database_backend() == DbBackend::Postgres;
        for t in ["session_tally_inserted", "session_tally_deleted", "session_tally_changed"] {
            let on = if postgres { " ON sessions" } else { "" };
            db.execute_unprepared(&format!("DROP TRIGGER IF EXISTS {t}{on}")).await?;
            if postgres {
                db.execute_unprepared(&format!("DROP FUNCTION IF EXISTS {t}()")).await?;
            }
        }
        m.drop_table(Table::drop().table("session_tally_changes").take()).await?;
        m.drop_table(Table::drop().table("session_tallies").take()).await
    }
}

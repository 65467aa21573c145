//! Counters that say "this changed": every replica polls them (and, on PostgreSQL, hears a
//! `NOTIFY` when they move). `credentials` moves whenever a token, a user, a role or a
//! membership changes, so that open connections check their credentials again at once.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000005_revisions"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create().table("revisions").col(string("name").primary_key()).col(big_integer("value")).take(),
        )
        .await?;
        let insert = Query::insert()
            .into_table("revisions")
            .columns(["name", "value"])
            .values_panic(["credentials".into(), 0i64.into()])
            .to_owned();
        m.exec_stmt(insert).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table("revisions").take()).await
    }
}

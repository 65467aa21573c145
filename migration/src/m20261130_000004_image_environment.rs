//! How an image runs on a machine of the local runtime (root, command, prepare step,
//! environment), declared with the image by `sessiond apply`. Null: the host's
//! directories, nothing prepared.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000004_image_environment"
    }
}

#[sea_orm_migration::async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table("images").add_column(ColumnDef::new("local_environment").json_binary().null()).take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table("images").drop_column("local_environment").take()).await
    }
}

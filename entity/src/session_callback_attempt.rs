//! The `session_callback_attempts` table: each try to deliver a completion callback.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_callback_attempts")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub callback_id: Uuid,
    /// 1 for the first try.
    pub attempt: i32,
    pub attempted_at: DateTimeUtc,
    pub duration_ms: i32,
    /// DELIVERED, REFUSED (the receiver answered, not with 2xx), UNREACHABLE, TIMEOUT or
    /// BLOCKED (the address or host is not allowed).
    pub outcome: String,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<i32>,
    /// What went wrong, in a line.
    #[sea_orm(column_type = "Text", nullable)]
    pub error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

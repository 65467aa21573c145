//! The `session_callbacks` table: the outbox of completion callbacks, one row per event of a
//! session that names a callback URL.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_callbacks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Uuid,
    /// The session's owner, whose key signs the payload.
    pub owner_id: Uuid,
    /// The status the session reached: RUNNING, or a terminal one.
    pub event: String,
    /// Where it goes (the session's callback URL when the event happened).
    #[sea_orm(column_type = "Text")]
    pub url: String,
    /// The JSON body sent, as it was when the event happened.
    #[sea_orm(column_type = "Text")]
    pub payload: String,
    /// PENDING (to be tried at `next_attempt_at`), DELIVERED or FAILED.
    pub state: String,
    /// Tries made so far.
    pub attempts: i32,
    pub created_at: DateTimeUtc,
    /// When it is due; while a deliverer holds it, when its hold lapses.
    pub next_attempt_at: DateTimeUtc,
    /// The deliverer holding it, if any.
    pub claim: Option<Uuid>,
    /// When it was delivered or given up.
    pub finished_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

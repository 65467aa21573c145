//! The `scheduling_history` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "scheduling_history")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub session_id: Uuid,
    pub phase: String,
    pub from_status: Option<String>,
    pub to_status: Option<String>,
    pub result: String,
    pub error_code: Option<String>,
    pub message: String,
    pub sub_steps: Json,
    pub attempts: i32,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// Who made it: a user, or (none) the system by `actor_rule`.
    pub actor_user_id: Option<Uuid>,
    pub actor_rule: Option<String>,
    /// While the session still waits on this decision: the number of the scheduling pass
    /// (of its resource group) that wrote it; each pass since is one more attempt. Cleared,
    /// the count kept in `attempts`, once the line stops counting.
    pub pass: Option<i64>,
    /// The last attempt `attempts` counts, when it is not `updated_at`.
    pub last_tried_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

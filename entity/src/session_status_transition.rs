//! The `session_status_transitions` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "session_status_transitions")]
pub struct Model {
    /// Global sequence: the order of events and the resume cursor of subscriptions.
    #[sea_orm(primary_key)]
    pub id: i64,
    pub session_id: Uuid,
    pub from_status: Option<String>,
    pub to_status: String,
    pub reason: Option<String>,
    pub occurred_at: DateTimeUtc,
    /// `STATUS` (a status change) or `EXPIRY_WARNING` (from and to are the status it has).
    pub kind: String,
    /// Who made it: a user, or (none) the system by `actor_rule`.
    pub actor_user_id: Option<Uuid>,
    pub actor_rule: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(belongs_to = "super::session::Entity", from = "Column::SessionId", to = "super::session::Column::Id")]
    Session,
}

impl Related<super::session::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Session.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}

//! The `app_grants` table: tickets and cookie grants that open a session's app.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "app_grants")]
pub struct Model {
    /// sha256 (hex) of the secret: the ticket's, or the cookie's.
    #[sea_orm(primary_key, auto_increment = false)]
    pub secret_hash: String,
    /// `ticket` or `cookie`.
    pub kind: String,
    pub session_id: Uuid,
    pub app: String,
    pub user_id: Uuid,
    /// The keypair whose token asked for it: revoked, the grant is void.
    pub keypair_id: Uuid,
    pub expires_at: DateTimeUtc,
    /// When a ticket was traded for a cookie.
    pub used_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

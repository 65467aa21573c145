//! The rules of sessiond, in the page's language. Nothing here knows a transport (its
//! names, paths, headers or cursors): functions take a database connection or transaction
//! and return [`DomainError`]s, which each transport maps to its public codes in one place.

pub mod auth;
pub mod catalog;
pub mod clock;
pub mod error;
pub mod events;
pub mod export;
pub mod generate;
pub mod history;
pub mod ids;
pub mod launch;
pub mod lifecycle;
pub mod logs;
pub mod model;
pub mod occupancy;
pub mod paging;
pub mod panels;
pub mod relations;
pub mod runtime;
pub mod scheduler;
pub mod scheduling;
pub mod seed;
pub mod sessions;
pub mod settings;
pub mod slots;
pub mod status;
pub mod terminate;
pub mod visibility;
pub mod watch;

pub use error::{DomainError, DomainResult, InputProblem};

/// Begins a transaction that will write. On SQLite it takes the write lock at once
/// (`BEGIN IMMEDIATE`), waiting up to the busy timeout, instead of failing when a read
/// turns into a write after another writer committed. PostgreSQL ignores the mode.
pub async fn begin_write(db: &sea_orm::DatabaseConnection) -> Result<sea_orm::DatabaseTransaction, sea_orm::DbErr> {
    use sea_orm::{SqliteTransactionMode, TransactionOptions, TransactionTrait};
    db.begin_with_options(TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..Default::default()
    })
    .await
}

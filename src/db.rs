//! Opening the database: SQLite (embedded default) or PostgreSQL (production).

use std::time::Duration;

use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};

/// Connects with the pool `args` describe. SQLite runs in WAL mode with a busy timeout so
/// that readers never queue behind the one writer.
pub async fn connect(args: &crate::config::DbArgs) -> Result<DatabaseConnection, DbErr> {
    let url = args.database_url.as_str();
    let statements = args.db_statement_cache;
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.max_connections(args.db_max_connections.max(1))
        .min_connections(1)
        .acquire_timeout(Duration::from_millis(args.db_acquire_timeout_ms.max(1)))
        .sqlx_logging(false);
    if url.starts_with("sqlite:") {
        if url.contains(":memory:") || url.contains("mode=memory") {
            // Each pooled connection would get its own empty in-memory database.
            opts.max_connections(1);
        }
        opts.map_sqlx_sqlite_opts(move |o| {
            o.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                .pragma("mmap_size", "268435456")
                .statement_cache_capacity(statements)
        });
    } else {
        opts.map_sqlx_postgres_opts(move |o| o.statement_cache_capacity(statements));
    }
    Database::connect(opts).await
}

/// Applies every pending migration.
pub async fn migrate(db: &DatabaseConnection) -> Result<(), DbErr> {
    Migrator::up(db, None).await
}

/// Closes the database for a shutdown. On SQLite the write-ahead log is first written back
/// into the database file and truncated, so that the `.db` file alone holds everything (a
/// copy of it is a complete backup); closing the last connection then removes the log.
/// Waits at most `patience` for connections still in use.
pub async fn close(db: DatabaseConnection, patience: Duration) {
    use sea_orm::ConnectionTrait;
    if db.get_database_backend() == sea_orm::DbBackend::Sqlite
        && let Err(e) = db.execute_unprepared("PRAGMA wal_checkpoint(TRUNCATE)").await
    {
        tracing::warn!(error = %e, "could not write the SQLite log back into the database file");
    }
    if tokio::time::timeout(patience, db.close()).await.is_err() {
        tracing::warn!("database connections still in use at shutdown; leaving them");
    }
}

/// The pool's open connections and how many of them are idle: what `/metrics` reports.
pub fn pool_figures(db: &DatabaseConnection) -> (u64, u64) {
    match db.get_database_backend() {
        sea_orm::DbBackend::Sqlite => {
            let pool = db.get_sqlite_connection_pool();
            (u64::from(pool.size()), pool.num_idle() as u64)
        }
        sea_orm::DbBackend::Postgres => {
            let pool = db.get_postgres_connection_pool();
            (u64::from(pool.size()), pool.num_idle() as u64)
        }
        _ => (0, 0),
    }
}

//! Opening the database: SQLite (embedded default) or PostgreSQL (production).

use std::time::Duration;

use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};

/// Connects with the pool `args` describe. SQLite runs in WAL mode with a busy timeout so
/// that readers never queue behind the one writer.
pub async fn connect(args: &crate::config::DbArgs) -> Result<DatabaseConnection, DbErr> {
    open(args, args.db_max_connections).await
}

/// The pool of the background workers (scheduler, runtime, event feed): one connection of
/// their own, so that a flood of requests never makes them wait for one, and so that their
/// steady polling leaves the request pool's connections idle after a burst, to be closed.
/// (Three connections here held ~9 MiB more after a load, for no gain in throughput.) An
/// in-memory database has one connection, shared: `requests` is returned.
pub async fn connect_workers(
    args: &crate::config::DbArgs,
    requests: &DatabaseConnection,
) -> Result<DatabaseConnection, DbErr> {
    if in_memory(&args.database_url) { Ok(requests.clone()) } else { open(args, WORKER_CONNECTIONS).await }
}

/// The pool replays of missed events read on ([`crate::domain::live::replay`]): `connections` of
/// their own, so that a flood of replays never takes a connection a request waits for. An
/// in-memory database has one connection, shared: `requests` is returned.
pub async fn connect_replays(
    args: &crate::config::DbArgs,
    connections: u32,
    requests: &DatabaseConnection,
) -> Result<DatabaseConnection, DbErr> {
    if in_memory(&args.database_url) { Ok(requests.clone()) } else { open(args, connections).await }
}

/// Connections of the background workers' pool: the scheduler, the runtime and the event
/// feed take turns; none holds it while it waits for anything but the database.
const WORKER_CONNECTIONS: u32 = 1;

/// A PostgreSQL connection idle this long is checked before it is handed out.
const PING_AFTER_IDLE: Duration = Duration::from_secs(10);

/// Whether `url` names an in-memory SQLite database (one connection, shared by everyone).
pub fn in_memory(url: &str) -> bool {
    url.starts_with("sqlite:") && (url.contains(":memory:") || url.contains("mode=memory"))
}

async fn open(args: &crate::config::DbArgs, connections: u32) -> Result<DatabaseConnection, DbErr> {
    let url = args.database_url.as_str();
    let statements = args.db_statement_cache;
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.max_connections(connections.max(1))
        .min_connections(1)
        .acquire_timeout(Duration::from_millis(args.db_acquire_timeout_ms.max(1)))
        .idle_timeout(Duration::from_millis(args.db_idle_timeout_ms.max(1)))
        .sqlx_logging(false);
    if url.starts_with("sqlite:") {
        // A connection to a file in this process cannot be dropped by a server or a
        // firewall: pinging it before each statement (sqlx's default) only sends the
        // connection's worker thread a message and waits for its answer, once per statement.
        opts.test_before_acquire(false);
        if in_memory(url) {
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
        // A round trip to the server before each statement only pays for a connection that
        // sat idle long enough for the server, a proxy or a firewall to have dropped it.
        opts.test_before_acquire_if_idle_for(PING_AFTER_IDLE);
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

//! Reads on SQLite without leaving the request's thread.
//!
//! sqlx gives each SQLite connection a thread of its own: a statement is sent to it, and
//! every row comes back as a copy of each of its values, freed on the other side. For a page
//! of sessions that hand-off, not SQLite, is most of the cost (BENCHMARKS.md, "The page with
//! every column"): the two threads wake each other for every statement, and the allocator
//! collects thousands of values freed across threads. [`InlineReads`] keeps a few read-only
//! connections of its own to the same file and steps a statement on the caller's thread,
//! reading each value where SQLite holds it.
//!
//! Only reads that are bounded and short take this path (a page of sessions: its size is
//! capped, its order walks an index; the project it lists). A connection that finds the
//! database busy gives up at once ([`BUSY`]), and a statement still running after
//! [`BUDGET`] is stopped; either way the caller reads through the pool instead, so a request
//! thread never waits on a lock or a long scan. The same statements, the same values: a row
//! is read through [`RowAt`], which a pooled row implements too, so one function decodes
//! both ([`all`] runs a statement either way).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDateTime, SecondsFormat, TimeZone, Utc};
use rusqlite::types::{Value as Stored, ValueRef};
use rusqlite::{Connection, OpenFlags};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, Statement, Value};
use uuid::Uuid;

use crate::domain::DomainResult;

/// How long a read waits for a lock before it is handed back to the pool.
const BUSY: Duration = Duration::from_millis(0);
/// How long a statement may run on the caller's thread before it is stopped and handed to
/// the pool (a page takes a fraction of a millisecond; a filter that scans a large project
/// may not, and must not hold a thread that answers other requests).
const BUDGET: Duration = Duration::from_millis(5);
/// SQLite checks the budget every so many of its instructions (a few microseconds).
const CHECK_EVERY: i32 = 2_000;
/// Idle connections kept; more are opened while more threads read at once.
const IDLE: usize = 4;
/// Prepared statements each connection keeps.
const STATEMENTS: usize = 16;

/// Called with each statement's text as it runs (the tests count statements with it).
type Observer = Box<dyn Fn(&str) + Send + Sync>;

/// Read-only connections to the server's SQLite file, used on the caller's thread. Cheap to
/// clone.
#[derive(Clone)]
pub struct InlineReads(Arc<Inner>);

struct Inner {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    observer: OnceLock<Observer>,
}

impl std::fmt::Debug for InlineReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineReads").field("path", &self.0.path).finish_non_exhaustive()
    }
}

/// Why a statement was not read inline.
#[derive(Debug)]
pub enum NotInline<E> {
    /// The database was busy, a value cannot be bound here, or the connection failed: the
    /// caller reads through the pool instead.
    Declined,
    /// A row could not be read: the error reading it through the pool would give.
    Failed(E),
}

impl InlineReads {
    /// For a database in a SQLite file: its inline reads. None for PostgreSQL or a database
    /// in memory (another connection could not see it).
    pub fn of(db: &DatabaseConnection) -> Option<Self> {
        if db.get_database_backend() != DbBackend::Sqlite {
            return None;
        }
        let path = db.get_sqlite_connection_pool().connect_options().get_filename().to_path_buf();
        path.is_file().then(|| Self::at(path))
    }

    fn at(path: PathBuf) -> Self {
        Self(Arc::new(Inner { path, idle: Mutex::default(), observer: OnceLock::new() }))
    }

    /// Calls `observer` with each statement read inline (set once; later calls are ignored).
    pub fn observe(&self, observer: impl Fn(&str) + Send + Sync + 'static) {
        let _ = self.0.observer.set(Box::new(observer));
    }

    /// Runs `statement` and makes each row a value with `read`, within [`BUDGET`].
    pub fn rows<T, E>(
        &self,
        statement: &Statement,
        read: impl FnMut(&rusqlite::Row<'_>) -> Result<T, E>,
    ) -> Result<Vec<T>, NotInline<E>> {
        self.rows_within(statement, Some(BUDGET), read)
    }

    /// The same, stopped after `budget` if there is one.
    fn rows_within<T, E>(
        &self,
        statement: &Statement,
        budget: Option<Duration>,
        mut read: impl FnMut(&rusqlite::Row<'_>) -> Result<T, E>,
    ) -> Result<Vec<T>, NotInline<E>> {
        let Some(values) = statement.values.as_ref().map_or(Some(Vec::new()), |v| v.0.iter().map(bound).collect())
        else {
            return Err(NotInline::Declined);
        };
        let conn = self.connection().ok_or(NotInline::Declined)?;
        let started = Instant::now();
        let watched = match budget {
            Some(budget) => conn.progress_handler(CHECK_EVERY, Some(move || started.elapsed() > budget)),
            None => conn.progress_handler(0, None::<fn() -> bool>),
        };
        if watched.is_err() {
            return Err(NotInline::Declined);
        }
        let out = (|| {
            let mut stmt = conn.prepare_cached(&statement.sql).map_err(declined)?;
            for (i, v) in values.iter().enumerate() {
                stmt.raw_bind_parameter(i + 1, v).map_err(declined)?;
            }
            let mut rows = stmt.raw_query();
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(declined)? {
                out.push(read(row).map_err(NotInline::Failed)?);
            }
            Ok(out)
        })();
        self.give_back(conn);
        // Counted once it ran here: a declined statement runs (and is counted) in the pool.
        if let (false, Some(observe)) = (matches!(out, Err(NotInline::Declined)), self.0.observer.get()) {
            observe(&statement.sql);
        }
        out
    }

    fn connection(&self) -> Option<Connection> {
        if let Some(c) = self.0.idle.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Some(c);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.0.path, flags)
            .inspect_err(|e| tracing::warn!(error = %e, "could not open an inline SQLite connection"))
            .ok()?;
        conn.busy_timeout(BUSY).ok()?;
        // As the pool's connections (`db::open`): the file's pages read through a map.
        conn.pragma_update(None, "mmap_size", 268_435_456).ok()?;
        conn.set_prepared_statement_cache_capacity(STATEMENTS);
        Some(conn)
    }

    fn give_back(&self, conn: Connection) {
        let mut idle = self.0.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < IDLE {
            idle.push(conn);
        }
    }
}

fn declined<E>(e: rusqlite::Error) -> NotInline<E> {
    tracing::debug!(error = %e, "an inline read was declined");
    NotInline::Declined
}

/// A value bound as sqlx binds it on SQLite (`sea-query-sqlx`), so that a statement compares
/// the same stored values whichever connection runs it (and [`crate::domain::store::rows`] writes what
/// sea-orm's insert would); none for a kind sessions' reads do not bind (the caller then
/// reads through the pool).
pub(crate) fn bound(v: &Value) -> Option<Stored> {
    fn or_null<T>(v: &Option<T>, f: impl FnOnce(&T) -> Stored) -> Stored {
        v.as_ref().map_or(Stored::Null, f)
    }
    Some(match v {
        Value::Bool(b) => or_null(b, |b| Stored::Integer(i64::from(*b))),
        Value::TinyInt(i) => or_null(i, |i| Stored::Integer(i64::from(*i))),
        Value::SmallInt(i) => or_null(i, |i| Stored::Integer(i64::from(*i))),
        Value::Int(i) => or_null(i, |i| Stored::Integer(i64::from(*i))),
        Value::BigInt(i) => or_null(i, |i| Stored::Integer(*i)),
        Value::TinyUnsigned(i) => or_null(i, |i| Stored::Integer(i64::from(*i))),
        Value::SmallUnsigned(i) => or_null(i, |i| Stored::Integer(i64::from(*i))),
        Value::Unsigned(i) => or_null(i, |i| Stored::Integer(i64::from(*i))),
        Value::BigUnsigned(i) => match i {
            Some(i) => Stored::Integer(i64::try_from(*i).ok()?),
            None => Stored::Null,
        },
        Value::Float(f) => or_null(f, |f| Stored::Real(f64::from(*f))),
        Value::Double(f) => or_null(f, |f| Stored::Real(*f)),
        Value::String(s) => or_null(s, |s| Stored::Text(s.clone())),
        Value::Char(c) => or_null(c, |c| Stored::Text(c.to_string())),
        Value::Bytes(b) => or_null(b, |b| Stored::Blob(b.clone())),
        Value::Uuid(u) => or_null(u, |u| Stored::Blob(u.as_bytes().to_vec())),
        Value::ChronoDateTimeUtc(t) => or_null(t, |t| Stored::Text(t.to_rfc3339_opts(SecondsFormat::AutoSi, false))),
        Value::ChronoDateTimeWithTimeZone(t) => {
            or_null(t, |t| Stored::Text(t.to_rfc3339_opts(SecondsFormat::AutoSi, false)))
        }
        Value::ChronoDateTime(t) => or_null(t, |t| Stored::Text(t.format("%F %T%.f").to_string())),
        Value::Json(j) => or_null(j, |j| Stored::Text(j.to_string())),
        _ => return None,
    })
}

/// How each row of a statement becomes a value, whichever connection read it.
pub trait Decode {
    type Out;
    fn decode<R: RowAt>(&self, row: &R) -> DomainResult<Self::Out>;
}

/// The rows of `statement` made values by `decoder`: read on the caller's thread when
/// `inline` is given and takes it, else through the pool.
pub async fn all<D: Decode>(
    db: &impl ConnectionTrait,
    inline: Option<&InlineReads>,
    statement: Statement,
    decoder: &D,
) -> DomainResult<Vec<D::Out>> {
    if let Some(inline) = inline {
        match inline.rows(&statement, |row| decoder.decode(row)) {
            Ok(rows) => return Ok(rows),
            Err(NotInline::Failed(e)) => return Err(e),
            Err(NotInline::Declined) => {}
        }
    }
    db.query_all_raw(statement).await?.iter().map(|row| decoder.decode(row)).collect()
}

/// [`all`] for a read that may take long (the scheduler's pass over every waiting session):
/// inline, it runs on a blocking thread without a budget (one hand-off for the statement, not
/// a copy of each value across threads); else through the pool.
pub async fn all_blocking<D>(
    db: &impl ConnectionTrait,
    inline: Option<&InlineReads>,
    statement: Statement,
    decoder: D,
) -> DomainResult<Vec<D::Out>>
where
    D: Decode + Clone + Send + 'static,
    D::Out: Send + 'static,
{
    if let Some(inline) = inline {
        let (inline, read, on_thread) = (inline.clone(), statement.clone(), decoder.clone());
        let rows = tokio::task::spawn_blocking(move || inline.rows_within(&read, None, |row| on_thread.decode(row)))
            .await
            .map_err(|e| crate::domain::DomainError::invariant(format!("an inline read stopped: {e}")))?;
        match rows {
            Ok(rows) => return Ok(rows),
            Err(NotInline::Failed(e)) => return Err(e),
            Err(NotInline::Declined) => {}
        }
    }
    db.query_all_raw(statement).await?.iter().map(|row| decoder.decode(row)).collect()
}

/// The first column of each row, as `T`.
pub struct FirstColumn<T>(std::marker::PhantomData<T>);

impl<T> Default for FirstColumn<T> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T: Cell> Decode for FirstColumn<T> {
    type Out = T;
    fn decode<R: RowAt>(&self, row: &R) -> DomainResult<T> {
        Ok(row.at(0)?)
    }
}

/// A row whose columns are read by position: a row of the pool ([`sea_orm::QueryResult`]) or
/// one read inline.
pub trait RowAt {
    fn at<T: Cell>(&self, i: usize) -> Result<T, DbErr>;
}

impl RowAt for sea_orm::QueryResult {
    fn at<T: Cell>(&self, i: usize) -> Result<T, DbErr> {
        self.try_get_by_index(i)
    }
}

impl RowAt for rusqlite::Row<'_> {
    fn at<T: Cell>(&self, i: usize) -> Result<T, DbErr> {
        let v = self.get_ref(i).map_err(|e| DbErr::Type(format!("column {i}: {e}")))?;
        T::inline(v).map_err(|e| DbErr::Type(format!("column {i}: {e}")))
    }
}

/// A type a column is read as, by the pool or inline, with the same result for the same
/// stored value (as sqlx decodes it on SQLite).
pub trait Cell: sea_orm::TryGetable + Sized {
    fn inline(v: ValueRef<'_>) -> Result<Self, String>;
}

impl<T: Cell> Cell for Option<T> {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Null => Ok(None),
            v => T::inline(v).map(Some),
        }
    }
}

fn unexpected<T>(v: ValueRef<'_>, what: &str) -> Result<T, String> {
    Err(format!("a {} where {what} was expected", v.data_type()))
}

impl Cell for String {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Text(t) => std::str::from_utf8(t).map(str::to_owned).map_err(|e| e.to_string()),
            ValueRef::Integer(i) => Ok(i.to_string()),
            ValueRef::Real(f) => Ok(f.to_string()),
            v => unexpected(v, "text"),
        }
    }
}

impl Cell for i64 {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Integer(i) => Ok(i),
            ValueRef::Real(f) => Ok(f as i64),
            v => unexpected(v, "an integer"),
        }
    }
}

impl Cell for i32 {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        i32::try_from(i64::inline(v)?).map_err(|e| e.to_string())
    }
}

impl Cell for f64 {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Real(f) => Ok(f),
            ValueRef::Integer(i) => Ok(i as f64),
            v => unexpected(v, "a number"),
        }
    }
}

impl Cell for bool {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        Ok(i64::inline(v)? != 0)
    }
}

impl Cell for Uuid {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Blob(b) => Uuid::from_slice(b).map_err(|e| e.to_string()),
            v => unexpected(v, "a uuid's 16 bytes"),
        }
    }
}

impl Cell for serde_json::Value {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Text(b) | ValueRef::Blob(b) => serde_json::from_slice(b).map_err(|e| e.to_string()),
            v => unexpected(v, "JSON text"),
        }
    }
}

impl Cell for DateTime<Utc> {
    fn inline(v: ValueRef<'_>) -> Result<Self, String> {
        match v {
            ValueRef::Text(t) => {
                let text = std::str::from_utf8(t).map_err(|e| e.to_string())?;
                time_of_text(text).ok_or_else(|| format!("invalid datetime: {text}"))
            }
            ValueRef::Integer(i) => Utc.timestamp_opt(i, 0).single().ok_or_else(|| format!("invalid datetime: {i}")),
            ValueRef::Real(f) => time_of_julian_day(f).ok_or_else(|| format!("invalid datetime: {f}")),
            v => unexpected(v, "a datetime"),
        }
    }
}

/// A stored instant's text, read as sqlx reads it: RFC 3339, else SQLite's formats.
fn time_of_text(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    const FORMATS: [&str; 12] = [
        "%F %T%.f",
        "%F %R",
        "%F %RZ",
        "%F %R%:z",
        "%F %T%.fZ",
        "%F %T%.f%:z",
        "%FT%R",
        "%FT%RZ",
        "%FT%R%:z",
        "%FT%T%.f",
        "%FT%T%.fZ",
        "%FT%T%.f%:z",
    ];
    FORMATS.iter().find_map(|f| {
        DateTime::parse_from_str(text, f)
            .map(|t| t.with_timezone(&Utc))
            .ok()
            .or_else(|| NaiveDateTime::parse_from_str(text, f).ok().map(|t| t.and_utc()))
    })
}

/// A Julian day number as an instant (as sqlx reads a REAL datetime).
fn time_of_julian_day(day: f64) -> Option<DateTime<Utc>> {
    let seconds = (day - 2_440_587.5) * 86_400.0;
    if !seconds.is_finite() {
        return None;
    }
    let whole = seconds.trunc();
    Utc.timestamp_opt(whole as i64, ((seconds - whole) * 1e9) as u32).single()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_read_as_sqlx_writes_and_reads_them() {
        let t = Utc.with_ymd_and_hms(2026, 12, 2, 23, 30, 5).single().expect("instant")
            + chrono::Duration::microseconds(123_456);
        let Some(Stored::Text(written)) = bound(&Value::from(t)) else { panic!("text") };
        assert_eq!(written, "2026-12-02T23:30:05.123456+00:00");
        assert_eq!(time_of_text(&written), Some(t));
        assert_eq!(time_of_text("2026-12-02 23:30:05"), Some(t - chrono::Duration::microseconds(123_456)));
        assert_eq!(DateTime::<Utc>::inline(ValueRef::Integer(0)).ok(), Utc.timestamp_opt(0, 0).single());
        assert_eq!(time_of_julian_day(2_440_587.5), Utc.timestamp_opt(0, 0).single());
    }

    #[test]
    fn a_statement_past_its_budget_is_handed_back() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("inline.db");
        Connection::open(&path).expect("create").execute_batch("CREATE TABLE t (x INTEGER)").expect("table");
        let reads = InlineReads::at(path);
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&seen);
        reads.observe(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let short = Statement::from_sql_and_values(DbBackend::Sqlite, "SELECT ?", [Value::from(41_i64)]);
        let read = reads.rows(&short, |row| row.at::<i64>(0).map(|x| x + 1));
        assert!(matches!(read.as_deref(), Ok([42])), "{read:?}");
        // Seconds of work: stopped after the budget (run to its end, it would count its
        // rows), for the pool to run.
        let long = Statement::from_string(
            DbBackend::Sqlite,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000000) SELECT count(*) FROM c",
        );
        let read = reads.rows(&long, |row| row.at::<i64>(0));
        assert!(matches!(read, Err(NotInline::Declined)), "{read:?}");
        // A value it cannot bind: declined before it runs.
        let odd = Statement::from_sql_and_values(DbBackend::Sqlite, "SELECT ?", [Value::BigUnsigned(Some(u64::MAX))]);
        assert!(matches!(reads.rows(&odd, |row| row.at::<i64>(0)), Err(NotInline::Declined)));
        // Only what ran here is counted; the connection is reused.
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(reads.0.idle.lock().expect("idle").len(), 1);
    }

    #[test]
    fn values_bind_as_sqlx_binds_them() {
        let id = Uuid::from_u128(7);
        assert_eq!(bound(&Value::from(id)), Some(Stored::Blob(id.as_bytes().to_vec())));
        assert_eq!(bound(&Value::from(true)), Some(Stored::Integer(1)));
        assert_eq!(bound(&Value::String(None)), Some(Stored::Null));
        assert_eq!(bound(&Value::BigUnsigned(Some(u64::MAX))), None);
        assert_eq!(Uuid::inline(ValueRef::Blob(id.as_bytes())), Ok(id));
        assert!(Uuid::inline(ValueRef::Text(b"x")).is_err());
        assert_eq!(<Option<i32>>::inline(ValueRef::Null), Ok(None));
        assert_eq!(i32::inline(ValueRef::Integer(i64::MAX)).ok(), None);
    }
}

//! Replays of missed events (a subscription resumed with `after:`) read under a budget of
//! their own, never on the requests' connections: a pool of a few connections, and a
//! number of rows per second over all replays together. A replay from an old cursor, or
//! from the very first event, is paced by that budget, so a user who replays their whole
//! history many times over slows down their own replays, not the page of anyone else. How
//! many replays one user may run at once is a share of its own ([`super::shares`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use sea_orm::{Condition, DatabaseConnection};
use tokio::sync::{Mutex, Semaphore};
use tokio::time::Instant;

use super::DomainResult;
use super::events::{self, Read};

/// The budget replays read under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayBudget {
    /// Statements running at once (the size of the replays' pool).
    pub connections: usize,
    /// Rows read per second, over all replays: each statement is charged the rows it may
    /// read (its limit), whether or not they match.
    pub rows_per_second: u32,
}

/// The replays' connections and budget. Cheap to clone; clones share the budget.
#[derive(Clone, Debug)]
pub struct Replays(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    db: DatabaseConnection,
    budget: ReplayBudget,
    statements: Semaphore,
    bucket: Mutex<Bucket>,
    running: AtomicUsize,
    /// The most statements that ran at once.
    peak: AtomicUsize,
    /// Rows charged so far.
    charged: AtomicU64,
}

/// Rows that may be read now: refills at the budget's rate, holds at most a second's worth.
#[derive(Debug)]
struct Bucket {
    rows: f64,
    at: Instant,
}

impl Replays {
    /// Replays reading on `db` (a pool of their own) under `budget`.
    pub fn new(db: DatabaseConnection, budget: ReplayBudget) -> Self {
        let budget =
            ReplayBudget { connections: budget.connections.max(1), rows_per_second: budget.rows_per_second.max(1) };
        Self(Arc::new(Inner {
            db,
            budget,
            statements: Semaphore::new(budget.connections),
            bucket: Mutex::new(Bucket { rows: f64::from(budget.rows_per_second), at: Instant::now() }),
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            charged: AtomicU64::new(0),
        }))
    }

    pub fn budget(&self) -> ReplayBudget {
        self.0.budget
    }

    /// The most replay statements that have run at once: never over the budget's
    /// connections.
    pub fn peak_statements(&self) -> usize {
        self.0.peak.load(Ordering::Relaxed)
    }

    /// Rows charged to replays so far.
    pub fn rows_charged(&self) -> u64 {
        self.0.charged.load(Ordering::Relaxed)
    }

    /// [`events::read_after`] under the budget: waits for a statement's turn and for the
    /// rows it may read.
    pub(super) async fn read(&self, after: i64, up_to: i64, sessions: Condition, limit: u64) -> DomainResult<Read> {
        let inner = &self.0;
        // Waiting in line (first come, first served); a dropped waiter leaves the line.
        let _turn = inner.statements.acquire().await.map_err(super::DomainError::internal)?;
        self.charge(limit).await;
        let running = inner.running.fetch_add(1, Ordering::AcqRel) + 1;
        inner.peak.fetch_max(running, Ordering::AcqRel);
        let read = events::read_after(&inner.db, after, Some(up_to), sessions, limit).await;
        inner.running.fetch_sub(1, Ordering::AcqRel);
        read
    }

    /// Waits until `rows` may be read (at most a second's worth at once).
    async fn charge(&self, rows: u64) {
        let inner = &self.0;
        let rate = f64::from(inner.budget.rows_per_second);
        let want = (rows as f64).min(rate);
        inner.charged.fetch_add(rows, Ordering::Relaxed);
        let mut bucket = inner.bucket.lock().await;
        loop {
            let now = Instant::now();
            bucket.rows = (bucket.rows + now.duration_since(bucket.at).as_secs_f64() * rate).min(rate);
            bucket.at = now;
            if bucket.rows >= want {
                bucket.rows -= want;
                return;
            }
            // Holding the lock: the next in line is served first.
            tokio::time::sleep(Duration::from_secs_f64((want - bucket.rows) / rate)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rows_are_paced_at_the_budget() {
        let db = sea_orm::DatabaseConnection::default();
        let replays = Replays::new(db, ReplayBudget { connections: 1, rows_per_second: 1000 });
        let start = tokio::time::Instant::now();
        // A second's worth at once, then a second for each further 1000 rows.
        for _ in 0..30 {
            replays.charge(100).await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(1990), "{took:?}");
        assert!(took <= Duration::from_millis(2100), "{took:?}");
        assert_eq!(replays.rows_charged(), 3000);
    }
}

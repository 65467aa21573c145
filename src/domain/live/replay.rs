//! Replays of missed events (a subscription resumed with `after:`) read under a budget of
//! their own, never on the requests' connections: a pool of a few connections, and a
//! number of rows per second over all replays together. A replay from an old cursor, or
//! from the very first event, is paced by that budget, so a user who replays their whole
//! history many times over slows down their own replays, not the page of anyone else. How
//! many replays one user may run at once is a share of its own ([`crate::domain::live::shares`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use sea_orm::{Condition, DatabaseConnection};
use tokio::sync::{Mutex, Semaphore};
use tokio::time::Instant;

use crate::domain::DomainResult;
use crate::domain::live::events::{self, Read};

/// The budget replays read under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayBudget {
    /// Statements running at once (the size of the replays' pool).
    pub connections: usize,
    /// Rows examined per second, over all replays: each statement is charged the
    /// transitions it looked through, whether or not they matched.
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

    /// [`events::read_after`] under the budget: waits for a statement's turn and until the
    /// budget is out of debt, reads, then charges what the statement examined (every
    /// transition of its window up to its last row, matching or not); the next read waits
    /// for that. The relations of what it read load on the replays' pool too.
    pub(in crate::domain) async fn read(
        &self,
        after: i64,
        up_to: i64,
        sessions: Condition,
        limit: u64,
    ) -> DomainResult<Read> {
        let inner = &self.0;
        // Waiting in line (first come, first served); a dropped waiter leaves the line.
        let _turn = inner.statements.acquire().await.map_err(crate::domain::DomainError::internal)?;
        self.wait_for_budget().await;
        let running = inner.running.fetch_add(1, Ordering::AcqRel) + 1;
        inner.peak.fetch_max(running, Ordering::AcqRel);
        let read = events::read_after(&inner.db, after, Some(up_to), sessions, limit, Some(&inner.db)).await;
        inner.running.fetch_sub(1, Ordering::AcqRel);
        let read = read?;
        let examined = match (read.full, read.last_row) {
            (true, Some(last)) => last - after,
            _ => up_to - after,
        };
        self.charge(u64::try_from(examined).unwrap_or(0).max(1));
        Ok(read)
    }

    /// Waits while the budget is in debt (rows examined beyond what its rate allowed).
    async fn wait_for_budget(&self) {
        let rate = f64::from(self.0.budget.rows_per_second);
        loop {
            let wait = {
                let mut bucket = self.0.bucket.lock().await;
                bucket.refill(rate);
                if bucket.rows >= 0.0 {
                    return;
                }
                -bucket.rows / rate
            };
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }

    /// Charges `rows` to the budget (which may go into debt: the next read waits).
    fn charge(&self, rows: u64) {
        self.0.charged.fetch_add(rows, Ordering::Relaxed);
        if let Ok(mut bucket) = self.0.bucket.try_lock() {
            bucket.refill(f64::from(self.0.budget.rows_per_second));
            bucket.rows -= rows as f64;
        } else {
            // Another holder is only ever waiting to read: charge once it is done.
            let this = self.clone();
            tokio::spawn(async move {
                let mut bucket = this.0.bucket.lock().await;
                bucket.refill(f64::from(this.0.budget.rows_per_second));
                bucket.rows -= rows as f64;
            });
        }
    }
}

impl Bucket {
    /// Adds what the rate gave since the last look, up to a second's worth.
    fn refill(&mut self, rate: f64) {
        let now = Instant::now();
        self.rows = (self.rows + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
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
        // A second's worth at once, then a second for each further 1000 rows examined.
        for _ in 0..30 {
            replays.wait_for_budget().await;
            replays.charge(100);
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(1890), "{took:?}");
        assert!(took <= Duration::from_millis(2100), "{took:?}");
        assert_eq!(replays.rows_charged(), 3000);
    }
}

//! Fair shares: what one user may hold at once of what every user shares (open WebSocket
//! connections, subscriptions, terminals, replays of missed events). One user holding many
//! of them is refused the next one; nobody else notices. The count is per user, over all
//! of their tokens: a second token buys no second share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use uuid::Uuid;

use crate::domain::{DomainError, DomainResult};

/// What is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// An open WebSocket: the GraphQL one or a terminal.
    Connection,
    /// A running subscription.
    Subscription,
    /// An open terminal.
    Terminal,
    /// A subscription replaying missed events.
    Replay,
    /// A request to a session's app being answered (its body streaming, or its WebSocket
    /// open).
    App,
}

impl Share {
    const ALL: [Share; 5] = [Share::Connection, Share::Subscription, Share::Terminal, Share::Replay, Share::App];

    fn index(self) -> usize {
        self as usize
    }

    fn plural(self) -> &'static str {
        match self {
            Share::Connection => "open WebSocket connections",
            Share::Subscription => "running subscriptions",
            Share::Terminal => "open terminals",
            Share::Replay => "subscriptions replaying missed events at once",
            Share::App => "open connections to apps",
        }
    }
}

/// How many of each share one user may hold, and how fast they may start operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerUser {
    pub connections: usize,
    pub subscriptions: usize,
    pub terminals: usize,
    pub replays: usize,
    pub apps: usize,
    /// Operations a second one user starts on long-lived connections (a subscription, a
    /// query or mutation over a WebSocket; a terminal counts [`TERMINAL_OPERATIONS`]);
    /// twice as many may come at once.
    pub operations_per_second: u32,
}

/// What opening a terminal counts for in [`PerUser::operations_per_second`]: it starts
/// processes.
pub const TERMINAL_OPERATIONS: u32 = 10;

impl PerUser {
    fn max(&self, share: Share) -> usize {
        match share {
            Share::Connection => self.connections,
            Share::Subscription => self.subscriptions,
            Share::Terminal => self.terminals,
            Share::Replay => self.replays,
            Share::App => self.apps,
        }
    }
}

/// The shares every user holds now. Cheap to clone; clones count together.
#[derive(Clone, Debug)]
pub struct Shares(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    limits: PerUser,
    held: Mutex<HashMap<Uuid, [usize; Share::ALL.len()]>>,
    /// Each user's operations not yet paid for, and when that was counted (a token bucket
    /// in debt: past zero, the user waits).
    pace: Mutex<HashMap<Uuid, (f64, std::time::Instant)>>,
}

/// Users whose pace is remembered at most; past it the ones fully rested are forgotten.
const MAX_PACED: usize = 10_000;

impl Shares {
    pub fn new(limits: PerUser) -> Self {
        Self(Arc::new(Inner { limits, held: Mutex::default(), pace: Mutex::default() }))
    }

    /// Counts `operations` that `user` starts now, within their rate: twice a second's
    /// worth may come at once (at least a terminal's), and past that `LIMIT_EXCEEDED`,
    /// counting nothing, until time has paid for them. Refused rather than waited for: a
    /// connection that waited was not read meanwhile, so a client's close, queued behind
    /// its own operations, went unnoticed and its share stayed held.
    pub fn pace(&self, user: Uuid, operations: u32) -> DomainResult<()> {
        let rate = f64::from(self.0.limits.operations_per_second.max(1));
        let burst = (2.0 * rate).max(f64::from(TERMINAL_OPERATIONS));
        let now = std::time::Instant::now();
        let mut pace = self.0.pace.lock().unwrap_or_else(PoisonError::into_inner);
        if pace.len() >= MAX_PACED {
            pace.retain(|_, (left, at)| *left + now.duration_since(*at).as_secs_f64() * rate < burst);
        }
        let (left, at) = pace.entry(user).or_insert((burst, now));
        *left = (*left + now.duration_since(*at).as_secs_f64() * rate).min(burst);
        *at = now;
        let needed = f64::from(operations);
        if *left < needed {
            return Err(DomainError::LimitExceeded(format!(
                "at most {rate} operations a second per user ({burst} at once); try again in {:.1} s",
                (needed - *left) / rate
            )));
        }
        *left -= needed;
        Ok(())
    }

    pub fn limits(&self) -> PerUser {
        self.0.limits
    }

    /// One `share` for `user`, held until the returned guard is dropped; `LIMIT_EXCEEDED`
    /// when the user holds their maximum already.
    pub fn take(&self, user: Uuid, share: Share) -> DomainResult<Held> {
        let max = self.0.limits.max(share);
        let mut held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = held.entry(user).or_default();
        if counts[share.index()] >= max {
            if counts.iter().all(|n| *n == 0) {
                held.remove(&user);
            }
            return Err(DomainError::LimitExceeded(format!(
                "at most {max} {} per user; end one first",
                share.plural()
            )));
        }
        counts[share.index()] += 1;
        Ok(Held { shares: self.clone(), user, share })
    }

    /// How many of `share` `user` holds now.
    pub fn held(&self, user: Uuid, share: Share) -> usize {
        let held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&user).map_or(0, |c| c[share.index()])
    }

    fn give_back(&self, user: Uuid, share: Share) {
        let mut held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(counts) = held.get_mut(&user) {
            counts[share.index()] = counts[share.index()].saturating_sub(1);
            if counts.iter().all(|n| *n == 0) {
                held.remove(&user);
            }
        }
    }
}

/// One share, given back when dropped.
#[derive(Debug)]
pub struct Held {
    shares: Shares,
    user: Uuid,
    share: Share,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shares.give_back(self.user, self.share);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_at_the_limit_is_refused_and_others_are_not() {
        let shares = Shares::new(limits());
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let first = shares.take(a, Share::Connection).expect("first");
        let _second = shares.take(a, Share::Connection).expect("second");
        let refused = shares.take(a, Share::Connection).expect_err("third");
        assert!(matches!(refused, DomainError::LimitExceeded(ref m) if m.contains("at most 2")), "{refused:?}");
        shares.take(b, Share::Connection).expect("another user is not affected");
        shares.take(a, Share::Subscription).expect("another share is not affected");
        drop(first);
        assert_eq!(shares.held(a, Share::Connection), 1);
        let _third = shares.take(a, Share::Connection).expect("given back, taken again");
    }

    #[test]
    fn a_user_past_their_rate_is_refused_and_others_are_not() {
        let shares = Shares::new(PerUser { operations_per_second: 10, ..limits() });
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        // Twice the rate at once, then refused, counting nothing.
        for _ in 0..20 {
            assert!(shares.pace(a, 1).is_ok());
        }
        for _ in 0..3 {
            let refused = shares.pace(a, 1).expect_err("past the rate");
            assert_eq!(crate::domain::error::code_of(&refused), "LIMIT_EXCEEDED");
        }
        assert!(shares.pace(b, 1).is_ok(), "another user is not refused");
        assert!(shares.pace(b, TERMINAL_OPERATIONS).is_ok());
        assert!(shares.pace(b, TERMINAL_OPERATIONS).is_err(), "a burst of terminals is refused");
        // A terminal fits even under the slowest rate.
        let slow = Shares::new(PerUser { operations_per_second: 1, ..limits() });
        assert!(slow.pace(a, TERMINAL_OPERATIONS).is_ok());
    }

    fn limits() -> PerUser {
        PerUser { connections: 2, subscriptions: 1, terminals: 1, replays: 1, apps: 1, operations_per_second: 20 }
    }

    #[test]
    fn nothing_is_kept_for_a_user_who_holds_nothing() {
        let shares = Shares::new(PerUser { connections: 0, ..limits() });
        let a = Uuid::from_u128(1);
        assert!(shares.take(a, Share::Connection).is_err());
        drop(shares.take(a, Share::Terminal).expect("one"));
        assert!(shares.0.held.lock().expect("lock").is_empty());
    }
}

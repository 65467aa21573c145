//! What the live parts of the page share in one server: the feed of status changes
//! ([`EventBus`]), the budget replays of missed events read under ([`Replays`]), the
//! reader of followed logs ([`LogFeed`]) and of followed sessions' use ([`UsageFeed`]), the credentials cache that tells long-lived
//! operations when a token or a membership changed ([`Credentials`]), and each user's fair
//! share of them ([`Shares`]).
//!
//! The folder holds the feeds themselves: status changes ([`events`], watched per viewer by
//! [`watch`] and replayed by [`replay`]), one session's log ([`logs`]) and use ([`usage`]),
//! what their followers share ([`follow`]) and each user's fair share ([`shares`]).

pub mod events;
pub mod follow;
pub mod logs;
pub mod replay;
pub mod shares;
pub mod usage;
pub mod watch;

use sea_orm::DatabaseConnection;

use crate::domain::DomainResult;
use crate::domain::directory::credentials::Credentials;
use crate::domain::live::events::EventBus;
use crate::domain::live::logs::LogFeed;
use crate::domain::live::replay::{ReplayBudget, Replays};
use crate::domain::live::shares::{PerUser, Shares};
use crate::domain::live::usage::feed::UsageFeed;

/// How the live parts are sized.
#[derive(Clone, Copy, Debug)]
pub struct LiveOptions {
    /// Events a subscriber may fall behind before it is ended with `LAGGED`.
    pub buffer: usize,
    pub per_user: PerUser,
    pub replays: ReplayBudget,
}

/// Cheap to clone: clones share everything.
#[derive(Clone, Debug)]
pub struct Live {
    pub bus: EventBus,
    pub replays: Replays,
    pub logs: LogFeed,
    pub usage: UsageFeed,
    pub credentials: Credentials,
    pub shares: Shares,
}

impl Live {
    /// Starts the event feed on `connections.events` (the workers' connection), the log
    /// feed and the credentials' poll on `connections.readers`, and the replays on
    /// `connections.replays` (each a pool of its own in a server: none waits for another).
    pub async fn start(connections: LiveConnections, options: LiveOptions) -> DomainResult<Self> {
        Ok(Self {
            bus: EventBus::start(connections.events, options.buffer).await?,
            replays: Replays::new(connections.replays, options.replays),
            logs: LogFeed::start(connections.readers.clone()),
            usage: UsageFeed::start(connections.readers.clone()),
            credentials: Credentials::start(connections.readers).await?,
            shares: Shares::new(options.per_user),
        })
    }
}

/// The connections the live parts read on.
#[derive(Clone, Debug)]
pub struct LiveConnections {
    pub events: DatabaseConnection,
    pub readers: DatabaseConnection,
    pub replays: DatabaseConnection,
}

impl LiveConnections {
    /// All on one connection (or pool): for tests and benchmarks.
    pub fn shared(db: &DatabaseConnection) -> Self {
        Self { events: db.clone(), readers: db.clone(), replays: db.clone() }
    }
}

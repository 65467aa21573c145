//! What the live parts of the page share in one server: the feed of status changes
//! ([`EventBus`]), the budget replays of missed events read under ([`Replays`]), the
//! reader of followed logs ([`LogFeed`]), the credentials cache that tells long-lived
//! operations when a token or a membership changed ([`Credentials`]), and each user's fair
//! share of them ([`Shares`]).

use sea_orm::DatabaseConnection;

use super::DomainResult;
use super::credentials::Credentials;
use super::events::EventBus;
use super::logs::LogFeed;
use super::replay::{ReplayBudget, Replays};
use super::shares::{PerUser, Shares};

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
    pub credentials: Credentials,
    pub shares: Shares,
}

impl Live {
    /// Starts the feeds on `background` (the workers' connection) and the replays on
    /// `replays` (a pool of their own).
    pub async fn start(
        background: DatabaseConnection,
        replays: DatabaseConnection,
        options: LiveOptions,
    ) -> DomainResult<Self> {
        Ok(Self {
            bus: EventBus::start(background.clone(), options.buffer).await?,
            replays: Replays::new(replays, options.replays),
            logs: LogFeed::start(background.clone()),
            credentials: Credentials::start(background).await?,
            shares: Shares::new(options.per_user),
        })
    }
}

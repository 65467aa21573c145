//! What the live parts of the page share in one server: the feed of status changes
//! ([`EventBus`]), the budget replays of missed events read under ([`Replays`]), the
//! reader of followed logs ([`LogFeed`]) and of followed sessions' use ([`UsageFeed`]), the credentials cache that tells long-lived
//! operations when a token or a membership changed ([`Credentials`]), and each user's fair
//! share of them ([`Shares`]).

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use super::credentials::Credentials;
use super::events::EventBus;
use super::logs::LogFeed;
use super::replay::{ReplayBudget, Replays};
use super::shares::{PerUser, Shares};
use super::usage::feed::UsageFeed;
use super::{DomainError, DomainResult};

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

/// After credentials changed somewhere (`changes` said so): may the viewer of `keypair`
/// still see session `session_id`? Asked a little later, spread among all who follow
/// something; the database failing to say is no refusal. The error to end a feed with if
/// not.
pub async fn still_sees(
    db: &DatabaseConnection,
    credentials: &Credentials,
    changes: &mut tokio::sync::watch::Receiver<i64>,
    keypair: Uuid,
    session_id: Uuid,
) -> DomainResult<()> {
    tokio::time::sleep(Credentials::spread()).await;
    changes.mark_unchanged();
    let still = match credentials.viewer_of_keypair(keypair).await {
        Ok(Some(v)) => super::visibility::visible_session(db, &v, session_id).await.map(drop),
        Ok(None) => Err(DomainError::Unauthenticated),
        Err(e) => Err(e),
    };
    match still {
        Ok(()) | Err(DomainError::Unavailable(_) | DomainError::Internal(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A stream of what `produce` sends: it runs while the stream is polled, and stops when
/// the stream is dropped.
pub fn produced<T, F, Fut>(produce: F) -> BoxStream<'static, DomainResult<T>>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<DomainResult<T>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let task = tokio::spawn(produce(tx));
    let abort = task.abort_handle();
    struct Stop(tokio::task::AbortHandle);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let stop = Stop(abort);
    futures_util::stream::unfold((rx, stop), |(mut rx, stop)| async move {
        let item = rx.recv().await?;
        Some((item, (rx, stop)))
    })
    .boxed()
}

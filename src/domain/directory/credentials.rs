//! Credentials that can change while a connection stays open: a token revoked, a user
//! deleted or given another role, a membership lost. Whatever changes them (`sessiond token
//! revoke`, `sessiond apply`, on any replica or from the command line) moves the
//! `credentials` revision in the same transaction ([`auth::changed`]). Every server polls that
//! revision ([`POLL`]); when it moves, the cache of viewers is dropped and every long-lived
//! operation (WebSocket connections, subscriptions, terminals) is told through
//! [`Credentials::changes`] to check its viewer again, and ends if it may no longer go on.
//!
//! Between changes, operations on an open connection authenticate through a cache of a few
//! seconds ([`TTL`]): one statement per token every few seconds, however many operations.
//! The same revision moves when the catalog changes (images, resource groups: `apply`, the
//! local runtime's own group), which pages of sessions show from [`Credentials::catalog`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sea_orm::DatabaseConnection;
use tokio::sync::watch;
use uuid::Uuid;

use crate::domain::directory::auth::{self, Viewer, revision};
use crate::domain::directory::catalog::Snapshot;
use crate::domain::{DomainError, DomainResult};

/// How long a viewer read for a token is used without reading it again.
pub const TTL: Duration = Duration::from_secs(5);
/// How often each server reads the revision.
pub const POLL: Duration = Duration::from_secs(1);
/// Viewers cached at most; past it the cache starts afresh.
const MAX_CACHED: usize = 10_000;
/// Over how long the checks that follow a change are spread ([`Credentials::spread`]).
pub const SPREAD: Duration = Duration::from_secs(2);

/// Viewers by key, each with when it was read.
type Cache<K> = Mutex<HashMap<K, (Option<Viewer>, Instant)>>;

/// The viewers of tokens and keypairs, cached for a few seconds, and the news that they
/// changed. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Credentials(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    db: DatabaseConnection,
    by_token: Cache<String>,
    by_keypair: Cache<Uuid>,
    revision: watch::Sender<i64>,
    /// The catalog and the revision it was read at.
    catalog: Mutex<Option<(i64, Arc<Snapshot>)>>,
}

impl Credentials {
    /// Credentials read from `db`, with a task that polls the revision until the last clone
    /// is dropped.
    pub async fn start(db: DatabaseConnection) -> DomainResult<Self> {
        let first = revision(&db).await?;
        let inner = Arc::new(Inner {
            db: db.clone(),
            by_token: Mutex::default(),
            by_keypair: Mutex::default(),
            revision: watch::channel(first).0,
            catalog: Mutex::default(),
        });
        tokio::spawn(poll(db, Arc::downgrade(&inner)));
        Ok(Self(inner))
    }

    /// The viewer of the token whose hash is `token_hash`; `Unauthenticated` when it
    /// authenticates nobody (unknown, revoked, its user gone).
    pub async fn viewer_of_token(&self, token_hash: &str) -> DomainResult<Viewer> {
        if let Some(v) = fresh(&self.0.by_token, token_hash) {
            return v.ok_or(DomainError::Unauthenticated);
        }
        self.viewer_of_token_now(token_hash).await
    }

    /// [`Self::viewer_of_token`] read from the database now, whatever the cache holds (what
    /// changes something is authenticated as HTTP does, not up to a cache's age late); the
    /// cache keeps what it found.
    pub async fn viewer_of_token_now(&self, token_hash: &str) -> DomainResult<Viewer> {
        let read_at = *self.0.revision.borrow();
        let found = match auth::authenticate_hash(&self.0.db, token_hash).await {
            Ok(v) => Some(v),
            Err(DomainError::Unauthenticated) => None,
            Err(e) => return Err(e),
        };
        self.keep(&self.0.by_token, token_hash.to_owned(), found.clone(), read_at);
        found.ok_or(DomainError::Unauthenticated)
    }

    /// The credentials' revision as last read: it moves whenever any of them changes.
    pub fn revision(&self) -> i64 {
        *self.0.revision.borrow()
    }

    /// The viewer of an active keypair, by id; `None` once it authenticates nobody.
    pub async fn viewer_of_keypair(&self, keypair_id: Uuid) -> DomainResult<Option<Viewer>> {
        if let Some(v) = fresh(&self.0.by_keypair, &keypair_id) {
            return Ok(v);
        }
        let read_at = *self.0.revision.borrow();
        let found = auth::keypair_viewer(&self.0.db, keypair_id).await?;
        self.keep(&self.0.by_keypair, keypair_id, found.clone(), read_at);
        Ok(found)
    }

    /// Every image and resource group, read again only once the revision moved (`apply`
    /// moves it whenever it changes anything): a page of sessions shows its sessions' images
    /// and groups from here, without a statement. Another server's change is seen within
    /// [`POLL`], as credentials are.
    pub async fn catalog(&self) -> DomainResult<Arc<Snapshot>> {
        let read_at = *self.0.revision.borrow();
        if let Some((at, held)) = &*self.0.catalog.lock().unwrap_or_else(PoisonError::into_inner)
            && *at == read_at
        {
            return Ok(Arc::clone(held));
        }
        let read = Arc::new(Snapshot::read(&self.0.db).await?);
        let mut held = self.0.catalog.lock().unwrap_or_else(PoisonError::into_inner);
        // Kept only if nothing moved while it was read (as `keep`).
        if *self.0.revision.borrow() == read_at {
            *held = Some((read_at, Arc::clone(&read)));
        }
        Ok(read)
    }

    /// Caches what a read begun at revision `read_at` found, unless credentials moved
    /// meanwhile: a read that began before a revocation committed may have found the old
    /// viewer, and must not be kept after the cache was emptied for it.
    fn keep<K: Eq + std::hash::Hash>(&self, cache: &Cache<K>, key: K, viewer: Option<Viewer>, read_at: i64) {
        let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked under the cache's lock, which `moved` takes to empty it.
        if *self.0.revision.borrow() != read_at {
            return;
        }
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key, (viewer, Instant::now()));
    }

    /// A pause before a long-lived operation checks its credentials again after a change,
    /// different for each: thousands of them do not ask the database all at once.
    pub fn spread() -> Duration {
        Duration::from_millis(rand::random_range(0..SPREAD.as_millis() as u64))
    }

    /// Moves (to the new revision) whenever credentials changed anywhere.
    pub fn changes(&self) -> watch::Receiver<i64> {
        self.0.revision.subscribe()
    }

    /// Forgets every cached viewer and tells every watcher: credentials changed.
    fn moved(&self, to: i64) {
        let mut tokens = self.0.by_token.lock().unwrap_or_else(PoisonError::into_inner);
        let mut keypairs = self.0.by_keypair.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.clear();
        keypairs.clear();
        // Under both locks: a read that began before cannot be kept after this.
        self.0.revision.send_replace(to);
    }
}

/// The cached viewer of `key`, when read less than [`TTL`] ago.
fn fresh<K, Q>(cache: &Cache<K>, key: &Q) -> Option<Option<Viewer>>
where
    K: std::borrow::Borrow<Q> + Eq + std::hash::Hash,
    Q: Eq + std::hash::Hash + ?Sized,
{
    let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    cache.get(key).filter(|(_, at)| at.elapsed() < TTL).map(|(v, _)| v.clone())
}

/// Reads the revision every [`POLL`] and says when it moved.
async fn poll(db: DatabaseConnection, inner: std::sync::Weak<Inner>) {
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        match revision(&db).await {
            Ok(now) if now != *inner.revision.borrow() => Credentials(inner).moved(now),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = ?e, "reading the credentials revision failed; retrying"),
        }
    }
}

//! The deliverer: takes due callbacks from the outbox, calls their receivers (a few at once,
//! each within a timeout), and records each try. It runs apart from requests and the
//! scheduler, on a connection of its own: a slow or dead receiver holds up only its own
//! delivery.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sea_orm::DatabaseConnection;
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

use entity::session_callback as callback;

use super::allow::{self, Allow, Allowed, Target};
use super::{
    DELIVERY_HEADER, EVENT_HEADER, Outcome, OwnerKeys, PREVIOUS_SIGNATURE_HEADER, Retry, SIGNATURE_HEADER, Tried,
};
use crate::domain::live::events::EventBus;
use crate::domain::model::clock;

/// How the deliverer works.
#[derive(Clone, Debug)]
pub struct Options {
    pub allow: Arc<Allow>,
    pub retry: Retry,
    /// A try with no whole answer within this is a TIMEOUT.
    pub timeout: Duration,
    /// Receivers called at once.
    pub concurrency: usize,
}

/// The longest the deliverer sleeps with nothing due (a replica's callbacks reach it no
/// later than this, its own at once).
const IDLE: Duration = Duration::from_secs(5);
/// The pause before looking again for a due callback that could not be taken.
const AGAIN: Duration = Duration::from_millis(50);

/// Delivers callbacks until the task is aborted.
pub async fn run(db: DatabaseConnection, bus: EventBus, options: Options) {
    let token = Uuid::new_v4();
    // Past a try's longest (the lookup's and the call's timeouts), with room to record it.
    let hold = options.timeout * 2 + Duration::from_secs(5);
    let slots = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let share = share(options.concurrency);
    // Deliveries under way, by owner.
    let running: Arc<Mutex<HashMap<Uuid, usize>>> = Arc::default();
    let freed = Arc::new(Notify::new());
    let mut events = bus.subscribe();
    loop {
        let free = slots.available_permits();
        let mut taken = 0;
        let mut held_back = false;
        if free > 0 {
            let now_running = running.lock().unwrap_or_else(PoisonError::into_inner).clone();
            match super::claim(&db, token, free as u64, share, &now_running, clock::now(), hold).await {
                Ok(claimed) => {
                    taken = claimed.due.len();
                    held_back = claimed.held_back;
                    for c in claimed.due {
                        let Ok(permit) = slots.clone().acquire_owned().await else { return };
                        let (db, options, freed) = (db.clone(), options.clone(), freed.clone());
                        // Read for each try: an owner may have rotated the key meanwhile.
                        let keys = match super::owner_keys(&db, c.owner_id, clock::now()).await {
                            Ok(keys) => keys,
                            Err(e) => {
                                // Its hold lapses, and it is tried again then.
                                tracing::error!(error = ?e, callback = %c.id, "reading a callback's keys failed");
                                continue;
                            }
                        };
                        let running = Running::start(&running, c.owner_id);
                        tokio::spawn(async move {
                            deliver(&db, &c, token, &keys, &options).await;
                            drop(running);
                            drop(permit);
                            freed.notify_one();
                        });
                    }
                }
                Err(e) => tracing::error!(error = ?e, "taking due callbacks failed"),
            }
        }
        if taken > 0 && taken == free {
            // Maybe more are due: take them as soon as a slot frees.
            freed.notified().await;
            continue;
        }
        // Owners at their share wait for a slot of theirs to free; the others' next due row
        // is looked for.
        let full: Vec<Uuid> = if held_back {
            running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|(_, n)| **n >= share)
                .map(|(o, _)| *o)
                .collect()
        } else {
            Vec::new()
        };
        let wait = match super::next_due(&db, &full).await {
            Ok(Some(at)) => (at - clock::now()).to_std().unwrap_or(Duration::ZERO).min(IDLE),
            Ok(None) => IDLE,
            Err(e) => {
                tracing::error!(error = ?e, "reading the callbacks' next due time failed");
                IDLE
            }
        };
        if wait.is_zero() && slots.available_permits() == 0 {
            freed.notified().await;
            continue;
        }
        // Due, yet not taken just now (another replica's, say): look again soon, not at once.
        let wait = if wait.is_zero() && taken == 0 { AGAIN } else { wait };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = freed.notified() => {}
            woke = events.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = woke {
                    return;
                }
                // The status change's commit is over: its callback is in the outbox.
                while events.try_recv().is_ok() {}
            }
        }
    }
}

/// The deliveries one owner may have under way at once: a quarter of them all (at least one).
pub fn share(concurrency: usize) -> usize {
    (concurrency / 4).max(1)
}

/// One owner's delivery under way, counted until dropped.
struct Running {
    running: Arc<Mutex<HashMap<Uuid, usize>>>,
    owner: Uuid,
}

impl Running {
    fn start(running: &Arc<Mutex<HashMap<Uuid, usize>>>, owner: Uuid) -> Self {
        *running.lock().unwrap_or_else(PoisonError::into_inner).entry(owner).or_default() += 1;
        Self { running: running.clone(), owner }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = running.get_mut(&self.owner) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.owner);
            }
        }
    }
}

/// One try of `c`, recorded.
async fn deliver(db: &DatabaseConnection, c: &callback::Model, token: Uuid, keys: &OwnerKeys, options: &Options) {
    let started = Instant::now();
    let tried = match call(c, keys, options).await {
        Ok(status) if status.is_success() => Tried {
            outcome: Outcome::Delivered,
            status_code: Some(status.as_u16()),
            error: None,
            took: started.elapsed(),
        },
        Ok(status) => Tried {
            outcome: Outcome::Refused,
            status_code: Some(status.as_u16()),
            error: Some(format!("the receiver answered {status}")),
            took: started.elapsed(),
        },
        Err((outcome, why)) => Tried { outcome, status_code: None, error: Some(why), took: started.elapsed() },
    };
    if tried.outcome != Outcome::Delivered {
        tracing::info!(callback = %c.id, session = %c.session_id, outcome = tried.outcome.as_str(), error = ?tried.error, "callback try failed");
    }
    if let Err(e) = super::record(db, c, token, &tried, options.retry, clock::now()).await {
        tracing::error!(error = ?e, callback = %c.id, "recording a callback try failed");
    }
}

/// Calls `c`'s receiver once: its HTTP status, or how it failed.
async fn call(
    c: &callback::Model,
    keys: &OwnerKeys,
    options: &Options,
) -> Result<reqwest::StatusCode, (Outcome, String)> {
    let blocked = |why: String| (Outcome::Blocked, why);
    let target = Target::parse(&c.url).map_err(blocked)?;
    let how = options
        .allow
        .allows(&target.host, target.port)
        .ok_or_else(|| blocked(format!("`{}:{}` is not in --callback-allow any more", target.host, target.port)))?;
    let addrs = addresses(&target, how, options.timeout).await?;
    let body = c.payload.clone().into_bytes();
    let client = reqwest::Client::builder()
        // The checked addresses, and only they: no proxy, no redirect, and no lookup of any
        // name, however it is spelt (the resolver knows the checked addresses alone).
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(Pinned(addrs)))
        .connect_timeout(options.timeout.min(Duration::from_secs(10)))
        .timeout(options.timeout)
        .user_agent(concat!("sessiond-callbacks/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|_| (Outcome::Unreachable, "no HTTP client could be made".to_owned()))?;
    let mut request = client
        .post(target.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, super::signature(&keys.current, &body));
    if let Some(previous) = &keys.previous {
        request = request.header(PREVIOUS_SIGNATURE_HEADER, super::signature(previous, &body));
    }
    let sent = request
        .header(DELIVERY_HEADER, c.id.to_string())
        .header(EVENT_HEADER, c.event.as_str())
        .body(body)
        .send()
        .await;
    match sent {
        Ok(answer) => Ok(answer.status()),
        Err(e) if e.is_timeout() => {
            Err((Outcome::Timeout, format!("no answer within {} ms", options.timeout.as_millis())))
        }
        Err(e) if e.is_connect() => Err((Outcome::Unreachable, "the connection failed".to_owned())),
        Err(_) => Err((Outcome::Unreachable, "the request failed before an answer".to_owned())),
    }
}

/// The addresses `target` may be called at: its own when it is one, else what its name
/// resolves to, each public unless a pattern names the host.
async fn addresses(target: &Target, how: Allowed, timeout: Duration) -> Result<Vec<SocketAddr>, (Outcome, String)> {
    let found: Vec<SocketAddr> = match target.host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, target.port)],
        Err(_) => {
            let lookup = tokio::net::lookup_host((target.host.as_str(), target.port));
            match tokio::time::timeout(timeout, lookup).await {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(_)) | Err(_) => {
                    return Err((Outcome::Unreachable, format!("`{}` could not be resolved", target.host)));
                }
            }
        }
    };
    if found.is_empty() {
        return Err((Outcome::Unreachable, format!("`{}` resolved to no address", target.host)));
    }
    let allowed: Vec<SocketAddr> =
        found.iter().copied().filter(|a| how == Allowed::Named || !allow::restricted(a.ip())).collect();
    if allowed.len() < found.len() {
        // Said without the address: an internal name's address is nobody's business.
        let inner: Vec<String> = found.iter().filter(|a| !allowed.contains(a)).map(|a| a.ip().to_string()).collect();
        tracing::info!(host = %target.host, addresses = %inner.join(","), "a callback's host has non-public addresses");
        return Err((
            Outcome::Blocked,
            format!("`{}` resolves to a non-public address, and no pattern of --callback-allow names it", target.host),
        ));
    }
    Ok(allowed)
}

/// The resolver of a callback's client: every name resolves to the addresses checked for
/// the callback's host, so that the connection goes to them or nowhere.
struct Pinned(Vec<SocketAddr>);

impl reqwest::dns::Resolve for Pinned {
    fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let addrs = self.0.clone();
        Box::pin(async move { Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs) })
    }
}

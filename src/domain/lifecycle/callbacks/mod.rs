//! Completion callbacks. A session launched with a callback URL is told of its end (every
//! terminal status) and, when asked, of its start (RUNNING) by a signed JSON POST.
//!
//! - **Nothing lost.** The status change that is the event writes the callback, in its own
//!   transaction, into an outbox (`session_callbacks`, [`outbox_row`] from
//!   [`crate::domain::lifecycle::apply`]). The deliverer ([`deliver::run`]) takes due rows from it,
//!   so a callback survives a restart, and several replicas share the work (a row is held
//!   by one deliverer at a time; a hold lapses if its deliverer dies).
//! - **Retried.** A try that fails is tried again after `base · 2^(n-1)` (±20 %, at most an
//!   hour) up to a number of tries; each try is a row of `session_callback_attempts`, shown
//!   by `Session.callbacks`. Delivery is at least once: receivers deduplicate by the
//!   delivery id.
//! - **Signed.** The body is signed with HMAC-SHA256 under its owner's callback key
//!   ([`owner_key`]; `Viewer.callbackSigningKey`), in the header [`SIGNATURE_HEADER`]:
//!   `sha256=` and the hex digest of the exact body bytes. An owner rotates the key
//!   ([`rotate_key`]); for a day after, the old key signs too, in
//!   [`PREVIOUS_SIGNATURE_HEADER`].
//! - **Where allowed.** Only hosts the server's `--callback-allow` lists, and only public
//!   addresses unless the list names the host ([`allow`]).
//! - **Never in the way.** Nothing waits for a receiver: requests and the scheduler only
//!   write the outbox row; the deliverer calls at most a few receivers at once, each within
//!   a timeout, and each owner's at most a quarter of them ([`deliver::share`]): one
//!   owner's receivers that hang delay nobody else's callbacks.

pub mod allow;
pub mod deliver;

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::NotSet, ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QueryOrder,
    QuerySelect, Set, TransactionTrait,
};
use serde_json::json;
use uuid::Uuid;

use entity::{session, session_callback as callback, session_callback_attempt as attempt};

pub use allow::{Allow, Allowed, Target};

use crate::domain::directory::secrets::{self, hex};
use crate::domain::model::ids::{self, NodeKind};
use crate::domain::model::status::SessionStatus;
use crate::domain::{DomainError, DomainResult, model::clock};

/// The header holding the body's signature: `sha256=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "x-sessiond-signature-256";
/// The header holding the body's signature under the owner's previous key, for a while
/// after a rotation ([`rotate_key`]).
pub const PREVIOUS_SIGNATURE_HEADER: &str = "x-sessiond-signature-256-previous";
/// The header naming the delivery (the same on every try of it).
pub const DELIVERY_HEADER: &str = "x-sessiond-delivery";
/// The header naming the event: the status the session reached.
pub const EVENT_HEADER: &str = "x-sessiond-event";

/// The name of the server key owners' callback keys derive from ([`secrets::key`]).
const KEY_NAME: &str = "callbacks";

/// Where a callback stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// To be tried (again) at its `next_attempt_at`.
    Pending,
    /// A try got a 2xx answer.
    Delivered,
    /// Given up: every try failed, or the receiver may not be called.
    Failed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Delivered => "DELIVERED",
            Self::Failed => "FAILED",
        }
    }

    pub fn stored(text: &str) -> Self {
        match text {
            "DELIVERED" => Self::Delivered,
            "FAILED" => Self::Failed,
            _ => Self::Pending,
        }
    }
}

/// How one try ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx.
    Delivered,
    /// The receiver answered with another status.
    Refused,
    /// No connection, or no answer to read (name not resolved, refused, reset).
    Unreachable,
    /// No answer within the timeout.
    Timeout,
    /// The host or its address may not be called: no further try.
    Blocked,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "DELIVERED",
            Self::Refused => "REFUSED",
            Self::Unreachable => "UNREACHABLE",
            Self::Timeout => "TIMEOUT",
            Self::Blocked => "BLOCKED",
        }
    }

    pub fn stored(text: &str) -> Self {
        match text {
            "DELIVERED" => Self::Delivered,
            "REFUSED" => Self::Refused,
            "TIMEOUT" => Self::Timeout,
            "BLOCKED" => Self::Blocked,
            _ => Self::Unreachable,
        }
    }
}

/// One try: how it went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tried {
    pub outcome: Outcome,
    pub status_code: Option<u16>,
    /// What went wrong, in a line of our own words.
    pub error: Option<String>,
    pub took: Duration,
}

/// How deliveries are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Tries in all, the first included.
    pub max_attempts: u32,
    /// The wait after the first failed try; it doubles after each.
    pub base: Duration,
}

/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_secs(3600);

impl Retry {
    /// The wait after the `failed`-th failed try (1 for the first), before its ±20 % jitter.
    pub fn wait(&self, failed: u32) -> Duration {
        let doublings = failed.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << doublings).min(MAX_WAIT)
    }
}

/// Whether reaching `to` is an event a session with these settings is told of.
pub fn is_event(to: SessionStatus, on_running: bool) -> bool {
    to.is_terminal() || (on_running && to == SessionStatus::Running)
}

/// The outbox row telling `session` (as it is after reaching `to` at `now`) of that, if it
/// has a callback URL and this is one of its events.
pub fn outbox_row(session: &session::Model, to: SessionStatus, now: DateTime<Utc>) -> Option<callback::ActiveModel> {
    let url = session.callback_url.as_ref()?;
    if !is_event(to, session.callback_on_running) {
        return None;
    }
    let id = Uuid::now_v7();
    Some(callback::ActiveModel {
        id: Set(id),
        session_id: Set(session.id),
        owner_id: Set(session.owner_id),
        event: Set(to.as_str().to_owned()),
        url: Set(url.clone()),
        payload: Set(payload(id, session, to, now).to_string()),
        state: Set(State::Pending.as_str().to_owned()),
        attempts: Set(0),
        created_at: Set(now),
        next_attempt_at: Set(now),
        claim: Set(None),
        finished_at: Set(None),
    })
}

fn time(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The body a receiver gets: the delivery's id, the event, and the session as it was then.
pub fn payload(delivery: Uuid, s: &session::Model, to: SessionStatus, at: DateTime<Utc>) -> serde_json::Value {
    json!({
        "delivery": delivery,
        "event": to.as_str(),
        "occurredAt": time(Some(at)),
        "session": {
            "id": ids::encode(NodeKind::Session, s.id),
            "name": s.name,
            "type": s.session_type,
            "status": to.as_str(),
            "result": s.result,
            "exitCode": s.exit_code,
            "statusInfo": s.status_info,
            "createdAt": time(Some(s.created_at)),
            "scheduledAt": time(s.scheduled_at),
            "startedAt": time(s.started_at),
            "terminatedAt": time(s.terminated_at),
        },
    })
}

/// How long an owner's key, once rotated out, goes on signing beside the new one (in
/// [`PREVIOUS_SIGNATURE_HEADER`]): a receiver switches keys without refusing a callback.
pub const PREVIOUS_KEY_GRACE: Duration = Duration::from_secs(24 * 3600);

/// The keys that sign an owner's callbacks now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerKeys {
    pub current: String,
    /// The key rotated out less than [`PREVIOUS_KEY_GRACE`] ago.
    pub previous: Option<String>,
}

fn current_name(owner: Uuid) -> String {
    format!("callback-key:{owner}")
}

fn previous_name(owner: Uuid) -> String {
    format!("callback-key-previous:{owner}")
}

/// The key that signs `owner`'s callbacks: until the owner first rotates it, derived from
/// the server's callback key (the same on every replica, never stored); after, the random
/// key the rotation made. As hex; receivers key HMAC-SHA256 with the bytes of that text.
pub async fn owner_key(db: &impl ConnectionTrait, owner: Uuid) -> DomainResult<String> {
    Ok(owner_keys(db, owner, clock::now()).await?.current)
}

/// The keys that sign `owner`'s callbacks at `now`.
pub async fn owner_keys(db: &impl ConnectionTrait, owner: Uuid, now: DateTime<Utc>) -> DomainResult<OwnerKeys> {
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).map_err(DomainError::internal);
    let current = match secrets::find(db, &current_name(owner)).await? {
        Some((bytes, _)) => text(bytes)?,
        None => derive_key(&server_key(db).await?, owner),
    };
    let grace = chrono::Duration::from_std(PREVIOUS_KEY_GRACE).map_err(DomainError::internal)?;
    let previous = match secrets::find(db, &previous_name(owner)).await? {
        Some((bytes, at)) if now - at < grace => Some(text(bytes)?),
        _ => None,
    };
    Ok(OwnerKeys { current, previous })
}

/// Replaces `owner`'s callback key with a new random one, and returns it. Callbacks sent
/// from now on are signed with it; the key it replaces goes on signing them too, in
/// [`PREVIOUS_SIGNATURE_HEADER`], for [`PREVIOUS_KEY_GRACE`] (a second rotation within it
/// ends the first key's at once).
pub async fn rotate_key(db: &sea_orm::DatabaseConnection, owner: Uuid) -> DomainResult<String> {
    let now = clock::now();
    let mut secret = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
    let new = hex(&secret);
    let txn = crate::domain::begin_write(db).await?;
    let old = owner_keys(&txn, owner, now).await?.current;
    secrets::set(&txn, &previous_name(owner), old.as_bytes(), now).await?;
    secrets::set(&txn, &current_name(owner), new.as_bytes(), now).await?;
    txn.commit().await?;
    Ok(new)
}

/// The server key owners' keys derive from.
pub async fn server_key(db: &impl ConnectionTrait) -> DomainResult<Vec<u8>> {
    secrets::key(db, KEY_NAME).await
}

/// `owner`'s key, from the server key.
pub fn derive_key(server_key: &[u8], owner: Uuid) -> String {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(server_key).expect("HMAC takes keys of any length");
    mac.update(b"callback-signing-key:");
    mac.update(owner.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// The value of [`SIGNATURE_HEADER`] for `body` under `key` (an owner's key text).
pub fn signature(key: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let mut mac =
        <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

/// Takes up to `limit` due callbacks for the deliverer `token`, holding each until
/// `now + hold` (when another deliverer may take it, should this one have died). Each owner
/// gets at most `share` deliveries at once, the ones `running` counts included: an owner's
/// oldest due callbacks first, the owners taking turns, so that one owner's receivers that
/// hang hold up no other owner's. Three statements at most, whatever the outbox holds; also
/// whether an owner's due callbacks were left for want of a share.
pub async fn claim(
    db: &impl ConnectionTrait,
    token: Uuid,
    limit: u64,
    share: usize,
    running: &HashMap<Uuid, usize>,
    now: DateTime<Utc>,
    hold: Duration,
) -> DomainResult<Claimed> {
    use sea_orm::sea_query::{Alias, ExprTrait, Func, Order, Query, WindowStatement};
    let (rank, due) = (Alias::new("rank"), Alias::new("due"));
    let mut ranked = Query::select();
    ranked
        .columns([callback::Column::Id, callback::Column::OwnerId, callback::Column::NextAttemptAt])
        .expr_window_as(
            Func::cust("ROW_NUMBER"),
            WindowStatement::partition_by(callback::Column::OwnerId)
                .order_by(callback::Column::NextAttemptAt, Order::Asc)
                .order_by(callback::Column::Id, Order::Asc)
                .to_owned(),
            rank.clone(),
        )
        .from(callback::Entity)
        .and_where(callback::Column::State.eq(State::Pending.as_str()))
        .and_where(callback::Column::NextAttemptAt.lte(now));
    // Owners at their share skip their rows below; at most `share` rows each are read.
    let at_share = running.values().filter(|n| **n >= share).count() as u64;
    let read = Query::select()
        .columns([callback::Column::Id, callback::Column::OwnerId])
        .from_subquery(ranked.to_owned(), due)
        .and_where(Expr::col(rank.clone()).lte(share as u64))
        .order_by(rank, Order::Asc)
        .order_by(callback::Column::NextAttemptAt, Order::Asc)
        .limit(limit + at_share * share as u64)
        .to_owned();
    let rows: Vec<(Uuid, Uuid)> = DueRow::find_by_statement(db.get_database_backend().build(&read))
        .all(db)
        .await?
        .into_iter()
        .map(|r| (r.id, r.owner_id))
        .collect();
    let mut taken: HashMap<Uuid, usize> = HashMap::new();
    let mut due = Vec::new();
    let mut held_back = false;
    for (id, owner) in rows {
        let n = taken.entry(owner).or_insert_with(|| running.get(&owner).copied().unwrap_or(0));
        if *n >= share || due.len() as u64 >= limit {
            held_back = true;
            continue;
        }
        *n += 1;
        due.push(id);
    }
    if due.is_empty() {
        return Ok(Claimed { due: Vec::new(), held_back });
    }
    let until = now + chrono::Duration::from_std(hold).unwrap_or(chrono::Duration::MAX);
    // Guarded again: a row another deliverer took meanwhile is not due any more.
    callback::Entity::update_many()
        .col_expr(callback::Column::Claim, Expr::value(token))
        .col_expr(callback::Column::NextAttemptAt, Expr::value(until))
        .filter(callback::Column::Id.is_in(due.clone()))
        .filter(callback::Column::State.eq(State::Pending.as_str()))
        .filter(callback::Column::NextAttemptAt.lte(now))
        .exec(db)
        .await?;
    let due = callback::Entity::find()
        .filter(callback::Column::Id.is_in(due))
        .filter(callback::Column::Claim.eq(token))
        .order_by_asc(callback::Column::CreatedAt)
        .all(db)
        .await?;
    Ok(Claimed { due, held_back })
}

/// What [`claim`] took.
#[derive(Debug)]
pub struct Claimed {
    pub due: Vec<callback::Model>,
    /// Some owner's due callbacks were left because that owner had its share.
    pub held_back: bool,
}

#[derive(sea_orm::FromQueryResult)]
struct DueRow {
    id: Uuid,
    owner_id: Uuid,
}

/// When the next pending callback of an owner not in `full` is due, if any is.
pub async fn next_due(db: &impl ConnectionTrait, full: &[Uuid]) -> DomainResult<Option<DateTime<Utc>>> {
    let mut query = callback::Entity::find()
        .select_only()
        .column(callback::Column::NextAttemptAt)
        .filter(callback::Column::State.eq(State::Pending.as_str()));
    if !full.is_empty() {
        query = query.filter(callback::Column::OwnerId.is_not_in(full.to_vec()));
    }
    Ok(query.order_by_asc(callback::Column::NextAttemptAt).limit(1).into_tuple().one(db).await?)
}

/// Records a try of `c` (held by `token`) and what follows from it, in one transaction:
/// delivered, given up (blocked, or the last try failed), or due again after its wait.
pub async fn record(
    db: &sea_orm::DatabaseConnection,
    c: &callback::Model,
    token: Uuid,
    tried: &Tried,
    retry: Retry,
    now: DateTime<Utc>,
) -> DomainResult<State> {
    let attempt_no = c.attempts + 1;
    let tries = u32::try_from(attempt_no).unwrap_or(u32::MAX);
    let state = match tried.outcome {
        Outcome::Delivered => State::Delivered,
        Outcome::Blocked => State::Failed,
        _ if tries >= retry.max_attempts => State::Failed,
        _ => State::Pending,
    };
    let next = if state == State::Pending {
        let jitter = rand::Rng::random_range(&mut rand::rng(), 0.8..1.2);
        let wait = retry.wait(tries).mul_f64(jitter);
        now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
    } else {
        now
    };
    let txn = db.begin().await?;
    attempt::Entity::insert(attempt::ActiveModel {
        id: NotSet,
        callback_id: Set(c.id),
        attempt: Set(attempt_no),
        attempted_at: Set(now),
        duration_ms: Set(i32::try_from(tried.took.as_millis()).unwrap_or(i32::MAX)),
        outcome: Set(tried.outcome.as_str().to_owned()),
        status_code: Set(tried.status_code.map(i32::from)),
        error: Set(tried.error.clone()),
    })
    .exec_without_returning(&txn)
    .await?;
    callback::Entity::update_many()
        .col_expr(callback::Column::Attempts, Expr::value(attempt_no))
        .col_expr(callback::Column::State, Expr::value(state.as_str()))
        .col_expr(callback::Column::NextAttemptAt, Expr::value(next))
        .col_expr(callback::Column::Claim, Expr::value(Option::<Uuid>::None))
        .col_expr(callback::Column::FinishedAt, Expr::value((state != State::Pending).then_some(now)))
        .filter(callback::Column::Id.eq(c.id))
        .filter(callback::Column::Claim.eq(token))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(state)
}

/// A session's callbacks, each with its tries.
#[derive(Clone, Debug)]
pub struct Callback {
    pub row: callback::Model,
    pub attempts: Vec<attempt::Model>,
}

/// The callbacks of `sessions`, oldest first, with their tries: two statements. The caller
/// has checked that it may see the sessions.
pub async fn of_sessions(db: &impl ConnectionTrait, sessions: &[Uuid]) -> DomainResult<HashMap<Uuid, Vec<Callback>>> {
    let rows = callback::Entity::find()
        .filter(callback::Column::SessionId.is_in(sessions.to_vec()))
        .order_by_asc(callback::Column::CreatedAt)
        .order_by_asc(callback::Column::Id)
        .all(db)
        .await?;
    let mut tries: HashMap<Uuid, Vec<attempt::Model>> = HashMap::new();
    if !rows.is_empty() {
        let found = attempt::Entity::find()
            .filter(attempt::Column::CallbackId.is_in(rows.iter().map(|r| r.id).collect::<Vec<_>>()))
            .order_by_asc(attempt::Column::Id)
            .all(db)
            .await?;
        for a in found {
            tries.entry(a.callback_id).or_default().push(a);
        }
    }
    let mut out: HashMap<Uuid, Vec<Callback>> = sessions.iter().map(|&s| (s, Vec::new())).collect();
    for row in rows {
        let attempts = tries.remove(&row.id).unwrap_or_default();
        out.entry(row.session_id).or_default().push(Callback { row, attempts });
    }
    Ok(out)
}

/// `url` as shown: without its query, which may hold a receiver's secret.
pub fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            u.to_string()
        }
        Err(_) => url.split('?').next().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_an_hour() {
        let r = Retry { max_attempts: 50, base: Duration::from_secs(5) };
        assert_eq!(r.wait(1), Duration::from_secs(5));
        assert_eq!(r.wait(2), Duration::from_secs(10));
        assert_eq!(r.wait(4), Duration::from_secs(40));
        assert_eq!(r.wait(40), MAX_WAIT);
    }

    #[test]
    fn events_are_ends_and_on_request_the_start() {
        assert!(is_event(SessionStatus::Terminated, false));
        assert!(is_event(SessionStatus::Cancelled, false));
        assert!(is_event(SessionStatus::Error, false));
        assert!(!is_event(SessionStatus::Running, false));
        assert!(is_event(SessionStatus::Running, true));
        assert!(!is_event(SessionStatus::Scheduled, true));
    }

    #[test]
    fn signatures_are_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        let sig = signature("Jefe", b"what do ya want for nothing?");
        assert_eq!(sig, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let owner = Uuid::from_u128(7);
        assert_eq!(derive_key(b"k", owner), derive_key(b"k", owner));
        assert_ne!(derive_key(b"k", owner), derive_key(b"k", Uuid::from_u128(8)));
        assert_eq!(derive_key(b"k", owner).len(), 64);
    }

    #[test]
    fn shown_urls_lose_their_query() {
        assert_eq!(shown_url("https://h.example.com/hook?token=s3cret"), "https://h.example.com/hook");
        assert_eq!(shown_url("http://127.0.0.1:9000/x"), "http://127.0.0.1:9000/x");
    }
}

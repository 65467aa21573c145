//! When a live session will be reclaimed, and why, in one place: every engine ends a
//! session here found due, the list, the detail and the export show it, the owner is
//! warned before it, and an extension pushes it back.
//!
//! A running session expires at the earliest of:
//! - its lifetime's end (LIFETIME): the lifetime its keypair's policy gave it
//!   (`max_session_lifetime_seconds`, kept on the session and in step with the policy),
//!   counted from its start, plus what extensions added;
//! - its batch timeout (BATCH_TIMEOUT), for a batch session: its engine stops it then;
//! - its idle timeout (IDLE), for an interactive session under idle checks ([`idle`]): no
//!   activity that long.
//!
//! A session that has not started, or has ended, has no expiry. A lifetime or an idle
//! timeout can be extended, within the policy's `max_extension_seconds` (per extension) and
//! `max_extensions` (per session).

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};
use uuid::Uuid;

use entity::{keypair_resource_policy as policy, session};

use crate::domain::directory::auth::Viewer;
use crate::domain::lifecycle::{self, Modification, Transitions, Written};
use crate::domain::live::events::EventBus;
use crate::domain::model::EventKind;
use crate::domain::model::actor::{Actor, rules};
use crate::domain::model::status::SessionStatus;
use crate::domain::model::{SessionType, string_enum};
use crate::domain::reclaim::idle::{self, IdlePolicy};
use crate::domain::{DomainError, DomainResult, InputProblem, model::clock, sessions::visibility};

string_enum!(
    /// Why a session will be reclaimed.
    ExpiryReason { Lifetime = "LIFETIME", BatchTimeout = "BATCH_TIMEOUT", Idle = "IDLE" }
);

/// What a keypair's policy gives each session at launch, kept on the session and in step
/// with the policy: its lifetime and its idle checks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Granted {
    /// Seconds from its start; none: unlimited.
    pub lifetime: Option<i64>,
    /// Its idle checks, as the session keeps them; none: never idle.
    pub idle: Option<serde_json::Value>,
}

impl Granted {
    pub fn of(p: Option<&policy::Model>) -> Self {
        Self {
            lifetime: p.and_then(|p| p.max_session_lifetime_seconds).filter(|l| *l > 0),
            idle: p.and_then(IdlePolicy::of_policy).map(|i| i.to_json()),
        }
    }
}

/// When a running session will be reclaimed, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    pub at: DateTime<Utc>,
    pub reason: ExpiryReason,
}

/// The status a session ends in at its lifetime's end, as its `statusInfo` says.
pub const LIFETIME_EXCEEDED: &str = "max_session_lifetime exceeded";

/// The `statusInfo` of a batch session stopped at its timeout.
pub const BATCH_TIMED_OUT: &str = "batch timeout";

impl ExpiryReason {
    /// The system's rule that ends a session for this reason, as its actor names it.
    pub fn rule(self) -> &'static str {
        match self {
            Self::Lifetime => rules::LIFETIME,
            Self::BatchTimeout => rules::BATCH_TIMEOUT,
            Self::Idle => rules::IDLE_CHECK,
        }
    }
}

/// The rule that ended a session whose `statusInfo` is `info`, when an expiry did.
pub fn rule_of(info: &str) -> Option<&'static str> {
    match info {
        LIFETIME_EXCEEDED => Some(rules::LIFETIME),
        BATCH_TIMED_OUT => Some(rules::BATCH_TIMEOUT),
        idle::IDLE_TIMEOUT => Some(rules::IDLE_CHECK),
        _ => None,
    }
}

/// Default of how long before its expiry a session's owner is warned.
pub const DEFAULT_WARNING: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The most seconds one extension may ask for, whatever a policy says (about 68 years).
const MOST_SECONDS: i64 = i32::MAX as i64;

fn seconds(n: i64) -> TimeDelta {
    TimeDelta::try_seconds(n).unwrap_or(TimeDelta::MAX)
}

/// The session's expiry: none before it runs, once it is ending or ended, or with neither a
/// lifetime nor a batch timeout.
pub fn of(s: &session::Model) -> DomainResult<Option<Expiry>> {
    if SessionStatus::stored(&s.status)? != SessionStatus::Running {
        return Ok(None);
    }
    let started = s.started_at.unwrap_or(s.status_changed_at);
    let lifetime = s.lifetime_seconds.filter(|l| *l > 0).map(|l| Expiry {
        at: started + seconds(l) + seconds(s.extended_seconds.max(0)),
        reason: ExpiryReason::Lifetime,
    });
    let batch = (SessionType::stored(&s.session_type)? == SessionType::Batch)
        .then_some(s.batch_timeout_seconds)
        .flatten()
        .filter(|t| *t > 0)
        .map(|t| Expiry { at: started + seconds(t), reason: ExpiryReason::BatchTimeout });
    let idle = idle::expiry(s)?.map(|(at, _)| Expiry { at, reason: ExpiryReason::Idle });
    // The earliest; at the same instant the timeout, which no extension moves.
    Ok([batch, lifetime, idle].into_iter().flatten().min_by_key(|e| e.at))
}

/// Whether the owner of `s` was warned of expiry `e`: warnings are kept to the second.
fn warned_of(s: &session::Model, e: Expiry) -> bool {
    s.expiry_warned_for.is_some_and(|w| (w - e.at).abs() < TimeDelta::seconds(1))
}

/// From when a warning of expiry `e` of session `s` is due, warning `ahead` of expiries. An
/// idle expiry moves with every activity: it is warned of no earlier than halfway through
/// the idle timeout, so that a busy session is not warned at every sample.
fn warn_from(s: &session::Model, e: Expiry, ahead: TimeDelta) -> DomainResult<DateTime<Utc>> {
    let by_window = e.at.checked_sub_signed(ahead).unwrap_or(DateTime::<Utc>::MIN_UTC);
    if e.reason != ExpiryReason::Idle {
        return Ok(by_window);
    }
    let halfway = match IdlePolicy::of(s)? {
        Some(p) => idle::idle_since(s, &p) + seconds(p.timeout_seconds / 2),
        None => by_window,
    };
    Ok(by_window.max(halfway))
}

/// What ends a session found past its expiry at `now`: the status info and the log line.
/// None while it is not due, or when its engine stops it itself (a batch timeout). An idle
/// session is reclaimed only once its owner was warned of that very expiry.
pub fn due(s: &session::Model, now: DateTime<Utc>) -> DomainResult<Option<(String, String)>> {
    Ok(match of(s)? {
        Some(e @ Expiry { at, reason: ExpiryReason::Idle }) if at <= now && warned_of(s, e) => {
            let p = IdlePolicy::of(s)?.unwrap_or_default();
            Some((idle::IDLE_TIMEOUT.to_owned(), idle::ended_line(s, &p)))
        }
        Some(Expiry { at, reason: ExpiryReason::Lifetime }) if at <= now => Some((
            LIFETIME_EXCEEDED.to_owned(),
            format!(
                "the session reached its maximum lifetime of {} s",
                s.lifetime_seconds.unwrap_or_default() + s.extended_seconds
            ),
        )),
        _ => None,
    })
}

/// How far a policy lets a session's lifetime be pushed back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtensionLimits {
    /// The most seconds of one extension (none: no extension).
    pub max_seconds: Option<i64>,
    /// The most extensions of one session (none: no extension).
    pub max_count: Option<i32>,
}

impl ExtensionLimits {
    pub fn of(p: &policy::Model) -> Self {
        Self { max_seconds: p.max_extension_seconds, max_count: p.max_extensions }
    }

    /// The longest a session's lifetime may become with every extension it may have.
    pub fn longest(&self, lifetime: i64) -> i64 {
        let each = self.max_seconds.unwrap_or(0).clamp(0, MOST_SECONDS);
        let count = i64::from(self.max_count.unwrap_or(0).max(0));
        lifetime.saturating_add(each.saturating_mul(count))
    }

    /// Why session `s` (its expiry `expiry`) may not be extended by `by` seconds, if it
    /// may not.
    fn refusal(&self, s: &session::Model, expiry: Option<Expiry>, by: Option<i64>) -> Option<String> {
        match expiry {
            None => {
                return Some(
                    "the session has no expiry to push back: it is not running with a lifetime or idle checks".into(),
                );
            }
            Some(Expiry { reason: ExpiryReason::BatchTimeout, .. }) => {
                return Some("a batch session's timeout cannot be extended".into());
            }
            Some(_) => {}
        }
        let (Some(most), Some(count)) = (self.max_seconds.filter(|m| *m > 0), self.max_count.filter(|c| *c > 0)) else {
            return Some("the keypair's policy allows no extension".into());
        };
        if s.extensions >= count {
            return Some(format!("the session was extended {} times, the most its policy allows", s.extensions));
        }
        match by {
            Some(by) if by > most => Some(format!("one extension may add at most {most} s; {by} s were asked")),
            _ => None,
        }
    }

    /// Whether session `s` could be extended now.
    pub fn extendable(&self, s: &session::Model) -> DomainResult<bool> {
        Ok(self.refusal(s, of(s)?, None).is_none())
    }
}

/// The longest session `s` may live from its start with every extension `limits` allow
/// (none: unlimited). An engine's own time limit, its backstop, is never earlier.
pub fn longest_lifetime(s: &session::Model, limits: &ExtensionLimits) -> Option<i64> {
    s.lifetime_seconds.filter(|l| *l > 0).map(|l| limits.longest(l))
}

/// The extension limits of the policies of `keypairs`' keypairs, by keypair.
pub async fn limits(
    db: &impl ConnectionTrait,
    keypairs: &[Uuid],
) -> DomainResult<std::collections::HashMap<Uuid, ExtensionLimits>> {
    let policies = crate::domain::directory::auth::policies_of(db, keypairs.iter().copied()).await?;
    Ok(keypairs.iter().map(|k| (*k, policies.get(k).map(ExtensionLimits::of).unwrap_or_default())).collect())
}

/// Pushes session `id`'s lifetime back by `by` seconds, for its owner or an administrator of
/// its domain (anyone else: NOT_FOUND, as for no session). `EXTENSION_LIMIT` beyond its
/// policy's limits or for a session with no lifetime to extend. The extension is recorded in
/// the session's history with who asked; the session as it now is comes back.
pub async fn extend(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    id: Uuid,
    by: i64,
) -> DomainResult<session::Model> {
    if !(1..=MOST_SECONDS).contains(&by) {
        return Err(DomainError::BadInput(vec![InputProblem::new(
            "OUT_OF_RANGE",
            Some("seconds".to_owned()),
            format!("an extension is 1 to {MOST_SECONDS} seconds"),
        )]));
    }
    let txn = crate::domain::begin_write(db).await?;
    let s = visibility::session_to_work_on(&txn, viewer, id).await?;
    let limits = limits(&txn, &[s.keypair_id]).await?.remove(&s.keypair_id).unwrap_or_default();
    if let Some(why) = limits.refusal(&s, of(&s)?, Some(by)) {
        return Err(DomainError::ExtensionLimit(why));
    }
    // An idle expiry is pushed back as activity until a later instant; a lifetime, by adding
    // to it. Guarded by what was read: a concurrent extension or end is not overwritten.
    let (extended, active_at) = match (of(&s)?, IdlePolicy::of(&s)?) {
        (Some(Expiry { reason: ExpiryReason::Idle, .. }), Some(p)) => {
            (s.extended_seconds, Some(idle::idle_since(&s, &p) + seconds(by)))
        }
        _ => (s.extended_seconds + by, s.active_at),
    };
    let now = clock::now();
    let mut m = Modification::new(s.id, SessionStatus::Running, "extend", String::new(), Actor::User(viewer.user_id));
    m.set = vec![
        (session::Column::ExtendedSeconds, Expr::value(extended)),
        (session::Column::ActiveAt, Expr::value(active_at)),
        (session::Column::Extensions, Expr::value(s.extensions + 1)),
        // A new expiry: warned of when it comes near.
        (session::Column::ExpiryWarnedFor, Expr::value(Option::<DateTime<Utc>>::None)),
    ];
    m.guard = vec![session::Column::Extensions.eq(s.extensions)];
    // Said with the new expiry: worked out as the update will leave it.
    let mut would = s.clone();
    (would.extended_seconds, would.active_at, would.extensions) = (extended, active_at, s.extensions + 1);
    let until = of(&would)?.map(|e| e.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap_or_default();
    m.message = format!("{} extended the session by {by} s, until {until}", viewer.email);
    let mut transitions = Transitions::default();
    let Written::Done(after) = lifecycle::modify(&txn, m, now, &mut transitions).await? else {
        return Err(DomainError::ExtensionLimit("the session changed meanwhile; look at it again".into()));
    };
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(*after)
}

/// Warns of every running session that expires within `ahead` of `now` and was not warned
/// of that expiry yet: an EXPIRY_WARNING event (after commit, with the status changes) and a
/// line of its history. Returns how many were warned. Replicas may run it side by side: a
/// session is warned once (the update is guarded by its not having been warned).
pub async fn warn(
    db: &DatabaseConnection,
    bus: &EventBus,
    now: DateTime<Utc>,
    ahead: TimeDelta,
) -> DomainResult<usize> {
    use sea_orm::Condition;
    let running = session::Entity::find()
        .filter(session::Column::Status.eq(SessionStatus::Running.as_str()))
        .filter(
            Condition::any()
                .add(session::Column::LifetimeSeconds.is_not_null())
                .add(session::Column::BatchTimeoutSeconds.is_not_null())
                .add(session::Column::Idle.is_not_null()),
        )
        .all(db)
        .await?;
    let mut due = Vec::new();
    for s in running {
        if let Some(e) = of(&s)?
            && !warned_of(&s, e)
            && warn_from(&s, e, ahead)? <= now
        {
            due.push((s, e));
        }
    }
    if due.is_empty() {
        return Ok(0);
    }
    let txn = crate::domain::begin_write(db).await?;
    let mut transitions = Transitions::default();
    for (s, e) in due {
        let before = match s.expiry_warned_for {
            Some(w) => session::Column::ExpiryWarnedFor.eq(w),
            None => session::Column::ExpiryWarnedFor.is_null(),
        };
        let mut m = Modification::new(
            s.id,
            SessionStatus::Running,
            "expiry-warning",
            warning(e),
            Actor::system(e.reason.rule()),
        );
        m.kind = EventKind::ExpiryWarning;
        m.set = vec![(session::Column::ExpiryWarnedFor, Expr::value(e.at))];
        m.guard = vec![before, session::Column::Extensions.eq(s.extensions)];
        lifecycle::modify(&txn, m, now, &mut transitions).await?;
    }
    let n = transitions.len();
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(n)
}

/// The words of a warning of expiry `e`.
fn warning(e: Expiry) -> String {
    let at = e.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    match e.reason {
        ExpiryReason::Lifetime => {
            format!("the session will be reclaimed at {at}: its maximum lifetime ends then (LIFETIME)")
        }
        ExpiryReason::BatchTimeout => format!("the session will be stopped at {at}: its batch timeout (BATCH_TIMEOUT)"),
        ExpiryReason::Idle => format!(
            "the session will be reclaimed at {at} unless it shows activity: it is idle (IDLE); extend it to keep it"
        ),
    }
}

/// Warns of coming expiries ([`warn`]) until the process ends, every `every`.
pub async fn run(db: DatabaseConnection, bus: EventBus, ahead: std::time::Duration, every: std::time::Duration) {
    let ahead = TimeDelta::from_std(ahead).unwrap_or(TimeDelta::MAX);
    loop {
        if let Err(e) = warn(&db, &bus, clock::now(), ahead).await {
            tracing::error!(error = ?e, "warning of expiries failed");
        }
        tokio::time::sleep(every).await;
    }
}

//! Idle checks: an interactive session that shows no activity for its policy's
//! `idle_timeout_seconds` is reclaimed (an IDLE expiry, [`crate::domain::reclaim::expiry`]), as JupyterHub's
//! culler and Kubeflow's notebook culling do. Activity is:
//! - use above a threshold of `idle_utilization` (say `{ cpu = 0.05 }`), at a look's
//!   sample ([`crate::domain::live::usage::record`] writes `active_at`);
//! - input into its terminal, when `idle_counts_terminal` ([`typed`] writes `typed_at`);
//! - an extension of its idle expiry, which counts as activity until a later instant.
//!
//! The checks share one timer: activity seen by any of them resets it. A session keeps the
//! checks its policy gave it at launch (in step with the policy, as its lifetime). Batch
//! sessions, and sessions an administrator exempted (`exempt_idle`), are never idle.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use entity::{keypair_resource_policy as policy, session};

use crate::domain::directory::auth::Viewer;
use crate::domain::lifecycle::{self, Modification, Transitions, Written};
use crate::domain::live::events::EventBus;
use crate::domain::live::usage::{self, Sample};
use crate::domain::model::actor::Actor;
use crate::domain::model::status::SessionStatus;
use crate::domain::model::{SessionType, string_enum};
use crate::domain::{DomainError, DomainResult, model::clock, sessions::visibility};

/// The status info of a session reclaimed for idleness.
pub const IDLE_TIMEOUT: &str = "idle timeout";

/// Terminal input is written down at most this often per terminal.
pub const TYPED_EVERY: TimeDelta = TimeDelta::seconds(1);

/// The idle checks a policy gives a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IdlePolicy {
    /// No activity this long reclaims the session.
    pub timeout_seconds: i64,
    /// Per slot, the use at or above which the session is active.
    #[serde(default)]
    pub utilization: BTreeMap<String, f64>,
    /// Whether terminal input is activity.
    #[serde(default)]
    pub terminal: bool,
}

impl IdlePolicy {
    /// The checks of keypair policy `p`; none without a timeout.
    pub fn of_policy(p: &policy::Model) -> Option<Self> {
        let timeout_seconds = p.idle_timeout_seconds.filter(|t| *t > 0)?;
        let utilization = p
            .idle_utilization
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(slot, v)| Some((slot.clone(), v.as_f64()?)))
            .collect();
        Some(Self { timeout_seconds, utilization, terminal: p.idle_counts_terminal })
    }

    /// As a session keeps it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The checks session `s` is under: none for a batch session, an exempted one, or with
    /// no idle timeout.
    pub fn of(s: &session::Model) -> DomainResult<Option<Self>> {
        if s.exempt_idle || SessionType::stored(&s.session_type)? != SessionType::Interactive {
            return Ok(None);
        }
        let Some(v) = &s.idle else { return Ok(None) };
        let p: Self = serde_json::from_value(v.clone())
            .map_err(|e| DomainError::invariant(format!("a session's idle checks: {e}")))?;
        Ok((p.timeout_seconds > 0).then_some(p))
    }

    /// Whether `sample` shows activity: a slot at or above its threshold.
    pub fn active(&self, sample: &Sample) -> bool {
        self.utilization.iter().any(|(slot, threshold)| sample.get(slot).is_some_and(|x| x >= threshold))
    }

    fn timeout(&self) -> TimeDelta {
        TimeDelta::try_seconds(self.timeout_seconds).unwrap_or(TimeDelta::MAX)
    }
}

/// Whether `sample` of session `s` shows activity to its idle checks (none if it has none).
pub fn shows_activity(s: &session::Model, sample: &Sample) -> DomainResult<bool> {
    Ok(IdlePolicy::of(s)?.is_some_and(|p| p.active(sample)))
}

/// Since when session `s` (under checks `p`) has shown no activity: the latest of its start,
/// its last activity and, when it counts, its last terminal input.
pub fn idle_since(s: &session::Model, p: &IdlePolicy) -> DateTime<Utc> {
    let started = s.started_at.unwrap_or(s.status_changed_at);
    let typed = s.typed_at.filter(|_| p.terminal);
    [Some(started), s.active_at, typed].into_iter().flatten().max().unwrap_or(started)
}

/// When running session `s` will be reclaimed as idle, if it has idle checks.
pub fn expiry(s: &session::Model) -> DomainResult<Option<(DateTime<Utc>, IdlePolicy)>> {
    Ok(IdlePolicy::of(s)?.map(|p| (idle_since(s, &p) + p.timeout(), p)))
}

string_enum!(
    /// What an idle check measures.
    IdleCheckKind { Utilization = "UTILIZATION", Terminal = "TERMINAL" }
);

/// One idle check of a live session, as it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct IdleCheck {
    pub kind: IdleCheckKind,
    /// The slot a utilization check measures.
    pub slot: Option<String>,
    /// What it measured: the slot's use at the latest sample; for the terminal, seconds
    /// since the last input. None before anything was measured.
    pub measured: Option<f64>,
    /// The use at or above which the session is active (utilization checks).
    pub threshold: Option<f64>,
    /// Whether it sees activity now.
    pub active: bool,
    /// Seconds until the session is reclaimed as idle, unless something is active: the
    /// checks share one timer.
    pub remaining_seconds: i64,
}

/// The idle checks of session `s` at `now`: one per slot of its utilization thresholds,
/// then the terminal's when it counts. Empty unless it runs under idle checks.
pub fn checks(s: &session::Model, now: DateTime<Utc>) -> DomainResult<Vec<IdleCheck>> {
    if crate::domain::model::status::SessionStatus::stored(&s.status)?
        != crate::domain::model::status::SessionStatus::Running
    {
        return Ok(Vec::new());
    }
    let Some((at, p)) = expiry(s)? else { return Ok(Vec::new()) };
    let remaining_seconds = (at - now).num_seconds().max(0);
    let current: BTreeMap<String, f64> = usage::of(s).into_iter().map(|u| (u.slot, u.current)).collect();
    let mut out: Vec<IdleCheck> = p
        .utilization
        .iter()
        .map(|(slot, threshold)| {
            let measured = current.get(slot).copied();
            IdleCheck {
                kind: IdleCheckKind::Utilization,
                slot: Some(slot.clone()),
                measured,
                threshold: Some(*threshold),
                active: measured.is_some_and(|m| m >= *threshold),
                remaining_seconds,
            }
        })
        .collect();
    if p.terminal {
        let since = s.typed_at.map(|t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        out.push(IdleCheck {
            kind: IdleCheckKind::Terminal,
            slot: None,
            measured: since,
            threshold: None,
            active: s.typed_at.is_some_and(|t| now - t < usage::SAMPLE_EVERY),
            remaining_seconds,
        });
    }
    Ok(out)
}

/// The words a session reclaimed as idle ends with in its log.
pub fn ended_line(s: &session::Model, p: &IdlePolicy) -> String {
    format!("the session showed no activity for {} s (its idle timeout)", p.timeout_seconds)
        + if s.extensions > 0 { ", extensions included" } else { "" }
}

/// Notes input into session `id`'s terminal at `now`: activity when its checks count it.
pub async fn typed(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> DomainResult<()> {
    session::Entity::update_many()
        .col_expr(session::Column::TypedAt, Expr::value(now))
        .filter(session::Column::Id.eq(id))
        .filter(Condition::any().add(session::Column::TypedAt.is_null()).add(session::Column::TypedAt.lt(now)))
        .exec(db)
        .await?;
    Ok(())
}

/// Exempts session `id` from idle checks, or puts it back under them: for an administrator
/// of its domain. Its owner gets FORBIDDEN, anyone else NOT_FOUND (as for no session). The
/// change is recorded in its history with who made it; the session as it now is comes back.
pub async fn exempt(
    db: &DatabaseConnection,
    bus: &EventBus,
    viewer: &Viewer,
    id: Uuid,
    exempt: bool,
) -> DomainResult<session::Model> {
    let txn = crate::domain::begin_write(db).await?;
    let s = visibility::session_to_work_on(&txn, viewer, id).await?;
    if !viewer.administers_domain(s.domain_id) {
        return Err(DomainError::Forbidden("only an administrator exempts a session from idle checks".into()));
    }
    let mut transitions = Transitions::default();
    let mut after = s.clone();
    if s.exempt_idle != exempt {
        let message = if exempt {
            format!("{} exempted the session from idle checks", viewer.email)
        } else {
            format!("{} put the session back under idle checks", viewer.email)
        };
        let now = clock::now();
        let mut m = Modification::new(
            s.id,
            SessionStatus::stored(&s.status)?,
            "idle-exemption",
            message,
            Actor::User(viewer.user_id),
        );
        // Whatever its status now: an exemption does not wait on it.
        m.guard_status = false;
        m.set = vec![
            (session::Column::ExemptIdle, Expr::value(exempt)),
            // Back under the checks: idleness counts from now, and is warned of anew.
            (session::Column::ActiveAt, Expr::value(now)),
            (session::Column::ExpiryWarnedFor, Expr::value(Option::<DateTime<Utc>>::None)),
        ];
        if let Written::Done(changed) = lifecycle::modify(&txn, m, now, &mut transitions).await? {
            after = *changed;
        }
    }
    lifecycle::commit(txn, transitions, bus).await?;
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(idle: Option<Value>) -> session::Model {
        session::Model {
            status: "RUNNING".into(),
            session_type: "INTERACTIVE".into(),
            idle,
            ..crate::domain::testing::session()
        }
    }

    fn expiry(s: &session::Model) -> Option<(DateTime<Utc>, IdlePolicy)> {
        super::expiry(s).expect("readable idle checks")
    }

    #[test]
    fn the_latest_activity_of_any_check_resets_the_timer() {
        let p = IdlePolicy { timeout_seconds: 60, utilization: BTreeMap::from([("cpu".into(), 0.1)]), terminal: true };
        let mut s = running(Some(p.to_json()));
        let started = s.started_at.unwrap_or(s.status_changed_at);
        assert_eq!(expiry(&s).map(|e| e.0), Some(started + TimeDelta::seconds(60)));
        s.typed_at = Some(started + TimeDelta::seconds(10));
        s.active_at = Some(started + TimeDelta::seconds(5));
        assert_eq!(expiry(&s).map(|e| e.0), Some(started + TimeDelta::seconds(70)));
        // Terminal input that does not count does not reset it.
        s.idle = Some(IdlePolicy { terminal: false, ..p.clone() }.to_json());
        assert_eq!(expiry(&s).map(|e| e.0), Some(started + TimeDelta::seconds(65)));
        assert!(p.active(&Sample::from([("cpu".into(), 0.1)])));
        assert!(!p.active(&Sample::from([("cpu".into(), 0.09), ("mem".into(), 1e9)])));
    }

    #[test]
    fn batch_and_exempt_sessions_are_never_idle() {
        let p = IdlePolicy { timeout_seconds: 60, utilization: BTreeMap::new(), terminal: true };
        let s = running(Some(p.to_json()));
        assert!(expiry(&s).is_some());
        assert!(expiry(&session::Model { session_type: "BATCH".into(), ..s.clone() }).is_none());
        assert!(expiry(&session::Model { exempt_idle: true, ..s.clone() }).is_none());
        assert!(expiry(&running(None)).is_none());
    }
}

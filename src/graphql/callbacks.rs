//! A session's completion callbacks (`Session.callbacks`) and the viewer's key that signs
//! them.

use async_graphql::{Enum, SimpleObject};
use chrono::{DateTime, Utc};

use crate::domain::lifecycle::callbacks::{self as dom, Callback};
use crate::domain::model::status::SessionStatus as DomStatus;

use super::errors::ApiResult;
use super::types::SessionStatus;

/// Where the delivery of a completion callback stands.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::lifecycle::callbacks::State")]
pub enum CallbackState {
    /// To be tried (again) at `nextAttemptAt`.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Given up: every try failed, or the receiver may not be called.
    Failed,
}

/// How one try to deliver a callback went.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::lifecycle::callbacks::Outcome")]
pub enum CallbackOutcome {
    /// The receiver answered 2xx.
    Delivered,
    /// The receiver answered with another status (`statusCode`).
    Refused,
    /// No connection or no answer: the name did not resolve, the connection failed.
    Unreachable,
    /// No answer within the server's timeout.
    Timeout,
    /// The host is not in `--callback-allow` (any more), or it is at an address that is not
    /// public and no pattern names it: not tried again.
    Blocked,
}

/// One try to deliver a callback.
#[derive(SimpleObject)]
pub struct CallbackAttempt {
    /// 1 for the first.
    pub attempt: i32,
    /// When it was tried (RFC 3339, UTC).
    pub attempted_at: DateTime<Utc>,
    /// How it went.
    pub outcome: CallbackOutcome,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<i32>,
    /// What went wrong.
    pub error: Option<String>,
    /// How long the try took, in milliseconds.
    pub duration_ms: i32,
}

/// A completion callback: one event of the session, and every try to deliver it.
#[derive(SimpleObject)]
pub struct SessionCallback {
    /// The status the session reached: RUNNING, or a terminal one.
    pub event: SessionStatus,
    /// Where it goes, without the URL's query (which may hold the receiver's secret).
    pub url: String,
    /// Whether it was delivered, is still to be tried, or was given up.
    pub state: CallbackState,
    /// When the event happened.
    pub created_at: DateTime<Utc>,
    /// When it is tried next, while PENDING.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When it was delivered or given up.
    pub finished_at: Option<DateTime<Utc>>,
    /// Oldest first.
    pub attempts: Vec<CallbackAttempt>,
}

impl SessionCallback {
    pub fn of(c: Callback) -> ApiResult<Self> {
        let state = dom::State::stored(&c.row.state);
        Ok(Self {
            event: DomStatus::stored(&c.row.event)?.into(),
            url: dom::shown_url(&c.row.url),
            state: state.into(),
            created_at: c.row.created_at,
            next_attempt_at: (state == dom::State::Pending).then_some(c.row.next_attempt_at),
            finished_at: c.row.finished_at,
            attempts: c
                .attempts
                .into_iter()
                .map(|a| CallbackAttempt {
                    attempt: a.attempt,
                    attempted_at: a.attempted_at,
                    outcome: dom::Outcome::stored(&a.outcome).into(),
                    status_code: a.status_code,
                    error: a.error,
                    duration_ms: a.duration_ms,
                })
                .collect(),
        })
    }
}

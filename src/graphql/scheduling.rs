//! A session's scheduling history as its detail panel shows it: each decision with its
//! checks, newest first.

use async_graphql::{Enum, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use entity::scheduling_history;

use crate::domain::lifecycle::history::{self, SubStep};
use crate::domain::model::status::SessionStatus as DomStatus;

use super::actor::Actor;
use super::cursor;
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::types::{PageInfo, SessionStatus};

/// How a scheduling decision, or one of its checks, came out.
#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::lifecycle::history::SchedulingResult")]
pub enum SchedulingResult {
    /// It went through: the session moved on, or the check passed.
    Success,
    /// It failed: the session ended in ERROR, or a session it waited for ended without
    /// success; for a check, a limit or the queue stood in the way.
    Failure,
    /// The session still waits (see the entry's `errorCode` and message); the scheduler
    /// tries again at its next passes.
    NeedRetry,
    /// The session waited longer than its resource group's pending timeout and was
    /// cancelled.
    Expired,
    /// Given up for good. This server does not record it yet.
    GiveUp,
    /// Left out. This server does not record it yet.
    Skipped,
}

/// One check within a scheduling decision.
#[derive(SimpleObject)]
pub struct SchedulingSubStep {
    /// The check: `keypair_quota`, `project_quota`, `domain_quota`, `concurrency`,
    /// `capacity` or `queue`.
    pub name: String,
    /// Whether it passed (SUCCESS) or found something in the way (FAILURE).
    pub result: SchedulingResult,
    /// The first failure's pending-reason code, e.g. QUOTA_EXCEEDED; null when it passed.
    pub error_code: Option<String>,
    /// Every failure in words; null when it passed.
    pub message: Option<String>,
    /// How long it took, in milliseconds; null when not measured.
    pub duration_ms: Option<f64>,
}

impl From<SubStep> for SchedulingSubStep {
    fn from(s: SubStep) -> Self {
        Self {
            name: s.name,
            result: s.result.into(),
            error_code: s.error_code,
            message: s.message,
            duration_ms: s.duration_ms,
        }
    }
}

pub struct SchedulingHistoryEntry(pub scheduling_history::Model);

fn status(s: Option<&str>) -> ApiResult<Option<SessionStatus>> {
    Ok(s.map(DomStatus::stored).transpose()?.map(Into::into))
}

/// One decision about a session, as its scheduling history keeps it: a decision repeated
/// in a row is one entry that counts its `attempts`.
#[Object]
impl SchedulingHistoryEntry {
    /// The entry's global id (opaque).
    pub async fn id(&self) -> ID {
        encode(NodeKind::SchedulingHistoryEntry, self.0.id)
    }
    /// `enqueue`, `schedule`, `prepare`, `start`, `terminate`, `timeout`, …
    async fn phase(&self) -> &str {
        &self.0.phase
    }
    /// The session's status before the decision; null at launch (`enqueue`) and for a line
    /// that changes no status (an extension, a new priority, an exemption).
    async fn from_status(&self) -> ApiResult<Option<SessionStatus>> {
        status(self.0.from_status.as_deref())
    }
    /// The status the decision moved it to (PENDING when it still waits); null for a line
    /// that changes no status.
    async fn to_status(&self) -> ApiResult<Option<SessionStatus>> {
        status(self.0.to_status.as_deref())
    }
    /// How the decision came out.
    async fn result(&self) -> ApiResult<SchedulingResult> {
        Ok(history::SchedulingResult::stored(&self.0.result)?.into())
    }
    /// A stable code for what stood in the way, e.g. QUOTA_EXCEEDED, PENDING_TIMEOUT,
    /// START_FAILED; null for a success.
    async fn error_code(&self) -> Option<&str> {
        self.0.error_code.as_deref()
    }
    /// The decision in words, for people (the latest one's, when repeated).
    async fn message(&self) -> &str {
        &self.0.message
    }
    /// The checks the scheduler ran to reach it (the latest decision's, when repeated);
    /// empty when it ran none.
    async fn sub_steps(&self) -> Vec<SchedulingSubStep> {
        SubStep::list_from_json(&self.0.sub_steps).into_iter().map(Into::into).collect()
    }
    /// How many decisions in a row this entry stands for: the same phase, code and target
    /// status (past 16 lines, any code). A waiting session's line counts every scheduling
    /// pass it waited through on this decision, though a pass that changes nothing writes
    /// nothing.
    async fn attempts(&self) -> i32 {
        self.0.attempts
    }
    /// When this decision was last made: the latest pass it counts.
    async fn last_tried_at(&self) -> DateTime<Utc> {
        self.0.last_tried_at.unwrap_or(self.0.updated_at)
    }
    /// When the decision was first made (RFC 3339, UTC).
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// When the line was last written.
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    /// Who made the decision: the user, or the system's rule.
    async fn actor(&self) -> Actor {
        Actor::stored(self.0.actor_user_id, self.0.actor_rule.clone())
    }
}

/// One entry of a page of scheduling history, with its cursor.
#[derive(SimpleObject)]
pub struct SchedulingHistoryEdge {
    /// Where the page after this entry starts: pass it as `after`.
    pub cursor: String,
    /// The entry.
    pub node: SchedulingHistoryEntry,
}

/// A page of a session's scheduling history, newest first.
#[derive(SimpleObject)]
pub struct SchedulingHistoryConnection {
    /// The page's entries, each with its cursor.
    pub edges: Vec<SchedulingHistoryEdge>,
    /// Whether more entries follow, and the page's cursors.
    pub page_info: PageInfo,
    /// How many entries the session's whole history has, over all pages.
    pub total_count: i64,
}

/// A page of the history of one (already visible) session, newest first.
pub async fn history(
    db: &DatabaseConnection,
    session_id: Uuid,
    first: Option<i32>,
    after: Option<String>,
) -> ApiResult<SchedulingHistoryConnection> {
    let request = cursor::page_request::<i64>(first, None, after.as_deref(), None, str::to_owned)?;
    let mut found = history::page(db, session_id, &request).await?;
    let edges: Vec<_> = std::mem::take(&mut found.page.rows)
        .into_iter()
        .map(|r| SchedulingHistoryEdge { cursor: cursor::encode(&r.id), node: SchedulingHistoryEntry(r) })
        .collect();
    Ok(SchedulingHistoryConnection {
        page_info: PageInfo::of(&found.page, &edges, |e| e.cursor.clone()),
        edges,
        total_count: i64::try_from(found.total).unwrap_or(i64::MAX),
    })
}

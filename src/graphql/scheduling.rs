//! A session's scheduling history as its detail panel shows it: each decision with its
//! checks, newest first.

use async_graphql::{Enum, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use entity::scheduling_history;

use crate::domain::history::{self, SubStep};
use crate::domain::status::SessionStatus as DomStatus;

use super::actor::Actor;
use super::cursor;
use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::types::{PageInfo, SessionStatus};

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
#[graphql(remote = "crate::domain::history::SchedulingResult")]
pub enum SchedulingResult {
    Success,
    Failure,
    NeedRetry,
    Expired,
    GiveUp,
    Skipped,
}

/// One check within a scheduling decision.
#[derive(SimpleObject)]
pub struct SchedulingSubStep {
    pub name: String,
    pub result: SchedulingResult,
    pub error_code: Option<String>,
    pub message: Option<String>,
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

#[Object]
impl SchedulingHistoryEntry {
    pub async fn id(&self) -> ID {
        encode(NodeKind::SchedulingHistoryEntry, self.0.id)
    }
    /// `enqueue`, `schedule`, `prepare`, `start`, `terminate`, `timeout`, …
    async fn phase(&self) -> &str {
        &self.0.phase
    }
    async fn from_status(&self) -> ApiResult<Option<SessionStatus>> {
        status(self.0.from_status.as_deref())
    }
    async fn to_status(&self) -> ApiResult<Option<SessionStatus>> {
        status(self.0.to_status.as_deref())
    }
    async fn result(&self) -> ApiResult<SchedulingResult> {
        Ok(history::SchedulingResult::stored(&self.0.result)?.into())
    }
    async fn error_code(&self) -> Option<&str> {
        self.0.error_code.as_deref()
    }
    async fn message(&self) -> &str {
        &self.0.message
    }
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

#[derive(SimpleObject)]
pub struct SchedulingHistoryEdge {
    pub cursor: String,
    pub node: SchedulingHistoryEntry,
}

#[derive(SimpleObject)]
pub struct SchedulingHistoryConnection {
    pub edges: Vec<SchedulingHistoryEdge>,
    pub page_info: PageInfo,
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

//! Scheduling as a session's detail panel shows it: pending reasons and the history of
//! scheduling decisions.

use async_graphql::{Enum, ID, Object, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use entity::scheduling_history;

use crate::domain::DomainError;
use crate::domain::occupancy;
use crate::domain::sessions::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::domain::status::SessionStatus as DomStatus;

use super::errors::ApiResult;
use super::ids::{NodeKind, encode};
use super::launch::reason;
use super::session::{PageInfo, PendingReason, SessionStatus};

/// The pending reasons the scheduler stored with a session.
pub fn pending_reasons(stored: &serde_json::Value) -> Vec<PendingReason> {
    occupancy::PendingReason::list_from_json(stored).into_iter().map(reason).collect()
}

#[derive(Enum, Clone, Copy, PartialEq, Eq)]
pub enum SchedulingResult {
    Success,
    Failure,
    NeedRetry,
    Expired,
    GiveUp,
    Skipped,
}

impl SchedulingResult {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "SUCCESS" => Self::Success,
            "FAILURE" => Self::Failure,
            "NEED_RETRY" => Self::NeedRetry,
            "EXPIRED" => Self::Expired,
            "GIVE_UP" => Self::GiveUp,
            "SKIPPED" => Self::Skipped,
            _ => return None,
        })
    }
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

pub struct SchedulingHistoryEntry(pub scheduling_history::Model);

fn status(s: Option<&str>) -> Option<SessionStatus> {
    s.and_then(DomStatus::parse).map(Into::into)
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
    async fn from_status(&self) -> Option<SessionStatus> {
        status(self.0.from_status.as_deref())
    }
    async fn to_status(&self) -> Option<SessionStatus> {
        status(self.0.to_status.as_deref())
    }
    async fn result(&self) -> ApiResult<SchedulingResult> {
        SchedulingResult::parse(&self.0.result)
            .ok_or_else(|| DomainError::invariant(format!("stored scheduling result {}", self.0.result)).into())
    }
    async fn error_code(&self) -> Option<&str> {
        self.0.error_code.as_deref()
    }
    async fn message(&self) -> &str {
        &self.0.message
    }
    async fn sub_steps(&self) -> Vec<SchedulingSubStep> {
        self.0
            .sub_steps
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                Some(SchedulingSubStep {
                    name: s.get("name")?.as_str()?.to_owned(),
                    result: SchedulingResult::parse(s.get("result")?.as_str()?)?,
                    error_code: s.get("errorCode").and_then(|v| v.as_str()).map(str::to_owned),
                    message: s.get("message").and_then(|v| v.as_str()).map(str::to_owned),
                    duration_ms: s.get("durationMs").and_then(|v| v.as_f64()),
                })
            })
            .collect()
    }
    /// How many consecutive identical decisions this entry stands for.
    async fn attempts(&self) -> i32 {
        self.0.attempts
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
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

/// The history of one (already visible) session, newest first, keyset-paged by id.
pub async fn history(
    db: &DatabaseConnection,
    session_id: Uuid,
    first: Option<i32>,
    after: Option<String>,
) -> ApiResult<SchedulingHistoryConnection> {
    let limit = match first {
        None => DEFAULT_PAGE_SIZE,
        Some(n) => u64::try_from(n).ok().filter(|n| *n <= MAX_PAGE_SIZE).ok_or_else(|| {
            DomainError::bad_input(
                "OUT_OF_RANGE",
                Some("first".to_owned()),
                format!("`first` is between 0 and {MAX_PAGE_SIZE}"),
            )
        })?,
    };
    let after_id = match after {
        None => None,
        Some(c) => Some(
            URL_SAFE_NO_PAD
                .decode(c.as_bytes())
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.strip_prefix("h:").and_then(|n| n.parse::<i64>().ok()))
                .ok_or_else(|| {
                    DomainError::bad_input("INVALID_CURSOR", Some("after".to_owned()), "malformed cursor")
                })?,
        ),
    };
    let base = scheduling_history::Entity::find().filter(scheduling_history::Column::SessionId.eq(session_id));
    let total = sea_orm::PaginatorTrait::count(base.clone(), db).await?;
    let mut query = base.order_by_desc(scheduling_history::Column::Id).limit(limit + 1);
    if let Some(id) = after_id {
        query = query.filter(scheduling_history::Column::Id.lt(id));
    }
    let rows = query.all(db).await?;
    let has_next = rows.len() as u64 > limit;
    let edges: Vec<_> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| SchedulingHistoryEdge {
            cursor: URL_SAFE_NO_PAD.encode(format!("h:{}", r.id)),
            node: SchedulingHistoryEntry(r),
        })
        .collect();
    Ok(SchedulingHistoryConnection {
        page_info: PageInfo {
            has_next_page: has_next,
            has_previous_page: after_id.is_some(),
            start_cursor: edges.first().map(|e| e.cursor.clone()),
            end_cursor: edges.last().map(|e| e.cursor.clone()),
        },
        edges,
        total_count: i64::try_from(total).unwrap_or(i64::MAX),
    })
}

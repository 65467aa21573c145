//! What a session list may be narrowed to: the tabs, the filter, its checks, and the SQL
//! condition it becomes.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func, LikeExpr, Query};
use sea_orm::{ColumnTrait, Condition};
use uuid::Uuid;

use entity::{session, user};

use crate::domain::error::Text;
use crate::domain::model::SessionType;
use crate::domain::status::SessionStatus;
use crate::domain::visibility::SessionScope;
use crate::domain::{DomainError, DomainResult, InputProblem};

const MAX_NAME_FILTER: usize = 256;
/// Most values a filter's type or status list may hold (each is one value of a small set;
/// repeats are allowed and read once).
pub const MAX_FILTER_VALUES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionTab {
    /// Every non-terminal status, PENDING included.
    Running,
    /// TERMINATED, CANCELLED and ERROR.
    Finished,
}

impl SessionTab {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Finished => "FINISHED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Running, Self::Finished].into_iter().find(|t| t.as_str() == text)
    }

    pub fn statuses(self) -> Vec<SessionStatus> {
        SessionStatus::ALL.iter().copied().filter(|s| s.is_terminal() == (self == Self::Finished)).collect()
    }
}

#[derive(Clone, Debug, Default)]
pub struct SessionFilter {
    pub types: Option<Vec<SessionType>>,
    pub tab: Option<SessionTab>,
    pub statuses: Option<Vec<SessionStatus>>,
    /// Case-insensitive substring of the name.
    pub name_contains: Option<String>,
    pub resource_group: Option<String>,
    /// Only with scope PROJECT.
    pub owner_email: Option<String>,
    pub launch_group_id: Option<Uuid>,
    /// Inclusive lower bound of the creation time.
    pub created_after: Option<DateTime<Utc>>,
    /// Exclusive upper bound of the creation time.
    pub created_before: Option<DateTime<Utc>>,
}

/// Every check of a filter in `scope`, each problem reported.
pub(super) fn check(scope: SessionScope, filter: &SessionFilter) -> DomainResult<()> {
    let mut problems = Vec::new();
    if scope == SessionScope::Mine && filter.owner_email.is_some() {
        problems.push(InputProblem::new(
            "OWNER_FILTER_NEEDS_PROJECT_SCOPE",
            Some("owner_email".to_owned()),
            "the owner filter applies to the PROJECT scope; the MINE scope lists only your own sessions",
        ));
    }
    if filter.name_contains.as_ref().is_some_and(|n| n.chars().count() > MAX_NAME_FILTER) {
        problems.push(InputProblem::new(
            "TOO_LONG",
            Some("name_contains".to_owned()),
            format!("the name filter is limited to {MAX_NAME_FILTER} characters"),
        ));
    }
    for (field, len) in [
        ("types", filter.types.as_ref().map_or(0, Vec::len)),
        ("statuses", filter.statuses.as_ref().map_or(0, Vec::len)),
    ] {
        problems.extend(InputProblem::too_many(field, len, MAX_FILTER_VALUES, "values"));
    }
    for (field, text) in [
        ("name_contains", &filter.name_contains),
        ("owner_email", &filter.owner_email),
        ("resource_group", &filter.resource_group),
    ] {
        if let Some(problem) = text.as_deref().and_then(|t| InputProblem::control_characters(field, t, Text::Line)) {
            problems.push(problem);
        }
    }
    if let (Some(after), Some(before)) = (filter.created_after, filter.created_before)
        && after > before
    {
        problems.push(InputProblem::new(
            "EMPTY_RANGE",
            Some("created_after".to_owned()),
            "the creation range starts after it ends",
        ));
    }
    if problems.is_empty() { Ok(()) } else { Err(DomainError::BadInput(problems)) }
}

pub(super) fn condition(f: &SessionFilter) -> Condition {
    let mut c = Condition::all();
    if let Some(types) = &f.types {
        let types: BTreeSet<&str> = types.iter().map(|t| t.as_str()).collect();
        c = c.add(session::Column::SessionType.is_in(crate::domain::padded(types)));
    }
    if let Some(tab) = f.tab {
        c = c.add(session::Column::Status.is_in(tab.statuses().into_iter().map(SessionStatus::as_str)));
    }
    if let Some(statuses) = &f.statuses {
        let statuses: BTreeSet<&str> = statuses.iter().map(|s| s.as_str()).collect();
        c = c.add(session::Column::Status.is_in(crate::domain::padded(statuses)));
    }
    if let Some(needle) = f.name_contains.as_deref().filter(|n| !n.is_empty()) {
        let pattern = format!("%{}%", escape_like(&needle.to_lowercase()));
        c = c.add(
            Expr::expr(Func::lower(Expr::col((session::Entity, session::Column::Name))))
                .like(LikeExpr::new(pattern).escape('\\')),
        );
    }
    if let Some(group) = &f.resource_group {
        c = c.add(session::Column::ResourceGroup.eq(group.as_str()));
    }
    if let Some(email) = &f.owner_email {
        c = c.add(
            session::Column::OwnerId.in_subquery(
                Query::select()
                    .column(user::Column::Id)
                    .from(user::Entity)
                    .and_where(user::Column::Email.eq(email.as_str()))
                    .take(),
            ),
        );
    }
    if let Some(group) = f.launch_group_id {
        c = c.add(session::Column::LaunchGroupId.eq(group));
    }
    if let Some(after) = f.created_after {
        c = c.add(session::Column::CreatedAt.gte(after));
    }
    if let Some(before) = f.created_before {
        c = c.add(session::Column::CreatedAt.lt(before));
    }
    c
}

fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(escape_like("a_b%c\\"), "a\\_b\\%c\\\\");
    }

    #[test]
    fn tabs_split_the_statuses() {
        assert_eq!(
            SessionTab::Running.statuses().len() + SessionTab::Finished.statuses().len(),
            SessionStatus::ALL.len()
        );
        assert!(SessionTab::Running.statuses().contains(&SessionStatus::Pending));
    }
}

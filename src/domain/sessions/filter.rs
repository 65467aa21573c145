//! What a session list may be narrowed to: the tabs, the filter, its checks, and the SQL
//! condition it becomes.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func, LikeExpr, Query};
use sea_orm::{ColumnTrait, Condition};
use uuid::Uuid;

use entity::{session, user};

use crate::domain::error::Text;
use crate::domain::model::ids::{self, NodeKind};
use crate::domain::model::status::SessionStatus;
use crate::domain::model::{SessionType, Vocabulary, string_enum};
use crate::domain::sessions::visibility::SessionScope;
use crate::domain::{DomainError, DomainResult, InputProblem};

/// Most characters of a filter's text (a name's part, a resource group, an e-mail).
pub const MAX_FILTER_TEXT: usize = 256;
/// Most values a filter's type or status list may hold (each is one value of a small set;
/// repeats are allowed and read once).
pub const MAX_FILTER_VALUES: usize = 64;

string_enum!(
    /// The page's two tabs.
    SessionTab { Running = "RUNNING", Finished = "FINISHED" }
);

impl SessionTab {
    /// Running: every non-terminal status, PENDING included. Finished: TERMINATED,
    /// CANCELLED and ERROR.
    pub fn statuses(self) -> Vec<SessionStatus> {
        SessionStatus::ALL.iter().copied().filter(|s| s.is_terminal() == (self == Self::Finished)).collect()
    }
}

/// The launch group a filter names, by its public id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchGroupRef(pub Uuid);

/// The filter's fields, declared once: each one's documentation, name and value type.
/// `session_filter_fields!(m)` hands the list to the macro `m`, and everything a filter is
/// made of comes from it: the domain's [`SessionFilter`] with its checks and the text of
/// its values (a signed export link carries and covers exactly that text), the GraphQL
/// input (`graphql::session_list`) and the export's query parameters (`http::export`).
/// How a value reads, writes and is checked is its type's ([`FilterValue`]); the SQL a
/// field becomes is [`condition`]'s, and a test fails for a field it forgets. Adding a
/// filter is a line here and its condition.
macro_rules! session_filter_fields {
    ($then:ident) => {
        $then! {
            /// Only sessions of these types.
            types: Vec<$crate::domain::model::SessionType>,
            /// Only the sessions of one tab: RUNNING (every non-terminal status, PENDING
            /// included) or FINISHED (TERMINATED, CANCELLED and ERROR).
            tab: $crate::domain::sessions::SessionTab,
            /// Only sessions in these statuses.
            statuses: Vec<$crate::domain::model::status::SessionStatus>,
            /// Case-insensitive part of the name.
            name_contains: String,
            /// Only sessions of this resource group.
            resource_group: String,
            /// Only the sessions of this owner (by e-mail); only with scope PROJECT.
            owner_email: String,
            /// Only the sessions of one launch ("Launch Multiple Sessions").
            launch_group_id: $crate::domain::sessions::LaunchGroupRef,
            /// Created at or after this instant.
            created_after: chrono::DateTime<chrono::Utc>,
            /// Created before this instant.
            created_before: chrono::DateTime<chrono::Utc>,
        }
    };
}
pub(crate) use session_filter_fields;

/// The domain's filter from the declaration.
macro_rules! domain_filter {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty ),* $(,)?) => {
        /// Narrows a session list; every given condition must hold.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct SessionFilter {
            $( $(#[$doc])* pub $field: Option<$ty>, )*
        }

        impl SessionFilter {
            /// Every field's name, in the declaration's order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Each given field with the text of its value, in the declaration's order: what
            /// a link carries and its signature covers.
            pub fn texts(&self) -> Vec<(&'static str, String)> {
                let mut out = Vec::new();
                $( if let Some(v) = &self.$field { out.push((stringify!($field), FilterValue::text(v))); } )*
                out
            }

            /// Sets the field `field` from the text of its value (as [`Self::texts`] writes
            /// it); `None` when there is no such field.
            pub fn read(&mut self, field: &str, text: &str) -> Option<Result<(), InputProblem>> {
                match field {
                    $( stringify!($field) => Some(
                        <$ty as FilterValue>::read(stringify!($field), text).map(|v| self.$field = Some(v))
                    ), )*
                    _ => None,
                }
            }

            /// The problems of each given value on its own.
            fn value_problems(&self) -> Vec<InputProblem> {
                let mut out = Vec::new();
                $( if let Some(v) = &self.$field { out.extend(FilterValue::problems(v, stringify!($field))); } )*
                out
            }
        }
    };
}
session_filter_fields!(domain_filter);

/// A filter field's value: its text in a link or query string (read back exactly), and its
/// checks.
pub trait FilterValue: Sized {
    fn text(&self) -> String;
    fn read(field: &str, text: &str) -> Result<Self, InputProblem>;
    /// What is wrong with the value, however it came (a GraphQL input is not read from text).
    fn problems(&self, field: &str) -> Vec<InputProblem>;
}

/// A list of names, comma-separated.
impl<T: Vocabulary> FilterValue for Vec<T> {
    fn text(&self) -> String {
        self.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(",")
    }
    fn read(field: &str, text: &str) -> Result<Self, InputProblem> {
        text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| name(field, s)).collect()
    }
    fn problems(&self, field: &str) -> Vec<InputProblem> {
        InputProblem::too_many(field, self.len(), MAX_FILTER_VALUES, "values").into_iter().collect()
    }
}

impl FilterValue for SessionTab {
    fn text(&self) -> String {
        self.as_str().to_owned()
    }
    fn read(field: &str, text: &str) -> Result<Self, InputProblem> {
        name(field, text)
    }
    fn problems(&self, _: &str) -> Vec<InputProblem> {
        Vec::new()
    }
}

fn name<T: Vocabulary>(field: &str, text: &str) -> Result<T, InputProblem> {
    T::parse(text).ok_or_else(|| {
        InputProblem::new("UNKNOWN_VALUE", Some(field.to_owned()), format!("`{text}` is not a {}", T::NAME))
    })
}

/// One line of text, at most [`MAX_FILTER_TEXT`] characters.
impl FilterValue for String {
    fn text(&self) -> String {
        self.clone()
    }
    fn read(_: &str, text: &str) -> Result<Self, InputProblem> {
        Ok(text.to_owned())
    }
    fn problems(&self, field: &str) -> Vec<InputProblem> {
        let mut problems = Vec::new();
        if self.chars().count() > MAX_FILTER_TEXT {
            problems.push(InputProblem::new(
                "TOO_LONG",
                Some(field.to_owned()),
                format!("at most {MAX_FILTER_TEXT} characters"),
            ));
        }
        problems.extend(InputProblem::control_characters(field, self, Text::Line));
        problems
    }
}

/// RFC 3339, to the microsecond.
impl FilterValue for DateTime<Utc> {
    fn text(&self) -> String {
        self.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    }
    fn read(field: &str, text: &str) -> Result<Self, InputProblem> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| InputProblem::new("INVALID_TIME", Some(field.to_owned()), "not an RFC 3339 time"))
    }
    fn problems(&self, field: &str) -> Vec<InputProblem> {
        crate::domain::model::clock::out_of_range(field, *self).into_iter().collect()
    }
}

/// The launch group's public id.
impl FilterValue for LaunchGroupRef {
    fn text(&self) -> String {
        ids::encode(NodeKind::LaunchGroup, self.0)
    }
    fn read(field: &str, text: &str) -> Result<Self, InputProblem> {
        ids::decode_uuid(text, NodeKind::LaunchGroup)
            .map(LaunchGroupRef)
            .ok_or_else(|| InputProblem::new("INVALID_ID", Some(field.to_owned()), "not a launch group id"))
    }
    fn problems(&self, _: &str) -> Vec<InputProblem> {
        Vec::new()
    }
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
    problems.extend(filter.value_problems());
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

/// Whether `f` narrows by type and status alone, so that its counts can be read from the
/// tallies ([`super::tally`]). Every field is named: a new one must say.
pub(super) fn by_type_and_status_only(f: &SessionFilter) -> bool {
    let SessionFilter {
        types: _,
        tab: _,
        statuses: _,
        name_contains,
        resource_group,
        owner_email,
        launch_group_id,
        created_after,
        created_before,
    } = f;
    name_contains.as_deref().is_none_or(str::is_empty)
        && resource_group.is_none()
        && owner_email.is_none()
        && launch_group_id.is_none()
        && created_after.is_none()
        && created_before.is_none()
}

/// Whether sessions of type `ty` in `status` pass `f`'s type and status fields, as
/// [`condition`] makes them.
pub(super) fn admits_kind(f: &SessionFilter, ty: SessionType, status: SessionStatus) -> bool {
    f.types.as_ref().is_none_or(|types| types.contains(&ty))
        && f.tab.is_none_or(|tab| tab.statuses().contains(&status))
        && f.statuses.as_ref().is_none_or(|statuses| statuses.contains(&status))
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
    if let Some(LaunchGroupRef(group)) = f.launch_group_id {
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

/// A value of each declared field, as a link writes it (for tests of every layer that
/// walks the declared fields).
#[cfg(test)]
pub(crate) fn example(field: &str) -> String {
    match field {
        "types" => "BATCH,INFERENCE".into(),
        "tab" => "FINISHED".into(),
        "statuses" => "RUNNING".into(),
        "name_contains" | "resource_group" | "owner_email" => "x".into(),
        "launch_group_id" => ids::encode(NodeKind::LaunchGroup, Uuid::nil()),
        "created_after" | "created_before" => "2026-01-02T03:04:05.000006Z".into(),
        other => panic!("no example for the filter field `{other}`: add one"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(escape_like("a_b%c\\"), "a\\_b\\%c\\\\");
    }

    #[test]
    fn every_declared_field_reads_back_its_text_and_narrows_the_list() {
        use sea_orm::sea_query::SqliteQueryBuilder;
        let sql = |f: &SessionFilter| {
            Query::select()
                .column(session::Column::Id)
                .from(session::Entity)
                .cond_where(condition(f))
                .to_string(SqliteQueryBuilder)
        };
        let everything = sql(&SessionFilter::default());
        for field in SessionFilter::FIELDS {
            let mut filter = SessionFilter::default();
            filter.read(field, &example(field)).expect("a field").expect("a value");
            assert_eq!(filter.texts(), vec![(*field, example(field))], "{field} reads back");
            assert_ne!(sql(&filter), everything, "{field} has no condition");
            check(SessionScope::Project, &filter).expect("a valid example");
        }
        assert!(SessionFilter::default().read("nope", "x").is_none());
    }

    #[test]
    fn values_are_checked_however_they_came() {
        let mut filter = SessionFilter::default();
        let problem = filter.read("launch_group_id", "nope").expect("a field").expect_err("not an id");
        assert_eq!(problem.code, "INVALID_ID");
        let problem = filter.read("types", "BATCH,NOPE").expect("a field").expect_err("not a type");
        assert_eq!(problem.code, "UNKNOWN_VALUE");
        let problem = filter.read("created_after", "yesterday").expect("a field").expect_err("not a time");
        assert_eq!(problem.code, "INVALID_TIME");
        for field in ["name_contains", "resource_group", "owner_email"] {
            let mut filter = SessionFilter::default();
            filter.read(field, "a\0b").expect("a field").expect("read as given");
            let DomainError::BadInput(problems) = check(SessionScope::Project, &filter).expect_err("a NUL") else {
                panic!("bad input")
            };
            assert_eq!(problems[0].code, "NUL_CHARACTER", "{field}");
            filter.read(field, &"x".repeat(MAX_FILTER_TEXT + 1)).expect("a field").expect("read as given");
            let DomainError::BadInput(problems) = check(SessionScope::Project, &filter).expect_err("too long") else {
                panic!("bad input")
            };
            assert_eq!(problems[0].code, "TOO_LONG", "{field}");
        }
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

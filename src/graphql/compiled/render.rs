//! A compiled list's answer written as JSON, field by field in the order the document asks:
//! the bytes async-graphql's executor would send for the same page. Every leaf goes through
//! the same conversion the executor uses (`InputType::to_value` of the field's GraphQL
//! type, then `ConstValue`'s serialization); a value the resolver converts is converted by
//! the same function (`session::shown`, `ResourceSlots::memory_of`).

use async_graphql::{InputType, Value};
use chrono::{DateTime, Utc};

use crate::domain::model::Role as DomRole;
use crate::domain::sessions::{self as dom, PageRow, SessionPage};
use crate::domain::slots::{self, ResourceSlots as Slots};
use crate::domain::{DomainResult, clock};

use super::super::cursor;
use super::super::ids::{NodeKind, encode};
use super::super::session::shown;
use super::super::types::ResourceSlots;
use super::super::viewer::Role;
use super::plan::{Connection, Edge, Fields, PageInfoField, Plan, ProjectField, SessionField, SlotsField, UserField};

/// What every row of the page shares.
struct Page<'a> {
    project: &'a entity::project::Model,
    now: DateTime<Utc>,
}

/// The whole response body, `{"data":{…}}`.
pub(super) fn body(plan: &Plan, page: &SessionPage, project: &entity::project::Model) -> DomainResult<Vec<u8>> {
    let mut out = Vec::with_capacity(256 + 512 * page.rows.len());
    out.extend_from_slice(b"{\"data\":{");
    out.extend_from_slice(&plan.key);
    let shared = Page { project, now: clock::now() };
    object(&mut out, &plan.connection, |out, what| connection(out, what, page, &shared))?;
    out.extend_from_slice(b"}}");
    Ok(out)
}

/// `{"key":value,…}` with each value written by `value`.
fn object<F>(
    out: &mut Vec<u8>,
    fields: &Fields<F>,
    mut value: impl FnMut(&mut Vec<u8>, &F) -> DomainResult<()>,
) -> DomainResult<()> {
    out.push(b'{');
    for (i, (key, what)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(key);
        value(out, what)?;
    }
    out.push(b'}');
    Ok(())
}

/// A leaf, as the executor converts the field's value and serializes it.
fn leaf<T: InputType>(out: &mut Vec<u8>, value: T) -> DomainResult<()> {
    write(out, &value.to_value())
}

fn write(out: &mut Vec<u8>, value: &Value) -> DomainResult<()> {
    serde_json::to_writer(&mut *out, value).map_err(|e| crate::domain::DomainError::invariant(e.to_string()))
}

/// A string leaf: what `ConstValue::String` serializes as, without making one.
fn text(out: &mut Vec<u8>, value: Option<&str>) -> DomainResult<()> {
    serde_json::to_writer(&mut *out, &value).map_err(|e| crate::domain::DomainError::invariant(e.to_string()))
}

fn typename(out: &mut Vec<u8>, name: &str) -> DomainResult<()> {
    text(out, Some(name))
}

fn list<T>(
    out: &mut Vec<u8>,
    items: &[T],
    mut item: impl FnMut(&mut Vec<u8>, &T) -> DomainResult<()>,
) -> DomainResult<()> {
    out.push(b'[');
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(out, it)?;
    }
    out.push(b']');
    Ok(())
}

fn connection(out: &mut Vec<u8>, what: &Connection, page: &SessionPage, shared: &Page<'_>) -> DomainResult<()> {
    match what {
        Connection::Typename => typename(out, "SessionConnection"),
        Connection::Edges(fields) => list(out, &page.rows, |out, row| {
            object(out, fields, |out, what| match what {
                Edge::Typename => typename(out, "SessionEdge"),
                Edge::Cursor => leaf(out, cursor::encode(&row.position)),
                Edge::Node(fields) => session(out, fields, row, shared),
            })
        }),
        Connection::Nodes(fields) => list(out, &page.rows, |out, row| session(out, fields, row, shared)),
        Connection::PageInfo(fields) => object(out, fields, |out, what| match what {
            PageInfoField::Typename => typename(out, "PageInfo"),
            PageInfoField::HasNextPage => leaf(out, page.has_next_page),
            PageInfoField::HasPreviousPage => leaf(out, page.has_previous_page),
            PageInfoField::StartCursor => leaf(out, page.rows.first().map(|r| cursor::encode(&r.position))),
            PageInfoField::EndCursor => leaf(out, page.rows.last().map(|r| cursor::encode(&r.position))),
        }),
    }
}

fn session(out: &mut Vec<u8>, fields: &Fields<SessionField>, row: &PageRow, shared: &Page<'_>) -> DomainResult<()> {
    use SessionField as S;
    let s = &row.session;
    object(out, fields, |out, what| match what {
        S::Typename => typename(out, "Session"),
        S::Id => leaf(out, encode(NodeKind::Session, s.id)),
        S::Name => text(out, Some(&s.name)),
        S::Type => leaf(out, shown::session_type(s).map_err(|e| e.0)?),
        S::Status => leaf(out, shown::status(s).map_err(|e| e.0)?),
        S::StatusInfo => text(out, s.status_info.as_deref()),
        S::Result => leaf(out, shown::result(s).map_err(|e| e.0)?),
        S::ExitCode => leaf(out, s.exit_code),
        S::Agent => text(out, s.agent_id.as_deref()),
        S::ClusterSize => leaf(out, s.cluster_size),
        S::Priority => leaf(out, s.priority),
        S::StartupCommand => text(out, s.startup_command.as_deref()),
        S::BatchTimeoutSeconds => leaf(out, shown::batch_timeout_seconds(s)),
        S::CreatedAt => leaf(out, s.created_at),
        S::ScheduledAt => leaf(out, s.scheduled_at),
        S::StartedAt => leaf(out, s.started_at),
        S::TerminatedAt => leaf(out, s.terminated_at),
        S::ElapsedSeconds => leaf(out, dom::elapsed_seconds(s, shared.now)),
        S::QueuePosition => leaf(out, dom::queue_position(s)?),
        S::RequestedSlots(fields) => resource_slots(out, fields, &Slots::from_json(&s.requested_slots)?),
        S::OccupiedSlots(fields) => resource_slots(out, fields, &Slots::from_json(&s.occupied_slots)?),
        S::Owner(fields) => owner(out, fields, &row.owner),
        S::Project(fields) => object(out, fields, |out, what| match what {
            ProjectField::Typename => typename(out, "Project"),
            ProjectField::Id => leaf(out, encode(NodeKind::Project, shared.project.id)),
            ProjectField::Name => text(out, Some(&shared.project.name)),
        }),
    })
}

fn resource_slots(out: &mut Vec<u8>, fields: &Fields<SlotsField>, slots: &Slots) -> DomainResult<()> {
    object(out, fields, |out, what| match what {
        SlotsField::Typename => typename(out, "ResourceSlots"),
        SlotsField::Cpu => leaf(out, slots.get(slots::CPU)),
        SlotsField::Memory => leaf(out, ResourceSlots::memory_of(slots)),
    })
}

fn owner(out: &mut Vec<u8>, fields: &Fields<UserField>, user: &entity::user::Model) -> DomainResult<()> {
    // The executor reads the whole owner (its role too) whichever of its fields are asked.
    let role = Role::from(DomRole::stored(&user.role)?);
    object(out, fields, |out, what| match what {
        UserField::Typename => typename(out, "User"),
        UserField::Id => leaf(out, encode(NodeKind::User, user.id)),
        UserField::Email => text(out, Some(&user.email)),
        UserField::FullName => text(out, Some(&user.full_name)),
        UserField::Role => leaf(out, role),
    })
}

//! What the compiled list knows of each field: how its value is read from what a list page
//! holds. One entry per field of the types a session list shows; each goes through the
//! function its resolver calls (a session's plain fields come from their one declaration,
//! [`session_plain_fields`]; the slots' and the resource objects' own functions), so that a
//! value is written as the executor writes it. The
//! schema says everything else (which fields exist, their types, nullability, `__typename`):
//! [`super::schema`]. A field with no entry here is not compiled: its list is answered by
//! the executor.

use std::collections::HashMap;

use async_graphql::{ID, InputType, Value};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use entity::{image, launch_group, project, resource_group, user};

use crate::domain::model::Role as DomRole;
use crate::domain::model::slots::{self, ResourceSlots as Slots};
use crate::domain::reclaim::expiry::{self, Expiry, ExtensionLimits};
use crate::domain::sessions::related::Wanted;
use crate::domain::sessions::{PageRow, SessionCounts, SessionPage};
use crate::domain::{DomainError, DomainResult};

use super::super::actor::ActorKind;
use super::super::cursor;
use super::super::errors::ApiResult;
use super::super::ids::{NodeKind, encode};
use super::super::people::Role;
use super::super::resource::{image_apps, minimum_slots, scheduler_strategy, session_types, web_apps};
use super::super::session::{big, int, percent, plain, session_plain_fields};
use super::super::types::{
    ExpiryReason, IdleCheck, PendingReason, ResourceSlots, SessionResult, SessionStatus, SessionType, SlotAmount,
    SlotUse,
};

/// An object of the answer, as the list page holds it.
pub(super) enum Node<'a> {
    Connection,
    Edge(&'a PageRow),
    PageInfo,
    Session(&'a PageRow),
    User(&'a user::Model),
    Project(&'a project::Model),
    ResourceGroup(&'a resource_group::Model),
    /// An image, with the digest its session ran.
    Image(&'a image::Model, Option<&'a str>),
    Pull(crate::domain::runtime::image::Progress),
    LaunchGroup(&'a launch_group::Model),
    Expiry(&'a PageRow, Expiry),
    SlotUse(SlotUse),
    IdleCheck(IdleCheck),
    Slots(Slots),
    SlotAmount(String, f64),
    PendingReason(PendingReason),
    /// Who made a session's latest status change.
    Actor(&'a PageRow),
    Counts(&'a SessionCounts),
    TypeCount(crate::domain::model::SessionType, u64),
    Mount(crate::domain::storage::mounts::Mount),
}

/// A field's value: a leaf (text without a copy where it can), an object, a list of them.
pub(super) enum Out<'a> {
    Value(Value),
    Text(Option<&'a str>),
    Null,
    One(Node<'a>),
    Many(Vec<Node<'a>>),
}

/// What every object of one answer shares: the page, its project, the instant elapsed
/// times are counted to, and the relations the plan loaded.
pub(super) struct Page<'a> {
    pub page: &'a SessionPage,
    pub project: &'a project::Model,
    pub now: DateTime<Utc>,
    pub groups: &'a HashMap<String, resource_group::Model>,
    pub images: &'a HashMap<String, image::Model>,
    pub launch_groups: &'a HashMap<Uuid, launch_group::Model>,
    /// The extension limits of the sessions' keypairs' policies.
    pub limits: &'a HashMap<Uuid, ExtensionLimits>,
    /// Who made the sessions' latest status changes, but their owners.
    pub actors: &'a HashMap<Uuid, user::Model>,
    /// The counts beside the list, when asked.
    pub counts: Option<&'a SessionCounts>,
}

/// Reads one field of an object.
pub(super) type Get = for<'a> fn(&Node<'a>, &Page<'a>) -> DomainResult<Out<'a>>;

/// Adds to `wanted` the relation `type_name.field` needs loaded for the whole page, as the
/// executor's prefetch does ([`super::super::loaders::session_relation`], the one rule).
pub(super) fn needs(wanted: &mut Wanted, type_name: &str, field: &str) {
    if type_name == "Session"
        && let Some(r) = super::super::loaders::session_relation(field)
    {
        wanted.add(r);
    }
}

fn leaf<'a, T: InputType>(value: T) -> DomainResult<Out<'a>> {
    Ok(Out::Value(value.to_value()))
}

fn text(value: &str) -> DomainResult<Out<'_>> {
    Ok(Out::Text(Some(value)))
}

fn amounts<'a>(list: Vec<SlotAmount>) -> DomainResult<Out<'a>> {
    Ok(Out::Many(list.into_iter().map(|a| Node::SlotAmount(a.slot, a.amount)).collect()))
}

fn missing(what: &str) -> DomainError {
    DomainError::invariant(format!("a compiled list without its {what}"))
}

/// The objects each getter reads: a node of another kind is a planning mistake, answered
/// by the executor.
macro_rules! node {
    ($n:expr, $variant:ident) => {
        match $n {
            Node::$variant(v) => *v,
            _ => return Err(DomainError::invariant(concat!("not a ", stringify!($variant)))),
        }
    };
}

/// The session and expiry a getter of `SessionExpiry` reads.
fn expiry_of<'n, 'a>(n: &'n Node<'a>) -> DomainResult<(&'a PageRow, &'n Expiry)> {
    match n {
        Node::Expiry(row, e) => Ok((row, e)),
        _ => Err(DomainError::invariant("not a SessionExpiry")),
    }
}

/// The image (and the digest its session ran) a getter of `Image` reads.
fn image_of<'a>(n: &Node<'a>) -> DomainResult<(&'a image::Model, Option<&'a str>)> {
    match n {
        Node::Image(i, ran) => Ok((i, *ran)),
        _ => Err(DomainError::invariant("not an Image")),
    }
}

/// The progress a getter of `PullProgress` reads.
fn pull_of<'n>(n: &'n Node<'_>) -> DomainResult<&'n crate::domain::runtime::image::Progress> {
    match n {
        Node::Pull(p) => Ok(p),
        _ => Err(DomainError::invariant("not a PullProgress")),
    }
}

/// The mount a getter of `SessionMount` reads.
fn mount_of<'n>(n: &'n Node<'_>) -> DomainResult<&'n crate::domain::storage::mounts::Mount> {
    match n {
        Node::Mount(m) => Ok(m),
        _ => Err(DomainError::invariant("not a SessionMount")),
    }
}

/// The use a getter of `SlotUse` reads.
fn slot_use<'n>(n: &'n Node<'_>) -> DomainResult<&'n SlotUse> {
    match n {
        Node::SlotUse(u) => Ok(u),
        _ => Err(DomainError::invariant("not a SlotUse")),
    }
}

/// The check a getter of `IdleCheck` reads.
fn idle_check<'n>(n: &'n Node<'_>) -> DomainResult<&'n IdleCheck> {
    match n {
        Node::IdleCheck(c) => Ok(c),
        _ => Err(DomainError::invariant("not an IdleCheck")),
    }
}

/// The slots a getter of `ResourceSlots` reads.
fn slots_of<'n>(n: &'n Node<'_>) -> DomainResult<&'n Slots> {
    match n {
        Node::Slots(slots) => Ok(slots),
        _ => Err(DomainError::invariant("not a ResourceSlots")),
    }
}

/// The reason a getter of `PendingReason` reads.
fn reason<'n>(n: &'n Node<'_>) -> DomainResult<&'n PendingReason> {
    match n {
        Node::PendingReason(r) => Ok(r),
        _ => Err(DomainError::invariant("not a PendingReason")),
    }
}

/// The counts a getter of `SessionCounts` reads.
fn counts_of<'a>(n: &Node<'a>) -> DomainResult<&'a SessionCounts> {
    match n {
        Node::Counts(c) => Ok(c),
        _ => Err(DomainError::invariant("not a SessionCounts")),
    }
}

/// A count as the API writes it.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The getter of `field` of the object type `type_name`, if the compiled list writes it.
pub(super) fn getter(type_name: &str, field: &str) -> Option<Get> {
    macro_rules! get {
        (|$n:ident, $p:ident| $body:expr) => {{
            #[allow(unused_variables)]
            let g: Get = |$n, $p| $body;
            Some(g)
        }};
    }
    match (type_name, field) {
        ("SessionConnection", "edges") => get!(|n, p| Ok(Out::Many(p.page.rows.iter().map(Node::Edge).collect()))),
        ("SessionConnection", "nodes") => get!(|n, p| Ok(Out::Many(p.page.rows.iter().map(Node::Session).collect()))),
        ("SessionConnection", "pageInfo") => get!(|n, p| Ok(Out::One(Node::PageInfo))),

        ("SessionEdge", "cursor") => get!(|n, p| leaf(cursor::encode(&node!(n, Edge).position))),
        ("SessionEdge", "node") => get!(|n, p| Ok(Out::One(Node::Session(node!(n, Edge))))),

        ("PageInfo", "hasNextPage") => get!(|n, p| leaf(p.page.has_next_page)),
        ("PageInfo", "hasPreviousPage") => get!(|n, p| leaf(p.page.has_previous_page)),
        ("PageInfo", "startCursor") => get!(|n, p| leaf(p.page.rows.first().map(|r| cursor::encode(&r.position)))),
        ("PageInfo", "endCursor") => get!(|n, p| leaf(p.page.rows.last().map(|r| cursor::encode(&r.position)))),

        ("Session", field) => session(field),

        ("User", "id") => get!(|n, p| leaf(encode(NodeKind::User, node!(n, User).id))),
        ("User", "email") => get!(|n, p| text(&node!(n, User).email)),
        ("User", "fullName") => get!(|n, p| text(&node!(n, User).full_name)),
        ("User", "role") => get!(|n, p| leaf(Role::from(DomRole::stored(&node!(n, User).role)?))),

        ("Project", "id") => get!(|n, p| leaf(encode(NodeKind::Project, node!(n, Project).id))),
        ("Project", "name") => get!(|n, p| text(&node!(n, Project).name)),

        ("ResourceGroup", "name") => get!(|n, p| text(&node!(n, ResourceGroup).name)),
        ("ResourceGroup", "description") => get!(|n, p| text(&node!(n, ResourceGroup).description)),
        ("ResourceGroup", "strategy") => {
            get!(|n, p| leaf(scheduler_strategy(node!(n, ResourceGroup)).map_err(|e| e.0)?))
        }
        ("ResourceGroup", "pendingTimeoutSeconds") => {
            get!(|n, p| leaf(node!(n, ResourceGroup).pending_timeout_seconds))
        }
        ("ResourceGroup", "allowedSessionTypes") => {
            get!(|n, p| leaf(session_types(&node!(n, ResourceGroup).allowed_session_types)))
        }

        ("Image", "name") => get!(|n, p| text(&image_of(n)?.0.name)),
        ("Image", "supportedTypes") => get!(|n, p| leaf(session_types(&image_of(n)?.0.supported_types))),
        ("Image", "minimumSlots") => get!(|n, p| amounts(minimum_slots(image_of(n)?.0).map_err(|e| e.0)?)),
        ("Image", "apps") => get!(|n, p| leaf(image_apps(image_of(n)?.0))),
        ("Image", "webApps") => get!(|n, p| leaf(web_apps(image_of(n)?.0))),
        ("Image", "reference") => get!(|n, p| leaf(crate::domain::sessions::image_reference(image_of(n)?.0))),
        ("Image", "digest") => get!(|n, p| {
            let (image, ran) = image_of(n)?;
            leaf(crate::domain::sessions::image_digest(image, ran))
        }),

        ("PullProgress", "bytesDone") => get!(|n, p| leaf(big(pull_of(n)?.bytes_done))),
        ("PullProgress", "bytesTotal") => get!(|n, p| leaf(big(pull_of(n)?.bytes_total))),
        ("PullProgress", "layersDone") => get!(|n, p| leaf(int(pull_of(n)?.layers_done))),
        ("PullProgress", "layersTotal") => get!(|n, p| leaf(int(pull_of(n)?.layers_total))),
        ("PullProgress", "percent") => get!(|n, p| leaf(percent(pull_of(n)?))),

        ("LaunchGroup", "id") => get!(|n, p| leaf(encode(NodeKind::LaunchGroup, node!(n, LaunchGroup).id))),
        ("LaunchGroup", "name") => get!(|n, p| text(&node!(n, LaunchGroup).name)),
        ("LaunchGroup", "count") => get!(|n, p| leaf(node!(n, LaunchGroup).count)),
        ("LaunchGroup", "createdAt") => get!(|n, p| leaf(node!(n, LaunchGroup).created_at)),

        ("SessionExpiry", "at") => get!(|n, p| leaf(expiry_of(n)?.1.at)),
        ("SessionExpiry", "reason") => get!(|n, p| leaf(ExpiryReason::from(expiry_of(n)?.1.reason))),
        ("SessionExpiry", "extensions") => get!(|n, p| leaf(expiry_of(n)?.0.session.extensions)),
        ("SessionExpiry", "extendedSeconds") => get!(|n, p| leaf(expiry_of(n)?.0.session.extended_seconds)),
        ("SessionExpiry", "extendable") => get!(|n, p| {
            let s = &expiry_of(n)?.0.session;
            leaf(p.limits.get(&s.keypair_id).copied().unwrap_or_default().extendable(s)?)
        }),

        ("SessionMount", "path") => get!(|n, p| Ok(Out::Value(Value::String(mount_of(n)?.target())))),
        ("SessionMount", "readOnly") => get!(|n, p| leaf(mount_of(n)?.read_only)),

        ("SlotUse", "slot") => get!(|n, p| Ok(Out::Value(Value::String(slot_use(n)?.slot.clone())))),
        ("SlotUse", "current") => get!(|n, p| leaf(slot_use(n)?.current)),
        ("SlotUse", "average") => get!(|n, p| leaf(slot_use(n)?.average)),
        ("SlotUse", "maximum") => get!(|n, p| leaf(slot_use(n)?.maximum)),

        ("IdleCheck", "check") => get!(|n, p| leaf(idle_check(n)?.check)),
        ("IdleCheck", "slot") => get!(|n, p| leaf(idle_check(n)?.slot.clone())),
        ("IdleCheck", "measured") => get!(|n, p| leaf(idle_check(n)?.measured)),
        ("IdleCheck", "threshold") => get!(|n, p| leaf(idle_check(n)?.threshold)),
        ("IdleCheck", "active") => get!(|n, p| leaf(idle_check(n)?.active)),
        ("IdleCheck", "remainingSeconds") => get!(|n, p| leaf(idle_check(n)?.remaining_seconds)),

        ("ResourceSlots", "cpu") => get!(|n, p| leaf(slots_of(n)?.get(slots::CPU))),
        ("ResourceSlots", "memory") => get!(|n, p| leaf(ResourceSlots::memory_of(slots_of(n)?))),
        ("ResourceSlots", "accelerators") => get!(|n, p| amounts(ResourceSlots::accelerators_of(slots_of(n)?))),
        ("ResourceSlots", "all") => get!(|n, p| amounts(SlotAmount::list(slots_of(n)?))),

        ("PendingReason", "code") => get!(|n, p| leaf(reason(n)?.code)),
        ("PendingReason", "message") => get!(|n, p| Ok(Out::Value(Value::String(reason(n)?.message.clone())))),
        ("PendingReason", "layer") => get!(|n, p| leaf(reason(n)?.layer)),
        ("PendingReason", "slot") => get!(|n, p| leaf(reason(n)?.slot.clone())),
        ("PendingReason", "requested") => get!(|n, p| leaf(reason(n)?.requested)),
        ("PendingReason", "remaining") => get!(|n, p| leaf(reason(n)?.remaining)),

        ("Actor", "kind") => get!(|n, p| {
            let s = &node!(n, Actor).session;
            leaf(if s.status_actor_user_id.is_some() { ActorKind::User } else { ActorKind::System })
        }),
        ("Actor", "rule") => get!(|n, p| Ok(Out::Text(node!(n, Actor).session.status_actor_rule.as_deref()))),
        // The executor reads the whole user (its role too) whichever of its fields are asked.
        ("Actor", "user") => get!(|n, p| {
            let row = node!(n, Actor);
            let Some(id) = row.session.status_actor_user_id else { return Ok(Out::Null) };
            let user = if id == row.owner.id { Some(&row.owner) } else { p.actors.get(&id) };
            Ok(match user {
                Some(u) => {
                    DomRole::stored(&u.role)?;
                    Out::One(Node::User(u))
                }
                // A user since deleted.
                None => Out::Null,
            })
        }),

        ("SessionCounts", "running") => get!(|n, p| leaf(count(counts_of(n)?.running))),
        ("SessionCounts", "finished") => get!(|n, p| leaf(count(counts_of(n)?.finished))),
        ("SessionCounts", "all") => get!(|n, p| leaf(count(counts_of(n)?.all))),
        ("SessionCounts", "byType") => {
            get!(|n, p| Ok(Out::Many(counts_of(n)?.by_type.iter().map(|(t, c)| Node::TypeCount(*t, *c)).collect())))
        }
        ("SessionTypeCount", "type") => get!(|n, p| match n {
            Node::TypeCount(t, _) => leaf(SessionType::from(*t)),
            _ => Err(DomainError::invariant("not a SessionTypeCount")),
        }),
        ("SessionTypeCount", "count") => get!(|n, p| match n {
            Node::TypeCount(_, c) => leaf(count(*c)),
            _ => Err(DomainError::invariant("not a SessionTypeCount")),
        }),

        ("SlotAmount", "slot") => get!(|n, p| match n {
            Node::SlotAmount(slot, _) => Ok(Out::Value(Value::String(slot.clone()))),
            _ => Err(DomainError::invariant("not a SlotAmount")),
        }),
        ("SlotAmount", "amount") => get!(|n, p| match n {
            Node::SlotAmount(_, amount) => leaf(*amount),
            _ => Err(DomainError::invariant("not a SlotAmount")),
        }),
        _ => None,
    }
}

/// A session's fields: the plain ones as their resolvers read them (one declaration,
/// [`session_plain_fields`]), then its relations.
fn session(field: &str) -> Option<Get> {
    if let Some(get) = plain(field) {
        return Some(get);
    }
    macro_rules! get {
        (|$s:ident, $row:ident, $p:ident| $body:expr) => {{
            #[allow(unused_variables)]
            let g: Get = |n, $p| {
                let $row = node!(n, Session);
                let $s = &$row.session;
                $body
            };
            Some(g)
        }};
    }
    match field {
        // The executor reads the whole owner (its role too) whichever of its fields are asked.
        "owner" => get!(|s, row, p| {
            DomRole::stored(&row.owner.role)?;
            Ok(Out::One(Node::User(&row.owner)))
        }),
        "project" => get!(|s, row, p| Ok(Out::One(Node::Project(p.project)))),
        "resourceGroup" => get!(|s, row, p| {
            let group = p.groups.get(&s.resource_group).ok_or_else(|| missing("resource group"))?;
            Ok(Out::One(Node::ResourceGroup(group)))
        }),
        "image" => get!(|s, row, p| {
            let image = p.images.get(&s.image).ok_or_else(|| missing("image"))?;
            Ok(Out::One(Node::Image(image, s.image_digest.as_deref())))
        }),
        "pull" => {
            get!(|s, row, p| Ok(crate::domain::sessions::pull(s).map_or(Out::Null, |pull| Out::One(Node::Pull(pull)))))
        }
        "pendingReasons" => get!(|s, row, p| {
            let reasons = crate::domain::sessions::pending_reasons(s)?;
            let reasons = reasons.into_iter().map(|r| r.try_into().map(Node::PendingReason));
            Ok(Out::Many(reasons.collect::<DomainResult<_>>()?))
        }),
        "statusChangedBy" => get!(|s, row, p| Ok(Out::One(Node::Actor(row)))),
        "mounts" => get!(|s, row, p| {
            Ok(Out::Many(crate::domain::storage::mounts::of(s)?.into_iter().map(Node::Mount).collect()))
        }),
        "expiry" => get!(|s, row, p| {
            Ok(match expiry::of(s)? {
                Some(e) => Out::One(Node::Expiry(row, e)),
                None => Out::Null,
            })
        }),
        "launchGroup" => get!(|s, row, p| {
            Ok(match s.launch_group_id.and_then(|id| p.launch_groups.get(&id)) {
                Some(group) => Out::One(Node::LaunchGroup(group)),
                None => Out::Null,
            })
        }),
        _ => None,
    }
}

/// The getters of a session's plain fields, from their declaration.
macro_rules! compiled_plain_fields {
    (
        { }
        $( $(#[$doc:meta])* $gql:literal $name:ident : $ty:ty = |$s:ident, $now:ident| $body:expr; )*
    ) => {
        fn plain(field: &str) -> Option<Get> {
            match field {
                $( $gql => {
                    let g: Get = |n, p| ToOut::out(plain::$name(&node!(n, Session).session, p.now));
                    Some(g)
                } )*
                _ => None,
            }
        }
    };
}
session_plain_fields!(compiled_plain_fields {});

/// A resolver's value as the compiled list writes it.
trait ToOut<'a> {
    fn out(self) -> DomainResult<Out<'a>>;
}

impl<'a> ToOut<'a> for &'a str {
    fn out(self) -> DomainResult<Out<'a>> {
        Ok(Out::Text(Some(self)))
    }
}

impl<'a> ToOut<'a> for Option<&'a str> {
    fn out(self) -> DomainResult<Out<'a>> {
        Ok(Out::Text(self))
    }
}

impl<'a, T: ToOut<'a>> ToOut<'a> for ApiResult<T> {
    fn out(self) -> DomainResult<Out<'a>> {
        self.map_err(|e| e.0)?.out()
    }
}

impl<'a> ToOut<'a> for Vec<SlotUse> {
    fn out(self) -> DomainResult<Out<'a>> {
        Ok(Out::Many(self.into_iter().map(Node::SlotUse).collect()))
    }
}

impl<'a> ToOut<'a> for Vec<IdleCheck> {
    fn out(self) -> DomainResult<Out<'a>> {
        Ok(Out::Many(self.into_iter().map(Node::IdleCheck).collect()))
    }
}

impl<'a> ToOut<'a> for ResourceSlots {
    fn out(self) -> DomainResult<Out<'a>> {
        Ok(Out::One(Node::Slots(self.0)))
    }
}

/// Leaves, converted as the executor converts them.
macro_rules! leaves {
    ($($t:ty),*) => {$(
        impl<'a> ToOut<'a> for $t {
            fn out(self) -> DomainResult<Out<'a>> {
                leaf(self)
            }
        }
    )*};
}
leaves!(
    ID,
    bool,
    i32,
    i64,
    Option<i32>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
    SessionType,
    SessionStatus,
    SessionResult
);

#[cfg(test)]
mod tests {
    use super::super::schema::types;
    use super::*;

    /// Fields of the list's objects that the compiled list leaves to the executor, and why.
    const NOT_COMPILED: &[(&str, &str)] = &[
        ("SessionConnection", "totalCount"), // a statement of its own
        ("Session", "environment"),          // not a list column
        ("SessionMount", "folder"),          // visibility, a statement per folder
        ("Session", "statusTransitions"),    // a statement of its own
        ("Session", "launchedFrom"),         // the detail panel's
        ("Session", "dependsOn"),            // the detail panel's: a statement of its own
        ("Session", "dependents"),           // the detail panel's: a statement of its own
        ("Session", "callbacks"),            // the detail panel's: statements of its own
        ("Session", "schedulingHistory"),    // arguments, a statement per session
        ("Session", "apps"),                 // the runtime's terminal
        ("Project", "sessionScopes"),        // the viewer's membership
        ("Session", "logs"),                 // arguments, a statement per session
        ("Session", "utilizationHistory"),   // arguments, a statement per session
        ("LaunchGroup", "sessions"),         // arguments, a list of its own
    ];

    /// Every field of every object a session list reaches is compiled or left to the
    /// executor on purpose: a field added to the schema fails here until it is one or the
    /// other.
    #[test]
    fn every_field_of_the_list_is_compiled_or_left_on_purpose() {
        let types = types();
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec!["SessionConnection".to_owned(), "SessionCounts".to_owned()];
        while let Some(object) = todo.pop() {
            if !seen.insert(object.clone()) {
                continue;
            }
            let fields = types.fields(&object);
            assert!(!fields.is_empty(), "{object} is an object of the schema");
            for (name, ty) in fields {
                if NOT_COMPILED.contains(&(object.as_str(), name)) {
                    continue;
                }
                assert!(getter(&object, name).is_some(), "{object}.{name} is neither compiled nor left on purpose");
                if types.is_object(&ty.named) {
                    todo.push(ty.named.clone());
                }
            }
        }
        for (object, name) in NOT_COMPILED {
            assert!(types.field(object, name).is_some(), "{object}.{name} is no field");
            assert!(getter(object, name).is_none(), "{object}.{name} is compiled after all");
        }
        assert!(seen.contains("ResourceGroup") && seen.contains("Image") && seen.contains("SlotAmount"));
    }
}

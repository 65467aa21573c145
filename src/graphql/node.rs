//! `node(id)` and `nodes(ids)`: any object by its global id, if the viewer may see it (else
//! null, exactly as for an id that names nothing). Every type with an `id` is a `Node`.

use async_graphql::{Context, ID, Interface, Object};
use sea_orm::DatabaseConnection;

use crate::domain::directory::auth::Viewer;

use crate::domain::model::ids::{MAX_LOOKUP, bounded_lookup};
use crate::domain::storage::folders;
use crate::domain::{
    DomainError, DomainResult, launch::templates, lifecycle::history, sessions::settings, sessions::visibility,
};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::folders::Folder;
use super::ids::{NodeKind, decode, decode_uuid, encode};
use super::limits::STATEMENT_COST;
use super::people::{Project, User};
use super::scheduling::SchedulingHistoryEntry;
use super::session::{LaunchGroup, Session};
use super::templates::SessionTemplate;
use super::viewer::UserSettings;

/// An object with a global id: `node(id:)` and `nodes(ids:)` find it again by that id.
// Variants are built once per lookup; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Interface)]
#[graphql(field(name = "id", ty = "ID", desc = "The object's global id: opaque, the same on every read."))]
pub enum Node {
    User(User),
    Project(Project),
    Session(Session),
    LaunchGroup(LaunchGroup),
    SchedulingHistoryEntry(SchedulingHistoryEntry),
    SessionTemplate(SessionTemplate),
    Folder(Folder),
    UserSettings(UserSettings),
}

/// What one lookup may cost: the record and what decides its visibility (a history entry's
/// session and its passes; a folder's project, membership and grant) are up to four
/// statements.
const LOOKUP_COST: usize = 4 * STATEMENT_COST;

#[derive(Default)]
pub struct NodeQuery;

#[Object]
impl NodeQuery {
    /// The object with this global id, or null when it does not exist or is not visible.
    #[graphql(complexity = "LOOKUP_COST + child_complexity")]
    async fn node(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A global id, as any `id` field gives it.")] id: ID,
    ) -> ApiResult<Option<Node>> {
        Ok(found(find(db(ctx)?, viewer(ctx)?, &id).await)?)
    }

    /// The objects with these global ids, in the order asked, each null when it does not
    /// exist or is not visible. At most 100 ids (`TOO_MANY` past that).
    #[graphql(complexity = "ids.len().min(MAX_LOOKUP + 1) * (LOOKUP_COST + child_complexity)")]
    async fn nodes(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global ids, as `id` fields give them; at most 100.")] ids: Vec<ID>,
    ) -> ApiResult<Vec<Option<Node>>> {
        bounded_lookup(ids.len())?;
        let (db, viewer) = (db(ctx)?, viewer(ctx)?);
        let mut nodes = Vec::with_capacity(ids.len());
        for id in &ids {
            nodes.push(found(find(db, viewer, id).await)?);
        }
        Ok(nodes)
    }
}

/// A lookup's answer: not found (or not visible) is null, anything else an error.
fn found(lookup: DomainResult<Node>) -> DomainResult<Option<Node>> {
    match lookup {
        Ok(node) => Ok(Some(node)),
        Err(DomainError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The object global id `id` names, if the viewer may see it.
async fn find(db: &DatabaseConnection, viewer: &Viewer, id: &ID) -> DomainResult<Node> {
    let Some((kind, key)) = decode(id) else { return Err(DomainError::NotFound("node")) };
    if kind == NodeKind::SchedulingHistoryEntry {
        // Entries are numbered; one spelling of each resolves, as for the others.
        let number = key.parse::<i64>().ok().filter(|n| encode(kind, n).0 == id.0);
        let Some(n) = number else { return Err(DomainError::NotFound("node")) };
        return Ok(Node::SchedulingHistoryEntry(SchedulingHistoryEntry(history::visible_entry(db, viewer, n).await?)));
    }
    let Some(uuid) = decode_uuid(id, kind) else { return Err(DomainError::NotFound("node")) };
    Ok(match kind {
        NodeKind::Project => Node::Project(Project(visibility::visible_project(db, viewer, uuid).await?)),
        NodeKind::User => Node::User(User::try_from(visibility::visible_user(db, viewer, uuid).await?)?),
        NodeKind::Session => Node::Session(Session::new(visibility::visible_session(db, viewer, uuid).await?)),
        NodeKind::LaunchGroup => {
            Node::LaunchGroup(LaunchGroup(visibility::visible_launch_group(db, viewer, uuid).await?))
        }
        NodeKind::SessionTemplate => {
            Node::SessionTemplate(SessionTemplate(templates::visible(db, viewer, uuid).await?))
        }
        NodeKind::Folder => Node::Folder(Folder(folders::visible(db, viewer, uuid).await?)),
        // Settings are their owner's alone: another user's look like none.
        NodeKind::UserSettings if uuid == viewer.user_id => {
            Node::UserSettings(UserSettings(uuid, settings::user_settings(db, uuid).await?))
        }
        NodeKind::UserSettings | NodeKind::SchedulingHistoryEntry => return Err(DomainError::NotFound("node")),
    })
}

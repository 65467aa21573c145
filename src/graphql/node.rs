//! `node(id)`: any object by its global id, if the viewer may see it (else null, exactly
//! as for an id that names nothing).

use async_graphql::{Context, ID, Interface, Object};

use crate::domain::{DomainError, visibility};

use super::context::{db, viewer};
use super::errors::ApiResult;
use super::ids::{NodeKind, decode_uuid};
use super::limits::STATEMENT_COST;
use super::people::{Project, User};
use super::session::{LaunchGroup, Session};

// Variants are built once per lookup; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Interface)]
#[graphql(field(name = "id", ty = "ID"))]
pub enum Node {
    User(User),
    Project(Project),
    Session(Session),
    LaunchGroup(LaunchGroup),
}

#[derive(Default)]
pub struct NodeQuery;

#[Object]
impl NodeQuery {
    /// The object with this global id, or null when it does not exist or is not visible.
    #[graphql(complexity = "STATEMENT_COST + child_complexity")]
    async fn node(&self, ctx: &Context<'_>, id: ID) -> ApiResult<Option<Node>> {
        let (db, viewer) = (db(ctx)?, viewer(ctx)?);
        let found = if let Some(uuid) = decode_uuid(&id, NodeKind::Project) {
            visibility::visible_project(db, viewer, uuid).await.map(|p| Node::Project(Project(p)))
        } else if let Some(uuid) = decode_uuid(&id, NodeKind::User) {
            match visibility::visible_user(db, viewer, uuid).await {
                Ok(u) => User::try_from(u).map(Node::User),
                Err(e) => Err(e),
            }
        } else if let Some(uuid) = decode_uuid(&id, NodeKind::Session) {
            visibility::visible_session(db, viewer, uuid).await.map(|s| Node::Session(Session::new(s)))
        } else if let Some(uuid) = decode_uuid(&id, NodeKind::LaunchGroup) {
            visibility::visible_launch_group(db, viewer, uuid).await.map(|g| Node::LaunchGroup(LaunchGroup(g)))
        } else {
            Err(DomainError::NotFound("node"))
        };
        match found {
            Ok(node) => Ok(Some(node)),
            Err(DomainError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

//! Relay global ids in the API: the domain's public ids ([`crate::domain::model::ids`]) as
//! GraphQL `ID`s.

use uuid::Uuid;

pub use crate::domain::model::ids::{NodeKind, decode, decode_uuid};

pub fn encode(kind: NodeKind, key: impl std::fmt::Display) -> async_graphql::ID {
    async_graphql::ID(crate::domain::model::ids::encode(kind, key))
}

/// A project id argument: anything that does not name a project is `NOT_FOUND`, exactly
/// like a project the viewer may not see.
pub fn project_uuid(id: &str) -> super::errors::ApiResult<Uuid> {
    decode_uuid(id, NodeKind::Project).ok_or_else(|| crate::domain::DomainError::NotFound("project").into())
}

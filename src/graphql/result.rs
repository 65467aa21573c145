//! What resolvers return: [`ApiResult`], whose error wraps the domain's; and the renaming of
//! a domain error's input fields to this API's paths. It becomes a public GraphQL error in
//! one place, [`super::errors`].

use crate::domain::{DomainError, InputProblem};

pub use crate::domain::error::codes::*;

/// A GraphQL document that does not parse (as Apollo Server names it).
pub const GRAPHQL_PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
/// A GraphQL document that parses but does not fit the schema: an unknown field, a missing
/// argument, a variable not used (as Apollo Server names it). A value of the wrong type is
/// `BAD_USER_INPUT`.
pub const GRAPHQL_VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";
pub use crate::domain::error::{camel, code_of};

#[derive(Clone, Debug)]
pub struct ApiError(pub DomainError);

pub type ApiResult<T> = Result<T, ApiError>;

impl From<DomainError> for ApiError {
    fn from(err: DomainError) -> Self {
        Self(err)
    }
}

impl From<std::sync::Arc<DomainError>> for ApiError {
    /// DataLoader errors are shared between the fields that waited on one batch.
    fn from(err: std::sync::Arc<DomainError>) -> Self {
        Self((*err).clone())
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(err: sea_orm::DbErr) -> Self {
        Self(err.into())
    }
}

/// The same error with each input problem's domain field name replaced by its path in
/// this API, as `path` gives it.
pub fn with_paths(err: DomainError, path: impl Fn(&str) -> String) -> DomainError {
    match err {
        DomainError::BadInput(problems) => DomainError::BadInput(
            problems.into_iter().map(|p| InputProblem { field: p.field.as_deref().map(&path), ..p }).collect(),
        ),
        other => other,
    }
}

//! The one place where domain errors become public GraphQL errors with `extensions.code`.
//!
//! Resolvers return [`ApiResult`] ([`super::result`]). [`ApiError`] deliberately does not
//! implement `Display`: async-graphql converts anything `Display` into an error carrying its
//! text, and this type must only ever be converted here.

use async_graphql::{ErrorExtensions, ServerError};
use serde_json::Value;

use crate::domain::{DomainError, InputProblem};

pub use super::result::*;

impl From<ApiError> for async_graphql::Error {
    fn from(ApiError(err): ApiError) -> Self {
        let code = code_of(&err);
        match &err {
            DomainError::Internal(detail) => {
                // Inside the request's span, so the log line carries the request id.
                tracing::error!(error = %detail, debug = ?detail, "internal error");
                async_graphql::Error::new(INTERNAL_MESSAGE).extend_with(|_, e| e.set("code", code))
            }
            DomainError::Unavailable(detail) => {
                tracing::warn!(error = %detail, "database unavailable");
                async_graphql::Error::new(err.to_string()).extend_with(|_, e| e.set("code", code))
            }
            DomainError::BadInput(problems) => async_graphql::Error::new(err.to_string()).extend_with(|_, e| {
                e.set("code", code);
                if let Some(field) = problems.first().and_then(|p| p.field.clone()) {
                    e.set("field", field);
                }
                e.set("problems", problems_value(problems));
            }),
            DomainError::Lagged(seq) => async_graphql::Error::new(err.to_string()).extend_with(|_, e| {
                e.set("code", code);
                e.set("cursor", super::cursor::sequence(*seq));
            }),
            _ => async_graphql::Error::new(err.to_string()).extend_with(|_, e| e.set("code", code)),
        }
    }
}

/// The problems an answer lists (at most [`crate::domain::error::MAX_PROBLEMS_SHOWN`], then
/// one `MORE_PROBLEMS` entry saying how many were left out).
fn problems_value(problems: &[InputProblem]) -> async_graphql::Value {
    let (shown, more) = crate::domain::error::shown(problems);
    let more = (more > 0).then(|| InputProblem::new("MORE_PROBLEMS", None, format!("{more} more problems not listed")));
    async_graphql::Value::List(
        shown
            .iter()
            .chain(more.as_ref())
            .map(|p| {
                let mut m = async_graphql::indexmap::IndexMap::new();
                m.insert(async_graphql::Name::new("code"), async_graphql::Value::from(p.code.clone()));
                m.insert(
                    async_graphql::Name::new("field"),
                    p.field.clone().map_or(async_graphql::Value::Null, async_graphql::Value::from),
                );
                m.insert(async_graphql::Name::new("message"), async_graphql::Value::from(p.message.clone()));
                async_graphql::Value::Object(m)
            })
            .collect(),
    )
}

/// Gives every error of a response a public code, and masks what is not ours to show.
///
/// Errors our resolvers raise already carry a code. The others come from async-graphql:
/// request errors (syntax, validation, variables; no path) are the client's input, or a
/// limit when the query is too deep or complex (its message then names the budget of
/// `budgets` it went over); an uncoded error raised while resolving is treated as internal
/// and its text withheld. Every transport calls this on every response.
pub fn finalize_errors(errors: &mut [ServerError], request_id: &str, budgets: &crate::config::GraphqlLimits) {
    super::limits::explain(errors, budgets);
    for err in errors.iter_mut() {
        let code = err.extensions.as_ref().and_then(|ext| ext.get("code")).and_then(|v| match v {
            async_graphql::Value::String(s) => Some(s.clone()),
            _ => None,
        });
        let code = match code {
            Some(code) => code,
            None => {
                let code = classify_uncoded(err);
                if code == INTERNAL {
                    tracing::error!(error = %err.message, "uncoded error while resolving");
                }
                err.extensions.get_or_insert_with(Default::default).set("code", code);
                code.to_owned()
            }
        };
        if code == INTERNAL {
            err.message = format!("{INTERNAL_MESSAGE} (request id {request_id})");
            let ext = err.extensions.get_or_insert_with(Default::default);
            ext.unset("problems");
            ext.set("requestId", request_id);
        } else if code == UNAVAILABLE {
            err.extensions.get_or_insert_with(Default::default).set("requestId", request_id);
        }
    }
}

fn classify_uncoded(err: &ServerError) -> &'static str {
    let msg = err.message.as_str();
    let limit = ["nested too deep", "too complex", "recursion depth", "too many"];
    // A value (given literally or as a variable) that its argument's or variable's type
    // does not take: async-graphql's coercion, before or while resolving.
    let value = ["Invalid value for argument", "Failed to parse", "Expected input type"];
    if value.iter().any(|p| msg.starts_with(p)) {
        BAD_USER_INPUT
    } else if err.path.is_empty() {
        // Nothing ran: the request itself was refused, by a budget or as a document that
        // does not fit the schema. Parse errors have their code already.
        if limit.iter().any(|needle| msg.contains(needle)) { LIMIT_EXCEEDED } else { GRAPHQL_VALIDATION_FAILED }
    } else {
        INTERNAL
    }
}

/// A response made of one error, for failures before execution (auth, transport).
pub fn error_body(message: &str, code: &str) -> Value {
    serde_json::json!({"errors": [{"message": message, "extensions": {"code": code}}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_fields_become_api_paths() {
        assert_eq!(camel("startup_command"), "startupCommand");
        assert_eq!(camel("resources[1]"), "resources[1]");
        let err = DomainError::bad_input("TOO_LONG", Some("name_contains".to_owned()), "long");
        let DomainError::BadInput(problems) = with_paths(err, |f| format!("filter.{}", camel(f))) else {
            panic!("still bad input")
        };
        assert_eq!(problems[0].field.as_deref(), Some("filter.nameContains"));
    }

    #[test]
    fn internal_errors_are_masked() {
        let db_err = sea_orm::DbErr::Custom("UNIQUE constraint failed: sessions.owner_id, sessions.name".into());
        let gql: async_graphql::Error = ApiError::from(db_err).into();
        assert_eq!(gql.message, INTERNAL_MESSAGE);
        let mut server = vec![gql.into_server_error(Default::default())];
        finalize_errors(&mut server, "req-1", &Default::default());
        assert!(!server[0].message.contains("constraint"));
        assert!(server[0].message.contains("req-1"));
    }

    #[test]
    fn bad_input_names_the_field() {
        let err = DomainError::bad_input("INVALID_NAME", Some("input.name".to_owned()), "name too short");
        let gql: async_graphql::Error = ApiError::from(err).into();
        let ext = gql.extensions.as_ref().map(|e| (e.get("code").cloned(), e.get("field").cloned()));
        assert_eq!(
            ext,
            Some((Some(async_graphql::Value::from("BAD_USER_INPUT")), Some(async_graphql::Value::from("input.name"))))
        );
    }

    #[test]
    fn uncoded_errors_are_classified() {
        let mut errs = vec![
            ServerError::new("Query is nested too deep.", None),
            ServerError::new("Unknown field \"x\" on type \"Query\".", None),
            ServerError::new("Invalid value for argument \"first\", expected type \"Int\"", None),
        ];
        let mut resolving = ServerError::new("something broke: relation \"sessions\" does not exist", None);
        resolving.path = vec![async_graphql::PathSegment::Field("viewer".into())];
        errs.push(resolving);
        finalize_errors(&mut errs, "r", &Default::default());
        let codes: Vec<_> = errs.iter().map(|e| e.extensions.as_ref().and_then(|x| x.get("code")).cloned()).collect();
        assert_eq!(
            codes,
            [LIMIT_EXCEEDED, GRAPHQL_VALIDATION_FAILED, BAD_USER_INPUT, INTERNAL]
                .map(|c| Some(async_graphql::Value::from(c)))
                .to_vec()
        );
        assert!(!errs[3].message.contains("relation"));
    }
}

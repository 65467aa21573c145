//! GraphQL over HTTP. Our own handler around async-graphql's executor, because the stock
//! one runs mutations on GET, executes any POST body as JSON whatever its content type
//! (a cross-site form post would run), and ignores `Accept`.
//!
//! - POST needs `Content-Type: application/json`; GET runs queries only (405 otherwise).
//! - The answer is `application/graphql-response+json` when the client accepts it (with
//!   4xx statuses for requests that could not run), else `application/json` with 200.
//! - Every request is authenticated before anything executes.
//! - Batches (a JSON array) are refused.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::domain::DomainError;
use crate::graphql::compiled::{self, Plan, Plans};
use crate::graphql::errors::{
    BAD_USER_INPUT, INTERNAL, INTERNAL_MESSAGE, UNAUTHENTICATED, UNAVAILABLE, code_of, error_body, finalize_errors,
};
use crate::graphql::{limits, prepare_request};

use super::{AppState, REQUEST_ID};

const GRAPHQL_RESPONSE_JSON: &str = "application/graphql-response+json";
const JSON: &str = "application/json";

/// The media type the client will get.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// `application/graphql-response+json`: statuses say whether the request ran.
    GraphqlResponse,
    /// `application/json`: always 200 once the request is understood.
    Json,
}

impl Flavor {
    fn content_type(self) -> &'static str {
        match self {
            Flavor::GraphqlResponse => "application/graphql-response+json; charset=utf-8",
            Flavor::Json => "application/json; charset=utf-8",
        }
    }

    /// The status of a request that failed before execution (`status` is what
    /// `application/graphql-response+json` calls for).
    fn request_error_status(self, status: StatusCode) -> StatusCode {
        match self {
            Flavor::GraphqlResponse => status,
            Flavor::Json => StatusCode::OK,
        }
    }
}

/// Picks the response type from `Accept`; `None` when we offer nothing acceptable.
fn negotiate(headers: &HeaderMap) -> Option<Flavor> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(Flavor::Json);
    };
    let mut best: Option<(f32, Flavor)> = None;
    for part in accept.split(',') {
        let mut params = part.split(';');
        let media = params.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = params
            .filter_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()))
            .next()
            .unwrap_or(1.0);
        let flavor = match media.as_str() {
            GRAPHQL_RESPONSE_JSON => Flavor::GraphqlResponse,
            JSON | "application/*" | "*/*" => Flavor::Json,
            _ => continue,
        };
        if q <= 0.0 {
            continue;
        }
        // The more specific type wins a tie.
        let better = match best {
            None => true,
            Some((bq, bf)) => q > bq || (q == bq && flavor == Flavor::GraphqlResponse && bf == Flavor::Json),
        };
        if better {
            best = Some((q, flavor));
        }
    }
    best.map(|(_, f)| f)
}

fn request_id(headers: &HeaderMap) -> String {
    headers.get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-").to_owned()
}

fn json_response(flavor: Flavor, status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_else(|_| br#"{"errors":[{"message":"internal error"}]}"#.to_vec());
    bytes_response(flavor, status, bytes)
}

fn bytes_response(flavor: Flavor, status: StatusCode, bytes: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static(flavor.content_type()))], bytes).into_response()
}

/// A request refused before anything ran, with its code (which the request metrics count
/// as its outcome, whatever the status: a JSON client's refusals are 200).
fn request_error(flavor: Flavor, status: StatusCode, message: &str, code: &str) -> Response {
    let mut response = json_response(flavor, flavor.request_error_status(status), &error_body(message, code));
    response.extensions_mut().insert(super::Outcome { operation: "unknown", code: code.to_owned() });
    response
}

fn not_acceptable() -> Response {
    let message = "acceptable response types: application/graphql-response+json, application/json";
    json_response(Flavor::Json, StatusCode::NOT_ACCEPTABLE, &error_body(message, BAD_USER_INPUT))
}

pub async fn post(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(flavor) = negotiate(&headers) else {
        return not_acceptable();
    };
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let is_json = content_type
        .parse::<mime::Mime>()
        .map(|m| m.essence_str() == JSON || m.essence_str() == GRAPHQL_RESPONSE_JSON)
        .unwrap_or(false);
    if !is_json {
        return request_error(
            flavor,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the request as `Content-Type: application/json`",
            BAD_USER_INPUT,
        )
        .into_response_with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    // A body that is not a GraphQL request is a bad HTTP request whatever the media type
    // (GraphQL over HTTP: 400 even for `application/json`, whose 200 is for GraphQL errors).
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return request_error(flavor, StatusCode::BAD_REQUEST, "batched requests are not supported", BAD_USER_INPUT)
            .into_response_with_status(StatusCode::BAD_REQUEST);
    }
    let request: async_graphql::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return request_error(
                flavor,
                StatusCode::BAD_REQUEST,
                &format!("the body is not a GraphQL request: {e}"),
                BAD_USER_INPUT,
            )
            .into_response_with_status(StatusCode::BAD_REQUEST);
        }
    };
    let request = match state.persisted.resolve(request) {
        Ok(r) => r,
        Err(refused) => return not_persisted(flavor, refused),
    };
    execute(state, flavor, &headers, request).await
}

/// The answer to a request the persisted-query protocol refuses ([`super::persisted`]).
fn not_persisted(flavor: Flavor, refused: super::persisted::Refused) -> Response {
    if refused.bad_request {
        return request_error(flavor, StatusCode::BAD_REQUEST, refused.message, refused.code)
            .into_response_with_status(StatusCode::BAD_REQUEST);
    }
    // A GraphQL error the client reads to send the document: 200, as Apollo's servers.
    let mut answer = json_response(flavor, StatusCode::OK, &error_body(refused.message, refused.code));
    answer.extensions_mut().insert(super::Outcome { operation: "unknown", code: refused.code.to_owned() });
    answer
}

pub async fn get(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    let Some(flavor) = negotiate(&headers) else {
        return not_acceptable();
    };
    let request = match request_of_query_string(uri.query().unwrap_or("")) {
        Ok(r) => r,
        Err(e) => {
            return request_error(flavor, StatusCode::BAD_REQUEST, &format!("bad query string: {e}"), BAD_USER_INPUT)
                .into_response_with_status(StatusCode::BAD_REQUEST);
        }
    };
    let request = match state.persisted.resolve(request) {
        Ok(r) => r,
        Err(refused) => return not_persisted(flavor, refused),
    };
    if is_mutation(&request) {
        let mut resp = request_error(
            flavor,
            StatusCode::METHOD_NOT_ALLOWED,
            "mutations need POST; GET runs queries only",
            BAD_USER_INPUT,
        )
        .into_response_with_status(StatusCode::METHOD_NOT_ALLOWED);
        resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    execute(state, flavor, &headers, request).await
}

/// A GET request's parameters as GraphQL over HTTP names them: `query`, `operationName`,
/// and `variables` and `extensions` as JSON text. Other parameters are ignored.
fn request_of_query_string(input: &str) -> Result<async_graphql::Request, String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(input).map_err(|e| e.to_string())?;
    let mut object = serde_json::Map::new();
    for (name, value) in pairs {
        let value = match name.as_str() {
            "query" | "operationName" => serde_json::Value::String(value),
            "variables" | "extensions" => {
                serde_json::from_str(&value).map_err(|e| format!("`{name}` is not JSON: {e}"))?
            }
            _ => continue,
        };
        if object.insert(name.clone(), value).is_some() {
            return Err(format!("`{name}` is given twice"));
        }
    }
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| e.to_string())
}

/// Whether the operation the request would run is a mutation (or subscription). An
/// unparsable document is left to the executor, which reports the syntax error.
fn is_mutation(request: &async_graphql::Request) -> bool {
    use async_graphql::parser::types::OperationType;
    let Ok(document) = async_graphql::parser::parse_query(&request.query) else { return false };
    matches!(
        limits::selected(&document, request.operation_name.as_deref()).map(|op| op.ty),
        Some(OperationType::Mutation | OperationType::Subscription)
    )
}

/// Runs `request` as the viewer its headers name. Its answer is the viewer's own (their
/// sessions, their keys): no cache, shared or private, keeps it.
async fn execute(state: AppState, flavor: Flavor, headers: &HeaderMap, request: async_graphql::Request) -> Response {
    let mut answer = answered(state, flavor, headers, request).await;
    answer.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

async fn answered(state: AppState, flavor: Flavor, headers: &HeaderMap, request: async_graphql::Request) -> Response {
    if request.query.trim().is_empty() {
        // No document at all (a missing or misspelled `query` parameter): a bad HTTP request
        // for every media type, like a body that is not JSON.
        return request_error(flavor, StatusCode::BAD_REQUEST, "the request has no `query`", BAD_USER_INPUT)
            .into_response_with_status(StatusCode::BAD_REQUEST);
    }
    let rid = request_id(headers);
    let viewer = super::header_viewer(&state.db, headers).await.and_then(|v| v.ok_or(DomainError::Unauthenticated));
    let viewer = match viewer {
        Ok(v) => v,
        Err(err @ DomainError::Unauthenticated) => {
            return request_error(flavor, StatusCode::UNAUTHORIZED, &err.to_string(), code_of(&err));
        }
        Err(err @ DomainError::Unavailable(_)) => {
            tracing::warn!(error = ?err, "authentication: database unavailable");
            return super::unavailable(&err.to_string(), Some(&rid));
        }
        Err(err) => {
            tracing::error!(error = ?err, "authentication failed");
            return request_error(
                flavor,
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{INTERNAL_MESSAGE} (request id {rid})"),
                INTERNAL,
            );
        }
    };
    let known = state.plans.get(&request.query, request.operation_name.as_deref());
    if let Some(plan) = &known {
        let answer = compiled::answer(
            plan,
            &state.db,
            state.inline.as_ref(),
            &state.live.credentials,
            &viewer,
            &request.variables,
        )
        .await;
        state.metrics.compiled(answer.is_some());
        if let Some(body) = answer {
            let mut answer = bytes_response(flavor, StatusCode::OK, body);
            answer.extensions_mut().insert(super::Outcome { operation: "query", code: "OK".to_owned() });
            return answer;
        }
    }
    // A list that compiles is kept once the executor answered it without an error.
    let mut unseen = None;
    let (operation, mut response) = match limits::admit(request, &state.limits.graphql, &state.documents) {
        Ok(mut admitted) => {
            let operation = match admitted.operation.as_ref().map(|o| o.ty) {
                Some(async_graphql::parser::types::OperationType::Query) => "query",
                Some(async_graphql::parser::types::OperationType::Mutation) => "mutation",
                Some(async_graphql::parser::types::OperationType::Subscription) => "subscription",
                None => "unknown",
            };
            if known.is_none() && Plans::keeps(&admitted.request.query) {
                let request = &mut admitted.request;
                let limits = &state.limits.graphql;
                let budget = compiled::Budget {
                    max_cost: limits.max_query_cost,
                    counts_allowed: limits.max_aggregates >= 1 && limits.max_aggregate_rows >= 1,
                };
                let name = request.operation_name.clone();
                let plan = request.parsed_query().ok().and_then(|doc| Plan::of(doc, name.as_deref(), budget));
                unseen = plan.map(|plan| (request.query.clone(), name, plan));
            }
            (operation, {
                let request = prepare_request(admitted.request, &state.db, viewer, &state.limits.graphql);
                let mut response = state.schema.execute(request).await;
                if let Some(op) = &admitted.operation {
                    crate::graphql::roots::settle(&mut response.data, op, &response.errors);
                }
                response
            })
        }
        Err(refused) => ("unknown", async_graphql::Response::from_errors(vec![refused])),
    };
    if let Some((query, name, plan)) = unseen.filter(|_| response.errors.is_empty()) {
        state.plans.remember(&query, name.as_deref(), plan);
    }
    finalize_errors(&mut response.errors, &rid, &state.limits.graphql);
    let outcome = response
        .errors
        .first()
        .and_then(|e| e.extensions.as_ref()?.get("code"))
        .and_then(|v| match v {
            async_graphql::Value::String(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "OK".to_owned());
    // A request error (syntax, validation, limits) means nothing ran: no `data` entry.
    let ran = response.data != async_graphql::Value::Null || response.errors.iter().any(|e| !e.path.is_empty());
    let status = match (flavor, ran) {
        (Flavor::GraphqlResponse, false) if response.errors.iter().any(|e| code_is(e, UNAUTHENTICATED)) => {
            StatusCode::UNAUTHORIZED
        }
        (Flavor::GraphqlResponse, false) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    };
    // The database out of reach is the server's condition, not the request's: 503 with a
    // time to retry after, whatever the media type.
    let unavailable = outcome == UNAVAILABLE;
    let status = if unavailable { StatusCode::SERVICE_UNAVAILABLE } else { status };
    let body = Body { data: ran.then_some(&response.data), errors: &response.errors };
    match serde_json::to_vec(&body) {
        Ok(bytes) => {
            let mut answer = bytes_response(flavor, status, bytes);
            if unavailable {
                answer.headers_mut().insert(header::RETRY_AFTER, super::RETRY_AFTER_SECONDS.into());
            }
            answer.extensions_mut().insert(super::Outcome { operation, code: outcome });
            answer
        }
        Err(e) => {
            tracing::error!(error = %e, "could not serialize a response");
            request_error(flavor, StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_MESSAGE, INTERNAL)
        }
    }
}

/// The response body, fields in the order the query asked for them.
#[derive(serde::Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a async_graphql::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    errors: &'a [async_graphql::ServerError],
}

fn code_is(err: &async_graphql::ServerError, code: &str) -> bool {
    matches!(err.extensions.as_ref().and_then(|e| e.get("code")), Some(async_graphql::Value::String(c)) if c == code)
}

trait WithStatus {
    fn into_response_with_status(self, status: StatusCode) -> Response;
}

impl WithStatus for Response {
    /// Transport errors (415, 405) keep their status whatever the response type.
    fn into_response_with_status(mut self, status: StatusCode) -> Response {
        *self.status_mut() = status;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> Option<Flavor> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).expect("header"));
        negotiate(&h)
    }

    #[test]
    fn accept_negotiation() {
        assert!(accept("application/graphql-response+json") == Some(Flavor::GraphqlResponse));
        assert!(accept("application/json, application/graphql-response+json") == Some(Flavor::GraphqlResponse));
        assert!(accept("application/graphql-response+json;q=0.5, application/json") == Some(Flavor::Json));
        assert!(accept("*/*") == Some(Flavor::Json));
        assert!(accept("text/html").is_none());
        assert!(negotiate(&HeaderMap::new()) == Some(Flavor::Json));
    }

    #[test]
    fn mutations_are_detected() {
        let q = |s: &str| async_graphql::Request::new(s);
        assert!(is_mutation(&q("mutation { x }")));
        assert!(!is_mutation(&q("{ viewer { user { email } } }")));
        assert!(is_mutation(&q("query A { a } mutation B { b }").operation_name("B")));
        assert!(!is_mutation(&q("query A { a } mutation B { b }").operation_name("A")));
    }
}

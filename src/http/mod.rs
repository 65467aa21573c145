//! The HTTP surface: one router, so tests drive exactly what the server serves.

pub mod export;
pub mod graphiql;
pub mod graphql;
pub mod health;
pub mod ws;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, StatusCode};
use axum::routing::get;
use sea_orm::DatabaseConnection;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::config::{DEFAULT_MAX_LAUNCH_COUNT, HttpLimits};
use crate::domain::events::EventBus;
use crate::domain::launch::LaunchLimits;
use crate::graphql::{AppSchema, build_schema};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The viewer of a request's `Authorization: Bearer` header: `None` without one,
/// `Unauthenticated` for a token that is not valid.
pub async fn header_viewer(
    db: &DatabaseConnection,
    headers: &axum::http::HeaderMap,
) -> crate::domain::DomainResult<Option<crate::domain::auth::Viewer>> {
    let token = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token);
    match token {
        Some(token) => Ok(Some(crate::domain::auth::authenticate(db, token).await?)),
        None => Ok(None),
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub db: DatabaseConnection,
    pub schema: AppSchema,
    pub bus: EventBus,
    pub limits: Arc<HttpLimits>,
    /// One permit per open WebSocket connection.
    pub ws_connections: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    /// A state with its own event bus and the default launch limits.
    pub async fn start(db: DatabaseConnection, limits: HttpLimits) -> crate::domain::DomainResult<Self> {
        let bus = EventBus::start(db.clone(), limits.ws.subscription_buffer).await?;
        Ok(Self::with(db, bus, limits, LaunchLimits { max_count: DEFAULT_MAX_LAUNCH_COUNT }))
    }

    pub fn with(db: DatabaseConnection, bus: EventBus, limits: HttpLimits, launch: LaunchLimits) -> Self {
        let ws_connections = Arc::new(tokio::sync::Semaphore::new(limits.ws.max_ws_connections));
        Self {
            schema: build_schema(db.clone(), bus.clone(), launch),
            db,
            bus,
            limits: Arc::new(limits),
            ws_connections,
        }
    }
}

/// The whole HTTP application.
pub fn app(state: AppState) -> Router {
    let graphql_routes = Router::new()
        .route("/graphql", get(graphql::get).post(graphql::post))
        .layer(RequestBodyLimitLayer::new(state.limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(state.limits.request_timeout_ms),
        ))
        .layer(axum::middleware::map_response_with_state(state.clone(), coded_refusals));
    Router::new()
        .merge(graphql_routes)
        .route("/graphql/ws", get(ws::upgrade))
        .route("/export/sessions.csv", get(export::sessions_csv))
        .route("/graphiql", get(graphiql::page))
        .route("/graphiql/{asset}", get(graphiql::asset))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .with_state(state)
        .layer(TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
            let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}

/// The refusals the body-size and timeout layers make carry the JSON error body every other
/// refusal has, with `LIMIT_EXCEEDED` and the limit named.
async fn coded_refusals(
    axum::extract::State(state): axum::extract::State<AppState>,
    response: axum::response::Response,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let message = match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!("the request body is over the limit of {} bytes", state.limits.max_body_bytes)
        }
        StatusCode::REQUEST_TIMEOUT => {
            format!("the request took longer than the limit of {} ms", state.limits.request_timeout_ms)
        }
        _ => return response,
    };
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if json {
        return response;
    }
    let body = crate::graphql::errors::error_body(&message, crate::graphql::errors::LIMIT_EXCEEDED);
    (response.status(), axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_values() {
        assert_eq!(bearer_token("Bearer demo-alice"), Some("demo-alice"));
        assert_eq!(bearer_token("bearer  demo-alice "), Some("demo-alice"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("demo-alice"), None);
    }
}

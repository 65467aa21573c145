//! The HTTP surface: one router, so tests drive exactly what the server serves.

pub mod apps;
pub mod export;
pub mod files;
pub mod graphiql;
pub mod graphql;
pub mod health;
pub mod metrics;
pub mod origins;
pub mod persisted;
pub mod serve;
pub mod terminal;
pub mod waiting;
pub mod web;
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
use crate::domain::launch::LaunchLimits;
use crate::domain::live::Live;
use crate::domain::store::inline::InlineReads;
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
) -> crate::domain::DomainResult<Option<crate::domain::directory::auth::Viewer>> {
    let token = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token);
    match token {
        Some(token) => Ok(Some(crate::domain::directory::auth::authenticate(db, token).await?)),
        None => Ok(None),
    }
}

/// What every handler shares: one allocation, so that handing it to a request (axum clones
/// the state for each) is one reference count, not a copy of every handle.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The handles of [`AppState`].
pub struct Shared {
    pub db: DatabaseConnection,
    pub schema: AppSchema,
    /// The live feeds: events, replays, logs, credentials, each user's shares.
    pub live: Live,
    pub limits: Arc<HttpLimits>,
    /// One permit per authenticated WebSocket connection (GraphQL and terminals).
    pub ws_connections: Arc<tokio::sync::Semaphore>,
    /// The WebSocket connections that have not authenticated yet.
    pub ws_waiting: Arc<waiting::Waiting>,
    /// One permit per request being answered (`--max-in-flight`): HTTP requests and the
    /// queries and mutations sent over WebSockets.
    pub in_flight: Arc<tokio::sync::Semaphore>,
    pub metrics: metrics::Metrics,
    /// What runs sessions here (the terminals of the local runtime's sessions).
    pub runtime: crate::domain::runtime::RuntimeInfo,
    /// The session lists seen, compiled.
    pub plans: Arc<crate::graphql::compiled::Plans>,
    /// The documents seen, read and within the budgets.
    pub documents: crate::graphql::limits::Documents,
    /// Automatic persisted queries: documents by their SHA-256.
    pub persisted: persisted::Persisted,
    /// Reads on the request's thread, on a SQLite file.
    pub inline: Option<InlineReads>,
    /// The requests to sessions' apps admitted moments ago.
    pub admissions: crate::domain::apps::grants::Admissions,
    /// The connections to sessions' apps, kept alive.
    pub upstreams: apps::Upstreams,
}

impl AppState {
    /// A state with live feeds of its own (on `db`) and the default launch limits.
    pub async fn start(db: DatabaseConnection, limits: HttpLimits) -> crate::domain::DomainResult<Self> {
        let live = Live::start(crate::domain::live::LiveConnections::shared(&db), limits.live_options()).await?;
        Ok(Self::with(db, live, limits, LaunchLimits::of(DEFAULT_MAX_LAUNCH_COUNT)))
    }

    pub fn with(db: DatabaseConnection, live: Live, limits: HttpLimits, launch: LaunchLimits) -> Self {
        let runtime = crate::domain::runtime::RuntimeInfo::simulated("no runtime chosen");
        Self::with_metrics(db, live, limits, launch, metrics::Metrics::default(), runtime)
    }

    pub fn with_metrics(
        db: DatabaseConnection,
        live: Live,
        limits: HttpLimits,
        launch: LaunchLimits,
        metrics: metrics::Metrics,
        runtime: crate::domain::runtime::RuntimeInfo,
    ) -> Self {
        let ws_connections = Arc::new(tokio::sync::Semaphore::new(limits.ws.max_ws_connections));
        let ws_waiting = Arc::new(waiting::Waiting::new(limits.shares.max_ws_unauthenticated));
        let in_flight = Arc::new(tokio::sync::Semaphore::new(limits.max_in_flight));
        let inline = InlineReads::of(&db);
        Self(Arc::new(Shared {
            schema: build_schema(db.clone(), inline.clone(), live.clone(), launch, &limits.graphql, runtime.clone()),
            db,
            live,
            limits: Arc::new(limits),
            ws_connections,
            ws_waiting,
            in_flight,
            metrics,
            runtime,
            plans: Arc::default(),
            documents: Default::default(),
            persisted: Default::default(),
            inline,
            admissions: Default::default(),
            upstreams: Default::default(),
        }))
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
        ));
    // Every route that does work for a caller counts against the in-flight cap; one over it
    // is answered 503 at once. Health checks and metrics stay answerable under any load.
    // (A WebSocket's upgrade holds it only until upgraded; each query or mutation it then
    // runs takes it again.)
    let in_flight = state.in_flight.clone();
    let shed_state = state.clone();
    let work = Router::new()
        .merge(graphql_routes)
        .route("/graphql/ws", get(ws::upgrade))
        .route("/sessions/{id}/terminal", get(terminal::upgrade))
        .route("/export/sessions.csv", get(export::sessions_csv))
        .route("/folders/{id}/files", get(files::get_top))
        .route("/folders/{id}/files/", get(files::get_top))
        .route(
            "/folders/{id}/files/{*path}",
            get(files::get_path).put(files::put).delete(files::delete).post(files::post),
        )
        .route("/graphiql", get(graphiql::page))
        .route("/graphiql/{asset}", get(graphiql::asset))
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::middleware::from_fn_with_state(state.clone(), record))
                .layer(axum::error_handling::HandleErrorLayer::new(move |_: tower::BoxError| {
                    let state = shed_state.clone();
                    async move { busy(&state) }
                }))
                .layer(tower::load_shed::LoadShedLayer::new())
                .layer(tower::limit::GlobalConcurrencyLimitLayer::with_semaphore(in_flight)),
        );
    // Cross-origin requests from the listed origins' pages (preflights answered before the
    // in-flight cap).
    let work = match origins::cors(&state.limits.cors_origins) {
        Some(cors) => work.layer(cors),
        None => work,
    };
    Router::new()
        .merge(work)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        // The Sessions page: static files, cheap, answered under any load.
        .route("/", get(web::page))
        .route("/project/{name}/session", get(web::page))
        .route("/admin/project/{name}/session", get(web::page))
        .route("/web/{asset}", get(web::asset))
        .layer(axum::middleware::map_response_with_state(state.clone(), coded_refusals))
        .with_state(state)
        .layer(TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
            let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}

/// What a handler tells the request metrics of the request it answered; without it the
/// operation follows from the path and the outcome from the status.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub operation: &'static str,
    pub code: String,
}

/// Counts every answered request of the routes that do work, with its latency.
async fn record(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use crate::graphql::errors as codes;
    let started = std::time::Instant::now();
    let operation = match request.uri().path() {
        "/export/sessions.csv" => "export",
        "/graphql/ws" => "websocket",
        "/graphql" => "unknown",
        _ => "other",
    };
    let response = next.run(request).await;
    let status = response.status();
    let (operation, code) = match response.extensions().get::<Outcome>() {
        Some(o) => (o.operation, o.code.as_str()),
        None => (
            operation,
            match status {
                s if s.is_success() || s.is_informational() || s.is_redirection() => "OK",
                StatusCode::UNAUTHORIZED => codes::UNAUTHENTICATED,
                StatusCode::FORBIDDEN => codes::FORBIDDEN,
                StatusCode::NOT_FOUND => codes::NOT_FOUND,
                StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT => codes::LIMIT_EXCEEDED,
                StatusCode::SERVICE_UNAVAILABLE => codes::UNAVAILABLE,
                s if s.is_server_error() => codes::INTERNAL,
                _ => codes::BAD_USER_INPUT,
            },
        ),
    };
    state.metrics.request(operation, code, started.elapsed());
    response
}

/// Seconds a client is asked to wait before it retries a request refused for load or an
/// unavailable database.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// The answer to a request over the in-flight cap: 503, `Retry-After`, and the JSON error
/// body with `UNAVAILABLE`.
fn busy(state: &AppState) -> axum::response::Response {
    let message = format!(
        "the server is answering as many requests as it may at once ({}); retry after {RETRY_AFTER_SECONDS} s",
        state.limits.max_in_flight
    );
    unavailable(&message, None)
}

/// 503 with `Retry-After` and the JSON error body with `UNAVAILABLE` (and the request id,
/// when the request got as far as having one logged).
pub fn unavailable(message: &str, request_id: Option<&str>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut body = crate::graphql::errors::error_body(message, crate::graphql::errors::UNAVAILABLE);
    if let Some(id) = request_id {
        body["errors"][0]["extensions"]["requestId"] = id.into();
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, RETRY_AFTER_SECONDS.to_string())],
        axum::Json(body),
    )
        .into_response()
}

/// The refusals the body-size and timeout layers and the method router make carry the JSON
/// error body every other refusal has: `LIMIT_EXCEEDED` with the limit named, or
/// `BAD_USER_INPUT` for a method a path does not answer.
async fn coded_refusals(
    axum::extract::State(state): axum::extract::State<AppState>,
    response: axum::response::Response,
) -> axum::response::Response {
    let message = match response.status() {
        StatusCode::METHOD_NOT_ALLOWED => "this path answers GET and POST".to_owned(),
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
    let code = if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        crate::graphql::errors::BAD_USER_INPUT
    } else {
        crate::graphql::errors::LIMIT_EXCEEDED
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    parts.headers.insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    let body = crate::graphql::errors::error_body(&message, code);
    axum::response::Response::from_parts(parts, axum::body::Body::from(body.to_string()))
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

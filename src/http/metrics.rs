//! `GET /metrics`: Prometheus text. Requests and their latency per operation type and
//! outcome code, open connections, scheduler passes, and, read when scraped, pending
//! sessions per resource group and database connections in use.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::AppState;

/// What a request was and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `query`, `mutation`, `subscription` (GraphQL over HTTP), `unknown` (a GraphQL request
    /// refused before its document was read), `export`, `websocket` (the upgrade), `other`.
    pub operation: &'static str,
    /// `OK`, or the public code of the first error (`BAD_USER_INPUT`, `UNAVAILABLE`, …).
    pub outcome: String,
}

/// How a compiled session list was answered.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CompiledLabels {
    /// `compiled`, or `executor` when the compiled form handed the request back.
    answer: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    resource_group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EngineLabels {
    engine: String,
    kind: &'static str,
}

fn latency_histogram() -> Histogram {
    // 1 ms to ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn pass_histogram() -> Histogram {
    // 0.1 ms to ~3 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 15))
}

/// The server's metrics; clones share them.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    compiled: Family<CompiledLabels, Counter>,
    connections: Gauge,
    websockets: Gauge,
    scheduler_pass: Histogram,
    pending: Family<GroupLabels, Gauge>,
    engine_up: Family<EngineLabels, Gauge>,
    orphan_jobs: Family<EngineLabels, Gauge>,
    pool_in_use: Gauge,
    pool_size: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("sessiond");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let compiled = Family::<CompiledLabels, Counter>::default();
        let connections = Gauge::default();
        let websockets = Gauge::default();
        let scheduler_pass = pass_histogram();
        let pending = Family::<GroupLabels, Gauge>::default();
        let engine_up = Family::<EngineLabels, Gauge>::default();
        let orphan_jobs = Family::<EngineLabels, Gauge>::default();
        let pool_in_use = Gauge::default();
        let pool_size = Gauge::default();
        registry.register("requests", "Requests answered, by operation type and outcome code", requests.clone());
        registry.register(
            "request_duration_seconds",
            "Time to answer a request (to its first byte for a download), by operation type and outcome code",
            latency.clone(),
        );
        registry.register(
            "graphql_compiled",
            "Requests for a compiled session list: answered by it, or handed back to the executor",
            compiled.clone(),
        );
        registry.register("connections_open", "Open TCP connections", connections.clone());
        registry.register("websockets_open", "Open GraphQL WebSocket connections", websockets.clone());
        registry.register("scheduler_pass_duration_seconds", "Time of one scheduling pass", scheduler_pass.clone());
        registry.register("sessions_pending", "PENDING sessions per resource group", pending.clone());
        registry.register(
            "engine_up",
            "1 when the engine answers (a Slurm engine: slurmrestd), else 0",
            engine_up.clone(),
        );
        registry.register(
            "engine_orphan_jobs",
            "Jobs tagged by sessiond that have no session here (reported, never killed)",
            orphan_jobs.clone(),
        );
        registry.register("db_pool_connections_in_use", "Database connections lent out", pool_in_use.clone());
        registry.register("db_pool_connections", "Database connections open", pool_size.clone());
        Self(Arc::new(Inner {
            registry,
            requests,
            latency,
            compiled,
            connections,
            websockets,
            scheduler_pass,
            pending,
            engine_up,
            orphan_jobs,
            pool_in_use,
            pool_size,
        }))
    }
}

impl Metrics {
    /// Counts one answered request.
    pub fn request(&self, operation: &'static str, outcome: &str, took: Duration) {
        let labels = RequestLabels { operation, outcome: outcome.to_owned() };
        self.0.requests.get_or_create(&labels).inc();
        self.0.latency.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Counts one request for a compiled list: `answered` by it, or handed to the executor.
    pub fn compiled(&self, answered: bool) {
        let answer = if answered { "compiled" } else { "executor" };
        self.0.compiled.get_or_create(&CompiledLabels { answer }).inc();
    }

    /// The gauge the listener moves as connections open and close.
    pub fn connections(&self) -> Gauge {
        self.0.connections.clone()
    }

    /// Records one scheduling pass.
    pub fn scheduler_pass(&self, took: Duration) {
        self.0.scheduler_pass.observe(took.as_secs_f64());
    }

    fn render(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.0.registry)?;
        Ok(text)
    }
}

/// `GET /metrics`. What the database holds is read now: one statement for the pending
/// sessions, two for the engines (their health is the engines' own); the pool's figures
/// are the pool's own.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let m = &state.metrics.0;
    match crate::domain::scheduling::pending_by_group(&state.db).await {
        Ok(groups) => {
            m.pending.clear();
            for (group, n) in groups {
                m.pending.get_or_create(&GroupLabels { resource_group: group }).set(gauge_value(n));
            }
        }
        Err(e) => tracing::warn!(error = ?e, "metrics: reading pending sessions failed"),
    }
    match crate::domain::runtime::declared::report(&state.db).await {
        Ok(engines) => {
            m.engine_up.clear();
            m.orphan_jobs.clear();
            for e in engines {
                let labels = EngineLabels { engine: e.name, kind: e.kind.as_str() };
                m.engine_up.get_or_create(&labels).set(i64::from(e.answering));
                if let Some(n) = e.orphan_jobs {
                    m.orphan_jobs.get_or_create(&labels).set(gauge_value(n as u64));
                }
            }
        }
        Err(e) => tracing::warn!(error = ?e, "metrics: reading the engines failed"),
    }
    let ws_max = state.limits.ws.max_ws_connections;
    m.websockets.set(gauge_value(ws_max.saturating_sub(state.ws_connections.available_permits()) as u64));
    let (size, idle) = crate::db::pool_figures(&state.db);
    m.pool_size.set(gauge_value(size));
    m.pool_in_use.set(gauge_value(size.saturating_sub(idle)));
    match state.metrics.render() {
        Ok(text) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "metrics: encoding failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

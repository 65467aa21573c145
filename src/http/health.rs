//! Liveness (the process answers) and readiness (the database answers).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let ping = tokio::time::timeout(Duration::from_secs(2), state.db.ping()).await;
    match ping {
        Ok(Ok(())) => (StatusCode::OK, Json(json!({"status": "ready", "database": true}))),
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "readiness: database unavailable");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "unavailable", "database": false})))
        }
        Err(_) => {
            tracing::warn!("readiness: database did not answer in time");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "unavailable", "database": false})))
        }
    }
}

//! What the benchmarks share: a fresh database of either kind, and medians.

#[path = "../../tests/integration/support/pg.rs"]
#[allow(dead_code)]
mod pg;

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A fresh, empty database URL: a temporary SQLite file, or a new database on the
/// PostgreSQL server the tests use (`TEST_DATABASE_URL` or a throwaway cluster).
pub async fn database(backend: &str) -> (String, Option<tempfile::TempDir>) {
    match backend {
        "sqlite" => {
            let dir = tempfile::tempdir().expect("tempdir");
            (format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display()), Some(dir))
        }
        _ => {
            let server = pg::server().expect("PostgreSQL for the benchmark");
            let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
            let admin = Database::connect(format!("{}/{}", server.base_url, server.admin_db)).await.expect("connect");
            admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create database");
            (format!("{}/{name}", server.base_url), None)
        }
    }
}

pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// POSTs a GraphQL request as `token` through the router; a response with errors panics.
pub async fn graphql(router: &axum::Router, token: &str, query: &str, variables: Value) -> Value {
    let req = Request::post("/graphql")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(json!({"query": query, "variables": variables}).to_string()))
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    let v: Value = serde_json::from_slice(&resp.into_body().collect().await.expect("body").to_bytes()).expect("json");
    assert!(v.get("errors").is_none(), "{v}");
    v
}

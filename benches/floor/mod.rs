//! The floor: the least a server can do for the benchmark's page. An axum handler on a sqlx
//! pool answers exactly one request, "the first 50 sessions of a project, newest first,
//! with owner email, project name, status, type, requested cpu and memory, created time and
//! elapsed seconds", as an administrator of the project's domain: one statement that
//! checks the token and the viewer's right to the project and reads the page with its
//! relations, rendered into the same JSON sessiond answers. It parses no GraphQL and
//! serves no other page; what sessiond spends above it is the price of being a server.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, Utc};
use sea_orm::sqlx::postgres::{PgPool, PgPoolOptions};
use serde_json::{Value, json};
use uuid::Uuid;

use sessiond::domain::auth::hash_token;
use sessiond::graphql::ids::{NodeKind, decode, encode};

/// The page in one statement: the viewer from the token, the project only if the viewer
/// administers its domain (or everything), its newest 50 sessions through the
/// `(project_id, created_at, id)` index, and each owner's email.
const PAGE: &str = r#"
SELECT s.id, s.name, s.status, s.session_type, s.created_at, s.terminated_at, o.email, p.name AS project,
       (s.requested_slots->>'cpu')::float8 AS cpu, (s.requested_slots->>'mem')::float8 AS mem
FROM keypairs k
JOIN users v ON v.id = k.user_id
JOIN projects p ON p.id = $2 AND (v.role = 'SUPERADMIN' OR (v.role = 'ADMIN' AND p.domain_id = v.domain_id))
CROSS JOIN LATERAL (
  SELECT * FROM sessions s WHERE s.project_id = p.id ORDER BY s.created_at DESC, s.id DESC LIMIT 50
) s
JOIN users o ON o.id = s.owner_id
WHERE k.secret_hash = $1 AND k.is_active
ORDER BY s.created_at DESC, s.id DESC"#;

type Row = (Uuid, String, String, String, DateTime<Utc>, Option<DateTime<Utc>>, String, String, f64, f64);

/// Serves the floor on `bind` until killed.
pub async fn serve(database_url: &str, bind: SocketAddr) {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(5))
        .connect(database_url)
        .await
        .expect("floor: connect");
    let app = Router::new().route("/graphql", post(page)).with_state(pool);
    let listener = tokio::net::TcpListener::bind(bind).await.expect("floor: bind");
    axum::serve(listener, app).await.expect("floor: serve");
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"errors": [{"message": message}]}))).into_response()
}

async fn page(State(pool): State<PgPool>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(token) =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    else {
        return error(StatusCode::UNAUTHORIZED, "no bearer token");
    };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "not JSON");
    };
    let project = request["variables"]["p"]
        .as_str()
        .and_then(decode)
        .filter(|(kind, _)| *kind == NodeKind::Project)
        .and_then(|(_, key)| key.parse::<Uuid>().ok());
    let Some(project) = project else {
        return error(StatusCode::OK, "no such project");
    };
    let rows: Vec<Row> =
        match sea_orm::sqlx::query_as(PAGE).bind(hash_token(token)).bind(project).fetch_all(&pool).await {
            Ok(rows) => rows,
            Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "database"),
        };
    let now = Utc::now();
    let edges: Vec<Value> = rows
        .into_iter()
        .map(|(id, name, status, kind, created, terminated, email, project, cpu, mem)| {
            let elapsed = ((terminated.unwrap_or(now) - created).num_seconds()).max(0);
            json!({"node": {
                "id": encode(NodeKind::Session, id).0,
                "name": name,
                "status": status,
                "type": kind,
                "createdAt": created.to_rfc3339(),
                "elapsedSeconds": elapsed,
                "owner": {"email": email},
                "project": {"name": project},
                "requestedSlots": {"cpu": cpu, "memory": mem.round() as i64},
            }})
        })
        .collect();
    let body = serde_json::to_vec(&json!({"data": {"sessions": {"edges": edges}}})).expect("json");
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

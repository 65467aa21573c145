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

use sessiond::domain::directory::auth::hash_token;
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

/// Serves the floor's plain page on `bind` until killed.
pub async fn serve(database_url: &str, bind: SocketAddr) {
    serve_with(database_url, bind, Router::new().route("/graphql", post(page))).await;
}

/// Serves `routes` on a pool of `database_url`, on `bind`, until killed.
async fn serve_with(database_url: &str, bind: SocketAddr, routes: Router<PgPool>) {
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(5))
        .connect(database_url)
        .await
        .expect("floor: connect");
    let listener = tokio::net::TcpListener::bind(bind).await.expect("floor: bind");
    axum::serve(listener, routes.with_state(pool)).await.expect("floor: serve");
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({"errors": [{"message": message}]}))).into_response()
}

/// The request's bearer token, its project (variable `p`) and its JSON body, or why it is
/// refused.
fn asked<'a>(headers: &'a HeaderMap, body: &Bytes) -> Result<(&'a str, Uuid, Value), (StatusCode, &'static str)> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or((StatusCode::UNAUTHORIZED, "no bearer token"))?;
    let request = serde_json::from_slice::<Value>(body).map_err(|_| (StatusCode::BAD_REQUEST, "not JSON"))?;
    let project = request["variables"]["p"]
        .as_str()
        .and_then(decode)
        .filter(|(kind, _)| *kind == NodeKind::Project)
        .and_then(|(_, key)| key.parse::<Uuid>().ok())
        .ok_or((StatusCode::OK, "no such project"))?;
    Ok((token, project, request))
}

async fn page(State(pool): State<PgPool>, headers: HeaderMap, body: Bytes) -> Response {
    let (token, project, _) = match asked(&headers, &body) {
        Ok(asked) => asked,
        Err((status, message)) => return error(status, message),
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

/// The Sessions page's own list document (`SessionsPage` of web/src/page.ts) as the floor
/// answers it: the Finished tab of a project, as its administrator, newest first, `first`
/// rows with every column the page shows, and the tabs' counts (read from the same tallies
/// sessiond reads), in one statement. It renders the same fields into the same shape; its
/// cursors are its own.
const SESSIONS_PAGE: &str = r#"
WITH v AS (
  SELECT u.role, u.domain_id FROM keypairs k JOIN users u ON u.id = k.user_id
  WHERE k.secret_hash = $1 AND k.is_active
), p AS (
  SELECT p.id, p.name FROM projects p, v
  WHERE p.id = $2 AND (v.role = 'SUPERADMIN' OR (v.role = 'ADMIN' AND p.domain_id = v.domain_id))
), page AS (
  -- The project by its parameter, not through `p`: the planner walks its index newest first.
  SELECT s.* FROM sessions s
  WHERE s.project_id = $2 AND EXISTS (SELECT FROM p) AND s.status IN ('TERMINATED', 'CANCELLED', 'ERROR')
  ORDER BY s.created_at DESC, s.id DESC LIMIT $3
), counts AS (
  SELECT coalesce(sum(n) FILTER (WHERE status NOT IN ('TERMINATED', 'CANCELLED', 'ERROR')), 0)::int8 AS running,
         coalesce(sum(n) FILTER (WHERE status IN ('TERMINATED', 'CANCELLED', 'ERROR')), 0)::int8 AS finished
  FROM (SELECT t.status, t.n FROM session_tallies t WHERE t.project_id = $2
        UNION ALL SELECT c.status, c.delta FROM session_tally_changes c WHERE c.project_id = $2) x
)
SELECT s.id, s.name, s.status, s.session_type, s.created_at, s.started_at, s.terminated_at, s.cluster_size,
       s.priority, s.result, s.status_info, s.agent_id, o.email, p.name AS project, s.resource_group, s.image,
       s.requested_slots, s.occupied_slots, s.status_actor_rule, a.email AS actor, s.utilization,
       counts.running, counts.finished
FROM page s JOIN users o ON o.id = s.owner_id LEFT JOIN users a ON a.id = s.status_actor_user_id, p, counts
ORDER BY s.created_at DESC, s.id DESC"#;

/// Slots as the page reads them: cpu, memory in whole bytes, the rest by name.
fn slots(stored: &Value) -> Value {
    let mut accelerators: Vec<(&String, f64)> = stored
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "cpu" && *k != "mem")
        .filter_map(|(k, v)| Some((k, v.as_f64()?)))
        .collect();
    accelerators.sort_by(|a, b| a.0.cmp(b.0));
    json!({
        "cpu": stored["cpu"].as_f64().unwrap_or(0.0),
        "memory": stored["mem"].as_f64().unwrap_or(0.0).round() as i64,
        "accelerators": accelerators.into_iter().map(|(slot, amount)| json!({"slot": slot, "amount": amount})).collect::<Vec<_>>(),
    })
}

/// What a session uses now, per slot: cpu, mem, then the others by name.
fn utilization(stored: &Value) -> Value {
    let mut uses: Vec<(&String, f64)> =
        stored.as_object().into_iter().flatten().filter_map(|(k, v)| Some((k, v.get(0)?.as_f64()?))).collect();
    let rank = |k: &str| match k {
        "cpu" => 0,
        "mem" => 1,
        _ => 2,
    };
    uses.sort_by(|a, b| rank(a.0).cmp(&rank(b.0)).then(a.0.cmp(b.0)));
    Value::Array(uses.into_iter().map(|(slot, current)| json!({"slot": slot, "current": current})).collect())
}

/// Serves the Sessions page's list document on `bind` until killed.
pub async fn serve_page(database_url: &str, bind: SocketAddr) {
    serve_with(database_url, bind, Router::new().route("/graphql", post(sessions_page))).await;
}

async fn sessions_page(State(pool): State<PgPool>, headers: HeaderMap, body: Bytes) -> Response {
    use sea_orm::sqlx::Row as _;
    let (token, project, request) = match asked(&headers, &body) {
        Ok(asked) => asked,
        Err((status, message)) => return error(status, message),
    };
    let variables = &request["variables"];
    let first = variables["first"].as_i64().unwrap_or(20).clamp(1, 500);
    let rows = match sea_orm::sqlx::query(SESSIONS_PAGE)
        .bind(hash_token(token))
        .bind(project)
        .bind(first + 1)
        .fetch_all(&pool)
        .await
    {
        Ok(rows) => rows,
        Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "database"),
    };
    let now = Utc::now();
    let more = rows.len() as i64 > first;
    let (mut running, mut finished) = (0_i64, 0_i64);
    let mut edges = Vec::with_capacity(rows.len());
    for row in rows.iter().take(first as usize) {
        let get = |i: usize| -> Option<String> { row.try_get(i).ok() };
        let created: DateTime<Utc> = row.get(4);
        let terminated: Option<DateTime<Utc>> = row.get(6);
        let at = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339());
        let requested: Value = row.get(16);
        let occupied: Value = row.get(17);
        let used: Option<Value> = row.get(20);
        let actor: Option<String> = row.get(19);
        (running, finished) = (row.get(21), row.get(22));
        edges.push(json!({"node": {
            "id": encode(NodeKind::Session, row.get::<Uuid, _>(0)).0,
            "name": get(1),
            "status": get(2),
            "type": get(3),
            "createdAt": created.to_rfc3339(),
            "startedAt": at(row.get(5)),
            "terminatedAt": at(terminated),
            "elapsedSeconds": (terminated.unwrap_or(now) - created).num_seconds().max(0),
            "clusterSize": row.get::<i32, _>(7),
            "priority": row.get::<i32, _>(8),
            // A page of the Finished tab: nothing waits, nothing will expire.
            "queuePosition": null,
            "result": get(9),
            "statusInfo": get(10),
            "agent": get(11),
            "owner": {"email": get(12)},
            "project": {"name": get(13)},
            "resourceGroup": {"name": get(14)},
            "image": {"name": get(15)},
            "requestedSlots": slots(&requested),
            "occupiedSlots": slots(&occupied),
            "pendingReasons": [],
            "statusChangedBy": {
                "kind": if actor.is_some() { "USER" } else { "SYSTEM" },
                "rule": get(18),
                "user": actor.map(|email| json!({"email": email})),
            },
            "expiry": null,
            "utilization": used.as_ref().map_or(Value::Array(Vec::new()), utilization),
        }}));
    }
    let cursor = |e: Option<&Value>| e.map(|e| e["node"]["id"].as_str().unwrap_or_default().to_owned());
    let body = json!({"data": {
        "sessions": {
            "pageInfo": {
                "hasNextPage": more, "hasPreviousPage": false,
                "startCursor": cursor(edges.first()), "endCursor": cursor(edges.last()),
            },
            "edges": edges,
        },
        "sessionCounts": {"running": running, "finished": finished},
    }});
    ([(header::CONTENT_TYPE, "application/json")], serde_json::to_vec(&body).expect("json")).into_response()
}

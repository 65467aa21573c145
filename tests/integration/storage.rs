//! The schema on both databases: migrations, the demo seed, constraints, readiness, and
//! that a database failure never reaches a client as text.

use axum::http::StatusCode;
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryOrder, Set, SqlErr};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::{agent, domain, image, keypair, project, project_member, resource_group, session, slot_type, user};

use crate::db_tests;
use crate::support::{TestApp, error_codes, session_row};

const TABLES: &[&str] = &[
    "domains",
    "projects",
    "users",
    "project_members",
    "keypair_resource_policies",
    "keypairs",
    "slot_types",
    "resource_groups",
    "resource_group_projects",
    "agents",
    "images",
    "launch_groups",
    "sessions",
    "session_status_transitions",
    "scheduling_history",
    "session_logs",
    "user_settings",
    "idempotency_keys",
];

async fn migrations_create_the_whole_model(app: TestApp) {
    for table in TABLES {
        app.db
            .execute_unprepared(&format!("SELECT COUNT(*) FROM {table}"))
            .await
            .unwrap_or_else(|e| panic!("table {table} missing: {e}"));
    }
    let slots: Vec<String> = slot_type::Entity::find()
        .order_by_asc(slot_type::Column::Position)
        .all(&app.db)
        .await
        .expect("slot types")
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(slots, ["cpu", "mem", "cuda.device", "cuda.shares", "rocm.device"]);
    // Migrating again is a no-op.
    sessiond::db::migrate(&app.db).await.expect("second migration run");
}

async fn counts(app: &TestApp) -> Vec<u64> {
    vec![
        domain::Entity::find().count(&app.db).await.expect("count"),
        project::Entity::find().count(&app.db).await.expect("count"),
        user::Entity::find().count(&app.db).await.expect("count"),
        project_member::Entity::find().count(&app.db).await.expect("count"),
        keypair::Entity::find().count(&app.db).await.expect("count"),
        resource_group::Entity::find().count(&app.db).await.expect("count"),
        agent::Entity::find().count(&app.db).await.expect("count"),
        image::Entity::find().count(&app.db).await.expect("count"),
    ]
}

async fn demo_seed_is_idempotent(app: TestApp) {
    assert!(app.seeded, "an empty database gets the demo data");
    let first = counts(&app).await;
    assert_eq!(first, [2, 3, 5, 7, 5, 2, 4, 3]);
    let again = app.restart().await;
    assert!(!again.seeded, "a second start seeds nothing");
    assert_eq!(counts(&again).await, first);
    let alice = again.gql(Some("demo-alice"), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(alice["data"]["viewer"]["user"]["email"], "alice@example.com");
}

fn new_session(name: &str, status: &str) -> session::ActiveModel {
    session_row("alice@example.com", "default/default", name, status, json!({"cpu": 1, "mem": 1073741824_i64}))
}

async fn live_session_names_are_unique_per_owner(app: TestApp) {
    new_session("nb-1", "TERMINATED").insert(&app.db).await.expect("a finished session");
    new_session("nb-1", "RUNNING").insert(&app.db).await.expect("a finished name can be reused");
    let err = new_session("nb-1", "PENDING").insert(&app.db).await.expect_err("two live sessions, one name");
    assert!(
        matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))),
        "the violation is recognisable on both databases: {err:?}"
    );
    new_session("nb-1", "CANCELLED").insert(&app.db).await.expect("terminal duplicates are fine");
    // Foreign keys hold on both databases.
    let mut orphan = new_session("nb-2", "PENDING");
    orphan.owner_id = Set(Uuid::new_v4());
    let err = orphan.insert(&app.db).await.expect_err("an unknown owner is refused");
    assert!(
        matches!(err.sql_err(), Some(SqlErr::ForeignKeyConstraintViolation(_))),
        "a foreign key violation on both databases: {err:?}"
    );
}

async fn readiness_follows_the_database(app: TestApp) {
    let (status, _, body) = app.get("/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(serde_json::from_slice::<Value>(&body).expect("json")["database"], true);
    let (status, _, _) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);

    app.db.close_by_ref().await.expect("close the pool");
    let (status, _, body) = app.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(serde_json::from_slice::<Value>(&body).expect("json")["database"], false);
    let (status, _, _) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "liveness does not depend on the database");
}

async fn database_errors_are_masked(app: TestApp) {
    app.db.execute_unprepared("DROP TABLE user_settings").await.expect("drop a table");
    let resp =
        app.gql(Some("demo-alice"), "{ viewer { user { email } settings { resourcePanelView } } }", json!({})).await;
    assert_eq!(error_codes(&resp), ["INTERNAL"]);
    let text = resp.to_string();
    for leak in ["user_settings", "SELECT", "relation", "no such table", "sqlx", "Query"] {
        assert!(!text.contains(leak), "{leak} leaked: {text}");
    }
    let err = &resp["errors"][0];
    assert!(err["message"].as_str().expect("message").starts_with("internal error"));
    assert!(err["extensions"]["requestId"].as_str().is_some_and(|id| id.len() >= 32), "{err}");
    assert!(resp["data"]["viewer"]["settings"].is_null(), "no settings without the table: {resp}");
}

/// Every column of `table` as the database holds it, as text (SQLite: its storage class and
/// quoted value, so that a blob, an integer or a text of the same digits differ).
async fn stored(app: &TestApp, table: &str, columns: &[&str], id: Uuid) -> Vec<String> {
    use sea_orm::{DbBackend, Statement};
    let backend = app.db.get_database_backend();
    let select: Vec<String> = columns
        .iter()
        .map(|c| match backend {
            DbBackend::Postgres => format!("\"{c}\"::text AS \"{c}\""),
            _ => format!("typeof(\"{c}\") || ':' || quote(\"{c}\") AS \"{c}\""),
        })
        .collect();
    let sql = format!(
        "SELECT {} FROM {table} WHERE id = {}",
        select.join(", "),
        if backend == DbBackend::Postgres { "$1" } else { "?" }
    );
    let row = app
        .db
        .query_one_raw(Statement::from_sql_and_values(backend, sql, [id.into()]))
        .await
        .expect("read")
        .expect("the row");
    columns
        .iter()
        .map(|c| row.try_get::<Option<String>>("", c).expect("text").unwrap_or_else(|| "NULL".into()))
        .collect()
}

async fn rows_written_in_one_statement_are_stored_as_sea_orm_stores_them(app: TestApp) {
    use sea_orm::Iterable;
    // Every kind of value a session holds, none left NULL that can be set: text with
    // quotes and non-ASCII letters, negative and large integers, fractions, nested JSON, an
    // instant with nanoseconds, uuids in nullable columns.
    let at = chrono::DateTime::parse_from_rfc3339("2026-12-03T04:05:06.123456789Z").expect("instant").to_utc();
    let mut by_sea_orm = new_session("every-kind", "PENDING");
    by_sea_orm.status_info = Set(Some("it's \"quoted\", ünïcode, a\ttab".into()));
    by_sea_orm.exit_code = Set(Some(-3));
    by_sea_orm.startup_command = Set(Some("python -c 'print(1)'".into()));
    by_sea_orm.batch_timeout_seconds = Set(Some(86_400));
    by_sea_orm.priority = Set(-7);
    by_sea_orm.requested_slots = Set(json!({"cpu": 0.25, "mem": 1_099_511_627_776_i64, "cuda.shares": 0.1}));
    by_sea_orm.environment = Set(json!([{"name": "A", "value": "b \"c\" \u{e9}"}]));
    by_sea_orm.pending_reasons = Set(json!([{"code": "NO_CAPACITY", "remaining": null, "requested": 1.5}]));
    by_sea_orm.created_at = Set(at);
    by_sea_orm.scheduled_at = Set(Some(at + chrono::Duration::microseconds(1)));
    by_sea_orm.queue_position = Set(Some(7));
    by_sea_orm.lifetime_seconds = Set(Some(3_600));
    by_sea_orm.idle = Set(Some(json!({"seconds": 600, "threshold": 0.05})));
    by_sea_orm.exempt_idle = Set(true);
    by_sea_orm.cpu_used = Set(1234.5678);
    by_sea_orm.mem_used = Set(1e15 + 0.5);
    by_sea_orm.status_actor_user_id = Set(Some(sessiond::domain::directory::seed::demo_user_id("alice@example.com")));
    by_sea_orm.launched_from_name = Set(Some("origin".into()));
    by_sea_orm.starts_at = Set(Some(at));
    by_sea_orm.callback_url = Set(Some("https://example.com/hook?a=1&b=2".into()));
    by_sea_orm.pending_digest = Set(i64::MIN + 1);
    let mut by_rows = by_sea_orm.clone();
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    by_sea_orm.id = Set(a);
    by_rows.id = Set(b);
    by_rows.name = Set("every-kind-2".into());
    session::Entity::insert_many([by_sea_orm]).exec_without_returning(&app.db).await.expect("sea-orm's insert");
    let (statements, inserted) =
        app.count_statements(sessiond::domain::store::rows::insert_all(&app.db, vec![by_rows], None)).await;
    inserted.expect("one statement of one parameter");
    assert_eq!(statements, 1);
    let columns: Vec<&str> = session::Column::iter()
        .map(|c| sea_orm::IdenStatic::as_str(&c))
        .filter(|c| !["id", "name"].contains(c))
        .collect();
    assert_eq!(
        stored(&app, "sessions", &columns, a).await,
        stored(&app, "sessions", &columns, b).await,
        "{:?}",
        app.backend
    );
    let read = |id| session::Entity::find_by_id(id).one(&app.db);
    let (mut first, mut second) = (read(a).await.expect("read").expect("a"), read(b).await.expect("read").expect("b"));
    (first.id, first.name, second.id, second.name) = (Uuid::nil(), String::new(), Uuid::nil(), String::new());
    assert_eq!(first, second);
}

db_tests!(
    rows_written_in_one_statement_are_stored_as_sea_orm_stores_them,
    migrations_create_the_whole_model,
    demo_seed_is_idempotent,
    live_session_names_are_unique_per_owner,
    readiness_follows_the_database,
    database_errors_are_masked,
);

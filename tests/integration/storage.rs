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

db_tests!(
    migrations_create_the_whole_model,
    demo_seed_is_idempotent,
    live_session_names_are_unique_per_owner,
    readiness_follows_the_database,
    database_errors_are_masked,
);

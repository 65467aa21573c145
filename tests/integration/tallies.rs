//! The page's counts come from tallies the database keeps in the transaction of every
//! change of a session: they equal a full count after launches, transitions (one by one and
//! in bulk), moves, deletes, folds and restarts, and a count reads no session.

use std::collections::BTreeMap;

use sea_orm::{ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, Statement};
use serde_json::json;
use uuid::Uuid;

use entity::session;
use sessiond::domain::directory::seed::{demo_project_id, demo_user_id};
use sessiond::domain::sessions::tally;

use crate::db_tests;
use crate::support::{TestApp, launch_input, project, session_row};

const COUNTS: &str = "query($p: ID!, $scope: SessionScope, $filter: SessionFilter) {
  sessionCounts(projectId: $p, scope: $scope, filter: $filter) { running finished all byType { type count } }
}";

type Counted = BTreeMap<(String, String), u64>;

/// Every (project, owner) with sessions, and the count of each of their types and statuses,
/// read from the sessions themselves.
async fn full_count(app: &TestApp) -> BTreeMap<(Uuid, Uuid), Counted> {
    #[derive(FromQueryResult)]
    struct Group {
        project_id: Uuid,
        owner_id: Uuid,
        session_type: String,
        status: String,
        n: i64,
    }
    let sql = "SELECT project_id, owner_id, session_type, status, COUNT(*) AS n FROM sessions \
               GROUP BY project_id, owner_id, session_type, status";
    let statement = Statement::from_string(app.db.get_database_backend(), sql);
    let groups = Group::find_by_statement(statement).all(&app.db).await.expect("a full count");
    let mut out: BTreeMap<(Uuid, Uuid), Counted> = BTreeMap::new();
    for g in groups {
        out.entry((g.project_id, g.owner_id)).or_default().insert((g.session_type, g.status), g.n as u64);
    }
    out
}

async fn tallied(app: &TestApp, project: Uuid, owner: Option<Uuid>) -> Counted {
    let (tallies, _) = tally::read(&app.db, project, owner).await.expect("the tallies");
    tallies.into_iter().map(|t| ((t.session_type.as_str().to_owned(), t.status.as_str().to_owned()), t.n)).collect()
}

/// The tallies of every owner and every project equal the full count.
async fn agree(app: &TestApp, when: &str) {
    let full = full_count(app).await;
    let mut projects: BTreeMap<Uuid, Counted> = BTreeMap::new();
    for ((p, owner), counted) in &full {
        assert_eq!(&tallied(app, *p, Some(*owner)).await, counted, "{when}: project {p}, owner {owner}");
        let all = projects.entry(*p).or_default();
        for (key, n) in counted {
            *all.entry(key.clone()).or_default() += n;
        }
    }
    for (p, counted) in &projects {
        assert_eq!(&tallied(app, *p, None).await, counted, "{when}: project {p}");
    }
    // Nothing tallied where nothing is.
    let nobody = tallied(app, demo_project_id("default/default"), Some(Uuid::from_u128(7))).await;
    assert!(nobody.is_empty(), "{when}: {nobody:?}");
}

/// A little generator of the test's choices, the same on every run.
struct Choices(u64);

impl Choices {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

const STATUSES: &[&str] =
    &["PENDING", "SCHEDULED", "PREPARING", "RUNNING", "TERMINATING", "TERMINATED", "CANCELLED", "ERROR"];

async fn execute(app: &TestApp, sql: String) -> u64 {
    app.db.execute_unprepared(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}")).rows_affected()
}

fn quoted(id: Uuid, backend: sea_orm::DbBackend) -> String {
    match backend {
        sea_orm::DbBackend::Postgres => format!("'{id}'"),
        // As the SQLite driver stores a UUID: its 16 bytes.
        _ => format!("X'{}'", id.simple()),
    }
}

async fn tallies_always_equal_a_full_count(app: TestApp) {
    let backend = app.db.get_database_backend();
    agree(&app, "the demo").await;
    // A bulk insert, folded.
    app.generate(400, 5).await;
    agree(&app, "generated").await;
    // Launches through the API, not folded.
    for i in 0..4 {
        let resp = app
            .gql(
                Some("demo-alice"),
                "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
                json!({"i": launch_input(&format!("tallied-{i}"), 0.5)}),
            )
            .await;
        assert!(resp["errors"].is_null(), "{resp}");
    }
    agree(&app, "launched").await;
    // Random transitions one by one, with folds in between.
    let ids: Vec<Uuid> =
        session::Entity::find().all(&app.db).await.expect("the sessions").into_iter().map(|s| s.id).collect();
    let mut choose = Choices(42);
    for round in 0..60 {
        let id = ids[choose.below(ids.len())];
        let status = STATUSES[choose.below(STATUSES.len())];
        let sql = format!("UPDATE sessions SET status = '{status}' WHERE id = {}", quoted(id, backend));
        assert_eq!(execute(&app, sql).await, 1);
        if round % 20 == 7 {
            tally::fold(&app.db).await.expect("a fold");
        }
    }
    agree(&app, "after single transitions").await;
    // In bulk, and a change that touches no counted column.
    execute(&app, "UPDATE sessions SET status = 'TERMINATED' WHERE status = 'RUNNING'".to_owned()).await;
    execute(&app, "UPDATE sessions SET session_type = 'BATCH' WHERE status = 'PENDING'".to_owned()).await;
    execute(&app, "UPDATE sessions SET name = name || 'x', priority = priority + 1".to_owned()).await;
    // A session moved to another owner and another project.
    let moved = ids[choose.below(ids.len())];
    let sql = format!(
        "UPDATE sessions SET owner_id = {}, project_id = {} WHERE id = {}",
        quoted(demo_user_id("bob@example.com"), backend),
        quoted(demo_project_id("default/research"), backend),
        quoted(moved, backend)
    );
    assert_eq!(execute(&app, sql).await, 1);
    agree(&app, "after bulk changes").await;
    // Rows added and deleted (a prune).
    let mut added = Vec::new();
    for i in 0..6 {
        let row = session_row("alice@example.com", "default/default", &format!("gone-{i}"), "TERMINATED", json!({}));
        added.push(sea_orm::ActiveModelTrait::insert(row, &app.db).await.expect("a row").id);
    }
    agree(&app, "added").await;
    tally::fold(&app.db).await.expect("a fold");
    session::Entity::delete_many()
        .filter(sea_orm::ColumnTrait::is_in(&session::Column::Id, added.clone()))
        .exec(&app.db)
        .await
        .expect("deleted");
    agree(&app, "deleted").await;
    // Folded twice over, and after a restart, the same.
    tally::fold(&app.db).await.expect("a fold");
    tally::fold(&app.db).await.expect("a fold");
    agree(&app, "folded").await;
    let app = app.restart().await;
    agree(&app, "restarted").await;
}

/// The counts read the tallies, never the sessions, for the page's filters; a filter the
/// tallies cannot answer counts the sessions, and both agree.
async fn the_counts_read_no_session(app: TestApp) {
    let p = project("default/default");
    let ask = |scope: &'static str, filter: serde_json::Value| {
        let app = &app;
        let p = p.clone();
        async move {
            let (statements, resp) = app
                .statement_texts(app.gql(Some("demo-admin"), COUNTS, json!({"p": p, "scope": scope, "filter": filter})))
                .await;
            assert!(resp["errors"].is_null(), "{resp}");
            (statements, resp["data"]["sessionCounts"].clone())
        }
    };
    let read_sessions = |statements: &[String]| {
        statements.iter().any(|s| s.contains("FROM \"sessions\"") || s.contains("FROM sessions"))
    };
    for (size, seed) in [(0, 0), (600, 3)] {
        if size > 0 {
            app.generate(size, seed).await;
        }
        for (scope, filter) in [
            ("PROJECT", json!({})),
            ("MINE", json!({})),
            ("PROJECT", json!({"types": ["BATCH"]})),
            ("PROJECT", json!({"tab": "FINISHED", "types": ["INTERACTIVE"]})),
            ("MINE", json!({"statuses": ["PENDING", "RUNNING"]})),
        ] {
            let (statements, counts) = ask(scope, filter.clone()).await;
            assert!(!read_sessions(&statements), "{scope} {filter}: {statements:#?}");
            // The same as counting the sessions: a name filter matching every session.
            let mut counted = filter.clone();
            counted["nameContains"] = json!("");
            counted["createdAfter"] = json!("0001-01-01T00:00:00Z");
            let (statements, full) = ask(scope, counted).await;
            assert!(read_sessions(&statements), "counted over the sessions: {statements:#?}");
            assert_eq!(counts, full, "{scope} {filter} at {size} more");
        }
    }
}

db_tests!(tallies_always_equal_a_full_count, the_counts_read_no_session);

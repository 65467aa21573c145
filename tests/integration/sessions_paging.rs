//! Every filter, tab, order field and direction over a generated set: paging forward and
//! backward returns every row exactly once, in order, and the counts equal the list.

use std::collections::HashSet;

use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use entity::session;
use sessiond::domain::directory::seed::{demo_project_id, demo_user_id};
use sessiond::domain::model::status::SessionStatus;
use sessiond::graphql::ids::{NodeKind, decode_uuid, encode};

use crate::db_tests;
use crate::support::{TestApp, add_resource_group, session_row};

const PAGE: &str = "query($p: ID!, $filter: SessionFilter, $order: [SessionOrder!], $first: Int, $after: String, $last: Int, $before: String) {
  sessions(projectId: $p, scope: PROJECT, filter: $filter, orderBy: $order, first: $first, after: $after, last: $last, before: $before) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { id elapsedSeconds } }
  }
}";

const COUNTS: &str = "query($p: ID!, $filter: SessionFilter) {
  sessionCounts(projectId: $p, scope: PROJECT, filter: $filter) { running finished all byType { type count } }
}";

fn ids(page: &Value) -> Vec<(Uuid, i64)> {
    page["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            (
                decode_uuid(e["node"]["id"].as_str().expect("id"), NodeKind::Session).expect("session id"),
                e["node"]["elapsedSeconds"].as_i64().expect("elapsed"),
            )
        })
        .collect()
}

/// Walks the whole list forward with pages of `size`, then backward, and checks both walks
/// agree. Returns the ids in order with their elapsed seconds.
async fn walk(app: &TestApp, vars: Value, size: i64) -> Vec<(Uuid, i64)> {
    let mut forward = Vec::new();
    let mut after: Option<String> = None;
    let mut total = None;
    for page_no in 0.. {
        let mut v = vars.clone();
        v["first"] = json!(size);
        v["after"] = json!(after);
        let resp = app.gql(Some("demo-admin"), PAGE, v).await;
        let page = &resp["data"]["sessions"];
        assert!(resp.get("errors").is_none(), "{resp}");
        total.get_or_insert(page["totalCount"].as_i64().expect("total"));
        assert_eq!(page["pageInfo"]["hasPreviousPage"], json!(page_no > 0));
        forward.extend(ids(page));
        if page["pageInfo"]["hasNextPage"] != json!(true) {
            break;
        }
        after = page["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(Some(forward.len() as i64), total, "totalCount equals the rows walked: {vars}");

    let mut backward: Vec<(Uuid, i64)> = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let mut v = vars.clone();
        v["last"] = json!(size);
        v["before"] = json!(before);
        let resp = app.gql(Some("demo-admin"), PAGE, v).await;
        assert!(resp.get("errors").is_none(), "{resp}");
        let page = &resp["data"]["sessions"];
        let mut rows = ids(page);
        rows.extend(backward);
        backward = rows;
        if page["pageInfo"]["hasPreviousPage"] != json!(true) {
            break;
        }
        before = page["pageInfo"]["startCursor"].as_str().map(str::to_owned);
    }
    let f: Vec<Uuid> = forward.iter().map(|r| r.0).collect();
    let b: Vec<Uuid> = backward.iter().map(|r| r.0).collect();
    assert_eq!(f, b, "forward and backward walks agree: {vars}");
    let unique: HashSet<Uuid> = f.iter().copied().collect();
    assert_eq!(unique.len(), f.len(), "no row twice: {vars}");
    forward
}

/// The STATUS order: the lifecycle (as `SessionStatus` describes it), written out here rather than taken from
/// the enum the server sorts by.
const LIFECYCLE: [&str; 11] = [
    "PENDING",
    "SCHEDULED",
    "PREPARING",
    "PULLING",
    "PREPARED",
    "CREATING",
    "RUNNING",
    "TERMINATING",
    "TERMINATED",
    "CANCELLED",
    "ERROR",
];
/// The TYPE order: as the API's enum declares them.
const TYPES: [&str; 4] = ["INTERACTIVE", "BATCH", "INFERENCE", "UPLOAD"];

fn rank(all: &[&str], x: &str) -> usize {
    all.iter().position(|a| *a == x).unwrap_or_else(|| panic!("{x} is not in {all:?}"))
}

fn far_future() -> DateTime<Utc> {
    "9999-12-31T00:00:00Z".parse().expect("date")
}

async fn every_order_pages_completely_both_ways(app: TestApp) {
    app.generate(400, 8).await;
    let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let rows = session::Entity::find()
        .filter(session::Column::ProjectId.eq(demo_project_id("default/default")))
        .all(&app.db)
        .await
        .expect("rows");
    assert!(rows.len() > 120, "enough rows for several pages: {}", rows.len());

    for field in ["CREATED_AT", "NAME", "STATUS", "TYPE", "TERMINATED_AT", "ELAPSED"] {
        for desc in [false, true] {
            let direction = if desc { "DESC" } else { "ASC" };
            let filter = if field == "ELAPSED" { json!({"tab": "FINISHED"}) } else { json!({}) };
            let got =
                walk(&app, json!({"p": p, "order": [{"field": field, "direction": direction}], "filter": filter}), 37)
                    .await;
            if field == "ELAPSED" {
                let finished =
                    rows.iter().filter(|r| SessionStatus::parse(&r.status).is_some_and(|s| s.is_terminal())).count();
                assert_eq!(got.len(), finished);
                let secs: Vec<i64> = got.iter().map(|r| r.1).collect();
                let mut sorted = secs.clone();
                sorted.sort();
                if desc {
                    sorted.reverse();
                }
                assert_eq!(secs, sorted, "elapsed {direction}");
                continue;
            }
            let mut expected = rows.clone();
            expected.sort_by(|a, b| {
                let key = match field {
                    "CREATED_AT" => a.created_at.cmp(&b.created_at),
                    "NAME" => a.name.as_bytes().cmp(b.name.as_bytes()),
                    "STATUS" => rank(&LIFECYCLE, &a.status).cmp(&rank(&LIFECYCLE, &b.status)),
                    "TYPE" => rank(&TYPES, &a.session_type).cmp(&rank(&TYPES, &b.session_type)),
                    _ => a.terminated_at.unwrap_or_else(far_future).cmp(&b.terminated_at.unwrap_or_else(far_future)),
                };
                let ord = key.then(a.id.cmp(&b.id));
                if desc { ord.reverse() } else { ord }
            });
            let expected: Vec<Uuid> = expected.iter().map(|r| r.id).collect();
            assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), expected, "{field} {direction}");
        }
    }

    // Several keys: type ascending, then newest first, then id.
    let got = walk(
        &app,
        json!({"p": p, "order": [{"field": "TYPE", "direction": "ASC"}, {"field": "CREATED_AT", "direction": "DESC"}]}),
        50,
    )
    .await;
    let mut expected = rows.clone();
    expected.sort_by(|a, b| {
        let r = |s: &str| rank(&TYPES, s);
        r(&a.session_type).cmp(&r(&b.session_type)).then(b.created_at.cmp(&a.created_at)).then(a.id.cmp(&b.id))
    });
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), expected.iter().map(|r| r.id).collect::<Vec<_>>());

    // The default order is newest first.
    let got = walk(&app, json!({"p": p}), 60).await;
    let mut expected = rows.clone();
    expected.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), expected.iter().map(|r| r.id).collect::<Vec<_>>());
}

async fn every_filter_matches_and_counts_agree(app: TestApp) {
    app.generate(400, 9).await;
    // Project `default` also uses group `second`, where six sessions run or ran.
    add_resource_group(
        &app,
        "second",
        &TYPES,
        &[("b1", json!({"cpu": 4, "mem": 1_i64 << 34}))],
        &[("default/default", 1)],
    )
    .await;
    for (i, status) in ["PENDING", "RUNNING", "TERMINATED", "CANCELLED", "ERROR", "RUNNING"].into_iter().enumerate() {
        let owner = if i % 2 == 0 { "alice@example.com" } else { "bob@example.com" };
        let mut row = session_row(owner, "default/default", &format!("second-{i}"), status, json!({"cpu": 1}));
        row.resource_group = Set("second".to_owned());
        row.insert(&app.db).await.expect("a session in group second");
    }
    let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
    let rows = session::Entity::find()
        .filter(session::Column::ProjectId.eq(demo_project_id("default/default")))
        .all(&app.db)
        .await
        .expect("rows");
    let terminal = |r: &session::Model| SessionStatus::parse(&r.status).is_some_and(|s| s.is_terminal());
    let group = rows.iter().find_map(|r| r.launch_group_id).expect("a launch group in the project");
    let mut created: Vec<DateTime<Utc>> = rows.iter().map(|r| r.created_at).collect();
    created.sort();
    let (lo, hi) = (created[created.len() / 4], created[created.len() / 2]);
    let bob = demo_user_id("bob@example.com");

    let in_default = rows.iter().filter(|r| r.resource_group == "default").count();
    assert!(
        in_default > 100 && in_default + 6 == rows.len(),
        "the group filter narrows: {in_default} of {}",
        rows.len()
    );

    type Pred = Box<dyn Fn(&session::Model) -> bool>;
    let cases: Vec<(Value, Pred)> = vec![
        (json!({}), Box::new(|_| true)),
        (json!({"types": ["BATCH", "UPLOAD"]}), Box::new(|r| r.session_type == "BATCH" || r.session_type == "UPLOAD")),
        (json!({"tab": "RUNNING"}), Box::new(move |r| !terminal(r))),
        (json!({"tab": "FINISHED"}), Box::new(terminal)),
        (json!({"statuses": ["CANCELLED", "ERROR"]}), Box::new(|r| r.status == "CANCELLED" || r.status == "ERROR")),
        (json!({"tab": "FINISHED", "statuses": ["PENDING"]}), Box::new(|_| false)),
        (json!({"nameContains": "TRAIN"}), Box::new(|r| r.name.to_lowercase().contains("train"))),
        (json!({"nameContains": "_"}), Box::new(|r| r.name.contains('_'))),
        (json!({"nameContains": "%"}), Box::new(|r| r.name.contains('%'))),
        (json!({"resourceGroup": "default"}), Box::new(|r| r.resource_group == "default")),
        (json!({"resourceGroup": "second"}), Box::new(|r| r.resource_group == "second")),
        (json!({"resourceGroup": "nope"}), Box::new(|_| false)),
        (json!({"ownerEmail": "bob@example.com"}), Box::new(move |r| r.owner_id == bob)),
        (json!({"ownerEmail": "nobody@example.com"}), Box::new(|_| false)),
        (
            json!({"launchGroupId": encode(NodeKind::LaunchGroup, group).0}),
            Box::new(move |r| r.launch_group_id == Some(group)),
        ),
        (json!({"createdAfter": lo, "createdBefore": hi}), Box::new(move |r| r.created_at >= lo && r.created_at < hi)),
        (
            json!({"types": ["INTERACTIVE"], "tab": "FINISHED", "nameContains": "note"}),
            Box::new(move |r| r.session_type == "INTERACTIVE" && terminal(r) && r.name.contains("note")),
        ),
    ];
    for (filter, pred) in cases {
        let expected: HashSet<Uuid> = rows.iter().filter(|r| pred(r)).map(|r| r.id).collect();
        let got = walk(&app, json!({"p": p, "filter": filter}), 500).await;
        let got: HashSet<Uuid> = got.into_iter().map(|r| r.0).collect();
        assert_eq!(got, expected, "filter {filter}");

        let counts = app.gql(Some("demo-admin"), COUNTS, json!({"p": p, "filter": filter})).await;
        let c = &counts["data"]["sessionCounts"];
        let matching: Vec<&session::Model> = rows.iter().filter(|r| pred(r)).collect();
        assert_eq!(c["all"], json!(matching.len()), "{filter}: {counts}");
        assert_eq!(c["finished"], json!(matching.iter().filter(|r| terminal(r)).count()), "{filter}");
        assert_eq!(c["running"], json!(matching.iter().filter(|r| !terminal(r)).count()), "{filter}");
        let by_type: Vec<(String, i64)> = c["byType"]
            .as_array()
            .expect("byType")
            .iter()
            .map(|t| (t["type"].as_str().expect("type").to_owned(), t["count"].as_i64().expect("count")))
            .collect();
        let expected_types: Vec<(String, i64)> = TYPES
            .iter()
            .map(|t| ((*t).to_owned(), matching.iter().filter(|r| r.session_type == *t).count() as i64))
            .collect();
        assert_eq!(by_type, expected_types, "{filter}");
    }
}

/// ELAPSED over live and finished sessions together: a live session's elapsed time runs
/// to now, a finished one's stops at its end. Ages far apart, so the order is plain.
async fn elapsed_orders_live_and_finished_sessions_together(app: TestApp) {
    let now = Utc::now();
    let secs = TimeDelta::seconds;
    // (name, status, created this long ago, ended after this long)
    #[rustfmt::skip]
    let rows = [
        ("age-a", "RUNNING", secs(50), None),
        ("age-b", "TERMINATED", TimeDelta::days(10), Some(secs(100))),
        ("age-c", "PENDING", secs(2_000), None),
        ("age-d", "CANCELLED", TimeDelta::days(3), Some(secs(3_000))),
        ("age-e", "RUNNING", secs(50_000), None),
        ("age-f", "ERROR", TimeDelta::days(5), Some(secs(90_000))),
        ("age-g", "TERMINATING", secs(200_000), None),
        ("age-h", "TERMINATED", TimeDelta::hours(1), Some(secs(10))),
    ];
    let mut names = std::collections::HashMap::new();
    for (name, status, age, ran) in rows {
        let mut row = session_row("alice@example.com", "default/default", name, status, json!({"cpu": 1}));
        row.created_at = Set(now - age);
        row.terminated_at = Set(ran.map(|r| now - age + r));
        let id = row.insert(&app.db).await.expect("insert").id;
        names.insert(id, name);
    }
    // Shortest first: h (10 s), a (50 s, live), b (100 s), c (2000 s, live), d (3000 s),
    // e (50 000 s, live), f (90 000 s), g (200 000 s, live).
    let ascending = ["age-h", "age-a", "age-b", "age-c", "age-d", "age-e", "age-f", "age-g"];
    let p = encode(NodeKind::Project, demo_project_id("default/default")).0;
    for direction in ["ASC", "DESC"] {
        let vars = json!({"p": p, "order": [{"field": "ELAPSED", "direction": direction}], "filter": {"nameContains": "age-"}});
        let got = walk(&app, vars, 3).await;
        let order: Vec<&str> = got.iter().map(|r| names[&r.0]).collect();
        let mut expected = ascending.to_vec();
        if direction == "DESC" {
            expected.reverse();
        }
        assert_eq!(order, expected, "ELAPSED {direction}");
        let finished: Vec<(&str, i64)> = got
            .iter()
            .filter(|r| ["age-b", "age-d", "age-f", "age-h"].contains(&names[&r.0]))
            .map(|r| (names[&r.0], r.1))
            .collect();
        let mut finished_sorted = finished.clone();
        finished_sorted.sort();
        assert_eq!(
            finished_sorted,
            [("age-b", 100), ("age-d", 3_000), ("age-f", 90_000), ("age-h", 10)],
            "finished sessions stop their clock"
        );
    }
}

/// A page reads its rows by column position: each session and its owner come out exactly
/// as stored, every column told apart (ids of the same type included), in every order.
async fn a_page_reads_every_column_as_stored(app: TestApp) {
    use sessiond::domain::sessions::visibility::{SessionScope, scoped_project};
    use sessiond::domain::sessions::{SessionOrder, SessionOrderField, project_sessions};
    use sessiond::domain::store::paging::PageRequest;
    let mut row = session_row("bob@example.com", "default/default", "every-column", "RUNNING", json!({"cpu": 2}));
    row.status_info = Set(Some("info".into()));
    row.exit_code = Set(Some(7));
    row.agent_id = Set(Some("a2".into()));
    row.environment = Set(json!([{"name": "A", "value": "1"}]));
    row.startup_command = Set(Some("echo".into()));
    row.batch_timeout_seconds = Set(Some(60));
    row.priority = Set(3);
    row.cluster_size = Set(2);
    row.queue_position = Set(Some(4));
    row.pending_reasons = Set(json!([{"code": "NO_CAPACITY"}]));
    row.scheduled_at = Set(Some(Utc::now()));
    row.started_at = Set(Some(Utc::now()));
    row.insert(&app.db).await.expect("insert");
    let viewer = sessiond::domain::directory::auth::authenticate(&app.db, "demo-admin").await.expect("admin");
    let set = project_sessions(
        &app.db,
        None,
        &viewer,
        demo_project_id("default/default"),
        SessionScope::Project,
        &Default::default(),
    )
    .await
    .expect("set");
    // Read through the pool, and on SQLite also on the caller's thread (`domain::store::inline`):
    // the same rows and positions either way.
    let inline = sessiond::domain::store::inline::InlineReads::of(&app.db);
    assert_eq!(inline.is_some(), app.backend == crate::support::Backend::Sqlite, "a test database is a file");
    let read_inline = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    if let Some(inline) = &inline {
        let seen = read_inline.clone();
        inline.observe(move |_| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
    }
    for field in [SessionOrderField::CreatedAt, SessionOrderField::Name, SessionOrderField::Elapsed] {
        let orders = [SessionOrder { field, descending: false }];
        let request = PageRequest::new(Some(50), None, None, None).expect("request");
        let now = Utc::now();
        let page = set.page(&app.db, None, &orders, &request, now).await.expect("page");
        assert!(!page.rows.is_empty());
        for r in &page.rows {
            let stored = session::Entity::find_by_id(r.session.id).one(&app.db).await.expect("find").expect("row");
            assert_eq!(r.session, stored, "{field:?}");
            let owner =
                entity::user::Entity::find_by_id(stored.owner_id).one(&app.db).await.expect("find").expect("owner");
            assert_eq!(r.owner, owner);
        }
        if let Some(inline) = &inline {
            // The project a list starts from, and a user's membership, read both ways.
            for (token, scope) in [("demo-admin", SessionScope::Project), ("demo-alice", SessionScope::Mine)] {
                let viewer = sessiond::domain::directory::auth::authenticate(&app.db, token).await.expect("viewer");
                let p = demo_project_id("default/default");
                let pooled = scoped_project(&app.db, None, &viewer, p, scope).await.expect("pooled");
                let before = read_inline.load(std::sync::atomic::Ordering::SeqCst);
                let read = scoped_project(&app.db, Some(inline), &viewer, p, scope).await.expect("inline");
                assert_eq!(format!("{read:?}"), format!("{pooled:?}"));
                let statements = if scope == SessionScope::Mine { 2 } else { 1 };
                assert_eq!(read_inline.load(std::sync::atomic::Ordering::SeqCst), before + statements, "{token}");
            }
            let before = read_inline.load(std::sync::atomic::Ordering::SeqCst);
            let read = set.page(&app.db, Some(inline), &orders, &request, now).await.expect("page read inline");
            assert_eq!(read_inline.load(std::sync::atomic::Ordering::SeqCst), before + 1, "read inline, not declined");
            assert_eq!(format!("{:?}", read.rows), format!("{:?}", page.rows), "{field:?}");
            assert_eq!((read.has_next_page, read.has_previous_page), (page.has_next_page, page.has_previous_page));
        }
    }
}

db_tests!(
    a_page_reads_every_column_as_stored,
    every_order_pages_completely_both_ways,
    every_filter_matches_and_counts_agree,
    elapsed_orders_live_and_finished_sessions_together,
);

//! Launch and termination rules that need the database in a given shape: the dry run's
//! verdicts, the checks that depend on resource groups, idempotency keys that expire,
//! launch groups as nodes, and forced termination freeing capacity.

use chrono::{TimeDelta, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, Set, sea_query::Expr};
use serde_json::{Value, json};

use entity::{idempotency_key, resource_group_project, session};
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::graphql::ids::{NodeKind, decode_uuid, encode};

use crate::db_tests;
use crate::support::{TestApp, add_resource_group, error_codes, launch_input as input, project, session_row};

const GIB: i64 = 1 << 30;

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id name status resourceGroup { name } } } }";
const LAUNCH_MANY: &str = "mutation($i: LaunchSessionInput!, $n: Int!) {
  launchSessions(input: $i, count: $n) { launchGroup { id } sessions { id name } } }";
const CHECK: &str = "query($i: LaunchSessionInput!, $n: Int) {
  checkLaunch(input: $i, count: $n) { valid problems { code field } fitsNow pendingReasons { code layer slot requested remaining } } }";
const TERMINATE: &str = "mutation($ids: [ID!]!, $force: Boolean) {
  terminateSessions(ids: $ids, force: $force) { results { sessionId outcome session { status } } } }";
const DETAIL: &str = "query($id: ID!) { session(id: $id) {
  status terminatedAt agent pendingReasons { code } statusTransitions { fromStatus toStatus } } }";

async fn launch(app: &TestApp, token: &str, input: Value) -> Value {
    let resp = app.gql(Some(token), LAUNCH, json!({"i": input})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["launchSession"]["session"].clone()
}

async fn launch_id(app: &TestApp, token: &str, input: Value) -> String {
    launch(app, token, input).await["id"].as_str().expect("id").to_owned()
}

async fn check(app: &TestApp, token: &str, input: Value, count: i64) -> Value {
    let resp = app.gql(Some(token), CHECK, json!({"i": input, "n": count})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["checkLaunch"].clone()
}

async fn session_count(app: &TestApp) -> u64 {
    session::Entity::find().count(&app.db).await.expect("count")
}

async fn set_status(app: &TestApp, id: &str, status: &str) {
    session::Entity::update_many()
        .col_expr(session::Column::Status, Expr::value(status))
        .filter(session::Column::Id.eq(decode_uuid(id, NodeKind::Session).expect("session id")))
        .exec(&app.db)
        .await
        .expect("set status");
}

async fn detail(app: &TestApp, token: &str, id: &str) -> Value {
    let resp = app.gql(Some(token), DETAIL, json!({"id": id})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["session"].clone()
}

/// (code, field) of each problem of a BAD_USER_INPUT answer.
fn problem_codes(resp: &Value) -> Vec<(&str, &str)> {
    resp["errors"][0]["extensions"]["problems"]
        .as_array()
        .unwrap_or_else(|| panic!("no problems: {resp}"))
        .iter()
        .map(|p| (p["code"].as_str().expect("code"), p["field"].as_str().unwrap_or("<none>")))
        .collect()
}

fn fits() -> Value {
    json!({"valid": true, "problems": [], "fitsNow": true, "pendingReasons": []})
}

fn refused(problems: Value) -> Value {
    json!({"valid": false, "problems": problems, "fitsNow": false, "pendingReasons": []})
}

async fn check_launch_verdicts(app: TestApp) {
    // Alice's keypair allows 16 CPUs: one session fits, and two of 8 CPUs.
    assert_eq!(check(&app, "demo-alice", input("probe", 1.0), 1).await, fits());
    assert_eq!(check(&app, "demo-alice", input("probe", 8.0), 2).await, fits(), "count 2 fits");
    // A third one is valid but would wait over the keypair's CPU quota.
    assert_eq!(
        check(&app, "demo-alice", input("probe", 8.0), 3).await,
        json!({"valid": true, "problems": [], "fitsNow": false, "pendingReasons": [
            {"code": "QUOTA_EXCEEDED", "layer": "KEYPAIR", "slot": "cpu", "requested": 8.0, "remaining": 0.0},
        ]}),
        "count 3 does not fit"
    );

    // Bob fills a3, the only agent with 12 CPUs: 12 CPUs would wait for capacity.
    let mut row =
        session_row("bob@example.com", "default/default", "bob-a3", "RUNNING", json!({"cpu": 16, "mem": GIB}));
    row.agent_id = Set(Some("a3".to_owned()));
    row.insert(&app.db).await.expect("bob's session on a3");
    assert_eq!(
        check(&app, "demo-alice", input("probe", 12.0), 1).await,
        json!({"valid": true, "problems": [], "fitsNow": false, "pendingReasons": [
            {"code": "NO_CAPACITY", "layer": "RESOURCE_GROUP", "slot": null, "requested": null, "remaining": null},
        ]})
    );
    assert_eq!(check(&app, "demo-alice", input("probe", 8.0), 1).await, fits(), "a1 and a2 are free");

    // Refusals are problems: never fits, over the pending limit, bad input, bad count, name taken.
    assert_eq!(
        check(&app, "demo-alice", input("probe", 32.0), 1).await,
        refused(json!([{"code": "NEVER_FITS", "field": "input.resources[0]"}])),
        "at the amount no agent holds"
    );
    assert_eq!(
        check(&app, "demo-alice", input("probe", 1.0), 21).await,
        refused(json!([{"code": "QUOTA_EXCEEDED", "field": null}])),
        "20 pending sessions at most"
    );
    assert_eq!(
        check(&app, "demo-alice", input("probe", 0.5), 20).await,
        json!({"valid": true, "problems": [], "fitsNow": false, "pendingReasons": [
            {"code": "CONCURRENCY_LIMIT", "layer": "KEYPAIR", "slot": null, "requested": 1.0, "remaining": 0.0},
        ]}),
        "20 may be pending, but only 10 run at once"
    );
    let mut bad = input("ab", 1.0);
    bad["image"] = json!("nope:1");
    assert_eq!(
        check(&app, "demo-alice", bad, 1).await,
        refused(
            json!([{"code": "INVALID_NAME", "field": "input.name"}, {"code": "UNKNOWN_IMAGE", "field": "input.image"}])
        )
    );
    assert_eq!(
        check(&app, "demo-alice", input("probe", 1.0), 101).await,
        refused(json!([{"code": "OUT_OF_RANGE", "field": "count"}]))
    );
    launch(&app, "demo-alice", input("taken", 1.0)).await;
    assert_eq!(
        check(&app, "demo-alice", input("taken", 1.0), 1).await,
        refused(json!([{"code": "NAME_TAKEN", "field": "input.name"}]))
    );
    assert_eq!(session_count(&app).await, 2, "a dry run writes nothing: bob's row and `taken`");
}

async fn rules_that_depend_on_resource_groups(app: TestApp) {
    // Group `batch-only` takes batch sessions of project `default` only.
    add_resource_group(
        &app,
        "batch-only",
        &["BATCH"],
        &[("b1", json!({"cpu": 4, "mem": 16 * GIB}))],
        &[("default/default", 1)],
    )
    .await;
    let mut i = input("in-batch-only", 1.0);
    i["resourceGroup"] = json!("batch-only");
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(problem_codes(&resp), [("TYPE_NOT_ALLOWED", "input.resourceGroup")]);
    // An explicit, allowed group is taken; without one, the project's first.
    i["type"] = json!("BATCH");
    i["startupCommand"] = json!("x".repeat(8192));
    let s = launch(&app, "demo-alice", i).await;
    assert_eq!((s["name"].as_str(), s["resourceGroup"]["name"].as_str()), (Some("in-batch-only"), Some("batch-only")));
    let mut i = input("explicit-default", 1.0);
    i["resourceGroup"] = json!("default");
    i["environment"] = json!((0..100).map(|n| json!({"name": format!("V{n}"), "value": "1"})).collect::<Vec<_>>());
    assert_eq!(launch(&app, "demo-alice", i).await["resourceGroup"]["name"], "default", "100 variables are allowed");
    assert_eq!(launch(&app, "demo-alice", input("implicit", 1.0)).await["resourceGroup"]["name"], "default");

    // A project offered no group cannot launch.
    resource_group_project::Entity::delete_many()
        .filter(resource_group_project::Column::ProjectId.eq(demo_project_id("default/research")))
        .exec(&app.db)
        .await
        .expect("unlink research");
    let mut i = input("nowhere", 1.0);
    i["projectId"] = json!(project("default/research"));
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(problem_codes(&resp), [("NO_RESOURCE_GROUP", "input.resourceGroup")]);

    // At most 500 sessions per termination.
    let ids: Vec<String> = (0..501).map(|_| encode(NodeKind::Session, uuid::Uuid::new_v4()).0).collect();
    let resp = app.gql(Some("demo-alice"), TERMINATE, json!({"ids": ids})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(resp["errors"][0]["extensions"]["problems"][0]["code"], "TOO_MANY");
    assert_eq!(resp["errors"][0]["extensions"]["field"], "ids");
    let resp = app.gql(Some("demo-alice"), TERMINATE, json!({"ids": &ids[..500]})).await;
    let results = resp["data"]["terminateSessions"]["results"].as_array().unwrap_or_else(|| panic!("{resp}"));
    assert_eq!(results.len(), 500);
    assert!(results.iter().all(|r| r["outcome"] == "NOT_FOUND"));
    assert_eq!(session_count(&app).await, 3);
}

async fn age_idempotency_keys(app: &TestApp, hours: i64) {
    idempotency_key::Entity::update_many()
        .col_expr(idempotency_key::Column::CreatedAt, Expr::value(Utc::now() - TimeDelta::hours(hours)))
        .exec(&app.db)
        .await
        .expect("age the keys");
}

async fn an_idempotency_key_expires_after_a_day(app: TestApp) {
    let mut i = input("keyed", 1.0);
    i["idempotencyKey"] = json!("key-1");
    let first = launch_id(&app, "demo-alice", i.clone()).await;
    age_idempotency_keys(&app, 23).await;
    assert_eq!(launch_id(&app, "demo-alice", i.clone()).await, first, "after 23 hours a retry still replays");
    assert_eq!(session_count(&app).await, 1);

    // The session ends; a day later the same request is a new launch.
    let resp = app.gql(Some("demo-alice"), TERMINATE, json!({"ids": [first]})).await;
    assert_eq!(resp["data"]["terminateSessions"]["results"][0]["outcome"], "CANCELLED", "{resp}");
    age_idempotency_keys(&app, 25).await;
    let second = launch_id(&app, "demo-alice", i.clone()).await;
    assert_ne!(second, first, "a key older than 24 hours no longer replays");
    assert_eq!(session_count(&app).await, 2);
    assert_eq!(launch_id(&app, "demo-alice", i).await, second, "the key now replays the new launch");
    assert_eq!(idempotency_key::Entity::find().count(&app.db).await.expect("count"), 1, "the old row is gone");
}

async fn a_launch_group_is_a_node_its_owner_can_page(app: TestApp) {
    let resp = app.gql(Some("demo-alice"), LAUNCH_MANY, json!({"i": input("grp-a", 0.5), "n": 7})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let group = resp["data"]["launchSessions"]["launchGroup"]["id"].as_str().expect("group id").to_owned();
    let mut launched: Vec<String> = resp["data"]["launchSessions"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_owned())
        .collect();
    launched.sort();
    assert_eq!(launched.len(), 7);

    let node = "query($id: ID!) { node(id: $id) { id ... on LaunchGroup { name count } } }";
    for (token, visible) in
        [("demo-alice", true), ("demo-admin", true), ("demo-root", true), ("demo-bob", false), ("demo-carol", false)]
    {
        let resp = app.gql(Some(token), node, json!({"id": group})).await;
        assert!(resp.get("errors").is_none(), "{token}: {resp}");
        let expected = if visible { json!({"id": group, "name": "grp-a", "count": 7}) } else { Value::Null };
        assert_eq!(resp["data"]["node"], expected, "{token}");
    }

    // Pages of 3 cover every session of the group once.
    let page = "query($id: ID!, $after: String) { node(id: $id) { ... on LaunchGroup {
      sessions(first: 3, after: $after) { totalCount pageInfo { hasNextPage endCursor } edges { node { id } } } } } }";
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let resp = app.gql(Some("demo-alice"), page, json!({"id": group, "after": after})).await;
        let conn = &resp["data"]["node"]["sessions"];
        assert_eq!(conn["totalCount"], 7, "{resp}");
        let edges = conn["edges"].as_array().expect("edges");
        sizes.push(edges.len());
        seen.extend(edges.iter().map(|e| e["node"]["id"].as_str().expect("id").to_owned()));
        if conn["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = conn["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
    assert_eq!(sizes, [3, 3, 1]);
    seen.sort();
    assert_eq!(seen, launched, "every session once");
}

/// Force ends RUNNING and PREPARING sessions at once (a PENDING one is cancelled), and the
/// capacity they held goes to a session that did not fit.
async fn force_ends_sessions_at_once_and_frees_capacity(app: TestApp) {
    use sessiond::domain::scheduling::pass;
    // Alice's 16 CPUs can only go to a3, bob's 8 and 8 to a1 and a2: the group is full.
    let running = launch_id(&app, "demo-alice", input("hog-run", 16.0)).await;
    let preparing = launch_id(&app, "demo-bob", input("hog-prep", 8.0)).await;
    let scheduled = launch_id(&app, "demo-bob", input("hog-sched", 8.0)).await;
    assert_eq!(pass(&app.db, &app.bus).await.expect("pass").scheduled, 3);
    set_status(&app, &running, "RUNNING").await;
    set_status(&app, &preparing, "PREPARING").await;
    assert_eq!(detail(&app, "demo-alice", &running).await["agent"], "a3");
    // 12 CPUs fit only a3; behind it, a small session of alice's waits too.
    let waiter = launch_id(&app, "demo-admin", input("waiter", 12.0)).await;
    let pending = launch_id(&app, "demo-alice", input("queued", 1.0)).await;
    let report = pass(&app.db, &app.bus).await.expect("pass");
    assert_eq!((report.scheduled, report.waiting), (0, 2));
    assert_eq!(detail(&app, "demo-admin", &waiter).await["pendingReasons"], json!([{"code": "NO_CAPACITY"}]));

    let resp =
        app.gql(Some("demo-admin"), TERMINATE, json!({"ids": [running, preparing, pending], "force": true})).await;
    let outcomes: Vec<(&str, &str)> = resp["data"]["terminateSessions"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{resp}"))
        .iter()
        .map(|r| (r["outcome"].as_str().expect("outcome"), r["session"]["status"].as_str().expect("status")))
        .collect();
    assert_eq!(outcomes, [("TERMINATED", "TERMINATED"), ("TERMINATED", "TERMINATED"), ("CANCELLED", "CANCELLED")]);
    for (token, id, from, to) in [
        ("demo-alice", &running, "RUNNING", "TERMINATED"),
        ("demo-bob", &preparing, "PREPARING", "TERMINATED"),
        ("demo-alice", &pending, "PENDING", "CANCELLED"),
    ] {
        let s = detail(&app, token, id).await;
        assert_eq!(s["status"], to);
        assert!(s["terminatedAt"].is_string(), "{s}");
        let last = s["statusTransitions"].as_array().expect("transitions").last().cloned();
        assert_eq!(last, Some(json!({"fromStatus": from, "toStatus": to})), "{s}");
    }
    assert_eq!(detail(&app, "demo-bob", &scheduled).await["status"], "SCHEDULED", "untouched");

    // The freed a3 takes the waiting session.
    let report = pass(&app.db, &app.bus).await.expect("pass");
    assert_eq!((report.scheduled, report.waiting), (1, 0));
    let s = detail(&app, "demo-admin", &waiter).await;
    assert_eq!((s["status"].as_str(), s["agent"].as_str()), (Some("SCHEDULED"), Some("a3")));
}

db_tests!(
    check_launch_verdicts,
    rules_that_depend_on_resource_groups,
    an_idempotency_key_expires_after_a_day,
    a_launch_group_is_a_node_its_owner_can_page,
    force_ends_sessions_at_once_and_frees_capacity,
);

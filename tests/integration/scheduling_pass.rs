//! One scheduling pass at a time against the database (`scheduling::pass_reading` as the
//! server runs it, no workers):
//! priority, the FIFO, LIFO and DRF strategies, the concurrency limit, head-of-line
//! blocking within a priority band, queue positions, and the PostgreSQL scheduler lock.

use chrono::{TimeDelta, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectOptions, ConnectionTrait, Database, EntityTrait, QueryFilter, Set,
};
use serde_json::{Value, json};

use entity::{agent, keypair_resource_policy, resource_group, session};
use sessiond::domain::directory::seed::demo_project_id;
use sessiond::domain::scheduling::{PassReport, pass_reading};
use sessiond::graphql::ids::{NodeKind, decode_uuid, encode};

use crate::db_tests;
use crate::support::{Backend, TestApp, session_row};

const GIB: i64 = 1 << 30;

/// The scheduler's advisory lock key (`SCHEDULER_LOCK` in `domain/scheduling.rs`).
const SCHEDULER_LOCK: i64 = 0x7365_7373_696f_6e64;

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const DETAIL: &str = "query($id: ID!) { session(id: $id) {
  status agent queuePosition pendingReasons { code layer slot requested remaining } } }";

/// A launch of `cpu` CPUs and 1 GiB in project `default`, at `priority`, created
/// `age_secs` ago (so that creation order does not depend on timing).
async fn launch(app: &TestApp, token: &str, name: &str, cpu: f64, priority: i32, age_secs: i64) -> String {
    let input = json!({
        "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0, "name": name,
        "image": "python:3.12", "priority": priority,
        "resources": [{"slot": "cpu", "amount": cpu}, {"slot": "mem", "amount": GIB}],
    });
    let resp = app.gql(Some(token), LAUNCH, json!({"i": input})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    session::Entity::update_many()
        .col_expr(session::Column::CreatedAt, Expr::value(Utc::now() - TimeDelta::seconds(age_secs)))
        .filter(session::Column::Id.eq(decode_uuid(&id, NodeKind::Session).expect("id")))
        .exec(&app.db)
        .await
        .expect("set the creation time");
    id
}

/// A pass as the server's scheduler runs it: on SQLite the waiting sessions read inline.
async fn run_pass(app: &TestApp) -> PassReport {
    pass_reading(&app.db, app.inline.as_ref(), &app.bus).await.expect("scheduling pass")
}

async fn detail(app: &TestApp, id: &str) -> Value {
    let resp = app.gql(Some("demo-admin"), DETAIL, json!({"id": id})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["session"].clone()
}

/// (status, agent, queue position, reason codes)
async fn state(app: &TestApp, id: &str) -> (String, Option<String>, Option<i64>, Vec<String>) {
    let s = detail(app, id).await;
    (
        s["status"].as_str().expect("status").to_owned(),
        s["agent"].as_str().map(str::to_owned),
        s["queuePosition"].as_i64(),
        s["pendingReasons"]
            .as_array()
            .expect("reasons")
            .iter()
            .map(|r| r["code"].as_str().expect("code").to_owned())
            .collect(),
    )
}

fn scheduled_on(agent: &str) -> (String, Option<String>, Option<i64>, Vec<String>) {
    ("SCHEDULED".to_owned(), Some(agent.to_owned()), None, Vec::new())
}

fn waiting(position: i64, codes: &[&str]) -> (String, Option<String>, Option<i64>, Vec<String>) {
    ("PENDING".to_owned(), None, Some(position), codes.iter().map(|c| (*c).to_owned()).collect())
}

/// Leaves a3 (16 CPUs, 64 GiB) the only schedulable agent of group `default`.
async fn only_a3(app: &TestApp) {
    agent::Entity::update_many()
        .col_expr(agent::Column::Schedulable, Expr::value(false))
        .filter(agent::Column::Id.is_in(["a1", "a2"]))
        .exec(&app.db)
        .await
        .expect("drain a1 and a2");
}

async fn set_strategy(app: &TestApp, strategy: &str) {
    resource_group::Entity::update_many()
        .col_expr(resource_group::Column::Scheduler, Expr::value(strategy))
        .filter(resource_group::Column::Name.eq("default"))
        .exec(&app.db)
        .await
        .expect("set the strategy");
}

/// A RUNNING session of `email` holding `cpu` CPUs and 1 GiB on `agent`.
async fn held(app: &TestApp, email: &str, agent: &str, cpu: f64) {
    let mut row = session_row(
        email,
        "default/default",
        &format!("held-{}", uuid::Uuid::new_v4().simple()),
        "RUNNING",
        json!({"cpu": cpu, "mem": GIB}),
    );
    row.agent_id = Set(Some(agent.to_owned()));
    row.insert(&app.db).await.expect("a running session");
}

async fn higher_priority_goes_first(app: TestApp) {
    only_a3(&app).await;
    // The older one would go first by FIFO; the higher priority wins.
    let low = launch(&app, "demo-alice", "low-prio", 12.0, 0, 60).await;
    let high = launch(&app, "demo-bob", "high-prio", 12.0, 10, 0).await;
    let report = run_pass(&app).await;
    assert_eq!((report.scheduled, report.waiting, report.skipped), (1, 1, false));
    assert_eq!(state(&app, &high).await, scheduled_on("a3"));
    assert_eq!(state(&app, &low).await, waiting(1, &["NO_CAPACITY"]));
}

async fn fifo_and_lifo_take_the_band_in_opposite_orders(app: TestApp) {
    only_a3(&app).await;
    let f_old = launch(&app, "demo-alice", "fifo-old", 12.0, 0, 60).await;
    let f_new = launch(&app, "demo-bob", "fifo-new", 12.0, 0, 30).await;
    assert_eq!(run_pass(&app).await.scheduled, 1);
    assert_eq!(state(&app, &f_old).await, scheduled_on("a3"), "FIFO: the oldest first");
    assert_eq!(state(&app, &f_new).await, waiting(1, &["NO_CAPACITY"]));

    // LIFO, a3 freed, and a newer session: the newest goes first.
    set_strategy(&app, "LIFO").await;
    assert_eq!(crate::support::force_terminate(&app, "demo-alice", &f_old).await, "TERMINATED");
    let l_new = launch(&app, "demo-admin", "lifo-newest", 12.0, 0, 0).await;
    assert_eq!(run_pass(&app).await.scheduled, 1);
    assert_eq!(state(&app, &l_new).await, scheduled_on("a3"), "LIFO: the newest first");
    assert_eq!(state(&app, &f_new).await, waiting(1, &["NO_CAPACITY"]));
    let groups = app
        .gql(
            Some("demo-alice"),
            "query($p: ID!) { resourceGroups(projectId: $p) { name strategy } }",
            json!({"p": encode(NodeKind::Project, demo_project_id("default/default")).0}),
        )
        .await;
    assert_eq!(groups["data"]["resourceGroups"], json!([{"name": "default", "strategy": "LIFO"}]));
}

async fn drf_serves_the_smallest_share_first(app: TestApp) {
    only_a3(&app).await;
    set_strategy(&app, "DRF").await;
    // Alice already holds 4 of a3's 16 CPUs (a share of 1/4); bob holds nothing.
    held(&app, "alice@example.com", "a3", 4.0).await;
    let alice_next = launch(&app, "demo-alice", "alice-next", 12.0, 0, 60).await;
    let bob_next = launch(&app, "demo-bob", "bob-next", 12.0, 0, 0).await;
    let report = run_pass(&app).await;
    assert_eq!((report.scheduled, report.waiting), (1, 1));
    assert_eq!(state(&app, &bob_next).await, scheduled_on("a3"), "bob's share is smaller, though he came later");
    assert_eq!(state(&app, &alice_next).await, waiting(1, &["NO_CAPACITY"]));
}

async fn the_concurrency_limit_blocks_only_its_keypair(app: TestApp) {
    keypair_resource_policy::Entity::update_many()
        .col_expr(keypair_resource_policy::Column::MaxConcurrentSessions, Expr::value(1))
        .exec(&app.db)
        .await
        .expect("one session at a time");
    held(&app, "alice@example.com", "a1", 1.0).await;
    let alice_second = launch(&app, "demo-alice", "alice-second", 1.0, 0, 60).await;
    let bob_first = launch(&app, "demo-bob", "bob-first", 1.0, 0, 0).await;
    let report = run_pass(&app).await;
    assert_eq!((report.scheduled, report.waiting), (1, 1));
    assert_eq!(state(&app, &bob_first).await.0, "SCHEDULED", "behind a concurrency failure nobody waits");
    let s = detail(&app, &alice_second).await;
    assert_eq!((s["status"].as_str(), s["queuePosition"].as_i64()), (Some("PENDING"), Some(1)));
    assert_eq!(
        s["pendingReasons"],
        json!([{"code": "CONCURRENCY_LIMIT", "layer": "KEYPAIR", "slot": null, "requested": 1.0, "remaining": 0.0}])
    );
}

async fn no_capacity_blocks_its_priority_band_only(app: TestApp) {
    only_a3(&app).await;
    held(&app, "bob@example.com", "a3", 8.0).await; // 8 CPUs of a3 are free
    // Band 0, oldest first: bob's `over` is over his keypair's CPUs (8 held + 9 > 16) and
    // does not fit either, but a quota failure blocks nobody; alice's `big` does not fit
    // and blocks `small` behind it, which alone would fit.
    let over = launch(&app, "demo-bob", "over-quota", 9.0, 0, 90).await;
    let big = launch(&app, "demo-alice", "big-one", 12.0, 0, 60).await;
    let small = launch(&app, "demo-alice", "small-one", 1.0, 0, 30).await;
    // Other bands are not blocked by band 0.
    let urgent = launch(&app, "demo-admin", "urgent", 1.0, 5, 0).await;
    let later = launch(&app, "demo-admin", "later", 1.0, -5, 0).await;
    let report = run_pass(&app).await;
    assert_eq!((report.scheduled, report.waiting), (2, 3));
    assert_eq!(state(&app, &urgent).await, scheduled_on("a3"));
    assert_eq!(state(&app, &later).await, scheduled_on("a3"));
    assert_eq!(state(&app, &over).await, waiting(1, &["QUOTA_EXCEEDED", "NO_CAPACITY"]));
    assert_eq!(
        detail(&app, &over).await["pendingReasons"][0],
        json!({"code": "QUOTA_EXCEEDED", "layer": "KEYPAIR", "slot": "cpu", "requested": 9.0, "remaining": 8.0})
    );
    assert_eq!(state(&app, &big).await, waiting(2, &["NO_CAPACITY"]));
    assert_eq!(state(&app, &small).await, waiting(3, &["QUEUED_BEHIND"]));
    assert_eq!(
        detail(&app, &small).await["pendingReasons"],
        json!([{"code": "QUEUED_BEHIND", "layer": null, "slot": null, "requested": null, "remaining": null}])
    );
}

async fn queue_positions_move_up_when_the_head_is_cancelled(app: TestApp) {
    only_a3(&app).await;
    held(&app, "bob@example.com", "a3", 16.0).await; // nothing is free
    let p1 = launch(&app, "demo-alice", "queue-1", 1.0, 0, 30).await;
    let p2 = launch(&app, "demo-alice", "queue-2", 1.0, 0, 20).await;
    let p3 = launch(&app, "demo-alice", "queue-3", 1.0, 0, 10).await;
    assert_eq!(state(&app, &p1).await.2, None, "no position before the first pass");
    assert_eq!(run_pass(&app).await.waiting, 3);
    assert_eq!(state(&app, &p1).await, waiting(1, &["NO_CAPACITY"]));
    assert_eq!(state(&app, &p2).await, waiting(2, &["QUEUED_BEHIND"]));
    assert_eq!(state(&app, &p3).await, waiting(3, &["QUEUED_BEHIND"]));

    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }",
            json!({"ids": [p1]}),
        )
        .await;
    assert_eq!(resp["data"]["terminateSessions"]["results"][0]["outcome"], "CANCELLED", "{resp}");
    assert_eq!(run_pass(&app).await.waiting, 2);
    assert_eq!(state(&app, &p1).await.2, None, "a cancelled session has no place");
    assert_eq!(state(&app, &p2).await, waiting(1, &["NO_CAPACITY"]));
    assert_eq!(state(&app, &p3).await, waiting(2, &["QUEUED_BEHIND"]));
}

/// A new priority (`modifySessions`) is taken at the next pass: the queue reorders.
async fn a_new_priority_moves_the_queue(app: TestApp) {
    only_a3(&app).await;
    held(&app, "bob@example.com", "a3", 16.0).await; // nothing is free
    let p1 = launch(&app, "demo-alice", "line-1", 1.0, 0, 30).await;
    let p2 = launch(&app, "demo-alice", "line-2", 1.0, 0, 20).await;
    let p3 = launch(&app, "demo-alice", "line-3", 1.0, 0, 10).await;
    assert_eq!(run_pass(&app).await.waiting, 3);
    assert_eq!(state(&app, &p3).await.2, Some(3));
    let modify = |token: &'static str, id: String, priority: i32| {
        let app = &app;
        async move {
            let resp = app
                .gql(
                    Some(token),
                    "mutation($ids: [ID!]!, $p: Int) { modifySessions(ids: $ids, input: {priority: $p}) { results { outcome } } }",
                    json!({"ids": [id], "p": priority}),
                )
                .await;
            assert_eq!(resp["data"]["modifySessions"]["results"][0]["outcome"], "MODIFIED", "{resp}");
        }
    };
    modify("demo-admin", p3.clone(), 10).await;
    modify("demo-alice", p1.clone(), -1).await;
    assert_eq!(state(&app, &p3).await.2, Some(3), "the place moves at the next pass, not before");
    assert_eq!(run_pass(&app).await.waiting, 3);
    assert_eq!(state(&app, &p3).await, waiting(1, &["NO_CAPACITY"]));
    assert_eq!(state(&app, &p2).await, waiting(2, &["NO_CAPACITY"]));
    assert_eq!(state(&app, &p1).await, waiting(3, &["NO_CAPACITY"]));
}

/// A batch session set to start later waits for it (NOT_YET, no place in the queue), and is
/// scheduled at the first pass after it; only batch sessions have a start time, at most a
/// year ahead; the dry run says it will wait.
async fn a_batch_session_waits_for_its_start_time(app: TestApp) {
    let later = (Utc::now() + TimeDelta::hours(1)).to_rfc3339();
    let input = |ty: &str, at: &str| {
        json!({
            "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0, "name": "nightly",
            "image": "python:3.12", "type": ty, "startsAt": at, "startupCommand": "make nightly",
            "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": GIB}],
        })
    };
    let resp = app
        .gql(
            Some("demo-alice"),
            "query($i: LaunchSessionInput!) { checkLaunch(input: $i) { fitsNow pendingReasons { code } } }",
            json!({"i": input("BATCH", &later)}),
        )
        .await;
    assert_eq!(
        resp["data"]["checkLaunch"],
        json!({"fitsNow": false, "pendingReasons": [{"code": "NOT_YET"}]}),
        "{resp}"
    );
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input("BATCH", &later)})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    assert_eq!(run_pass(&app).await.waiting, 1);
    assert_eq!(state(&app, &id).await, ("PENDING".to_owned(), None, None, vec!["NOT_YET".to_owned()]));
    // Its time comes: the next pass schedules it.
    session::Entity::update_many()
        .col_expr(session::Column::StartsAt, Expr::value(Utc::now() - TimeDelta::seconds(1)))
        .filter(session::Column::Id.eq(decode_uuid(&id, NodeKind::Session).expect("id")))
        .exec(&app.db)
        .await
        .expect("move the start time");
    assert_eq!(run_pass(&app).await.scheduled, 1);
    assert_eq!(state(&app, &id).await.0, "SCHEDULED");

    for (ty, at, code) in [
        ("INTERACTIVE", later.clone(), "ONLY_BATCH"),
        ("BATCH", (Utc::now() + TimeDelta::days(400)).to_rfc3339(), "OUT_OF_RANGE"),
        // Before year 1: outside the years every time given may take.
        ("BATCH", "0000-06-01T00:00:00Z".to_owned(), "OUT_OF_RANGE"),
    ] {
        let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input(ty, &at)})).await;
        let problem = &resp["errors"][0]["extensions"]["problems"][0];
        assert_eq!(
            (problem["code"].as_str(), problem["field"].as_str()),
            (Some(code), Some("input.startsAt")),
            "{resp}"
        );
    }
}

/// A batch session that depends on others waits (DEPENDENCY, no place in the queue) until
/// each has TERMINATED with SUCCESS, and is cancelled when one ends otherwise; only sessions
/// of its project the caller may see can be named.
async fn a_batch_session_waits_for_what_it_depends_on(app: TestApp) {
    let input = |name: &str, ty: &str, deps: Value| {
        json!({
            "projectId": encode(NodeKind::Project, demo_project_id("default/default")).0, "name": name,
            "image": "python:3.12", "type": ty, "startupCommand": "make", "dependsOn": deps,
            "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": GIB}],
        })
    };
    let launch = |token: &'static str, i: Value| {
        let app = &app;
        async move {
            let resp = app.gql(Some(token), LAUNCH, json!({"i": i})).await;
            resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
        }
    };
    let first = launch("demo-alice", input("prepare", "BATCH", json!([]))).await;
    let resp = app
        .gql(
            Some("demo-alice"),
            "query($i: LaunchSessionInput!) { checkLaunch(input: $i) { fitsNow pendingReasons { code } } }",
            json!({"i": input("train", "BATCH", json!([first]))}),
        )
        .await;
    assert_eq!(
        resp["data"]["checkLaunch"],
        json!({"fitsNow": false, "pendingReasons": [{"code": "DEPENDENCY"}]}),
        "{resp}"
    );
    let then = launch("demo-alice", input("train", "BATCH", json!([first]))).await;
    let doomed = launch("demo-alice", input("doomed", "BATCH", json!([]))).await;
    let after_doomed = launch("demo-alice", input("after-doomed", "BATCH", json!([doomed, first]))).await;

    assert_eq!(run_pass(&app).await.scheduled, 2, "the two without dependencies");
    assert_eq!(state(&app, &then).await, ("PENDING".to_owned(), None, None, vec!["DEPENDENCY".to_owned()]));
    let resp = app
        .gql(
            Some("demo-alice"),
            "query($a: ID!, $b: ID!) { a: session(id: $a) { dependents { name } }
               b: session(id: $b) { dependsOn { name } pendingReasons { message } } }",
            json!({"a": first, "b": after_doomed}),
        )
        .await;
    assert_eq!(resp["data"]["a"]["dependents"], json!([{"name": "train"}, {"name": "after-doomed"}]), "{resp}");
    assert_eq!(resp["data"]["b"]["dependsOn"], json!([{"name": "prepare"}, {"name": "doomed"}]), "{resp}");
    assert_eq!(resp["data"]["b"]["pendingReasons"][0]["message"], "waiting for prepare, doomed to succeed");

    // One succeeds: what waited for it alone goes; one fails: what waited for it is cancelled.
    for (id, status, result) in [(&first, "TERMINATED", "SUCCESS"), (&doomed, "ERROR", "FAILURE")] {
        session::Entity::update_many()
            .col_expr(session::Column::Status, Expr::value(status))
            .col_expr(session::Column::Result, Expr::value(result))
            .filter(session::Column::Id.eq(decode_uuid(id, NodeKind::Session).expect("id")))
            .exec(&app.db)
            .await
            .expect("end it");
    }
    assert_eq!(run_pass(&app).await.scheduled, 1);
    assert_eq!(state(&app, &then).await.0, "SCHEDULED");
    let resp = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { status statusInfo statusChangedBy { kind rule } } }",
            json!({"id": after_doomed}),
        )
        .await;
    assert_eq!(
        resp["data"]["session"],
        json!({"status": "CANCELLED", "statusInfo": "dependency failed: doomed",
               "statusChangedBy": {"kind": "SYSTEM", "rule": "dependency"}}),
        "{resp}"
    );

    // Only sessions of its project the caller may see, for batch sessions only.
    let bobs = launch("demo-bob", input("bobs-own", "BATCH", json!([]))).await;
    for (i, field, code) in [
        (input("theirs", "BATCH", json!([bobs])), "input.dependsOn[0]", "UNKNOWN_DEPENDENCY"),
        (input("nowhere", "BATCH", json!([first, "garbage"])), "input.dependsOn[1]", "UNKNOWN_DEPENDENCY"),
        (input("chatty", "INTERACTIVE", json!([first])), "input.dependsOn", "ONLY_BATCH"),
    ] {
        let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": i})).await;
        let problem = &resp["errors"][0]["extensions"]["problems"][0];
        assert_eq!((problem["code"].as_str(), problem["field"].as_str()), (Some(code), Some(field)), "{resp}");
    }
}

/// On PostgreSQL, a pass while another replica holds the scheduler lock does nothing.
async fn a_held_scheduler_lock_skips_the_pass(app: TestApp) {
    let id = launch(&app, "demo-alice", "locked-out", 1.0, 0, 0).await;
    match app.backend {
        Backend::Postgres => {
            // Another replica: its own connection, holding the lock for its session.
            let mut opts = ConnectOptions::new(app.url.clone());
            opts.max_connections(1).min_connections(1).sqlx_logging(false);
            let replica = Database::connect(opts).await.expect("second connection");
            replica.execute_unprepared(&format!("SELECT pg_advisory_lock({SCHEDULER_LOCK})")).await.expect("lock");
            let report = run_pass(&app).await;
            assert_eq!(report, PassReport { skipped: true, ..Default::default() });
            assert_eq!(state(&app, &id).await, ("PENDING".to_owned(), None, None, Vec::new()), "untouched");
            replica.execute_unprepared(&format!("SELECT pg_advisory_unlock({SCHEDULER_LOCK})")).await.expect("unlock");
            replica.close().await.expect("close");
        }
        // SQLite has one writer by construction and no scheduler lock.
        Backend::Sqlite => {}
    }
    let report = run_pass(&app).await;
    assert_eq!((report.scheduled, report.skipped), (1, false));
    assert_eq!(state(&app, &id).await.0, "SCHEDULED");
}

/// A group whose stored strategy is not one of ours is not scheduled by a rule nobody
/// chose: its sessions keep waiting, other groups are served, and the API reports the
/// broken record as an internal error rather than guessing.
async fn an_unknown_strategy_schedules_nothing_in_its_group(app: TestApp) {
    let waiting = launch(&app, "demo-alice", "stuck", 1.0, 0, 10).await;
    let carols =
        session_row("carol@other.example", "other/other", "elsewhere", "PENDING", json!({"cpu": 1, "mem": GIB}));
    let carols = carols.insert(&app.db).await.expect("carol's pending session").id;
    resource_group::Entity::update_many()
        .col_expr(resource_group::Column::Scheduler, Expr::value("ROUND_ROBIN"))
        .filter(resource_group::Column::Name.eq("default"))
        .exec(&app.db)
        .await
        .expect("break the strategy");
    let report = run_pass(&app).await;
    assert_eq!((report.scheduled, report.skipped), (1, false), "only group `other` is scheduled");
    assert_eq!(detail(&app, &waiting).await["status"], "PENDING");
    let carols = session::Entity::find_by_id(carols).one(&app.db).await.expect("read").expect("carol's session");
    assert_eq!((carols.status.as_str(), carols.agent_id.as_deref()), ("SCHEDULED", Some("o1")));
    let resp = app
        .gql(
            Some("demo-alice"),
            "query($p: ID!) { resourceGroups(projectId: $p) { name strategy } }",
            json!({"p": encode(NodeKind::Project, demo_project_id("default/default")).0}),
        )
        .await;
    assert_eq!(crate::support::error_codes(&resp), ["INTERNAL"], "{resp}");
    resource_group::Entity::update_many()
        .col_expr(resource_group::Column::Scheduler, Expr::value("FIFO"))
        .filter(resource_group::Column::Name.eq("default"))
        .exec(&app.db)
        .await
        .expect("repair the strategy");
    assert_eq!(run_pass(&app).await.scheduled, 1);
    assert_eq!(detail(&app, &waiting).await["status"], "SCHEDULED");
}

/// (session, attempts, error code, updated at) of every line of history, in order.
async fn history_lines(app: &TestApp) -> Vec<(uuid::Uuid, i32, Option<String>, chrono::DateTime<Utc>)> {
    use sea_orm::QueryOrder;
    entity::scheduling_history::Entity::find()
        .order_by_asc(entity::scheduling_history::Column::Id)
        .all(&app.db)
        .await
        .expect("history")
        .into_iter()
        .map(|h| (h.session_id, h.attempts, h.error_code, h.updated_at))
        .collect()
}

/// A pass that changes nothing writes no session and no line of history (only its count of
/// passes, a row per resource group): the same statements whatever the queue's length, no
/// line of history touched, however many passes.
async fn a_pass_that_changes_nothing_writes_nothing(app: TestApp) {
    only_a3(&app).await;
    held(&app, "alice@example.com", "a3", 16.0).await;
    for n in 0..3 {
        launch(&app, "demo-bob", &format!("wait-{n}"), 1.0, 0, 100 - n).await;
    }
    run_pass(&app).await;
    let before = history_lines(&app).await;
    let (few, report) = app.count_statements(run_pass(&app)).await;
    assert_eq!((report.scheduled, report.waiting), (0, 3));
    assert_eq!(history_lines(&app).await, before, "nothing changed, nothing written");

    for n in 3..15 {
        launch(&app, "demo-bob", &format!("wait-{n}"), 1.0, 0, 100 - n).await;
    }
    run_pass(&app).await;
    let before = history_lines(&app).await;
    let (many, report) = app.count_statements(run_pass(&app)).await;
    assert_eq!((report.scheduled, report.waiting), (0, 15));
    assert_eq!(few, many, "a pass that changes nothing runs the same statements for 3 waiting sessions as for 15");
    for _ in 0..1000 {
        run_pass(&app).await;
    }
    assert_eq!(history_lines(&app).await, before, "1 000 passes later, the history is as it was");
}

/// The waiting lines of `id`'s history, oldest first: (error code, attempts, last tried,
/// written), as the API shows them.
async fn wait_lines(app: &TestApp, id: &str) -> Vec<(String, i64, String, String)> {
    let resp = app
        .gql(
            Some("demo-admin"),
            "query($id: ID!) { session(id: $id) { schedulingHistory(first: 50) { edges { node {
              phase toStatus errorCode attempts lastTriedAt updatedAt } } } } }",
            json!({"id": id}),
        )
        .await;
    let edges = resp["data"]["session"]["schedulingHistory"]["edges"].as_array().unwrap_or_else(|| panic!("{resp}"));
    let mut lines: Vec<_> = edges
        .iter()
        .map(|e| &e["node"])
        .filter(|n| n["phase"] == "schedule" && n["toStatus"] == "PENDING")
        .map(|n| {
            let text = |k: &str| n[k].as_str().unwrap_or_default().to_owned();
            (text("errorCode"), n["attempts"].as_i64().expect("attempts"), text("lastTriedAt"), text("updatedAt"))
        })
        .collect();
    lines.reverse();
    lines
}

/// A waiting session's history counts every pass it waited through on a decision, though
/// a pass that changes nothing writes no line: the same statements pass after pass, the
/// count going up; a new decision, or the session's end, keeps the count where it stood.
async fn waiting_lines_count_the_passes_they_waited_through(app: TestApp) {
    only_a3(&app).await;
    held(&app, "alice@example.com", "a3", 16.0).await;
    let head = launch(&app, "demo-bob", "count-head", 1.0, 0, 100).await;
    let behind = launch(&app, "demo-bob", "count-behind", 1.0, 0, 50).await;
    run_pass(&app).await;
    assert_eq!(wait_lines(&app, &head).await.iter().map(|l| l.1).collect::<Vec<_>>(), [1]);
    let stored = history_lines(&app).await;
    let mut counts = Vec::new();
    for _ in 0..5 {
        let (statements, report) = app.count_statements(run_pass(&app)).await;
        assert_eq!((report.scheduled, report.waiting), (0, 2));
        counts.push(statements);
    }
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "the same statements every pass: {counts:?}");
    assert_eq!(history_lines(&app).await, stored, "no line written or merged");
    let lines = wait_lines(&app, &behind).await;
    assert_eq!(lines.iter().map(|l| (l.0.as_str(), l.1)).collect::<Vec<_>>(), [("QUEUED_BEHIND", 6)]);
    assert!(lines[0].2 > lines[0].3, "tried after it was written: {lines:?}");

    // The head goes: the one behind waits on another decision; its old line keeps its 6.
    assert_eq!(crate::support::terminate(&app, "demo-bob", &head).await, "CANCELLED");
    run_pass(&app).await;
    run_pass(&app).await;
    let lines = wait_lines(&app, &behind).await;
    assert_eq!(
        lines.iter().map(|l| (l.0.as_str(), l.1)).collect::<Vec<_>>(),
        [("QUEUED_BEHIND", 6), ("NO_CAPACITY", 2)]
    );
    // The cancelled head's count stopped with it.
    let head_lines = wait_lines(&app, &head).await;
    assert_eq!(head_lines.iter().map(|l| (l.0.as_str(), l.1)).collect::<Vec<_>>(), [("NO_CAPACITY", 6)]);

    // Ended, it counts no more, however many passes follow.
    assert_eq!(crate::support::terminate(&app, "demo-bob", &behind).await, "CANCELLED");
    launch(&app, "demo-bob", "count-other", 1.0, 0, 0).await;
    for _ in 0..3 {
        run_pass(&app).await;
    }
    let lines = wait_lines(&app, &behind).await;
    assert_eq!(
        lines.iter().map(|l| (l.0.as_str(), l.1)).collect::<Vec<_>>(),
        [("QUEUED_BEHIND", 6), ("NO_CAPACITY", 2)]
    );
    assert_eq!(wait_lines(&app, &head).await, head_lines);
}

/// However a waiting session's reasons alternate, its history stays bounded.
async fn history_stays_bounded_however_reasons_alternate(app: TestApp) {
    use sessiond::domain::lifecycle::history::{Entry, MERGE_ANY_PAST, SchedulingResult, record};
    use sessiond::domain::model::actor::{Actor, rules};
    use sessiond::domain::model::status::SessionStatus;
    let id = launch(&app, "demo-alice", "alternating", 1.0, 0, 0).await;
    let id = decode_uuid(&id, NodeKind::Session).expect("id");
    for n in 0..1000 {
        let code = ["NO_CAPACITY", "QUEUED_BEHIND", "QUOTA_EXCEEDED"][n % 3];
        let line = Entry {
            session_id: id,
            phase: "schedule",
            from: Some(SessionStatus::Pending),
            to: Some(SessionStatus::Pending),
            result: SchedulingResult::NeedRetry,
            error_code: Some(code.to_owned()),
            message: format!("pass {n}"),
            sub_steps: json!([]),
            repeats: true,
            actor: Actor::system(rules::SCHEDULER),
            pass: None,
        };
        record(&app.db, vec![line], Utc::now()).await.expect("record");
    }
    let lines = history_lines(&app).await;
    assert_eq!(lines.len() as i64, MERGE_ANY_PAST, "{lines:?}");
    let last = lines.last().expect("a last line");
    assert_eq!((last.1 as usize, last.2.as_deref()), (1000 - (MERGE_ANY_PAST as usize - 2), Some("NO_CAPACITY")));
}

db_tests!(
    a_pass_that_changes_nothing_writes_nothing,
    waiting_lines_count_the_passes_they_waited_through,
    history_stays_bounded_however_reasons_alternate,
    an_unknown_strategy_schedules_nothing_in_its_group,
    higher_priority_goes_first,
    fifo_and_lifo_take_the_band_in_opposite_orders,
    drf_serves_the_smallest_share_first,
    the_concurrency_limit_blocks_only_its_keypair,
    no_capacity_blocks_its_priority_band_only,
    queue_positions_move_up_when_the_head_is_cancelled,
    a_held_scheduler_lock_skips_the_pass,
    a_new_priority_moves_the_queue,
    a_batch_session_waits_for_its_start_time,
    a_batch_session_waits_for_what_it_depends_on,
);

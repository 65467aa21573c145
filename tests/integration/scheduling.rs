//! Sessions that move: the scheduler and the simulated runtime with fast timings, on both
//! databases. Every wait polls the API for a state (bounded); nothing asserts on time.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use entity::session_status_transition;
use sessiond::domain::model::status::SessionStatus;
use sessiond::graphql::ids::{NodeKind, decode_uuid};

use crate::db_tests;
use crate::support::{TestApp, launch_input as input, project};

const GIB: i64 = 1 << 30;

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const DETAIL: &str = "query($id: ID!) { session(id: $id) {
  name status statusInfo result exitCode agent queuePosition
  pendingReasons { code layer slot requested remaining }
  apps { name } logs(tail: 20)
  statusTransitions { fromStatus toStatus }
  schedulingHistory { edges { node { phase fromStatus toStatus result errorCode attempts subSteps { name result errorCode } } } }
} }";

async fn launch(app: &TestApp, token: &str, input: Value) -> String {
    let resp = app.gql(Some(token), LAUNCH, json!({"i": input})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn wait_status(app: &TestApp, token: &str, id: &str, status: &str) -> Value {
    let resp = app.wait_for(token, DETAIL, json!({"id": id}), |r| r["data"]["session"]["status"] == status).await;
    resp["data"]["session"].clone()
}

fn path(s: &Value) -> Vec<String> {
    s["statusTransitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .map(|t| t["toStatus"].as_str().expect("to").to_owned())
        .collect()
}

async fn a_session_starts_and_offers_its_apps(mut app: TestApp) {
    app.start_workers();
    let first = launch(&app, "demo-alice", input("nb-first", 12.0)).await;
    let s = wait_status(&app, "demo-alice", &first, "RUNNING").await;
    assert_eq!(
        path(&s),
        ["PENDING", "SCHEDULED", "PREPARING", "PULLING", "PREPARED", "CREATING", "RUNNING"],
        "the agent pulls the image once"
    );
    assert_eq!(s["agent"], "a3", "the only agent with 12 CPUs");
    assert_eq!(s["apps"], json!([{"name": "jupyter"}, {"name": "terminal"}]));
    assert!(
        s["logs"]
            .as_array()
            .expect("logs")
            .iter()
            .any(|l| l.as_str().expect("line").contains("pulling image python:3.12"))
    );
    let phases: Vec<&str> = s["schedulingHistory"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"]["phase"].as_str().expect("phase"))
        .collect();
    assert_eq!(phases.last(), Some(&"enqueue"));
    assert!(phases.contains(&"schedule") && phases.contains(&"prepare") && phases.contains(&"start"), "{phases:?}");
    let schedule = s["schedulingHistory"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .find(|e| e["node"]["phase"] == "schedule")
        .expect("schedule entry");
    let steps: Vec<&str> = schedule["node"]["subSteps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(steps, ["keypair_quota", "project_quota", "domain_quota", "concurrency", "capacity"]);

    // The same image on the same agent is not pulled again. 40 GiB fit only a3.
    let mut second = input("nb-second", 2.0);
    second["resources"][1]["amount"] = json!(40 * GIB);
    let second = launch(&app, "demo-bob", second).await;
    let s = wait_status(&app, "demo-bob", &second, "RUNNING").await;
    assert_eq!(s["agent"], "a3");
    assert_eq!(path(&s), ["PENDING", "SCHEDULED", "PREPARING", "PREPARED", "CREATING", "RUNNING"], "no PULLING: {s}");
}

async fn batch_sessions_end_with_their_exit_code(mut app: TestApp) {
    app.start_workers();
    let mut ok = input("batch-ok", 1.0);
    ok["type"] = json!("BATCH");
    ok["startupCommand"] = json!("python train.py");
    let mut late = ok.clone();
    late["name"] = json!("batch-late");
    late["batchTimeoutSeconds"] = json!(1);
    let ok = launch(&app, "demo-alice", ok).await;
    let late = launch(&app, "demo-alice", late).await;
    let s = wait_status(&app, "demo-alice", &ok, "TERMINATED").await;
    assert_eq!((s["result"].as_str(), s["exitCode"].as_i64()), (Some("SUCCESS"), Some(0)), "{s}");
    let s = wait_status(&app, "demo-alice", &late, "TERMINATED").await;
    assert_eq!((s["result"].as_str(), s["exitCode"].as_i64()), (Some("FAILURE"), Some(124)), "{s}");
    assert_eq!(s["statusInfo"], "batch timeout");
    assert_eq!(path(&s).last().map(String::as_str), Some("TERMINATED"));
}

async fn over_quota_sessions_wait_with_layer_and_slot(mut app: TestApp) {
    app.start_workers();
    // Project `research` allows 2 CUDA devices.
    let gpu = |name: &str| {
        json!({
            "projectId": project("default/research"), "name": name, "image": "pytorch:2.5-cuda12",
            "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 2 * GIB}, {"slot": "cuda.device", "amount": 1}],
        })
    };
    let a = launch(&app, "demo-alice", gpu("gpu-a")).await;
    wait_status(&app, "demo-alice", &a, "RUNNING").await;
    let b = launch(&app, "demo-bob", gpu("gpu-b")).await;
    wait_status(&app, "demo-bob", &b, "RUNNING").await;
    let c = launch(&app, "demo-alice", gpu("gpu-c")).await;
    app.wait_for("demo-alice", DETAIL, json!({"id": c}), |r| {
        r["data"]["session"]["schedulingHistory"]["edges"][0]["node"]["phase"] == "schedule"
    })
    .await;
    // Passes go on (every 50 ms); with nothing changed they write nothing.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let s = app.gql(Some("demo-alice"), DETAIL, json!({"id": c})).await;
    let s = &s["data"]["session"];
    assert_eq!(s["status"], "PENDING");
    assert_eq!(
        s["pendingReasons"],
        json!([{"code": "QUOTA_EXCEEDED", "layer": "PROJECT", "slot": "cuda.device", "requested": 1.0, "remaining": 0.0}])
    );
    assert_eq!(s["queuePosition"], 1);
    // Enqueue, then one schedule entry, written once: the passes since changed nothing
    // (each counts as an attempt, as scheduling_pass.rs checks pass by pass).
    let edges = s["schedulingHistory"]["edges"].as_array().expect("edges");
    assert_eq!(edges.len(), 2, "{s}");
    assert!(edges[0]["node"]["attempts"].as_i64().is_some_and(|n| n >= 1), "{s}");
    assert_eq!(edges[0]["node"]["result"], "NEED_RETRY");
    assert_eq!(edges[0]["node"]["errorCode"], "QUOTA_EXCEEDED");
    // Ending one GPU session lets the waiting one start.
    app.gql(
        Some("demo-bob"),
        "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }",
        json!({"ids": [b]}),
    )
    .await;
    let s = wait_status(&app, "demo-alice", &c, "RUNNING").await;
    assert_eq!(s["pendingReasons"], json!([]));
    assert!(s["queuePosition"].is_null());
}

async fn ending_a_session_frees_room_for_the_next(mut app: TestApp) {
    app.start_workers();
    let hog = launch(&app, "demo-alice", input("hog-a", 16.0)).await;
    wait_status(&app, "demo-alice", &hog, "RUNNING").await;
    let next = launch(&app, "demo-bob", input("hog-b", 16.0)).await;
    let s = app
        .wait_for("demo-bob", DETAIL, json!({"id": next}), |r| {
            !r["data"]["session"]["pendingReasons"].as_array().is_none_or(Vec::is_empty)
        })
        .await;
    assert_eq!(s["data"]["session"]["pendingReasons"][0]["code"], "NO_CAPACITY", "{s}");
    app.gql(
        Some("demo-alice"),
        "mutation($ids: [ID!]!) { terminateSessions(ids: $ids) { results { outcome } } }",
        json!({"ids": [hog]}),
    )
    .await;
    let ended = wait_status(&app, "demo-alice", &hog, "TERMINATED").await;
    assert_eq!(path(&ended)[path(&ended).len() - 2..], ["TERMINATING".to_owned(), "TERMINATED".to_owned()]);
    let s = wait_status(&app, "demo-bob", &next, "RUNNING").await;
    assert_eq!(s["agent"], "a3");
}

async fn pending_too_long_is_cancelled(mut app: TestApp) {
    app.db
        .execute_unprepared("UPDATE resource_groups SET pending_timeout_seconds = 1 WHERE name = 'default'")
        .await
        .expect("timeout");
    app.start_workers();
    // Alice's keypair allows 16 CPUs: the third 8-CPU session waits, then times out.
    for name in ["eight-a", "eight-b"] {
        let id = launch(&app, "demo-alice", input(name, 8.0)).await;
        wait_status(&app, "demo-alice", &id, "RUNNING").await;
    }
    let waiting = launch(&app, "demo-alice", input("eight-c", 8.0)).await;
    let s = wait_status(&app, "demo-alice", &waiting, "CANCELLED").await;
    assert_eq!(s["statusInfo"], "PENDING_TIMEOUT");
    let first = &s["schedulingHistory"]["edges"][0]["node"];
    assert_eq!((first["phase"].as_str(), first["result"].as_str()), (Some("timeout"), Some("EXPIRED")));
    assert_eq!(s["pendingReasons"], json!([]));
}

async fn a_failed_start_is_an_error(mut app: TestApp) {
    app.start_workers();
    let mut broken = input("broken", 1.0);
    broken["environment"] = json!([{"name": "SESSIOND_SIM_FAIL", "value": "CREATING"}]);
    let id = launch(&app, "demo-alice", broken).await;
    let s = wait_status(&app, "demo-alice", &id, "ERROR").await;
    assert_eq!(s["result"], "FAILURE");
    assert!(s["statusInfo"].as_str().expect("info").contains("injected failure"), "{s}");
    assert_eq!(path(&s).last().map(String::as_str), Some("ERROR"));
    assert_eq!(s["schedulingHistory"]["edges"][0]["node"]["errorCode"], "START_FAILED");
}

async fn the_lifetime_limit_ends_sessions(mut app: TestApp) {
    app.db
        .execute_unprepared("UPDATE keypair_resource_policies SET max_session_lifetime_seconds = 1")
        .await
        .expect("policy");
    app.start_workers();
    let id = launch(&app, "demo-alice", input("short-lived", 1.0)).await;
    let s = wait_status(&app, "demo-alice", &id, "TERMINATED").await;
    assert_eq!(s["statusInfo"], "max_session_lifetime exceeded");
    let p = path(&s);
    assert_eq!(p[p.len() - 3..], ["RUNNING".to_owned(), "TERMINATING".to_owned(), "TERMINATED".to_owned()]);
}

async fn a_restart_resumes_mid_start(app: TestApp) {
    // No workers yet: one scheduling pass by hand leaves the session SCHEDULED.
    let id = launch(&app, "demo-alice", input("resume-me", 1.0)).await;
    let report = sessiond::domain::scheduling::pass(&app.db, &app.bus).await.expect("pass");
    assert_eq!(report.scheduled, 1);
    let before = app.gql(Some("demo-alice"), DETAIL, json!({"id": id})).await;
    assert_eq!(before["data"]["session"]["status"], "SCHEDULED");

    // "Restart": the same database, a new process with workers.
    let mut again = app.restart().await;
    again.start_workers();
    let s = wait_status(&again, "demo-alice", &id, "RUNNING").await;
    let p = path(&s);
    let mut unique = p.clone();
    unique.dedup();
    assert_eq!(p, unique, "no step taken twice: {p:?}");
    let uuid = decode_uuid(&id, NodeKind::Session).expect("id");
    let rows = session_status_transition::Entity::find()
        .filter(session_status_transition::Column::SessionId.eq(uuid))
        .order_by_asc(session_status_transition::Column::Id)
        .all(&again.db)
        .await
        .expect("rows");
    assert_eq!(rows.len(), p.len(), "one row per step of the path");
    for pair in rows.windows(2) {
        let from = SessionStatus::parse(pair[1].from_status.as_deref().expect("from")).expect("status");
        assert_eq!(from.as_str(), pair[0].to_status, "a continuous path");
    }
}

db_tests!(
    a_session_starts_and_offers_its_apps,
    batch_sessions_end_with_their_exit_code,
    over_quota_sessions_wait_with_layer_and_slot,
    ending_a_session_frees_room_for_the_next,
    pending_too_long_is_cancelled,
    a_failed_start_is_an_error,
    the_lifetime_limit_ends_sessions,
    a_restart_resumes_mid_start,
);

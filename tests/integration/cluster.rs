//! Sessions of several containers: `resources` are per container, and everything that
//! charges, limits or places a session counts every container (requested and occupied
//! slots, every panel, quota admission, the dry run, NEVER_FITS and placement).

use sea_orm::{ActiveModelTrait, Set};
use serde_json::{Value, json};

use sessiond::domain::scheduling;

use crate::db_tests;
use crate::support::{TestApp, error_codes, project, session_row};

const GIB: i64 = 1 << 30;

/// A launch in alice's project `default` of `containers` × (`cpu` CPUs, 1 GiB, `gpu` devices).
fn cluster(name: &str, containers: i32, cpu: f64, gpu: f64) -> Value {
    let mut resources = vec![json!({"slot": "cpu", "amount": cpu}), json!({"slot": "mem", "amount": GIB})];
    if gpu > 0.0 {
        resources.push(json!({"slot": "cuda.device", "amount": gpu}));
    }
    json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12",
        "resources": resources, "clusterSize": containers,
    })
}

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const DETAIL: &str = "query($id: ID!) { session(id: $id) {
  status agent clusterSize
  requestedSlots { cpu memory accelerators { slot amount } }
  occupiedSlots { cpu memory }
  pendingReasons { code layer slot requested remaining }
} }";
const CHECK: &str = "query($i: LaunchSessionInput!) { checkLaunch(input: $i) {
  valid fitsNow problems { code } pendingReasons { code layer slot requested remaining }
} }";
const PANEL: &str = "query($p: ID!, $view: ResourcePanelView!) { resourcePanel(projectId: $p, view: $view) {
  slots { slot used limit remaining bindingLayer layers { layer limit used remaining } }
} }";

async fn launch(app: &TestApp, input: Value) -> String {
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn detail(app: &TestApp, id: &str) -> Value {
    let resp = app.gql(Some("demo-alice"), DETAIL, json!({"id": id})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["session"].clone()
}

async fn check(app: &TestApp, input: Value) -> Value {
    let resp = app.gql(Some("demo-alice"), CHECK, json!({"i": input})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["checkLaunch"].clone()
}

async fn pass(app: &TestApp) {
    scheduling::pass(&app.db, &app.bus).await.expect("a scheduling pass");
}

/// The cpu row of alice's panel `view` in project `default`.
async fn cpu_panel(app: &TestApp, view: &str) -> Value {
    let resp = app.gql(Some("demo-alice"), PANEL, json!({"p": project("default/default"), "view": view})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    let slots = resp["data"]["resourcePanel"]["slots"].as_array().expect("slots").clone();
    slots.into_iter().find(|s| s["slot"] == "cpu").expect("a cpu row")
}

async fn a_cluster_is_charged_for_every_container(app: TestApp) {
    let pair = launch(&app, cluster("pair", 2, 4.0, 0.0)).await;
    let s = detail(&app, &pair).await;
    assert_eq!(s["status"], "PENDING");
    assert_eq!(s["clusterSize"], 2);
    assert_eq!((&s["requestedSlots"]["cpu"], &s["requestedSlots"]["memory"]), (&json!(8.0), &json!(2 * GIB)));
    assert_eq!(s["occupiedSlots"]["cpu"], 0.0, "a pending session holds nothing");

    pass(&app).await;
    let s = detail(&app, &pair).await;
    assert_eq!((&s["status"], &s["agent"]), (&json!("SCHEDULED"), &json!("a3")), "the least loaded agent");
    assert_eq!((&s["occupiedSlots"]["cpu"], &s["occupiedSlots"]["memory"]), (&json!(8.0), &json!(2 * GIB)));

    // Alice's keypair allows 16 CPUs, the domain 48; the group has 8 + 8 + 16.
    assert_eq!(
        cpu_panel(&app, "MY_TOTAL").await,
        json!({"slot": "cpu", "used": 8.0, "limit": 16.0, "remaining": 8.0, "bindingLayer": "KEYPAIR", "layers": [
            {"layer": "KEYPAIR", "limit": 16.0, "used": 8.0, "remaining": 8.0},
            {"layer": "PROJECT", "limit": null, "used": 8.0, "remaining": null},
            {"layer": "DOMAIN", "limit": 48.0, "used": 8.0, "remaining": 40.0},
        ]})
    );
    assert_eq!(
        cpu_panel(&app, "MY_IN_RESOURCE_GROUP").await,
        json!({"slot": "cpu", "used": 8.0, "limit": 16.0, "remaining": 8.0, "bindingLayer": "KEYPAIR", "layers": [
            {"layer": "KEYPAIR", "limit": 16.0, "used": 8.0, "remaining": 8.0},
            {"layer": "PROJECT", "limit": null, "used": 8.0, "remaining": null},
            {"layer": "DOMAIN", "limit": 48.0, "used": 8.0, "remaining": 40.0},
            {"layer": "RESOURCE_GROUP", "limit": 32.0, "used": 8.0, "remaining": 24.0},
        ]})
    );
    assert_eq!(
        cpu_panel(&app, "TOTAL_IN_RESOURCE_GROUP").await,
        json!({"slot": "cpu", "used": 8.0, "limit": 32.0, "remaining": 24.0, "bindingLayer": "RESOURCE_GROUP", "layers": [
            {"layer": "RESOURCE_GROUP", "limit": 32.0, "used": 8.0, "remaining": 24.0},
        ]})
    );

    // 8 CPUs remain under the keypair and on each agent (the pair went to the least loaded,
    // a3): 2 × 4 fits now; 2 × 5 (10) exceeds the keypair's quota and every agent's room.
    let fits = check(&app, cluster("pair-again", 2, 4.0, 0.0)).await;
    assert_eq!(fits, json!({"valid": true, "fitsNow": true, "problems": [], "pendingReasons": []}));
    let over = check(&app, cluster("bigger", 2, 5.0, 0.0)).await;
    assert_eq!(
        over,
        json!({"valid": true, "fitsNow": false, "problems": [], "pendingReasons": [
            {"code": "QUOTA_EXCEEDED", "layer": "KEYPAIR", "slot": "cpu", "requested": 10.0, "remaining": 8.0},
            {"code": "NO_CAPACITY", "layer": "RESOURCE_GROUP", "slot": null, "requested": null, "remaining": null},
        ]})
    );
    let bigger = launch(&app, cluster("bigger", 2, 5.0, 0.0)).await;
    pass(&app).await;
    let s = detail(&app, &bigger).await;
    assert_eq!(s["status"], "PENDING");
    assert_eq!(
        s["pendingReasons"],
        json!([
            {"code": "QUOTA_EXCEEDED", "layer": "KEYPAIR", "slot": "cpu", "requested": 10.0, "remaining": 8.0},
            {"code": "NO_CAPACITY", "layer": "RESOURCE_GROUP", "slot": null, "requested": null, "remaining": null},
        ])
    );
}

async fn a_cluster_must_fit_one_agent(app: TestApp) {
    // Each container fits an agent, but the whole cluster fits none: clusters are placed on
    // one agent, so it could never start.
    for (name, containers, cpu, gpu) in [("wide", 2, 10.0, 0.0), ("gpus", 2, 1.0, 2.0), ("huge", 1, 17.0, 0.0)] {
        let input = cluster(name, containers, cpu, gpu);
        let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input.clone()})).await;
        assert_eq!(error_codes(&resp), ["NEVER_FITS"], "{name}: {resp}");
        let dry = check(&app, input).await;
        assert_eq!((&dry["valid"], &dry["problems"]), (&json!(false), &json!([{"code": "NEVER_FITS"}])), "{name}");
    }

    // Bob runs 6 CPUs on a3: 10 of its 16 are free, and a1 and a2 have 8 each.
    let mut held =
        session_row("bob@example.com", "default/default", "bobs-run", "RUNNING", json!({"cpu": 6, "mem": GIB}));
    held.agent_id = Set(Some("a3".to_owned()));
    held.insert(&app.db).await.expect("insert bob's session");

    // 2 × 6 = 12 CPUs fit no agent now (one container of 6 would fit a3): it waits.
    let wide = launch(&app, cluster("wide-now", 2, 6.0, 0.0)).await;
    pass(&app).await;
    let s = detail(&app, &wide).await;
    assert_eq!((&s["status"], &s["agent"]), (&json!("PENDING"), &Value::Null));
    let codes: Vec<&str> =
        s["pendingReasons"].as_array().expect("reasons").iter().map(|r| r["code"].as_str().expect("code")).collect();
    assert_eq!(codes, ["NO_CAPACITY"], "{s}");

    // Once bob's session is gone, a3 holds both containers.
    let resp = app
        .gql(
            Some("demo-bob"),
            "query($p: ID!) { sessions(projectId: $p) { edges { node { id } } } }",
            json!({"p": project("default/default")}),
        )
        .await;
    let bob_ids: Vec<Value> =
        resp["data"]["sessions"]["edges"].as_array().expect("edges").iter().map(|e| e["node"]["id"].clone()).collect();
    assert_eq!(bob_ids.len(), 1, "{resp}");
    let resp = app
        .gql(
            Some("demo-bob"),
            "mutation($ids: [ID!]!) { terminateSessions(ids: $ids, force: true) { results { outcome } } }",
            json!({"ids": bob_ids}),
        )
        .await;
    assert_eq!(resp["data"]["terminateSessions"]["results"], json!([{"outcome": "TERMINATED"}]), "{resp}");
    pass(&app).await;
    let s = detail(&app, &wide).await;
    assert_eq!((&s["status"], &s["agent"]), (&json!("SCHEDULED"), &json!("a3")), "{s}");
    assert_eq!(s["occupiedSlots"]["cpu"], 12.0);
}

db_tests!(a_cluster_is_charged_for_every_container, a_cluster_must_fit_one_agent);

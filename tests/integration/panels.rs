//! The resource panels (each limit layer binding in turn, unlimited layers, figures equal
//! to sums over the session list) and the per-user page settings.

use rand::{Rng, SeedableRng};
use sea_orm::{ActiveModelTrait, ConnectionTrait};
use serde_json::{Value, json};
use uuid::Uuid;

use sessiond::domain::model::status::SessionStatus;

use crate::db_tests;
use crate::support::{TestApp, error_codes, project, session_row};

const GIB: f64 = (1u64 << 30) as f64;

/// Statements of `resourcePanel(view: MY_TOTAL)` on both databases, whatever the number of
/// sessions: auth (the keypair joined with its user), the project, its membership, the
/// group links, the agents, the one occupancy aggregate, the keypair policy, the domain,
/// the slot catalogue. `SESSIOND_TEST_SQL=1` prints them.
const PANEL_MY_TOTAL_STATEMENTS: usize = 9;
/// MY_IN_RESOURCE_GROUP: the same nine (the group's figures are more sums of the aggregate).
const PANEL_MY_IN_RESOURCE_GROUP_STATEMENTS: usize = 9;
/// TOTAL_IN_RESOURCE_GROUP: the same nine.
const PANEL_TOTAL_IN_RESOURCE_GROUP_STATEMENTS: usize = 9;
const PANEL_VIEWS: [(&str, usize); 3] = [
    ("MY_TOTAL", PANEL_MY_TOTAL_STATEMENTS),
    ("MY_IN_RESOURCE_GROUP", PANEL_MY_IN_RESOURCE_GROUP_STATEMENTS),
    ("TOTAL_IN_RESOURCE_GROUP", PANEL_TOTAL_IN_RESOURCE_GROUP_STATEMENTS),
];

/// A session of `email` in `project` with `status`, holding `cpu` CPUs and `gpu` devices
/// when its status occupies.
async fn hold(app: &TestApp, email: &str, project: &str, status: SessionStatus, cpu: f64, gpu: f64) {
    let mut slots = json!({"cpu": cpu, "mem": 2.0 * GIB});
    if gpu > 0.0 {
        slots["cuda.device"] = json!(gpu);
    }
    session_row(email, project, &format!("held-{}", Uuid::new_v4().simple()), status.as_str(), slots)
        .insert(&app.db)
        .await
        .expect("insert a session");
}

pub(super) const PANEL: &str = "query($p: ID!, $view: ResourcePanelView!, $g: String) {
  resourcePanel(projectId: $p, view: $view, resourceGroup: $g) {
    view resourceGroup slots { slot used limit remaining bindingLayer layers { layer limit used remaining } }
  }
}";

async fn panel(app: &TestApp, token: &str, p: &str, view: &str) -> Value {
    let resp = app.gql(Some(token), PANEL, json!({"p": project(p), "view": view})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["resourcePanel"].clone()
}

pub(super) fn slot<'a>(panel: &'a Value, name: &str) -> &'a Value {
    panel["slots"]
        .as_array()
        .expect("slots")
        .iter()
        .find(|s| s["slot"] == name)
        .unwrap_or_else(|| panic!("no {name} in {panel}"))
}

async fn each_layer_binds_in_turn(app: TestApp) {
    use SessionStatus::*;
    // KEYPAIR: alice holds 10 of her 16 CPUs; nothing else is limited as tightly.
    hold(&app, "alice@example.com", "default/default", Running, 10.0, 0.0).await;
    hold(&app, "alice@example.com", "default/default", Pending, 8.0, 0.0).await; // pending holds nothing
    hold(&app, "alice@example.com", "default/default", Terminated, 8.0, 0.0).await; // nor does a finished one
    let p = panel(&app, "demo-alice", "default/default", "MY_TOTAL").await;
    assert_eq!(p["resourceGroup"], Value::Null);
    let cpu = slot(&p, "cpu");
    assert_eq!(
        (cpu["used"].as_f64(), cpu["remaining"].as_f64(), cpu["limit"].as_f64()),
        (Some(10.0), Some(6.0), Some(16.0))
    );
    assert_eq!(cpu["bindingLayer"], "KEYPAIR");
    assert_eq!(
        cpu["layers"],
        json!([
            {"layer": "KEYPAIR", "limit": 16.0, "used": 10.0, "remaining": 6.0},
            {"layer": "PROJECT", "limit": null, "used": 10.0, "remaining": null},
            {"layer": "DOMAIN", "limit": 48.0, "used": 10.0, "remaining": 38.0},
        ])
    );
    let gpu = slot(&p, "cuda.device");
    assert_eq!(
        (gpu["used"].as_f64(), gpu["remaining"].as_f64()),
        (Some(0.0), Some(4.0)),
        "zero-usage slots are listed"
    );
    let names: Vec<&str> =
        p["slots"].as_array().expect("slots").iter().map(|s| s["slot"].as_str().expect("slot")).collect();
    assert_eq!(names, ["cpu", "mem", "cuda.device"]);

    // PROJECT: research allows 2 CUDA devices; alice and bob hold one each.
    hold(&app, "alice@example.com", "default/research", Running, 1.0, 1.0).await;
    hold(&app, "bob@example.com", "default/research", Running, 1.0, 1.0).await;
    let p = panel(&app, "demo-alice", "default/research", "MY_TOTAL").await;
    let gpu = slot(&p, "cuda.device");
    assert_eq!(
        (gpu["bindingLayer"].as_str(), gpu["remaining"].as_f64(), gpu["used"].as_f64()),
        (Some("PROJECT"), Some(0.0), Some(1.0))
    );
    assert_eq!(gpu["limit"].as_f64(), Some(2.0), "the binding layer's own limit");

    // DOMAIN: the domain's 48 CPUs are nearly all held by others.
    hold(&app, "bob@example.com", "default/default", Running, 15.0, 0.0).await;
    hold(&app, "admin@example.com", "default/default", Running, 16.0, 0.0).await;
    hold(&app, "root@example.com", "default/default", Running, 4.0, 0.0).await;
    let p = panel(&app, "demo-alice", "default/default", "MY_TOTAL").await;
    let cpu = slot(&p, "cpu");
    // alice: 11 held, keypair leaves 5; domain: 11 + 16 + 16 + 4 = 47 held, leaves 1.
    assert_eq!(
        (cpu["used"].as_f64(), cpu["bindingLayer"].as_str(), cpu["remaining"].as_f64()),
        (Some(11.0), Some("DOMAIN"), Some(1.0))
    );

    // RESOURCE_GROUP: in group `default` (32 CPUs), 47 are held: nothing is free.
    let p = app
        .gql(
            Some("demo-alice"),
            PANEL,
            json!({"p": project("default/default"), "view": "MY_IN_RESOURCE_GROUP", "g": "default"}),
        )
        .await;
    let p = &p["data"]["resourcePanel"];
    assert_eq!(p["resourceGroup"], "default");
    let cpu = slot(p, "cpu");
    assert_eq!((cpu["bindingLayer"].as_str(), cpu["remaining"].as_f64()), (Some("RESOURCE_GROUP"), Some(0.0)), "{cpu}");
    let total = panel(&app, "demo-bob", "default/default", "TOTAL_IN_RESOURCE_GROUP").await;
    let cpu = slot(&total, "cpu");
    assert_eq!(
        (cpu["used"].as_f64(), cpu["limit"].as_f64(), cpu["bindingLayer"].as_str()),
        (Some(47.0), Some(32.0), Some("RESOURCE_GROUP"))
    );
    assert_eq!(slot(&total, "cuda.device")["limit"].as_f64(), Some(4.0), "the capacity of a1 and a2");

    // A slot no layer limits has no limit.
    app.db
        .execute_unprepared("UPDATE keypair_resource_policies SET total_resource_slots = '{\"cpu\": 16}'")
        .await
        .expect("policy");
    let p = panel(&app, "demo-alice", "default/default", "MY_TOTAL").await;
    let mem = slot(&p, "mem");
    assert_eq!(
        (mem["limit"].clone(), mem["remaining"].clone(), mem["bindingLayer"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
}

async fn panel_figures_equal_sums_over_the_session_list(app: TestApp) {
    for (view, expected) in PANEL_VIEWS {
        let (cost, _) = app.count_statements(panel(&app, "demo-alice", "default/default", view)).await;
        assert_eq!(cost, expected, "{view} with no session ({:?})", app.backend);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let users = ["alice@example.com", "bob@example.com", "admin@example.com"];
    let projects = ["default/default", "default/research"];
    for _ in 0..60 {
        let status = SessionStatus::ALL[rng.random_range(0..SessionStatus::ALL.len())];
        let cpu = [0.5, 1.0, 2.0, 4.0][rng.random_range(0..4)];
        let gpu = [0.0, 0.0, 1.0][rng.random_range(0..3)];
        hold(&app, users[rng.random_range(0..3)], projects[rng.random_range(0..2)], status, cpu, gpu).await;
    }
    for (view, expected) in PANEL_VIEWS {
        let (cost, _) = app.count_statements(panel(&app, "demo-alice", "default/default", view)).await;
        assert_eq!(cost, expected, "{view} with 60 sessions: aggregates, not rows ({:?})", app.backend);
    }
    // Everyone's sessions, as the admin's list shows them.
    let mut all = Vec::new();
    for p in projects {
        let resp = app
            .gql(
                Some("demo-admin"),
                "query($p: ID!) { sessions(projectId: $p, scope: PROJECT, first: 500) { edges { node { status owner { email } project { name } occupiedSlots { all { slot amount } } } } } }",
                json!({"p": project(p)}),
            )
            .await;
        all.extend(resp["data"]["sessions"]["edges"].as_array().expect("edges").iter().map(|e| e["node"].clone()));
    }
    let occupying =
        |n: &Value| SessionStatus::parse(n["status"].as_str().expect("status")).is_some_and(|s| s.is_occupying());
    let sum = |nodes: &mut dyn Iterator<Item = &Value>, slot: &str| -> f64 {
        nodes
            .filter(|n| occupying(n))
            .flat_map(|n| n["occupiedSlots"]["all"].as_array().expect("all").clone())
            .filter(|s| s["slot"] == slot)
            .map(|s| s["amount"].as_f64().expect("amount"))
            .sum()
    };
    for (token, email) in [("demo-alice", users[0]), ("demo-bob", users[1]), ("demo-admin", users[2])] {
        let p = panel(&app, token, "default/default", "MY_TOTAL").await;
        for s in ["cpu", "mem", "cuda.device"] {
            let expected = sum(&mut all.iter().filter(|n| n["owner"]["email"] == email), s);
            assert!((slot(&p, s)["used"].as_f64().expect("used") - expected).abs() < 1e-6, "{email} {s}");
        }
    }
    let total = panel(&app, "demo-alice", "default/default", "TOTAL_IN_RESOURCE_GROUP").await;
    for s in ["cpu", "mem", "cuda.device"] {
        let expected = sum(&mut all.iter(), s);
        assert!((slot(&total, s)["used"].as_f64().expect("used") - expected).abs() < 1e-6, "{s}");
    }
    let research = panel(&app, "demo-alice", "default/research", "MY_TOTAL").await;
    let layer = slot(&research, "cuda.device")["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .find(|l| l["layer"] == "PROJECT")
        .cloned()
        .expect("project layer");
    let expected = sum(&mut all.iter().filter(|n| n["project"]["name"] == "research"), "cuda.device");
    assert!((layer["used"].as_f64().expect("used") - expected).abs() < 1e-6, "project layer: {layer}");
}

async fn panels_refuse_what_the_viewer_cannot_see(app: TestApp) {
    let resp = app.gql(Some("demo-carol"), PANEL, json!({"p": project("default/default"), "view": "MY_TOTAL"})).await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"]);
    let resp = app
        .gql(
            Some("demo-alice"),
            PANEL,
            json!({"p": project("default/default"), "view": "TOTAL_IN_RESOURCE_GROUP", "g": "other"}),
        )
        .await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"], "a group the project may not use");
    let groups = "query($p: ID!) { resourceGroups(projectId: $p) { name strategy allowedSessionTypes } }";
    let resp = app.gql(Some("demo-carol"), groups, json!({"p": project("default/default")})).await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"]);
    let resp = app.gql(Some("demo-alice"), groups, json!({"p": project("default/research")})).await;
    assert_eq!(
        resp["data"]["resourceGroups"],
        json!([{"name": "default", "strategy": "FIFO", "allowedSessionTypes": ["INTERACTIVE", "BATCH", "INFERENCE", "UPLOAD"]}])
    );
}

const SETTINGS: &str = "{ viewer { settings { resourcePanelView sessionListColumns { column visible } } } }";
const COLUMNS: &str = "mutation($c: [SessionColumnInput!]!) { updateSessionListColumns(columns: $c) { sessionListColumns { column visible } } }";

/// Thousands of bad elements get a short answer: the first problems, then how many more.
async fn many_bad_elements_get_a_short_answer(app: TestApp) {
    // A list over its cap is refused whole, in one problem.
    let columns: Vec<Value> = (0..20_000).map(|_| json!({"column": "NAME", "visible": true})).collect();
    let resp = app.gql(Some("demo-alice"), COLUMNS, json!({"c": columns})).await;
    assert_eq!(crate::support::error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    let problems = resp["errors"][0]["extensions"]["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{resp}");
    assert_eq!((&problems[0]["code"], &problems[0]["field"]), (&json!("TOO_MANY"), &json!("columns")));
    // Within the cap, every problem is found but twenty are listed.
    let columns: Vec<Value> = (0..60).map(|_| json!({"column": "NAME", "visible": true})).collect();
    let resp = app.gql(Some("demo-alice"), COLUMNS, json!({"c": columns})).await;
    let problems = resp["errors"][0]["extensions"]["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 21, "twenty, then one entry for the rest");
    assert_eq!(problems[0]["code"], "DUPLICATE_COLUMN");
    assert_eq!(problems[20]["code"], "MORE_PROBLEMS");
    assert!(problems[20]["message"].as_str().is_some_and(|m| m.starts_with("39 more")), "{}", problems[20]);
    assert!(resp.to_string().len() < 10_000, "a short answer: {} bytes", resp.to_string().len());
}

async fn settings_persist_per_user(app: TestApp) {
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation { setResourcePanelView(view: TOTAL_IN_RESOURCE_GROUP) { resourcePanelView } }",
            json!({}),
        )
        .await;
    assert_eq!(resp["data"]["setResourcePanelView"]["resourcePanelView"], "TOTAL_IN_RESOURCE_GROUP");
    let cols = json!([{"column": "ELAPSED", "visible": true}, {"column": "NAME", "visible": true}, {"column": "OWNER", "visible": true}, {"column": "STATUS", "visible": false}]);
    let resp = app.gql(Some("demo-alice"), COLUMNS, json!({"c": cols})).await;
    let got = resp["data"]["updateSessionListColumns"]["sessionListColumns"].as_array().expect("columns").clone();
    assert_eq!(got.len(), sessiond::domain::model::SessionColumnKey::ALL.len(), "every column once");
    assert_eq!(got[..4], cols.as_array().expect("array")[..]);
    assert_eq!(
        got[4],
        json!({"column": "ACCELERATORS", "visible": false}),
        "the rest follow, hidden, in default order"
    );

    // After a restart alice has her settings; bob never had them.
    let again = app.restart().await;
    let alice = again.gql(Some("demo-alice"), SETTINGS, json!({})).await;
    assert_eq!(alice["data"]["viewer"]["settings"]["resourcePanelView"], "TOTAL_IN_RESOURCE_GROUP");
    assert_eq!(
        alice["data"]["viewer"]["settings"]["sessionListColumns"].as_array().expect("columns")[..4],
        cols.as_array().expect("a")[..]
    );
    let bob = again.gql(Some("demo-bob"), SETTINGS, json!({})).await;
    assert_eq!(bob["data"]["viewer"]["settings"]["resourcePanelView"], "MY_TOTAL");
    assert_eq!(bob["data"]["viewer"]["settings"]["sessionListColumns"][0], json!({"column": "NAME", "visible": true}));

    // Bad lists change nothing.
    for (bad, field) in [
        (json!([{"column": "NAME", "visible": false}]), "columns[0]"),
        (
            json!([{"column": "NAME", "visible": true}, {"column": "CPU", "visible": true}, {"column": "CPU", "visible": false}]),
            "columns[2]",
        ),
    ] {
        let resp = again.gql(Some("demo-alice"), COLUMNS, json!({"c": bad})).await;
        assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"]);
        assert_eq!(resp["errors"][0]["extensions"]["field"], field);
    }
    let resp = again.gql(Some("demo-alice"), COLUMNS, json!({"c": [{"column": "NOPE", "visible": true}]})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "unknown columns are refused by the schema");
    let alice = again.gql(Some("demo-alice"), SETTINGS, json!({})).await;
    assert_eq!(
        alice["data"]["viewer"]["settings"]["sessionListColumns"].as_array().expect("columns")[..4],
        cols.as_array().expect("a")[..]
    );
}

db_tests!(
    many_bad_elements_get_a_short_answer,
    each_layer_binds_in_turn,
    panel_figures_equal_sums_over_the_session_list,
    panels_refuse_what_the_viewer_cannot_see,
    settings_persist_per_user,
);

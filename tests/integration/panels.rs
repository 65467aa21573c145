//! The resource panels (each limit layer binding in turn, unlimited layers, figures equal
//! to sums over the session list) and the per-user page settings.

use rand::{Rng, SeedableRng};
use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use sessiond::domain::seed::demo_project_id;
use sessiond::domain::status::SessionStatus;
use sessiond::graphql::ids::{NodeKind, encode};

use crate::db_tests;
use crate::support::{TestApp, error_codes, session_row};

const GIB: f64 = (1u64 << 30) as f64;

/// Statements of `resourcePanel(view: MY_TOTAL)` on both databases, whatever the number of
/// sessions: auth (keypair, user), the project, its membership, the group links, the
/// agents, the one occupancy aggregate, the keypair policy, the domain, the slot catalogue.
/// `SESSIOND_TEST_SQL=1` prints them.
const PANEL_MY_TOTAL_STATEMENTS: usize = 10;
/// MY_IN_RESOURCE_GROUP: the same ten (the group's figures are more sums of the aggregate).
const PANEL_MY_IN_RESOURCE_GROUP_STATEMENTS: usize = 10;
/// TOTAL_IN_RESOURCE_GROUP: the same ten.
const PANEL_TOTAL_IN_RESOURCE_GROUP_STATEMENTS: usize = 10;
const PANEL_VIEWS: [(&str, usize); 3] = [
    ("MY_TOTAL", PANEL_MY_TOTAL_STATEMENTS),
    ("MY_IN_RESOURCE_GROUP", PANEL_MY_IN_RESOURCE_GROUP_STATEMENTS),
    ("TOTAL_IN_RESOURCE_GROUP", PANEL_TOTAL_IN_RESOURCE_GROUP_STATEMENTS),
];

fn project(p: &str) -> String {
    encode(NodeKind::Project, demo_project_id(p)).0
}

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

const PANEL: &str = "query($p: ID!, $view: ResourcePanelView!, $g: String) {
  resourcePanel(projectId: $p, view: $view, resourceGroup: $g) {
    view resourceGroup slots { slot used limit remaining bindingLayer layers { layer limit used remaining } }
  }
}";

async fn panel(app: &TestApp, token: &str, p: &str, view: &str) -> Value {
    let resp = app.gql(Some(token), PANEL, json!({"p": project(p), "view": view})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["resourcePanel"].clone()
}

fn slot<'a>(panel: &'a Value, name: &str) -> &'a Value {
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
    assert_eq!(gpu["limit"].as_f64(), Some(1.0), "limit = used + remaining");

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

/// A session row of `email` in `project`, in resource group `group`, launched with the
/// keypair `keypair` (the demo one when `None`).
async fn hold_in(
    app: &TestApp,
    (email, keypair, project, group): (&str, Option<Uuid>, &str, &str),
    status: SessionStatus,
    slots: Value,
) {
    let mut row = session_row(email, project, &format!("held-{}", Uuid::new_v4().simple()), status.as_str(), slots);
    row.resource_group = Set(group.to_owned());
    if let Some(kp) = keypair {
        row.keypair_id = Set(kp);
    }
    row.insert(&app.db).await.expect("insert a session");
}

fn lu(layer: &str, limit: Option<f64>, used: f64, remaining: Option<f64>) -> Value {
    json!({"layer": layer, "limit": limit, "used": used, "remaining": remaining})
}

fn su(
    slot: &str,
    used: f64,
    limit: Option<f64>,
    remaining: Option<f64>,
    binding: Option<&str>,
    layers: Vec<Value>,
) -> Value {
    json!({"slot": slot, "used": used, "limit": limit, "remaining": remaining, "bindingLayer": binding, "layers": layers})
}

async fn panel_in(app: &TestApp, token: &str, p: &str, view: &str, group: Option<&str>) -> Value {
    let resp = app.gql(Some(token), PANEL, json!({"p": project(p), "view": view, "g": group})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["resourcePanel"].clone()
}

/// Two resource groups, two domains and a user with two keypairs; every figure below is
/// worked out by hand from the rows inserted here.
async fn panel_figures_by_hand(app: TestApp) {
    use SessionStatus::*;
    // Group `second` (agent b1: 4 CPUs, 16 GiB, 1 GPU) is project default's second group.
    crate::support::add_resource_group(
        &app,
        "second",
        &["INTERACTIVE", "BATCH", "INFERENCE", "UPLOAD"],
        &[("b1", json!({"cpu": 4, "mem": 16 * (1i64 << 30), "cuda.device": 1}))],
        &[("default/default", 1)],
    )
    .await;
    // Alice's second keypair, under the same `default` policy (cpu 16, mem 64 GiB, 4 GPUs).
    let kp2 = sessiond::domain::ids::stable_id("keypair", "alice-second");
    entity::keypair::ActiveModel {
        id: Set(kp2),
        user_id: Set(sessiond::domain::seed::demo_user_id("alice@example.com")),
        access_key: Set("AKTESTALICE2".to_owned()),
        secret_hash: Set(sessiond::domain::auth::hash_token("alice-second-token")),
        resource_policy: Set("default".to_owned()),
        is_active: Set(true),
        created_at: Set(chrono::Utc::now()),
    }
    .insert(&app.db)
    .await
    .expect("a second keypair");
    // Domain `other` allows 10 CPUs.
    app.db
        .execute_unprepared("UPDATE domains SET total_resource_slots = '{\"cpu\": 10}' WHERE name = 'other'")
        .await
        .expect("domain limit");

    let g = |n: f64| n * GIB;
    let (dd, research) = ("default/default", "default/research");
    let alice = "alice@example.com";
    let bob = "bob@example.com";
    #[rustfmt::skip]
    let rows = [
        // (owner, keypair, project, group), status, slots                                   // name
        ((alice, None, dd, "default"), Running, json!({"cpu": 2, "mem": g(4.0)})),            // s1
        ((alice, Some(kp2), dd, "second"), Running, json!({"cpu": 1, "mem": g(2.0)})),        // s2
        ((alice, None, research, "default"), Running, json!({"cpu": 3, "mem": g(1.0), "cuda.device": 1})), // s3
        ((alice, Some(kp2), research, "default"), Preparing, json!({"cpu": 0.5, "mem": g(1.0)})), // s4
        ((alice, None, dd, "default"), Pending, json!({"cpu": 5, "mem": g(1.0)})),            // s5: holds nothing
        ((alice, None, dd, "second"), Terminated, json!({"cpu": 7, "mem": g(1.0)})),          // s6: holds nothing
        ((bob, None, dd, "default"), Running, json!({"cpu": 4, "mem": g(8.0)})),              // s7
        ((bob, None, dd, "second"), Terminating, json!({"cpu": 2, "mem": g(2.0)})),           // s8
        (("carol@other.example", None, "other/other", "other"), Running, json!({"cpu": 6, "mem": g(4.0)})), // s9
        ((bob, None, research, "default"), Running, json!({"cpu": 1, "mem": g(1.0), "cuda.device": 1})), // s10
    ];
    for (who, status, slots) in rows {
        hold_in(&app, who, status, slots).await;
    }

    // MY_TOTAL, alice with her first keypair. Used: s1-s4 = cpu 6.5, mem 8 GiB, 1 GPU.
    // KEYPAIR: s1+s3 = cpu 5, mem 5 GiB, 1 GPU. PROJECT default: s1+s2+s7+s8 = cpu 9,
    // mem 16 GiB. DOMAIN default: s1-s4, s7, s8, s10 = cpu 13.5 of 48, mem 19 GiB, 2 GPUs.
    let p = panel_in(&app, "demo-alice", dd, "MY_TOTAL", None).await;
    assert_eq!(p["resourceGroup"], Value::Null);
    assert_eq!(
        p["slots"],
        json!([
            su(
                "cpu",
                6.5,
                Some(17.5),
                Some(11.0),
                Some("KEYPAIR"),
                vec![
                    lu("KEYPAIR", Some(16.0), 5.0, Some(11.0)),
                    lu("PROJECT", None, 9.0, None),
                    lu("DOMAIN", Some(48.0), 13.5, Some(34.5)),
                ]
            ),
            su(
                "mem",
                g(8.0),
                Some(g(67.0)),
                Some(g(59.0)),
                Some("KEYPAIR"),
                vec![
                    lu("KEYPAIR", Some(g(64.0)), g(5.0), Some(g(59.0))),
                    lu("PROJECT", None, g(16.0), None),
                    lu("DOMAIN", None, g(19.0), None),
                ]
            ),
            su(
                "cuda.device",
                1.0,
                Some(4.0),
                Some(3.0),
                Some("KEYPAIR"),
                vec![
                    lu("KEYPAIR", Some(4.0), 1.0, Some(3.0)),
                    lu("PROJECT", None, 0.0, None),
                    lu("DOMAIN", None, 2.0, None),
                ]
            ),
        ]),
        "{p}"
    );

    // The same with her second keypair: KEYPAIR counts s2+s4 = cpu 1.5, mem 3 GiB, no GPU.
    let p = panel_in(&app, "alice-second-token", dd, "MY_TOTAL", None).await;
    assert_eq!(
        slot(&p, "cpu"),
        &su(
            "cpu",
            6.5,
            Some(21.0),
            Some(14.5),
            Some("KEYPAIR"),
            vec![
                lu("KEYPAIR", Some(16.0), 1.5, Some(14.5)),
                lu("PROJECT", None, 9.0, None),
                lu("DOMAIN", Some(48.0), 13.5, Some(34.5)),
            ]
        )
    );
    assert_eq!(slot(&p, "cuda.device")["layers"][0], lu("KEYPAIR", Some(4.0), 0.0, Some(4.0)));
    assert_eq!(
        (slot(&p, "cuda.device")["limit"].as_f64(), slot(&p, "mem")["limit"].as_f64()),
        (Some(5.0), Some(g(69.0)))
    );

    // MY_IN_RESOURCE_GROUP `second`: alice holds s2 there (cpu 1, mem 2 GiB); the group
    // holds s2+s8 = cpu 3, mem 4 GiB of b1's 4 CPUs, 16 GiB and 1 GPU.
    let p = panel_in(&app, "demo-alice", dd, "MY_IN_RESOURCE_GROUP", Some("second")).await;
    assert_eq!(p["resourceGroup"], "second");
    assert_eq!(
        p["slots"],
        json!([
            su(
                "cpu",
                1.0,
                Some(2.0),
                Some(1.0),
                Some("RESOURCE_GROUP"),
                vec![
                    lu("KEYPAIR", Some(16.0), 5.0, Some(11.0)),
                    lu("PROJECT", None, 9.0, None),
                    lu("DOMAIN", Some(48.0), 13.5, Some(34.5)),
                    lu("RESOURCE_GROUP", Some(4.0), 3.0, Some(1.0)),
                ]
            ),
            su(
                "mem",
                g(2.0),
                Some(g(14.0)),
                Some(g(12.0)),
                Some("RESOURCE_GROUP"),
                vec![
                    lu("KEYPAIR", Some(g(64.0)), g(5.0), Some(g(59.0))),
                    lu("PROJECT", None, g(16.0), None),
                    lu("DOMAIN", None, g(19.0), None),
                    lu("RESOURCE_GROUP", Some(g(16.0)), g(4.0), Some(g(12.0))),
                ]
            ),
            su(
                "cuda.device",
                0.0,
                Some(1.0),
                Some(1.0),
                Some("RESOURCE_GROUP"),
                vec![
                    lu("KEYPAIR", Some(4.0), 1.0, Some(3.0)),
                    lu("PROJECT", None, 0.0, None),
                    lu("DOMAIN", None, 2.0, None),
                    lu("RESOURCE_GROUP", Some(1.0), 0.0, Some(1.0)),
                ]
            ),
        ]),
        "{p}"
    );

    // MY_IN_RESOURCE_GROUP of the project's first group, `default`: alice holds s1, s3, s4
    // = cpu 5.5, mem 6 GiB, 1 GPU; the group holds s1, s3, s4, s7, s10 = cpu 10.5 of 32,
    // mem 15 of 128 GiB, 2 of 4 GPUs.
    let p = panel_in(&app, "demo-alice", dd, "MY_IN_RESOURCE_GROUP", None).await;
    assert_eq!(p["resourceGroup"], "default");
    let figures = |s: &Value| {
        (
            s["used"].as_f64(),
            s["limit"].as_f64(),
            s["remaining"].as_f64(),
            s["bindingLayer"].as_str().map(str::to_owned),
        )
    };
    assert_eq!(figures(slot(&p, "cpu")), (Some(5.5), Some(16.5), Some(11.0), Some("KEYPAIR".into())));
    assert_eq!(figures(slot(&p, "mem")), (Some(g(6.0)), Some(g(65.0)), Some(g(59.0)), Some("KEYPAIR".into())));
    assert_eq!(figures(slot(&p, "cuda.device")), (Some(1.0), Some(3.0), Some(2.0), Some("RESOURCE_GROUP".into())));
    assert_eq!(slot(&p, "cpu")["layers"][3], lu("RESOURCE_GROUP", Some(32.0), 10.5, Some(21.5)));

    // TOTAL_IN_RESOURCE_GROUP: everyone's figures of one group.
    let p = panel_in(&app, "demo-bob", dd, "TOTAL_IN_RESOURCE_GROUP", Some("second")).await;
    assert_eq!(
        p["slots"],
        json!([
            su(
                "cpu",
                3.0,
                Some(4.0),
                Some(1.0),
                Some("RESOURCE_GROUP"),
                vec![lu("RESOURCE_GROUP", Some(4.0), 3.0, Some(1.0))]
            ),
            su(
                "mem",
                g(4.0),
                Some(g(16.0)),
                Some(g(12.0)),
                Some("RESOURCE_GROUP"),
                vec![lu("RESOURCE_GROUP", Some(g(16.0)), g(4.0), Some(g(12.0))),]
            ),
            su(
                "cuda.device",
                0.0,
                Some(1.0),
                Some(1.0),
                Some("RESOURCE_GROUP"),
                vec![lu("RESOURCE_GROUP", Some(1.0), 0.0, Some(1.0)),]
            ),
        ]),
        "{p}"
    );
    let p = panel_in(&app, "demo-bob", dd, "TOTAL_IN_RESOURCE_GROUP", None).await;
    assert_eq!(p["resourceGroup"], "default");
    assert_eq!(figures(slot(&p, "cpu")), (Some(10.5), Some(32.0), Some(21.5), Some("RESOURCE_GROUP".into())));
    assert_eq!(
        figures(slot(&p, "mem")),
        (Some(g(15.0)), Some(g(128.0)), Some(g(113.0)), Some("RESOURCE_GROUP".into()))
    );
    assert_eq!(figures(slot(&p, "cuda.device")), (Some(2.0), Some(4.0), Some(2.0), Some("RESOURCE_GROUP".into())));

    // Project research allows 2 GPUs: s3 and s10 hold both.
    let p = panel_in(&app, "demo-alice", research, "MY_TOTAL", None).await;
    assert_eq!(
        slot(&p, "cuda.device"),
        &su(
            "cuda.device",
            1.0,
            Some(1.0),
            Some(0.0),
            Some("PROJECT"),
            vec![
                lu("KEYPAIR", Some(4.0), 1.0, Some(3.0)),
                lu("PROJECT", Some(2.0), 2.0, Some(0.0)),
                lu("DOMAIN", None, 2.0, None),
            ]
        )
    );
    assert_eq!(slot(&p, "cpu")["layers"][1], lu("PROJECT", None, 4.5, None), "s3 + s4 + s10");

    // The other domain: carol holds s9 (cpu 6, mem 4 GiB); her domain allows 10 CPUs.
    let p = panel_in(&app, "demo-carol", "other/other", "MY_TOTAL", None).await;
    assert_eq!(
        p["slots"],
        json!([
            su(
                "cpu",
                6.0,
                Some(10.0),
                Some(4.0),
                Some("DOMAIN"),
                vec![
                    lu("KEYPAIR", Some(16.0), 6.0, Some(10.0)),
                    lu("PROJECT", None, 6.0, None),
                    lu("DOMAIN", Some(10.0), 6.0, Some(4.0)),
                ]
            ),
            su(
                "mem",
                g(4.0),
                Some(g(64.0)),
                Some(g(60.0)),
                Some("KEYPAIR"),
                vec![
                    lu("KEYPAIR", Some(g(64.0)), g(4.0), Some(g(60.0))),
                    lu("PROJECT", None, g(4.0), None),
                    lu("DOMAIN", None, g(4.0), None),
                ]
            ),
        ]),
        "{p}"
    );
    let p = panel_in(&app, "demo-carol", "other/other", "TOTAL_IN_RESOURCE_GROUP", None).await;
    assert_eq!(figures(slot(&p, "cpu")), (Some(6.0), Some(8.0), Some(2.0), Some("RESOURCE_GROUP".into())));
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
    assert_eq!(got.len(), 20, "every column once");
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
    each_layer_binds_in_turn,
    panel_figures_equal_sums_over_the_session_list,
    panel_figures_by_hand,
    panels_refuse_what_the_viewer_cannot_see,
    settings_persist_per_user,
);

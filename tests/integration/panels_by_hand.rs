//! The resource panels worked out by hand: two resource groups, two domains and a user
//! with two keypairs, so that a panel summing the wrong group, domain or keypair, or
//! reusing one view's figures for another, gets a figure wrong.

use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
use serde_json::{Value, json};
use uuid::Uuid;

use sessiond::domain::model::status::SessionStatus;

use crate::db_tests;
use crate::panels::{PANEL, slot};
use crate::support::project;
use crate::support::{TestApp, session_row};

const GIB: f64 = (1u64 << 30) as f64;

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
    let kp2 = sessiond::domain::model::ids::stable_id("keypair", "alice-second");
    entity::keypair::ActiveModel {
        id: Set(kp2),
        user_id: Set(sessiond::domain::directory::seed::demo_user_id("alice@example.com")),
        access_key: Set("AKTESTALICE2".to_owned()),
        secret_hash: Set(sessiond::domain::directory::auth::hash_token("alice-second-token")),
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
                Some(16.0),
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
                Some(g(64.0)),
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
            Some(16.0),
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
        (Some(4.0), Some(g(64.0)))
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
                Some(4.0),
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
                Some(g(16.0)),
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
    assert_eq!(figures(slot(&p, "cpu")), (Some(5.5), Some(16.0), Some(11.0), Some("KEYPAIR".into())));
    assert_eq!(figures(slot(&p, "mem")), (Some(g(6.0)), Some(g(64.0)), Some(g(59.0)), Some("KEYPAIR".into())));
    assert_eq!(figures(slot(&p, "cuda.device")), (Some(1.0), Some(4.0), Some(2.0), Some("RESOURCE_GROUP".into())));
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
            Some(2.0),
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

db_tests!(panel_figures_by_hand);

//! Launching a session again (`relaunchSession`): its stored launch, any of it overridden,
//! through the launch's own validation, quotas and idempotency; only its owner may; the new
//! session names where it came from. No workers run: launched sessions stay PENDING.

use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, error_codes, project, terminate};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const RELAUNCH: &str = "mutation($id: ID!, $o: RelaunchOverrides) {
  relaunchSession(id: $id, overrides: $o) { session { id name status type image { name }
    clusterSize startupCommand batchTimeoutSeconds priority
    resourceGroup { name } environment { name value }
    requestedSlots { cpu memory }
    launchedFrom { kind originId name } } } }";

fn original() -> Value {
    json!({
        "projectId": project("default/default"), "name": "train", "image": "python:3.12", "type": "BATCH",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 1_i64 << 30}],
        "clusterSize": 2, "environment": [{"name": "EPOCHS", "value": "3"}],
        "startupCommand": "python train.py", "batchTimeoutSeconds": 600, "priority": -3,
    })
}

async fn relaunch(app: &TestApp, token: &str, id: &str, overrides: Value) -> Value {
    app.gql(Some(token), RELAUNCH, json!({"id": id, "o": overrides})).await
}

fn session(resp: &Value) -> Value {
    resp["data"]["relaunchSession"]["session"].clone()
}

async fn a_session_is_launched_again_as_it_was_or_changed(app: TestApp) {
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": original()})).await;
    let first = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();

    // While it lives its name is taken: the relaunch is refused as the launch would be.
    let resp = relaunch(&app, "demo-alice", &first, Value::Null).await;
    assert_eq!(error_codes(&resp), ["NAME_TAKEN"], "{resp}");

    // Renamed, and with more CPU: everything else as it was launched.
    let resp = relaunch(
        &app,
        "demo-alice",
        &first,
        json!({"name": "train-2", "resources": [
        {"slot": "cpu", "amount": 2}, {"slot": "mem", "amount": 1_i64 << 30}]}),
    )
    .await;
    let s = session(&resp);
    assert_eq!(
        (&s["name"], &s["status"], &s["type"], &s["image"], &s["clusterSize"], &s["priority"]),
        (&json!("train-2"), &json!("PENDING"), &json!("BATCH"), &json!({"name": "python:3.12"}), &json!(2), &json!(-3)),
        "{resp}"
    );
    assert_eq!((&s["startupCommand"], &s["batchTimeoutSeconds"]), (&json!("python train.py"), &json!(600)));
    assert_eq!(s["environment"], json!([{"name": "EPOCHS", "value": "3"}]));
    assert_eq!(s["resourceGroup"]["name"], "default");
    assert_eq!(s["requestedSlots"]["cpu"], 4.0, "2 per container, 2 containers");
    assert_eq!(s["requestedSlots"]["memory"], json!(2_i64 << 30));
    assert_eq!(s["launchedFrom"], json!({"kind": "SESSION", "originId": first, "name": "train"}));

    // A finished session's name is free again; null clears what can be left out.
    assert_eq!(terminate(&app, "demo-alice", &first).await, "CANCELLED");
    let resp = relaunch(
        &app,
        "demo-alice",
        &first,
        json!({"startupCommand": null, "type": "INTERACTIVE",
        "batchTimeoutSeconds": null}),
    )
    .await;
    let s = session(&resp);
    assert_eq!(
        (&s["name"], &s["type"], &s["startupCommand"]),
        (&json!("train"), &json!("INTERACTIVE"), &Value::Null),
        "{resp}"
    );

    // The launch's validation, with the path of the override that is wrong; nothing made.
    let resp = relaunch(&app, "demo-alice", &first, json!({"name": "again", "clusterSize": 0})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(resp["errors"][0]["extensions"]["field"], "overrides.clusterSize", "{resp}");

    // The same idempotency key gets the first relaunch's session.
    let o = json!({"name": "once", "idempotencyKey": "relaunch-once"});
    let a = session(&relaunch(&app, "demo-alice", &first, o.clone()).await)["id"].clone();
    let b = session(&relaunch(&app, "demo-alice", &first, o).await)["id"].clone();
    assert!(a.is_string() && a == b, "{a} {b}");

    // Only its owner relaunches it: for anyone else, administrators too, it does not exist.
    for token in ["demo-bob", "demo-admin", "demo-carol"] {
        let resp = relaunch(&app, token, &first, json!({"name": "theirs"})).await;
        assert_eq!(error_codes(&resp), ["NOT_FOUND"], "{token}: {resp}");
    }
    let resp = relaunch(&app, "demo-alice", "garbage", Value::Null).await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"], "{resp}");
}

db_tests!(a_session_is_launched_again_as_it_was_or_changed);

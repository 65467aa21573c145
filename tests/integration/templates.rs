//! Session templates: saved launch inputs, listed per project, shared with a project by an
//! administrator, launched from with overrides ("Launch Multiple Sessions" included), and
//! deleted; a template the caller may not see is NOT_FOUND. No workers run.

use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, error_codes, project};

const SAVE: &str = "mutation($n: String!, $i: LaunchSessionInput!, $s: Boolean) {
  saveSessionTemplate(name: $n, input: $i, shared: $s) { id name shared sessionName type image
    resources { slot amount } clusterSize environment { name value } priority owner { email } project { name } } }";
const LIST: &str = "query($p: ID!) { sessionTemplates(projectId: $p) { name shared owner { email } } }";
const FROM: &str = "mutation($t: ID, $o: RelaunchOverrides, $i: LaunchSessionInput, $n: Int!) {
  launchSessions(templateId: $t, overrides: $o, input: $i, count: $n) {
    sessions { name type priority requestedSlots { cpu } launchedFrom { kind originId name } } } }";
const DELETE: &str = "mutation($t: ID!) { deleteSessionTemplate(id: $t) }";

fn input(name: &str) -> Value {
    json!({
        "projectId": project("default/default"), "name": name, "image": "python:3.12", "type": "BATCH",
        "resources": [{"slot": "cpu", "amount": 1}, {"slot": "mem", "amount": 1_i64 << 30}],
        "environment": [{"name": "EPOCHS", "value": "3"}], "startupCommand": "python train.py", "priority": -2,
    })
}

async fn save(app: &TestApp, token: &str, name: &str, input: Value, shared: bool) -> Value {
    app.gql(Some(token), SAVE, json!({"n": name, "i": input, "s": shared})).await
}

async fn names(app: &TestApp, token: &str) -> Vec<(String, bool)> {
    let resp = app.gql(Some(token), LIST, json!({"p": project("default/default")})).await;
    resp["data"]["sessionTemplates"]
        .as_array()
        .unwrap_or_else(|| panic!("{resp}"))
        .iter()
        .map(|t| (t["name"].as_str().unwrap_or_default().to_owned(), t["shared"] == true))
        .collect()
}

async fn templates_are_kept_shared_and_launched_from(app: TestApp) {
    let resp = save(&app, "demo-alice", "my training", input("expt"), false).await;
    let mine = &resp["data"]["saveSessionTemplate"];
    assert_eq!(
        (&mine["name"], &mine["sessionName"], &mine["type"], &mine["clusterSize"], &mine["priority"]),
        (&json!("my training"), &json!("expt"), &json!("BATCH"), &json!(1), &json!(-2)),
        "{resp}"
    );
    assert_eq!(mine["owner"]["email"], "alice@example.com");
    let mine = mine["id"].as_str().expect("an id").to_owned();
    // Saved again under the same name: replaced, not added.
    let mut changed = input("expt");
    changed["priority"] = json!(-1);
    let again = save(&app, "demo-alice", "my training", changed, false).await;
    assert_eq!(again["data"]["saveSessionTemplate"]["id"], json!(mine), "{again}");
    assert_eq!(again["data"]["saveSessionTemplate"]["priority"], -1);
    assert_eq!(names(&app, "demo-alice").await, [("my training".to_owned(), false)]);
    assert_eq!(names(&app, "demo-bob").await, [], "not shared: hers alone");

    // Checked as a launch would be, with the path of what is wrong; sharing is an
    // administrator's.
    let mut bad = input("expt");
    bad["image"] = json!("no-such-image");
    let resp = save(&app, "demo-alice", "broken", bad, false).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    assert_eq!(resp["errors"][0]["extensions"]["field"], "input.image", "{resp}");
    assert_eq!(error_codes(&save(&app, "demo-alice", "ours", input("expt"), true).await), ["FORBIDDEN"]);
    assert_eq!(error_codes(&save(&app, "demo-alice", " padded", input("expt"), false).await), ["BAD_USER_INPUT"]);
    // A right-to-left override makes "safe\u{202E}txt.exe" show as "safeexe.txt".
    let resp = save(&app, "demo-alice", "safe\u{202E}txt.exe", input("expt"), false).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    let resp = save(&app, "demo-admin", "team default", input("team"), true).await;
    let shared = resp["data"]["saveSessionTemplate"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    assert_eq!(names(&app, "demo-bob").await, [("team default".to_owned(), true)]);
    assert_eq!(names(&app, "demo-alice").await.len(), 2);

    // Launched from, twice at once, with a change; the sessions name their template.
    let resp = app
        .gql(
            Some("demo-alice"),
            FROM,
            json!({"t": mine, "o": {"name": "runs", "resources": [
            {"slot": "cpu", "amount": 2}, {"slot": "mem", "amount": 1_i64 << 30}]}, "n": 2}),
        )
        .await;
    let sessions = resp["data"]["launchSessions"]["sessions"].as_array().unwrap_or_else(|| panic!("{resp}")).clone();
    let got: Vec<(&Value, &Value, &Value, &Value)> =
        sessions.iter().map(|s| (&s["name"], &s["type"], &s["priority"], &s["requestedSlots"]["cpu"])).collect();
    assert_eq!(
        got,
        [
            (&json!("runs-1"), &json!("BATCH"), &json!(-1), &json!(2.0)),
            (&json!("runs-2"), &json!("BATCH"), &json!(-1), &json!(2.0))
        ]
    );
    assert_eq!(sessions[0]["launchedFrom"], json!({"kind": "TEMPLATE", "originId": mine, "name": "my training"}));
    // A member launches from the shared one; nobody launches from a template they do not see.
    let resp = app.gql(Some("demo-bob"), FROM, json!({"t": shared, "o": {"name": "bobs"}, "n": 1})).await;
    assert_eq!(resp["data"]["launchSessions"]["sessions"][0]["name"], "bobs-1", "{resp}");
    for (token, id) in [("demo-bob", &mine), ("demo-carol", &shared), ("demo-alice", &"garbage".to_owned())] {
        let resp = app.gql(Some(token), FROM, json!({"t": id, "n": 1})).await;
        assert_eq!(error_codes(&resp), ["NOT_FOUND"], "{token}: {resp}");
    }
    // One of input and template.
    let resp = app.gql(Some("demo-alice"), FROM, json!({"t": mine, "i": input("both"), "n": 1})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");

    // Deleted: a shared one by an administrator only.
    assert_eq!(error_codes(&app.gql(Some("demo-bob"), DELETE, json!({"t": shared})).await), ["FORBIDDEN"]);
    assert_eq!(error_codes(&app.gql(Some("demo-bob"), DELETE, json!({"t": mine})).await), ["NOT_FOUND"]);
    let resp = app.gql(Some("demo-admin"), DELETE, json!({"t": shared})).await;
    assert_eq!(resp["data"]["deleteSessionTemplate"], json!(shared), "{resp}");
    let resp = app.gql(Some("demo-alice"), DELETE, json!({"t": mine})).await;
    assert_eq!(resp["data"]["deleteSessionTemplate"], json!(mine), "{resp}");
    assert_eq!(names(&app, "demo-alice").await, []);
    // What was launched from them keeps saying so.
    let resp = app.gql(Some("demo-alice"), FROM, json!({"t": mine, "n": 1})).await;
    assert_eq!(error_codes(&resp), ["NOT_FOUND"], "{resp}");
}

db_tests!(templates_are_kept_shared_and_launched_from);

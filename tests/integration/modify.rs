//! Changing sessions after launch (`modifySessions`): renaming under the launch's name
//! rules, reprioritising PENDING sessions (owners lower, administrators set up to the
//! policy's `max_priority`), one outcome per id, NOT_FOUND for what the caller may not see,
//! and history saying who did what. No workers run: launched sessions stay PENDING.

use sea_orm::{ConnectionTrait, TransactionTrait};
use serde_json::{Value, json};

use crate::db_tests;
use crate::support::{TestApp, error_codes, launch_input, terminate};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const MODIFY: &str = "mutation($ids: [ID!]!, $m: ModifySessionInput!) {
  modifySessions(ids: $ids, input: $m) { results { sessionId outcome session { name priority status } } } }";
const DETAIL: &str = "query($id: ID!) { session(id: $id) { name priority
  schedulingHistory { edges { node { phase message } } } } }";

async fn launch(app: &TestApp, token: &str, name: &str, priority: i32) -> String {
    let mut input = launch_input(name, 1.0);
    input["priority"] = json!(priority);
    let resp = app.gql(Some(token), LAUNCH, json!({"i": input})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn modify(app: &TestApp, token: &str, ids: &[&str], m: Value) -> Value {
    app.gql(Some(token), MODIFY, json!({"ids": ids, "m": m})).await
}

/// The outcomes of a modification, in request order.
fn outcomes(resp: &Value) -> Vec<String> {
    resp["data"]["modifySessions"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("results: {resp}"))
        .iter()
        .map(|r| r["outcome"].as_str().expect("outcome").to_owned())
        .collect()
}

async fn detail(app: &TestApp, token: &str, id: &str) -> Value {
    let resp = app.gql(Some(token), DETAIL, json!({"id": id})).await;
    assert!(resp.get("errors").is_none(), "{resp}");
    resp["data"]["session"].clone()
}

fn notes(s: &Value) -> Vec<String> {
    s["schedulingHistory"]["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["node"]["phase"] == "modified")
        .map(|e| e["node"]["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The first problem's field of a refused request.
fn field(resp: &Value) -> &str {
    resp["errors"][0]["extensions"]["field"].as_str().unwrap_or_else(|| panic!("a field: {resp}"))
}

async fn a_session_is_renamed_under_the_launch_rules(app: TestApp) {
    let a = launch(&app, "demo-alice", "first", 0).await;
    let b = launch(&app, "demo-alice", "second", 0).await;

    let resp = modify(&app, "demo-alice", &[&a], json!({"name": "renamed"})).await;
    assert_eq!(outcomes(&resp), ["MODIFIED"], "{resp}");
    assert_eq!(resp["data"]["modifySessions"]["results"][0]["session"]["name"], "renamed");
    let s = detail(&app, "demo-alice", &a).await;
    assert_eq!(s["name"], "renamed");
    assert_eq!(notes(&s), ["alice@example.com renamed it from first to renamed"]);

    // Another live session of hers has the name: refused, nothing changes.
    let resp = modify(&app, "demo-alice", &[&a], json!({"name": "second"})).await;
    assert_eq!(outcomes(&resp), ["NAME_TAKEN"], "{resp}");
    assert_eq!(detail(&app, "demo-alice", &a).await["name"], "renamed");
    // The same name again changes nothing.
    assert_eq!(outcomes(&modify(&app, "demo-alice", &[&a], json!({"name": "renamed"})).await), ["UNCHANGED"]);

    // Bad input is refused as a whole, with the field that is wrong.
    let resp = modify(&app, "demo-alice", &[&a], json!({"name": "-bad name"})).await;
    assert_eq!((error_codes(&resp), field(&resp)), (vec!["BAD_USER_INPUT".to_owned()], "input.name"), "{resp}");
    let resp = modify(&app, "demo-alice", &[&a, &b], json!({"name": "both"})).await;
    assert_eq!((error_codes(&resp), field(&resp)), (vec!["BAD_USER_INPUT".to_owned()], "ids"), "{resp}");
    let resp = modify(&app, "demo-alice", &[&a], json!({})).await;
    assert_eq!(error_codes(&resp), ["BAD_USER_INPUT"], "{resp}");
    let many: Vec<&str> = std::iter::repeat_n(a.as_str(), 101).collect();
    let resp = modify(&app, "demo-alice", &many, json!({"priority": -1})).await;
    assert_eq!((error_codes(&resp), field(&resp)), (vec!["BAD_USER_INPUT".to_owned()], "ids"), "{resp}");
    assert_eq!(detail(&app, "demo-alice", &b).await["name"], "second");

    // Someone else's session, or none at all, is NOT_FOUND, and stays as it was.
    let resp = modify(&app, "demo-bob", &[&a], json!({"name": "bobs"})).await;
    assert_eq!(outcomes(&resp), ["NOT_FOUND"], "{resp}");
    assert_eq!(outcomes(&modify(&app, "demo-bob", &["garbage"], json!({"name": "bobs"})).await), ["NOT_FOUND"]);
    assert!(resp["data"]["modifySessions"]["results"][0]["session"].is_null());
    assert_eq!(detail(&app, "demo-alice", &a).await["name"], "renamed");

    // A finished session's name is free again, and a finished session may be renamed.
    assert_eq!(terminate(&app, "demo-alice", &b).await, "CANCELLED");
    assert_eq!(outcomes(&modify(&app, "demo-alice", &[&a], json!({"name": "second"})).await), ["MODIFIED"]);
    assert_eq!(outcomes(&modify(&app, "demo-alice", &[&b], json!({"name": "old-one"})).await), ["MODIFIED"]);
}

async fn owners_lower_and_administrators_set_priorities(app: TestApp) {
    let a = launch(&app, "demo-alice", "prio-a", 5).await;
    let b = launch(&app, "demo-alice", "prio-b", 5).await;

    // Her own, lowered: both at once.
    let resp = modify(&app, "demo-alice", &[&a, &b], json!({"priority": -5})).await;
    assert_eq!(outcomes(&resp), ["MODIFIED", "MODIFIED"], "{resp}");
    // Raised by her: an administrator's to do.
    let resp = modify(&app, "demo-alice", &[&a], json!({"priority": 10})).await;
    assert_eq!(outcomes(&resp), ["FORBIDDEN"], "{resp}");
    assert_eq!(detail(&app, "demo-alice", &a).await["priority"], -5);
    // Out of the API's bounds: refused as input.
    let resp = modify(&app, "demo-alice", &[&a], json!({"priority": 101})).await;
    assert_eq!((error_codes(&resp), field(&resp)), (vec!["BAD_USER_INPUT".to_owned()], "input.priority"), "{resp}");

    // An administrator of the project sets any, up to the policy's maximum.
    app.db.execute_unprepared("UPDATE keypair_resource_policies SET max_priority = 20").await.expect("policy");
    let resp = modify(&app, "demo-admin", &[&a, "garbage"], json!({"priority": 50})).await;
    assert_eq!(outcomes(&resp), ["PRIORITY_LIMIT", "NOT_FOUND"], "{resp}");
    let resp = modify(&app, "demo-admin", &[&a], json!({"priority": 20})).await;
    assert_eq!(outcomes(&resp), ["MODIFIED"], "{resp}");
    let s = detail(&app, "demo-alice", &a).await;
    assert_eq!(s["priority"], 20);
    assert_eq!(
        notes(&s),
        ["admin@example.com set its priority from -5 to 20", "alice@example.com set its priority from 5 to -5"],
        "her owner sees who changed it, newest first"
    );
    // Another domain's administrator does not see it at all.
    assert_eq!(outcomes(&modify(&app, "demo-carol", &[&a], json!({"priority": 0})).await), ["NOT_FOUND"]);

    // The launch keeps to the policy's maximum too.
    let mut input = launch_input("too-urgent", 1.0);
    input["priority"] = json!(30);
    let resp = app.gql(Some("demo-alice"), LAUNCH, json!({"i": input})).await;
    assert_eq!((error_codes(&resp), field(&resp)), (vec!["BAD_USER_INPUT".to_owned()], "input.priority"), "{resp}");

    // A session that no longer waits keeps its priority.
    assert_eq!(terminate(&app, "demo-alice", &b).await, "CANCELLED");
    assert_eq!(outcomes(&modify(&app, "demo-admin", &[&b], json!({"priority": 1})).await), ["NOT_PENDING"]);
}

/// A rename racing another to the same name: the other's transaction has renamed a session
/// and not yet committed, so this one's check finds the name free and its write meets the
/// unique index (on PostgreSQL; SQLite waits for the lock and then sees it). NAME_TAKEN,
/// never an internal error, and nothing of the loser changes.
async fn a_rename_losing_a_race_is_name_taken(app: TestApp) {
    launch(&app, "demo-alice", "racer-a", 0).await;
    let b = launch(&app, "demo-alice", "racer-b", 0).await;
    let other = app.db.begin().await.expect("begin");
    other.execute_unprepared("UPDATE sessions SET name = 'the-winner' WHERE name = 'racer-a'").await.expect("rename");
    let ids = [b.as_str()];
    let (resp, ()) = tokio::join!(modify(&app, "demo-alice", &ids, json!({"name": "the-winner"})), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        other.commit().await.expect("commit");
    });
    assert_eq!(outcomes(&resp), ["NAME_TAKEN"], "{resp}");
    assert_eq!(detail(&app, "demo-alice", &b).await["name"], "racer-b");
    assert!(notes(&detail(&app, "demo-alice", &b).await).is_empty());
}

db_tests!(
    a_session_is_renamed_under_the_launch_rules,
    owners_lower_and_administrators_set_priorities,
    a_rename_losing_a_race_is_name_taken
);

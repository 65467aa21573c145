//! When a session will be reclaimed: its expiry in the detail and the export, the warning
//! before it, the end at it, and extensions within the policy.

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use sessiond::domain::live::events::EventKind;
use sessiond::domain::model::status::SessionStatus;

use crate::db_tests;
use crate::export::{export, records};
use crate::support::{TestApp, error_codes, launch_input as input, project};

const LAUNCH: &str = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
const DETAIL: &str = "query($id: ID!) { session(id: $id) {
  status statusInfo startedAt
  expiry { at reason extendable extensions extendedSeconds }
  schedulingHistory { edges { node { phase message } } }
} }";
const EXTEND: &str = "mutation($id: ID!, $s: Int!) { extendSession(id: $id, seconds: $s) {
  expiry { at reason extendable extensions extendedSeconds }
} }";

async fn policy(app: &TestApp, lifetime: i64, extension: i64, extensions: i32) {
    app.db
        .execute_unprepared(&format!(
            "UPDATE keypair_resource_policies SET max_session_lifetime_seconds = {lifetime}, \
             max_extension_seconds = {extension}, max_extensions = {extensions}"
        ))
        .await
        .expect("policy");
}

async fn launch(app: &TestApp, token: &str, input: Value) -> String {
    let resp = app.gql(Some(token), LAUNCH, json!({"i": input})).await;
    resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned()
}

async fn detail_when(app: &TestApp, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let resp = app.wait_for("demo-alice", DETAIL, json!({"id": id}), |r| done(&r["data"]["session"])).await;
    resp["data"]["session"].clone()
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).unwrap_or_else(|| panic!("a time: {v}")).into()
}

fn phases(s: &Value) -> Vec<(String, String)> {
    s["schedulingHistory"]["edges"]
        .as_array()
        .expect("history")
        .iter()
        .map(|e| {
            (
                e["node"]["phase"].as_str().unwrap_or("").to_owned(),
                e["node"]["message"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// A 3 s lifetime: the expiry is the start + 3 s (LIFETIME), its owner is warned before the
/// session goes TERMINATING, and it ends with the lifetime's reason.
async fn a_lifetime_is_an_expiry_warned_of_before_it_ends(mut app: TestApp) {
    policy(&app, 3, 60, 1).await;
    let mut events = app.bus.subscribe();
    app.start_workers();
    let id = launch(&app, "demo-alice", input("short-lived", 1.0)).await;
    let running = detail_when(&app, &id, |s| s["status"] == "RUNNING").await;
    let expiry = &running["expiry"];
    assert_eq!(expiry["reason"], "LIFETIME", "{running}");
    assert_eq!(time(&expiry["at"]) - time(&running["startedAt"]), chrono::TimeDelta::seconds(3), "{running}");
    assert_eq!(expiry["extendable"], true);
    let ended = detail_when(&app, &id, |s| s["status"] == "TERMINATED").await;
    assert_eq!(ended["statusInfo"], "max_session_lifetime exceeded");
    let resp = app
        .gql(
            Some("demo-alice"),
            "query($id: ID!) { session(id: $id) { statusTransitions { toStatus actor { kind rule } } } }",
            json!({"id": id}),
        )
        .await;
    let ending = resp["data"]["session"]["statusTransitions"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["toStatus"] == "TERMINATING").cloned())
        .unwrap_or_else(|| panic!("a TERMINATING step: {resp}"));
    assert_eq!(ending["actor"], json!({"kind": "SYSTEM", "rule": "lifetime"}), "the lifetime's rule ended it");
    assert_eq!(ended["expiry"], Value::Null, "an ended session has no expiry");

    let uuid = crate::local_runtime::session_uuid(&id);
    let mut seen = Vec::new();
    while let Ok(Ok(e)) = tokio::time::timeout(std::time::Duration::from_secs(5), events.recv()).await {
        if e.session.id.to_string() == uuid {
            seen.push((e.kind, e.to, e.reason.clone()));
            if e.to == SessionStatus::Terminated {
                break;
            }
        }
    }
    let warning =
        seen.iter().position(|(k, _, _)| *k == EventKind::ExpiryWarning).unwrap_or_else(|| panic!("{seen:?}"));
    let terminating = seen.iter().position(|(_, to, _)| *to == SessionStatus::Terminating).expect("TERMINATING");
    assert!(warning < terminating, "the warning comes first: {seen:?}");
    assert_eq!(seen.iter().filter(|(k, _, _)| *k == EventKind::ExpiryWarning).count(), 1, "once: {seen:?}");
    let (_, to, reason) = &seen[warning];
    assert_eq!(*to, SessionStatus::Running, "the status stays");
    assert!(reason.as_deref().is_some_and(|r| r.contains("LIFETIME")), "{reason:?}");
    assert!(phases(&ended).iter().any(|(p, m)| p == "expiry-warning" && m.contains("reclaimed at")), "{ended}");
}

/// Extensions push the lifetime back within the policy: one of at most 60 s here; more, or
/// longer, is EXTENSION_LIMIT; another user cannot; a batch timeout cannot be extended. The
/// export's expiry is the detail's.
async fn an_extension_moves_the_expiry_within_the_policy(mut app: TestApp) {
    policy(&app, 600, 60, 1).await;
    app.start_workers();
    let id = launch(&app, "demo-alice", input("extend-me", 1.0)).await;
    let before = detail_when(&app, &id, |s| s["status"] == "RUNNING").await;
    let at = time(&before["expiry"]["at"]);

    let bob = app.gql(Some("demo-bob"), EXTEND, json!({"id": id, "s": 30})).await;
    assert_eq!(error_codes(&bob), ["NOT_FOUND"], "bob cannot extend alice's session: {bob}");
    let long = app.gql(Some("demo-alice"), EXTEND, json!({"id": id, "s": 61})).await;
    assert_eq!(error_codes(&long), ["EXTENSION_LIMIT"], "{long}");
    let zero = app.gql(Some("demo-alice"), EXTEND, json!({"id": id, "s": 0})).await;
    assert_eq!(error_codes(&zero), ["BAD_USER_INPUT"], "{zero}");
    let unchanged = detail_when(&app, &id, |_| true).await;
    assert_eq!(unchanged["expiry"], before["expiry"], "a refused extension changes nothing");

    let extended = app.gql(Some("demo-alice"), EXTEND, json!({"id": id, "s": 60})).await;
    let expiry = &extended["data"]["extendSession"]["expiry"];
    assert_eq!(time(&expiry["at"]) - at, chrono::TimeDelta::seconds(60), "{extended}");
    assert_eq!((expiry["extensions"].clone(), expiry["extendedSeconds"].clone()), (json!(1), json!(60)));
    assert_eq!(expiry["extendable"], false, "one extension is the most");
    let again = app.gql(Some("demo-alice"), EXTEND, json!({"id": id, "s": 1})).await;
    assert_eq!(error_codes(&again), ["EXTENSION_LIMIT"], "{again}");
    let after = detail_when(&app, &id, |_| true).await;
    assert_eq!(after["expiry"], *expiry);
    assert!(
        phases(&after).iter().any(|(p, m)| p == "extend" && m.contains("alice@example.com") && m.contains("60 s")),
        "who extended it is in its history: {after}"
    );

    // The export says what the detail says.
    let (status, _, body) =
        export(&app, Some("demo-alice"), &format!("projectId={}&columns=NAME,EXPIRY", project("default/default")))
            .await;
    assert_eq!(status, 200);
    let rows = records(&body);
    assert_eq!(rows[0], ["Name", "Expires at (UTC)", "Expiry reason"]);
    let row = rows.iter().find(|r| r[0] == "extend-me").expect("the session's row");
    assert_eq!(time(&json!(row[1])), time(&after["expiry"]["at"]).with_nanosecond(0).expect("whole seconds"));
    assert_eq!(row[2], "LIFETIME");

    // A batch session's timeout comes first here, and is no lifetime to extend.
    let mut batch = input("timed", 1.0);
    batch["type"] = json!("BATCH");
    batch["startupCommand"] = json!("sleep 100");
    batch["batchTimeoutSeconds"] = json!(300);
    let batch = launch(&app, "demo-alice", batch).await;
    let timed = detail_when(&app, &batch, |s| s["status"] == "RUNNING").await;
    assert_eq!(timed["expiry"]["reason"], "BATCH_TIMEOUT", "{timed}");
    assert_eq!(time(&timed["expiry"]["at"]) - time(&timed["startedAt"]), chrono::TimeDelta::seconds(300));
    assert_eq!(timed["expiry"]["extendable"], false);
    let refused = app.gql(Some("demo-alice"), EXTEND, json!({"id": batch, "s": 30})).await;
    assert_eq!(error_codes(&refused), ["EXTENSION_LIMIT"], "{refused}");
}

use chrono::Timelike;

/// Finding (issue 46): renames, priorities, extensions and exemptions recorded history but
/// sent no event, so live clients never saw them. Each is now a MODIFIED event, once, with
/// who made it, and the session as it now is.
async fn every_change_of_a_session_is_an_event_with_its_actor(mut app: TestApp) {
    use crate::support::ws::Ws;
    policy(&app, 600, 60, 1).await;
    let addr = app.serve().await;
    let from = app.last_cursor().await;
    let mut ws = Ws::open(addr, "demo-admin").await;
    ws.subscribe(
        "e",
        "subscription($p: ID!, $after: String) { sessionEvents(projectId: $p, scope: PROJECT, after: $after) {
           kind sessionId toStatus reason actor { kind user { email } } session { name priority exemptIdle } } }",
        json!({"p": project("default/default"), "after": from}),
    )
    .await;
    const MODIFY: &str = "mutation($ids: [ID!]!, $m: ModifySessionInput!) {
      modifySessions(ids: $ids, input: $m) { results { outcome } } }";
    // A waiting session reprioritised (no workers yet: it waits).
    let waiting = launch(&app, "demo-alice", input("waits", 1.0)).await;
    let resp = app.gql(Some("demo-alice"), MODIFY, json!({"ids": [waiting], "m": {"priority": -5}})).await;
    assert_eq!(resp["data"]["modifySessions"]["results"][0]["outcome"], "MODIFIED", "{resp}");
    // A running one renamed, extended and exempted.
    app.start_workers();
    let id = launch(&app, "demo-alice", input("runs", 1.0)).await;
    detail_when(&app, &id, |s| s["status"] == "RUNNING").await;
    let resp = app.gql(Some("demo-alice"), MODIFY, json!({"ids": [id], "m": {"name": "renamed"}})).await;
    assert_eq!(resp["data"]["modifySessions"]["results"][0]["outcome"], "MODIFIED", "{resp}");
    let resp = app.gql(Some("demo-alice"), EXTEND, json!({"id": id, "s": 30})).await;
    assert!(resp["errors"].is_null(), "{resp}");
    let resp = app
        .gql(
            Some("demo-admin"),
            "mutation($id: ID!) { exemptFromIdle(id: $id, exempt: true) { id } }",
            json!({"id": id}),
        )
        .await;
    assert!(resp["errors"].is_null(), "{resp}");
    // The same again changes nothing, and says nothing.
    let resp = app.gql(Some("demo-alice"), MODIFY, json!({"ids": [id], "m": {"name": "renamed"}})).await;
    assert_eq!(resp["data"]["modifySessions"]["results"][0]["outcome"], "UNCHANGED", "{resp}");
    // A last status change closes the feed's part of the test.
    crate::support::terminate(&app, "demo-alice", &id).await;
    let mut modified = Vec::new();
    loop {
        let e = ws.next_event("e").await;
        if e["kind"] == "MODIFIED" {
            modified.push(e.clone());
        }
        if e["sessionId"] == json!(id) && e["toStatus"] == "TERMINATING" {
            break;
        }
    }
    let said: Vec<(String, String, String)> = modified
        .iter()
        .map(|e| {
            let reason = e["reason"].as_str().unwrap_or_default();
            let what = ["priority", "renamed", "extended", "exempted"].iter().find(|w| reason.contains(*w));
            (
                what.map(|w| (*w).to_owned()).unwrap_or_else(|| reason.to_owned()),
                e["actor"]["user"]["email"].as_str().unwrap_or_default().to_owned(),
                e["toStatus"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("priority", "alice@example.com", "PENDING"),
        ("renamed", "alice@example.com", "RUNNING"),
        ("extended", "alice@example.com", "RUNNING"),
        ("exempted", "admin@example.com", "RUNNING"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(said, expected, "{modified:#?}");
    assert!(modified.iter().all(|e| e["actor"]["kind"] == "USER"), "{modified:#?}");
    assert_eq!(modified[0]["session"]["priority"], -5, "the session as it now is");
    assert_eq!(modified[1]["session"]["name"], "renamed");
    assert_eq!(modified[3]["session"]["exemptIdle"], true);
}

db_tests!(
    a_lifetime_is_an_expiry_warned_of_before_it_ends,
    an_extension_moves_the_expiry_within_the_policy,
    every_change_of_a_session_is_an_event_with_its_actor,
);

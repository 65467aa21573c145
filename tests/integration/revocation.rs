//! Revocation reaches open connections: a revoked token's WebSocket is closed with 4403
//! within seconds and its subscriptions end; a membership lost through `sessiond apply`
//! ends the subscriptions it allowed, and leaves the others; an owner removed from a
//! project may still read and terminate his sessions there, and nothing more.

use std::time::Duration;

use serde_json::json;

use sessiond::domain::directory::apply::{self, Options, Source};

use crate::db_tests;
use crate::support::ws::{EVENTS, TRANSPORT_WS, Ws, codes};
use crate::support::{TestApp, error_codes, launch_input, project};

async fn a_revoked_token_closes_its_connections(mut app: TestApp) {
    let addr = app.serve().await;
    let (token, access_key) =
        sessiond::domain::directory::auth::create_token(&app.db, "alice@example.com", None).await.expect("a token");
    let mut ws = Ws::open(addr, &token).await;
    let p = project("default/default");
    ws.subscribe("s", EVENTS, json!({"p": p, "after": app.last_cursor().await})).await;
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    ws.subscribe("m", launch, json!({"i": launch_input("before-revoke", 0.5)})).await;
    // The mutation's answer and the event of its launch, in either order.
    let mut types = Vec::new();
    while types.len() < 3 {
        let m = ws.recv().await;
        types.push(format!("{}:{}", m["type"].as_str().unwrap_or("?"), m["id"].as_str().unwrap_or("?")));
    }
    types.sort();
    assert_eq!(types, ["complete:m", "next:m", "next:s"]);

    assert!(sessiond::domain::directory::auth::revoke_token(&app.db, &access_key).await.expect("revoke"));
    // A mutation sent at once is refused, as over HTTP, whatever the cache still holds.
    ws.subscribe("late", launch, json!({"i": launch_input("after-revoke", 0.5)})).await;
    // Within seconds, whatever the connection does meanwhile.
    let (code, reason) = tokio::time::timeout(Duration::from_secs(10), ws.closed()).await.expect("closed in time");
    assert_eq!(code, 4403, "{reason}");
    // Nothing more runs for that token: a new connection, and HTTP, are refused too.
    let mut again = Ws::connect(addr, Some(TRANSPORT_WS)).await;
    again.send(json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {token}")}})).await;
    assert_eq!(again.closed().await.0, 4403);
    let resp = app.gql(Some(&token), "{ viewer { user { email } } }", json!({})).await;
    assert_eq!(error_codes(&resp), ["UNAUTHENTICATED"]);
    let sessions = app
        .gql(
            Some("demo-alice"),
            "query($p: ID!) { sessions(projectId: $p) { edges { node { name } } } }",
            json!({"p": p}),
        )
        .await;
    assert_eq!(sessions.to_string().matches("before-revoke").count(), 1, "{sessions}");
    assert_eq!(sessions.to_string().matches("after-revoke").count(), 0, "{sessions}");
}

async fn a_lost_membership_ends_the_subscriptions_it_allowed(mut app: TestApp) {
    let addr = app.serve().await;
    let research = project("default/research");
    let default = project("default/default");
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.subscribe("research", EVENTS, json!({"p": research, "after": app.last_cursor().await})).await;
    ws.subscribe("default", EVENTS, json!({"p": default, "after": app.last_cursor().await})).await;
    ws.send(json!({"type": "ping"})).await;
    assert_eq!(ws.recv().await["type"], "pong");
    remove_alice_from_research(&app).await;
    let m = tokio::time::timeout(Duration::from_secs(10), ws.recv()).await.expect("ended within seconds");
    assert_eq!((m["type"].as_str(), m["id"].as_str()), (Some("error"), Some("research")), "{m}");
    assert_eq!(codes(m["payload"].as_array().expect("errors")), ["NOT_FOUND"], "{m}");
    // The other goes on.
    let resp = app
        .gql(
            Some("demo-alice"),
            "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }",
            json!({"i": launch_input("still-here", 0.5)}),
        )
        .await;
    let id = resp["data"]["launchSession"]["session"]["id"].clone();
    assert_eq!(ws.next_event("default").await["sessionId"], id);
}

/// Alice without project research: the declaration that removes her.
async fn remove_alice_from_research(app: &TestApp) {
    let text = apply::DEMO.replacen(
        "[users.\"alice@example.com\"]\ndomain = \"default\"\nprojects = [\"default\", \"research\"]",
        "[users.\"alice@example.com\"]\ndomain = \"default\"\nprojects = [\"default\"]",
        1,
    );
    assert_ne!(text, apply::DEMO, "the demo declares alice as this test expects");
    let slots = apply::known_slots(&app.db).await.expect("slots");
    let declared = apply::file::parse(&[Source { name: "demo.toml".to_owned(), text }], &slots).expect("valid");
    apply::apply(&app.db, &declared, Options::default()).await.expect("apply");
}

/// An owner removed from a project reads his sessions there and may terminate them (what he
/// started stays his to stop); renaming, reprioritising, extending, exemption and following
/// their logs or use are NOT_FOUND, as for a session that does not exist, and the feeds he
/// had open end as `sessionEvents` ends.
async fn an_ex_member_may_read_and_terminate_only(mut app: TestApp) {
    let addr = app.serve().await;
    let mut input = launch_input("left-behind", 0.5);
    input["projectId"] = json!(project("default/research"));
    let launch = "mutation($i: LaunchSessionInput!) { launchSession(input: $i) { session { id } } }";
    let resp = app.gql(Some("demo-alice"), launch, json!({"i": input})).await;
    let id = resp["data"]["launchSession"]["session"]["id"].as_str().unwrap_or_else(|| panic!("{resp}")).to_owned();
    let logs = "subscription($id: ID!) { sessionLogs(sessionId: $id, tail: 0) }";
    let usage = "subscription($id: ID!) { sessionUtilization(sessionId: $id) { sampledAt } }";
    let mut ws = Ws::open(addr, "demo-alice").await;
    ws.subscribe("logs", logs, json!({"id": id})).await;
    ws.subscribe("use", usage, json!({"id": id})).await;
    ws.send(json!({"type": "ping"})).await;
    assert_eq!(ws.recv().await["type"], "pong");

    remove_alice_from_research(&app).await;
    let mut ended = Vec::new();
    for _ in 0..2 {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.recv()).await.expect("ended within seconds");
        assert_eq!(m["type"], "error", "{m}");
        assert_eq!(codes(m["payload"].as_array().expect("errors")), ["NOT_FOUND"], "{m}");
        ended.push(m["id"].as_str().expect("id").to_owned());
    }
    ended.sort();
    assert_eq!(ended, ["logs", "use"]);
    // New feeds are refused as for a session that does not exist.
    for (name, query) in [("logs-again", logs), ("use-again", usage)] {
        ws.subscribe(name, query, json!({"id": id})).await;
        assert_eq!(codes(&ws.error_of(name).await), ["NOT_FOUND"], "{name}");
    }
    let refused = [
        ("mutation($id: ID!) { modifySessions(ids: [$id], input: {name: \"renamed\"}) { results { outcome } } }", true),
        ("mutation($id: ID!) { modifySessions(ids: [$id], input: {priority: -1}) { results { outcome } } }", true),
        ("mutation($id: ID!) { extendSession(id: $id, seconds: 60) { id } }", false),
        ("mutation($id: ID!) { exemptFromIdle(id: $id, exempt: true) { id } }", false),
    ];
    for (query, outcome) in refused {
        let resp = app.gql(Some("demo-alice"), query, json!({"id": id})).await;
        if outcome {
            assert_eq!(resp["data"]["modifySessions"]["results"][0]["outcome"], "NOT_FOUND", "{query}: {resp}");
        } else {
            assert_eq!(error_codes(&resp), ["NOT_FOUND"], "{query}: {resp}");
        }
    }
    // Reading and terminating stay his.
    let resp =
        app.gql(Some("demo-alice"), "query($id: ID!) { session(id: $id) { name priority } }", json!({"id": id})).await;
    assert_eq!(resp["data"]["session"], json!({"name": "left-behind", "priority": 0}), "{resp}");
    assert_eq!(crate::support::terminate(&app, "demo-alice", &id).await, "CANCELLED");
}

db_tests!(
    a_revoked_token_closes_its_connections,
    a_lost_membership_ends_the_subscriptions_it_allowed,
    an_ex_member_may_read_and_terminate_only
);
